// zen-schedule-overlap: stream, priority and issue order of every collective.
// RUN: zenopt-opt %S/Inputs/mlp.mlir --zen-insert-grad-sync --zen-fuse-gradients=strategy=wfbp --zen-decompose="split=all chunks=1" --zen-schedule-overlap=streams=2 | FileCheck %s
// RUN: zenopt-opt %S/Inputs/mlp.mlir --zen-insert-grad-sync --zen-fuse-gradients=strategy=wfbp --zen-decompose="split=all chunks=1" --zen-schedule-overlap=streams=1 | FileCheck %s --check-prefix=ONE

// Reduce-scatters go out in ready order on stream 0; the decoupled all-gathers
// follow on stream 1 in the order the next forward needs them (fc1 first).
// CHECK-LABEL: func.func @train_step
// CHECK: %[[RS0:.*]] = zen.reduce_scatter avg %{{.*}} {{.*}}bucket = 0 {{.*}}schedule = #zen.schedule<stream = 0, priority = 0, order = 0>
// CHECK-NEXT: zen.all_gather %[[RS0]] {bucket = 0 {{.*}}decoupled{{.*}}schedule = #zen.schedule<stream = 1, priority = 5, order = 5>
// CHECK: %[[RS1:.*]] = zen.reduce_scatter avg %{{.*}} {{.*}}bucket = 1 {{.*}}schedule = #zen.schedule<stream = 0, priority = 1, order = 1>
// CHECK-NEXT: zen.all_gather %[[RS1]] {{.*}}schedule = #zen.schedule<stream = 1, priority = 4, order = 4>
// CHECK: %[[RS2:.*]] = zen.reduce_scatter avg %{{.*}} {{.*}}bucket = 2 {{.*}}schedule = #zen.schedule<stream = 0, priority = 2, order = 2>
// CHECK-NEXT: zen.all_gather %[[RS2]] {{.*}}schedule = #zen.schedule<stream = 1, priority = 3, order = 3>

// ONE-LABEL: func.func @train_step
// ONE-COUNT-6: schedule = #zen.schedule<stream = 0,

// In place: streams and priorities change on the existing collectives; no op is replaced.
// RUN: zenopt-opt %s --zen-schedule-overlap=streams=2 | FileCheck %s --check-prefix=LOCAL
// LOCAL-LABEL: func.func @train_step
// LOCAL: %[[B0:.*]] = zen.pack
// LOCAL-NEXT: zen.all_reduce avg %[[B0]] {bucket = 0 : i64, {{.*}}schedule = #zen.schedule<stream = 0, priority = 0, order = 0>}
// LOCAL: %[[B1:.*]] = zen.pack
// LOCAL-NEXT: zen.all_reduce avg %[[B1]] {bucket = 1 : i64, {{.*}}schedule = #zen.schedule<stream = 0, priority = 1, order = 1>, test.untouched}
module attributes {zen.cluster = "a100x8"} {
  func.func @train_step(%arg0: tensor<64xf32>) {
    %0 = zen.param "w0" : tensor<1024xf32>
    %1 = zen.param "w1" : tensor<4096xf32>
    %2 = zen.param "w2" : tensor<256xf32>
    %3 = zen.compute "Mul" forward(%arg0, %0) {bytes = 8192 : i64, flops = 4096 : i64} : (tensor<64xf32>, tensor<1024xf32>) -> tensor<64xf32>
    %4 = zen.compute "MulGrad" backward(%3) {bytes = 2048 : i64, flops = 512 : i64} : (tensor<64xf32>) -> tensor<256xf32>
    %5 = zen.gradient %2, %4 {ready_order = 0 : i64} : tensor<256xf32>
    %6 = zen.compute "MulGrad" backward(%3) {bytes = 32768 : i64, flops = 8192 : i64} : (tensor<64xf32>) -> tensor<4096xf32>
    %7 = zen.gradient %1, %6 {ready_order = 1 : i64} : tensor<4096xf32>
    %8 = zen.pack %5, %7 {bucket = 0 : i64} : tensor<256xf32>, tensor<4096xf32> -> tensor<4352xf32>
    %9 = zen.all_reduce avg %8 {bucket = 0 : i64, group = #zen.group<size = 8, nodes = 1>, schedule = #zen.schedule<stream = 0, priority = 0, order = 0>} : tensor<4352xf32>
    %10:2 = zen.unpack %9 {bucket = 0 : i64} : tensor<4352xf32> -> tensor<256xf32>, tensor<4096xf32>
    %11 = zen.compute "MulGrad" backward(%3) {bytes = 8192 : i64, flops = 2048 : i64} : (tensor<64xf32>) -> tensor<1024xf32>
    %12 = zen.gradient %0, %11 {ready_order = 2 : i64} : tensor<1024xf32>
    %13 = zen.pack %12 {bucket = 1 : i64} : tensor<1024xf32> -> tensor<1024xf32>
    %14 = zen.all_reduce avg %13 {bucket = 1 : i64, group = #zen.group<size = 8, nodes = 1>, schedule = #zen.schedule<stream = 0, priority = 1, order = 1>, test.untouched} : tensor<1024xf32>
    %15 = zen.unpack %14 {bucket = 1 : i64} : tensor<1024xf32> -> tensor<1024xf32>
    %16 = zen.compute "SGD" optimizer(%2, %10#0) {bytes = 5120 : i64, flops = 768 : i64, node = "sgd.w2"} : (tensor<256xf32>, tensor<256xf32>) -> tensor<256xf32>
    %17 = zen.compute "SGD" optimizer(%1, %10#1) {bytes = 81920 : i64, flops = 12288 : i64, node = "sgd.w1"} : (tensor<4096xf32>, tensor<4096xf32>) -> tensor<4096xf32>
    %18 = zen.compute "SGD" optimizer(%0, %15) {bytes = 20480 : i64, flops = 3072 : i64, node = "sgd.w0"} : (tensor<1024xf32>, tensor<1024xf32>) -> tensor<1024xf32>
    return
  }
}

// zen-fuse-gradients: per-gradient all_reduces become pack -> all_reduce -> unpack per bucket.
// RUN: zenopt-opt %S/Inputs/mlp.mlir --zen-insert-grad-sync --zen-fuse-gradients="strategy=manual buckets=1,2" | FileCheck %s --check-prefix=MANUAL
// RUN: zenopt-opt %S/Inputs/mlp.mlir --zen-insert-grad-sync --zen-fuse-gradients=strategy=horovod | FileCheck %s --check-prefix=HOROVOD
// RUN: zenopt-opt %S/Inputs/mlp.mlir --zen-insert-grad-sync --zen-fuse-gradients=strategy=ddp | FileCheck %s --check-prefix=DDP
// RUN: zenopt-opt %S/Inputs/mlp.mlir --zen-insert-grad-sync --zen-fuse-gradients="strategy=threshold threshold-bytes=4000000" | FileCheck %s --check-prefix=THRESHOLD
// RUN: zenopt-opt %S/Inputs/mlp.mlir --zen-insert-grad-sync --zen-fuse-gradients=strategy=nooverlap | FileCheck %s --check-prefix=NOOVERLAP

// MANUAL-LABEL: module attributes {{{.*}}zen.strategy = "manual"
// MANUAL: %[[G2:.*]] = zen.gradient
// MANUAL-NEXT: %[[B0:.*]] = zen.pack %[[G2]] {bucket = 0 : i64} : tensor<1024x16xf32> -> tensor<16384xf32>
// MANUAL-NEXT: %[[R0:.*]] = zen.all_reduce avg %[[B0]] {bucket = 0 : i64, {{.*}}} : tensor<16384xf32>
// MANUAL-NEXT: %[[U0:.*]] = zen.unpack %[[R0]] {bucket = 0 : i64} : tensor<16384xf32> -> tensor<1024x16xf32>
// MANUAL: %[[G1:.*]] = zen.gradient
// MANUAL-NOT: zen.all_reduce
// MANUAL: %[[G0:.*]] = zen.gradient
// MANUAL-NEXT: %[[B1:.*]] = zen.pack %[[G1]], %[[G0]] {bucket = 1 : i64} : tensor<1024x1024xf32>, tensor<1024x1024xf32> -> tensor<2097152xf32>
// MANUAL-NEXT: %[[R1:.*]] = zen.all_reduce avg %[[B1]] {bucket = 1 : i64
// MANUAL-NEXT: %[[U1:.*]]:2 = zen.unpack %[[R1]] {bucket = 1 : i64}
// MANUAL-NEXT: zen.compute "SGD" optimizer(%{{.*}}, %[[U0]])
// MANUAL-NEXT: zen.compute "SGD" optimizer(%{{.*}}, %[[U1]]#0)
// MANUAL-NEXT: zen.compute "SGD" optimizer(%{{.*}}, %[[U1]]#1)

// The 64 MiB buffer holds all three gradients (8.4 MB).
// HOROVOD-COUNT-1: zen.pack {{.*}} {bucket = 0 : i64} : tensor<1024x16xf32>, tensor<1024x1024xf32>, tensor<1024x1024xf32> -> tensor<2113536xf32>
// HOROVOD-NOT: zen.pack

// DDP's first bucket closes at 1 MiB: fc3 (64 KiB) and fc2 (4 MiB) fill it; fc1 starts the 25 MiB bucket.
// DDP: zen.pack {{.*}} {bucket = 0 : i64} : tensor<1024x16xf32>, tensor<1024x1024xf32> ->
// DDP: zen.pack {{.*}} {bucket = 1 : i64} : tensor<1024x1024xf32> ->

// THRESHOLD: zen.pack {{.*}} {bucket = 0 : i64} : tensor<1024x16xf32>, tensor<1024x1024xf32> ->
// THRESHOLD: zen.pack {{.*}} {bucket = 1 : i64} : tensor<1024x1024xf32> ->

// No overlap: every collective waits for the end of backward.
// NOOVERLAP: zen.gradient {{.*}} {ready_order = 2 : i64}
// NOOVERLAP-COUNT-3: zen.all_reduce avg {{.*}}after_backward

// Local rewrite on inline IR (buckets [w2, w1] and [w0]): splitting the first
// bucket rebuilds only its ops; bucket [w0] keeps its ops (the marker stays).
// RUN: zenopt-opt %s --zen-fuse-gradients="strategy=manual buckets=1,1,1" | FileCheck %s --check-prefix=LOCAL
// LOCAL-LABEL: func.func @train_step
// LOCAL: %[[G2:.*]] = zen.gradient %{{.*}} {ready_order = 0 : i64}
// LOCAL-NEXT: %[[P0:.*]] = zen.pack %[[G2]] {bucket = 0 : i64}
// LOCAL-NEXT: %[[R0:.*]] = zen.all_reduce avg %[[P0]] {bucket = 0 : i64
// LOCAL-NEXT: %[[U0:.*]] = zen.unpack %[[R0]] {bucket = 0 : i64}
// LOCAL: %[[G1:.*]] = zen.gradient %{{.*}} {ready_order = 1 : i64}
// LOCAL-NEXT: %[[P1:.*]] = zen.pack %[[G1]] {bucket = 1 : i64}
// LOCAL: %[[R2:.*]] = zen.all_reduce avg %{{.*}} {bucket = 2 : i64, {{.*}}, test.untouched}
// LOCAL-NEXT: %[[U2:.*]] = zen.unpack %[[R2]] {bucket = 2 : i64}
// LOCAL: zen.compute "SGD" optimizer(%{{.*}}, %[[U0]])
// LOCAL: zen.compute "SGD" optimizer(%{{.*}}, %[[U2]])
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

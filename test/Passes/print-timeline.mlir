// zen-print-timeline: every simulated task with its start and end.
// RUN: zenopt-opt %S/Inputs/mlp.mlir --zen-insert-grad-sync --zen-fuse-gradients="strategy=manual buckets=1,2" --zen-print-timeline -o /dev/null | FileCheck %s
// RUN: zenopt-opt %S/Inputs/mlp.mlir --zen-print-timeline -o /dev/null | FileCheck %s --check-prefix=COMPUTE

// Forward segments start where a parameter is first read, backward segments
// end where a gradient becomes ready; bucket 0 starts when fc3's gradient is
// ready, each optimizer step when its all-reduce is done.
// CHECK-LABEL: task fwd.fc1 start 0.000
// CHECK-SAME: end [[F1:[0-9.]+]]
// CHECK-NEXT: task fwd.fc2 start [[F1]] end [[F2:[0-9.]+]]
// CHECK-NEXT: task fwd.fc3 start [[F2]] end [[F3:[0-9.]+]]
// CHECK-NEXT: task bwd.fc3 start [[F3]] end [[B3:[0-9.]+]]
// CHECK-NEXT: task bwd.fc2 start [[B3]] end [[B2:[0-9.]+]]
// CHECK-NEXT: task bwd.relu1 start [[B2]] end [[B1:[0-9.]+]]
// CHECK-NEXT: task all_reduce.b0 start [[B3]] end [[R0:[0-9.]+]]
// CHECK-NEXT: task optimizer.b0 start [[R0]] end
// CHECK-NEXT: task all_reduce.b1 start {{[0-9.]+}} end [[R1:[0-9.]+]]
// CHECK-NEXT: task optimizer.b1 start [[R1]] end [[END:[0-9.]+]]
// CHECK-NEXT: iteration [[END]] compute

// COMPUTE-LABEL: task fwd.fc1 start 0.000
// COMPUTE-NOT: all_reduce
// COMPUTE: iteration

// RUN: zenopt-opt %s --zen-print-timeline -o /dev/null | FileCheck %s --check-prefix=LOCAL
// LOCAL: task bwd.{{.*}} start
// LOCAL: task all_reduce.b0 start
// LOCAL: task all_reduce.b1 start
// LOCAL: iteration
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

// zen-autotune: the joint search; records the strategy, predictions and baselines.
// RUN: zenopt-opt %S/Inputs/mlp.mlir --zen-autotune | FileCheck %s
// RUN: zenopt-opt %S/Inputs/mlp.mlir --zen-autotune="strategy=wfbp cluster=a100x8" | FileCheck %s --check-prefix=WFBP
// RUN: zenopt-opt %S/Inputs/mlp.mlir --zen-autotune="strategy=manual buckets=2,1 dp=8" | FileCheck %s --check-prefix=MANUAL
// Compression allowed: still a valid, re-parsable plan.
// RUN: zenopt-opt %S/Inputs/mlp.mlir --zen-autotune="compressor=fp16,topk:0.01,powersgd:2 dp=16" | zenopt-opt | FileCheck %s --check-prefix=COMPRESSED
// Autotune on already-synchronised IR replaces the plan.
// RUN: zenopt-opt %S/Inputs/mlp.mlir --zen-insert-grad-sync --zen-fuse-gradients=strategy=wfbp --zen-autotune | FileCheck %s

// CHECK: module attributes {zen.baselines = [#zen.baseline<name = "ddp", iteration_us = {{[-+.e0-9]+}} : f64>, #zen.baseline<name = "horovod", iteration_us = {{[-+.e0-9]+}} : f64>, #zen.baseline<name = "mgwfbp", iteration_us = {{[-+.e0-9]+}} : f64>, #zen.baseline<name = "nooverlap", iteration_us = {{[-+.e0-9]+}} : f64>, #zen.baseline<name = "wfbp", iteration_us = {{[-+.e0-9]+}} : f64>]
// CHECK-SAME: zen.cluster = "a100x64"
// CHECK-SAME: zen.predicted = #zen.prediction<iteration_us = {{[-+.e0-9]+}} : f64, compute_us = {{[-+.e0-9]+}} : f64, exposed_comm_us = {{[-+.e0-9]+}} : f64, lower_bound_us = {{[-+.e0-9]+}} : f64>
// CHECK-SAME: zen.strategy = "auto", zen.world_size = 64 : i64
// CHECK-LABEL: func.func @train_step
// CHECK: zen.pack
// CHECK-SAME: {bucket = 0 : i64}
// CHECK: zen.compute "SGD" optimizer
// CHECK-COUNT-2: zen.compute "SGD" optimizer
// CHECK-NEXT: return

// WFBP: zen.cluster = "a100x8"
// WFBP-SAME: zen.strategy = "wfbp", zen.world_size = 8 : i64
// WFBP-COUNT-3: zen.all_reduce avg {{.*}}group = #zen.group<size = 8, nodes = 1>

// MANUAL: zen.strategy = "manual", zen.world_size = 8 : i64
// MANUAL: zen.pack {{.*}} {bucket = 0 : i64} : tensor<1024x16xf32>, tensor<1024x1024xf32> ->
// MANUAL: zen.pack {{.*}} {bucket = 1 : i64} : tensor<1024x1024xf32> ->

// COMPRESSED: zen.strategy = "auto", zen.world_size = 16 : i64
// COMPRESSED-COUNT-3: zen.compute "SGD" optimizer

// On inline IR already bucketed: autotune applies its plan with the same bucket rewrites.
// RUN: zenopt-opt %s --zen-autotune | FileCheck %s --check-prefix=LOCAL
// LOCAL: zen.predicted = #zen.prediction<
// LOCAL-SAME: zen.strategy = "auto", zen.world_size = 8 : i64
// LOCAL-LABEL: func.func @train_step
// LOCAL: %[[B:.*]] = zen.pack
// LOCAL-NEXT: %[[R:.*]] = zen.all_reduce avg %[[B]] {bucket = 0 : i64
// LOCAL: zen.compute "SGD" optimizer
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

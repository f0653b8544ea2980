// zen-autotune: the joint search; records the strategy, predictions and baselines.
// RUN: zenopt-opt %S/Inputs/mlp.mlir --zen-autotune | FileCheck %s
// RUN: zenopt-opt %S/Inputs/mlp.mlir --zen-autotune="strategy=wfbp cluster=a100x8" | FileCheck %s --check-prefix=WFBP
// RUN: zenopt-opt %S/Inputs/mlp.mlir --zen-autotune="strategy=manual buckets=2,1 dp=8" | FileCheck %s --check-prefix=MANUAL
// Compression allowed: still a valid, re-parsable plan.
// RUN: zenopt-opt %S/Inputs/mlp.mlir --zen-autotune="compressor=fp16,topk:0.01,powersgd:2 dp=16" | zenopt-opt | FileCheck %s --check-prefix=COMPRESSED
// Autotune on already-synchronised IR replaces the plan.
// RUN: zenopt-opt %S/Inputs/mlp.mlir --zen-insert-grad-sync --zen-fuse-gradients=strategy=wfbp --zen-autotune | FileCheck %s

// CHECK: module attributes {zen.baselines = {ddp = {{[-+.e0-9]+}} : f64, horovod = {{[-+.e0-9]+}} : f64, mgwfbp = {{[-+.e0-9]+}} : f64, nooverlap = {{[-+.e0-9]+}} : f64, wfbp = {{[-+.e0-9]+}} : f64}
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

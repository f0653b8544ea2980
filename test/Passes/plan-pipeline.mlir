// zen-plan-pipeline plans as `zenopt MODEL.onnx` does: the same module as zen-autotune with
// the same options.
// RUN: zenopt-opt %S/Inputs/mlp.mlir --zen-plan-pipeline="cluster=a100x8 strategy=ddp" > %t.pipeline
// RUN: zenopt-opt %S/Inputs/mlp.mlir --zen-autotune="cluster=a100x8 strategy=ddp" > %t.autotune
// RUN: diff %t.pipeline %t.autotune
// RUN: FileCheck %s < %t.pipeline
// CHECK: zen.cluster = "a100x8"
// CHECK-SAME: zen.strategy = "ddp"
// CHECK-LABEL: func.func @train_step
// CHECK: %[[B:.*]] = zen.pack
// CHECK-NEXT: zen.all_reduce avg %[[B]] {bucket = 0 : i64

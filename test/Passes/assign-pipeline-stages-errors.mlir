// RUN: zenopt-opt %s -split-input-file --zen-assign-pipeline-stages=pp=2 -verify-diagnostics
// RUN: not zenopt-opt %S/Inputs/toy-transformer.mlir --zen-assign-pipeline-stages=pp=3 -o /dev/null 2>&1 | FileCheck %s --check-prefix=TOO-MANY
// RUN: not zenopt-opt %S/Inputs/toy-transformer.mlir --zen-assign-pipeline-stages="pp=2 stage-layers=1,2" -o /dev/null 2>&1 | FileCheck %s --check-prefix=SUM
// RUN: not zenopt-opt %S/Inputs/toy-transformer.mlir --zen-assign-pipeline-stages="pp=2 stage-layers=2" -o /dev/null 2>&1 | FileCheck %s --check-prefix=COUNT
// An integer value computed from one stage's data and read on another (an ArgMax of block 0 feeding
// block 1's Reshape; a Shape is recomputed instead, assign-pipeline-stages.mlir):
// RUN: sed -e 's|^\(    %%b0_heads = .*\)$|\1\n    %%index = zen.compute "ArgMax" forward(%%b0_qkvb) {node = "b0.attn/ArgMax", flops = 96 : i64, bytes = 16 : i64} : (tensor<4x24xf32>) -> tensor<2xi64>|' -e 's|zen.compute "Reshape" forward(%%b1_qkvb) {\(.*\)} : (tensor<4x24xf32>)|zen.compute "Reshape" forward(%%b1_qkvb, %%index) {\1} : (tensor<4x24xf32>, tensor<2xi64>)|' %S/Inputs/toy-transformer.mlir | not zenopt-opt --zen-assign-pipeline-stages=pp=2 -o /dev/null 2>&1 | FileCheck %s --check-prefix=INTEGER
// INTEGER: error: a 'tensor<2xi64>' computed on stage 0 is read on stage 1, but zen.send carries floating-point tensors only
// TOO-MANY: error: pp = 3 exceeds the 2 transformer blocks
// SUM: error: stage-layers [1, 2] must give each of the 2 stages at least one block and add up to the 2 blocks
// COUNT: error: stage-layers [2] must give each of the 2 stages at least one block and add up to the 2 blocks

// Gradient synchronisation already planned.
// expected-error @+1 {{zen-assign-pipeline-stages runs before gradient synchronisation: run it before zen-autotune / zen-insert-grad-sync}}
module {
  func.func @train_step(%x: tensor<4xf32>) {
    %w = zen.param "w" : tensor<4xf32>
    %y = zen.compute "Mul" forward(%x, %w) {flops = 4 : i64, bytes = 48 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %dw = zen.compute "MulGrad" backward(%y) {flops = 4 : i64, bytes = 48 : i64} : (tensor<4xf32>) -> tensor<4xf32>
    %g = zen.gradient %w, %dw {ready_order = 0 : i64} : tensor<4xf32>
    %r = zen.all_reduce avg %g {group = #zen.group<size = 2, nodes = 1>, bucket = 0 : i64} : tensor<4xf32>
    return
  }
}

// -----

// expected-error @+1 {{pipeline stages need a recognised transformer: no transformer block}}
module {
  func.func @train_step(%x: tensor<4x8xf32>) {
    %w = zen.param "w" : tensor<8x8xf32>
    %y = zen.compute "MatMul" forward(%x, %w) {flops = 512 : i64, bytes = 512 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    return
  }
}

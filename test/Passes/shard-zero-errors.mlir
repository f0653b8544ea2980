// RUN: zenopt-opt %s -split-input-file --zen-shard-zero="zero=3 dp=2" -verify-diagnostics
// RUN: not zenopt-opt %S/Inputs/toy-transformer.mlir --zen-autotune=dp=2 --zen-shard-zero="zero=2 dp=4" -o /dev/null 2>&1 | FileCheck %s --check-prefix=GROUP
// RUN: not zenopt-opt %S/Inputs/toy-transformer.mlir --zen-autotune=dp=2 --zen-shard-zero=zero=4 -o /dev/null 2>&1 | FileCheck %s --check-prefix=STAGE
// RUN: not zenopt-opt %S/Inputs/toy-transformer.mlir --zen-autotune="dp=2 compressor=fp16 strategy=ddp" --zen-place-compression="compressor=fp16 mode=all" --zen-shard-zero=zero=2 -o /dev/null 2>&1 | FileCheck %s --check-prefix=COMPRESSED
// RUN: not zenopt-opt %S/Inputs/toy-transformer.mlir --zen-autotune=dp=2 --zen-shard-zero=zero=2 --zen-shard-zero=zero=2 -o /dev/null 2>&1 | FileCheck %s --check-prefix=TWICE
// GROUP: error: dp = 4 differs from the 2 ranks the gradients are synchronised over
// STAGE: error: zero stage must be 0, 1, 2 or 3, got 4
// COMPRESSED: error: zen-shard-zero: bucket 0 is compressed; ZeRO reduce-scatters dense buckets only
// TWICE: error: zen-shard-zero: bucket 0 is reduce-scattered already

// No gradient synchronisation yet.
// expected-error @+1 {{zen-shard-zero needs the gradient synchronisation: run zen-autotune or zen-insert-grad-sync first}}
module {
  func.func @train_step(%x: tensor<4xf32>) {
    %w = zen.param "w" : tensor<4xf32>
    %y = zen.compute "Mul" forward(%x, %w) {flops = 4 : i64, bytes = 48 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %dw = zen.compute "MulGrad" backward(%y) {flops = 4 : i64, bytes = 48 : i64} : (tensor<4xf32>) -> tensor<4xf32>
    %g = zen.gradient %w, %dw {ready_order = 0 : i64} : tensor<4xf32>
    return
  }
}

// -----

// ZeRO-3 needs a dimension of every parameter that dp divides.
module {
  func.func @train_step(%x: tensor<3xf32>) {
    // expected-error @+1 {{zen-shard-zero: no dimension of parameter 'odd' ('tensor<3xf32>') divides by dp = 2}}
    %w = zen.param "odd" : tensor<3xf32>
    %y = zen.compute "Mul" forward(%x, %w) {flops = 3 : i64, bytes = 36 : i64} : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    %dw = zen.compute "MulGrad" backward(%y) {flops = 3 : i64, bytes = 36 : i64} : (tensor<3xf32>) -> tensor<3xf32>
    %g = zen.gradient %w, %dw {ready_order = 0 : i64} : tensor<3xf32>
    %r = zen.all_reduce avg %g {group = #zen.group<size = 2, nodes = 1>, bucket = 0 : i64} : tensor<3xf32>
    %s = zen.compute "SGD" optimizer(%w, %r) {flops = 9 : i64, bytes = 36 : i64} : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    return
  }
}

// RUN: zenopt-opt %s -split-input-file --zen-partition-tensor-parallel=tp=2 -verify-diagnostics
// tp comes from the module's zen.parallel when the option is 0; it must divide the heads.
// RUN: not zenopt-opt %S/Inputs/toy-transformer.mlir --zen-partition-tensor-parallel=tp=3 -o /dev/null 2>&1 | FileCheck %s --check-prefix=HEADS
// RUN: sed -e 's/^module {/module attributes {zen.parallel = #zen.parallel<tp = 3>} {/' %S/Inputs/toy-transformer.mlir | not zenopt-opt --zen-partition-tensor-parallel -o /dev/null 2>&1 | FileCheck %s --check-prefix=HEADS
// HEADS: error: tp = 3 does not divide heads (2)

// Gradient synchronisation already planned: tensor parallelism must come first.
// expected-error @+1 {{zen-partition-tensor-parallel rewrites the model before gradient synchronisation: run it before zen-autotune / zen-insert-grad-sync}}
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

// No transformer block.
// expected-error @+1 {{tensor parallelism needs a recognised transformer: no transformer block}}
module {
  func.func @train_step(%x: tensor<4x8xf32>) {
    %w = zen.param "w" : tensor<8x8xf32>
    %y = zen.compute "MatMul" forward(%x, %w) {flops = 512 : i64, bytes = 512 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    return
  }
}

// -----

// Sequence parallelism types the column-parallel GEMM's input as a sequence
// shard where it is produced, which a function argument is not.
module attributes {zen.heads = 2 : i64, zen.parallel = #zen.parallel<sequence_parallel = true>} {
  func.func @train_step(%x: tensor<4x8xf32>) {
    %qkv = zen.param "qkv" : tensor<8x24xf32>
    %out = zen.param "out" : tensor<8x8xf32>
    %fc1 = zen.param "fc1" : tensor<8x32xf32>
    %fc2 = zen.param "fc2" : tensor<32x8xf32>
    // expected-error @+1 {{sequence parallelism: the input of qkv/MatMul is a function argument, not a sequence shard}}
    %a = zen.compute "MatMul" forward(%x, %qkv) {node = "qkv/MatMul", flops = 1536 : i64, bytes = 1280 : i64} : (tensor<4x8xf32>, tensor<8x24xf32>) -> tensor<4x24xf32>
    %h = zen.compute "Reshape" forward(%a) {node = "attn/Reshape", flops = 0 : i64, bytes = 0 : i64} : (tensor<4x24xf32>) -> tensor<4x3x2x4xf32>
    %s = zen.compute "Softmax" forward(%h) {node = "attn/Softmax", flops = 160 : i64, bytes = 256 : i64} : (tensor<4x3x2x4xf32>) -> tensor<2x4x4xf32>
    %c = zen.compute "MatMul" forward(%s, %h) {node = "attn/MatMul", flops = 256 : i64, bytes = 640 : i64} : (tensor<2x4x4xf32>, tensor<4x3x2x4xf32>) -> tensor<4x8xf32>
    %o = zen.compute "MatMul" forward(%c, %out) {node = "out/MatMul", flops = 512 : i64, bytes = 512 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %u = zen.compute "MatMul" forward(%o, %fc1) {node = "fc1/MatMul", flops = 2048 : i64, bytes = 1664 : i64} : (tensor<4x8xf32>, tensor<8x32xf32>) -> tensor<4x32xf32>
    %d = zen.compute "MatMul" forward(%u, %fc2) {node = "fc2/MatMul", flops = 2048 : i64, bytes = 1664 : i64} : (tensor<4x32xf32>, tensor<32x8xf32>) -> tensor<4x8xf32>
    return
  }
}

// -----

// A block whose MLP is an MoE layer: its tokens and experts have no
// tensor-parallel form in the IR yet, so the pass refuses it at the dispatch.
module {
  func.func @train_step(%x: tensor<4x8xf32>) {
    %qkv.weight = zen.param "qkv.weight" : tensor<8x24xf32>
    %out.weight = zen.param "out.weight" : tensor<8x8xf32>
    %router.weight = zen.param "router.weight" : tensor<8x4xf32>
    %w1 = zen.param "moe.fc1.weight" : tensor<4x32x8xf32>
    %w2 = zen.param "moe.fc2.weight" : tensor<4x8x32xf32>
    %qkv = zen.compute "MatMul" forward(%x, %qkv.weight) {node = "qkv/MatMul", flops = 1536 : i64, bytes = 1280 : i64} : (tensor<4x8xf32>, tensor<8x24xf32>) -> tensor<4x24xf32>
    %heads = zen.compute "Reshape" forward(%qkv) {node = "attn/Reshape", flops = 0 : i64, bytes = 0 : i64} : (tensor<4x24xf32>) -> tensor<4x3x2x4xf32>
    %scores = zen.compute "MatMul" forward(%heads, %heads) {node = "attn/MatMul_0", flops = 256 : i64, bytes = 640 : i64} : (tensor<4x3x2x4xf32>, tensor<4x3x2x4xf32>) -> tensor<2x4x4xf32>
    %probs = zen.compute "Softmax" forward(%scores) {node = "attn/Softmax", flops = 160 : i64, bytes = 256 : i64} : (tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
    %ctx = zen.compute "MatMul" forward(%probs, %heads) {node = "attn/MatMul_1", flops = 256 : i64, bytes = 640 : i64} : (tensor<2x4x4xf32>, tensor<4x3x2x4xf32>) -> tensor<4x8xf32>
    %out = zen.compute "MatMul" forward(%ctx, %out.weight) {node = "out/MatMul", flops = 512 : i64, bytes = 512 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %logits = zen.compute "MatMul" forward(%out, %router.weight) {node = "router/MatMul", flops = 256 : i64, bytes = 320 : i64} : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
    // expected-error @+1 {{tensor parallelism does not partition MoE blocks in the IR yet (tp = 2)}}
    %d, %g = zen.moe_dispatch %out, %logits top 2 {flops = 64 : i64, bytes = 512 : i64, node = "moe"} : tensor<4x8xf32>, tensor<4x4xf32> -> tensor<4x2x8xf32>, tensor<4x2xf32>
    %e = zen.moe_experts relu %d, %w1, %w2 {flops = 16384 : i64, bytes = 8192 : i64} : (tensor<4x2x8xf32>, tensor<4x32x8xf32>, tensor<4x8x32xf32>) -> tensor<4x2x8xf32>
    %y = zen.moe_combine %e, %g {flops = 64 : i64, bytes = 512 : i64} : tensor<4x2x8xf32>, tensor<4x2xf32> -> tensor<4x8xf32>
    return
  }
}

// zen-print-transformer: one remark with the recognised transformer shape.
// RUN: zenopt-opt %s --zen-print-transformer -split-input-file -verify-diagnostics -o /dev/null
// The example models and a zenopt-modelgen one, through the importer:
// RUN: zenopt %models/gpt2_small.onnx --emit mlir -q | zenopt-opt --zen-print-transformer --mlir-print-op-on-diagnostic=false -o /dev/null 2>&1 | FileCheck %s --check-prefix=GPT2
// RUN: zenopt %models/bert_base_encoder.onnx --emit mlir -q | zenopt-opt --zen-print-transformer --mlir-print-op-on-diagnostic=false -o /dev/null 2>&1 | FileCheck %s --check-prefix=BERT
// RUN: zenopt-modelgen gpt --layers 3 --hidden 256 --heads 8 --ffn 768 --vocab 512 --seq 64 -o %t.onnx
// RUN: zenopt %t.onnx --emit mlir -q | zenopt-opt --zen-print-transformer --mlir-print-op-on-diagnostic=false -o /dev/null 2>&1 | FileCheck %s --check-prefix=GEN
// RUN: zenopt %models/resnet50.onnx --emit mlir -q | zenopt-opt --zen-print-transformer --mlir-print-op-on-diagnostic=false -o /dev/null 2>&1 | FileCheck %s --check-prefix=NONE

// GPT2: remark: transformer gpt: layers 12, hidden 768, heads 12, kv heads 12 (from the scores), ffn 3072, mlp gelu, norm layernorm, positions learned, seq 128, vocab 50257, batch 1, qkv fused; params per block 7087872, embedding 39383808, head 38598912; replicated [/head/MatMul]
// BERT: remark: transformer bert: layers 12, hidden 768, heads 12, kv heads 12 (from the scores), ffn 3072, mlp relu, norm layernorm, positions none, seq 128, vocab 0, batch 1, qkv fused; params per block 7087872, embedding 0, head 0; replicated []
// GEN: remark: transformer gpt: layers 3, hidden 256, heads 8, kv heads 8 (from the scores), ffn 768, mlp gelu, norm layernorm, positions learned, seq 64, vocab 512, batch 1, qkv separate; params per block 658432, embedding 147456, head 131584; replicated [head/MatMul_207]
// MoE blocks (every second block's MLP 8 experts of ffn 1024, router 256 x 8) are recognised,
// with dense blocks alike and MoE blocks alike, the experts counted apart.
// RUN: zenopt-modelgen moe --layers 4 --hidden 256 --heads 4 --seq 128 --vocab 1000 --experts 8 --top-k 2 --moe-every 2 -o %t.moe.onnx
// RUN: zenopt %t.moe.onnx --emit mlir -q | zenopt-opt --zen-print-transformer --mlir-print-op-on-diagnostic=false -o /dev/null 2>&1 | FileCheck %s --check-prefix=MOE
// MOE: remark: transformer gpt: layers 4, hidden 256, heads 4, kv heads 4 (from the scores), ffn 1024, mlp gelu, norm layernorm, positions learned, seq 128, vocab 1000, batch 1, qkv separate; params per block 789760, embedding 288768, head 256512; replicated [head/MatMul_326]; MoE blocks [1, 3]: 8 experts, top-2, expert ffn 1024, params per MoE block 266240 besides its experts' 4204544
// NONE: warning: no transformer recognised: no transformer block

// A hand-written two-block encoder whose attention has no Q·Kᵀ GEMM to read
// the head size from: the heads come from the module's zen.heads (--heads).
// expected-remark @+1 {{transformer bert: layers 2, hidden 128, heads 2, kv heads 2 (from the attributes), ffn 512, mlp gelu, norm layernorm, positions none, seq 16, vocab 0, batch 1, qkv fused; params per block 196608, embedding 0, head 0; replicated []}}
module attributes {zen.heads = 2 : i64} {
  func.func @train_step(%x: tensor<16x128xf32>) {
    %qkv0 = zen.param "b0.qkv" : tensor<128x384xf32>
    %out0 = zen.param "b0.out" : tensor<128x128xf32>
    %up0 = zen.param "b0.up" : tensor<128x512xf32>
    %down0 = zen.param "b0.down" : tensor<512x128xf32>
    %qkv1 = zen.param "b1.qkv" : tensor<128x384xf32>
    %out1 = zen.param "b1.out" : tensor<128x128xf32>
    %up1 = zen.param "b1.up" : tensor<128x512xf32>
    %down1 = zen.param "b1.down" : tensor<512x128xf32>
    %a0 = zen.compute "MatMul" forward(%x, %qkv0) {flops = 1 : i64, bytes = 1 : i64} : (tensor<16x128xf32>, tensor<128x384xf32>) -> tensor<16x384xf32>
    %s0 = zen.compute "Softmax" forward(%a0) {flops = 1 : i64, bytes = 1 : i64} : (tensor<16x384xf32>) -> tensor<2x16x16xf32>
    %c0 = zen.compute "Flatten" forward(%s0) {flops = 1 : i64, bytes = 1 : i64} : (tensor<2x16x16xf32>) -> tensor<16x128xf32>
    %o0 = zen.compute "MatMul" forward(%c0, %out0) {flops = 1 : i64, bytes = 1 : i64} : (tensor<16x128xf32>, tensor<128x128xf32>) -> tensor<16x128xf32>
    %u0 = zen.compute "MatMul" forward(%o0, %up0) {flops = 1 : i64, bytes = 1 : i64} : (tensor<16x128xf32>, tensor<128x512xf32>) -> tensor<16x512xf32>
    %d0 = zen.compute "MatMul" forward(%u0, %down0) {flops = 1 : i64, bytes = 1 : i64} : (tensor<16x512xf32>, tensor<512x128xf32>) -> tensor<16x128xf32>
    %a1 = zen.compute "MatMul" forward(%d0, %qkv1) {flops = 1 : i64, bytes = 1 : i64} : (tensor<16x128xf32>, tensor<128x384xf32>) -> tensor<16x384xf32>
    %s1 = zen.compute "Softmax" forward(%a1) {flops = 1 : i64, bytes = 1 : i64} : (tensor<16x384xf32>) -> tensor<2x16x16xf32>
    %c1 = zen.compute "Flatten" forward(%s1) {flops = 1 : i64, bytes = 1 : i64} : (tensor<2x16x16xf32>) -> tensor<16x128xf32>
    %o1 = zen.compute "MatMul" forward(%c1, %out1) {flops = 1 : i64, bytes = 1 : i64} : (tensor<16x128xf32>, tensor<128x128xf32>) -> tensor<16x128xf32>
    %u1 = zen.compute "MatMul" forward(%o1, %up1) {flops = 1 : i64, bytes = 1 : i64} : (tensor<16x128xf32>, tensor<128x512xf32>) -> tensor<16x512xf32>
    %d1 = zen.compute "MatMul" forward(%u1, %down1) {flops = 1 : i64, bytes = 1 : i64} : (tensor<16x512xf32>, tensor<512x128xf32>) -> tensor<16x128xf32>
    return
  }
}

// -----

// Without zen.heads the heads are not guessed: the recognition names the Softmax.
// expected-warning @+1 {{no transformer recognised: cannot read the heads of the attention of block 0 (Softmax 'attn/Softmax', Q width 8, K/V width 8): no Q·Kᵀ MatMul with a static head size feeds its Softmax; give --heads (and --kv-heads)}}
module {
  func.func @train_step(%x: tensor<4x8xf32>) {
    %qkv = zen.param "qkv" : tensor<8x24xf32>
    %out = zen.param "out" : tensor<8x8xf32>
    %up = zen.param "up" : tensor<8x32xf32>
    %down = zen.param "down" : tensor<32x8xf32>
    %a = zen.compute "MatMul" forward(%x, %qkv) {flops = 1 : i64, bytes = 1 : i64} : (tensor<4x8xf32>, tensor<8x24xf32>) -> tensor<4x24xf32>
    %s = zen.compute "Softmax" forward(%a) {node = "attn/Softmax", flops = 1 : i64, bytes = 1 : i64} : (tensor<4x24xf32>) -> tensor<4x8xf32>
    %o = zen.compute "MatMul" forward(%s, %out) {flops = 1 : i64, bytes = 1 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %u = zen.compute "MatMul" forward(%o, %up) {flops = 1 : i64, bytes = 1 : i64} : (tensor<4x8xf32>, tensor<8x32xf32>) -> tensor<4x32xf32>
    %d = zen.compute "MatMul" forward(%u, %down) {flops = 1 : i64, bytes = 1 : i64} : (tensor<4x32xf32>, tensor<32x8xf32>) -> tensor<4x8xf32>
    return
  }
}

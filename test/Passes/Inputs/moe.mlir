// One MoE layer in the importer's form: 512 tokens of hidden 1024 routed to the
// top 2 of 8 experts (capacity 160 rows each, ffn 4096), the backward one
// zen.compute "MoEGrad" whose results are the expert weights' gradients.
module attributes {zen.model = "moe", zen.model_hash = "abc", zen.batch = 1 : i64, zen.batch_mode = "scaled"} {
  func.func @train_step(%x: tensor<512x1024xf32>) {
    %wr = zen.param "router.weight" : tensor<1024x8xf32>
    %w1 = zen.param "moe.fc1.weight" : tensor<8x4096x1024xf32>
    %w2 = zen.param "moe.fc2.weight" : tensor<8x1024x4096xf32>
    %logits = zen.compute "MatMul" forward (%x, %wr) {node = "router", flops = 8388608 : i64, bytes = 2113536 : i64} : (tensor<512x1024xf32>, tensor<1024x8xf32>) -> tensor<512x8xf32>
    %d, %g = zen.moe_dispatch %x, %logits top 2 {flops = 20480 : i64, bytes = 7340032 : i64, node = "blocks.1.moe"} : tensor<512x1024xf32>, tensor<512x8xf32> -> tensor<8x160x1024xf32>, tensor<512x2xf32>
    %e = zen.moe_experts relu %d, %w1, %w2 {flops = 21474836480 : i64, bytes = 276824064 : i64} : (tensor<8x160x1024xf32>, tensor<8x4096x1024xf32>, tensor<8x1024x4096xf32>) -> tensor<8x160x1024xf32>
    %y = zen.moe_combine %e, %g {flops = 2097152 : i64, bytes = 7344128 : i64} : tensor<8x160x1024xf32>, tensor<512x2xf32> -> tensor<512x1024xf32>
    %b:4 = zen.compute "MoEGrad" backward (%y, %x, %logits, %w1, %w2) {node = "blocks.1.moe", flops = 42949672960 : i64, bytes = 553648128 : i64} : (tensor<512x1024xf32>, tensor<512x1024xf32>, tensor<512x8xf32>, tensor<8x4096x1024xf32>, tensor<8x1024x4096xf32>) -> (tensor<512x1024xf32>, tensor<512x8xf32>, tensor<8x4096x1024xf32>, tensor<8x1024x4096xf32>)
    %g2 = zen.gradient %w2, %b#3 {ready_order = 0 : i64} : tensor<8x1024x4096xf32>
    %g1 = zen.gradient %w1, %b#2 {ready_order = 1 : i64} : tensor<8x4096x1024xf32>
    %dr:2 = zen.compute "MatMulGrad" backward (%b#1, %x, %wr) {node = "router", flops = 16777216 : i64, bytes = 4227072 : i64} : (tensor<512x8xf32>, tensor<512x1024xf32>, tensor<1024x8xf32>) -> (tensor<512x1024xf32>, tensor<1024x8xf32>)
    %gr = zen.gradient %wr, %dr#1 {ready_order = 2 : i64} : tensor<1024x8xf32>
    return
  }
}

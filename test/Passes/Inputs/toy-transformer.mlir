// A two-block toy transformer (hidden 8, 2 heads, ffn 32, seq 4,
// vocab 16) with its backward ops and gradients, as the importer lays them out:
// backward ops name their forward node, MatMulGrad returns (input, weight) gradients.
module {
  func.func @train_step(%ids: tensor<4xi64>) {
    %wte = zen.param "wte" : tensor<16x8xf32>
    %b0.ln = zen.param "b0.ln" : tensor<8xf32>
    %b0.qkv.weight = zen.param "b0.qkv.weight" : tensor<8x24xf32>
    %b0.qkv.bias = zen.param "b0.qkv.bias" : tensor<24xf32>
    %b0.out.weight = zen.param "b0.out.weight" : tensor<8x8xf32>
    %b0.out.bias = zen.param "b0.out.bias" : tensor<8xf32>
    %b0.fc1.weight = zen.param "b0.fc1.weight" : tensor<8x32xf32>
    %b0.fc1.bias = zen.param "b0.fc1.bias" : tensor<32xf32>
    %b0.fc2.weight = zen.param "b0.fc2.weight" : tensor<32x8xf32>
    %b0.fc2.bias = zen.param "b0.fc2.bias" : tensor<8xf32>
    %b1.ln = zen.param "b1.ln" : tensor<8xf32>
    %b1.qkv.weight = zen.param "b1.qkv.weight" : tensor<8x24xf32>
    %b1.qkv.bias = zen.param "b1.qkv.bias" : tensor<24xf32>
    %b1.out.weight = zen.param "b1.out.weight" : tensor<8x8xf32>
    %b1.out.bias = zen.param "b1.out.bias" : tensor<8xf32>
    %b1.fc1.weight = zen.param "b1.fc1.weight" : tensor<8x32xf32>
    %b1.fc1.bias = zen.param "b1.fc1.bias" : tensor<32xf32>
    %b1.fc2.weight = zen.param "b1.fc2.weight" : tensor<32x8xf32>
    %b1.fc2.bias = zen.param "b1.fc2.bias" : tensor<8xf32>
    %head.weight = zen.param "head.weight" : tensor<8x16xf32>
    %emb = zen.compute "Gather" forward(%wte, %ids) {node = "embed/Gather", flops = 0 : i64, bytes = 640 : i64} : (tensor<16x8xf32>, tensor<4xi64>) -> tensor<4x8xf32>
    %b0_ln = zen.compute "Mul" forward(%emb, %b0.ln) {node = "b0.ln/Mul", flops = 32 : i64, bytes = 288 : i64} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    %b0_qkv = zen.compute "MatMul" forward(%b0_ln, %b0.qkv.weight) {node = "b0.qkv/MatMul", flops = 1536 : i64, bytes = 1280 : i64} : (tensor<4x8xf32>, tensor<8x24xf32>) -> tensor<4x24xf32>
    %b0_qkvb = zen.compute "Add" forward(%b0_qkv, %b0.qkv.bias) {node = "b0.qkv/Add", flops = 96 : i64, bytes = 864 : i64} : (tensor<4x24xf32>, tensor<24xf32>) -> tensor<4x24xf32>
    %b0_heads = zen.compute "Reshape" forward(%b0_qkvb) {node = "b0.attn/Reshape", flops = 0 : i64, bytes = 0 : i64} : (tensor<4x24xf32>) -> tensor<4x3x2x4xf32>
    %b0_scores = zen.compute "MatMul" forward(%b0_heads, %b0_heads) {node = "b0.attn/MatMul_0", flops = 256 : i64, bytes = 640 : i64} : (tensor<4x3x2x4xf32>, tensor<4x3x2x4xf32>) -> tensor<2x4x4xf32>
    %b0_probs = zen.compute "Softmax" forward(%b0_scores) {node = "b0.attn/Softmax", flops = 160 : i64, bytes = 256 : i64} : (tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
    %b0_ctx = zen.compute "MatMul" forward(%b0_probs, %b0_heads) {node = "b0.attn/MatMul_1", flops = 256 : i64, bytes = 640 : i64} : (tensor<2x4x4xf32>, tensor<4x3x2x4xf32>) -> tensor<4x8xf32>
    %b0_out = zen.compute "MatMul" forward(%b0_ctx, %b0.out.weight) {node = "b0.out/MatMul", flops = 512 : i64, bytes = 512 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %b0_outb = zen.compute "Add" forward(%b0_out, %b0.out.bias) {node = "b0.out/Add", flops = 32 : i64, bytes = 288 : i64} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    %b0_res1 = zen.compute "Add" forward(%emb, %b0_outb) {node = "b0.res1/Add", flops = 32 : i64, bytes = 384 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %b0_h = zen.compute "MatMul" forward(%b0_res1, %b0.fc1.weight) {node = "b0.fc1/MatMul", flops = 2048 : i64, bytes = 1664 : i64} : (tensor<4x8xf32>, tensor<8x32xf32>) -> tensor<4x32xf32>
    %b0_hb = zen.compute "Add" forward(%b0_h, %b0.fc1.bias) {node = "b0.fc1/Add", flops = 128 : i64, bytes = 1152 : i64} : (tensor<4x32xf32>, tensor<32xf32>) -> tensor<4x32xf32>
    %b0_g = zen.compute "Gelu" forward(%b0_hb) {node = "b0.mlp/Gelu", flops = 1024 : i64, bytes = 1024 : i64} : (tensor<4x32xf32>) -> tensor<4x32xf32>
    %b0_y = zen.compute "MatMul" forward(%b0_g, %b0.fc2.weight) {node = "b0.fc2/MatMul", flops = 2048 : i64, bytes = 1664 : i64} : (tensor<4x32xf32>, tensor<32x8xf32>) -> tensor<4x8xf32>
    %b0_yb = zen.compute "Add" forward(%b0_y, %b0.fc2.bias) {node = "b0.fc2/Add", flops = 32 : i64, bytes = 288 : i64} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    %b0_res2 = zen.compute "Add" forward(%b0_res1, %b0_yb) {node = "b0.res2/Add", flops = 32 : i64, bytes = 384 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %b1_ln = zen.compute "Mul" forward(%b0_res2, %b1.ln) {node = "b1.ln/Mul", flops = 32 : i64, bytes = 288 : i64} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    %b1_qkv = zen.compute "MatMul" forward(%b1_ln, %b1.qkv.weight) {node = "b1.qkv/MatMul", flops = 1536 : i64, bytes = 1280 : i64} : (tensor<4x8xf32>, tensor<8x24xf32>) -> tensor<4x24xf32>
    %b1_qkvb = zen.compute "Add" forward(%b1_qkv, %b1.qkv.bias) {node = "b1.qkv/Add", flops = 96 : i64, bytes = 864 : i64} : (tensor<4x24xf32>, tensor<24xf32>) -> tensor<4x24xf32>
    %b1_heads = zen.compute "Reshape" forward(%b1_qkvb) {node = "b1.attn/Reshape", flops = 0 : i64, bytes = 0 : i64} : (tensor<4x24xf32>) -> tensor<4x3x2x4xf32>
    %b1_scores = zen.compute "MatMul" forward(%b1_heads, %b1_heads) {node = "b1.attn/MatMul_0", flops = 256 : i64, bytes = 640 : i64} : (tensor<4x3x2x4xf32>, tensor<4x3x2x4xf32>) -> tensor<2x4x4xf32>
    %b1_probs = zen.compute "Softmax" forward(%b1_scores) {node = "b1.attn/Softmax", flops = 160 : i64, bytes = 256 : i64} : (tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
    %b1_ctx = zen.compute "MatMul" forward(%b1_probs, %b1_heads) {node = "b1.attn/MatMul_1", flops = 256 : i64, bytes = 640 : i64} : (tensor<2x4x4xf32>, tensor<4x3x2x4xf32>) -> tensor<4x8xf32>
    %b1_out = zen.compute "MatMul" forward(%b1_ctx, %b1.out.weight) {node = "b1.out/MatMul", flops = 512 : i64, bytes = 512 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %b1_outb = zen.compute "Add" forward(%b1_out, %b1.out.bias) {node = "b1.out/Add", flops = 32 : i64, bytes = 288 : i64} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    %b1_res1 = zen.compute "Add" forward(%b0_res2, %b1_outb) {node = "b1.res1/Add", flops = 32 : i64, bytes = 384 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %b1_h = zen.compute "MatMul" forward(%b1_res1, %b1.fc1.weight) {node = "b1.fc1/MatMul", flops = 2048 : i64, bytes = 1664 : i64} : (tensor<4x8xf32>, tensor<8x32xf32>) -> tensor<4x32xf32>
    %b1_hb = zen.compute "Add" forward(%b1_h, %b1.fc1.bias) {node = "b1.fc1/Add", flops = 128 : i64, bytes = 1152 : i64} : (tensor<4x32xf32>, tensor<32xf32>) -> tensor<4x32xf32>
    %b1_g = zen.compute "Gelu" forward(%b1_hb) {node = "b1.mlp/Gelu", flops = 1024 : i64, bytes = 1024 : i64} : (tensor<4x32xf32>) -> tensor<4x32xf32>
    %b1_y = zen.compute "MatMul" forward(%b1_g, %b1.fc2.weight) {node = "b1.fc2/MatMul", flops = 2048 : i64, bytes = 1664 : i64} : (tensor<4x32xf32>, tensor<32x8xf32>) -> tensor<4x8xf32>
    %b1_yb = zen.compute "Add" forward(%b1_y, %b1.fc2.bias) {node = "b1.fc2/Add", flops = 32 : i64, bytes = 288 : i64} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    %b1_res2 = zen.compute "Add" forward(%b1_res1, %b1_yb) {node = "b1.res2/Add", flops = 32 : i64, bytes = 384 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %logits = zen.compute "MatMul" forward(%b1_res2, %head.weight) {node = "head/MatMul", flops = 1024 : i64, bytes = 1024 : i64} : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
    %loss = zen.compute "SoftmaxCrossEntropy" forward(%logits) {node = "head/Loss", flops = 320 : i64, bytes = 256 : i64} : (tensor<4x16xf32>) -> tensor<f32>
    %dlogits = zen.compute "SoftmaxCrossEntropyGrad" backward(%logits) {node = "head/Loss", flops = 320 : i64, bytes = 512 : i64} : (tensor<4x16xf32>) -> tensor<4x16xf32>
    %dhead:2 = zen.compute "MatMulGrad" backward(%dlogits, %b1_res2, %head.weight) {node = "head/MatMul", flops = 2048 : i64, bytes = 1536 : i64} : (tensor<4x16xf32>, tensor<4x8xf32>, tensor<8x16xf32>) -> (tensor<4x8xf32>, tensor<8x16xf32>)
    %g.head.weight = zen.gradient %head.weight, %dhead#1 {ready_order = 0 : i64} : tensor<8x16xf32>
    %b1_dres2:2 = zen.compute "AddGrad" backward(%dhead#0) {node = "b1.res2/Add", flops = 32 : i64, bytes = 384 : i64} : (tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>)
    %b1_dyb:2 = zen.compute "AddGrad" backward(%b1_dres2#1) {node = "b1.fc2/Add", flops = 64 : i64, bytes = 288 : i64} : (tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>)
    %g.b1.fc2.bias = zen.gradient %b1.fc2.bias, %b1_dyb#1 {ready_order = 1 : i64} : tensor<8xf32>
    %b1_dy:2 = zen.compute "MatMulGrad" backward(%b1_dyb#0, %b1_g, %b1.fc2.weight) {node = "b1.fc2/MatMul", flops = 4096 : i64, bytes = 3328 : i64} : (tensor<4x8xf32>, tensor<4x32xf32>, tensor<32x8xf32>) -> (tensor<4x32xf32>, tensor<32x8xf32>)
    %g.b1.fc2.weight = zen.gradient %b1.fc2.weight, %b1_dy#1 {ready_order = 2 : i64} : tensor<32x8xf32>
    %b1_dg = zen.compute "GeluGrad" backward(%b1_dy#0, %b1_hb) {node = "b1.mlp/Gelu", flops = 2048 : i64, bytes = 1536 : i64} : (tensor<4x32xf32>, tensor<4x32xf32>) -> tensor<4x32xf32>
    %b1_dhb:2 = zen.compute "AddGrad" backward(%b1_dg) {node = "b1.fc1/Add", flops = 256 : i64, bytes = 1152 : i64} : (tensor<4x32xf32>) -> (tensor<4x32xf32>, tensor<32xf32>)
    %g.b1.fc1.bias = zen.gradient %b1.fc1.bias, %b1_dhb#1 {ready_order = 3 : i64} : tensor<32xf32>
    %b1_dh:2 = zen.compute "MatMulGrad" backward(%b1_dhb#0, %b1_res1, %b1.fc1.weight) {node = "b1.fc1/MatMul", flops = 4096 : i64, bytes = 3328 : i64} : (tensor<4x32xf32>, tensor<4x8xf32>, tensor<8x32xf32>) -> (tensor<4x8xf32>, tensor<8x32xf32>)
    %g.b1.fc1.weight = zen.gradient %b1.fc1.weight, %b1_dh#1 {ready_order = 4 : i64} : tensor<8x32xf32>
    %b1_dres1:2 = zen.compute "AddGrad" backward(%b1_dres2#0, %b1_dh#0) {node = "b1.res1/Add", flops = 64 : i64, bytes = 384 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>)
    %b1_doutb:2 = zen.compute "AddGrad" backward(%b1_dres1#1) {node = "b1.out/Add", flops = 64 : i64, bytes = 288 : i64} : (tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>)
    %g.b1.out.bias = zen.gradient %b1.out.bias, %b1_doutb#1 {ready_order = 5 : i64} : tensor<8xf32>
    %b1_dout:2 = zen.compute "MatMulGrad" backward(%b1_doutb#0, %b1_ctx, %b1.out.weight) {node = "b1.out/MatMul", flops = 1024 : i64, bytes = 1024 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<8x8xf32>) -> (tensor<4x8xf32>, tensor<8x8xf32>)
    %g.b1.out.weight = zen.gradient %b1.out.weight, %b1_dout#1 {ready_order = 6 : i64} : tensor<8x8xf32>
    %b1_dctx:2 = zen.compute "MatMulGrad" backward(%b1_dout#0, %b1_probs, %b1_heads) {node = "b1.attn/MatMul_1", flops = 512 : i64, bytes = 1280 : i64} : (tensor<4x8xf32>, tensor<2x4x4xf32>, tensor<4x3x2x4xf32>) -> (tensor<2x4x4xf32>, tensor<4x3x2x4xf32>)
    %b1_dscores = zen.compute "SoftmaxGrad" backward(%b1_dctx#0, %b1_probs) {node = "b1.attn/Softmax", flops = 128 : i64, bytes = 384 : i64} : (tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
    %b1_dattn = zen.compute "MatMulGrad" backward(%b1_dscores, %b1_heads, %b1_heads) {node = "b1.attn/MatMul_0", flops = 512 : i64, bytes = 1280 : i64} : (tensor<2x4x4xf32>, tensor<4x3x2x4xf32>, tensor<4x3x2x4xf32>) -> tensor<4x3x2x4xf32>
    %b1_dheads = zen.compute "ReshapeGrad" backward(%b1_dctx#1, %b1_dattn) {node = "b1.attn/Reshape", flops = 0 : i64, bytes = 0 : i64} : (tensor<4x3x2x4xf32>, tensor<4x3x2x4xf32>) -> tensor<4x24xf32>
    %b1_dqkvb:2 = zen.compute "AddGrad" backward(%b1_dheads) {node = "b1.qkv/Add", flops = 192 : i64, bytes = 864 : i64} : (tensor<4x24xf32>) -> (tensor<4x24xf32>, tensor<24xf32>)
    %g.b1.qkv.bias = zen.gradient %b1.qkv.bias, %b1_dqkvb#1 {ready_order = 7 : i64} : tensor<24xf32>
    %b1_dqkv:2 = zen.compute "MatMulGrad" backward(%b1_dqkvb#0, %b1_ln, %b1.qkv.weight) {node = "b1.qkv/MatMul", flops = 3072 : i64, bytes = 2560 : i64} : (tensor<4x24xf32>, tensor<4x8xf32>, tensor<8x24xf32>) -> (tensor<4x8xf32>, tensor<8x24xf32>)
    %g.b1.qkv.weight = zen.gradient %b1.qkv.weight, %b1_dqkv#1 {ready_order = 8 : i64} : tensor<8x24xf32>
    %b1_dln:2 = zen.compute "MulGrad" backward(%b1_dqkv#0, %b0_res2, %b1.ln) {node = "b1.ln/Mul", flops = 64 : i64, bytes = 288 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>)
    %g.b1.ln = zen.gradient %b1.ln, %b1_dln#1 {ready_order = 9 : i64} : tensor<8xf32>
    %b0_dres2:2 = zen.compute "AddGrad" backward(%b1_dres1#0, %b1_dln#0) {node = "b0.res2/Add", flops = 32 : i64, bytes = 384 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>)
    %b0_dyb:2 = zen.compute "AddGrad" backward(%b0_dres2#1) {node = "b0.fc2/Add", flops = 64 : i64, bytes = 288 : i64} : (tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>)
    %g.b0.fc2.bias = zen.gradient %b0.fc2.bias, %b0_dyb#1 {ready_order = 10 : i64} : tensor<8xf32>
    %b0_dy:2 = zen.compute "MatMulGrad" backward(%b0_dyb#0, %b0_g, %b0.fc2.weight) {node = "b0.fc2/MatMul", flops = 4096 : i64, bytes = 3328 : i64} : (tensor<4x8xf32>, tensor<4x32xf32>, tensor<32x8xf32>) -> (tensor<4x32xf32>, tensor<32x8xf32>)
    %g.b0.fc2.weight = zen.gradient %b0.fc2.weight, %b0_dy#1 {ready_order = 11 : i64} : tensor<32x8xf32>
    %b0_dg = zen.compute "GeluGrad" backward(%b0_dy#0, %b0_hb) {node = "b0.mlp/Gelu", flops = 2048 : i64, bytes = 1536 : i64} : (tensor<4x32xf32>, tensor<4x32xf32>) -> tensor<4x32xf32>
    %b0_dhb:2 = zen.compute "AddGrad" backward(%b0_dg) {node = "b0.fc1/Add", flops = 256 : i64, bytes = 1152 : i64} : (tensor<4x32xf32>) -> (tensor<4x32xf32>, tensor<32xf32>)
    %g.b0.fc1.bias = zen.gradient %b0.fc1.bias, %b0_dhb#1 {ready_order = 12 : i64} : tensor<32xf32>
    %b0_dh:2 = zen.compute "MatMulGrad" backward(%b0_dhb#0, %b0_res1, %b0.fc1.weight) {node = "b0.fc1/MatMul", flops = 4096 : i64, bytes = 3328 : i64} : (tensor<4x32xf32>, tensor<4x8xf32>, tensor<8x32xf32>) -> (tensor<4x8xf32>, tensor<8x32xf32>)
    %g.b0.fc1.weight = zen.gradient %b0.fc1.weight, %b0_dh#1 {ready_order = 13 : i64} : tensor<8x32xf32>
    %b0_dres1:2 = zen.compute "AddGrad" backward(%b0_dres2#0, %b0_dh#0) {node = "b0.res1/Add", flops = 64 : i64, bytes = 384 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>)
    %b0_doutb:2 = zen.compute "AddGrad" backward(%b0_dres1#1) {node = "b0.out/Add", flops = 64 : i64, bytes = 288 : i64} : (tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>)
    %g.b0.out.bias = zen.gradient %b0.out.bias, %b0_doutb#1 {ready_order = 14 : i64} : tensor<8xf32>
    %b0_dout:2 = zen.compute "MatMulGrad" backward(%b0_doutb#0, %b0_ctx, %b0.out.weight) {node = "b0.out/MatMul", flops = 1024 : i64, bytes = 1024 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<8x8xf32>) -> (tensor<4x8xf32>, tensor<8x8xf32>)
    %g.b0.out.weight = zen.gradient %b0.out.weight, %b0_dout#1 {ready_order = 15 : i64} : tensor<8x8xf32>
    %b0_dctx:2 = zen.compute "MatMulGrad" backward(%b0_dout#0, %b0_probs, %b0_heads) {node = "b0.attn/MatMul_1", flops = 512 : i64, bytes = 1280 : i64} : (tensor<4x8xf32>, tensor<2x4x4xf32>, tensor<4x3x2x4xf32>) -> (tensor<2x4x4xf32>, tensor<4x3x2x4xf32>)
    %b0_dscores = zen.compute "SoftmaxGrad" backward(%b0_dctx#0, %b0_probs) {node = "b0.attn/Softmax", flops = 128 : i64, bytes = 384 : i64} : (tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
    %b0_dattn = zen.compute "MatMulGrad" backward(%b0_dscores, %b0_heads, %b0_heads) {node = "b0.attn/MatMul_0", flops = 512 : i64, bytes = 1280 : i64} : (tensor<2x4x4xf32>, tensor<4x3x2x4xf32>, tensor<4x3x2x4xf32>) -> tensor<4x3x2x4xf32>
    %b0_dheads = zen.compute "ReshapeGrad" backward(%b0_dctx#1, %b0_dattn) {node = "b0.attn/Reshape", flops = 0 : i64, bytes = 0 : i64} : (tensor<4x3x2x4xf32>, tensor<4x3x2x4xf32>) -> tensor<4x24xf32>
    %b0_dqkvb:2 = zen.compute "AddGrad" backward(%b0_dheads) {node = "b0.qkv/Add", flops = 192 : i64, bytes = 864 : i64} : (tensor<4x24xf32>) -> (tensor<4x24xf32>, tensor<24xf32>)
    %g.b0.qkv.bias = zen.gradient %b0.qkv.bias, %b0_dqkvb#1 {ready_order = 16 : i64} : tensor<24xf32>
    %b0_dqkv:2 = zen.compute "MatMulGrad" backward(%b0_dqkvb#0, %b0_ln, %b0.qkv.weight) {node = "b0.qkv/MatMul", flops = 3072 : i64, bytes = 2560 : i64} : (tensor<4x24xf32>, tensor<4x8xf32>, tensor<8x24xf32>) -> (tensor<4x8xf32>, tensor<8x24xf32>)
    %g.b0.qkv.weight = zen.gradient %b0.qkv.weight, %b0_dqkv#1 {ready_order = 17 : i64} : tensor<8x24xf32>
    %b0_dln:2 = zen.compute "MulGrad" backward(%b0_dqkv#0, %emb, %b0.ln) {node = "b0.ln/Mul", flops = 64 : i64, bytes = 288 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>)
    %g.b0.ln = zen.gradient %b0.ln, %b0_dln#1 {ready_order = 18 : i64} : tensor<8xf32>
    %dwte = zen.compute "GatherGrad" backward(%b0_dres1#0, %b0_dln#0, %ids) {node = "embed/Gather", flops = 64 : i64, bytes = 1152 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4xi64>) -> tensor<16x8xf32>
    %g.wte = zen.gradient %wte, %dwte {ready_order = 19 : i64} : tensor<16x8xf32>
    return
  }
}

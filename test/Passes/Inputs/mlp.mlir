// A three-layer MLP in the importer's form: params first, forward in
// topological order, backward in reverse, each zen.gradient right after the
// backward op that completes it (IR order == ready_order).
module attributes {zen.model = "mlp", zen.model_hash = "abc", zen.batch = 8 : i64, zen.batch_mode = "scaled"} {
  func.func @train_step(%arg0: tensor<8x1024xf32>) {
    %w0 = zen.param "fc1.weight" : tensor<1024x1024xf32>
    %w1 = zen.param "fc2.weight" : tensor<1024x1024xf32>
    %w2 = zen.param "fc3.weight" : tensor<1024x16xf32>
    %h0 = zen.compute "MatMul" forward (%arg0, %w0) {node = "fc1", flops = 16777216 : i64, bytes = 4227072 : i64} : (tensor<8x1024xf32>, tensor<1024x1024xf32>) -> tensor<8x1024xf32>
    %a0 = zen.compute "Relu" forward (%h0) {node = "relu1", flops = 8192 : i64, bytes = 65536 : i64} : (tensor<8x1024xf32>) -> tensor<8x1024xf32>
    %h1 = zen.compute "MatMul" forward (%a0, %w1) {node = "fc2", flops = 16777216 : i64, bytes = 4227072 : i64} : (tensor<8x1024xf32>, tensor<1024x1024xf32>) -> tensor<8x1024xf32>
    %o = zen.compute "MatMul" forward (%h1, %w2) {node = "fc3", flops = 262144 : i64, bytes = 98816 : i64} : (tensor<8x1024xf32>, tensor<1024x16xf32>) -> tensor<8x16xf32>
    %d2:2 = zen.compute "MatMulGrad" backward (%o, %h1, %w2) {node = "fc3", flops = 524288 : i64, bytes = 197632 : i64} : (tensor<8x16xf32>, tensor<8x1024xf32>, tensor<1024x16xf32>) -> (tensor<8x1024xf32>, tensor<1024x16xf32>)
    %g2 = zen.gradient %w2, %d2#1 {ready_order = 0 : i64} : tensor<1024x16xf32>
    %d1:2 = zen.compute "MatMulGrad" backward (%d2#0, %a0, %w1) {node = "fc2", flops = 33554432 : i64, bytes = 8454144 : i64} : (tensor<8x1024xf32>, tensor<8x1024xf32>, tensor<1024x1024xf32>) -> (tensor<8x1024xf32>, tensor<1024x1024xf32>)
    %g1 = zen.gradient %w1, %d1#1 {ready_order = 1 : i64} : tensor<1024x1024xf32>
    %r = zen.compute "ReluGrad" backward (%d1#0, %h0) {node = "relu1", flops = 8192 : i64, bytes = 98304 : i64} : (tensor<8x1024xf32>, tensor<8x1024xf32>) -> tensor<8x1024xf32>
    %d0:2 = zen.compute "MatMulGrad" backward (%r, %arg0, %w0) {node = "fc1", flops = 33554432 : i64, bytes = 8454144 : i64} : (tensor<8x1024xf32>, tensor<8x1024xf32>, tensor<1024x1024xf32>) -> (tensor<8x1024xf32>, tensor<1024x1024xf32>)
    %g0 = zen.gradient %w0, %d0#1 {ready_order = 2 : i64} : tensor<1024x1024xf32>
    return
  }
}

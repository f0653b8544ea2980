// A 200 000 x 64 embedding looked up 16 times per sample (batch 64: 1024 row lookups per
// step), then a linear layer: the table's gradient is row-sparse, fc.weight's dense.
func.func @train_step(%ids: tensor<64x16xi64>) {
  %table = zen.param "embedding.weight" : tensor<200000x64xf32>
  %fcw = zen.param "fc.weight" : tensor<10x1024xf32>
  %e = zen.compute "Gather" forward(%table, %ids) {bytes = 532480 : i64, flops = 0 : i64, node = "/embedding/Gather"} : (tensor<200000x64xf32>, tensor<64x16xi64>) -> tensor<64x1024xf32>
  %y = zen.compute "Gemm" forward(%e, %fcw) {bytes = 305664 : i64, flops = 1310720 : i64, node = "/fc/Gemm"} : (tensor<64x1024xf32>, tensor<10x1024xf32>) -> tensor<64x10xf32>
  %d:2 = zen.compute "GemmGrad" backward(%y, %e, %fcw) {bytes = 611328 : i64, flops = 2621440 : i64, node = "/fc/Gemm"} : (tensor<64x10xf32>, tensor<64x1024xf32>, tensor<10x1024xf32>) -> (tensor<64x1024xf32>, tensor<10x1024xf32>)
  %gfc = zen.gradient %fcw, %d#1 {ready_order = 0 : i64} : tensor<10x1024xf32>
  %dt = zen.compute "GatherGrad" backward(%d#0, %ids) {bytes = 51732480 : i64, flops = 65536 : i64, node = "/embedding/Gather"} : (tensor<64x1024xf32>, tensor<64x16xi64>) -> tensor<200000x64xf32>
  %gt = zen.gradient %table, %dt {ready_order = 1 : i64, row_lookups = 1024 : i64} : tensor<200000x64xf32>
  return
}

// RUN: zenopt-opt %s | FileCheck %s
// Round trip: the printed form parses back to the same printed form.
// RUN: zenopt-opt %s | zenopt-opt | FileCheck %s
// Generic form round trip as well.
// RUN: zenopt-opt -mlir-print-op-generic %s | zenopt-opt | FileCheck %s

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:.*]]: tensor<8x16xf32>)
func.func @train_step(%x: tensor<8x16xf32>) {
  // CHECK: %[[W:.*]] = zen.param "fc.weight" : tensor<16x16xf32>
  %w = zen.param "fc.weight" : tensor<16x16xf32>
  // CHECK: %[[B:.*]] = zen.param "fc.bias" : tensor<16xf32>
  %b = zen.param "fc.bias" : tensor<16xf32>
  // CHECK: %[[Y:.*]] = zen.compute "Gemm" forward(%[[X]], %[[W]], %[[B]]) {bytes = 2240 : i64, flops = 4096 : i64, node = "fc"} : (tensor<8x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  %y = zen.compute "Gemm" forward (%x, %w, %b) {node = "fc", flops = 4096 : i64, bytes = 2240 : i64}
      : (tensor<8x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  // CHECK: %[[D:.*]]:3 = zen.compute "GemmGrad" backward(%[[Y]], %[[X]], %[[W]])
  %d:3 = zen.compute "GemmGrad" backward (%y, %x, %w) {node = "fc", flops = 8192 : i64, bytes = 4480 : i64}
      : (tensor<8x16xf32>, tensor<8x16xf32>, tensor<16x16xf32>) -> (tensor<8x16xf32>, tensor<16x16xf32>, tensor<16xf32>)
  // CHECK: %[[GW:.*]] = zen.gradient %[[W]], %[[D]]#1 {ready_order = 1 : i64} : tensor<16x16xf32>
  %gw = zen.gradient %w, %d#1 {ready_order = 1 : i64} : tensor<16x16xf32>
  // CHECK: %[[GB:.*]] = zen.gradient %[[B]], %[[D]]#2 {ready_order = 0 : i64} : tensor<16xf32>
  %gb = zen.gradient %b, %d#2 {ready_order = 0 : i64} : tensor<16xf32>

  // CHECK: %[[BUCKET:.*]] = zen.pack %[[GW]], %[[GB]] : tensor<16x16xf32>, tensor<16xf32> -> tensor<272xf32>
  %bucket = zen.pack %gw, %gb : tensor<16x16xf32>, tensor<16xf32> -> tensor<272xf32>
  // CHECK: %[[AR:.*]] = zen.all_reduce avg %[[BUCKET]] {algorithm = #zen<algorithm ring>, chunks = 2 : i64, group = #zen.group<size = 8, nodes = 1>, schedule = #zen.schedule<stream = 1, priority = 0, order = 3>} : tensor<272xf32>
  %ar = zen.all_reduce avg %bucket {group = #zen.group<size = 8, nodes = 1>, algorithm = #zen<algorithm ring>, chunks = 2 : i64, schedule = #zen.schedule<stream = 1, priority = 0, order = 3>} : tensor<272xf32>
  // CHECK: %[[RS:.*]] = zen.reduce_scatter sum %[[BUCKET]] {group = #zen.group<size = 8, nodes = 1>} : tensor<272xf32> -> tensor<34xf32>
  %rs = zen.reduce_scatter sum %bucket {group = #zen.group<size = 8, nodes = 1>} : tensor<272xf32> -> tensor<34xf32>
  // CHECK: %[[AG:.*]] = zen.all_gather %[[RS]] {decoupled, group = #zen.group<size = 8, nodes = 1>} : tensor<34xf32> -> tensor<272xf32>
  %ag = zen.all_gather %rs {group = #zen.group<size = 8, nodes = 1>, decoupled} : tensor<34xf32> -> tensor<272xf32>
  // CHECK: %[[U:.*]]:2 = zen.unpack %[[AG]] : tensor<272xf32> -> tensor<16x16xf32>, tensor<16xf32>
  %uw, %ub = zen.unpack %ag : tensor<272xf32> -> tensor<16x16xf32>, tensor<16xf32>
  // CHECK: zen.compute "SGD" optimizer(%[[W]], %[[U]]#0, %[[B]], %[[U]]#1)
  zen.compute "SGD" optimizer (%w, %uw, %b, %ub) {flops = 544 : i64, bytes = 4352 : i64}
      : (tensor<16x16xf32>, tensor<16x16xf32>, tensor<16xf32>, tensor<16xf32>) -> ()

  // Compression: sparse payloads are all-gathered, dense casts and PowerSGD all-reduced.
  // CHECK: %[[TK:.*]] = zen.compress %[[BUCKET]] on gpu {error_feedback} : tensor<272xf32> -> !zen.compressed<tensor<272xf32>, #zen.compression<topk, ratio = 1.000000e-02>>
  %tk = zen.compress %bucket on gpu {error_feedback} : tensor<272xf32> -> !zen.compressed<tensor<272xf32>, #zen.compression<topk, ratio = 0.01>>
  // CHECK: %[[TKG:.*]] = zen.all_gather %[[TK]] {group = #zen.group<size = 8, nodes = 1>} : !zen.compressed<tensor<272xf32>, #zen.compression<topk, ratio = 1.000000e-02>> -> !zen.compressed<tensor<272xf32>, #zen.compression<topk, ratio = 1.000000e-02>>
  %tkg = zen.all_gather %tk {group = #zen.group<size = 8, nodes = 1>} : !zen.compressed<tensor<272xf32>, #zen.compression<topk, ratio = 0.01>> -> !zen.compressed<tensor<272xf32>, #zen.compression<topk, ratio = 0.01>>
  // CHECK: zen.decompress %[[TKG]] on cpu : !zen.compressed<tensor<272xf32>, #zen.compression<topk, ratio = 1.000000e-02>> -> tensor<272xf32>
  %tkd = zen.decompress %tkg on cpu : !zen.compressed<tensor<272xf32>, #zen.compression<topk, ratio = 0.01>> -> tensor<272xf32>
  // CHECK: %[[HP:.*]] = zen.compress %[[BUCKET]] on cpu : tensor<272xf32> -> !zen.compressed<tensor<272xf32>, #zen.compression<fp16>>
  %hp = zen.compress %bucket on cpu : tensor<272xf32> -> !zen.compressed<tensor<272xf32>, #zen.compression<fp16>>
  // CHECK: zen.all_reduce sum %[[HP]] {group = #zen.group<size = 8, nodes = 1>} : !zen.compressed<tensor<272xf32>, #zen.compression<fp16>>
  %hpr = zen.all_reduce sum %hp {group = #zen.group<size = 8, nodes = 1>} : !zen.compressed<tensor<272xf32>, #zen.compression<fp16>>
  // CHECK: zen.compress %[[BUCKET]] on gpu {error_feedback} : tensor<272xf32> -> !zen.compressed<tensor<272xf32>, #zen.compression<powersgd, rank = 4>>
  %ps = zen.compress %bucket on gpu {error_feedback} : tensor<272xf32> -> !zen.compressed<tensor<272xf32>, #zen.compression<powersgd, rank = 4>>
  // CHECK: zen.compress %[[BUCKET]] on gpu : tensor<272xf32> -> !zen.compressed<tensor<272xf32>, #zen.compression<bf16>>
  %bf = zen.compress %bucket on gpu : tensor<272xf32> -> !zen.compressed<tensor<272xf32>, #zen.compression<bf16>>
  // CHECK: zen.compress %[[BUCKET]] on gpu : tensor<272xf32> -> !zen.compressed<tensor<272xf32>, #zen.compression<int8>>
  %i8 = zen.compress %bucket on gpu : tensor<272xf32> -> !zen.compressed<tensor<272xf32>, #zen.compression<int8>>
  // CHECK: zen.compress %[[BUCKET]] on gpu {error_feedback} : tensor<272xf32> -> !zen.compressed<tensor<272xf32>, #zen.compression<randomk, ratio = 5.000000e-02>>
  %rk = zen.compress %bucket on gpu {error_feedback} : tensor<272xf32> -> !zen.compressed<tensor<272xf32>, #zen.compression<randomk, ratio = 0.05>>
  // CHECK: zen.compress %[[BUCKET]] on gpu {error_feedback} : tensor<272xf32> -> !zen.compressed<tensor<272xf32>, #zen.compression<sign>>
  %sg = zen.compress %bucket on gpu {error_feedback} : tensor<272xf32> -> !zen.compressed<tensor<272xf32>, #zen.compression<sign>>

  // Other collectives.
  // CHECK: zen.all_to_all %[[BUCKET]] {group = #zen.group<size = 8, nodes = 1>} : tensor<272xf32>
  %a2a = zen.all_to_all %bucket {group = #zen.group<size = 8, nodes = 1>} : tensor<272xf32>
  // CHECK: zen.broadcast %[[BUCKET]] root 0 {group = #zen.group<size = 8, nodes = 1>} : tensor<272xf32>
  %bc = zen.broadcast %bucket root 0 {group = #zen.group<size = 8, nodes = 1>} : tensor<272xf32>
  // CHECK: zen.send %[[BUCKET]] to 1 {group = #zen.group<size = 2, nodes = 2>} : tensor<272xf32>
  zen.send %bucket to 1 {group = #zen.group<size = 2, nodes = 2>} : tensor<272xf32>
  // CHECK: zen.recv from 0 {group = #zen.group<size = 2, nodes = 2>} : tensor<272xf32>
  %rv = zen.recv from 0 {group = #zen.group<size = 2, nodes = 2>} : tensor<272xf32>
  // CHECK: zen.all_reduce max %[[BUCKET]] {algorithm = #zen<algorithm hierarchical>, group = #zen.group<size = 64, nodes = 8>} : tensor<272xf32>
  %mx = zen.all_reduce max %bucket {group = #zen.group<size = 64, nodes = 8>, algorithm = #zen<algorithm hierarchical>} : tensor<272xf32>
  // CHECK: zen.all_reduce min %[[BUCKET]] {algorithm = #zen<algorithm tree>
  %mn = zen.all_reduce min %bucket {group = #zen.group<size = 64, nodes = 8>, algorithm = #zen<algorithm tree>} : tensor<272xf32>
  return
}

// Partitioning: the parallel configuration, shards, stages and non-bucket collectives.
// CHECK-LABEL: module attributes {zen.parallel = #zen.parallel<tp = 8, pp = 2, dp = 4, zero = 1, sequence_parallel = true, recompute = full, micro_batches = 16, ep = 4, expert_tensor_parallel = true>}
module attributes {zen.parallel = #zen.parallel<tp = 8, pp = 2, dp = 4, zero = 1, sequence_parallel = true, recompute = full, micro_batch = 1, micro_batches = 16, virtual_stages = 1, ep = 4, expert_tensor_parallel = true>} {
  // CHECK-LABEL: func.func @partitioned
  func.func @partitioned(%x: tensor<128x768xf32>) {
    // CHECK: %[[W:.*]] = zen.param "fc1.weight" {shard = #zen.shard<column, 8, dim = 0>, stage = 1 : i64} : tensor<384x768xf32>
    %w = zen.param "fc1.weight" {shard = #zen.shard<column, 8, dim = 0>, stage = 1 : i64} : tensor<384x768xf32>
    // CHECK: %[[S:.*]] = zen.reduce_scatter sum %{{.*}} {group = #zen.group<size = 8, nodes = 1>, zen.role = #zen.role<sequence_parallel>} : tensor<128x768xf32> -> tensor<16x768xf32>
    %s = zen.reduce_scatter sum %x {group = #zen.group<size = 8, nodes = 1>, zen.role = #zen.role<sequence_parallel>} : tensor<128x768xf32> -> tensor<16x768xf32>
    // CHECK: zen.all_gather %[[S]] {group = #zen.group<size = 8, nodes = 1>, zen.prefetch = 1 : i64, zen.role = #zen.role<zero>} : tensor<16x768xf32> -> tensor<128x768xf32>
    %g = zen.all_gather %s {group = #zen.group<size = 8, nodes = 1>, zen.prefetch = 1 : i64, zen.role = #zen.role<zero>} : tensor<16x768xf32> -> tensor<128x768xf32>
    // CHECK: zen.send %{{.*}} to 1 {group = #zen.group<size = 2, nodes = 1>, stage = 0 : i64, zen.role = #zen.role<pipeline>}
    zen.send %x to 1 {group = #zen.group<size = 2, nodes = 1>, stage = 0 : i64, zen.role = #zen.role<pipeline>} : tensor<128x768xf32>
    // A ZeRO-3 parameter shard with its whole gradient.
    // CHECK: %[[Z:.*]] = zen.param "fc2.weight" : tensor<32x768xf32>
    %z = zen.param "fc2.weight" : tensor<32x768xf32>
    // CHECK: zen.gradient %[[Z]], %{{.*}} {ready_order = 0 : i64} : tensor<128x768xf32> shard tensor<32x768xf32>
    %gz = zen.gradient %z, %x {ready_order = 0 : i64} : tensor<128x768xf32> shard tensor<32x768xf32>
    return
  }
}

// The large-model decision: the configuration with its decomposition, stage
// split and MoE schedule, the recognised transformer, and the search's setup.
// CHECK-LABEL: module attributes {zen.parallel = #zen.parallel<tp = 2, pp = 2, dp = 8, ep = 2, attention_forward_chunks = 2, mlp_backward_chunks = 4, stage_layers = [3, 1], experts = <ep = 2, forward = 2, backward = 1, all_to_all = "flat">>, zen.parallel_search = #zen.parallel_search<global_batch = 64, optimizer = "adam", moe_imbalance = 1.500000e+00 : f64, compressor = "fp16", forced = true, configurations_scored = 12, baselines = [#zen.baseline<name = "ddp", iteration_us = 1.250000e+02 : f64, configuration = "tp 1 pp 1 dp 64">, #zen.baseline<name = "zero3", not_fitting = "does not fit">]>, zen.transformer = #zen.transformer<family = "gpt", layers = 4, hidden = 64, heads = 4, kv_heads = 4, ffn = 256, mlp = "gelu", norm = "layernorm", positions = "learned", seq = 16, vocab = 100, model_batch = 1, layer_params = 5.000000e+04 : f64, embedding_params = 6.400000e+03 : f64, head_params = 6.400000e+03 : f64, replicated = ["/head/MatMul"], moe = <blocks = [1, 3], tokens = 16, hidden = 64, ffn = 128, fc1_rows = 128, experts = 4, top_k = 2, capacity_factor = 1.000000e+00 : f64, biases = true, capacity_rows = 8, block_params = 2.000000e+04 : f64, expert_params = 6.600000e+04 : f64>>}
module attributes {
    zen.parallel = #zen.parallel<tp = 2, pp = 2, dp = 8, ep = 2, attention_forward_chunks = 2,
        mlp_backward_chunks = 4, stage_layers = [3, 1],
        experts = #zen.moe_schedule<ep = 2, forward = 2, backward = 1, all_to_all = "flat">>,
    zen.transformer = #zen.transformer<family = "gpt", layers = 4, hidden = 64, heads = 4,
        kv_heads = 4, ffn = 256, mlp = "gelu", norm = "layernorm", positions = "learned",
        seq = 16, vocab = 100, model_batch = 1, layer_params = 5.0e4 : f64,
        embedding_params = 6.4e3 : f64, head_params = 6.4e3 : f64, replicated = ["/head/MatMul"],
        moe = #zen.moe_blocks<blocks = [1, 3], tokens = 16, hidden = 64, ffn = 128,
            fc1_rows = 128, experts = 4, top_k = 2, capacity_factor = 1.0 : f64, biases = true,
            capacity_rows = 8, block_params = 2.0e4 : f64, expert_params = 6.6e4 : f64>>,
    zen.parallel_search = #zen.parallel_search<global_batch = 64, optimizer = "adam",
        moe_imbalance = 1.5 : f64, compressor = "fp16", forced = true, configurations_scored = 12,
        baselines = [#zen.baseline<name = "ddp", iteration_us = 125.0 : f64, configuration = "tp 1 pp 1 dp 64">,
                     #zen.baseline<name = "zero3", not_fitting = "does not fit">]>} {
}

// What zen-plan-moe searched, and the baselines zenopt compared like with like.
// CHECK-LABEL: module attributes {zen.moe_search = #zen.moe_search<imbalance = 1.200000e+00 : f64, searched = {"1" = 1.250000e+01 : f64, "2" = 8.000000e+00 : f64}, not_fitting = {"8" = 9.000000e+10 : f64}, baselines = [#zen.baseline<name = "ddp", iteration_us = 2.000000e+01 : f64, uncompressed_us = 2.500000e+01 : f64>]>}
module attributes {zen.moe_search = #zen.moe_search<imbalance = 1.2 : f64,
    searched = {"1" = 12.5 : f64, "2" = 8.0 : f64}, not_fitting = {"8" = 9.0e10 : f64},
    baselines = [#zen.baseline<name = "ddp", iteration_us = 20.0 : f64, uncompressed_us = 25.0 : f64>]>} {
}

// A row-sparse gradient synchronised under its sparse scheme, with the statistics it was chosen from.
// CHECK-LABEL: func.func @sparse
// CHECK-SAME: (%[[D:.*]]: tensor<1000x8xf32>)
func.func @sparse(%d: tensor<1000x8xf32>) {
  // CHECK: %[[T:.*]] = zen.param "table" : tensor<1000x8xf32>
  %t = zen.param "table" : tensor<1000x8xf32>
  // CHECK: %[[G:.*]] = zen.gradient %[[T]], %[[D]] {ready_order = 0 : i64, row_lookups = 64 : i64, shared_rows} : tensor<1000x8xf32>
  %g = zen.gradient %t, %d {ready_order = 0 : i64, row_lookups = 64 : i64, shared_rows} : tensor<1000x8xf32>
  // CHECK: %[[S:.*]] = zen.sparse_all_reduce %[[G]] balanced {group = #zen.group<size = 4, nodes = 2>, statistics = #zen.sparsity<density = 6.300000e-02 : f64, gamma = [1.000000e+00, 1.930000e+00, 3.700000e+00], skew = 5.100000e-01 : f64, hash_skew = 1.250000e-01 : f64, block_density = 2.000000e-01 : f64, block_gamma = [1.000000e+00, 1.800000e+00, 3.200000e+00], source = measured>} : tensor<1000x8xf32>
  %s = zen.sparse_all_reduce %g balanced {group = #zen.group<size = 4, nodes = 2>, statistics = #zen.sparsity<density = 0.063 : f64, gamma = [1.0 : f64, 1.93 : f64, 3.7 : f64], skew = 0.51 : f64, hash_skew = 0.125 : f64, block_density = 0.2 : f64, block_gamma = [1.0 : f64, 1.8 : f64, 3.2 : f64], source = measured>} : tensor<1000x8xf32>
  return
}

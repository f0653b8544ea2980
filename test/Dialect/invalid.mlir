// RUN: zenopt-opt %s -split-input-file -verify-diagnostics
// Every verifier message of the zen dialect (attributes, types, ops) has a failing case here.

func.func @f() {
  // expected-error @+1 {{compression ratio must be in (0, 1], got 1.5}}
  %0 = zen.param "w" {m = #zen.compression<topk, ratio = 1.5>} : tensor<4xf32>
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{compression ratio must be in (0, 1], got 0}}
  %0 = zen.param "w" {m = #zen.compression<randomk>} : tensor<4xf32>
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{compression method 'fp16' takes no ratio}}
  %0 = zen.param "w" {m = #zen.compression<fp16, ratio = 0.5>} : tensor<4xf32>
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{powersgd rank must be at least 1, got 0}}
  %0 = zen.param "w" {m = #zen.compression<powersgd, rank = 0>} : tensor<4xf32>
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{compression method 'sign' takes no rank}}
  %0 = zen.param "w" {m = #zen.compression<sign, rank = 2>} : tensor<4xf32>
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{unknown compression method 'zip'}}
  %0 = zen.param "w" {m = #zen.compression<zip>} : tensor<4xf32>
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{unknown compression parameter 'level'}}
  %0 = zen.param "w" {m = #zen.compression<int8, level = 3>} : tensor<4xf32>
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{process group size must be at least 1, got 0}}
  %0 = zen.param "w" {g = #zen.group<size = 0, nodes = 1>} : tensor<4xf32>
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{process group of 12 ranks cannot spread evenly over 8 nodes}}
  %0 = zen.param "w" {g = #zen.group<size = 12, nodes = 8>} : tensor<4xf32>
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{schedule stream must be non-negative, got -1}}
  %0 = zen.param "w" {s = #zen.schedule<stream = -1, priority = 0, order = 0>} : tensor<4xf32>
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{schedule order must be non-negative, got -2}}
  %0 = zen.param "w" {s = #zen.schedule<stream = 0, priority = 0, order = -2>} : tensor<4xf32>
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{compressed tensor must have a static shape}}
  %0 = zen.param "w" {t = !zen.compressed<tensor<?xf32>, #zen.compression<fp16>>} : tensor<4xf32>
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{only floating-point tensors can be compressed}}
  %0 = zen.param "w" {t = !zen.compressed<tensor<4xi32>, #zen.compression<fp16>>} : tensor<4xf32>
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{compression method 'none' has no compressed form}}
  %0 = zen.param "w" {t = !zen.compressed<tensor<4xf32>, #zen.compression<none>>} : tensor<4xf32>
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{parameter name must not be empty}}
  %0 = zen.param "" : tensor<4xf32>
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{parameter must have a static shape}}
  %0 = zen.param "w" : tensor<?xf32>
  return
}

// -----

func.func @f(%x: tensor<4xf32>) {
  // expected-error @+1 {{op_type must not be empty}}
  %0 = zen.compute "" forward (%x) {flops = 1 : i64, bytes = 1 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @f(%x: tensor<4xf32>) {
  // expected-error @+1 {{flops must be non-negative, got -5}}
  %0 = zen.compute "Relu" forward (%x) {flops = -5 : i64, bytes = 1 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @f(%x: tensor<4xf32>) {
  // expected-error @+1 {{bytes must be non-negative, got -7}}
  %0 = zen.compute "Relu" backward (%x) {flops = 5 : i64, bytes = -7 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @f(%x: tensor<4xf32>) {
  // expected-error @+1 {{first operand must be a zen.param}}
  %0 = zen.gradient %x, %x {ready_order = 0 : i64} : tensor<4xf32>
  return
}

// -----

func.func @f(%x: tensor<4xf32>) {
  %w = zen.param "w" : tensor<4xf32>
  // expected-error @+1 {{ready_order must be non-negative, got -1}}
  %0 = zen.gradient %w, %x {ready_order = -1 : i64} : tensor<4xf32>
  return
}

// -----

// A parameter's type is its gradient's, or a ZeRO-3 shard of it along one dimension.
func.func @f(%x: tensor<4x6xf32>) {
  %w = zen.param "w" : tensor<3x6xf32>
  // expected-error @+1 {{parameter type 'tensor<3x6xf32>' must be the gradient's 'tensor<4x6xf32>' or a shard of it along one dimension (ZeRO-3)}}
  %0 = zen.gradient %w, %x {ready_order = 0 : i64} : tensor<4x6xf32> shard tensor<3x6xf32>
  return
}

// -----

func.func @f(%x: tensor<4x6xf32>) {
  %w = zen.param "w" : tensor<2x3xf32>
  // expected-error @+1 {{parameter type 'tensor<2x3xf32>' must be the gradient's 'tensor<4x6xf32>' or a shard of it along one dimension (ZeRO-3)}}
  %0 = zen.gradient %w, %x {ready_order = 0 : i64} : tensor<4x6xf32> shard tensor<2x3xf32>
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{needs at least one tensor}}
  %0 = "zen.pack"() : () -> tensor<4xf32>
  return
}

// -----

func.func @f(%x: tensor<4xf32>) {
  // expected-error @+1 {{bucket must be a static 1-D tensor}}
  %0 = zen.pack %x : tensor<4xf32> -> tensor<2x2xf32>
  return
}

// -----

func.func @f(%x: tensor<?xf32>) {
  // expected-error @+1 {{packed tensors must have static shapes}}
  %0 = zen.pack %x : tensor<?xf32> -> tensor<8xf32>
  return
}

// -----

func.func @f(%x: tensor<4xf16>) {
  // expected-error @+1 {{element type 'f16' differs from the bucket's 'f32'}}
  %0 = zen.pack %x : tensor<4xf16> -> tensor<8xf32>
  return
}

// -----

func.func @f(%x: tensor<4xf32>) {
  // expected-error @+1 {{tensors hold 8 elements but the bucket only 6}}
  %0 = zen.pack %x, %x : tensor<4xf32>, tensor<4xf32> -> tensor<6xf32>
  return
}

// -----

func.func @f(%x: tensor<6xf32>) {
  // expected-error @+1 {{tensors hold 8 elements but the bucket only 6}}
  %0:2 = zen.unpack %x : tensor<6xf32> -> tensor<4xf32>, tensor<4xf32>
  return
}

// -----

func.func @f(%x: !zen.compressed<tensor<16xf32>, #zen.compression<topk, ratio = 0.1>>) {
  // expected-error @+1 {{compression method 'topk' cannot be all-reduced; all-gather it instead}}
  %0 = zen.all_reduce sum %x {group = #zen.group<size = 8, nodes = 1>} : !zen.compressed<tensor<16xf32>, #zen.compression<topk, ratio = 0.1>>
  return
}

// -----

func.func @f(%x: tensor<16xf32>) {
  // expected-error @+1 {{chunk count must be at least 1, got 0}}
  %0 = zen.all_reduce avg %x {group = #zen.group<size = 8, nodes = 1>, chunks = 0 : i64} : tensor<16xf32>
  return
}

// -----

func.func @f(%x: tensor<16xf32>) {
  // expected-error @+1 {{chunk count must be at least 1, got 0}}
  %0 = zen.all_to_all %x {group = #zen.group<size = 8, nodes = 1>, chunks = 0 : i64} : tensor<16xf32>
  return
}

// -----

func.func @f(%x: tensor<16xf32>) {
  // expected-error @+1 {{chunk count must be at least 1, got 0}}
  %0 = zen.broadcast %x root 0 {group = #zen.group<size = 8, nodes = 1>, chunks = 0 : i64} : tensor<16xf32>
  return
}

// -----

func.func @f(%x: tensor<16xf32>) {
  // expected-error @+1 {{chunk count must be at least 1, got 0}}
  %0 = zen.reduce_scatter sum %x {group = #zen.group<size = 8, nodes = 1>, chunks = 0 : i64} : tensor<16xf32> -> tensor<2xf32>
  return
}

// -----

func.func @f(%x: tensor<2xf32>) {
  // expected-error @+1 {{chunk count must be at least 1, got 0}}
  %0 = zen.all_gather %x {group = #zen.group<size = 8, nodes = 1>, chunks = 0 : i64} : tensor<2xf32> -> tensor<16xf32>
  return
}

// -----

func.func @f(%x: tensor<16xf32>) {
  // expected-error @+1 {{chunk count must be at least 1, got 0}}
  zen.send %x to 1 {group = #zen.group<size = 8, nodes = 1>, chunks = 0 : i64} : tensor<16xf32>
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{chunk count must be at least 1, got 0}}
  %0 = zen.recv from 1 {group = #zen.group<size = 8, nodes = 1>, chunks = 0 : i64} : tensor<16xf32>
  return
}

// -----

func.func @f(%x: tensor<4x4xf32>) {
  // expected-error @+1 {{operates on 1-D buckets}}
  %0 = zen.reduce_scatter sum %x {group = #zen.group<size = 8, nodes = 1>} : tensor<4x4xf32> -> tensor<2xf32>
  return
}

// -----

func.func @f(%x: tensor<16xf32>) {
  // expected-error @+1 {{result element type must match the input's}}
  %0 = zen.reduce_scatter sum %x {group = #zen.group<size = 8, nodes = 1>} : tensor<16xf32> -> tensor<2xf16>
  return
}

// -----

func.func @f(%x: tensor<17xf32>) {
  // expected-error @+1 {{shard must hold ceil(17 / 8) = 3 elements, got 2}}
  %0 = zen.reduce_scatter sum %x {group = #zen.group<size = 8, nodes = 1>} : tensor<17xf32> -> tensor<2xf32>
  return
}

// -----

func.func @f(%x: !zen.compressed<tensor<16xf32>, #zen.compression<topk, ratio = 0.1>>) {
  // expected-error @+1 {{a compressed all-gather keeps its payload type}}
  %0 = zen.all_gather %x {group = #zen.group<size = 8, nodes = 1>} : !zen.compressed<tensor<16xf32>, #zen.compression<topk, ratio = 0.1>> -> !zen.compressed<tensor<16xf32>, #zen.compression<sign>>
  return
}

// -----

func.func @f(%x: tensor<2x2xf32>) {
  // expected-error @+1 {{operates on 1-D buckets}}
  %0 = zen.all_gather %x {group = #zen.group<size = 8, nodes = 1>} : tensor<2x2xf32> -> tensor<32xf32>
  return
}

// -----

func.func @f(%x: tensor<2xf32>) {
  // expected-error @+1 {{result element type must match the input's}}
  %0 = zen.all_gather %x {group = #zen.group<size = 8, nodes = 1>} : tensor<2xf32> -> tensor<16xbf16>
  return
}

// -----

func.func @f(%x: tensor<2xf32>) {
  // expected-error @+1 {{result must hold 16 elements (input times group size), got 12}}
  %0 = zen.all_gather %x {group = #zen.group<size = 8, nodes = 1>} : tensor<2xf32> -> tensor<12xf32>
  return
}

// -----

func.func @f(%x: tensor<12xf32>) {
  // expected-error @+1 {{element count 12 does not divide by the group size 8}}
  %0 = zen.all_to_all %x {group = #zen.group<size = 8, nodes = 1>} : tensor<12xf32>
  return
}

// -----

func.func @f(%x: tensor<16xf32>) {
  // expected-error @+1 {{root 8 is outside the group of 8 ranks}}
  %0 = zen.broadcast %x root 8 {group = #zen.group<size = 8, nodes = 1>} : tensor<16xf32>
  return
}

// -----

func.func @f(%x: tensor<16xf32>) {
  // expected-error @+1 {{peer -1 is outside the group of 8 ranks}}
  zen.send %x to -1 {group = #zen.group<size = 8, nodes = 1>} : tensor<16xf32>
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{peer 9 is outside the group of 8 ranks}}
  %0 = zen.recv from 9 {group = #zen.group<size = 8, nodes = 1>} : tensor<16xf32>
  return
}

// -----

func.func @f(%x: tensor<16xf32>) {
  // expected-error @+1 {{compressed type must wrap the input type 'tensor<16xf32>'}}
  %0 = zen.compress %x on gpu : tensor<16xf32> -> !zen.compressed<tensor<8xf32>, #zen.compression<fp16>>
  return
}

// -----

func.func @f(%x: !zen.compressed<tensor<16xf32>, #zen.compression<topk, ratio = 0.1>>) {
  // expected-error @+1 {{result type must be the compressed payload's original type 'tensor<16xf32>'}}
  %0 = zen.decompress %x on cpu : !zen.compressed<tensor<16xf32>, #zen.compression<topk, ratio = 0.1>> -> tensor<8xf32>
  return
}

// -----

// expected-error @+1 {{prediction compute_us must be a finite, non-negative f64, got -1.000000e+00 : f64}}
module attributes {zen.predicted = #zen.prediction<iteration_us = 1.0 : f64, compute_us = -1.0 : f64, exposed_comm_us = 0.0 : f64, lower_bound_us = 1.0 : f64>} {}

// -----

// expected-error @+1 {{'zen.cluster' must be a string, got 8 : i64}}
module attributes {zen.cluster = 8 : i64} {}

// -----

// expected-error @+1 {{'zen.world_size' must be a positive integer, got 0 : i64}}
module attributes {zen.world_size = 0 : i64} {}

// -----

// expected-error @+1 {{'zen.nodes' must be a positive integer, got -2 : i64}}
module attributes {zen.nodes = -2 : i64} {}

// -----

// expected-error @+1 {{'zen.heads' must be a positive integer, got 0 : i64}}
module attributes {zen.heads = 0 : i64} {}

// -----

// expected-error @+1 {{'zen.kv_heads' must be a positive integer, got "8"}}
module attributes {zen.kv_heads = "8"} {}

// -----

// expected-error @+1 {{'zen.predicted' must be a #zen.prediction, got 1.000000e+00 : f64}}
module attributes {zen.predicted = 1.0 : f64} {}

// -----

// expected-error @+1 {{'zen.baselines' must be an array of #zen.baseline, got {ddp = 1.000000e+00 : f64}}}
module attributes {zen.baselines = {ddp = 1.0 : f64}} {}

// -----

// expected-error @+1 {{'zen.baselines' must hold #zen.baseline entries, got "ddp"}}
module attributes {zen.baselines = ["ddp"]} {}

// -----

// expected-error @+1 {{'zen.baselines' must be sorted by name, each name once ('wfbp' then 'ddp')}}
module attributes {zen.baselines = [#zen.baseline<name = "wfbp", iteration_us = 2.0 : f64>,
                                    #zen.baseline<name = "ddp", iteration_us = 1.0 : f64>]} {}

// -----

// expected-error @+1 {{baseline name must not be empty}}
module attributes {zen.baselines = [#zen.baseline<name = "", iteration_us = 1.0 : f64>]} {}

// -----

// expected-error @+1 {{baseline 'ddp' times must be finite, non-negative f64 microseconds}}
module attributes {zen.baselines = [#zen.baseline<name = "ddp", uncompressed_us = -1.0 : f64>]} {}

// -----

// expected-error @+1 {{baseline 'zero3' has both a time and a reason it does not fit}}
module attributes {zen.baselines = [#zen.baseline<name = "zero3", iteration_us = 1.0 : f64, not_fitting = "92 GB">]} {}

// -----

// expected-error @+1 {{baseline 'megatron' needs a time or a reason it does not fit}}
module attributes {zen.baselines = [#zen.baseline<name = "megatron", configuration = "tp 8">]} {}

// -----

// expected-error @+1 {{parallel tp must be at least 1, got 0}}
module attributes {zen.parallel = #zen.parallel<tp = 0>} {}

// -----

// expected-error @+1 {{parallel micro_batches must be at least 1, got 0}}
module attributes {zen.parallel = #zen.parallel<micro_batches = 0>} {}

// -----

// expected-error @+1 {{parallel zero stage must be 0, 1, 2 or 3, got 4}}
module attributes {zen.parallel = #zen.parallel<zero = 4>} {}

// -----

// expected-error @+1 {{parallel virtual_stages = 2 needs pipeline stages (pp > 1)}}
module attributes {zen.parallel = #zen.parallel<virtual_stages = 2>} {}

// -----

// expected-error @+1 {{parallel ep must be at least 1, got 0}}
module attributes {zen.parallel = #zen.parallel<ep = 0>} {}

// -----

// expected-error @+1 {{parallel ep = 3 must divide dp = 8}}
module attributes {zen.parallel = #zen.parallel<dp = 8, ep = 3>} {}

// -----

// expected-error @+1 {{parallel expert_tensor_parallel needs tensor parallelism (tp > 1)}}
module attributes {zen.parallel = #zen.parallel<dp = 8, ep = 4, expert_tensor_parallel = true>} {}

// -----

// expected-error @+1 {{'zen.parallel' must be a #zen.parallel, got 8 : i64}}
module attributes {zen.parallel = 8 : i64} {}

// -----

// expected-error @+1 {{'zen.tp_replicated' must be an array of node names, got [1]}}
module attributes {zen.tp_replicated = [1 : i64]} {}

// -----

func.func @f() {
  // expected-error @+1 {{shard parts must be at least 1, got 0}}
  %w = zen.param "w" {shard = #zen.shard<column, 0, dim = 0>} : tensor<4x4xf32>
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{shard dim must be non-negative, got -1}}
  %w = zen.param "w" {shard = #zen.shard<row, 2, dim = -1>} : tensor<4x4xf32>
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{shard dim 2 is outside the parameter's 2 dimensions}}
  %w = zen.param "w" {shard = #zen.shard<row, 2, dim = 2>} : tensor<4x4xf32>
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{stage must be non-negative, got -1}}
  %w = zen.param "w" {stage = -1 : i64} : tensor<4xf32>
  return
}

// -----

func.func @f(%x: tensor<4xf32>) {
  // expected-error @+1 {{stage must be non-negative, got -2}}
  %y = zen.compute "Relu" forward(%x) {flops = 4 : i64, bytes = 32 : i64, stage = -2 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @f(%g: tensor<4xf32>) {
  %w = zen.param "w" : tensor<4xf32>
  // expected-error @+1 {{stage must be non-negative, got -1}}
  %0 = zen.gradient %w, %g {ready_order = 0 : i64, stage = -1 : i64} : tensor<4xf32>
  return
}

// -----

func.func @f(%x: tensor<4xf32>) {
  // expected-error @+1 {{stage must be non-negative, got -1}}
  zen.send %x to 1 {group = #zen.group<size = 2, nodes = 1>, stage = -1 : i64} : tensor<4xf32>
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{stage must be non-negative, got -1}}
  %x = zen.recv from 0 {group = #zen.group<size = 2, nodes = 1>, stage = -1 : i64} : tensor<4xf32>
  return
}

// -----

func.func @f(%x: tensor<8x6xf32>) {
  // expected-error @+1 {{dimension 0 of 'tensor<8x6xf32>' must be 2 times that of 'tensor<3x6xf32>'}}
  %0 = zen.reduce_scatter sum %x {group = #zen.group<size = 2, nodes = 1>} : tensor<8x6xf32> -> tensor<3x6xf32>
  return
}

// -----

func.func @f(%x: tensor<4x6xf32>) {
  // expected-error @+1 {{an N-D collective must shard exactly one dimension, 2 differ}}
  %0 = zen.all_gather %x {group = #zen.group<size = 2, nodes = 1>} : tensor<4x6xf32> -> tensor<8x12xf32>
  return
}

// -----

func.func @f(%x: tensor<4x6xf32>) {
  // expected-error @+1 {{result element type must match the input's}}
  %0 = zen.all_gather %x {group = #zen.group<size = 2, nodes = 1>} : tensor<4x6xf32> -> tensor<8x6xf16>
  return
}

// -----

func.func @f(%x: tensor<4xf32>) {
  // expected-error @+1 {{'zen.role' must be a #zen.role on a collective, got #zen.role<pipeline>}}
  %y = zen.compute "Relu" forward(%x) {flops = 4 : i64, bytes = 32 : i64, zen.role = #zen.role<pipeline>} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @f(%x: tensor<4xf32>) {
  // expected-error @+1 {{'zen.prefetch' must be a non-negative integer on a zen.all_gather, got -1 : i64}}
  %0 = zen.all_reduce sum %x {group = #zen.group<size = 2, nodes = 1>, zen.prefetch = -1 : i64} : tensor<4xf32>
  return
}

// -----

func.func @f(%x: tensor<4xf32>) {
  // expected-error @+1 {{'zen.tp_chunks' must be a positive integer on a zen.compute, got 2 : i64}}
  %0 = zen.all_reduce sum %x {group = #zen.group<size = 2, nodes = 1>, zen.tp_chunks = 2 : i64} : tensor<4xf32>
  return
}

// -----

func.func @f(%x: tensor<6x8xf32>, %w: tensor<8x8xf32>) {
  // expected-error @+1 {{'zen.tp_chunks' must be a positive integer on a zen.compute, got 0 : i64}}
  %y = zen.compute "MatMul" forward(%x, %w) {flops = 768 : i64, bytes = 640 : i64, zen.tp_chunks = 0 : i64} : (tensor<6x8xf32>, tensor<8x8xf32>) -> tensor<6x8xf32>
  return
}

// -----

func.func @f(%x: tensor<6x8xf32>, %w: tensor<8x8xf32>) {
  // expected-error @+1 {{'zen.tp_chunks' = 4 does not divide the 6 tokens of the result}}
  %y = zen.compute "MatMul" forward(%x, %w) {flops = 768 : i64, bytes = 640 : i64, zen.tp_chunks = 4 : i64} : (tensor<6x8xf32>, tensor<8x8xf32>) -> tensor<6x8xf32>
  return
}

// -----

func.func @f(%x: tensor<8xf32>) {
  // expected-error @+1 {{'zen.tp_chunks' needs a static result of rank 2 or more}}
  %y = zen.compute "Relu" forward(%x) {flops = 8 : i64, bytes = 64 : i64, zen.tp_chunks = 2 : i64} : (tensor<8xf32>) -> tensor<8xf32>
  return
}

// -----
// Mixture-of-Experts ops.

func.func @f(%x: tensor<16x8xf32>, %r: tensor<16x4xf32>) {
  // expected-error @+1 {{flops must be non-negative, got -1}}
  %d, %g = zen.moe_dispatch %x, %r top 2 {flops = -1 : i64, bytes = 0 : i64} : tensor<16x8xf32>, tensor<16x4xf32> -> tensor<4x8x8xf32>, tensor<16x2xf32>
  return
}

// -----

func.func @f(%x: tensor<16x8xf32>, %r: tensor<16x4xf32>) {
  // expected-error @+1 {{bytes must be non-negative, got -2}}
  %d, %g = zen.moe_dispatch %x, %r top 2 {flops = 0 : i64, bytes = -2 : i64} : tensor<16x8xf32>, tensor<16x4xf32> -> tensor<4x8x8xf32>, tensor<16x2xf32>
  return
}

// -----

func.func @f(%x: tensor<?x8xf32>, %r: tensor<16x4xf32>) {
  // expected-error @+1 {{operands and results must have static shapes}}
  %d, %g = zen.moe_dispatch %x, %r top 2 {flops = 0 : i64, bytes = 0 : i64} : tensor<?x8xf32>, tensor<16x4xf32> -> tensor<4x8x8xf32>, tensor<16x2xf32>
  return
}

// -----

func.func @f(%x: tensor<128xf32>, %r: tensor<16x4xf32>) {
  // expected-error @+1 {{input must be [tokens, hidden] or [batch, sequence, hidden], got 'tensor<128xf32>'}}
  %d, %g = zen.moe_dispatch %x, %r top 2 {flops = 0 : i64, bytes = 0 : i64} : tensor<128xf32>, tensor<16x4xf32> -> tensor<4x8x8xf32>, tensor<16x2xf32>
  return
}

// -----

func.func @f(%x: tensor<16x8xf32>, %r: tensor<15x4xf32>) {
  // expected-error @+1 {{router must be [tokens = 16, experts], got 'tensor<15x4xf32>'}}
  %d, %g = zen.moe_dispatch %x, %r top 2 {flops = 0 : i64, bytes = 0 : i64} : tensor<16x8xf32>, tensor<15x4xf32> -> tensor<4x8x8xf32>, tensor<16x2xf32>
  return
}

// -----

func.func @f(%x: tensor<16x8xf32>, %r: tensor<16x4xf32>) {
  // expected-error @+1 {{top-k 5 must be between 1 and the 4 experts}}
  %d, %g = zen.moe_dispatch %x, %r top 5 {flops = 0 : i64, bytes = 0 : i64} : tensor<16x8xf32>, tensor<16x4xf32> -> tensor<4x8x8xf32>, tensor<16x5xf32>
  return
}

// -----

func.func @f(%x: tensor<16x8xf32>, %r: tensor<16x4xf32>) {
  // expected-error @+1 {{dispatched must be [experts = 4, capacity >= 1, hidden = 8], got 'tensor<4x8x6xf32>'}}
  %d, %g = zen.moe_dispatch %x, %r top 2 {flops = 0 : i64, bytes = 0 : i64} : tensor<16x8xf32>, tensor<16x4xf32> -> tensor<4x8x6xf32>, tensor<16x2xf32>
  return
}

// -----

func.func @f(%x: tensor<16x8xf32>, %r: tensor<16x4xf32>) {
  // expected-error @+1 {{gates must be [tokens = 16, k = 2], got 'tensor<16x1xf32>'}}
  %d, %g = zen.moe_dispatch %x, %r top 2 {flops = 0 : i64, bytes = 0 : i64} : tensor<16x8xf32>, tensor<16x4xf32> -> tensor<4x8x8xf32>, tensor<16x1xf32>
  return
}

// -----

func.func @f(%d: tensor<32x8xf32>, %w1: tensor<4x32x8xf32>, %w2: tensor<4x8x32xf32>) {
  // expected-error @+1 {{dispatched must be [experts, capacity, hidden], got 'tensor<32x8xf32>'}}
  %e = zen.moe_experts relu %d, %w1, %w2 {flops = 0 : i64, bytes = 0 : i64} : (tensor<32x8xf32>, tensor<4x32x8xf32>, tensor<4x8x32xf32>) -> tensor<32x8xf32>
  return
}

// -----

func.func @f(%d: tensor<4x8x8xf32>, %w1: tensor<4x32x8xf32>, %w2: tensor<4x32x16xf32>) {
  // expected-error @+1 {{fc2_weight must be [experts = 4, hidden = 8, ffn] or [experts = 4, ffn, hidden = 8], got 'tensor<4x32x16xf32>'}}
  %e = zen.moe_experts relu %d, %w1, %w2 {flops = 0 : i64, bytes = 0 : i64} : (tensor<4x8x8xf32>, tensor<4x32x8xf32>, tensor<4x32x16xf32>) -> tensor<4x8x8xf32>
  return
}

// -----

// fc2 in the earlier [experts, ffn, hidden] layout wants fc1 in it too.
func.func @f(%d: tensor<4x8x8xf32>, %w1: tensor<4x32x8xf32>, %w2: tensor<4x32x8xf32>) {
  // expected-error @+1 {{fc1_weight must be [experts = 4, hidden = 8, ffn = 32] for relu (fc2_weight has the earlier [experts, ffn, hidden] layout), got 'tensor<4x32x8xf32>'}}
  %e = zen.moe_experts relu %d, %w1, %w2 {flops = 0 : i64, bytes = 0 : i64} : (tensor<4x8x8xf32>, tensor<4x32x8xf32>, tensor<4x32x8xf32>) -> tensor<4x8x8xf32>
  return
}

// -----

func.func @f(%d: tensor<4x8x8xf32>, %w1: tensor<4x32x8xf32>, %w2: tensor<4x8x32xf32>, %w3: tensor<4x8x32xf32>) {
  // expected-error @+1 {{fc3_weight must be [experts = 4, ffn = 32, hidden = 8], got 'tensor<4x8x32xf32>'}}
  %e = zen.moe_experts silu %d, %w1, %w2, fc3 %w3 {flops = 0 : i64, bytes = 0 : i64} : (tensor<4x8x8xf32>, tensor<4x32x8xf32>, tensor<4x8x32xf32>, tensor<4x8x32xf32>) -> tensor<4x8x8xf32>
  return
}

// -----

func.func @f(%d: tensor<4x8x8xf32>, %w1: tensor<4x32x8xf32>, %w2: tensor<4x8x32xf32>, %b3: tensor<4x32xf32>) {
  // expected-error @+1 {{fc3_bias needs fc3_weight}}
  %e = zen.moe_experts silu %d, %w1, %w2 fc3_bias %b3 {flops = 0 : i64, bytes = 0 : i64} : (tensor<4x8x8xf32>, tensor<4x32x8xf32>, tensor<4x8x32xf32>, tensor<4x32xf32>) -> tensor<4x8x8xf32>
  return
}

// -----

func.func @f(%d: tensor<4x8x8xf32>, %w1: tensor<4x32x8xf32>, %w2: tensor<4x8x32xf32>) {
  // expected-error @+1 {{fc1_weight must be [experts = 4, 2 x ffn = 64, hidden = 8] for swiglu, got 'tensor<4x32x8xf32>'}}
  %e = zen.moe_experts swiglu %d, %w1, %w2 {flops = 0 : i64, bytes = 0 : i64} : (tensor<4x8x8xf32>, tensor<4x32x8xf32>, tensor<4x8x32xf32>) -> tensor<4x8x8xf32>
  return
}

// -----

func.func @f(%d: tensor<4x8x8xf32>, %w1: tensor<4x32x8xf32>, %b1: tensor<4x8xf32>, %w2: tensor<4x8x32xf32>) {
  // expected-error @+1 {{fc1_bias must be [4, 32], got 'tensor<4x8xf32>'}}
  %e = zen.moe_experts relu %d, %w1 bias %b1, %w2 {flops = 0 : i64, bytes = 0 : i64} : (tensor<4x8x8xf32>, tensor<4x32x8xf32>, tensor<4x8xf32>, tensor<4x8x32xf32>) -> tensor<4x8x8xf32>
  return
}

// -----

func.func @f(%d: tensor<4x8x8xf32>, %w1: tensor<4x32x8xf32>, %w2: tensor<4x8x32xf32>, %b2: tensor<4x32xf32>) {
  // expected-error @+1 {{fc2_bias must be [4, 8], got 'tensor<4x32xf32>'}}
  %e = zen.moe_experts relu %d, %w1, %w2 bias %b2 {flops = 0 : i64, bytes = 0 : i64} : (tensor<4x8x8xf32>, tensor<4x32x8xf32>, tensor<4x8x32xf32>, tensor<4x32xf32>) -> tensor<4x8x8xf32>
  return
}

// -----

func.func @f(%d: tensor<4x8x8xf32>, %w1: tensor<4x32x8xf32>, %w2: tensor<4x8x32xf32>) {
  // expected-error @+1 {{result must have the dispatched type 'tensor<4x8x8xf32>', got 'tensor<4x8x8xf16>'}}
  %e = zen.moe_experts relu %d, %w1, %w2 {flops = 0 : i64, bytes = 0 : i64} : (tensor<4x8x8xf32>, tensor<4x32x8xf32>, tensor<4x8x32xf32>) -> tensor<4x8x8xf16>
  return
}

// -----

func.func @f(%e: tensor<32x8xf32>, %g: tensor<16x2xf32>) {
  // expected-error @+1 {{expert_output must be [experts, capacity, hidden], got 'tensor<32x8xf32>'}}
  %y = zen.moe_combine %e, %g {flops = 0 : i64, bytes = 0 : i64} : tensor<32x8xf32>, tensor<16x2xf32> -> tensor<16x8xf32>
  return
}

// -----

func.func @f(%e: tensor<4x8x8xf32>, %g: tensor<16x5xf32>) {
  // expected-error @+1 {{gates must be [tokens, k] with 1 <= k <= 4 experts, got 'tensor<16x5xf32>'}}
  %y = zen.moe_combine %e, %g {flops = 0 : i64, bytes = 0 : i64} : tensor<4x8x8xf32>, tensor<16x5xf32> -> tensor<16x8xf32>
  return
}

// -----

func.func @f(%e: tensor<4x8x8xf32>, %g: tensor<16x2xf32>) {
  // expected-error @+1 {{result must hold 16 tokens of hidden size 8 ([tokens, hidden] or [batch, sequence, hidden]), got 'tensor<2x4x8xf32>'}}
  %y = zen.moe_combine %e, %g {flops = 0 : i64, bytes = 0 : i64} : tensor<4x8x8xf32>, tensor<16x2xf32> -> tensor<2x4x8xf32>
  return
}

// -----
// A planned MoE layer's schedule (#zen.moe_schedule, written by zen-plan-moe).

func.func @f(%x: tensor<16x8xf32>, %r: tensor<16x4xf32>) {
  // expected-error @+1 {{schedule ep 3 must divide the 4 experts}}
  %d, %g = zen.moe_dispatch %x, %r top 2 {flops = 0 : i64, bytes = 0 : i64, schedule = #zen.moe_schedule<ep = 3, forward = 1, backward = 1, all_to_all = "flat">} : tensor<16x8xf32>, tensor<16x4xf32> -> tensor<4x8x8xf32>, tensor<16x2xf32>
  return
}

// -----

func.func @f(%d: tensor<4x8x8xf32>, %w1: tensor<4x32x8xf32>, %w2: tensor<4x8x32xf32>) {
  // expected-error @+1 {{schedule backward degree 16 does not divide the 8 capacity rows it splits}}
  %e = zen.moe_experts relu %d, %w1, %w2 {flops = 0 : i64, bytes = 0 : i64, schedule = #zen.moe_schedule<ep = 2, forward = 8, backward = 16, all_to_all = "2d">} : (tensor<4x8x8xf32>, tensor<4x32x8xf32>, tensor<4x8x32xf32>) -> tensor<4x8x8xf32>
  return
}

// -----

func.func @f(%e: tensor<4x8x8xf32>, %g: tensor<16x2xf32>) {
  // expected-error @+1 {{schedule forward degree 3 does not divide the 8 capacity rows it splits}}
  %y = zen.moe_combine %e, %g {flops = 0 : i64, bytes = 0 : i64, schedule = #zen.moe_schedule<ep = 4, forward = 3, backward = 1, all_to_all = "flat">} : tensor<4x8x8xf32>, tensor<16x2xf32> -> tensor<16x8xf32>
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{moe_schedule forward must be at least 1, got 0}}
  %0 = zen.param "w" {s = #zen.moe_schedule<ep = 1, forward = 0, backward = 1, all_to_all = "flat">} : tensor<4xf32>
  return
}

// -----

func.func @f() {
  // expected-error @+2 {{invalid MoE all-to-all "ring"}}
  // expected-error @+1 {{failed to parse Zen_MoeScheduleAttr parameter 'all_to_all'}}
  %0 = zen.param "w" {s = #zen.moe_schedule<ep = 1, forward = 1, backward = 1, all_to_all = "ring">} : tensor<4xf32>
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{moe_schedule tokens must be "none", "fp16", "bf16" or "int8", got "topk"}}
  %0 = zen.param "w" {s = #zen.moe_schedule<ep = 2, forward = 1, backward = 1, all_to_all = "flat", tokens = "topk">} : tensor<4xf32>
  return
}

// -----

func.func @f() {
  // expected-error @+2 {{invalid MoE gradient sync mode "later"}}
  // expected-error @+1 {{failed to parse Zen_MoeScheduleAttr parameter 'gradient_sync'}}
  %0 = zen.param "w" {s = #zen.moe_schedule<ep = 2, forward = 1, backward = 1, all_to_all = "flat", gradient_sync = "later">} : tensor<4xf32>
  return
}

// -----

func.func @f(%b: tensor<256xf32>) {
  // expected-error @+1 {{sync scheme 'all_gather' starts with all_gather, not with this op}}
  %r = zen.all_reduce avg %b {group = #zen.group<size = 8, nodes = 1>, sync = #zen<sync all_gather>} : tensor<256xf32>
  return
}

// -----

func.func @f(%x: !zen.compressed<tensor<16xf32>, #zen.compression<fp16>>) {
  // expected-error @+1 {{compression method 'fp16' cannot be synchronised by 'all_gather'}}
  %g = zen.all_gather %x {group = #zen.group<size = 8, nodes = 1>, sync = #zen<sync all_gather>} : !zen.compressed<tensor<16xf32>, #zen.compression<fp16>> -> !zen.compressed<tensor<16xf32>, #zen.compression<fp16>>
  return
}

// -----

// expected-error @+1 {{parallel mlp_forward_chunks must be at least 1, got 0}}
module attributes {zen.parallel = #zen.parallel<tp = 2, mlp_forward_chunks = 0>} {}

// -----

// expected-error @+1 {{parallel stage_layers has 3 entries for pp = 2}}
module attributes {zen.parallel = #zen.parallel<pp = 2, stage_layers = [1, 1, 1]>} {}

// -----

// expected-error @+1 {{parallel stage_layers must be at least 1 each, got 0}}
module attributes {zen.parallel = #zen.parallel<pp = 2, stage_layers = [2, 0]>} {}

// -----

// expected-error @+1 {{parallel experts run over ep = 4 ranks but the configuration's ep is 2}}
module attributes {zen.parallel = #zen.parallel<dp = 8, ep = 2, experts = #zen.moe_schedule<ep = 4, forward = 1, backward = 1, all_to_all = "flat">>} {}

// -----

// expected-error @+1 {{moe_blocks needs at least one block}}
#blocks = #zen.moe_blocks<blocks = [], tokens = 16, hidden = 64, ffn = 128, fc1_rows = 128, experts = 4, top_k = 2, capacity_factor = 1.0 : f64, capacity_rows = 0, block_params = 1.0 : f64, expert_params = 1.0 : f64>
module attributes {zen.blocks = #blocks} {}

// -----

// expected-error @+1 {{moe_blocks experts must be at least 1, got 0}}
#blocks = #zen.moe_blocks<blocks = [0], tokens = 16, hidden = 64, ffn = 128, fc1_rows = 128, experts = 0, top_k = 2, capacity_factor = 1.0 : f64, capacity_rows = 0, block_params = 1.0 : f64, expert_params = 1.0 : f64>
module attributes {zen.blocks = #blocks} {}

// -----

// expected-error @+1 {{moe_blocks top_k = 8 exceeds the 4 experts}}
#blocks = #zen.moe_blocks<blocks = [0], tokens = 16, hidden = 64, ffn = 128, fc1_rows = 128, experts = 4, top_k = 8, capacity_factor = 1.0 : f64, capacity_rows = 0, block_params = 1.0 : f64, expert_params = 1.0 : f64>
module attributes {zen.blocks = #blocks} {}

// -----

// expected-error @+1 {{moe_blocks capacity_rows must be non-negative, got -1}}
#blocks = #zen.moe_blocks<blocks = [0], tokens = 16, hidden = 64, ffn = 128, fc1_rows = 128, experts = 4, top_k = 2, capacity_factor = 1.0 : f64, capacity_rows = -1, block_params = 1.0 : f64, expert_params = 1.0 : f64>
module attributes {zen.blocks = #blocks} {}

// -----

// expected-error @+1 {{moe_blocks expert_params must be finite and non-negative}}
#blocks = #zen.moe_blocks<blocks = [0], tokens = 16, hidden = 64, ffn = 128, fc1_rows = 128, experts = 4, top_k = 2, capacity_factor = 1.0 : f64, capacity_rows = 0, block_params = 1.0 : f64, expert_params = -1.0 : f64>
module attributes {zen.blocks = #blocks} {}

// -----

// expected-error @+1 {{transformer family must not be empty}}
module attributes {zen.transformer = #zen.transformer<family = "", layers = 2, hidden = 64, heads = 4, kv_heads = 4, ffn = 256, mlp = "gelu", norm = "layernorm", positions = "learned", seq = 16, vocab = 100, model_batch = 1, layer_params = 1.0 : f64, embedding_params = 1.0 : f64, head_params = 1.0 : f64>} {}

// -----

// expected-error @+1 {{transformer heads must be at least 1, got 0}}
module attributes {zen.transformer = #zen.transformer<family = "gpt", layers = 2, hidden = 64, heads = 0, kv_heads = 4, ffn = 256, mlp = "gelu", norm = "layernorm", positions = "learned", seq = 16, vocab = 100, model_batch = 1, layer_params = 1.0 : f64, embedding_params = 1.0 : f64, head_params = 1.0 : f64>} {}

// -----

// expected-error @+1 {{transformer kv_heads, vocab and cross_attention_blocks must be non-negative, cross_attention_blocks at most layers}}
module attributes {zen.transformer = #zen.transformer<family = "gpt", layers = 2, hidden = 64, heads = 4, kv_heads = 4, ffn = 256, mlp = "gelu", norm = "layernorm", positions = "learned", cross_attention_blocks = 3, seq = 16, vocab = 100, model_batch = 1, layer_params = 1.0 : f64, embedding_params = 1.0 : f64, head_params = 1.0 : f64>} {}

// -----

// expected-error @+1 {{transformer parameter counts must be finite and non-negative}}
module attributes {zen.transformer = #zen.transformer<family = "gpt", layers = 2, hidden = 64, heads = 4, kv_heads = 4, ffn = 256, mlp = "gelu", norm = "layernorm", positions = "learned", seq = 16, vocab = 100, model_batch = 1, layer_params = -1.0 : f64, embedding_params = 1.0 : f64, head_params = 1.0 : f64>} {}

// -----

// expected-error @+1 {{transformer replicated must list node names (strings)}}
module attributes {zen.transformer = #zen.transformer<family = "gpt", layers = 2, hidden = 64, heads = 4, kv_heads = 4, ffn = 256, mlp = "gelu", norm = "layernorm", positions = "learned", seq = 16, vocab = 100, model_batch = 1, layer_params = 1.0 : f64, embedding_params = 1.0 : f64, head_params = 1.0 : f64, replicated = [1]>} {}

// -----

// expected-error @+1 {{transformer moe block 2 is not among its 2 blocks}}
module attributes {zen.transformer = #zen.transformer<family = "gpt", layers = 2, hidden = 64, heads = 4, kv_heads = 4, ffn = 256, mlp = "gelu", norm = "layernorm", positions = "learned", seq = 16, vocab = 100, model_batch = 1, layer_params = 1.0 : f64, embedding_params = 1.0 : f64, head_params = 1.0 : f64, moe = #zen.moe_blocks<blocks = [2], tokens = 16, hidden = 64, ffn = 128, fc1_rows = 128, experts = 4, top_k = 2, capacity_factor = 1.0 : f64, capacity_rows = 0, block_params = 1.0 : f64, expert_params = 1.0 : f64>>} {}

// -----

// expected-error @+1 {{parallel_search global_batch must be at least 1 and configurations_scored non-negative}}
module attributes {zen.parallel_search = #zen.parallel_search<global_batch = 0, optimizer = "adam", moe_imbalance = 1.0 : f64, configurations_scored = 1, baselines = []>} {}

// -----

// expected-error @+1 {{parallel_search optimizer must not be empty}}
module attributes {zen.parallel_search = #zen.parallel_search<global_batch = 8, optimizer = "", moe_imbalance = 1.0 : f64, configurations_scored = 1, baselines = []>} {}

// -----

// expected-error @+1 {{parallel_search moe_imbalance must be finite and at least 1}}
module attributes {zen.parallel_search = #zen.parallel_search<global_batch = 8, optimizer = "adam", moe_imbalance = 0.5 : f64, configurations_scored = 1, baselines = []>} {}

// -----

// expected-error @+1 {{parallel_search baselines must hold #zen.baseline entries, got {ddp = "slow"}}}
module attributes {zen.parallel_search = #zen.parallel_search<global_batch = 8, optimizer = "adam", moe_imbalance = 1.0 : f64, configurations_scored = 1, baselines = [{ddp = "slow"}]>} {}

// -----

// expected-error @+1 {{'zen.transformer' must be a #zen.transformer, got 8 : i64}}
module attributes {zen.transformer = 8 : i64} {}

// -----

// expected-error @+1 {{'zen.parallel_search' must be a #zen.parallel_search, got 8 : i64}}
module attributes {zen.parallel_search = 8 : i64} {}

// -----

// expected-error @+1 {{'zen.grad_accumulation_dtype' must be "fp32", "bf16" or "fp16", got "int8"}}
module attributes {zen.grad_accumulation_dtype = "int8"} {}

// -----

// expected-error @+1 {{'zen.attention' must be "flash" or "unfused", got "sparse"}}
module attributes {zen.attention = "sparse"} {}

// -----

// expected-error @+1 {{'zen.zero3_regather' must be "per-microbatch" or "per-step", got "per-layer"}}
module attributes {zen.zero3_regather = "per-layer"} {}

// -----

// expected-error @+1 {{'zen.zero3_prefetch_depth' must be a positive integer, got 0 : i64}}
module attributes {zen.zero3_prefetch_depth = 0 : i64} {}

// -----

// expected-error @+1 {{'zen.compressor' must be a string, got 8 : i64}}
module attributes {zen.compressor = 8 : i64} {}

// -----

// expected-error @+1 {{moe_search imbalance must be finite and at least 1}}
module attributes {zen.moe_search = #zen.moe_search<imbalance = 0.5 : f64, searched = {}, not_fitting = {}>} {}

// -----

// expected-error @+1 {{moe_search entries map an ep (a positive integer) to a float, got 'two'}}
module attributes {zen.moe_search = #zen.moe_search<imbalance = 1.0 : f64, searched = {two = 1.0 : f64}, not_fitting = {}>} {}

// -----

// expected-error @+1 {{moe_search baselines must be sorted by name, each name once ('ddp' then 'ddp')}}
module attributes {zen.moe_search = #zen.moe_search<imbalance = 1.0 : f64, searched = {}, not_fitting = {}, baselines = [#zen.baseline<name = "ddp", iteration_us = 1.0 : f64>, #zen.baseline<name = "ddp", uncompressed_us = 2.0 : f64>]>} {}

// -----

// expected-error @+1 {{'zen.moe_search' must be a #zen.moe_search, got 8 : i64}}
module attributes {zen.moe_search = 8 : i64} {}

// -----

// expected-error @+1 {{sparsity density must be in (0, 1], got 0}}
module attributes {zen.s = #zen.sparsity<density = 0.0 : f64, gamma = [1.0 : f64, 1.5 : f64], skew = 0.5 : f64, hash_skew = 0.125 : f64, block_density = 0.02 : f64, block_gamma = [1.0 : f64, 1.4 : f64], source = model>} {}

// -----

// expected-error @+1 {{sparsity skew must be in [1/8, 1], got 5.000000e-02}}
module attributes {zen.s = #zen.sparsity<density = 0.01 : f64, gamma = [1.0 : f64, 1.5 : f64], skew = 0.05 : f64, hash_skew = 0.125 : f64, block_density = 0.02 : f64, block_gamma = [1.0 : f64, 1.4 : f64], source = model>} {}

// -----

// expected-error @+1 {{sparsity hash_skew must be in [1/8, 1], got 2}}
module attributes {zen.s = #zen.sparsity<density = 0.01 : f64, gamma = [1.0 : f64, 1.5 : f64], skew = 0.5 : f64, hash_skew = 2.0 : f64, block_density = 0.02 : f64, block_gamma = [1.0 : f64, 1.4 : f64], source = model>} {}

// -----

// expected-error @+1 {{sparsity block_density must be in [0, 1], got 1.5}}
module attributes {zen.s = #zen.sparsity<density = 0.01 : f64, gamma = [1.0 : f64, 1.5 : f64], skew = 0.5 : f64, hash_skew = 0.125 : f64, block_density = 1.5 : f64, block_gamma = [1.0 : f64, 1.4 : f64], source = model>} {}

// -----

// expected-error @+1 {{sparsity gamma must not be empty}}
module attributes {zen.s = #zen.sparsity<density = 0.01 : f64, gamma = [], skew = 0.5 : f64, hash_skew = 0.125 : f64, block_density = 0.02 : f64, block_gamma = [1.0 : f64, 1.4 : f64], source = model>} {}

// -----

// expected-error @+1 {{sparsity gamma must start at 1 (one rank), got 2}}
module attributes {zen.s = #zen.sparsity<density = 0.01 : f64, gamma = [2.0 : f64], skew = 0.5 : f64, hash_skew = 0.125 : f64, block_density = 0.02 : f64, block_gamma = [1.0 : f64, 1.4 : f64], source = model>} {}

// -----

// expected-error @+1 {{sparsity gamma[1] = 5.000000e-01 decreases or is not finite}}
module attributes {zen.s = #zen.sparsity<density = 0.01 : f64, gamma = [1.0 : f64, 0.5 : f64], skew = 0.5 : f64, hash_skew = 0.125 : f64, block_density = 0.02 : f64, block_gamma = [1.0 : f64, 1.4 : f64], source = model>} {}

// -----

// expected-error @+1 {{sparsity block_gamma[1] must be an f64, got 2 : i64}}
module attributes {zen.s = #zen.sparsity<density = 0.01 : f64, gamma = [1.0 : f64, 1.5 : f64], skew = 0.5 : f64, hash_skew = 0.125 : f64, block_density = 0.02 : f64, block_gamma = [1.0 : f64, 2 : i64], source = model>} {}

// -----

func.func @f(%d: tensor<100x8xf32>) {
  %w = zen.param "table" : tensor<100x8xf32>
  // expected-error @+1 {{row_lookups must be at least 1, got 0}}
  %g = zen.gradient %w, %d {ready_order = 0 : i64, row_lookups = 0 : i64} : tensor<100x8xf32>
  return
}

// -----

func.func @f(%d: tensor<100xf32>) {
  %w = zen.param "table" : tensor<100xf32>
  // expected-error @+1 {{row_lookups needs a table of rank 2 or more, got 'tensor<100xf32>'}}
  %g = zen.gradient %w, %d {ready_order = 0 : i64, row_lookups = 4 : i64} : tensor<100xf32>
  return
}

// -----

func.func @f(%d: tensor<100x8xf32>) {
  %w = zen.param "table" : tensor<100x8xf32>
  // expected-error @+1 {{shared_rows needs row_lookups}}
  %g = zen.gradient %w, %d {ready_order = 0 : i64, shared_rows} : tensor<100x8xf32>
  return
}

// -----

func.func @f(%d: tensor<100x8xf32>) {
  %w = zen.param "table" : tensor<100x8xf32>
  %g = zen.gradient %w, %d {ready_order = 0 : i64} : tensor<100x8xf32>
  // expected-error @+1 {{input must be a row-sparse zen.gradient (one with row_lookups)}}
  %s = zen.sparse_all_reduce %g balanced {group = #zen.group<size = 2, nodes = 1>, statistics = #zen.sparsity<density = 0.01 : f64, gamma = [1.0 : f64, 1.5 : f64], skew = 0.5 : f64, hash_skew = 0.125 : f64, block_density = 0.02 : f64, block_gamma = [1.0 : f64, 1.4 : f64], source = model>} : tensor<100x8xf32>
  return
}

// -----

func.func @f(%d: tensor<100x8xf16>) {
  %w = zen.param "table" : tensor<100x8xf16>
  %g = zen.gradient %w, %d {ready_order = 0 : i64, row_lookups = 4 : i64} : tensor<100x8xf16>
  // expected-error @+1 {{row-sparse gradient must be a static f32 table, got 'tensor<100x8xf16>'}}
  %s = zen.sparse_all_reduce %g balanced {group = #zen.group<size = 2, nodes = 1>, statistics = #zen.sparsity<density = 0.01 : f64, gamma = [1.0 : f64, 1.5 : f64], skew = 0.5 : f64, hash_skew = 0.125 : f64, block_density = 0.02 : f64, block_gamma = [1.0 : f64, 1.4 : f64], source = model>} : tensor<100x8xf16>
  return
}

// -----

func.func @f(%d: tensor<100x8xf32>) {
  %w = zen.param "table" : tensor<100x8xf32>
  %g = zen.gradient %w, %d {ready_order = 0 : i64, row_lookups = 4 : i64} : tensor<100x8xf32>
  // expected-error @+1 {{scheme 'hierarchical' needs more than one node with more than one rank each, got #zen.group<size = 2, nodes = 1>}}
  %s = zen.sparse_all_reduce %g hierarchical {group = #zen.group<size = 2, nodes = 1>, statistics = #zen.sparsity<density = 0.01 : f64, gamma = [1.0 : f64, 1.5 : f64], skew = 0.5 : f64, hash_skew = 0.125 : f64, block_density = 0.02 : f64, block_gamma = [1.0 : f64, 1.4 : f64], source = model>} : tensor<100x8xf32>
  return
}

// -----

// expected-error @+1 {{'zen.measured_compute' must be a #zen.measured_compute, got 8 : i64}}
module attributes {zen.measured_compute = 8 : i64} {}

// -----

// expected-error @+1 {{measured_compute backward_us must be a finite time >= 0, got -1}}
module attributes {zen.measured_compute = #zen.measured_compute<forward_us = 1.0 : f64, backward_us = -1.0 : f64, optimizer_us = 0.0 : f64, first_read_us = {}, ready_us = {}, method = "test">} {}

// -----

// expected-error @+1 {{measured_compute ready_us 'w' must be a time in [0, 2.000000e+00], got 3.000000e+00 : f64}}
module attributes {zen.measured_compute = #zen.measured_compute<forward_us = 1.0 : f64, backward_us = 2.0 : f64, optimizer_us = 0.0 : f64, first_read_us = {w = 0.5 : f64}, ready_us = {w = 3.0 : f64}, method = "test">} {}

// -----

// expected-error @+1 {{measured_compute first_read_us 'w' must be a time in [0, 1.000000e+00], got "soon"}}
module attributes {zen.measured_compute = #zen.measured_compute<forward_us = 1.0 : f64, backward_us = 2.0 : f64, optimizer_us = 0.0 : f64, first_read_us = {w = "soon"}, ready_us = {}, method = "test">} {}

// The split pattern: a dense bucket all_reduce becomes a reduce_scatter (same
// chunks, schedule and bucket, sync = reduce_scatter_all_gather) and a decoupled
// all_gather whose padded result the unpack reads. Other collectives stay.
// RUN: zenopt-opt %s --zen-apply-sync-patterns="split-all-reduce=true" | FileCheck %s

// CHECK-LABEL: func.func @split
// CHECK: %[[B:.*]] = zen.pack %[[G0:.*]], %[[G1:.*]] : tensor<3xf32>, tensor<4xf32> -> tensor<7xf32>
// CHECK: %[[RS:.*]] = zen.reduce_scatter avg %[[B]] {bucket = 0 : i64, chunks = 2 : i64, group = #zen.group<size = 2, nodes = 1>, schedule = #zen.schedule<stream = 0, priority = 1, order = 0>, sync = #zen<sync reduce_scatter_all_gather>} : tensor<7xf32> -> tensor<4xf32>
// CHECK: %[[AG:.*]] = zen.all_gather %[[RS]] {bucket = 0 : i64, decoupled, group = #zen.group<size = 2, nodes = 1>, schedule = #zen.schedule<stream = 0, priority = 1, order = 0>} : tensor<4xf32> -> tensor<8xf32>
// CHECK: zen.unpack %[[AG]] : tensor<8xf32> -> tensor<3xf32>, tensor<4xf32>
func.func @split(%g0: tensor<3xf32>, %g1: tensor<4xf32>) -> (tensor<3xf32>, tensor<4xf32>) {
  %b = zen.pack %g0, %g1 : tensor<3xf32>, tensor<4xf32> -> tensor<7xf32>
  %r = zen.all_reduce avg %b {bucket = 0 : i64, chunks = 2 : i64, group = #zen.group<size = 2, nodes = 1>, schedule = #zen.schedule<stream = 0, priority = 1, order = 0>, sync = #zen<sync all_reduce>} : tensor<7xf32>
  %u:2 = zen.unpack %r : tensor<7xf32> -> tensor<3xf32>, tensor<4xf32>
  return %u#0, %u#1 : tensor<3xf32>, tensor<4xf32>
}

// A collective without `sync` (a tensor-parallel reduction) and an all-reduce
// read by something other than an unpack are left alone.
// CHECK-LABEL: func.func @kept
// CHECK: %[[TP:.*]] = zen.all_reduce sum %[[X:.*]] {group = #zen.group<size = 2, nodes = 1>} : tensor<7xf32>
// CHECK: %[[R:.*]] = zen.all_reduce avg %[[TP]] {group = #zen.group<size = 2, nodes = 1>, sync = #zen<sync all_reduce>} : tensor<7xf32>
// CHECK: return %[[R]]
func.func @kept(%x: tensor<7xf32>) -> tensor<7xf32> {
  %t = zen.all_reduce sum %x {group = #zen.group<size = 2, nodes = 1>} : tensor<7xf32>
  %r = zen.all_reduce avg %t {group = #zen.group<size = 2, nodes = 1>, sync = #zen<sync all_reduce>} : tensor<7xf32>
  return %r : tensor<7xf32>
}

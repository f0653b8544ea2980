// The chunking pattern sets a bucket's first collective's pipelined pieces;
// a compressed payload (sent whole) and a collective without `sync` keep theirs.
// RUN: zenopt-opt %s --zen-apply-sync-patterns="chunks=4" | FileCheck %s

// CHECK-LABEL: func.func @chunks
// CHECK: %[[RS:.*]] = zen.reduce_scatter avg %[[B:.*]] {chunks = 4 : i64, group = #zen.group<size = 2, nodes = 1>, sync = #zen<sync reduce_scatter_all_gather>} : tensor<8xf32> -> tensor<4xf32>
// CHECK: %[[AG:.*]] = zen.all_gather %[[RS]] {decoupled, group = #zen.group<size = 2, nodes = 1>} : tensor<4xf32> -> tensor<8xf32>
// CHECK: %[[TP:.*]] = zen.all_reduce sum %[[AG]] {group = #zen.group<size = 2, nodes = 1>} : tensor<8xf32>
// CHECK: zen.all_gather %[[C:.*]] {group = #zen.group<size = 2, nodes = 1>, sync = #zen<sync all_gather>}
func.func @chunks(%b: tensor<8xf32>, %c: !zen.compressed<tensor<8xf32>, #zen.compression<topk, ratio = 0.5>>) -> (tensor<8xf32>, !zen.compressed<tensor<8xf32>, #zen.compression<topk, ratio = 0.5>>) {
  %rs = zen.reduce_scatter avg %b {group = #zen.group<size = 2, nodes = 1>, sync = #zen<sync reduce_scatter_all_gather>} : tensor<8xf32> -> tensor<4xf32>
  %ag = zen.all_gather %rs {decoupled, group = #zen.group<size = 2, nodes = 1>} : tensor<4xf32> -> tensor<8xf32>
  %tp = zen.all_reduce sum %ag {group = #zen.group<size = 2, nodes = 1>} : tensor<8xf32>
  %cg = zen.all_gather %c {group = #zen.group<size = 2, nodes = 1>, sync = #zen<sync all_gather>} : !zen.compressed<tensor<8xf32>, #zen.compression<topk, ratio = 0.5>> -> !zen.compressed<tensor<8xf32>, #zen.compression<topk, ratio = 0.5>>
  return %tp, %cg : tensor<8xf32>, !zen.compressed<tensor<8xf32>, #zen.compression<topk, ratio = 0.5>>
}

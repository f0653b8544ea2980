// The compression pattern wraps a dense bucket all_reduce in compress /
// decompress and synchronises the payload by the method's preferred scheme
// (zen/SyncScheme.h): fp16 and random-k are all-reduced, top-k all-gathered.
// RUN: zenopt-opt %s --zen-apply-sync-patterns="compressor=fp16" | FileCheck %s --check-prefix=FP16
// RUN: zenopt-opt %s --zen-apply-sync-patterns="compressor=randomk:0.25@cpu" | FileCheck %s --check-prefix=RANDOMK
// RUN: zenopt-opt %s --zen-apply-sync-patterns="compressor=topk:0.25" | FileCheck %s --check-prefix=TOPK
// RUN: not zenopt-opt %s --zen-apply-sync-patterns="compressor=zip" 2>&1 | FileCheck %s --check-prefix=BAD

// FP16-LABEL: func.func @bucket
// FP16: %[[C:.*]] = zen.compress %[[B:.*]] on gpu {bucket = 3 : i64} : tensor<8xf32> -> !zen.compressed<tensor<8xf32>, #zen.compression<fp16>>
// FP16: %[[R:.*]] = zen.all_reduce avg %[[C]] {bucket = 3 : i64, group = #zen.group<size = 2, nodes = 1>, sync = #zen<sync all_reduce>} : !zen.compressed<tensor<8xf32>, #zen.compression<fp16>>
// FP16: %[[D:.*]] = zen.decompress %[[R]] on gpu {bucket = 3 : i64} : !zen.compressed<tensor<8xf32>, #zen.compression<fp16>> -> tensor<8xf32>
// FP16: return %[[D]]

// RANDOMK-LABEL: func.func @bucket
// RANDOMK: %[[C:.*]] = zen.compress %[[B:.*]] on cpu {bucket = 3 : i64, error_feedback}
// RANDOMK: %[[R:.*]] = zen.all_reduce avg %[[C]] {bucket = 3 : i64, group = #zen.group<size = 2, nodes = 1>, sync = #zen<sync all_reduce>}
// RANDOMK: zen.decompress %[[R]] on cpu

// TOPK-LABEL: func.func @bucket
// TOPK: %[[C:.*]] = zen.compress %[[B:.*]] on gpu {bucket = 3 : i64, error_feedback}
// TOPK: %[[G:.*]] = zen.all_gather %[[C]] {bucket = 3 : i64, group = #zen.group<size = 2, nodes = 1>, sync = #zen<sync all_gather>}
// TOPK: zen.decompress %[[G]] on gpu

// BAD: zen-apply-sync-patterns: compressor:
func.func @bucket(%b: tensor<8xf32>) -> tensor<8xf32> {
  %r = zen.all_reduce avg %b {bucket = 3 : i64, group = #zen.group<size = 2, nodes = 1>, sync = #zen<sync all_reduce>} : tensor<8xf32>
  return %r : tensor<8xf32>
}

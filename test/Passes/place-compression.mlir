// zen-place-compression: compress -> collective -> decompress inside each bucket.
// RUN: zenopt-opt %S/Inputs/mlp.mlir --zen-insert-grad-sync --zen-fuse-gradients="strategy=manual buckets=1,2" --zen-place-compression="compressor=fp16 mode=all" | FileCheck %s --check-prefix=FP16
// RUN: zenopt-opt %S/Inputs/mlp.mlir --zen-insert-grad-sync --zen-fuse-gradients="strategy=manual buckets=1,2" --zen-place-compression="compressor=topk:0.01 mode=all" | FileCheck %s --check-prefix=TOPK
// RUN: zenopt-opt %S/Inputs/mlp.mlir --zen-insert-grad-sync --zen-fuse-gradients="strategy=manual buckets=1,2" --zen-place-compression="compressor=powersgd:4 mode=all" | FileCheck %s --check-prefix=POWERSGD
// By default nothing is compressed: training stays exact.
// RUN: zenopt-opt %S/Inputs/mlp.mlir --zen-insert-grad-sync --zen-fuse-gradients=strategy=wfbp --zen-place-compression | FileCheck %s --check-prefix=NONE
// Auto keeps a method only where the simulator says it pays; the result is always well formed.
// RUN: zenopt-opt %S/Inputs/mlp.mlir --zen-insert-grad-sync --zen-fuse-gradients=strategy=wfbp --zen-place-compression="compressor=fp16,topk:0.01" | zenopt-opt | FileCheck %s --check-prefix=AUTO

// Dense casts are all-reduced, without error feedback.
// FP16: %[[B:.*]] = zen.pack {{.*}} {bucket = 0 : i64}
// FP16-NEXT: %[[C:.*]] = zen.compress %[[B]] on gpu {bucket = 0 : i64} : tensor<16384xf32> -> !zen.compressed<tensor<16384xf32>, #zen.compression<fp16>>
// FP16-NEXT: %[[R:.*]] = zen.all_reduce avg %[[C]] {bucket = 0 : i64, {{.*}}} : !zen.compressed<tensor<16384xf32>, #zen.compression<fp16>>
// FP16-NEXT: %[[D:.*]] = zen.decompress %[[R]] on gpu {bucket = 0 : i64} : {{.*}} -> tensor<16384xf32>
// FP16-NEXT: zen.unpack %[[D]] {bucket = 0 : i64}

// Sparse payloads are all-gathered, with error feedback.
// TOPK: %[[B:.*]] = zen.pack {{.*}} {bucket = 1 : i64}
// TOPK-NEXT: %[[C:.*]] = zen.compress %[[B]] on gpu {bucket = 1 : i64, error_feedback} : tensor<2097152xf32> -> !zen.compressed<tensor<2097152xf32>, #zen.compression<topk, ratio = 1.000000e-02>>
// TOPK-NEXT: %[[R:.*]] = zen.all_gather %[[C]] {bucket = 1 : i64, {{.*}}}
// TOPK-NEXT: zen.decompress %[[R]] on gpu {bucket = 1 : i64}

// POWERSGD: zen.compress {{.*}} {bucket = 0 : i64, error_feedback} {{.*}}#zen.compression<powersgd, rank = 4>
// POWERSGD-NEXT: zen.all_reduce avg

// NONE-NOT: zen.compress
// NONE-COUNT-3: zen.all_reduce avg
// NONE-NOT: zen.compress

// AUTO-LABEL: func.func @train_step
// AUTO-COUNT-3: zen.unpack

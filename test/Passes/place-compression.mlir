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

// Compression on every bucket: compress -> all_gather -> decompress around the packed bucket.
// RUN: zenopt-opt %s --zen-place-compression="compressor=topk:0.01 mode=all" | FileCheck %s --check-prefix=LOCAL
// LOCAL-LABEL: func.func @train_step
// LOCAL: %[[B0:.*]] = zen.pack %{{.*}}, %{{.*}} {bucket = 0 : i64}
// LOCAL-NEXT: %[[C0:.*]] = zen.compress %[[B0]] on gpu {bucket = 0 : i64, error_feedback}
// LOCAL-NEXT: %[[A0:.*]] = zen.all_gather %[[C0]] {bucket = 0 : i64,
// LOCAL-NEXT: %[[D0:.*]] = zen.decompress %[[A0]] on gpu {bucket = 0 : i64}
// LOCAL-NEXT: zen.unpack %[[D0]] {bucket = 0 : i64}
// LOCAL-NOT: test.untouched
module attributes {zen.cluster = "a100x8"} {
  func.func @train_step(%arg0: tensor<64xf32>) {
    %0 = zen.param "w0" : tensor<1024xf32>
    %1 = zen.param "w1" : tensor<4096xf32>
    %2 = zen.param "w2" : tensor<256xf32>
    %3 = zen.compute "Mul" forward(%arg0, %0) {bytes = 8192 : i64, flops = 4096 : i64} : (tensor<64xf32>, tensor<1024xf32>) -> tensor<64xf32>
    %4 = zen.compute "MulGrad" backward(%3) {bytes = 2048 : i64, flops = 512 : i64} : (tensor<64xf32>) -> tensor<256xf32>
    %5 = zen.gradient %2, %4 {ready_order = 0 : i64} : tensor<256xf32>
    %6 = zen.compute "MulGrad" backward(%3) {bytes = 32768 : i64, flops = 8192 : i64} : (tensor<64xf32>) -> tensor<4096xf32>
    %7 = zen.gradient %1, %6 {ready_order = 1 : i64} : tensor<4096xf32>
    %8 = zen.pack %5, %7 {bucket = 0 : i64} : tensor<256xf32>, tensor<4096xf32> -> tensor<4352xf32>
    %9 = zen.all_reduce avg %8 {bucket = 0 : i64, group = #zen.group<size = 8, nodes = 1>, schedule = #zen.schedule<stream = 0, priority = 0, order = 0>} : tensor<4352xf32>
    %10:2 = zen.unpack %9 {bucket = 0 : i64} : tensor<4352xf32> -> tensor<256xf32>, tensor<4096xf32>
    %11 = zen.compute "MulGrad" backward(%3) {bytes = 8192 : i64, flops = 2048 : i64} : (tensor<64xf32>) -> tensor<1024xf32>
    %12 = zen.gradient %0, %11 {ready_order = 2 : i64} : tensor<1024xf32>
    %13 = zen.pack %12 {bucket = 1 : i64} : tensor<1024xf32> -> tensor<1024xf32>
    %14 = zen.all_reduce avg %13 {bucket = 1 : i64, group = #zen.group<size = 8, nodes = 1>, schedule = #zen.schedule<stream = 0, priority = 1, order = 1>, test.untouched} : tensor<1024xf32>
    %15 = zen.unpack %14 {bucket = 1 : i64} : tensor<1024xf32> -> tensor<1024xf32>
    %16 = zen.compute "SGD" optimizer(%2, %10#0) {bytes = 5120 : i64, flops = 768 : i64, node = "sgd.w2"} : (tensor<256xf32>, tensor<256xf32>) -> tensor<256xf32>
    %17 = zen.compute "SGD" optimizer(%1, %10#1) {bytes = 81920 : i64, flops = 12288 : i64, node = "sgd.w1"} : (tensor<4096xf32>, tensor<4096xf32>) -> tensor<4096xf32>
    %18 = zen.compute "SGD" optimizer(%0, %15) {bytes = 20480 : i64, flops = 3072 : i64, node = "sgd.w0"} : (tensor<1024xf32>, tensor<1024xf32>) -> tensor<1024xf32>
    return
  }
}

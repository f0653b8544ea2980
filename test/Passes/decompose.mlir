// zen-decompose: chunk counts, and all_reduce -> reduce_scatter + decoupled all_gather (DeAR).
// RUN: zenopt-opt %S/Inputs/mlp.mlir --zen-insert-grad-sync --zen-fuse-gradients="strategy=manual buckets=1,2" --zen-decompose="split=all chunks=4" | FileCheck %s --check-prefix=ALL
// RUN: zenopt-opt %S/Inputs/mlp.mlir --zen-insert-grad-sync --zen-fuse-gradients="strategy=manual buckets=1,2" --zen-decompose="split=none chunks=2" | FileCheck %s --check-prefix=NONE
// RUN: zenopt-opt %S/Inputs/mlp.mlir --zen-insert-grad-sync --zen-fuse-gradients=strategy=wfbp --zen-decompose | zenopt-opt | FileCheck %s --check-prefix=AUTO

// ALL: %[[B:.*]] = zen.pack {{.*}} {bucket = 1 : i64} : {{.*}} -> tensor<2097152xf32>
// ALL-NEXT: %[[S:.*]] = zen.reduce_scatter avg %[[B]] {bucket = 1 : i64, chunks = 4 : i64, group = #zen.group<size = 64, nodes = 8>{{.*}}} : tensor<2097152xf32> -> tensor<32768xf32>
// ALL-NEXT: %[[G:.*]] = zen.all_gather %[[S]] {bucket = 1 : i64, decoupled, {{.*}}} : tensor<32768xf32> -> tensor<2097152xf32>
// ALL-NEXT: zen.unpack %[[G]] {bucket = 1 : i64}
// ALL-NOT: zen.all_reduce

// NONE-NOT: zen.reduce_scatter
// NONE: zen.all_reduce avg {{.*}} {bucket = 0 : i64, chunks = 2 : i64
// NONE: zen.all_reduce avg {{.*}} {bucket = 1 : i64, chunks = 2 : i64
// NONE-NOT: zen.reduce_scatter

// AUTO-LABEL: func.func @train_step
// AUTO-COUNT-3: zen.unpack

// Chunk counts change in place (split=none); split=all replaces each bucket's all_reduce by
// reduce_scatter + decoupled all_gather and keeps its pack and unpack.
// RUN: zenopt-opt %s --zen-decompose="split=none chunks=4" | FileCheck %s --check-prefix=CHUNKS
// RUN: zenopt-opt %s --zen-decompose="split=all chunks=2" | FileCheck %s --check-prefix=SPLIT
// CHUNKS-LABEL: func.func @train_step
// CHUNKS: %[[B1:.*]] = zen.pack %{{.*}} {bucket = 1 : i64}
// CHUNKS-NEXT: zen.all_reduce avg %[[B1]] {bucket = 1 : i64, chunks = 4 : i64, {{.*}}test.untouched}
// SPLIT-LABEL: func.func @train_step
// SPLIT: %[[B0:.*]] = zen.pack %{{.*}}, %{{.*}} {bucket = 0 : i64}
// SPLIT-NEXT: %[[S0:.*]] = zen.reduce_scatter avg %[[B0]] {bucket = 0 : i64, chunks = 2 : i64, {{.*}}} : tensor<4352xf32> -> tensor<544xf32>
// SPLIT-NEXT: %[[A0:.*]] = zen.all_gather %[[S0]] {bucket = 0 : i64, decoupled, {{.*}}} : tensor<544xf32> -> tensor<4352xf32>
// SPLIT-NEXT: %{{.*}}:2 = zen.unpack %[[A0]] {bucket = 0 : i64}
// SPLIT-NOT: zen.all_reduce
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

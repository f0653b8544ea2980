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

// zen-fuse-gradients: per-gradient all_reduces become pack -> all_reduce -> unpack per bucket.
// RUN: zenopt-opt %S/Inputs/mlp.mlir --zen-insert-grad-sync --zen-fuse-gradients="strategy=manual buckets=1,2" | FileCheck %s --check-prefix=MANUAL
// RUN: zenopt-opt %S/Inputs/mlp.mlir --zen-insert-grad-sync --zen-fuse-gradients=strategy=horovod | FileCheck %s --check-prefix=HOROVOD
// RUN: zenopt-opt %S/Inputs/mlp.mlir --zen-insert-grad-sync --zen-fuse-gradients=strategy=ddp | FileCheck %s --check-prefix=DDP
// RUN: zenopt-opt %S/Inputs/mlp.mlir --zen-insert-grad-sync --zen-fuse-gradients="strategy=threshold threshold-bytes=4000000" | FileCheck %s --check-prefix=THRESHOLD
// RUN: zenopt-opt %S/Inputs/mlp.mlir --zen-insert-grad-sync --zen-fuse-gradients=strategy=nooverlap | FileCheck %s --check-prefix=NOOVERLAP

// MANUAL-LABEL: module attributes {{{.*}}zen.strategy = "manual"
// MANUAL: %[[G2:.*]] = zen.gradient
// MANUAL-NEXT: %[[B0:.*]] = zen.pack %[[G2]] {bucket = 0 : i64} : tensor<1024x16xf32> -> tensor<16384xf32>
// MANUAL-NEXT: %[[R0:.*]] = zen.all_reduce avg %[[B0]] {bucket = 0 : i64, {{.*}}} : tensor<16384xf32>
// MANUAL-NEXT: %[[U0:.*]] = zen.unpack %[[R0]] {bucket = 0 : i64} : tensor<16384xf32> -> tensor<1024x16xf32>
// MANUAL: %[[G1:.*]] = zen.gradient
// MANUAL-NOT: zen.all_reduce
// MANUAL: %[[G0:.*]] = zen.gradient
// MANUAL-NEXT: %[[B1:.*]] = zen.pack %[[G1]], %[[G0]] {bucket = 1 : i64} : tensor<1024x1024xf32>, tensor<1024x1024xf32> -> tensor<2097152xf32>
// MANUAL-NEXT: %[[R1:.*]] = zen.all_reduce avg %[[B1]] {bucket = 1 : i64
// MANUAL-NEXT: %[[U1:.*]]:2 = zen.unpack %[[R1]] {bucket = 1 : i64}
// MANUAL-NEXT: zen.compute "SGD" optimizer(%{{.*}}, %[[U0]])
// MANUAL-NEXT: zen.compute "SGD" optimizer(%{{.*}}, %[[U1]]#0)
// MANUAL-NEXT: zen.compute "SGD" optimizer(%{{.*}}, %[[U1]]#1)

// The 64 MiB buffer holds all three gradients (8.4 MB).
// HOROVOD-COUNT-1: zen.pack {{.*}} {bucket = 0 : i64} : tensor<1024x16xf32>, tensor<1024x1024xf32>, tensor<1024x1024xf32> -> tensor<2113536xf32>
// HOROVOD-NOT: zen.pack

// DDP's first bucket closes at 1 MiB: fc3 (64 KiB) and fc2 (4 MiB) fill it; fc1 starts the 25 MiB bucket.
// DDP: zen.pack {{.*}} {bucket = 0 : i64} : tensor<1024x16xf32>, tensor<1024x1024xf32> ->
// DDP: zen.pack {{.*}} {bucket = 1 : i64} : tensor<1024x1024xf32> ->

// THRESHOLD: zen.pack {{.*}} {bucket = 0 : i64} : tensor<1024x16xf32>, tensor<1024x1024xf32> ->
// THRESHOLD: zen.pack {{.*}} {bucket = 1 : i64} : tensor<1024x1024xf32> ->

// No overlap: every collective waits for the end of backward.
// NOOVERLAP: zen.gradient {{.*}} {ready_order = 2 : i64}
// NOOVERLAP-COUNT-3: zen.all_reduce avg {{.*}}after_backward

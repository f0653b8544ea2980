// Bad options and bad IR are reported as errors, never crashes.
// RUN: not zenopt-opt %S/Inputs/mlp.mlir --zen-autotune=compressor=zip 2>&1 | FileCheck %s --check-prefix=COMPRESSOR
// RUN: not zenopt-opt %S/Inputs/mlp.mlir --zen-autotune=compressor=topk:2 2>&1 | FileCheck %s --check-prefix=RATIO
// RUN: not zenopt-opt %S/Inputs/mlp.mlir --zen-autotune=cluster=no-such-cluster 2>&1 | FileCheck %s --check-prefix=CLUSTER
// RUN: not zenopt-opt %S/Inputs/mlp.mlir --zen-insert-grad-sync=dp=65 2>&1 | FileCheck %s --check-prefix=DP
// RUN: not zenopt-opt %S/Inputs/mlp.mlir --zen-insert-grad-sync=nodes=-1 2>&1 | FileCheck %s --check-prefix=NEGATIVE-NODES
// RUN: not zenopt-opt %S/Inputs/mlp.mlir --zen-insert-grad-sync=nodes=2000000 2>&1 | FileCheck %s --check-prefix=MANY-NODES
// RUN: not zenopt-opt %S/Inputs/mlp.mlir --zen-fuse-gradients 2>&1 | FileCheck %s --check-prefix=UNSYNCED
// RUN: not zenopt-opt %S/Inputs/mlp.mlir --zen-insert-grad-sync --zen-fuse-gradients="strategy=manual buckets=1,1" 2>&1 | FileCheck %s --check-prefix=MANUAL
// RUN: not zenopt-opt %S/Inputs/mlp.mlir --zen-autotune=strategy=fastest 2>&1 | FileCheck %s --check-prefix=STRATEGY
// RUN: not zenopt-opt %S/Inputs/mlp.mlir --zen-insert-grad-sync --zen-decompose=split=half 2>&1 | FileCheck %s --check-prefix=SPLIT
// RUN: not zenopt-opt %S/Inputs/mlp.mlir --zen-insert-grad-sync --zen-schedule-overlap=streams=3 2>&1 | FileCheck %s --check-prefix=STREAMS
// RUN: zenopt-opt %s --zen-autotune=compressor=sign:3 -verify-diagnostics

// COMPRESSOR: error: invalid compressor option: {{.*}}zip
// RATIO: error: invalid compressor option:
// CLUSTER: error: cannot load cluster 'no-such-cluster'
// DP: error: dp = 65 does not fit cluster 'a100x64' of 64 GPUs
// NEGATIVE-NODES: error: nodes = -1 must be positive (0: the cluster's own)
// MANY-NODES: error: cannot load cluster 'a100x64': --nodes 2000000: cluster 'a100x64' has 8 GPUs per node; nodes must be at least 1 and nodes x GPUs at most 1048576
// UNSYNCED: error: gradients are not synchronised; run zen-insert-grad-sync before zen-fuse-gradients
// MANUAL: error: zen-fuse-gradients: manual buckets cover 2 of the 3 gradient tensors
// STRATEGY: for the --strategy option: Cannot find option named 'fastest'!
// SPLIT: for the --split option: Cannot find option named 'half'!
// STREAMS: error: zen-schedule-overlap: streams must be 1 or 2, got 3

// expected-error @+1 {{invalid compressor option}}
module {
  func.func @train_step(%x: tensor<4xf32>) {
    %w = zen.param "w" : tensor<4xf32>
    %y = zen.compute "Mul" forward (%x, %w) {flops = 4 : i64, bytes = 48 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %d = zen.compute "MulGrad" backward (%y, %x) {flops = 4 : i64, bytes = 48 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %g = zen.gradient %w, %d {ready_order = 0 : i64} : tensor<4xf32>
    return
  }
}

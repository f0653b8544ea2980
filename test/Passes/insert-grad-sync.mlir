// zen-insert-grad-sync: one all_reduce avg per gradient, right after it, and an
// SGD step per parameter that reads the synchronised gradient.
// RUN: zenopt-opt %S/Inputs/mlp.mlir --zen-insert-grad-sync | FileCheck %s
// RUN: zenopt-opt %S/Inputs/mlp.mlir --zen-insert-grad-sync="cluster=a100x64 dp=16" | FileCheck %s --check-prefix=DP16
// nodes resizes the cluster (recorded as zen.nodes): a100x64 on 2 nodes has 16 GPUs.
// RUN: zenopt-opt %S/Inputs/mlp.mlir --zen-insert-grad-sync="cluster=a100x64 nodes=2" | FileCheck %s --check-prefix=NODES2
// Running it twice replaces the synchronisation instead of stacking it.
// RUN: zenopt-opt %S/Inputs/mlp.mlir --zen-insert-grad-sync --zen-insert-grad-sync | FileCheck %s

// CHECK-LABEL: func.func @train_step
// CHECK-DAG: %[[W0:.*]] = zen.param "fc1.weight"
// CHECK-DAG: %[[W1:.*]] = zen.param "fc2.weight"
// CHECK-DAG: %[[W2:.*]] = zen.param "fc3.weight"
// CHECK: %[[G2:.*]] = zen.gradient %[[W2]]
// CHECK-NEXT: %[[S2:.*]] = zen.all_reduce avg %[[G2]] {{{.*}}group = #zen.group<size = 64, nodes = 8>{{.*}}} : tensor<1024x16xf32>
// CHECK: %[[G1:.*]] = zen.gradient %[[W1]]
// CHECK-NEXT: %[[S1:.*]] = zen.all_reduce avg %[[G1]]
// CHECK: %[[G0:.*]] = zen.gradient %[[W0]]
// CHECK-NEXT: %[[S0:.*]] = zen.all_reduce avg %[[G0]]
// CHECK-NEXT: zen.compute "SGD" optimizer(%[[W2]], %[[S2]]) {{{.*}}node = "sgd.fc3.weight"}
// CHECK-NEXT: zen.compute "SGD" optimizer(%[[W1]], %[[S1]])
// CHECK-NEXT: zen.compute "SGD" optimizer(%[[W0]], %[[S0]])
// CHECK-NEXT: return
// CHECK-NOT: zen.all_reduce

// DP16-COUNT-3: group = #zen.group<size = 16, nodes = 2>

// NODES2: module attributes {{{.*}}zen.cluster = "a100x64"{{.*}}zen.nodes = 2 : i64}
// NODES2-LABEL: func.func @train_step
// NODES2-COUNT-3: group = #zen.group<size = 16, nodes = 2>

// RUN: zenopt-opt %s --zen-insert-grad-sync=cluster=a100x8 | FileCheck %s --check-prefix=LOCAL
// LOCAL: module attributes {zen.cluster = "a100x8"}
// LOCAL-LABEL: func.func @train_step
// LOCAL: %[[G2:.*]] = zen.gradient %{{.*}} {ready_order = 0 : i64}
// LOCAL-NEXT: %[[R2:.*]] = zen.all_reduce avg %[[G2]] {bucket = 0 : i64, group = #zen.group<size = 8, nodes = 1>
// LOCAL: %[[G1:.*]] = zen.gradient %{{.*}} {ready_order = 1 : i64}
// LOCAL-NEXT: %[[R1:.*]] = zen.all_reduce avg %[[G1]] {bucket = 1 : i64
// LOCAL: zen.compute "SGD" optimizer(%{{.*}}, %[[R2]]) {{.*}}node = "sgd.w2"
// LOCAL-NEXT: zen.compute "SGD" optimizer(%{{.*}}, %[[R1]]) {{.*}}node = "sgd.w1"
module {
  func.func @train_step(%x: tensor<64xf32>) {
    %w0 = zen.param "w0" : tensor<1024xf32>
    %w1 = zen.param "w1" : tensor<4096xf32>
    %w2 = zen.param "w2" : tensor<256xf32>
    %y = zen.compute "Mul" forward (%x, %w0) {flops = 4096 : i64, bytes = 8192 : i64} : (tensor<64xf32>, tensor<1024xf32>) -> tensor<64xf32>
    %d2 = zen.compute "MulGrad" backward (%y) {flops = 512 : i64, bytes = 2048 : i64} : (tensor<64xf32>) -> tensor<256xf32>
    %g2 = zen.gradient %w2, %d2 {ready_order = 0 : i64} : tensor<256xf32>
    %d1 = zen.compute "MulGrad" backward (%y) {flops = 8192 : i64, bytes = 32768 : i64} : (tensor<64xf32>) -> tensor<4096xf32>
    %g1 = zen.gradient %w1, %d1 {ready_order = 1 : i64} : tensor<4096xf32>
    %d0 = zen.compute "MulGrad" backward (%y) {flops = 2048 : i64, bytes = 8192 : i64} : (tensor<64xf32>) -> tensor<1024xf32>
    %g0 = zen.gradient %w0, %d0 {ready_order = 2 : i64} : tensor<1024xf32>
    return
  }
}

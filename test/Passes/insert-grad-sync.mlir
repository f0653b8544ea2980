// zen-insert-grad-sync: one all_reduce avg per gradient, right after it, and an
// SGD step per parameter that reads the synchronised gradient.
// RUN: zenopt-opt %S/Inputs/mlp.mlir --zen-insert-grad-sync | FileCheck %s
// RUN: zenopt-opt %S/Inputs/mlp.mlir --zen-insert-grad-sync="cluster=a100x64 dp=16" | FileCheck %s --check-prefix=DP16
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

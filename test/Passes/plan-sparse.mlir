// zen-plan-sparse: a row-sparse gradient (row_lookups) is synchronised by a
// zen.sparse_all_reduce under the cheapest sparse scheme, with the statistics it was
// chosen from; the optimizer step reads its result, and zen-autotune buckets only the rest.
// When dense wins, the table stays a gradient of the dense buckets (their all-reduce is dense's).
// RUN: zenopt-opt %S/Inputs/embedding.mlir --zen-plan-sparse | FileCheck %s
// Planned twice: one synchronisation, chosen again.
// RUN: zenopt-opt %S/Inputs/embedding.mlir --zen-plan-sparse --zen-plan-sparse | FileCheck %s
// RUN: zenopt-opt %S/Inputs/embedding.mlir --zen-plan-sparse --zen-autotune | FileCheck %s --check-prefix=TUNED
// Two ranks of a node, a 1000-row table 1024 lookups deep: most rows are touched, dense wins
// and the table is left to the buckets.
// RUN: sed 's/200000/1000/g' %S/Inputs/embedding.mlir | zenopt-opt --zen-plan-sparse="cluster=a100x8 dp=2" | FileCheck %s --check-prefix=DENSE
// With dense-in-buckets off (manual buckets), a dense table is synchronised on its own.
// RUN: sed 's/200000/1000/g' %S/Inputs/embedding.mlir | zenopt-opt --zen-plan-sparse="cluster=a100x8 dp=2 dense-in-buckets=0" | FileCheck %s --check-prefix=DENSE-ALONE
// Measured statistics (zenopt sparsity -o) replace the Zipf model, for every table or by name.
// RUN: zenopt-opt %S/Inputs/embedding.mlir --zen-plan-sparse="cluster=a100x8 dp=2 statistics=%S/Inputs/sparsity-dense.json" | FileCheck %s --check-prefix=MEASURED
// RUN: zenopt-opt %S/Inputs/embedding.mlir --zen-plan-sparse="cluster=a100x8 dp=2 statistics=embedding.weight=%S/Inputs/sparsity-dense.json" | FileCheck %s --check-prefix=MEASURED
// RUN: not zenopt-opt %S/Inputs/embedding.mlir --zen-plan-sparse="statistics=fc.weight=%S/Inputs/sparsity-dense.json" 2>&1 | FileCheck %s --check-prefix=NOT-SPARSE
// RUN: not zenopt-opt %S/Inputs/embedding.mlir --zen-plan-sparse="statistics=%t.missing.json" 2>&1 | FileCheck %s --check-prefix=MISSING

// CHECK-LABEL: func.func @train_step
// CHECK: %[[TABLE:.*]] = zen.param "embedding.weight"
// CHECK: %[[FC:.*]] = zen.param "fc.weight"
// CHECK: %[[GFC:.*]] = zen.gradient %[[FC]]
// CHECK: %[[GT:.*]] = zen.gradient %[[TABLE]], %{{.*}} {ready_order = 1 : i64, row_lookups = 1024 : i64}
// CHECK-NEXT: %[[ST:.*]] = zen.sparse_all_reduce %[[GT]] balanced {group = #zen.group<size = 64, nodes = 8>, statistics = #zen.sparsity<density = 0.0033002974908741271 : f64, gamma = [1.000000e+00, {{.*}}, 31.839448320237548], skew = 0.7478117451796944 : f64, {{.*}}, source = model>} : tensor<200000x64xf32>
// CHECK-NOT: zen.sparse_all_reduce
// CHECK: zen.compute "SGD" optimizer(%[[FC]], %[[GFC]])
// CHECK: zen.compute "SGD" optimizer(%[[TABLE]], %[[ST]])

// TUNED-LABEL: func.func @train_step
// TUNED: %[[GFC:.*]] = zen.gradient
// TUNED-NEXT: %[[PACK:.*]] = zen.pack %[[GFC]] {bucket = 0 : i64} : tensor<10x1024xf32> -> tensor<10240xf32>
// TUNED: %[[GT:.*]] = zen.gradient {{.*}}row_lookups = 1024
// TUNED-NEXT: %[[ST:.*]] = zen.sparse_all_reduce %[[GT]] balanced
// TUNED-NOT: zen.pack
// TUNED: zen.compute "SGD" optimizer(%{{.*}}, %[[ST]])

// DENSE-LABEL: func.func @train_step
// DENSE: %[[GT:.*]] = zen.gradient %{{.*}} row_lookups = 1024
// DENSE-NOT: zen.sparse_all_reduce
// DENSE: zen.compute "SGD" optimizer(%{{.*}}, %[[GT]])

// DENSE-ALONE-LABEL: func.func @train_step
// DENSE-ALONE: zen.sparse_all_reduce %{{.*}} dense {group = #zen.group<size = 2, nodes = 1>

// Measured density 0.6 on the table the Zipf model finds 0.3% dense (balanced, above): dense.
// MEASURED-LABEL: func.func @train_step
// MEASURED: %[[GT:.*]] = zen.gradient %{{.*}} row_lookups = 1024
// MEASURED-NOT: zen.sparse_all_reduce
// MEASURED: zen.compute "SGD" optimizer(%{{.*}}, %[[GT]])

// NOT-SPARSE: error: zen-plan-sparse: statistics for 'fc.weight', which is not a row-sparse gradient of the model
// MISSING: error: zen-plan-sparse: {{.*}}missing.json

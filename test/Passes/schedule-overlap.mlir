// zen-schedule-overlap: stream, priority and issue order of every collective.
// RUN: zenopt-opt %S/Inputs/mlp.mlir --zen-insert-grad-sync --zen-fuse-gradients=strategy=wfbp --zen-decompose="split=all chunks=1" --zen-schedule-overlap=streams=2 | FileCheck %s
// RUN: zenopt-opt %S/Inputs/mlp.mlir --zen-insert-grad-sync --zen-fuse-gradients=strategy=wfbp --zen-decompose="split=all chunks=1" --zen-schedule-overlap=streams=1 | FileCheck %s --check-prefix=ONE

// Reduce-scatters go out in ready order on stream 0; the decoupled all-gathers
// follow on stream 1 in the order the next forward needs them (fc1 first).
// CHECK-LABEL: func.func @train_step
// CHECK: %[[RS0:.*]] = zen.reduce_scatter avg %{{.*}} {{.*}}bucket = 0 {{.*}}schedule = #zen.schedule<stream = 0, priority = 0, order = 0>
// CHECK-NEXT: zen.all_gather %[[RS0]] {bucket = 0 {{.*}}decoupled{{.*}}schedule = #zen.schedule<stream = 1, priority = 5, order = 5>
// CHECK: %[[RS1:.*]] = zen.reduce_scatter avg %{{.*}} {{.*}}bucket = 1 {{.*}}schedule = #zen.schedule<stream = 0, priority = 1, order = 1>
// CHECK-NEXT: zen.all_gather %[[RS1]] {{.*}}schedule = #zen.schedule<stream = 1, priority = 4, order = 4>
// CHECK: %[[RS2:.*]] = zen.reduce_scatter avg %{{.*}} {{.*}}bucket = 2 {{.*}}schedule = #zen.schedule<stream = 0, priority = 2, order = 2>
// CHECK-NEXT: zen.all_gather %[[RS2]] {{.*}}schedule = #zen.schedule<stream = 1, priority = 3, order = 3>

// ONE-LABEL: func.func @train_step
// ONE-COUNT-6: schedule = #zen.schedule<stream = 0,

// zen-print-timeline: every simulated task with its start and end.
// RUN: zenopt-opt %S/Inputs/mlp.mlir --zen-insert-grad-sync --zen-fuse-gradients="strategy=manual buckets=1,2" --zen-print-timeline -o /dev/null | FileCheck %s
// RUN: zenopt-opt %S/Inputs/mlp.mlir --zen-print-timeline -o /dev/null | FileCheck %s --check-prefix=COMPUTE

// Forward segments start where a parameter is first read, backward segments
// end where a gradient becomes ready; bucket 0 starts when fc3's gradient is
// ready, each optimizer step when its all-reduce is done.
// CHECK-LABEL: task fwd.fc1 start 0.000
// CHECK-SAME: end [[F1:[0-9.]+]]
// CHECK-NEXT: task fwd.fc2 start [[F1]] end [[F2:[0-9.]+]]
// CHECK-NEXT: task fwd.fc3 start [[F2]] end [[F3:[0-9.]+]]
// CHECK-NEXT: task bwd.fc3 start [[F3]] end [[B3:[0-9.]+]]
// CHECK-NEXT: task bwd.fc2 start [[B3]] end [[B2:[0-9.]+]]
// CHECK-NEXT: task bwd.relu1 start [[B2]] end [[B1:[0-9.]+]]
// CHECK-NEXT: task all_reduce.b0 start [[B3]] end [[R0:[0-9.]+]]
// CHECK-NEXT: task optimizer.b0 start [[R0]] end
// CHECK-NEXT: task all_reduce.b1 start {{[0-9.]+}} end [[R1:[0-9.]+]]
// CHECK-NEXT: task optimizer.b1 start [[R1]] end [[END:[0-9.]+]]
// CHECK-NEXT: iteration [[END]] compute

// COMPUTE-LABEL: task fwd.fc1 start 0.000
// COMPUTE-NOT: all_reduce
// COMPUTE: iteration

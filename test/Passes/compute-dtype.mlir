// The module attribute zen.compute_dtype (what `zenopt --precision` sets) prices fp32
// forward and backward compute at a mixed precision. The MLP is memory-bound on the
// default A100 cluster, so bf16 halves each op's time (half the bytes), while tf32 keeps
// fp32 storage and changes nothing.
// RUN: zenopt-opt %S/Inputs/mlp.mlir --zen-print-timeline -o /dev/null | FileCheck %s --check-prefix=FP32
// RUN: sed 's/zen.batch_mode = "scaled"/&, zen.compute_dtype = "tf32"/' %S/Inputs/mlp.mlir | zenopt-opt --zen-print-timeline -o /dev/null | FileCheck %s --check-prefix=FP32
// RUN: sed 's/zen.batch_mode = "scaled"/&, zen.compute_dtype = "bf16"/' %S/Inputs/mlp.mlir | zenopt-opt --zen-print-timeline -o /dev/null | FileCheck %s --check-prefix=BF16
// FP32: task fwd.fc1 start 0.000 end 2.632
// FP32: iteration 15.831
// BF16: task fwd.fc1 start 0.000 end 1.316
// BF16: iteration 7.915

// Anything else is an error naming the attribute.
// RUN: sed 's/zen.batch_mode = "scaled"/&, zen.compute_dtype = "int8"/' %S/Inputs/mlp.mlir | not zenopt-opt --zen-print-timeline -o /dev/null 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: sed 's/zen.batch_mode = "scaled"/&, zen.compute_dtype = 16 : i64/' %S/Inputs/mlp.mlir | not zenopt-opt --zen-print-timeline -o /dev/null 2>&1 | FileCheck %s --check-prefix=UNTYPED
// BAD: error: zen.compute_dtype must be "fp32", "tf32", "bf16" or "fp16", got
// UNTYPED: error: 'zen.compute_dtype' must be a string, got 16 : i64

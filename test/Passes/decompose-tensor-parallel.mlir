// zen-decompose-tensor-parallel on the toy two-block transformer (4 tokens) at tp 2: each
// tensor-parallel collective and the GEMM next to it take their region's and phase's chunks.
// RUN: zenopt-opt %S/Inputs/toy-transformer.mlir --zen-partition-tensor-parallel=tp=2 --zen-decompose-tensor-parallel="mlp-forward=2 attention-backward=4" --mlir-print-op-on-diagnostic=false 2>/dev/null | FileCheck %s
// RUN: zenopt-opt %S/Inputs/toy-transformer.mlir --zen-partition-tensor-parallel="tp=2 sequence-parallel=true" --zen-decompose-tensor-parallel="attention-forward=2 mlp-backward=4" --mlir-print-op-on-diagnostic=false 2>/dev/null | FileCheck %s --check-prefix=SP
// RUN: not zenopt-opt %S/Inputs/toy-transformer.mlir --zen-partition-tensor-parallel=tp=2 --zen-decompose-tensor-parallel="mlp-forward=3" -o /dev/null 2>&1 | FileCheck %s --check-prefix=INDIVISIBLE
// RUN: not zenopt-opt %S/Inputs/toy-transformer.mlir --zen-decompose-tensor-parallel="mlp-forward=0" -o /dev/null 2>&1 | FileCheck %s --check-prefix=ZERO

// CHECK-LABEL: func.func @train_step
// The attention output's all-reduce stays whole in forward (attention-forward = 1) ...
// CHECK: %[[OUT:.*]] = zen.compute "MatMul" forward({{.*}}) {{{.*}}node = "b0.out/MatMul"}
// CHECK-NEXT: zen.all_reduce sum %[[OUT]] {group
// ... the second MLP GEMM and its all-reduce go in 2 chunks.
// CHECK: %[[FC2:.*]] = zen.compute "MatMul" forward({{.*}}) {{{.*}}node = "b0.fc2/MatMul", zen.tp_chunks = 2 : i64}
// CHECK-NEXT: zen.all_reduce sum %[[FC2]] {chunks = 2 : i64, {{.*}}zen.role = #zen.role<tensor_parallel>}
// Backward: the QKV input gradient's all-reduce in 4, the first MLP's whole.
// CHECK: %[[FC1_GRAD:.*]]:2 = zen.compute "MatMulGrad" backward({{.*}}) {{{.*}}node = "b1.fc1/MatMul"}
// CHECK-NEXT: zen.all_reduce sum %[[FC1_GRAD]]#0 {group
// CHECK: %[[QKV_GRAD:.*]]:2 = zen.compute "MatMulGrad" backward({{.*}}) {{{.*}}node = "b1.qkv/MatMul", zen.tp_chunks = 4 : i64}
// CHECK-NEXT: zen.all_reduce sum %[[QKV_GRAD]]#0 {chunks = 4 : i64,

// SP-LABEL: func.func @train_step
// The gather before QKV pairs with QKV (its first reader), the reduce-scatter with the output GEMM.
// SP: %[[GATHERED:.*]] = zen.all_gather %{{.*}} {chunks = 2 : i64, {{.*}}zen.role = #zen.role<sequence_parallel>}
// SP-NEXT: zen.compute "MatMul" forward(%[[GATHERED]], %{{.*}}) {{{.*}}node = "b0.qkv/MatMul", zen.tp_chunks = 2 : i64}
// SP: %[[OUT:.*]] = zen.compute "MatMul" forward({{.*}}) {{{.*}}node = "b0.out/MatMul", zen.tp_chunks = 2 : i64}
// SP-NEXT: zen.reduce_scatter sum %[[OUT]] {chunks = 2 : i64,
// Backward MLP: the gather before the second GEMM's gradient, the reduce-scatter after the first's.
// SP: %[[GRAD_IN:.*]] = zen.all_gather %{{.*}} {chunks = 4 : i64,
// SP-NEXT: zen.compute "MatMulGrad" backward(%[[GRAD_IN]], {{.*}}) {{{.*}}node = "b1.fc2/MatMul", zen.tp_chunks = 4 : i64}
// SP: %[[FC1_GRAD:.*]]:2 = zen.compute "MatMulGrad" backward({{.*}}) {{{.*}}node = "b1.fc1/MatMul", zen.tp_chunks = 4 : i64}
// SP-NEXT: zen.reduce_scatter sum %[[FC1_GRAD]]#0 {chunks = 4 : i64,

// INDIVISIBLE: error: zen-decompose-tensor-parallel: 3 chunks do not divide the 4 tokens of 'b0.fc2/MatMul'
// ZERO: error: zen-decompose-tensor-parallel: chunks must be at least 1, got 0

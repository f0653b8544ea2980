// zen-plan-moe: expert parallelism and each MoE layer's pipelining degrees and
// all-to-all algorithm, written as one #zen.moe_schedule on the layer's three ops.
// RUN: zenopt-opt %S/Inputs/moe.mlir --zen-autotune="cluster=h100x256" --zen-plan-moe="ep=8" | FileCheck %s
// CHECK-LABEL: func.func @train_step
// CHECK: %[[D:.*]], %[[G:.*]] = zen.moe_dispatch {{.*}}node = "blocks.1.moe", schedule = [[S:#zen.moe_schedule<ep = 8, forward = [0-9]+, backward = [0-9]+, all_to_all = "(flat|2d)">]]}
// CHECK: %[[E:.*]] = zen.moe_experts relu %[[D]], {{.*}}schedule = [[S]]}
// CHECK: zen.moe_combine %[[E]], %[[G]] {{.*}}schedule = [[S]]}

// Without expert parallelism there is no all-to-all, so nothing to pipeline.
// RUN: zenopt-opt %S/Inputs/moe.mlir --zen-plan-moe="cluster=h100x256 ep=1" | FileCheck %s --check-prefix=LOCAL
// LOCAL-LABEL: func.func @train_step
// LOCAL-COUNT-3: schedule = #zen.moe_schedule<ep = 1, forward = 1, backward = 1, all_to_all = "flat">

// Searched: some ep dividing the 8 experts and the 256 ranks, the same on every op.
// RUN: zenopt-opt %S/Inputs/moe.mlir --zen-autotune="cluster=h100x256" --zen-plan-moe | FileCheck %s --check-prefix=SEARCH
// SEARCH-LABEL: func.func @train_step
// SEARCH: zen.moe_dispatch {{.*}}schedule = [[S:#zen.moe_schedule<ep = (1|2|4|8), [^>]*>]]}
// SEARCH: zen.moe_experts {{.*}}schedule = [[S]]}
// SEARCH: zen.moe_combine {{.*}}schedule = [[S]]}

// Token compression: only an allowed method that shrinks the fp32 tokens, not one
// fixed to the host; int8 (a byte per element) where it pays, and over 10 GbE it does.
// RUN: zenopt-opt %S/Inputs/moe.mlir --zen-autotune="cluster=v100x16-10gbe" --zen-plan-moe="ep=8 compressor=fp16@cpu,bf16" | FileCheck %s --check-prefix=TOKENS
// TOKENS-LABEL: func.func @train_step
// TOKENS: %[[D:.*]], %[[G:.*]] = zen.moe_dispatch {{.*}}schedule = [[S:#zen.moe_schedule<ep = 8, forward = [0-9]+, backward = [0-9]+, all_to_all = "flat", tokens = "bf16">]]}
// TOKENS: %[[E:.*]] = zen.moe_experts relu %[[D]], {{.*}}schedule = [[S]]}
// TOKENS: zen.moe_combine %[[E]], %[[G]] {{.*}}schedule = [[S]]}
// RUN: zenopt-opt %S/Inputs/moe.mlir --zen-autotune="cluster=v100x16-10gbe" --zen-plan-moe="ep=8 compressor=fp16@cpu,int8" | FileCheck %s --check-prefix=INT8
// INT8-LABEL: func.func @train_step
// INT8-COUNT-3: tokens = "int8">
// RUN: zenopt-opt %S/Inputs/moe.mlir --zen-autotune="cluster=v100x16-10gbe" --zen-plan-moe="ep=8 compressor=fp16@cpu" | FileCheck %s --check-prefix=HOST
// HOST-LABEL: func.func @train_step
// HOST-NOT: tokens =
// RUN: not zenopt-opt %S/Inputs/moe.mlir --zen-plan-moe="compressor=bogus" 2>&1 | FileCheck %s --check-prefix=BOGUS
// BOGUS: error: invalid compressor option: invalid compressor "bogus"

// A module without MoE layers is left unchanged.
// RUN: zenopt-opt %S/Inputs/mlp.mlir --zen-plan-moe | FileCheck %s --check-prefix=NONE
// NONE-LABEL: func.func @train_step
// NONE-NOT: moe_schedule

// RUN: not zenopt-opt %S/Inputs/moe.mlir --zen-plan-moe="cluster=h100x256 ep=3" 2>&1 | FileCheck %s --check-prefix=DIVIDE
// DIVIDE: error: zen-plan-moe: blocks.1.moe: ep 3 does not divide the 8 experts
// RUN: not zenopt-opt %S/Inputs/moe.mlir --zen-plan-moe="cluster=h100x256 dp=4 ep=8" 2>&1 | FileCheck %s --check-prefix=DP
// DP: error: zen-plan-moe: blocks.1.moe: ep 8 does not divide dp 4
// RUN: not zenopt-opt %S/Inputs/moe.mlir --zen-plan-moe="imbalance=0.5" 2>&1 | FileCheck %s --check-prefix=IMBALANCE
// IMBALANCE: error: zen-plan-moe: the MoE imbalance factor must be finite and at least 1
// RUN: not zenopt-opt %S/Inputs/mlp.mlir --zen-plan-moe="ep=2" 2>&1 | FileCheck %s --check-prefix=NOMOE
// NOMOE: error: zen-plan-moe: ep = 2 needs MoE layers; the module has none

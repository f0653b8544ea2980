//===- PlanEmitter.h - scheduled zen IR to a plan file ----------*- C++ -*-===//
#ifndef ZEN_CODEGEN_PLANEMITTER_H
#define ZEN_CODEGEN_PLANEMITTER_H

#include "zen/CostModel/CostModel.h"
#include "zen/Planner/Moe.h"
#include "zen/Planner/Planning.h"
#include "zenrt/Plan.h"

#include "mlir/IR/BuiltinOps.h"

#include <optional>
#include <string>

namespace zen::codegen {

/// What a plan file records about where it came from.
struct PlanHeader {
  std::string modelName, modelHash, strategy, compressor;
  /// A large-model plan's `parallel` section (JSON object text, see
  /// ParallelPlan.h): the problem is then its first stage's data-parallel
  /// sync, over the data-parallel group that configuration places.
  std::string parallel;
};

/// Lowers a plan choice for `problem` (no IR): tensors, buckets, the schedule
/// (the simulator's task graph, task for task) and its predictions. The plan
/// must re-score exactly as plan::evaluate scores the choice; otherwise, or for
/// a collective without a bucket, returns nullopt with the reason in `error`.
std::optional<zenrt::Plan> lowerChoice(const plan::Problem &problem, const plan::PlanChoice &choice,
                                       const cost::CostModel &model, const PlanHeader &header,
                                       std::string &error);

/// Replaces `plan`'s tensors, buckets, schedule and predictions (the
/// data-parallel sync `sync`, as lowered) by plan::expertParallelSync's at
/// `ep` on `dp`: each rank's expert tensors are its experts' (expert_parallel),
/// in expert_replicas buckets whose collectives run over the ranks holding the
/// same experts, as libzenrt runs them. Throws std::logic_error when that
/// cannot be lowered (the plan would not score as the planner's schedule).
void syncExpertsOverReplicas(zenrt::Plan &plan, const plan::GradientSync &sync, int64_t ep,
                             cost::Group dp, const cost::CostModel &model);

/// Lowers the synchronised, scheduled training function of `module` (after
/// zen-autotune or the individual planning passes) to a plan: tensors, buckets
/// with their compression and collectives, the ordered schedule with
/// dependencies, and the predictions the simulator gives for exactly that
/// schedule. `compressor` records the compression policy the planner ran with.
/// Emits an MLIR error and fails on IR that is not a complete plan.
mlir::FailureOr<zenrt::Plan> emitPlan(mlir::ModuleOp module, const cost::CostModel &model,
                                      const std::string &compressor);

/// The plan of any planned module, lowered from its IR alone (zenopt -o and
/// zenopt lower): a large model's by emitParallelPlan; otherwise emitPlan with
/// the module's zen.compressor, and, for MoE layers zen-plan-moe planned, the
/// `moe` section (their ep and schedule from the IR, what else the search found
/// from zen.moe_search, the layers re-evaluated at that ep and checked to be the
/// IR's schedule); `moeMemory`, when given, gets one GPU's memory under it.
mlir::FailureOr<zenrt::Plan> emitModulePlan(mlir::ModuleOp module, const cost::CostModel &model,
                                            std::optional<cost::MemoryBreakdown> *moeMemory = nullptr);

/// Lowers the large-model decision recorded on `module` (zen.transformer,
/// zen.parallel, zen.parallel_search, set by zen::planParallel's caller and kept
/// by the partitioning passes) to a plan: the chosen configuration re-scored by
/// plan::scoreWithSync, its `parallel` section, and its first stage's
/// data-parallel sync (plan::stageSyncSchedule) as tensors, buckets and
/// schedule. Emits an MLIR error and fails when the module has no decision or
/// the sync cannot be lowered.
mlir::FailureOr<zenrt::Plan> emitParallelPlan(mlir::ModuleOp module, const cost::CostModel &model);

} // namespace zen::codegen

#endif // ZEN_CODEGEN_PLANEMITTER_H

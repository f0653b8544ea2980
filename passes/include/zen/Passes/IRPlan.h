//===- IRPlan.h - between the zen dialect and planning choices --*- C++ -*-===//
//
// Extracts the planning Problem from a training function, reads back the plan
// already materialised in it (buckets, compression, chunks, decomposition,
// schedule), and materialises a PlanChoice: every gradient goes through
// [zen.pack] -> [zen.compress] -> collective(s) -> [zen.decompress] ->
// [zen.unpack] into the optimizer step. Ops of bucket N carry `bucket = N : i64`.
//
//===----------------------------------------------------------------------===//
#ifndef ZEN_PASSES_IRPLAN_H
#define ZEN_PASSES_IRPLAN_H

#include "zen/Dialect/ZenDialect.h"
#include "zen/Planner/Planning.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

#include <optional>

namespace zen::plan {

/// Discardable attribute names the passes write.
inline constexpr const char *kBucketAttr = "bucket";
inline constexpr const char *kAfterBackwardAttr = "after_backward";
/// Module attribute: the precision of fp32 forward/backward compute
/// ("fp32" when absent, "tf32", "bf16", "fp16"); see Problem::computeDtype.
inline constexpr const char *kComputeDtypeAttr = "zen.compute_dtype";

/// The training function with its problem; `gradients` parallels problem.gradients.
struct TrainingFunction {
  mlir::func::FuncOp func;
  Problem problem;
  std::vector<GradientOp> gradients;
};

/// Finds the one function with zen.gradient ops in `module` and extracts its
/// problem, pricing compute with `model` at the module's kComputeDtypeAttr.
/// Emits an error and fails when there is none or more than one, or when the
/// compute precision is not one parseComputeDtype accepts.
mlir::FailureOr<TrainingFunction> extractTraining(mlir::ModuleOp module,
                                                  const cost::CostModel &model);

/// The gradient synchronisation already in the IR, or nullopt when gradients
/// are not synchronised yet. `group` receives the collectives' process group.
/// Fails (with an error) on a partial or non-consecutive synchronisation.
mlir::FailureOr<std::optional<PlanChoice>> readPlan(const TrainingFunction &training,
                                                    cost::Group &group);

/// Replaces any existing synchronisation with `choice` (which must satisfy
/// validateChoice) over `group`; creates the optimizer steps when missing.
mlir::LogicalResult materializePlan(TrainingFunction &training, const PlanChoice &choice,
                                    cost::Group group);

/// Loads the cluster named by a pass option; emits an error on `op` and
/// returns nullopt when it cannot be loaded (ClusterError never escapes).
std::optional<cost::Cluster> loadClusterOption(mlir::Operation *op, const std::string &cluster);

/// The data-parallel group for a `dp` option (0 = every GPU); emits an error
/// when it does not fit the cluster.
std::optional<cost::Group> groupForOption(mlir::Operation *op, const cost::CostModel &model,
                                          int64_t dp);

} // namespace zen::plan

#endif // ZEN_PASSES_IRPLAN_H

//===- IRPlan.h - reading plans out of the zen dialect ----------*- C++ -*-===//
//
// Extracts the planning Problem from a training function and reads back the
// plan already in it (buckets, compression, chunks, decomposition, schedule).
// A synchronised gradient goes through [zen.pack] -> [zen.compress] ->
// collective(s) -> [zen.decompress] -> [zen.unpack] into the optimizer step;
// ops of bucket N carry `bucket = N`. BucketRewrites.h edits that IR.
//
//===----------------------------------------------------------------------===//
#ifndef ZEN_ANALYSIS_IRPLAN_H
#define ZEN_ANALYSIS_IRPLAN_H

#include "zen/Dialect/ZenDialect.h"
#include "zen/CostModel/Transformer.h"
#include "zen/Planner/Planning.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

#include <optional>
#include <utility>
#include <vector>

namespace zen::plan {


/// Bytes per element of a gradient tensor.
int64_t elementBytes(mlir::RankedTensorType type);
/// True for an optimizer-phase zen.compute.
bool isOptimizer(mlir::Operation *op);
/// Calls `visit` on every func.func of `module` without walking their bodies:
/// finding the training function costs the functions, not their ops.
void forEachFunction(mlir::ModuleOp module, llvm::function_ref<void(mlir::func::FuncOp)> visit);

/// The training function with its problem; `gradients` parallels problem.gradients.
struct TrainingFunction {
  mlir::func::FuncOp func;
  Problem problem;
  std::vector<GradientOp> gradients;
  /// The row-sparse gradients' synchronisations; parallels problem.sparse.
  std::vector<SparseAllReduceOp> sparse;
  /// The compute segment of every zen.moe_experts (a forward segment, which
  /// it starts: it reads its experts first) and every MoEGrad zen.compute (a
  /// backward segment, which it ends: the experts' gradients are its), in
  /// program order.
  std::vector<std::pair<mlir::Operation *, int>> moeSegments;
};

/// Whether zen-plan-sparse synchronises `gradient` on its own in a module without MoE
/// layers: a row-sparse (row_lookups) static f32 table, not a ZeRO-3 shard.
bool plansSparse(GradientOp gradient);
/// The zen.sparse_all_reduce that synchronises `gradient`, or null: such a gradient is in
/// Problem::sparse, not in Problem::gradients and no bucket.
SparseAllReduceOp sparseSyncOf(GradientOp gradient);
/// What prices a zen.sparse_all_reduce: its scheme, its table (rows x the rest) and statistics.
cost::SparseSync sparseSyncOf(SparseAllReduceOp op);
/// #zen.sparsity and the cost model's statistics, both ways.
cost::SparsityStatistics statisticsOf(SparsityAttr attr);
SparsityAttr sparsityAttr(mlir::MLIRContext *context, const cost::SparsityStatistics &stats);

/// What extractTraining prices `op` (a zen.compute or an MoE op) at: its FLOPs
/// and bytes at the precision it runs at when fp32 ops run at `computeDtype`.
/// The framework settings the module records (verified by the dialect) into `setup`:
/// zen.grad_accumulation_dtype (zenopt's --grad-accumulation-dtype; absent: the frameworks'
/// default, cost::gradientAccumulationDtype), zen.attention (--attention), zen.zero3_regather and zen.zero3_prefetch_depth
/// (--zero3-regather, --zero3-prefetch-depth; absent: the setup's defaults).
void readFrameworkSettings(mlir::ModuleOp module, cost::TrainingSetup &setup);

double opComputeUs(mlir::Operation *op, cost::DType computeDtype, const cost::CostModel &model);

/// Finds the one function with zen.gradient ops in `module` and extracts its
/// problem, pricing compute with `model` at the module's kComputeDtypeAttr.
/// Emits an error and fails when there is none or more than one, or when the
/// compute precision is not one parseComputeDtype accepts.
/// With `stage`, only that pipeline stage's compute and gradients (ops whose
/// `stage` is it; zen-assign-pipeline-stages) make the problem, so each stage's
/// data-parallel sync is planned on its own.
mlir::FailureOr<TrainingFunction> extractTraining(mlir::ModuleOp module,
                                                  const cost::CostModel &model,
                                                  std::optional<int64_t> stage = std::nullopt);

/// One bucket's synchronisation as it stands in the IR.
struct BucketOps {
  BucketChoice settings;             // begin/end index problem.gradients
  bool packed = false;               // goes through zen.pack / zen.unpack
  bool afterBackward = false;        // waits for the end of backward
  llvm::SmallVector<mlir::Operation *> ops;  // in IR order
  llvm::SmallVector<mlir::Value> synced;     // replaces each member gradient
};

/// Every bucket in the function, ordered by first gradient; `group` receives
/// the collectives' process group. Fails (with an error) on a partial or
/// non-consecutive synchronisation.
mlir::FailureOr<std::vector<BucketOps>> readBuckets(const TrainingFunction &training,
                                                    cost::Group &group);

/// The gradient synchronisation already in the IR, or nullopt when gradients
/// are not synchronised yet. `group` receives the collectives' process group.
/// Fails (with an error) on a partial or non-consecutive synchronisation.
mlir::FailureOr<std::optional<PlanChoice>> readPlan(const TrainingFunction &training,
                                                    cost::Group &group);

} // namespace zen::plan

#endif // ZEN_ANALYSIS_IRPLAN_H

//===- Partitioning.h - shared by the partitioning passes -------*- C++ -*-===//
//
// What zen-partition-tensor-parallel, zen-assign-pipeline-stages and
// zen-shard-zero share: the backward ops of a forward node, cost scaling,
// recording the applied configuration in the module's zen.parallel, and
// building role-marked collectives.
//
//===----------------------------------------------------------------------===//
#ifndef ZEN_PASSES_LIB_PARTITIONING_H
#define ZEN_PASSES_LIB_PARTITIONING_H

#include "zen/CostModel/Transformer.h"
#include "zen/Dialect/ZenDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringMap.h"

#include <functional>

namespace zen::detail {

/// Backward zen.compute ops by the `node` of the forward op they differentiate.
llvm::StringMap<llvm::SmallVector<ComputeOp, 2>> backwardOpsByNode(mlir::func::FuncOp func);

/// The module's zen.parallel, or the default configuration.
ParallelAttr parallelOf(mlir::ModuleOp module);

/// Rewrites the module's zen.parallel with `edit` applied to its fields.
void recordParallel(mlir::ModuleOp module, const std::function<void(cost::ParallelConfig &)> &edit);

/// Marks a collective with what it is for (it then carries no bucket).
void setRole(mlir::Operation *collective, CollectiveRole role);

/// `type` with dimension `dim` divided by `parts` (the caller checked divisibility).
mlir::RankedTensorType shardedType(mlir::RankedTensorType type, int64_t dim, int64_t parts);

/// True when some collective of `module` belongs to a gradient bucket.
bool hasGradientSync(mlir::ModuleOp module);

}  // namespace zen::detail

#endif  // ZEN_PASSES_LIB_PARTITIONING_H

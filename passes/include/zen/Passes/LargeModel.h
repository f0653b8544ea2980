//===- LargeModel.h - the large-model decision and its place in the IR -*- C++ -*-===//
//
// Large-model planning of a recognised transformer: the tp/pp/dp/ZeRO (and ep)
// search's policy (planParallel), the decision it records on the module
// (zen.transformer, zen.parallel, zen.parallel_search), and that decision read
// back from the IR (readParallelDecision), from which the plan file is lowered
// (codegen::emitParallelPlan) after the partitioning passes applied it.
//
//===----------------------------------------------------------------------===//
#ifndef ZEN_PASSES_LARGEMODEL_H
#define ZEN_PASSES_LARGEMODEL_H

#include "zen/CostModel/Transformer.h"
#include "zen/Dialect/ZenDialect.h"
#include "zen/Planner/ParallelSearch.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LogicalResult.h"

#include <cstdint>
#include <map>
#include <string>

namespace zen {

/// What the plan of a large model is lowered from: the transformer, the chosen
/// configuration, the setup it was chosen under (the compute precision is the
/// module's zen.compute_dtype), the allowed compressors, and how the search's
/// alternatives scored.
struct ParallelDecision {
  cost::TransformerShape shape;
  cost::ParallelConfig config;
  cost::TrainingSetup setup;
  std::string compressor;  // --compressor's spelling; empty: none
  bool forced = false;     // the command line fixed part of the configuration
  int64_t configurationsScored = 0;
  /// The baselines' predicted iterations, why the others do not fit, and the configuration
  /// each ran (configText).
  BaselineTable baselines;
};

/// Searches the configurations `request` allows for `shape` on `model`'s
/// cluster and returns the decision. Throws zen::Error(BadInput) naming
/// `modelName` when no configuration can run or fit, and naming `clusterName`
/// when a prediction is not finite.
ParallelDecision planParallel(const cost::TransformerShape &shape, const cost::CostModel &model,
                              const plan::ParallelRequest &request, const std::string &compressor,
                              const std::string &modelName, const std::string &clusterName);

/// zen.parallel for `config`, and back (lossless).
ParallelAttr parallelAttr(mlir::MLIRContext *context, const cost::ParallelConfig &config);
cost::ParallelConfig parallelConfigOf(ParallelAttr attr);

/// Records `decision` on `module` (zen.transformer, zen.parallel, zen.parallel_search).
void recordParallelDecision(mlir::ModuleOp module, const ParallelDecision &decision);

/// The decision recorded on `module`; failure (diagnosed) when it has none or it is
/// inconsistent.
mlir::FailureOr<ParallelDecision> readParallelDecision(mlir::ModuleOp module);

/// "tp 2 x pp 2 x dp 16, ZeRO 1, recompute none, micro-batch 4" (with " (ep N)" for MoE).
std::string configText(const cost::ParallelConfig &config);
/// One GPU's memory and its parts, in GB.
std::string memoryText(const cost::MemoryBreakdown &memory);

/// True when `module` carries a large-model decision.
bool hasParallelDecision(mlir::ModuleOp module);

} // namespace zen

#endif // ZEN_PASSES_LARGEMODEL_H

//===- PassSupport.h - what every planning pass starts from -----*- C++ -*-===//
#ifndef ZEN_PASSES_LIB_PASSSUPPORT_H
#define ZEN_PASSES_LIB_PASSSUPPORT_H

#include "zen/Passes/BucketRewrites.h"
#include "zen/Analysis/CostModelAnalysis.h"

#include <optional>

namespace zen::detail {

/// A priced training function with the plan already in its IR.
struct PlanningState {
  const cost::CostModel *model = nullptr;
  plan::TrainingFunction training;
  /// The synchronisation in the IR; nullopt when gradients are not synchronised.
  std::optional<plan::PlanChoice> existing;
  /// The data-parallel group: the `dp` option's when positive; with the option
  /// at 0, the module's zen.parallel dp group (Megatron's placement), else every
  /// GPU; for passes without the option, the one the IR's collectives run over,
  /// else every GPU.
  cost::Group group;
};

/// The shared prologue: records a non-empty `clusterOption` as the module's
/// zen.cluster and a positive `nodesOption` as its zen.nodes (refreshing
/// `analysis` when that changes the cluster), extracts
/// the training function (one pipeline stage's with `stage`) and reads its
/// plan. With `requiredBy` set, the
/// gradients must already be synchronised (the error names that pass). Errors
/// are emitted on the module.
mlir::FailureOr<PlanningState> preparePlanning(mlir::ModuleOp module,
                                               llvm::StringRef clusterOption,
                                               int64_t nodesOption,
                                               CostModelAnalysis &analysis,
                                               std::optional<int64_t> dp,
                                               std::optional<llvm::StringRef> requiredBy,
                                               std::optional<int64_t> stage = std::nullopt);
/// Pipeline stages of the module: 1 + the largest `stage` on a zen.param, 0
/// when none has one (zen-assign-pipeline-stages has not run).
int64_t pipelineStagesOf(mlir::ModuleOp module);

/// The baseline rules' settings from a pass's options (sizes as the options spell them).
plan::BaselineOptions baselineOptions(llvm::ArrayRef<int64_t> manualBuckets, int64_t thresholdBytes,
                                      double horovodCycleTimeMs, int64_t horovodFusionThresholdMb);

/// Parses a pass's `compressor` option; emits an error on `op` when invalid.
std::optional<std::vector<cost::CompressionSpec>> compressorsOption(mlir::Operation *op,
                                                                    const std::string &text);

/// Greedy per-bucket improvement: for each bucket in turn, tries every variant
/// `variants(bucket)` produces and keeps the one the simulator scores best.
template <typename Variants>
void improvePerBucket(const plan::Problem &problem, plan::PlanChoice &choice,
                      const cost::CostModel &model, Variants variants) {
  double best = plan::evaluate(problem, choice, model).iterationUs;
  for (size_t b = 0; b < choice.buckets.size(); ++b)
    for (const plan::BucketChoice &variant : variants(choice.buckets[b])) {
      plan::PlanChoice candidate = choice;
      candidate.buckets[b] = variant;
      double time = plan::evaluate(problem, candidate, model).iterationUs;
      if (time < best * (1 - 1e-9)) {
        best = time;
        choice = std::move(candidate);
      }
    }
}

} // namespace zen::detail

#endif // ZEN_PASSES_LIB_PASSSUPPORT_H

//===- Autotune.cpp - the joint search ===//
//
// Searches bucketing, compression, chunks, decomposition and schedule on the
// compact planning problem (planner/), then applies the decision with the
// bucket rewrites and records the prediction and the baselines.
//
//===----------------------------------------------------------------------===//
#include "../PassSupport.h"
#include "zen/Passes/Passes.h"

#include "mlir/IR/Builders.h"

#include <map>

namespace zen {
#define GEN_PASS_DEF_AUTOTUNE
#include "zen/Passes/Passes.h.inc"
} // namespace zen

using namespace mlir;
using namespace zen::plan;

namespace zen {
namespace {
DictionaryAttr timesAttr(Builder &builder, const std::map<std::string, double> &times) {
  SmallVector<NamedAttribute> entries;
  for (const auto &[name, us] : times)
    entries.push_back(builder.getNamedAttr(name, builder.getF64FloatAttr(us)));
  return builder.getDictionaryAttr(entries);
}

struct AutotunePass : impl::AutotuneBase<AutotunePass> {
  using AutotuneBase::AutotuneBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::optional<std::vector<cost::CompressionSpec>> allowed =
        detail::compressorsOption(module, compressor);
    if (!allowed)
      return signalPassFailure();
    FailureOr<detail::PlanningState> state = detail::preparePlanning(
        module, cluster, nodes, getAnalysis<CostModelAnalysis>(), dp, std::nullopt);
    if (failed(state))
      return signalPassFailure();
    const cost::CostModel &model = *state->model;
    const Problem &problem = state->training.problem;

    plan::AutotuneOptions options;
    options.compressors = *allowed;
    options.baseline = detail::baselineOptions(buckets, thresholdBytes, horovodCycleTimeMs,
                                               horovodFusionThresholdMb);

    if (std::string error = checkBaselineOptions(options.baseline); !error.empty()) {
      module.emitError("zen-autotune: ") << error;
      return signalPassFailure();
    }
    PlanChoice choice;
    Evaluation evaluation;
    std::map<std::string, double> baselineUs, baselineUncompressedUs;
    if (strategy == PlanStrategy::automatic) {
      AutotuneResult result = autotune(problem, model, options);
      choice = std::move(result.best);
      evaluation = std::move(result.bestEval);
      baselineUs = std::move(result.baselineUs);
      baselineUncompressedUs = std::move(result.baselineUncompressedUs);
    } else {
      // A baseline with compressors allowed: the best of them, as the report compares.
      std::string error;
      std::optional<BaselineResult> baseline = bestBaseline(
          strategyName(strategy).str(), problem, model, options.baseline, *allowed, error);
      if (!baseline) {
        module.emitError("zen-autotune: ") << error;
        return signalPassFailure();
      }
      choice = std::move(baseline->choice);
      evaluation = std::move(baseline->evaluation);
      for (const std::string &name : baselineNames()) {
        baselineUs[name] = bestBaseline(name, problem, model, options.baseline, *allowed, error)
                               ->evaluation.iterationUs;
        if (!allowed->empty()) {
          baselineUncompressedUs[name] =
              bestBaseline(name, problem, model, options.baseline, {}, error)
                  ->evaluation.iterationUs;
          baselineUs[name] = std::min(baselineUs[name], baselineUncompressedUs[name]);
        }
      }
    }
    if (failed(applyPlan(state->training, choice, state->group)))
      return signalPassFailure();

    MLIRContext *context = &getContext();
    Builder builder(context);
    ZenDialect::StrategyAttrHelper(context).setAttr(module,
                                                    builder.getStringAttr(choice.strategy));
    ZenDialect::ClusterAttrHelper(context).setAttr(
        module, builder.getStringAttr(CostModelAnalysis::clusterOf(module)));
    ZenDialect::WorldSizeAttrHelper(context).setAttr(
        module, builder.getI64IntegerAttr(state->group.ranks));
    ZenDialect::PredictedAttrHelper(context).setAttr(
        module, PredictionAttr::get(context, evaluation.iterationUs, evaluation.computeUs,
                                    evaluation.exposedCommUs,
                                    lowerBoundUs(problem, model, *allowed)));
    ZenDialect::BaselinesAttrHelper(context).setAttr(module, timesAttr(builder, baselineUs));
    if (!baselineUncompressedUs.empty())
      ZenDialect::BaselinesUncompressedAttrHelper(context).setAttr(
          module, timesAttr(builder, baselineUncompressedUs));
    markAnalysesPreserved<CostModelAnalysis>();
  }
};
} // namespace
} // namespace zen

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

#include <cmath>
#include <map>

namespace zen {
#define GEN_PASS_DEF_AUTOTUNE
#include "zen/Passes/Passes.h.inc"
} // namespace zen

using namespace mlir;
using namespace zen::plan;

namespace zen {
namespace {
/// One synchronisation planned and applied: the module's, or one pipeline stage's.
struct PlannedSync {
  std::string strategy;
  Evaluation evaluation;
  double lowerBoundUs = 0;
  int64_t ranks = 0;
  std::map<std::string, double> baselineUs, baselineUncompressedUs;
};

struct AutotunePass : impl::AutotuneBase<AutotunePass> {
  using AutotuneBase::AutotuneBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::optional<std::vector<cost::CompressionSpec>> allowed =
        detail::compressorsOption(module, compressor);
    if (!allowed)
      return signalPassFailure();
    plan::AutotuneOptions options;
    options.compressors = *allowed;
    options.baseline = detail::baselineOptions(buckets, thresholdBytes, horovodCycleTimeMs,
                                               horovodFusionThresholdMb);
    if (std::string error = checkBaselineOptions(options.baseline); !error.empty()) {
      module.emitError("zen-autotune: ") << error;
      return signalPassFailure();
    }
    // Each pipeline stage synchronises its own gradients over its data-parallel
    // group; the first stage's plan is the module's prediction, as in the plan file.
    const int64_t stages = detail::pipelineStagesOf(module);
    std::optional<PlannedSync> first;
    for (int64_t stage = 0; stage < std::max<int64_t>(stages, 1); ++stage) {
      FailureOr<PlannedSync> planned =
          planSync(module, options, stages ? std::optional<int64_t>(stage) : std::nullopt);
      if (failed(planned))
        return signalPassFailure();
      if (!first)
        first = std::move(*planned);
    }

    MLIRContext *context = &getContext();
    Builder builder(context);
    ZenDialect::StrategyAttrHelper(context).setAttr(module, builder.getStringAttr(first->strategy));
    ZenDialect::ClusterAttrHelper(context).setAttr(
        module, builder.getStringAttr(CostModelAnalysis::clusterOf(module)));
    ZenDialect::WorldSizeAttrHelper(context).setAttr(module, builder.getI64IntegerAttr(first->ranks));
    const Evaluation &evaluation = first->evaluation;
    // The cluster file's physical ranges keep every prediction finite; one that is not
    // is an error here, never an attribute that fails its verifier.
    for (auto [name, us] : {std::pair{"iteration", evaluation.iterationUs},
                            {"compute", evaluation.computeUs},
                            {"exposed communication", evaluation.exposedCommUs},
                            {"lower bound", first->lowerBoundUs}})
      if (!std::isfinite(us) || us < 0) {
        module.emitError("zen-autotune: the predicted ")
            << name << " time on cluster '" << CostModelAnalysis::clusterOf(module)
            << "' is not a finite, non-negative number of microseconds";
        return signalPassFailure();
      }
    for (const auto *baselines : {&first->baselineUs, &first->baselineUncompressedUs})
      for (const auto &[name, us] : *baselines)
        if (!std::isfinite(us)) {
          module.emitError("zen-autotune: the ")
              << name << " baseline's time on cluster '" << CostModelAnalysis::clusterOf(module)
              << "' is not finite";
          return signalPassFailure();
        }
    ZenDialect::PredictedAttrHelper(context).setAttr(
        module, PredictionAttr::get(context, evaluation.iterationUs, evaluation.computeUs,
                                    evaluation.exposedCommUs, first->lowerBoundUs));
    BaselineTable baselines;
    baselines.iterationUs = first->baselineUs;
    baselines.uncompressedUs = first->baselineUncompressedUs;
    ZenDialect::BaselinesAttrHelper(context).setAttr(module, baselinesAttr(context, baselines));
    markAnalysesPreserved<CostModelAnalysis>();
  }

private:
  FailureOr<PlannedSync> planSync(ModuleOp module, const plan::AutotuneOptions &options,
                                  std::optional<int64_t> stage) {
    FailureOr<detail::PlanningState> state = detail::preparePlanning(
        module, cluster, nodes, getAnalysis<CostModelAnalysis>(), dp, std::nullopt, stage);
    if (failed(state))
      return failure();
    const cost::CostModel &model = *state->model;
    const Problem &problem = state->training.problem;
    const std::vector<cost::CompressionSpec> &allowed = options.compressors;
    PlannedSync planned;
    PlanChoice choice;
    if (strategy == Strategy::Auto) {
      AutotuneResult result = autotune(problem, model, options);
      choice = std::move(result.best);
      planned.evaluation = std::move(result.bestEval);
      planned.baselineUs = std::move(result.baselineUs);
      planned.baselineUncompressedUs = std::move(result.baselineUncompressedUs);
    } else {
      // A baseline with compressors allowed: the best of them, as the report compares.
      std::string error;
      std::optional<BaselineResult> baseline = bestBaseline(
          vocab::toString(strategy), problem, model, options.baseline, allowed, error);
      if (!baseline)
        return module.emitError("zen-autotune: ") << error;
      choice = std::move(baseline->choice);
      planned.evaluation = std::move(baseline->evaluation);
      for (const std::string &name : baselineNames()) {
        planned.baselineUs[name] = bestBaseline(name, problem, model, options.baseline, allowed, error)
                                       ->evaluation.iterationUs;
        if (!allowed.empty()) {
          planned.baselineUncompressedUs[name] =
              bestBaseline(name, problem, model, options.baseline, {}, error)->evaluation.iterationUs;
          planned.baselineUs[name] =
              std::min(planned.baselineUs[name], planned.baselineUncompressedUs[name]);
        }
      }
    }
    planned.strategy = choice.strategy;
    planned.lowerBoundUs = lowerBoundUs(problem, model, allowed);
    planned.ranks = state->group.ranks;
    if (failed(applyPlan(state->training, choice, state->group)))
      return failure();
    return planned;
  }
};
} // namespace
} // namespace zen

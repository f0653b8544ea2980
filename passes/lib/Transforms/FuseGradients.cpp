//===- FuseGradients.cpp - group gradients into buckets ===//
//
// Re-buckets the synchronised gradients with a baseline rule by fusing and
// splitting buckets (BucketRewrites.h); buckets that already match are kept.
//
//===----------------------------------------------------------------------===//
#include "../PassSupport.h"
#include "zen/Passes/Passes.h"

namespace zen {
#define GEN_PASS_DEF_FUSEGRADIENTS
#include "zen/Passes/Passes.h.inc"
} // namespace zen

using namespace mlir;
using namespace zen::plan;

namespace zen {
namespace {
struct FuseGradientsPass : impl::FuseGradientsBase<FuseGradientsPass> {
  using FuseGradientsBase::FuseGradientsBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<detail::PlanningState> state =
        detail::preparePlanning(module, cluster, nodes, getAnalysis<CostModelAnalysis>(),
                                std::nullopt, StringRef("zen-fuse-gradients"));
    if (failed(state))
      return signalPassFailure();
    BaselineOptions options = detail::baselineOptions(buckets, thresholdBytes, horovodCycleTimeMs,
                                                      horovodFusionThresholdMb);
    std::string error;
    std::optional<PlanChoice> choice = baselineChoice(
        vocab::toString(strategy), state->training.problem, *state->model, options, error);
    if (!choice) {
      module.emitError("zen-fuse-gradients: ") << error;
      return signalPassFailure();
    }
    if (failed(applyPlan(state->training, *choice, state->group)))
      return signalPassFailure();
    ZenDialect::StrategyAttrHelper(&getContext())
        .setAttr(module, StringAttr::get(&getContext(), vocab::toString(strategy)));
    markAnalysesPreserved<CostModelAnalysis>();
  }
};
} // namespace
} // namespace zen

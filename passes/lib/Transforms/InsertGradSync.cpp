//===- InsertGradSync.cpp - one all-reduce per gradient ===//
//
// Creates the data-parallel synchronisation: one unfused all_reduce per gradient
// and an optimizer step per parameter; an existing synchronisation is brought
// to that form with the bucket rewrites.
//
//===----------------------------------------------------------------------===//
#include "../PassSupport.h"
#include "zen/Passes/Passes.h"

namespace zen {
#define GEN_PASS_DEF_INSERTGRADSYNC
#include "zen/Passes/Passes.h.inc"
} // namespace zen

using namespace mlir;
using namespace zen::plan;

namespace zen {
namespace {
struct InsertGradSyncPass : impl::InsertGradSyncBase<InsertGradSyncPass> {
  using InsertGradSyncBase::InsertGradSyncBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<detail::PlanningState> state = detail::preparePlanning(
        module, cluster, nodes, getAnalysis<CostModelAnalysis>(), dp, std::nullopt);
    if (failed(state))
      return signalPassFailure();
    std::string error;
    std::optional<PlanChoice> choice = baselineChoice(
        "wfbp", state->training.problem, *state->model, BaselineOptions{}, error);
    if (!choice) {
      module.emitError(error);
      return signalPassFailure();
    }
    choice->fused = false;
    if (failed(applyPlan(state->training, *choice, state->group)))
      return signalPassFailure();
    markAnalysesPreserved<CostModelAnalysis>();
  }
};
} // namespace
} // namespace zen

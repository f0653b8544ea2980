//===- ScheduleOverlap.cpp - issue order, priority and stream ===//
//
// Assigns every collective's stream and priority in place and numbers the
// global issue order; no bucket's ops are replaced.
//
//===----------------------------------------------------------------------===//
#include "../PassSupport.h"
#include "zen/Passes/Passes.h"

namespace zen {
#define GEN_PASS_DEF_SCHEDULEOVERLAP
#include "zen/Passes/Passes.h.inc"
} // namespace zen

using namespace mlir;
using namespace zen::plan;

namespace zen {
namespace {
struct ScheduleOverlapPass : impl::ScheduleOverlapBase<ScheduleOverlapPass> {
  using ScheduleOverlapBase::ScheduleOverlapBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (streams != 1 && streams != 2) {
      module.emitError("zen-schedule-overlap: streams must be 1 or 2, got ")
          << static_cast<int64_t>(streams);
      return signalPassFailure();
    }
    FailureOr<detail::PlanningState> state =
        detail::preparePlanning(module, cluster, nodes, getAnalysis<CostModelAnalysis>(),
                                std::nullopt, StringRef("zen-schedule-overlap"));
    if (failed(state))
      return signalPassFailure();
    PlanChoice choice = *state->existing;
    assignSchedule(choice, static_cast<int>(streams));
    if (failed(applyPlan(state->training, choice, state->group)))
      return signalPassFailure();
    markAnalysesPreserved<CostModelAnalysis>();
  }
};
} // namespace
} // namespace zen

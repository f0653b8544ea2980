//===- PrintTimeline.cpp - print the simulated iteration ===//
//
// An analysis printer: simulates the plan in the IR (compute only when the
// gradients are not synchronised) and prints every task; changes nothing.
//
//===----------------------------------------------------------------------===//
#include "../PassSupport.h"
#include "zen/Passes/Passes.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

namespace zen {
#define GEN_PASS_DEF_PRINTTIMELINE
#include "zen/Passes/Passes.h.inc"
} // namespace zen

using namespace mlir;
using namespace zen::plan;

namespace zen {
namespace {
struct PrintTimelinePass : impl::PrintTimelineBase<PrintTimelinePass> {
  using PrintTimelineBase::PrintTimelineBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<detail::PlanningState> state =
        detail::preparePlanning(module, cluster, nodes, getAnalysis<CostModelAnalysis>(),
                                std::nullopt, std::nullopt);
    if (failed(state))
      return signalPassFailure();
    PlanChoice choice = state->existing.value_or(PlanChoice{});
    std::vector<cost::SimTask> tasks =
        buildSimTasks(state->training.problem, choice, *state->model);
    cost::SimResult result = cost::simulate(*state->model, tasks);
    llvm::raw_ostream &out = llvm::outs();
    for (size_t t = 0; t < tasks.size(); ++t)
      out << "task " << tasks[t].name << " start " << llvm::format("%.3f", result.startUs[t])
          << " end " << llvm::format("%.3f", result.endUs[t]) << "\n";
    out << "iteration " << llvm::format("%.3f", result.iterationUs) << " compute "
        << llvm::format("%.3f", result.computeUs) << " exposed_comm "
        << llvm::format("%.3f", result.exposedCommUs) << "\n";
    markAllAnalysesPreserved();
  }
};
} // namespace
} // namespace zen

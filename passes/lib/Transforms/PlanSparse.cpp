//===- PlanSparse.cpp - a sparse scheme per row-sparse gradient ===//
//
// Prices every sparse scheme for each row-sparse gradient (plan::planSparseTensors) and
// synchronises it with a zen.sparse_all_reduce under the cheapest, out of the dense buckets.
//
//===----------------------------------------------------------------------===//
#include "../PassSupport.h"
#include "zen/Passes/Moe.h"
#include "zen/Passes/Passes.h"
#include "zen/Planner/Sparse.h"

#include "mlir/IR/Builders.h"

#include <map>

namespace zen {
#define GEN_PASS_DEF_PLANSPARSE
#include "zen/Passes/Passes.h.inc"
} // namespace zen

using namespace mlir;
using namespace zen::plan;

namespace zen {
namespace {

struct PlanSparsePass : impl::PlanSparseBase<PlanSparsePass> {
  using PlanSparseBase::PlanSparseBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::string error;
    std::optional<std::vector<MoeLayerOps>> moeLayers = collectMoeLayers(module, error);
    if (!moeLayers) {
      module.emitError(error);
      return signalPassFailure();
    }
    if (!moeLayers->empty())
      return markAllAnalysesPreserved();
    // Nothing to plan, and no statistics to check against the tables: the search's own
    // extraction of the module is not repeated here (a tenth of planning 10 000 tensors).
    const bool hasTables =
        module.walk([](GradientOp gradient) {
                return gradient.getRowLookups() ? WalkResult::interrupt() : WalkResult::advance();
              }).wasInterrupted() ||
        module.walk([](SparseAllReduceOp) { return WalkResult::interrupt(); }).wasInterrupted();
    if (!hasTables && statistics.empty())
      return markAllAnalysesPreserved();
    FailureOr<detail::PlanningState> state = detail::preparePlanning(
        module, cluster, nodes, getAnalysis<CostModelAnalysis>(), dp, std::nullopt);
    if (failed(state))
      return signalPassFailure();
    // Planned again: the tables' own gradients, without their earlier synchronisation.
    for (SparseAllReduceOp old : state->training.sparse) {
      old.getResult().replaceAllUsesWith(old.getInput());
      old.erase();
    }
    std::optional<std::map<std::string, cost::SparsityStatistics>> measured = readStatistics(module);
    if (!measured)
      return signalPassFailure();

    FailureOr<TrainingFunction> training = extractTraining(module, *state->model);
    if (failed(training))
      return signalPassFailure();
    std::vector<GradientOp> tables;
    std::vector<SparseTensorRequest> requests;
    for (GradientOp gradient : training->gradients) {
      // A ZeRO-3 shard or a table in another precision stays in the dense buckets.
      if (!plansSparse(gradient))
        continue;
      auto type = cast<RankedTensorType>(gradient.getType());
      auto param = gradient.getParam().getDefiningOp<ParamOp>();
      SparseTensorRequest request;
      request.name = param.getName().str();
      request.table = {type.getDimSize(0), type.getNumElements() / type.getDimSize(0)};
      request.lookupsPerStep = static_cast<int64_t>(*gradient.getRowLookups());
      request.sharedRows = gradient.getSharedRows();
      request.measured = cost::statisticsFor(*measured, request.name);
      requests.push_back(std::move(request));
      tables.push_back(gradient);
    }
    for (const auto &[name, stats] : *measured)
      if (!name.empty() && llvm::none_of(requests, [&](const SparseTensorRequest &request) {
            return request.name == name;
          })) {
        module.emitError("zen-plan-sparse: statistics for '")
            << name << "', which is not a row-sparse gradient of the model";
        return signalPassFailure();
      }
    if (requests.empty())
      return markAnalysesPreserved<CostModelAnalysis>();

    SparsePlan planned;
    try {
      planned = planSparseTensors(requests, *state->model, state->group);
    } catch (const zen::Error &problem) {
      module.emitError("zen-plan-sparse: ") << problem.what();
      return signalPassFailure();
    }
    // Every table has an optimizer step, which reads its synchronised gradient.
    ensureOptimizerSteps(*training);
    MLIRContext *context = module.getContext();
    auto group = ProcessGroupAttr::get(context, state->group.ranks, state->group.nodes);
    OpBuilder builder(context);
    for (size_t t = 0; t < tables.size(); ++t) {
      GradientOp gradient = tables[t];
      const SparseDecision &decision = planned.tensors[t];
      // Dense is the buckets' own all-reduce: the table stays in them, fused and overlapped
      // like every other gradient, as the large-model path prices it (not with manual
      // buckets: their sizes leave every table out, whatever its scheme).
      if (denseInBuckets && decision.chosen().scheme == vocab::SparseScheme::Dense)
        continue;
      builder.setInsertionPointAfter(gradient);
      auto sync = builder.create<SparseAllReduceOp>(
          gradient.getLoc(), gradient.getResult(),
          SparseSchemeAttr::get(context, fromVocabulary(decision.chosen().scheme)), group,
          sparsityAttr(context, decision.statistics));
      gradient.getResult().replaceAllUsesExcept(sync.getResult(), sync);
    }
    markAnalysesPreserved<CostModelAnalysis>();
  }

private:
  /// The `statistics` option's files by parameter ("" for every table); nullopt after an
  /// error naming the file.
  std::optional<std::map<std::string, cost::SparsityStatistics>> readStatistics(ModuleOp module) {
    try {
      return cost::readSparsityStatistics(statistics);
    } catch (const zen::Error &problem) {
      module.emitError("zen-plan-sparse: ") << problem.what();
      return std::nullopt;
    }
  }
};

} // namespace
} // namespace zen

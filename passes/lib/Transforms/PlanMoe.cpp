//===- PlanMoe.cpp - expert parallelism and MoE pipelining decisions ------===//
//
// Plans the module's MoE layers with plan::planMoe and records each layer's
// decision as a #zen.moe_schedule on its ops. The cost model is only read.
//
//===----------------------------------------------------------------------===//
#include "../PassSupport.h"
#include "zen/Passes/Moe.h"
#include "zen/Passes/Passes.h"

#include <stdexcept>

namespace zen {
#define GEN_PASS_DEF_PLANMOE
#include "zen/Passes/Passes.h.inc"
} // namespace zen

using namespace mlir;

namespace zen {
namespace {

struct PlanMoePass : impl::PlanMoeBase<PlanMoePass> {
  using PlanMoeBase::PlanMoeBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::string error;
    std::optional<std::vector<MoeLayerOps>> layers = collectMoeLayers(module, error);
    if (!layers) {
      module.emitError("zen-plan-moe: ") << error;
      return signalPassFailure();
    }
    if (layers->empty()) {
      if (ep != 0) {
        module.emitError("zen-plan-moe: ep = ")
            << ep.getValue() << " needs MoE layers; the module has none";
        return signalPassFailure();
      }
      return markAllAnalysesPreserved();
    }
    FailureOr<detail::PlanningState> state = detail::preparePlanning(
        module, cluster, nodes, getAnalysis<CostModelAnalysis>(), dp.getValue(), std::nullopt);
    if (failed(state))
      return signalPassFailure();
    std::optional<std::vector<cost::CompressionSpec>> compressors =
        detail::compressorsOption(module, compressor);
    if (!compressors)
      return signalPassFailure();
    std::vector<plan::MoeLayer> shapes;
    for (const MoeLayerOps &ops : *layers)
      shapes.push_back(ops.layer);
    FailureOr<plan::MoeRequest> request =
        moeRequestOf(module, shapes, *state->model, state->group,
                     ep ? std::optional<int64_t>(ep) : std::nullopt, imbalance, *compressors);
    if (failed(request))
      return signalPassFailure();
    plan::MoePlan planned;
    try {
      planned = plan::planMoe(shapes, *state->model, *request);
    } catch (const zen::Error &problem) {
      module.emitError("zen-plan-moe: ") << problem.what();
      return signalPassFailure();
    }
    MLIRContext *context = &getContext();
    for (size_t i = 0; i < layers->size(); ++i) {
      const cost::MoeLayerChoice &choice = planned.chosen.best.layers[i].choice;
      auto schedule = moeScheduleAttr(context, planned.chosen.ep, choice);
      MoeLayerOps &ops = (*layers)[i];
      for (Operation *op : {ops.dispatch.getOperation(), ops.experts.getOperation(),
                            ops.combine.getOperation()})
        op->setAttr("schedule", schedule);
    }
    // What the plan's moe section reports besides the choice, which the IR carries.
    auto f64 = [&](double value) { return FloatAttr::get(Float64Type::get(context), value); };
    SmallVector<NamedAttribute> searched, notFitting;
    for (const auto &[degree, extraUs] : planned.searched)
      searched.emplace_back(StringAttr::get(context, std::to_string(degree)), f64(extraUs));
    for (const auto &[degree, bytes] : planned.notFitting)
      notFitting.emplace_back(StringAttr::get(context, std::to_string(degree)), f64(bytes));
    module->setAttr(ZenDialect::MoeSearchAttrHelper::getNameStr(),
                    MoeSearchAttr::get(context, f64(imbalance), DictionaryAttr::get(context, searched),
                                       DictionaryAttr::get(context, notFitting), ArrayAttr()));
    markAllAnalysesPreserved();
  }
};

} // namespace
} // namespace zen

//===- PassSupport.cpp - what every planning pass starts from -------------===//
#include "PassSupport.h"

#include "zen/CostModel/Transformer.h"
#include "zen/Passes/PassOptions.h"

#include "mlir/IR/Builders.h"

using namespace mlir;

namespace zen {

namespace detail {

FailureOr<PlanningState> preparePlanning(ModuleOp module, StringRef clusterOption,
                                         int64_t nodesOption, CostModelAnalysis &analysis,
                                         std::optional<int64_t> dp,
                                         std::optional<StringRef> requiredBy,
                                         std::optional<int64_t> stage) {
  if (!clusterOption.empty())
    ZenDialect::ClusterAttrHelper(module.getContext())
        .setAttr(module, StringAttr::get(module.getContext(), clusterOption));
  if (nodesOption < 0)
    return module.emitError("nodes = ") << nodesOption << " must be positive (0: the cluster's own)";
  if (nodesOption > 0)
    ZenDialect::NodesAttrHelper(module.getContext())
        .setAttr(module, IntegerAttr::get(IntegerType::get(module.getContext(), 64), nodesOption));
  if (analysis.cluster() != CostModelAnalysis::clusterOf(module) ||
      analysis.nodes() != CostModelAnalysis::nodesOf(module))
    analysis = CostModelAnalysis(module);
  if (!analysis.model())
    return module.emitError(analysis.error());

  PlanningState state;
  state.model = analysis.model();
  FailureOr<plan::TrainingFunction> training = plan::extractTraining(module, *state.model, stage);
  if (failed(training))
    return failure();
  state.training = std::move(*training);
  state.group = state.model->worldGroup();
  FailureOr<std::optional<plan::PlanChoice>> existing =
      plan::readPlan(state.training, state.group);
  if (failed(existing))
    return failure();
  state.existing = std::move(*existing);
  if (requiredBy && !state.existing)
    return module.emitError("gradients are not synchronised; run zen-insert-grad-sync before ")
           << *requiredBy;
  if (dp && *dp != 0) {
    int64_t world = state.model->cluster().worldSize();
    if (*dp < 1 || *dp > world)
      return module.emitError("dp = ") << *dp << " does not fit cluster '"
                                       << state.model->cluster().name << "' of " << world
                                       << " GPUs";
    state.group = state.model->groupOf(*dp);
  } else if (dp) {
    // A module that records its tp/pp/dp configuration syncs over the
    // data-parallel group placed as Megatron does; otherwise over every GPU.
    state.group = state.model->worldGroup();
    if (auto parallel = module->getAttrOfType<ParallelAttr>(ZenDialect::ParallelAttrHelper::getNameStr())) {
      cost::ParallelConfig config;
      config.tp = parallel.getTp();
      config.pp = parallel.getPp();
      config.dp = parallel.getDp();
      state.group = cost::parallelGroups(config, state.model->cluster()).data;
    }
  }
  state.training.problem.group = state.group;
  return state;
}

int64_t pipelineStagesOf(ModuleOp module) {
  int64_t stages = 0;
  module.walk([&](ParamOp param) {
    if (std::optional<uint64_t> stage = param.getStage())
      stages = std::max(stages, static_cast<int64_t>(*stage) + 1);
  });
  return stages;
}

plan::BaselineOptions baselineOptions(llvm::ArrayRef<int64_t> manualBuckets, int64_t thresholdBytes,
                                      double horovodCycleTimeMs, int64_t horovodFusionThresholdMb) {
  plan::BaselineOptions options;
  options.manualBuckets.assign(manualBuckets.begin(), manualBuckets.end());
  options.thresholdBytes = thresholdBytes;
  options.horovodCycleUs = horovodCycleTimeMs * 1e3;
  // Far beyond any model's gradients, and no overflow when scaled to bytes.
  constexpr int64_t kLargestThresholdMb = int64_t(1) << 40;
  options.horovodFusionBytes = std::min(horovodFusionThresholdMb, kLargestThresholdMb) << 20;
  return options;
}

std::optional<std::vector<cost::CompressionSpec>> compressorsOption(Operation *op,
                                                                    const std::string &text) {
  std::string error;
  std::optional<std::vector<cost::CompressionSpec>> specs = plan::parseCompressors(text, error);
  if (!specs)
    op->emitError("invalid compressor option: ") << error;
  return specs;
}

} // namespace detail
} // namespace zen

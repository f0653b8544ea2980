//===- Moe.cpp - the MoE layers of imported IR ----------------------------===//
#include "zen/Passes/Moe.h"

#include "zen/Analysis/IRPlan.h"
#include "zen/Passes/LargeModel.h"
#include "zen/Planner/Planning.h"

#include "llvm/ADT/StringSet.h"

using namespace mlir;

// The planner's MoE enums and the dialect's: same enumerators in the same order.
static_assert(int(zen::cost::AllToAllAlgorithm::Flat) == int(zen::MoeAllToAll::flat) &&
                  int(zen::cost::AllToAllAlgorithm::Hierarchical) ==
                      int(zen::MoeAllToAll::hierarchical),
              "cost::AllToAllAlgorithm and zen::MoeAllToAll differ");
static_assert(int(zen::cost::GradientSyncMode::Concurrent) == int(zen::MoeGradientSync::concurrent) &&
                  int(zen::cost::GradientSyncMode::Serial) == int(zen::MoeGradientSync::serial),
              "cost::GradientSyncMode and zen::MoeGradientSync differ");

namespace zen {

MoeScheduleAttr moeScheduleAttr(MLIRContext *context, int64_t ep,
                                const cost::MoeLayerChoice &choice) {
  return MoeScheduleAttr::get(context, ep, choice.forward, choice.backward,
                              static_cast<MoeAllToAll>(choice.algorithm),
                              fromVocabulary(choice.tokens),
                              static_cast<MoeGradientSync>(choice.sync));
}

cost::MoeLayerChoice moeLayerChoiceOf(MoeScheduleAttr schedule) {
  cost::MoeLayerChoice choice;
  choice.forward = schedule.getForward();
  choice.backward = schedule.getBackward();
  choice.algorithm = static_cast<cost::AllToAllAlgorithm>(schedule.getAllToAll());
  choice.tokens = toVocabulary(schedule.getTokens());
  choice.sync = static_cast<cost::GradientSyncMode>(schedule.getGradientSync());
  return choice;
}

namespace {

/// The only user of `value` when it is an `Op`, else null.
template <typename Op> Op soleUser(Value value) {
  if (!value.hasOneUse())
    return nullptr;
  return dyn_cast<Op>(*value.getUsers().begin());
}

cost::MoeShape shapeOf(MoeDispatchOp dispatch, MoeExpertsOp experts) {
  auto buffer = cast<RankedTensorType>(dispatch.getDispatched().getType());
  auto gates = cast<RankedTensorType>(dispatch.getGates().getType());
  cost::MoeShape shape;
  shape.tokens = gates.getDimSize(0);
  shape.topK = gates.getDimSize(1);
  shape.experts = buffer.getDimSize(0);
  shape.capacityRows = buffer.getDimSize(1);
  shape.hidden = buffer.getDimSize(2);
  // Each weight has an experts side, a hidden side and its width, in either of ONNX
  // Runtime's layouts (the verifier checked which): the width is what remains.
  auto width = [&](Value weight) {
    return weight ? cast<RankedTensorType>(weight.getType()).getNumElements() /
                        (shape.experts * shape.hidden)
                  : int64_t{0};
  };
  shape.ffn = width(experts.getFc2Weight());
  // A gated layer's fc3 (the linear half) is a first GEMM beside fc1.
  shape.fc1Rows = width(experts.getFc1Weight()) + width(experts.getFc3Weight());
  shape.biases = experts.getFc1Bias() || experts.getFc2Bias() || experts.getFc3Bias();
  return shape;
}

/// Bytes of the values the backward reads from the forward, which stay in memory from one
/// to the other: every value a backward zen.compute reads that is not a parameter, a
/// gradient or the MoE layers' own (their dispatched rows and the experts' units are
/// cost::moeMemoryPerGpu's). Floating-point values are kept at the compute precision's
/// activation width, as the experts' are.
double keptActivationBytes(func::FuncOp func, const cost::TrainingSetup &setup) {
  const double floatBytes = cost::bytesPerParameter(setup).weights;
  llvm::DenseSet<Value> kept;
  double bytes = 0;
  func.walk([&](ComputeOp compute) {
    if (compute.getPhase() != Phase::backward)
      return;
    for (Value input : compute.getInputs()) {
      Operation *producer = input.getDefiningOp();
      auto forward = dyn_cast_or_null<ComputeOp>(producer);
      const bool fromForward = !producer || isa<MoeCombineOp>(producer) ||
                               (forward && forward.getPhase() == Phase::forward);
      auto type = dyn_cast<RankedTensorType>(input.getType());
      if (!fromForward || !type || !kept.insert(input).second)
        continue;
      bytes += double(type.getNumElements()) *
               (isa<FloatType>(type.getElementType()) ? floatBytes
                                                      : double(plan::elementBytes(type)));
    }
  });
  return bytes;
}

} // namespace

std::optional<std::vector<MoeLayerOps>> collectMoeLayers(ModuleOp module, std::string &error) {
  std::vector<MoeLayerOps> layers;
  module.walk([&](MoeDispatchOp dispatch) {
    if (!error.empty())
      return;
    MoeExpertsOp experts = soleUser<MoeExpertsOp>(dispatch.getDispatched());
    MoeCombineOp combine = experts ? soleUser<MoeCombineOp>(experts.getResult()) : nullptr;
    const std::string name = dispatch.getNode() ? dispatch.getNode()->str()
                                                : "moe" + std::to_string(layers.size());
    if (!combine || combine.getGates() != dispatch.getGates()) {
      error = name + ": the dispatched buffer must feed one zen.moe_experts whose result "
                     "feeds one zen.moe_combine of the same gates";
      return;
    }
    std::vector<std::string> parameters;
    for (Value operand : experts->getOperands())
      if (auto param = operand.getDefiningOp<ParamOp>())
        parameters.push_back(param.getName().str());
    layers.push_back(
        {dispatch, experts, combine, {name, shapeOf(dispatch, experts), std::move(parameters)}});
  });
  if (!error.empty())
    return std::nullopt;
  return layers;
}

FailureOr<plan::MoeRequest>
moeRequestOf(ModuleOp module, const std::vector<plan::MoeLayer> &layers,
             const cost::CostModel &model, cost::Group dp, std::optional<int64_t> ep,
             double imbalance, const std::vector<cost::CompressionSpec> &compressors) {
  plan::MoeRequest request;
  request.dp = dp;
  request.ep = ep;
  request.imbalance = imbalance;
  for (const cost::CompressionSpec &spec : compressors)
    if (!(spec.deviceFixed && spec.device == cost::Device::CPU))
      request.compressors.push_back(spec.method);
  request.setup.computeDtype = cost::DType::F32;
  if (auto name = module->getAttrOfType<StringAttr>(
          ZenDialect::ComputeDtypeAttrHelper::getNameStr()))
    request.setup.computeDtype = plan::parseComputeDtype(name.str()).value_or(cost::DType::F32);
  plan::readFrameworkSettings(module, request.setup);
  llvm::StringSet<> expertParameters;
  for (const plan::MoeLayer &layer : layers)
    expertParameters.insert(layer.parameters.begin(), layer.parameters.end());
  FailureOr<plan::TrainingFunction> training = plan::extractTraining(module, model);
  if (failed(training))
    return failure();
  cost::Group group;
  FailureOr<std::optional<plan::PlanChoice>> synced = plan::readPlan(*training, group);
  if (failed(synced))
    return failure();
  if (*synced) {
    plan::GradientSync sync{std::move(training->problem), std::move(**synced), {}};
    sync.problem.group = group;
    for (const plan::GradientTensor &gradient : sync.problem.gradients)
      sync.expert.push_back(expertParameters.contains(gradient.name));
    // The experts' forward op and the layer's backward op, by the layer's node.
    llvm::StringMap<plan::MoeLayerSite> sites;
    for (const auto &[op, segment] : training->moeSegments) {
      // A layer is named by its dispatch's node (collectMoeLayers).
      auto experts = dyn_cast<MoeExpertsOp>(op);
      auto dispatch = experts ? experts.getDispatched().getDefiningOp<MoeDispatchOp>() : nullptr;
      auto node = op->getAttrOfType<StringAttr>("node");
      if (dispatch)
        node = dispatch->getAttrOfType<StringAttr>("node");
      if (!node)
        continue;
      plan::MoeLayerSite &site = sites[node.getValue()];
      const double us = plan::opComputeUs(op, request.setup.computeDtype, model);
      if (experts) {
        site.forwardSegment = segment;
        site.forwardUs += us;
        site.forwardFlops += static_cast<int64_t>(cast<MoeOpInterface>(op).getWorkFlops());
      } else {
        site.backwardSegment = segment;
        site.backwardUs += us;
        site.backwardFlops += static_cast<int64_t>(cast<ComputeOp>(op).getFlops());
      }
    }
    for (const plan::MoeLayer &layer : layers) {
      auto site = sites.find(layer.name);
      if (site == sites.end() || site->second.forwardSegment < 0 ||
          site->second.backwardSegment < 0)
        return module.emitError("MoE layer '")
               << layer.name << "' has no zen.moe_experts and MoEGrad zen.compute in the "
                  "training function";
      sync.sites.push_back(site->second);
    }
    request.sync = std::move(sync);
  }
  double denseParams = 0;
  module.walk([&](ParamOp param) {
    if (!expertParameters.contains(param.getName()))
      denseParams += double(cast<ShapedType>(param.getType()).getNumElements());
  });
  request.dense = cost::replicatedParameterMemory(
      denseParams, keptActivationBytes(training->func, request.setup), request.setup, model);
  return request;
}

} // namespace zen

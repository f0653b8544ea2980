//===- LargeModel.cpp - the large-model decision and its place in the IR --===//
#include "zen/Passes/LargeModel.h"

#include "zen/Errors.h"
#include "zen/Analysis/IRPlan.h"
#include "zen/Passes/Moe.h"
#include "zen/Planner/Planning.h"

#include "mlir/IR/BuiltinAttributes.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

using namespace mlir;

namespace zen {

std::string configText(const cost::ParallelConfig &c) {
  return fmt::format("tp {} x pp {} x dp {}{}, ZeRO {}, recompute {}, micro-batch {}{}", c.tp, c.pp, c.dp,
                     c.ep > 1 ? fmt::format(" (ep {})", c.ep) : "", c.zero,
                     cost::toString(c.recompute), c.microBatch,
                     c.sequenceParallel ? ", sequence parallel" : "");
}

std::string memoryText(const cost::MemoryBreakdown &m) {
  return fmt::format("{:.1f} GB per GPU of {:.1f} GB (weights {:.1f}, gradients {:.1f}, optimizer {:.1f}, "
                     "activations {:.1f}, buffers {:.1f}, reserve {:.1f})",
                     m.perGpuBytes() / 1e9, m.capacityBytes / 1e9, m.weightsBytes / 1e9,
                     m.gradientsBytes / 1e9, m.optimizerBytes / 1e9, m.activationsBytes / 1e9,
                     m.buffersBytes / 1e9, m.reserveBytes / 1e9);
}

namespace {

/// The cluster file's physical ranges (costmodel/lib/Cluster.cpp) keep every
/// prediction finite; one that is not is refused, naming the cluster, before it
/// reaches the IR.
void requireFinite(const plan::ParallelResult &result, const std::string &clusterName) {
  auto finite = [](const plan::ParallelEvaluation &eval) {
    std::vector<double> values = {eval.iterationUs,  eval.pipeline.totalUs, eval.pipeline.bubbleUs,
                                  eval.tensorCommUs, eval.pipelineCommUs,   eval.dataCommUs,
                                  eval.optimizerUs,  eval.tflopsPerGpu,     eval.mfu,
                                  eval.memory.perGpuBytes()};
    for (const cost::StageCost &stage : eval.stages)
      values.insert(values.end(), {stage.perMicroBatchUs(), stage.optimizerUs, stage.embeddingSyncUs});
    return std::all_of(values.begin(), values.end(), [](double value) { return std::isfinite(value); });
  };
  std::vector<std::pair<std::string, const plan::ParallelEvaluation *>> scored = {{"chosen", &*result.best}};
  for (const auto &[name, eval] : result.baselines)
    scored.emplace_back(name + " baseline", &eval);
  for (const auto &[what, eval] : scored)
    if (!finite(*eval))
      throw Error(ErrorKind::BadInput, clusterName + ": the " + what + " configuration (" +
                                           configText(eval->config) +
                                           ") has a predicted time or size that is not finite; "
                                           "check the cluster's bandwidths, peaks and efficiencies");
}

bool isDefault(const cost::MoeLayerChoice &choice) {
  const cost::MoeLayerChoice none;
  return choice.forward == none.forward && choice.backward == none.backward &&
         choice.algorithm == none.algorithm && choice.tokens == none.tokens &&
         choice.sync == none.sync;
}

FloatAttr f64(MLIRContext *context, double value) {
  return FloatAttr::get(Float64Type::get(context), value);
}

MoeBlocksAttr moeBlocksAttr(MLIRContext *context, const cost::MoeBlocks &moe) {
  const cost::MoeShape &layer = moe.layer;
  return MoeBlocksAttr::get(context, DenseI64ArrayAttr::get(context, moe.blocks), layer.tokens,
                            layer.hidden, layer.ffn, layer.fc1Rows, layer.experts, layer.topK,
                            f64(context, layer.capacityFactor), layer.biases, layer.capacityRows,
                            f64(context, moe.blockParams), f64(context, moe.expertParams));
}

cost::MoeBlocks moeBlocksOf(MoeBlocksAttr attr) {
  cost::MoeBlocks moe;
  moe.blocks.assign(attr.getBlocks().asArrayRef().begin(), attr.getBlocks().asArrayRef().end());
  moe.layer.tokens = attr.getTokens();
  moe.layer.hidden = attr.getHidden();
  moe.layer.ffn = attr.getFfn();
  moe.layer.fc1Rows = attr.getFc1Rows();
  moe.layer.experts = attr.getExperts();
  moe.layer.topK = attr.getTopK();
  moe.layer.capacityFactor = attr.getCapacityFactor().getValueAsDouble();
  moe.layer.biases = attr.getBiases();
  moe.layer.capacityRows = attr.getCapacityRows();
  moe.blockParams = attr.getBlockParams().getValueAsDouble();
  moe.expertParams = attr.getExpertParams().getValueAsDouble();
  return moe;
}

TransformerAttr transformerAttr(MLIRContext *context, const cost::TransformerShape &shape) {
  SmallVector<Attribute> replicated;
  for (const std::string &node : shape.replicated)
    replicated.push_back(StringAttr::get(context, node));
  return TransformerAttr::get(
      context, shape.family, shape.layers, shape.hidden, shape.heads, shape.kvHeads, shape.ffn,
      shape.mlp, shape.norm, shape.positions, shape.tiedEmbeddings, shape.crossAttentionBlocks,
      shape.crossAttentionBlocks > 0 ? f64(context, shape.crossAttentionParams) : FloatAttr(),
      shape.seq, shape.vocab, shape.modelBatch, f64(context, shape.layerParams),
      f64(context, shape.embeddingParams), f64(context, shape.headParams),
      replicated.empty() ? ArrayAttr() : ArrayAttr::get(context, replicated),
      shape.moe ? moeBlocksAttr(context, *shape.moe) : MoeBlocksAttr());
}

cost::TransformerShape transformerShapeOf(TransformerAttr attr) {
  cost::TransformerShape shape;
  shape.family = attr.getFamily().str();
  shape.layers = attr.getLayers();
  shape.hidden = attr.getHidden();
  shape.heads = attr.getHeads();
  shape.kvHeads = attr.getKvHeads();
  shape.ffn = attr.getFfn();
  shape.mlp = attr.getMlp().str();
  shape.norm = attr.getNorm().str();
  shape.positions = attr.getPositions().str();
  shape.tiedEmbeddings = attr.getTiedEmbeddings();
  shape.crossAttentionBlocks = attr.getCrossAttentionBlocks();
  if (FloatAttr params = attr.getCrossAttentionParams())
    shape.crossAttentionParams = params.getValueAsDouble();
  shape.seq = attr.getSeq();
  shape.vocab = attr.getVocab();
  shape.modelBatch = attr.getModelBatch();
  shape.layerParams = attr.getLayerParams().getValueAsDouble();
  shape.embeddingParams = attr.getEmbeddingParams().getValueAsDouble();
  shape.headParams = attr.getHeadParams().getValueAsDouble();
  if (ArrayAttr replicated = attr.getReplicated())
    for (Attribute node : replicated)
      shape.replicated.push_back(cast<StringAttr>(node).str());  // verified
  if (MoeBlocksAttr moe = attr.getMoe())
    shape.moe = moeBlocksOf(moe);
  return shape;
}

} // namespace

ParallelDecision planParallel(const cost::TransformerShape &shape, const cost::CostModel &model,
                              const plan::ParallelRequest &request, const std::string &compressor,
                              const std::string &modelName, const std::string &clusterName) {
  const int64_t gpus = model.cluster().worldSize();
  plan::ParallelResult result = plan::searchParallel(shape, model, request);
  if (!result.invalid.empty())
    throw Error(ErrorKind::BadInput, modelName + ": cannot run on " + std::to_string(gpus) +
                                         " GPUs of '" + model.cluster().name + "': " + result.invalid);
  if (!result.best) {
    const plan::ParallelEvaluation &least = *result.smallestRequirement;
    throw Error(ErrorKind::BadInput,
                modelName + ": does not fit on " + std::to_string(gpus) + " GPUs of '" +
                    model.cluster().name + "': " +
                    (request.forcesAny() ? "the forced configuration " : "the smallest requirement found, ") +
                    configText(least.config) + ", needs " + memoryText(least.memory));
  }
  requireFinite(result, clusterName);
  ParallelDecision decision;
  decision.shape = shape;
  decision.config = result.best->config;
  // The IR's pipeline stages are contiguous blocks; an interleaved schedule's chunks are not.
  if (decision.config.pp > 1 && decision.config.virtualStages == 1 && decision.config.stageLayers.empty())
    for (const cost::StageCost &stage : result.best->stages)
      decision.config.stageLayers.push_back(stage.layers);
  decision.setup = request.setup;
  decision.compressor = compressor;
  decision.forced = request.forcesAny();
  decision.configurationsScored = result.configurationsScored;
  for (const auto &[name, eval] : result.baselines) {
    decision.baselines.iterationUs[name] = eval.iterationUs;
    decision.baselines.configurations[name] = configText(eval.config);
  }
  decision.baselines.notFitting = result.baselinesWhyNot;
  return decision;
}

ParallelAttr parallelAttr(MLIRContext *context, const cost::ParallelConfig &c) {
  const cost::Decomposition &chunks = c.decomposition;
  return ParallelAttr::get(
      context, c.tp, c.pp, c.dp, c.zero, c.sequenceParallel, fromVocabulary(c.recompute), c.microBatch,
      c.microBatches, c.virtualStages, c.ep, c.expertTensorParallel, chunks.attentionForward,
      chunks.attentionBackward, chunks.mlpForward, chunks.mlpBackward,
      c.stageLayers.empty() ? DenseI64ArrayAttr() : DenseI64ArrayAttr::get(context, c.stageLayers),
      c.ep > 1 || !isDefault(c.experts) ? moeScheduleAttr(context, c.ep, c.experts)
                                        : MoeScheduleAttr());
}

cost::ParallelConfig parallelConfigOf(ParallelAttr attr) {
  cost::ParallelConfig c;
  c.tp = attr.getTp();
  c.pp = attr.getPp();
  c.dp = attr.getDp();
  c.zero = int(attr.getZero());
  c.sequenceParallel = attr.getSequenceParallel();
  c.recompute = toVocabulary(attr.getRecompute());
  c.microBatch = attr.getMicroBatch();
  c.microBatches = attr.getMicroBatches();
  c.virtualStages = attr.getVirtualStages();
  c.ep = attr.getEp();
  c.expertTensorParallel = attr.getExpertTensorParallel();
  c.decomposition = {attr.getAttentionForwardChunks(), attr.getAttentionBackwardChunks(),
                     attr.getMlpForwardChunks(), attr.getMlpBackwardChunks()};
  if (DenseI64ArrayAttr stages = attr.getStageLayers())
    c.stageLayers.assign(stages.asArrayRef().begin(), stages.asArrayRef().end());
  if (MoeScheduleAttr experts = attr.getExperts())
    c.experts = moeLayerChoiceOf(experts);
  return c;
}

void recordParallelDecision(ModuleOp module, const ParallelDecision &decision) {
  MLIRContext *context = module.getContext();
  module->setAttr(ZenDialect::TransformerAttrHelper::getNameStr(),
                  transformerAttr(context, decision.shape));
  module->setAttr(ZenDialect::ParallelAttrHelper::getNameStr(), parallelAttr(context, decision.config));
  const cost::TrainingSetup &setup = decision.setup;
  module->setAttr(ZenDialect::ParallelSearchAttrHelper::getNameStr(),
                  ParallelSearchAttr::get(context, setup.globalBatch, cost::toString(setup.optimizer),
                                          f64(context, setup.moeImbalance), decision.compressor,
                                          decision.forced, decision.configurationsScored,
                                          baselinesAttr(context, decision.baselines)));
}

bool hasParallelDecision(ModuleOp module) {
  return module->hasAttr(ZenDialect::ParallelSearchAttrHelper::getNameStr());
}

FailureOr<ParallelDecision> readParallelDecision(ModuleOp module) {
  auto search = module->getAttrOfType<ParallelSearchAttr>(ZenDialect::ParallelSearchAttrHelper::getNameStr());
  auto transformer = module->getAttrOfType<TransformerAttr>(ZenDialect::TransformerAttrHelper::getNameStr());
  auto parallel = module->getAttrOfType<ParallelAttr>(ZenDialect::ParallelAttrHelper::getNameStr());
  if (!search || !transformer || !parallel)
    return module.emitError("no large-model decision: zen.parallel_search, zen.transformer and "
                            "zen.parallel are recorded together by the large-model planning");
  ParallelDecision decision;
  decision.shape = transformerShapeOf(transformer);
  decision.config = parallelConfigOf(parallel);
  cost::TrainingSetup &setup = decision.setup;
  setup.globalBatch = search.getGlobalBatch();
  std::optional<cost::Optimizer> optimizer = cost::parseOptimizer(search.getOptimizer().str());
  if (!optimizer)
    return module.emitError("zen.parallel_search: unknown optimizer '") << search.getOptimizer() << "'";
  setup.optimizer = *optimizer;
  setup.moeImbalance = search.getMoeImbalance().getValueAsDouble();
  // zenopt sets zen.compute_dtype for every precision but fp32.
  std::string precision = "fp32";
  if (auto recorded = module->getAttrOfType<StringAttr>(ZenDialect::ComputeDtypeAttrHelper::getNameStr()))
    precision = recorded.str();
  std::optional<cost::DType> dtype = plan::parseComputeDtype(precision);
  if (!dtype)
    return module.emitError("zen.compute_dtype: unknown precision '") << precision << "'";
  setup.computeDtype = *dtype;
  plan::readFrameworkSettings(module, setup);
  decision.compressor = search.getCompressor().str();
  decision.forced = search.getForced();
  decision.configurationsScored = search.getConfigurationsScored();
  decision.baselines = baselineTableOf(search.getBaselines());
  return decision;
}

} // namespace zen

//===- ParallelPlan.cpp - the plan file's large-model section -------------===//
#include "zen/Codegen/ParallelPlan.h"

#include "zen/CostModel/Moe.h"

#include <algorithm>

namespace zen::codegen {

using nlohmann::ordered_json;

namespace {

std::vector<std::string> programNames(int64_t stage, const cost::ParallelConfig &config) {
  std::vector<std::string> names;
  for (const cost::PipelineStep &step :
       cost::stageProgram(stage, config.pp, config.microBatches, config.virtualStages))
    names.push_back(step.name(config.virtualStages));
  return names;
}

} // namespace

ordered_json transformerJson(const cost::TransformerShape &shape) {
  return {{"family", shape.family},
          {"blocks", shape.layers},
          {"hidden", shape.hidden},
          {"heads", shape.heads},
          {"kv_heads", shape.keyValueHeads()},
          {"ffn", shape.ffn},
          {"vocab", shape.vocab},
          {"seq", shape.seq},
          {"mlp", shape.mlp},
          {"norm", shape.norm},
          {"tied_embeddings", shape.tiedEmbeddings},
          {"positions", shape.positions},
          {"moe_blocks", shape.moeBlocks()},
          {"cross_attention_blocks", shape.crossAttentionBlocks},
          {"parameters", shape.totalParams()}};
}

ordered_json memoryJson(const cost::MemoryBreakdown &memory) {
  return {{"per_gpu_bytes", memory.perGpuBytes()},
          {"capacity_bytes", memory.capacityBytes},
          {"weights_bytes", memory.weightsBytes},
          {"gradients_bytes", memory.gradientsBytes},
          {"optimizer_bytes", memory.optimizerBytes},
          {"activations_bytes", memory.activationsBytes},
          {"buffers_bytes", memory.buffersBytes},
          {"reserve_bytes", memory.reserveBytes}};
}

ordered_json parallelSection(const cost::TransformerShape &shape, const cost::TrainingSetup &setup,
                             const plan::ParallelEvaluation &chosen, int64_t configurationsScored,
                             const std::map<std::string, double> &baselines,
                             const std::map<std::string, std::string> &baselinesWhyNot,
                             const std::map<std::string, std::string> &baselineConfigurations) {
  const cost::ParallelConfig &config = chosen.config;
  ordered_json section;
  section["tp"] = config.tp;
  section["pp"] = config.pp;
  section["dp"] = config.dp;
  section["zero"] = config.zero;
  if (config.zero >= 3) {
    section["zero3_regather"] = cost::toString(setup.zero3Regather);
    section["zero3_prefetch_depth"] = setup.zero3PrefetchDepth;
  }
  section["sequence_parallel"] = config.sequenceParallel;
  section["recompute"] = cost::toString(config.recompute);
  section["micro_batch"] = config.microBatch;
  section["micro_batches"] = config.microBatches;
  section["schedule"] = config.schedule();
  const cost::Decomposition &d = config.decomposition;
  section["decomposition"] = {{"attention", {{"forward", d.attentionForward}, {"backward", d.attentionBackward}}},
                              {"mlp", {{"forward", d.mlpForward}, {"backward", d.mlpBackward}}}};
  section["global_batch"] = setup.globalBatch;
  section["optimizer"] = cost::toString(setup.optimizer);
  section["attention"] = cost::toString(setup.attention);
  section["model"] = {{"family", shape.family},
                      {"layers", shape.layers},
                      {"hidden", shape.hidden},
                      {"heads", shape.heads},
                      {"kv_heads", shape.keyValueHeads()},
                      {"ffn", shape.ffn},
                      {"mlp", shape.mlp},
                      {"cross_attention_blocks", shape.crossAttentionBlocks},
                      {"seq", shape.seq},
                      {"vocab", shape.vocab},
                      {"parameters", shape.totalParams()}};
  if (shape.moe) {
    // How the MoE blocks run: per micro-batch and tensor-parallel rank.
    const cost::MoeShape layer = cost::moeLayerShape(shape, config);
    const cost::MoeLayerChoice &experts = config.experts;
    section["moe"] = {{"ep", config.ep},
                      {"blocks", shape.moe->blocks},
                      {"experts", layer.experts},
                      {"top_k", layer.topK},
                      {"expert_ffn", layer.ffn},
                      {"tokens", layer.tokens},
                      {"capacity", layer.capacity()},
                      {"imbalance", setup.moeImbalance},
                      {"forward", experts.forward},
                      {"backward", experts.backward},
                      {"all_to_all", cost::toString(experts.algorithm)},
                      {"token_compression", cost::toString(experts.tokens)},
                      {"expert_tensor_parallel", config.expertTensorParallel ? config.tp : int64_t{1}},
                      {"expert_parameters", shape.moe->expertParams * double(shape.moeBlocks())}};
  }
  section["iteration_us"] = chosen.iterationUs;
  section["compute_us"] = chosen.computeUs;
  section["lower_bound_us"] = chosen.lowerBoundUs;
  section["bubble_us"] = chosen.pipeline.bubbleUs;
  section["tensor_comm_us"] = chosen.tensorCommUs;
  section["pipeline_comm_us"] = chosen.pipelineCommUs;
  section["data_comm_us"] = chosen.dataCommUs;
  section["optimizer_us"] = chosen.optimizerUs;
  section["tflops_per_gpu"] = chosen.tflopsPerGpu;
  section["model_tflops_per_gpu"] = chosen.modelTflopsPerGpu;
  section["mfu"] = chosen.mfu;
  section["memory"] = memoryJson(chosen.memory);
  section["memory"]["stage"] = chosen.memory.stage;
  section["baselines"] = ordered_json::object();
  for (const auto &[name, us] : baselines)
    section["baselines"][name] = us;
  section["baselines_not_fitting"] = ordered_json::object();
  for (const auto &[name, why] : baselinesWhyNot)
    section["baselines_not_fitting"][name] = why;
  section["baseline_configurations"] = ordered_json::object();
  for (const auto &[name, text] : baselineConfigurations)
    section["baseline_configurations"][name] = {{"configuration", text},
                                                {"rule", plan::parallelBaselineRule(name)}};
  section["replicated"] = shape.replicated;
  section["configurations_scored"] = configurationsScored;
  section["stages"] = ordered_json::array();
  for (size_t s = 0; s < chosen.stages.size(); ++s) {
    const cost::StageCost &stage = chosen.stages[s];
    section["stages"].push_back({{"stage", int64_t(s)},
                                 {"first_layer", stage.firstLayer},
                                 {"layers", stage.layers},
                                 {"embedding", stage.hasEmbedding},
                                 {"head", stage.hasHead},
                                 {"forward_us", stage.forwardUs},
                                 {"backward_us", stage.backwardUs},
                                 {"recompute_us", stage.recomputeUs},
                                 {"tensor_comm_us", stage.tensorCommUs},
                                 {"p2p_us", stage.pipelineCommUs},
                                 {"zero_comm_us", stage.zeroCommUs},
                                 {"program", programNames(int64_t(s), config)}});
  }
  return section;
}

cost::PipelineSchedule pipelineScheduleOf(const zenrt::Plan &plan) {
  const zenrt::ParallelConfiguration parallel =
      zenrt::readParallelSection(plan.parallel, plan.model.name, zen::ErrorKind::Internal);
  std::vector<cost::StageCost> stages;
  for (const zenrt::ParallelConfiguration::StageTimes &times : parallel.stageTimes) {
    cost::StageCost stage;
    stage.forwardUs = times.forwardUs;
    stage.backwardUs = times.backwardUs;
    stage.tensorCommUs = times.tensorCommUs;
    stage.pipelineCommUs = times.p2pUs;
    stage.zeroCommUs = times.zeroCommUs;
    stages.push_back(stage);
  }
  return cost::simulatePipeline(stages, parallel.microBatches, parallel.virtualStages);
}

} // namespace zen::codegen

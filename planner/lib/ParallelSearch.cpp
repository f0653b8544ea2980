//===- ParallelSearch.cpp - tp/pp/dp/ZeRO configuration search -----------===//
#include "zen/Planner/ParallelSearch.h"

#include "zen/CostModel/Moe.h"
#include "zen/CostModel/Pipeline.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>
#include <tuple>

namespace zen::plan {

using cost::ParallelConfig;
using cost::Recompute;

bool ParallelRequest::forcesAny() const {
  return tp || pp || dp || microBatch || virtualStages || zero || sequenceParallel || recompute ||
         tpChunks || ep;
}

const std::vector<std::string> &parallelBaselineNames() {
  static const std::vector<std::string> names = {"megatron", "zero3", "ddp"};
  return names;
}

namespace {

double peakTflops(const cost::CostModel &model, cost::DType dtype) {
  const auto &peaks = model.cluster().gpu.peakTflops;
  auto peak = peaks.find(dtype);
  if (peak == peaks.end())
    peak = peaks.find(cost::DType::F32);
  return peak == peaks.end() ? 1.0 : peak->second;
}

double gradientElements(const cost::StageCost &stage) {
  double elements = 0;
  for (const cost::StageCost::Unit &unit : stage.units)
    elements += unit.gradientElements;
  return elements;
}

/// This rank's expert gradient elements (synchronised over their replicas).
double expertElements(const cost::StageCost &stage) {
  double elements = 0;
  for (const cost::StageCost::Unit &unit : stage.units)
    elements += unit.expertElements;
  return elements;
}

/// A collective over the data-parallel group for the dense gradients and over
/// the experts' replicas for theirs, one after the other.
double dataParallelUs(const cost::CostModel &model, cost::CollectiveKind kind, const cost::StageCost &stage,
                      double bytesPerElement, const ParallelConfig &config) {
  const cost::Group data = cost::parallelGroups(config, model.cluster()).data;
  double us = model.collective(kind, gradientElements(stage) * bytesPerElement, data).timeUs;
  const cost::Group replicas = cost::expertReplicaGroup(config.ep, data);
  if (double experts = expertElements(stage); experts > 0 && replicas.ranks > 1)
    us += model.collective(kind, experts * bytesPerElement, replicas).timeUs;
  return us;
}

/// How a score times the pipeline: the closed form screens every candidate;
/// the finalists run the schedule's event simulation.
enum class PipelineTiming { ClosedForm, Simulated };

/// Everything but the data-parallel sync of ZeRO 0/1, which the caller adds.
ParallelEvaluation scorePipeline(const cost::TransformerShape &shape, const ParallelConfig &config,
                                 const cost::TrainingSetup &setup, const cost::CostModel &model,
                                 PipelineTiming timing) {
  ParallelEvaluation eval;
  eval.config = config;
  eval.memory = cost::memoryPerGpu(shape, config, setup, model);
  eval.stages = cost::stageCosts(shape, config, setup, model);
  if (timing == PipelineTiming::Simulated) {
    cost::PipelineSchedule schedule =
        cost::simulatePipeline(eval.stages, config.microBatches, config.virtualStages);
    eval.pipeline = {schedule.totalUs, schedule.bubbleUs};
  } else {
    eval.pipeline = cost::pipelineTime(eval.stages, config.microBatches, config.virtualStages);
  }
  // The slowest stage paces the pipeline (m of its micro-batches plus the bubble): its
  // parts are the iteration's, so that compute + exposed communication + bubble adds up.
  const cost::StageCost &pacing = *std::max_element(
      eval.stages.begin(), eval.stages.end(), [](const cost::StageCost &a, const cost::StageCost &b) {
        return a.perMicroBatchUs() < b.perMicroBatchUs();
      });
  const cost::StageCost &first = eval.stages.front();
  const double m = double(config.microBatches);
  eval.tensorCommUs = m * pacing.tensorCommUs;
  eval.pipelineCommUs = m * pacing.pipelineCommUs;
  eval.dataCommUs = m * pacing.zeroCommUs;
  for (const cost::StageCost &stage : eval.stages) {
    eval.optimizerUs = std::max(eval.optimizerUs, stage.optimizerUs);
    eval.flopsPerGpu += stage.flops * m / double(eval.stages.size());
    eval.modelFlopsPerGpu += stage.modelFlops * m / double(eval.stages.size());
  }
  // ZeRO 2 keeps only its gradient shard: after the optimizer step every rank
  // all-gathers the updated weights (ZeRO 3 gathers them before use instead).
  double postOptimizerUs = 0;
  if (config.zero == 2 && config.dp > 1)
    postOptimizerUs = dataParallelUs(model, cost::CollectiveKind::AllGather, first,
                                     cost::bytesPerParameter(setup).weights, config);
  eval.dataCommUs += postOptimizerUs;
  eval.iterationUs = eval.pipeline.totalUs + postOptimizerUs;
  eval.computeUs = m * (pacing.forwardUs + pacing.backwardUs);
  // As the data-parallel planner's bound: the compute with every optimizer step, or moving
  // the gradients once.
  eval.lowerBoundUs = std::max(
      eval.computeUs + eval.optimizerUs,
      model.communicationBoundUs(gradientElements(first) * 4,
                                 cost::parallelGroups(config, model.cluster()).data));
  return eval;
}

/// What follows the first stage's last backward: its optimizer step and its data-parallel
/// sync, the compute part (the step, and the compute the sync slows while it overlaps, as
/// the data-parallel planner's timeline counts it) and what the sync leaves exposed.
struct FirstStageTail {
  double computeUs = 0;
  double exposedCommUs = 0;
};

/// Ends the iteration after the last backward: each stage's tied-embedding all-reduce (first
/// and last stage) then its tail (the first stage's as given, the others' their optimizer
/// step); the slowest stage ends it. Derives the throughput.
void finish(ParallelEvaluation &eval, const FirstStageTail &firstTail, const cost::CostModel &model,
            cost::DType dtype) {
  const cost::StageCost &first = eval.stages.front();
  double tailUs = first.embeddingSyncUs + firstTail.computeUs + firstTail.exposedCommUs;
  double computeUs = firstTail.computeUs, exposedUs = firstTail.exposedCommUs;
  double embeddingSyncUs = first.embeddingSyncUs;
  for (size_t s = 1; s < eval.stages.size(); ++s) {
    const cost::StageCost &stage = eval.stages[s];
    if (stage.embeddingSyncUs + stage.optimizerUs > tailUs) {
      tailUs = stage.embeddingSyncUs + stage.optimizerUs;
      computeUs = stage.optimizerUs;
      exposedUs = 0;
      embeddingSyncUs = stage.embeddingSyncUs;
    }
  }
  eval.computeUs += computeUs;
  eval.dataCommUs += exposedUs;
  eval.pipelineCommUs += embeddingSyncUs;  // between stages, on the critical path
  eval.iterationUs += tailUs;
  eval.tflopsPerGpu = eval.flopsPerGpu / eval.iterationUs / 1e6;
  eval.modelTflopsPerGpu = eval.modelFlopsPerGpu / eval.iterationUs / 1e6;
  eval.mfu = eval.modelTflopsPerGpu / peakTflops(model, dtype);
}

bool syncsByAllReduce(const ParallelConfig &config) { return config.dp > 1 && config.zero <= 1; }

/// `sync` as the runtime runs it: the experts' gradients over their replicas,
/// not the dp group (its buckets split so, as the data-parallel MoE plan's are).
ExpertParallelSync overExpertReplicas(const GradientSync &sync, const ParallelConfig &config) {
  if (config.ep == 1)
    return {sync.problem, sync.plan};
  return expertParallelSync(sync, config.ep, sync.problem.group);
}

} // namespace

Problem stageSyncProblem(const cost::StageCost &stage, const ParallelConfig &config,
                         const cost::TrainingSetup &setup, const cost::CostModel &model,
                         std::vector<bool> *experts) {
  Problem problem;
  const int n = int(stage.units.size());
  double stageElements = 0;
  for (const cost::StageCost::Unit &unit : stage.units)
    stageElements += unit.gradientElements + unit.expertElements;
  for (int i = n - 1; i >= 0; --i)
    problem.forward.push_back({stage.units[i].name, stage.units[i].forwardUs, 0, 0});
  for (int i = 0; i < n; ++i) {
    const cost::StageCost::Unit &unit = stage.units[i];
    problem.backward.push_back({unit.name, unit.backwardUs, 0, 0});
    GradientTensor gradient;
    gradient.name = unit.name;
    gradient.elements = int64_t(std::llround(unit.gradientElements));
    gradient.bytes = gradient.elements * 4;  // fp32 main gradients on the wire
    gradient.readyAfterSegment = i;
    gradient.forwardSegment = n - 1 - i;
    // The stage's optimizer step, each gradient its share by elements (ZeRO 1: of its shard).
    gradient.optimizerUs = stageElements > 0 ? stage.optimizerUs * unit.gradientElements / stageElements : 0;
    // A unit without parameters (the head of an encoder without an LM head, or of one tied to
    // the embedding) has no gradient to sync.
    if (gradient.elements > 0) {
      problem.gradients.push_back(gradient);
      if (experts)
        experts->push_back(false);
    }
    if (unit.expertElements > 0) {
      GradientTensor expert = gradient;
      expert.name = unit.name + ".experts";
      // Every rank's share alike: expertParallelSync divides it by ep again.
      expert.elements = int64_t(std::llround(unit.expertElements)) * config.ep;
      expert.bytes = expert.elements * 4;
      expert.optimizerUs = stage.optimizerUs * unit.expertElements * double(config.ep) / stageElements;
      problem.gradients.push_back(expert);
      if (experts)
        experts->push_back(true);
    }
  }
  problem.group = cost::parallelGroups(config, model.cluster()).data;
  problem.computeDtype = setup.computeDtype;
  return problem;
}

ParallelEvaluation scoreConfig(const cost::TransformerShape &shape, const ParallelConfig &config,
                               const cost::TrainingSetup &setup, const cost::CostModel &model) {
  ParallelEvaluation eval = scorePipeline(shape, config, setup, model, PipelineTiming::ClosedForm);
  const cost::StageCost &first = eval.stages.front();
  FirstStageTail tail{first.optimizerUs, 0};
  if (syncsByAllReduce(config)) {
    double allReduceUs = dataParallelUs(model, cost::CollectiveKind::AllReduce, first, 4, config);
    double window = first.backwardUs;
    tail.exposedCommUs = std::max(0.0, allReduceUs - window);
    tail.computeUs += (model.overlapSlowdown() - 1.0) * std::min(allReduceUs, window);
  }
  finish(eval, tail, model, setup.computeDtype);
  return eval;
}

ParallelEvaluation scoreWithSync(const cost::TransformerShape &shape, const ParallelConfig &config,
                                 const cost::TrainingSetup &setup, const cost::CostModel &model,
                                 const AutotuneOptions &sync) {
  ParallelEvaluation eval = scorePipeline(shape, config, setup, model, PipelineTiming::Simulated);
  if (!syncsByAllReduce(config)) {
    finish(eval, {eval.stages.front().optimizerUs, 0}, model, setup.computeDtype);
    return eval;
  }
  GradientSync gradients;
  gradients.problem = stageSyncProblem(eval.stages.front(), config, setup, model, &gradients.expert);
  AutotuneResult planned = autotune(gradients.problem, model, sync);
  gradients.plan = planned.best;
  Evaluation synced = planned.bestEval;
  ExpertParallelSync split = overExpertReplicas(gradients, config);
  if (config.ep > 1)
    synced = evaluate(split.problem, split.plan, model);
  // The optimizer steps are in the sync's timeline (each bucket's after its collective), as
  // in a data-parallel plan: its compute beyond the last micro-batch's is the tail's.
  double forwardBackwardUs = 0;
  for (const std::vector<ComputeSegment> *segments : {&split.problem.forward, &split.problem.backward})
    for (const ComputeSegment &segment : *segments)
      forwardBackwardUs += segment.durationUs;
  finish(eval, {synced.computeUs - forwardBackwardUs, synced.exposedCommUs}, model, setup.computeDtype);
  eval.syncProblem = std::move(split.problem);
  eval.syncPlan = std::move(split.plan);
  eval.syncPlanned = true;
  return eval;
}

ExpertParallelSync stageSyncSchedule(const ParallelEvaluation &eval, const cost::TrainingSetup &setup,
                                     const cost::CostModel &model) {
  if (eval.syncProblem && eval.syncPlan)
    return {*eval.syncProblem, *eval.syncPlan};
  GradientSync gradients;
  gradients.problem = stageSyncProblem(eval.stages.front(), eval.config, setup, model, &gradients.expert);
  std::string error;
  std::optional<PlanChoice> ddp = baselineChoice("ddp", gradients.problem, model, BaselineOptions{}, error);
  if (!ddp)
    throw std::logic_error("the first stage's gradients have no DDP buckets: " + error);
  gradients.plan = std::move(*ddp);
  return overExpertReplicas(gradients, eval.config);
}

namespace {

std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> result;
  for (int64_t d = 1; d * d <= n; ++d)
    if (n % d == 0) {
      result.push_back(d);
      if (d != n / d)
        result.push_back(n / d);
    }
  std::sort(result.begin(), result.end());
  return result;
}

int64_t worldGpus(const cost::CostModel &model) {
  return model.cluster().nodes * model.cluster().gpusPerNode;
}

std::string requirementText(const cost::MemoryBreakdown &memory) {
  char text[160];
  std::snprintf(text, sizeof text, "needs %.1f GB per GPU of %.1f GB", memory.perGpuBytes() / 1e9,
                memory.capacityBytes / 1e9);
  return text;
}

/// A seed's MoE settings: the largest ep its dp group places, the experts split
/// over its tp ranks where they divide, and the layers' fastest degrees and
/// algorithm under them.
ParallelConfig withSeedExperts(ParallelConfig config, const cost::TransformerShape &shape,
                               const cost::CostModel &model, const cost::TrainingSetup &setup) {
  if (!shape.moe)
    return config;
  config.ep = cost::expertParallelDegrees(shape, config, model.cluster()).back();
  // Megatron-Core splits the experts over the tensor-parallel ranks by default
  // (ETP = tp), where their width divides.
  config.expertTensorParallel = config.tp > 1;
  if (!cost::checkConfig(shape, config, setup, config.gpus()).empty())
    config.expertTensorParallel = false;
  if (cost::checkConfig(shape, config, setup, config.gpus()).empty())
    config.experts = cost::chooseMoeSchedule(shape, config, setup, model);
  return config;
}

/// The first of a seed rule's candidates, in its order of preference, that
/// runs and fits (with its MoE settings); otherwise nullopt with the least
/// memory any of them needs.
std::optional<ParallelConfig> firstThatFits(std::vector<ParallelConfig> candidates,
                                            const cost::TransformerShape &shape,
                                            const cost::CostModel &model,
                                            const cost::TrainingSetup &setup, std::string &whyNot) {
  std::optional<cost::MemoryBreakdown> least;
  std::string firstInvalid;
  for (ParallelConfig &candidate : candidates) {
    candidate = withSeedExperts(std::move(candidate), shape, model, setup);
    const ParallelConfig &config = candidate;
    if (std::string why = cost::checkConfig(shape, config, setup, config.gpus()); !why.empty()) {
      if (firstInvalid.empty())
        firstInvalid = why;
      continue;
    }
    cost::MemoryBreakdown memory = cost::memoryPerGpu(shape, config, setup, model);
    if (memory.fits())
      return config;
    if (!least || memory.perGpuBytes() < least->perGpuBytes())
      least = memory;
  }
  whyNot = least ? "does not fit: " + requirementText(*least) : firstInvalid;
  return std::nullopt;
}

/// The micro-batch sizes the search tries: the forced one, else those up to
/// 16 that divide the samples per pipeline.
std::vector<int64_t> microBatchCandidates(int64_t perPipeline, std::optional<int64_t> forced) {
  if (forced)
    return {*forced};
  std::vector<int64_t> sizes;
  for (int64_t micro = 1; micro <= std::min<int64_t>(16, perPipeline); ++micro)
    if (perPipeline % micro == 0)
      sizes.push_back(micro);
  return sizes;
}

/// The first constraint the forced tp, pp and dp break on `gpus` GPUs,
/// `perNode` to a node; "" when none. Each must divide the GPUs, together they
/// must multiply to them, and tensor-parallel groups stay inside a node or
/// take whole nodes (Megatron-LM's placement puts tp innermost: a tp that
/// neither divides nor is a multiple of the GPUs per node would put some
/// groups across two nodes, their collectives on the network).
std::string forcedDegreesProblem(const ParallelRequest &request, int64_t gpus, int64_t perNode) {
  const std::pair<const char *, std::optional<int64_t>> degrees[] = {
      {"tp", request.tp}, {"pp", request.pp}, {"dp", request.dp}};
  std::string product;
  int64_t forcedGpus = 1;
  for (const auto &[name, degree] : degrees) {
    if (!degree)
      continue;
    if (gpus % *degree != 0)
      return std::string(name) + " " + std::to_string(*degree) + " does not divide the " +
             std::to_string(gpus) + " GPUs";
    product += (product.empty() ? "" : " x ") + std::string(name) + " " + std::to_string(*degree);
    forcedGpus *= *degree;  // each divides gpus <= 2^20: no overflow before the check
    if (gpus % forcedGpus != 0)
      return product + " = " + std::to_string(forcedGpus) + " does not divide the " +
             std::to_string(gpus) + " GPUs";
  }
  if (request.tp && request.pp && request.dp && forcedGpus != gpus)
    return product + " = " + std::to_string(forcedGpus) + " GPUs, but the cluster has " +
           std::to_string(gpus);
  if (request.tp && perNode % *request.tp != 0 && *request.tp % perNode != 0)
    return "tp " + std::to_string(*request.tp) + " neither divides nor is a multiple of the " +
           std::to_string(perNode) + " GPUs per node: tensor-parallel groups would straddle nodes";
  return "";
}

bool consistent(const ParallelConfig &c, const ParallelRequest &r) {
  return (!r.tp || *r.tp == c.tp) && (!r.pp || *r.pp == c.pp) && (!r.dp || *r.dp == c.dp) &&
         (!r.microBatch || *r.microBatch == c.microBatch) &&
         (!r.virtualStages || *r.virtualStages == c.virtualStages) && (!r.zero || *r.zero == c.zero) &&
         (!r.sequenceParallel || *r.sequenceParallel == c.sequenceParallel) &&
         (!r.recompute || *r.recompute == c.recompute) &&
         (!r.tpChunks || c.tp == 1 || c.decomposition == cost::Decomposition::uniform(*r.tpChunks)) &&
         (!r.ep || *r.ep == c.ep);
}

} // namespace

std::optional<ParallelConfig> seedConfig(const std::string &name, const cost::TransformerShape &shape,
                                         const cost::CostModel &model, const cost::TrainingSetup &setup,
                                         std::string &whyNot) {
  const int64_t gpus = worldGpus(model);
  if (setup.globalBatch % gpus != 0 && name != "megatron") {
    whyNot = "the global batch " + std::to_string(setup.globalBatch) + " does not divide over " +
             std::to_string(gpus) + " data-parallel ranks";
    return std::nullopt;
  }
  if (name == "ddp" || name == "zero3") {
    // Pure data parallelism: DDP runs the whole per-rank batch as one
    // micro-batch; FSDP takes the largest micro-batch that fits, recomputing
    // activations only if nothing fits without.
    const int64_t perRank = setup.globalBatch / gpus;
    std::vector<ParallelConfig> candidates;
    for (Recompute recompute : {Recompute::None, Recompute::Full}) {
      std::vector<int64_t> microBatches = divisors(perRank);
      for (auto micro = microBatches.rbegin(); micro != microBatches.rend(); ++micro) {
        ParallelConfig config;
        config.dp = gpus;
        config.zero = name == "ddp" ? 0 : 3;
        config.recompute = recompute;
        config.microBatch = *micro;
        config.microBatches = perRank / *micro;
        candidates.push_back(config);
        if (name == "ddp")
          break;
      }
      if (name == "ddp")
        break;
    }
    return firstThatFits(candidates, shape, model, setup, whyNot);
  }
  if (name == "megatron") {
    // Megatron-LM's own guidance (Narayanan et al. SC21, takeaways 1 and 2; Korthikanti et
    // al. 2022): tensor parallelism inside a node, the smallest degree that fits; pipeline
    // stages next, the fewest that fit at the node's tp; the rest data parallel; selective
    // recomputation where it fits (full where only that does), sequence parallelism with
    // tp > 1; 1F1B, micro-batch 1 (SC21 section 5's runs).
    std::vector<int64_t> tps;
    for (int64_t candidate = 1; candidate <= model.cluster().gpusPerNode; ++candidate)
      if (model.cluster().gpusPerNode % candidate == 0 && shape.heads % candidate == 0 &&
          shape.keyValueHeads() % candidate == 0 && shape.ffn % candidate == 0 && gpus % candidate == 0)
        tps.push_back(candidate);
    std::vector<std::pair<int64_t, int64_t>> degrees;  // (tp, pp) in the guidance's order
    for (int64_t tp : tps)
      degrees.emplace_back(tp, 1);
    for (int64_t pp : divisors(gpus / tps.back()))
      if (pp > 1)
        degrees.emplace_back(tps.back(), pp);
    std::vector<ParallelConfig> candidates;
    for (auto [tp, pp] : degrees)
      for (Recompute recompute : {Recompute::Selective, Recompute::Full}) {
        ParallelConfig config;
        config.tp = tp;
        config.pp = pp;
        config.dp = gpus / (tp * pp);
        config.sequenceParallel = tp > 1;
        config.recompute = recompute;
        if (pp > shape.layers || setup.globalBatch % config.dp != 0)
          continue;
        config.microBatches = setup.globalBatch / config.dp;
        candidates.push_back(config);
      }
    if (candidates.empty()) {
      whyNot = "no pipeline depth divides the GPUs and the global batch";
      return std::nullopt;
    }
    return firstThatFits(candidates, shape, model, setup, whyNot);
  }
  whyNot = "unknown baseline " + name;
  return std::nullopt;
}

std::string parallelBaselineRule(const std::string &name) {
  static const std::map<std::string, std::string> rules = {
      {"megatron", "Megatron-LM's guidance: the smallest tp within a node that fits, then the fewest "
                   "pipeline stages, selective recomputation where it fits, sequence parallel with tp > 1, "
                   "micro-batch 1"},
      {"zero3", "FSDP / ZeRO-3: pure data parallelism, the largest micro-batch that fits"},
      {"ddp", "PyTorch DDP: pure data parallelism, the whole per-rank batch at once"},
      {"tp-nodecomp", "the chosen configuration, no tensor-parallel decomposition"},
      {"tp-asynctp", "the chosen configuration, every GEMM in tp chunks (PyTorch async-TP)"},
      {"tp-uniform", "the chosen configuration, the best single chunk count"},
      {"moe-nopipe", "the chosen configuration, MoE layers unpipelined with flat all-to-alls"},
      {"tutel", "the chosen configuration, one MoE degree and algorithm for every layer (Tutel)"}};
  auto rule = rules.find(name);
  return rule == rules.end() ? std::string() : rule->second;
}

ParallelResult searchParallel(const cost::TransformerShape &shape, const cost::CostModel &model,
                              const ParallelRequest &request) {
  ParallelResult result;
  const cost::TrainingSetup &setup = request.setup;
  const int64_t gpus = worldGpus(model);
  const int64_t perNode = model.cluster().gpusPerNode;

  if (setup.globalBatch < 1 || setup.globalBatch > cost::kMaxGlobalBatch) {
    result.invalid = "the global batch " + std::to_string(setup.globalBatch) +
                     " is not from 1 to the limit of " + std::to_string(cost::kMaxGlobalBatch) + " samples";
    return result;
  }
  if (std::string why = forcedDegreesProblem(request, gpus, perNode); !why.empty()) {
    result.invalid = why;
    return result;
  }

  // A fully forced configuration that cannot run is reported as such.
  if (request.tp && request.pp && request.dp && request.microBatch) {
    ParallelConfig forced;
    forced.tp = *request.tp;
    forced.pp = *request.pp;
    forced.dp = *request.dp;
    forced.microBatch = *request.microBatch;
    forced.microBatches = std::max<int64_t>(1, setup.globalBatch / std::max<int64_t>(1, forced.dp * forced.microBatch));
    forced.zero = request.zero.value_or(0);
    forced.sequenceParallel = request.sequenceParallel.value_or(false);
    forced.virtualStages = request.virtualStages.value_or(1);
    std::string why = cost::checkConfig(shape, forced, setup, gpus);
    if (!why.empty()) {
      result.invalid = why;
      return result;
    }
  }

  // A forced tp that cannot divide the model is named as such.
  if (request.tp) {
    for (auto [total, of] : {std::pair{shape.heads, "attention heads"}, {shape.ffn, "MLP features"}})
      if (total % *request.tp != 0) {
        result.invalid = "tp " + std::to_string(*request.tp) + " does not divide the " +
                         std::to_string(total) + " " + of;
        return result;
      }
  }
  // So is a forced schedule no pipeline depth fits in the layers.
  if (request.virtualStages && request.pp.value_or(1) * *request.virtualStages > shape.layers) {
    result.invalid = "pp " + std::to_string(request.pp.value_or(1)) + " x " +
                     std::to_string(*request.virtualStages) + " virtual stages exceeds the " +
                     std::to_string(shape.layers) + " layers";
    return result;
  }
  const std::vector<int64_t> virtualStageCounts =
      request.virtualStages ? std::vector<int64_t>{*request.virtualStages}
                            : std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8};

  std::vector<ParallelEvaluation> feasible;
  std::map<std::tuple<int64_t, int64_t, bool>, cost::Decomposition> decompositions;
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, bool>, cost::MoeLayerChoice> moeSchedules;
  // The allowed compressors that may carry the MoE layers' tokens (chooseMoeSchedule keeps those
  // that shrink them).
  std::vector<cost::CompressionMethod> tokenCompressions;
  for (const cost::CompressionSpec &spec : request.gradientSync.compressors)
    tokenCompressions.push_back(spec.method);
  std::optional<std::pair<ParallelConfig, double>> leastMemory;
  std::string firstInvalid;
  for (int64_t tp : divisors(gpus)) {
    // Unforced, tensor parallelism stays inside a node (forced, within or over whole nodes).
    if (request.tp ? tp != *request.tp : (perNode % tp || shape.heads % tp || shape.ffn % tp))
      continue;
    for (int64_t pp : divisors(gpus / tp)) {
      if (request.pp ? pp != *request.pp : pp > shape.layers)
        continue;
      const int64_t dp = gpus / (tp * pp);
      if (request.dp && dp != *request.dp)
        continue;
      if (setup.globalBatch % dp != 0) {
        if (firstInvalid.empty())
          firstInvalid = "the global batch " + std::to_string(setup.globalBatch) +
                         " does not divide over dp " + std::to_string(dp);
        continue;
      }
      const int64_t perPipeline = setup.globalBatch / dp;
      // MoE blocks: the forced ep, or every one this dp group places.
      ParallelConfig placement;
      placement.tp = tp;
      placement.pp = pp;
      placement.dp = dp;
      std::vector<int64_t> eps = cost::expertParallelDegrees(shape, placement, model.cluster());
      if (request.ep) {
        const cost::Group data = cost::parallelGroups(placement, model.cluster()).data;
        std::string why = shape.moe ? cost::checkExpertPlacement(*request.ep, data) : "";
        if (!why.empty()) {
          if (firstInvalid.empty())
            firstInvalid = why;
          continue;
        }
        eps = {*request.ep};
      }
      // With tp > 1 the experts may also be split over the tp ranks.
      std::vector<std::pair<int64_t, bool>> expertLayouts;
      for (int64_t ep : eps)
        for (bool etp : {false, true})
          if (!etp || (shape.moe && tp > 1))
            expertLayouts.emplace_back(ep, etp);
      if (request.microBatch && perPipeline % *request.microBatch != 0) {
        if (firstInvalid.empty())
          firstInvalid = "micro-batch " + std::to_string(*request.microBatch) + " does not divide the " +
                         std::to_string(perPipeline) + " samples per pipeline (global batch " +
                         std::to_string(setup.globalBatch) + " over dp " + std::to_string(dp) + ")";
        continue;
      }
      for (int64_t micro : microBatchCandidates(perPipeline, request.microBatch)) {
        const int64_t microBatches = perPipeline / micro;
        for (int zero = 0; zero <= 3; ++zero) {
          if (request.zero ? zero != *request.zero : (dp == 1 && zero > 0))
            continue;
          for (bool sp : {false, true}) {
            if (request.sequenceParallel ? sp != *request.sequenceParallel : (sp && tp == 1))
              continue;
            for (Recompute recompute : {Recompute::None, Recompute::Selective, Recompute::Full}) {
              if (request.recompute && recompute != *request.recompute)
                continue;
              for (int64_t virtualStages : virtualStageCounts) {
                if (!request.virtualStages && virtualStages > 1 && pp == 1)
                  continue;
                for (auto [ep, etp] : expertLayouts) {
                  ParallelConfig config{tp, pp, dp, zero, sp, recompute, micro, microBatches, virtualStages};
                  config.ep = ep;
                  config.expertTensorParallel = etp;
                  std::string why = cost::checkConfig(shape, config, setup, gpus);
                  if (!why.empty()) {
                    if (firstInvalid.empty())
                      firstInvalid = why;
                    continue;
                  }
                  if (request.tpChunks && tp > 1 && (micro * shape.seq) % *request.tpChunks) {
                    if (firstInvalid.empty())
                      firstInvalid = "tp-chunks " + std::to_string(*request.tpChunks) +
                                     " does not divide a micro-batch's " +
                                     std::to_string(micro * shape.seq) + " tokens";
                    continue;
                  }
                  // A block's decomposition depends on tp, the micro-batch and sequence parallelism only.
                  auto [known, fresh] = decompositions.try_emplace({tp, micro, sp});
                  if (fresh)
                    known->second = request.tpChunks && tp > 1
                                        ? cost::Decomposition::uniform(*request.tpChunks)
                                        : cost::chooseDecomposition(shape, config, setup, model);
                  config.decomposition = known->second;
                  // The MoE layers' degrees and algorithm depend on the tokens per rank, ep and the dp group.
                  if (shape.moe) {
                    auto [schedule, unknown] = moeSchedules.try_emplace({tp, dp, micro, ep, etp});
                    if (unknown)
                      schedule->second = cost::chooseMoeSchedule(shape, config, setup, model, tokenCompressions);
                    config.experts = schedule->second;
                  }
                  // 1F1B stages take the blocks that balance their time in memory.
                  if (pp > 1 && virtualStages == 1) {
                    ParallelConfig balanced = config;
                    balanced.stageLayers = cost::balanceStages(shape, config, setup, model);
                    if (!balanced.stageLayers.empty())
                      config = std::move(balanced);
                  }
                  cost::MemoryBreakdown memory = cost::memoryPerGpu(shape, config, setup, model);
                  if (!memory.fits()) {
                    if (!leastMemory || memory.perGpuBytes() < leastMemory->second)
                      leastMemory = {config, memory.perGpuBytes()};
                    continue;
                  }
                  feasible.push_back(scoreConfig(shape, config, setup, model));
                  ++result.configurationsScored;
                }
              }
            }
          }
        }
      }
    }
  }

  // Seeds and baselines, scored in full.
  std::vector<ParallelEvaluation> finalists;
  for (const std::string &name : parallelBaselineNames()) {
    std::string whyNot;
    std::optional<ParallelConfig> seed = seedConfig(name, shape, model, setup, whyNot);
    if (!seed) {
      result.baselinesWhyNot[name] = whyNot;
      continue;
    }
    ParallelEvaluation eval = scoreWithSync(shape, *seed, setup, model, request.gradientSync);
    result.baselines[name] = eval;
    if (consistent(*seed, request))
      finalists.push_back(eval);
  }

  // The most promising by the closed-form score, re-scored with the planned sync.
  std::stable_sort(feasible.begin(), feasible.end(),
                   [](const ParallelEvaluation &a, const ParallelEvaluation &b) {
                     return a.iterationUs < b.iterationUs;
                   });
  constexpr size_t kFinalists = 8;
  for (size_t i = 0; i < feasible.size() && i < kFinalists; ++i)
    finalists.push_back(scoreWithSync(shape, feasible[i].config, setup, model, request.gradientSync));
  for (ParallelEvaluation &candidate : finalists)
    if (!result.best || candidate.iterationUs < result.best->iterationUs)
      result.best = candidate;

  // The chosen configuration under the fixed decompositions others use:
  // Megatron without overlap, async-TP's k = tp, the best single k. They
  // compete like the seeds unless the decomposition is forced.
  if (result.best && result.best->config.tp > 1) {
    const ParallelConfig chosen = result.best->config;
    const std::vector<int64_t> degrees = cost::decompositionDegrees(shape, chosen);
    auto withDecomposition = [&](const cost::Decomposition &d) {
      ParallelConfig config = chosen;
      config.decomposition = d;
      return scoreWithSync(shape, config, setup, model, request.gradientSync);
    };
    result.baselines["tp-nodecomp"] = withDecomposition(cost::Decomposition{});
    if ((chosen.microBatch * shape.seq) % chosen.tp == 0)
      result.baselines["tp-asynctp"] = withDecomposition(cost::Decomposition::uniform(chosen.tp));
    else
      result.baselinesWhyNot["tp-asynctp"] =
          "tp " + std::to_string(chosen.tp) + " chunks do not divide a micro-batch's tokens";
    std::optional<ParallelEvaluation> uniform;
    for (int64_t chunks : degrees) {
      ParallelEvaluation eval = withDecomposition(cost::Decomposition::uniform(chunks));
      if (!uniform || eval.iterationUs < uniform->iterationUs)
        uniform = std::move(eval);
    }
    result.baselines["tp-uniform"] = *uniform;
    for (const char *name : {"tp-nodecomp", "tp-asynctp", "tp-uniform"})
      if (auto baseline = result.baselines.find(name);
          !request.tpChunks && baseline != result.baselines.end() &&
          baseline->second.iterationUs < result.best->iterationUs)
        result.best = baseline->second;
  }

  // The chosen configuration with its MoE layers run as DeepSpeed-MoE (no
  // pipelining, flat) and as Tutel (one degree and algorithm throughout);
  // they compete like the seeds.
  if (result.best && shape.moe) {
    const ParallelConfig chosen = result.best->config;
    auto withExperts = [&](const cost::MoeLayerChoice &experts) {
      ParallelConfig config = chosen;
      config.experts = experts;
      return config;
    };
    result.baselines["moe-nopipe"] =
        scoreWithSync(shape, withExperts(cost::MoeLayerChoice{}), setup, model, request.gradientSync);
    // Tutel's single degree and algorithm: screened in closed form, the best scored in full.
    std::optional<ParallelEvaluation> tutel;
    for (int64_t chunks : cost::moeDegrees(cost::moeLayerShape(shape, chosen)))
      for (cost::AllToAllAlgorithm algorithm :
           {cost::AllToAllAlgorithm::Flat, cost::AllToAllAlgorithm::Hierarchical})
        if (chunks <= 8) {
          ParallelEvaluation eval = scoreConfig(shape, withExperts({chunks, chunks, algorithm}), setup, model);
          if (!tutel || eval.iterationUs < tutel->iterationUs)
            tutel = std::move(eval);
        }
    result.baselines["tutel"] = scoreWithSync(shape, tutel->config, setup, model, request.gradientSync);
    for (const char *name : {"moe-nopipe", "tutel"})
      if (result.baselines.at(name).iterationUs < result.best->iterationUs)
        result.best = result.baselines.at(name);
  }

  if (!result.best) {
    if (leastMemory)
      result.smallestRequirement = scoreConfig(shape, leastMemory->first, setup, model);
    else
      result.invalid = firstInvalid.empty() ? "no configuration divides the model over the cluster" : firstInvalid;
  }
  return result;
}

}  // namespace zen::plan

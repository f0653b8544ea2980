//===- ParallelSearch.h - tp/pp/dp/ZeRO configuration search ---*- C++ -*-===//
//
// Chooses how a transformer trains on a cluster: tensor, pipeline and data
// parallel degrees, ZeRO stage, sequence parallelism, recomputation,
// micro-batching and pipeline schedule, under the memory limit, scored with
// the cost model's stage costs and pipeline schedule, and with the gradient
// planner's plan for the first stage's data-parallel sync inside
// (docs/design.md "Large models"). No MLIR.
//
//===----------------------------------------------------------------------===//
#ifndef ZEN_PLANNER_PARALLELSEARCH_H
#define ZEN_PLANNER_PARALLELSEARCH_H

#include "zen/CostModel/Transformer.h"
#include "zen/Planner/Moe.h"
#include "zen/Planner/Planning.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace zen::plan {

/// What the user fixed; everything left unset is searched.
struct ParallelRequest {
  cost::TrainingSetup setup;
  std::optional<int64_t> tp, pp, dp, microBatch, virtualStages;
  std::optional<int> zero;
  std::optional<bool> sequenceParallel;
  std::optional<cost::Recompute> recompute;
  /// Chunks of every tensor-parallel GEMM and its collective (one k for every region and
  /// phase); unset: chosen per region and phase by the cost model.
  std::optional<int64_t> tpChunks;
  /// MoE blocks: the experts' ranks (--ep); unset: searched.
  std::optional<int64_t> ep;
  /// The gradient planner's options for the data-parallel sync (compressors;
  /// those that shrink activations may also carry MoE blocks' tokens).
  AutotuneOptions gradientSync;

  /// True when any configuration field is fixed.
  bool forcesAny() const;
};

/// One configuration, scored.
struct ParallelEvaluation {
  cost::ParallelConfig config;
  cost::MemoryBreakdown memory;
  std::vector<cost::StageCost> stages;
  cost::PipelineTime pipeline;
  /// iterationUs = computeUs + tensorCommUs + pipelineCommUs + dataCommUs + pipeline.bubbleUs,
  /// each the pacing (slowest) stage's over the whole iteration.
  double iterationUs = 0;
  /// Forward, backward (recomputation included) and optimizer step, with the compute the
  /// data-parallel sync slows while it overlaps (CostModel::overlapSlowdown).
  double computeUs = 0;
  /// No plan of this configuration is faster: its compute (without the overlap's slowdown),
  /// or one all-reduce's worth of the first stage's gradients over the dp group
  /// (CostModel::communicationBoundUs).
  double lowerBoundUs = 0;
  double tensorCommUs = 0;    // TP collectives on the critical path, whole iteration
  double pipelineCommUs = 0;  // p2p on the critical path, whole iteration
  double dataCommUs = 0;      // data-parallel sync (and ZeRO traffic) not hidden
  double optimizerUs = 0;
  double flopsPerGpu = 0;        // per iteration, recomputation included (mean over stages)
  double modelFlopsPerGpu = 0;   // per iteration, without recomputation
  double tflopsPerGpu = 0;       // executed FLOPs, recomputation included
  double modelTflopsPerGpu = 0;  // without recomputation
  double mfu = 0;                // model FLOPs / peak at the compute precision
  /// The first stage's data-parallel sync, planned by the gradient planner
  /// (set by scoreWithSync; ZeRO 0 and 1 only).
  std::optional<Problem> syncProblem;
  std::optional<PlanChoice> syncPlan;
  bool syncPlanned = false;
};

/// The closed-form score the search prunes with: stage costs, pipeline and a
/// data-parallel sync estimated as the all-reduce not hidden behind the last
/// micro-batch's backward.
ParallelEvaluation scoreConfig(const cost::TransformerShape &shape, const cost::ParallelConfig &config,
                               const cost::TrainingSetup &setup, const cost::CostModel &model);
/// The full score: the pipeline's time from the event simulation of its
/// schedule (cost::simulatePipeline) and the first stage's data-parallel
/// gradient sync planned by `autotune` (ZeRO 0/1) over its dp group.
ParallelEvaluation scoreWithSync(const cost::TransformerShape &shape, const cost::ParallelConfig &config,
                                 const cost::TrainingSetup &setup, const cost::CostModel &model,
                                 const AutotuneOptions &sync);

/// The data-parallel gradient problem of a configuration's first stage: its
/// blocks (and embedding) as gradients in ready order, the last micro-batch's
/// backward as the compute they overlap. An MoE block's experts are a
/// gradient of their own, at the size of every expert (expertParallelSync
/// gives each rank its experts / ep of it), flagged in `experts` when given.
Problem stageSyncProblem(const cost::StageCost &stage, const cost::ParallelConfig &config,
                         const cost::TrainingSetup &setup, const cost::CostModel &model,
                         std::vector<bool> *experts = nullptr);

/// The first stage's data-parallel gradient schedule of `eval` as the plan file
/// carries it: the planned sync (ZeRO 0/1, scoreWithSync), else (ZeRO 2/3,
/// dp 1: their traffic is in the stage costs) DDP's buckets; the experts'
/// gradients over their replicas either way. Throws std::logic_error when DDP's
/// buckets cannot be made.
ExpertParallelSync stageSyncSchedule(const ParallelEvaluation &eval, const cost::TrainingSetup &setup,
                                     const cost::CostModel &model);

struct ParallelResult {
  /// The fastest configuration that fits; nullopt when none does.
  std::optional<ParallelEvaluation> best;
  /// Seeds and baselines by name ("megatron", "zero3", "ddp"), those that fit;
  /// with tp > 1 also the chosen configuration under fixed decompositions:
  /// "tp-nodecomp" (k = 1), "tp-asynctp" (k = tp), "tp-uniform" (the best single k);
  /// with MoE blocks the chosen configuration with its MoE layers run as
  /// "moe-nopipe" (degree 1, flat) and "tutel" (one degree of 1, 2, 4, 8 for
  /// forward and backward and one algorithm, the fastest by scoreConfig,
  /// then scored in full).
  std::map<std::string, ParallelEvaluation> baselines;
  /// Why a named baseline is not reported (does not fit, cannot divide).
  std::map<std::string, std::string> baselinesWhyNot;
  /// When nothing fits: the configuration needing the least memory.
  std::optional<ParallelEvaluation> smallestRequirement;
  /// A forced configuration that cannot run at all (divisibility): the reason.
  std::string invalid;
  int64_t configurationsScored = 0;
};

/// Enumerates every configuration the request allows (divisibility, memory;
/// 1F1B pipelines with their stages balanced by cost::balanceStages; the
/// seeds keep Megatron's even split), scores it with scoreConfig, re-scores the most promising and the seeds with
/// scoreWithSync, and returns the fastest that fits. The seeds are scored the
/// same way and compete, so `best` is never slower than a seed that fits.
ParallelResult searchParallel(const cost::TransformerShape &shape, const cost::CostModel &model,
                              const ParallelRequest &request);

/// The seed configurations: `megatron` (Megatron-LM's guidance: the smallest tp
/// within a node that fits, then the fewest pp at the node's tp, the rest dp, selective
/// recomputation where it fits and full where only that does, sequence parallelism with
/// tp > 1, 1F1B, micro-batch 1), `zero3`
/// (FSDP: pure dp with ZeRO-3), `ddp` (pure dp). With MoE blocks each takes
/// the largest ep its dp group places (every expert on its own ranks, as
/// Megatron-Core and DeepSpeed-MoE run them), with tp > 1 the experts split
/// over the tp ranks (Megatron-Core's default expert tensor parallelism) where
/// their width divides, and chooseMoeSchedule's degrees.
/// nullopt with `whyNot` set when the rule cannot be applied to this shape
/// and cluster.
std::optional<cost::ParallelConfig> seedConfig(const std::string &name, const cost::TransformerShape &shape,
                                               const cost::CostModel &model,
                                               const cost::TrainingSetup &setup, std::string &whyNot);
const std::vector<std::string> &parallelBaselineNames();  // megatron zero3 ddp
/// How a large-model baseline's configuration is chosen, in words ("" for an unknown name).
std::string parallelBaselineRule(const std::string &name);

}  // namespace zen::plan

#endif  // ZEN_PLANNER_PARALLELSEARCH_H

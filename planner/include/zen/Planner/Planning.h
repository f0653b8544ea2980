//===- Planning.h - planning problem, plan choices and the autotuner -*- C++ -*-===//
//
// The IR-free core of zenopt's planning: a Problem (what has to be communicated
// and when it becomes ready), a PlanChoice (buckets, compression, chunks,
// decomposition, streams and priorities), the simulator tasks a choice turns
// into, the baseline strategies, and the joint search. The passes extract a
// Problem from the zen dialect, call these, and materialise the chosen plan;
// codegen uses the same API to re-score plans.
//
// All times are microseconds, all sizes bytes.
//
//===----------------------------------------------------------------------===//
#ifndef ZEN_PLANNER_PLANNING_H
#define ZEN_PLANNER_PLANNING_H

#include "zen/CostModel/CostModel.h"
#include "zen/CostModel/Simulator.h"
#include "zen/SyncScheme.h"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace zen::plan {

/// A run of compute ops on the compute stream, coarse-grained between the
/// points where gradients become ready (backward) or where a parameter is
/// first read (forward).
struct ComputeSegment {
  std::string name;        // first node of the segment
  double durationUs = 0;
  int64_t flops = 0;       // summed over the segment's ops, to re-cost it on another cluster
  int64_t bytes = 0;
};

/// One gradient tensor; Problem::gradients holds them in backward-ready order.
struct GradientTensor {
  std::string name;        // the parameter's name
  int64_t elements = 0;
  int64_t bytes = 0;       // uncompressed, on the wire
  /// The backward segment after which the gradient is complete (-1: ready
  /// when backward starts).
  int readyAfterSegment = -1;
  /// The forward segment that first reads the parameter (where a decoupled
  /// all-gather must have completed in the next iteration).
  int forwardSegment = 0;
  double optimizerUs = 0;  // the optimizer step of this parameter
  /// Expert parallelism (plan::expertParallelSync): > 1 for an expert tensor
  /// whose experts spread over this many ranks; `elements` and `bytes` are
  /// then one rank's experts.
  int64_t expertParallel = 1;
  /// The position in which backward produces it, where Problem::gradients is
  /// not in that order (expertParallelSync); -1: its index.
  int64_t readyOrder = -1;
};

/// A row-sparse gradient synchronised on its own under its sparse scheme
/// (zen.sparse_all_reduce, zen-plan-sparse), in no bucket.
struct SparseGradientTask {
  std::string name;        // the parameter's name
  /// As GradientTensor::readyAfterSegment.
  int readyAfterSegment = -1;
  double optimizerUs = 0;
  /// The scheme, table and statistics that price it (cost::sparseSyncCost).
  std::shared_ptr<const cost::SparseSync> sync;
};

struct Problem {
  std::vector<ComputeSegment> forward;
  std::vector<ComputeSegment> backward;
  std::vector<GradientTensor> gradients;
  /// Row-sparse gradients, in backward-ready order: each is one collective task
  /// from its ready segment on communication stream 0, after every ready bucket,
  /// and an optimizer step, whatever the PlanChoice.
  std::vector<SparseGradientTask> sparse;
  cost::Group group;       // the data-parallel ranks
  /// The ranks holding the same experts (expert parallelism): what buckets
  /// marked expertReplicas synchronise over.
  cost::Group expertReplicas;
  /// The precision fp32 forward and backward ops were priced at: F32, or
  /// TF32/BF16/F16 for mixed-precision training (AMP). Gradients stay fp32 on
  /// the wire and the optimizer step stays fp32.
  cost::DType computeDtype = cost::DType::F32;

  double totalComputeUs() const;
  double totalGradientBytes() const;
};

/// The optimizer step's cost model (SGD with momentum: read weight, gradient
/// and momentum, write weight and momentum; 3 FLOPs per element). The
/// gradient-sync pass writes these numbers on the optimizer ops it creates.
int64_t optimizerFlops(int64_t elements);
int64_t optimizerBytes(int64_t elements, int64_t elementBytes);

/// How one bucket is communicated.
struct BucketChoice {
  int begin = 0;           // first gradient (index into Problem::gradients)
  int end = 0;             // one past the last gradient
  cost::CompressionSpec compression;  // method None: dense fp32; carries error feedback
  /// The collectives that move the payload; the method must support it
  /// (vocab::supports). ReduceScatterAllGather is DeAR's decomposition: the
  /// all-gather overlaps the next iteration's forward.
  vocab::SyncScheme scheme = vocab::SyncScheme::AllReduce;
  int64_t chunks = 1;
  int stream = 0;          // stream of the all_reduce / reduce_scatter
  int64_t priority = 0;    // lower issues first among ready collectives
  int gatherStream = 0;    // stream of the decoupled all_gather
  int64_t gatherPriority = 0;
  /// Expert gradients only, synchronised over Problem::expertReplicas instead
  /// of the data-parallel group (plan::expertParallelSync).
  bool expertReplicas = false;

  int size() const { return end - begin; }
  /// The scheme ends with an all-gather of the reduced shards.
  bool decomposed() const { return vocab::traitsOf(scheme).gatherAfterReduction; }
};

struct PlanChoice {
  std::string strategy;
  std::vector<BucketChoice> buckets;  // consecutive, covering every gradient, in ready order
  /// Collectives wait until the whole backward pass is done (the nooverlap baseline).
  bool afterBackward = false;
  /// Gradients travel through zen.pack / zen.unpack buckets (false only for the
  /// one-all_reduce-per-gradient form that zen-insert-grad-sync produces).
  bool fused = true;
};

/// The compression traits (zen/Vocabulary.h) planning decides with.
using vocab::wantsErrorFeedback;

/// Checks that `choice` covers the gradients of `problem` with consecutive,
/// non-empty buckets and sane per-bucket settings; returns a message or "".
std::string validateChoice(const Problem &problem, const PlanChoice &choice);

/// Simulator tasks for `choice`: forward and backward segments, per bucket
/// compression, collective(s), decompression and the optimizer step. A
/// bucket's compress/decompress tasks run on its compression device (CPU
/// offload: the simulator's host compression worker).
/// Every task carries its phase and bucket; names (for traces and reports only):
/// "fwd.<node>", "bwd.<node>", "compress.b<N>", "all_reduce.b<N>",
/// "reduce_scatter.b<N>", "all_gather.b<N>", "decompress.b<N>", "optimizer.b<N>",
/// and per sparse gradient (bucket -1) "sparse_all_reduce.<param>", "optimizer.<param>".
std::vector<cost::SimTask> buildSimTasks(const Problem &problem, const PlanChoice &choice,
                                         const cost::CostModel &model);

struct Evaluation {
  cost::SimResult sim;  // sim.error set: the plan cannot be simulated (iterationUs is infinite)
  double iterationUs = 0;
  double computeUs = 0;
  double exposedCommUs = 0;
};
/// `cache`, when given, prices the collectives (a search scoring many variants of a plan).
Evaluation evaluate(const Problem &problem, const PlanChoice &choice, const cost::CostModel &model,
                    cost::CollectiveCostCache *cache = nullptr);
/// evaluate() of the tasks buildSimTasks made for a choice: a caller that has
/// them scores the choice without building them again.
Evaluation evaluateTasks(const std::vector<cost::SimTask> &tasks, const cost::CostModel &model,
                         cost::CollectiveCostCache *cache = nullptr);

/// The larger of the problem's total compute and CostModel::communicationBoundUs of its
/// bucketed gradient bytes plus its row-sparse tables' network time under their schemes
/// over its data-parallel group problem.group: no plan using at most the
/// `compressors` is predicted faster.
double lowerBoundUs(const Problem &problem, const cost::CostModel &model,
                    const std::vector<cost::CompressionSpec> &compressors = {});

/// A compute precision: "fp32", "tf32", "bf16" or "fp16"; nullopt otherwise.
std::optional<cost::DType> parseComputeDtype(const std::string &name);

/// Parses a comma-separated compressor list in cost::parseCompressionSpec's
/// spelling ("fp16", "topk:0.01", "powersgd:4", optionally "@gpu"/"@cpu");
/// "" or "none" = none allowed. On error returns nullopt and sets `error`.
std::optional<std::vector<cost::CompressionSpec>> parseCompressors(const std::string &text,
                                                                    std::string &error);
/// "topk:0.01" style spelling of a spec (the inverse of parseCompressors): with
/// "@gpu"/"@cpu" when the spec fixes its device.
std::string compressorName(const cost::CompressionSpec &spec);
/// Where a planner may run an allowed compressor: its own device when the
/// spelling fixed one, otherwise on the GPU and offloaded to the CPU.
std::vector<cost::CompressionSpec> placements(const cost::CompressionSpec &allowed);

/// The baseline strategies, in report order.
const std::vector<std::string> &baselineNames();  // nooverlap wfbp ddp horovod mgwfbp

struct BaselineOptions {
  /// Applied to every bucket when set, as DDP's communication hooks do.
  std::optional<cost::CompressionSpec> compression;
  /// Bucket sizes in tensors, in ready order, for "manual".
  std::vector<int64_t> manualBuckets;
  /// Fusion threshold in bytes for "threshold".
  int64_t thresholdBytes = 25ll << 20;
  /// Horovod's cycle time and fusion threshold (HOROVOD_CYCLE_TIME,
  /// HOROVOD_FUSION_THRESHOLD): 1 ms and 128 MiB since v0.21.0, 5 ms and 64 MiB before.
  /// A threshold of 0 disables fusion, as in Horovod.
  double horovodCycleUs = 1000;
  int64_t horovodFusionBytes = 128ll << 20;
};

/// Why `options` cannot plan a baseline (a non-positive cycle time, a negative
/// fusion threshold, a threshold below one byte); "" when they can.
std::string checkBaselineOptions(const BaselineOptions &options);

/// The plan of a named strategy: nooverlap, wfbp, ddp, horovod, mgwfbp,
/// threshold or manual (the rules, and the sources they follow, are documented
/// at the definition). Returns a message in `error` for an unknown name, a
/// manual bucket list that does not cover the gradients, or options that
/// checkBaselineOptions refuses.
std::optional<PlanChoice> baselineChoice(const std::string &name, const Problem &problem,
                                         const cost::CostModel &model,
                                         const BaselineOptions &options, std::string &error);

/// A baseline as reported next to auto: its plan and the simulator's score.
struct BaselineResult {
  PlanChoice choice;
  Evaluation evaluation;
};

/// The named baseline as reported with the `allowed` compressors: uncompressed
/// when none is allowed; otherwise each allowed compressor in turn (on its
/// spelled device, the GPU by default) applied to every bucket, as DDP's
/// communication hooks do, keeping the fastest (the earlier on ties), so a
/// baseline is never judged by a compressor that does not suit the model.
/// Replaces options.compression; runs one evaluation per allowed compressor
/// (one when none is). `candidates`, when given, receives every plan it
/// scored, in `allowed` order. Errors as baselineChoice. `cache` as for evaluate.
std::optional<BaselineResult> bestBaseline(const std::string &name, const Problem &problem,
                                           const cost::CostModel &model,
                                           const BaselineOptions &options,
                                           const std::vector<cost::CompressionSpec> &allowed,
                                           std::string &error,
                                           std::vector<BaselineResult> *candidates = nullptr,
                                           cost::CollectiveCostCache *cache = nullptr);

/// Sets chunks to the cost model's fastest chunk count for each bucket (prices from `cache`
/// when given: the same numbers).
void chooseChunks(const Problem &problem, PlanChoice &choice, const cost::CostModel &model,
                  cost::CollectiveCostCache *cache = nullptr);
/// Assigns issue priorities and streams: collectives in ready order on stream
/// 0; with `streams` > 1 the decoupled all-gathers go to stream 1, in the order
/// the next forward needs them.
void assignSchedule(PlanChoice &choice, int streams);

struct AutotuneOptions {
  std::vector<cost::CompressionSpec> compressors;  // allowed set (may be empty)
  BaselineOptions baseline;                         // for the baseline seeds
  bool allowDecomposition = true;
  /// Bound on each local search's work, in simulated tasks: this plus 100 per
  /// gradient tensor, so the search stays linear in the problem size. Every
  /// family of compression options searches within its own bound; searches
  /// normally end well before it (on a sweep that gains too little).
  double localSearchWork = 2e6;
};

struct AutotuneResult {
  PlanChoice best;
  Evaluation bestEval;
  /// Every baseline's iteration time: bestBaseline's, or uncompressed when that is faster
  /// (a baseline's user can always switch compression off).
  std::map<std::string, double> baselineUs;
  /// With compressors allowed: every baseline's iteration time uncompressed; else empty.
  std::map<std::string, double> baselineUncompressedUs;
  double lowerBoundUs = 0;  // lowerBoundUs with options.compressors
  int64_t evaluations = 0;  // simulations run (full problem or condensed)
};

/// Searches bucketing, compression, chunks, decomposition and schedule jointly
/// with the simulator as the objective. The reported baselines (bestBaseline
/// with options.compressors) and their uncompressed versions are seeds, so the
/// result is never worse than any of them. Allowing more compressors never
/// gives a worse plan than allowing one of them or none, at any size.
/// Linear in the number of gradient tensors.
AutotuneResult autotune(const Problem &problem, const cost::CostModel &model,
                        const AutotuneOptions &options);

/// A deterministic synthetic problem of `tensors` gradients for tests and
/// benchmarks: log-uniform tensor sizes (256 to 4M elements, 4 bytes each),
/// backward/forward compute proportional to each tensor's size at a
/// seed-chosen token count, one segment per gradient. Same seed, same problem.
Problem syntheticProblem(int tensors, uint64_t seed, const cost::CostModel &model,
                         cost::Group group);

} // namespace zen::plan

#endif // ZEN_PLANNER_PLANNING_H

//===- Serving.h - planning inference serving ------------------*- C++ -*-===//
//
// `zenopt --serve` (docs/design.md "Inference serving"): the tp and pp of prefill and of
// decode, colocated on one instance or disaggregated over two (DistServe), the batch that
// meets the latency targets under the KV cache's memory, and each all-reduce's kernel;
// with the vLLM-default and NCCL-only baselines. Priced by zen/CostModel/Serving.h.
//
//===----------------------------------------------------------------------===//
#ifndef ZEN_PLANNER_SERVING_H
#define ZEN_PLANNER_SERVING_H

#include "zen/CostModel/Serving.h"

#include <map>
#include <optional>
#include <string>

namespace zen::plan {

/// vLLM's batch limit (max_num_seqs' default).
constexpr int64_t kMaxServingBatch = 256;

struct ServingRequest {
  cost::ServingWorkload workload;
  std::optional<int64_t> tp, pp;  // forced for prefill and decode alike (colocated)
  /// --max-batch: requests decoded together at most (vLLM's max_num_seqs); default
  /// kMaxServingBatch.
  std::optional<int64_t> maxBatch;
  /// --colocated: prefill and decode on the same instance (what zenopt-serve executes).
  bool colocatedOnly = false;
};

/// One way to serve: an instance running both phases (colocated), or a prefill instance
/// handing each request's KV cache to a decode instance (disaggregated).
struct ServingCandidate {
  cost::ServingParallel prefill, decode;
  bool disaggregated = false;
  cost::AllReducePolicy policy = cost::AllReducePolicy::Best;
  int64_t batch = 0;           // requests decoded together, at most
  cost::KvCachePlan kv;        // the decode instance's cache
  cost::PhaseTime prefillPhase, decodePhase;
  double kvTransferUs = 0;     // disaggregated: a prompt's cache to the decode instance
  double ttftUs = 0;           // prefill (and the hand-off)
  /// A decode step, plus, colocated, the prefills that interrupt the decoding: a batch of
  /// `batch` requests admits batch / output_tokens new ones a step on average.
  double tpotUs = 0;
  double tokensPerSPerGpu = 0;
  bool meetsTargets = false;
  int64_t gpus() const { return disaggregated ? prefill.gpus() + decode.gpus() : decode.gpus(); }
};

struct ServingDecision {
  ServingCandidate chosen;
  /// "vllm-default", "nccl-only"; with why not where one cannot run.
  std::map<std::string, ServingCandidate> baselines;
  std::map<std::string, std::string> baselinesNotRunning;
  std::map<std::string, std::string> baselineRules;
  int64_t configurationsScored = 0;
};

/// Prices `parallel` (both phases on it) under `policy` at the largest batch that meets the
/// targets and fits (at most `maxBatch`); batch 0 when none fits, else the candidate
/// at batch 1 with meetsTargets false when even that misses.
ServingCandidate priceColocated(const cost::TransformerShape &shape, const cost::CostModel &model,
                                const cost::ServingWorkload &workload,
                                const cost::ServingParallel &parallel, cost::AllReducePolicy policy,
                                int64_t maxBatch = kMaxServingBatch);

/// The search: every valid colocated tp x pp (tp within a node) and every disaggregated pair
/// that fits the cluster; the most tokens per second per GPU among those meeting the
/// targets (ties: lower TPOT, fewer GPUs), else the lowest TPOT. Throws zen::Error(BadInput)
/// when no configuration fits in memory, (BadUsage) for a forced tp/pp that cannot run.
ServingDecision planServing(const cost::TransformerShape &shape, const cost::CostModel &model,
                            const ServingRequest &request);

} // namespace zen::plan

#endif // ZEN_PLANNER_SERVING_H

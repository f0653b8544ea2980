//===- Serving.cpp - planning inference serving ---------------------------===//
//
// The serving search (zen/Planner/Serving.h): every instance shape priced by the serving
// cost model, each at the largest batch that meets the targets.
//
//===----------------------------------------------------------------------===//
#include "zen/Planner/Serving.h"

#include "zen/Errors.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace zen::plan {
namespace {

using cost::AllReducePolicy;
using cost::PhaseTime;
using cost::ServingParallel;
using cost::ServingWorkload;

/// The average cache a decoding request holds: its prompt and half its output.
double meanContext(const ServingWorkload &workload) {
  return double(workload.promptTokens) + double(workload.outputTokens) / 2.0;
}

bool meets(double us, double targetUs) { return targetUs <= 0 || us <= targetUs; }

/// Every instance shape the search tries: tp a power of two within a node, pp a power of two
/// up to the blocks, both valid for the model and the cluster, in a fixed order.
std::vector<ServingParallel> instanceShapes(const cost::TransformerShape &shape, const cost::Cluster &cluster) {
  std::vector<ServingParallel> shapes;
  for (int64_t pp = 1; pp <= std::min<int64_t>(shape.layers, cluster.worldSize()); pp *= 2)
    for (int64_t tp = 1; tp <= cluster.gpusPerNode; tp *= 2)
      if (cost::checkServingParallel(shape, {tp, pp}, cluster).empty())
        shapes.push_back({tp, pp});
  return shapes;
}

/// Prices a colocated or disaggregated candidate at batch `batch`.
void priceAt(cost::ServingWorkload const &workload, ServingCandidate &c, int64_t batch,
             const cost::TransformerShape &shape, const cost::CostModel &model) {
  c.batch = batch;
  c.decodePhase = cost::decodeStepTime(shape, c.decode, batch, meanContext(workload), workload, model,
                                       c.policy);
  const double prefillUs = c.prefillPhase.totalUs();
  const double stepUs = c.decodePhase.totalUs();
  const double output = double(workload.outputTokens);
  c.ttftUs = prefillUs + c.kvTransferUs;
  // GPU-microseconds one request takes: its prefill and its share of the decode steps.
  double gpuUsPerRequest;
  if (c.disaggregated) {
    c.tpotUs = stepUs;
    gpuUsPerRequest = double(c.prefill.gpus()) * prefillUs +
                      double(c.decode.gpus()) * stepUs * output / double(batch);
  } else {
    c.tpotUs = stepUs + double(batch) * prefillUs / output;
    gpuUsPerRequest = double(c.decode.gpus()) * c.tpotUs * output / double(batch);
  }
  c.tokensPerSPerGpu = output * 1e6 / gpuUsPerRequest;
  c.meetsTargets = meets(c.ttftUs, workload.ttftTargetUs) && meets(c.tpotUs, workload.tpotTargetUs);
}

/// The largest batch within memory and `maxBatch` meeting the TPOT target (a step's
/// time grows with the batch), or batch 1 marked as missing; batch 0 when nothing fits.
ServingCandidate atBestBatch(ServingCandidate c, const ServingWorkload &workload, int64_t maxBatch,
                             const cost::TransformerShape &shape, const cost::CostModel &model) {
  const int64_t most = std::min(maxBatch, c.kv.maxBatchByMemory);
  if (most < 1) {
    c.batch = 0;
    return c;
  }
  priceAt(workload, c, 1, shape, model);
  if (!c.meetsTargets)
    return c;
  int64_t low = 1, high = most;  // low meets the targets
  while (low < high) {
    const int64_t mid = low + (high - low + 1) / 2;
    ServingCandidate probe = c;
    priceAt(workload, probe, mid, shape, model);
    if (probe.meetsTargets)
      low = mid;
    else
      high = mid - 1;
  }
  priceAt(workload, c, low, shape, model);
  return c;
}

/// Better: meets the targets where the other does not; then more tokens per second per GPU,
/// lower TPOT, fewer GPUs; among candidates missing the targets, the lower TPOT.
bool better(const ServingCandidate &a, const ServingCandidate &b) {
  if (b.batch == 0)
    return a.batch > 0;
  if (a.batch == 0)
    return false;
  if (a.meetsTargets != b.meetsTargets)
    return a.meetsTargets;
  if (!a.meetsTargets)
    return a.tpotUs < b.tpotUs;
  if (a.tokensPerSPerGpu != b.tokensPerSPerGpu)
    return a.tokensPerSPerGpu > b.tokensPerSPerGpu;
  if (a.tpotUs != b.tpotUs)
    return a.tpotUs < b.tpotUs;
  return a.gpus() < b.gpus();
}

/// A prompt's KV cache (every block, every key/value head) from the prefill instance to the
/// decode one: over NVLink when both fit one node, else the network.
double kvTransferUs(const cost::TransformerShape &shape, const ServingParallel &prefill,
                    const ServingParallel &decode, const ServingWorkload &workload,
                    const cost::CostModel &model) {
  const double headDim = double(shape.hidden) / double(shape.heads);
  const double bytes = double(workload.promptTokens) * double(shape.layers) * 2.0 *
                       double(shape.keyValueHeads()) * headDim * workload.kvElementBytes;
  const bool oneNode = prefill.gpus() + decode.gpus() <= model.cluster().gpusPerNode;
  // Each prefill rank sends its share of the heads: tp pairs of ranks at once.
  const int64_t pairs = std::max<int64_t>(1, std::min(prefill.tp, decode.tp));
  return model.collective(cost::CollectiveKind::SendRecv, bytes / double(pairs),
                          cost::Group{2, oneNode ? 1 : 2})
      .timeUs;
}

} // namespace

ServingCandidate priceColocated(const cost::TransformerShape &shape, const cost::CostModel &model,
                                const ServingWorkload &workload, const ServingParallel &parallel,
                                AllReducePolicy policy, int64_t maxBatch) {
  ServingCandidate c;
  c.prefill = c.decode = parallel;
  c.policy = policy;
  c.kv = cost::kvCachePlan(shape, parallel, workload, model);
  c.prefillPhase = cost::prefillTime(shape, parallel, workload, model, policy);
  return atBestBatch(c, workload, maxBatch, shape, model);
}

ServingDecision planServing(const cost::TransformerShape &shape, const cost::CostModel &model,
                            const ServingRequest &request) {
  const cost::Cluster &cluster = model.cluster();
  const ServingWorkload &workload = request.workload;
  const int64_t maxBatch = request.maxBatch.value_or(kMaxServingBatch);
  std::vector<ServingParallel> shapes;
  if (request.tp || request.pp) {
    std::vector<ServingParallel> all = instanceShapes(shape, cluster);
    ServingParallel forced{request.tp.value_or(1), request.pp.value_or(1)};
    std::string why = cost::checkServingParallel(shape, forced, cluster);
    if (!why.empty())
      throw Error(ErrorKind::BadUsage, "--serve: " + why);
    // The one left out keeps being searched.
    for (const ServingParallel &s : all)
      if ((!request.tp || s.tp == *request.tp) && (!request.pp || s.pp == *request.pp))
        shapes.push_back(s);
    if (shapes.empty())
      shapes.push_back(forced);
  } else {
    shapes = instanceShapes(shape, cluster);
  }

  ServingDecision decision;
  std::vector<ServingCandidate> colocated;
  for (const ServingParallel &s : shapes) {
    colocated.push_back(priceColocated(shape, model, workload, s, AllReducePolicy::Best, maxBatch));
    ++decision.configurationsScored;
    if (better(colocated.back(), decision.chosen))
      decision.chosen = colocated.back();
  }
  // Disaggregated (DistServe): a prefill instance and a decode instance of any two shapes
  // that fit the cluster together; not when tp/pp are forced (they name one instance) or
  // --colocated is asked for.
  if (!request.tp && !request.pp && !request.colocatedOnly) {
    for (const ServingCandidate &p : colocated) {
      if (p.kv.kvBlocks < p.kv.blocksPerRequest)
        continue;  // the prefill instance cannot hold one prompt's cache
      for (const ServingCandidate &d : colocated) {
        if (p.prefill.gpus() + d.decode.gpus() > cluster.worldSize())
          continue;
        ServingCandidate c = d;
        c.disaggregated = true;
        c.prefill = p.prefill;
        c.prefillPhase = p.prefillPhase;
        c.kvTransferUs = kvTransferUs(shape, p.prefill, d.decode, workload, model);
        c = atBestBatch(c, workload, maxBatch, shape, model);
        ++decision.configurationsScored;
        if (better(c, decision.chosen))
          decision.chosen = c;
      }
    }
  }
  if (decision.chosen.batch == 0)
    throw Error(ErrorKind::BadInput,
                "--serve: no tp x pp instance holds the weights and one request's KV cache (" +
                    std::to_string(workload.promptTokens + workload.outputTokens) +
                    " tokens) in the GPUs' memory");

  // vLLM's documented default: tp = the GPUs of a node, pipeline stages over nodes only
  // when the model does not fit one (docs.vllm.ai, "Distributed inference and serving").
  int64_t vllmTp = 1;
  for (int64_t tp = cluster.gpusPerNode; tp >= 1; --tp)
    if (cost::checkServingParallel(shape, {tp, 1}, cluster).empty()) {
      vllmTp = tp;
      break;
    }
  decision.baselineRules["vllm-default"] =
      "vLLM's guidance: tensor parallel over the GPUs of a node, pipeline stages over nodes "
      "only when the model does not fit one; its custom all-reduce below 8 MiB on 2-8 NVLink "
      "GPUs, NCCL above";
  for (int64_t pp = 1; pp <= std::min<int64_t>(shape.layers, cluster.worldSize()); pp *= 2) {
    if (!cost::checkServingParallel(shape, {vllmTp, pp}, cluster).empty())
      continue;
    ServingCandidate c = priceColocated(shape, model, workload, {vllmTp, pp}, AllReducePolicy::Vllm, maxBatch);
    if (c.batch > 0) {
      decision.baselines["vllm-default"] = c;
      break;
    }
  }
  if (!decision.baselines.count("vllm-default"))
    decision.baselinesNotRunning["vllm-default"] =
        "tp " + std::to_string(vllmTp) + " with any pipeline depth does not hold the weights and one request's cache";

  decision.baselineRules["nccl-only"] = "the chosen configuration with NCCL for every all-reduce";
  ServingCandidate nccl = decision.chosen;
  nccl.policy = AllReducePolicy::NcclOnly;
  nccl.prefillPhase = cost::prefillTime(shape, nccl.prefill, workload, model, nccl.policy);
  decision.baselines["nccl-only"] = atBestBatch(nccl, workload, maxBatch, shape, model);
  return decision;
}

} // namespace zen::plan

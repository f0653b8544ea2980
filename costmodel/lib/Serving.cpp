//===- Serving.cpp - inference serving costs ------------------------------===//
//
// Prefill and decode of a decoder on one tp x pp instance, its all-reduces by the kernel
// each size runs best on, and its KV cache (docs/design.md "Inference serving").
//
//===----------------------------------------------------------------------===//
#include "zen/CostModel/Serving.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace zen::cost {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();
/// vLLM's custom all-reduce buffer (max_size, 8 MiB): larger messages go to NCCL.
constexpr double kPeerMemoryMaxBytes = 8.0 * 1024 * 1024;

double elementBytes(DType dtype) {
  switch (dtype) {
  case DType::BF16:
  case DType::F16:
    return 2;
  case DType::I8:
    return 1;
  default:
    return 4;
  }
}

/// Key/value heads one tensor-parallel rank holds: its share, or one replicated head when
/// there are fewer key/value heads than ranks (Megatron and vLLM replicate them).
int64_t kvHeadsPerRank(const TransformerShape &shape, int64_t tp) {
  return std::max<int64_t>(1, shape.keyValueHeads() / tp);
}

int64_t blocksPerStage(const TransformerShape &shape, const ServingParallel &parallel) {
  return (shape.layers + parallel.pp - 1) / parallel.pp;
}

/// Peer-memory kernels need every rank on one node, joined by NVLink.
bool peerMemory(const CostModel &model, int64_t tp) {
  const Cluster &cluster = model.cluster();
  return tp > 1 && tp <= cluster.gpusPerNode && cluster.intraNode.kind == "nvlink";
}

/// One-shot: each rank reads the (tp - 1) peers' buffers over its NVLink ports, between a
/// barrier that their inputs are ready and one that every peer has read its own; two-shot
/// reads (tp - 1) / tp of the buffer for its reduce-scatter and as much for its all-gather,
/// with a third barrier between. A barrier is one NVLink hop (a flag written to a peer's
/// memory and seen there): the link's latency.
double peerAllReduceUs(const CostModel &model, double bytes, int64_t tp, int barriers,
                       double bufferFraction) {
  const LinkSpec &link = model.cluster().intraNode;
  const double bytesPerUs = link.bandwidthGBps * link.efficiency * 1e3;
  return barriers * link.latencyUs + double(tp - 1) * bytes * bufferFraction / bytesPerUs;
}

/// vLLM's choice of kernel (Serving.h, AllReducePolicy::Vllm).
AllReduceKernel vllmKernel(double bytes, int64_t tp, bool peer) {
  const bool supported = tp == 2 || tp == 4 || tp == 6 || tp == 8;
  if (!peer || !supported || bytes >= kPeerMemoryMaxBytes)
    return AllReduceKernel::Nccl;
  if (tp == 2 || (tp <= 4 && bytes < 512.0 * 1024) || bytes < 256.0 * 1024)
    return AllReduceKernel::OneShot;
  return AllReduceKernel::TwoShot;
}

/// A weight GEMM of `rows` tokens. Prefill's (a prompt's tokens) are priced by gemmUs, tiles
/// and waves; decode's few rows (the batch) run cuBLAS's split-K and GEMV kernels, which
/// spread the weight over every SM, so the roofline alone prices them: at small batch the
/// weight read through HBM. By phase, not by a row threshold, so that a step's time has no
/// cliff as the batch grows.
enum class InferencePhase { Prefill, Decode };
double weightGemmUs(const CostModel &model, InferencePhase phase, double rows, double n, double k, double batch,
                    DType dtype) {
  if (phase == InferencePhase::Prefill)
    return gemmUs(model, rows, n, k, batch, dtype);
  return model.computeUs(2.0 * rows * n * k * batch, elementBytes(dtype) * batch * (rows * k + k * n + rows * n),
                         dtype);
}

/// Per-rank GEMM shapes of one block's attention: [rows x k] x [k x n] for the QKV projection
/// and the output projection.
struct AttentionGemms {
  double qkvN, qkvK, outN, outK;
};
AttentionGemms attentionGemms(const TransformerShape &shape, int64_t tp) {
  const double headDim = double(shape.hidden) / double(shape.heads);
  const double queryWidth = double(shape.heads / tp) * headDim;
  const double kvWidth = 2.0 * double(kvHeadsPerRank(shape, tp)) * headDim;
  return {queryWidth + kvWidth, double(shape.hidden), double(shape.hidden), queryWidth};
}

/// The share of blocks whose MLP is a Mixture of Experts.
double moeFraction(const TransformerShape &shape) {
  return shape.layers > 0 ? double(shape.moeBlocks()) / double(shape.layers) : 0.0;
}

/// One block's MLP on `rows` tokens, its weights split over tp (an MoE layer's experts each
/// split over tp, as vLLM serves Mixtral): a dense block's up (and gate) and down GEMMs; an
/// MoE block's experts that its tokens reach, top_k each, expected
/// experts x (1 - (1 - top_k / experts)^rows) of them, each reading its own weights. The
/// mean over the model's dense and MoE blocks.
double mlpUs(const TransformerShape &shape, int64_t tp, InferencePhase phase, double rows, DType dtype,
             const CostModel &model) {
  const double hidden = double(shape.hidden);
  double dense = 0, moe = 0;
  const double moeShare = moeFraction(shape);
  if (moeShare < 1) {
    const double ffnShard = double(shape.ffn) / double(tp);
    dense = weightGemmUs(model, phase, rows, (shape.gatedMlp() ? 2.0 : 1.0) * ffnShard, hidden, 1, dtype) +
            weightGemmUs(model, phase, rows, hidden, ffnShard, 1, dtype);
  }
  if (shape.moe) {
    const MoeShape &layer = shape.moe->layer;
    const double experts = double(layer.experts), topK = double(layer.topK);
    const double reached = experts * (1.0 - std::pow(1.0 - topK / experts, rows));
    const double perExpert = rows * topK / std::max(reached, 1.0);
    const double router = weightGemmUs(model, phase, rows, experts, hidden, 1, dtype);
    moe = router + weightGemmUs(model, phase, perExpert, double(layer.firstGemmRows()) / double(tp), hidden, reached, dtype) +
          weightGemmUs(model, phase, perExpert, hidden, double(layer.ffn) / double(tp), reached, dtype);
  }
  return (1 - moeShare) * dense + moeShare * moe;
}

/// Parameters of one block, the mean over dense and MoE blocks.
double meanBlockParams(const TransformerShape &shape) {
  const double moeShare = moeFraction(shape);
  double params = (1 - moeShare) * shape.layerParams;
  if (shape.moe)
    params += moeShare * (shape.moe->blockParams + shape.moe->expertParams);
  return params;
}

/// A region's GEMMs and all-reduce of `bytes` split into `chunks` pipelined pieces.
double regionUs(const CostModel &model, double computeUs, double bytes, int64_t tp, int64_t chunks,
                AllReducePolicy policy) {
  if (tp <= 1)
    return computeUs;
  const double chunkComm = tensorParallelAllReduce(model, bytes / chunks, tp, policy).us;
  return chunkPipelineUs(computeUs / chunks, chunkComm, chunks, model.cluster().overlapSlowdown);
}

/// Sending `bytes` of activations from one stage to the next.
double stageHandOffUs(const CostModel &model, const ServingParallel &parallel, double bytes) {
  if (parallel.pp <= 1)
    return 0;
  const bool crossesNodes = parallel.gpus() > model.cluster().gpusPerNode;
  return model.collective(CollectiveKind::SendRecv, bytes, Group{2, crossesNodes ? 2 : 1}).timeUs;
}

} // namespace

std::optional<double> kvElementBytes(const std::string &spelling) {
  if (spelling == "fp32")
    return 4;
  if (spelling == "bf16" || spelling == "fp16")
    return 2;
  if (spelling == "fp8" || spelling == "int8")
    return 1;
  return std::nullopt;
}

const char *toString(AllReduceKernel kernel) {
  switch (kernel) {
  case AllReduceKernel::Nccl:
    return "nccl";
  case AllReduceKernel::OneShot:
    return "one-shot";
  case AllReduceKernel::TwoShot:
    return "two-shot";
  }
  return "nccl";
}

AllReduceChoice tensorParallelAllReduce(const CostModel &model, double bytes, int64_t tp,
                                        AllReducePolicy policy) {
  AllReduceChoice choice;
  choice.bytes = bytes;
  if (tp <= 1 || bytes <= 0)
    return choice;
  const CollectiveCost nccl = model.collective(CollectiveKind::AllReduce, bytes, model.groupOf(tp));
  choice.ncclUs = nccl.timeUs;
  choice.ncclAlgorithm = toString(nccl.algorithm);
  choice.ncclProtocol = toString(nccl.protocol);
  const bool peer = peerMemory(model, tp) && bytes < kPeerMemoryMaxBytes;
  choice.oneShotUs = peer ? peerAllReduceUs(model, bytes, tp, 2, 1.0) : kInfinity;
  choice.twoShotUs = peer ? peerAllReduceUs(model, bytes, tp, 3, 2.0 / double(tp)) : kInfinity;
  switch (policy) {
  case AllReducePolicy::NcclOnly:
    choice.kernel = AllReduceKernel::Nccl;
    break;
  case AllReducePolicy::Vllm:
    choice.kernel = vllmKernel(bytes, tp, peerMemory(model, tp));
    break;
  case AllReducePolicy::Best:
    choice.kernel = AllReduceKernel::Nccl;
    if (choice.oneShotUs < choice.ncclUs && choice.oneShotUs <= choice.twoShotUs)
      choice.kernel = AllReduceKernel::OneShot;
    else if (choice.twoShotUs < choice.ncclUs)
      choice.kernel = AllReduceKernel::TwoShot;
    break;
  }
  choice.us = choice.kernel == AllReduceKernel::Nccl      ? choice.ncclUs
              : choice.kernel == AllReduceKernel::OneShot ? choice.oneShotUs
                                                          : choice.twoShotUs;
  return choice;
}

std::string checkServingParallel(const TransformerShape &shape, const ServingParallel &parallel,
                                 const Cluster &cluster) {
  const int64_t tp = parallel.tp, pp = parallel.pp;
  if (tp < 1 || pp < 1)
    return "tp and pp must be at least 1";
  if (shape.heads % tp != 0)
    return "tp " + std::to_string(tp) + " does not divide the " + std::to_string(shape.heads) + " heads";
  const int64_t kv = shape.keyValueHeads();
  if (kv % tp != 0 && tp % kv != 0)
    return "tp " + std::to_string(tp) + " neither divides the " + std::to_string(kv) +
           " key/value heads nor is a multiple of them";
  if (shape.ffn % tp != 0)
    return "tp " + std::to_string(tp) + " does not divide the ffn " + std::to_string(shape.ffn);
  if (shape.moe && shape.moe->layer.ffn % tp != 0)
    return "tp " + std::to_string(tp) + " does not divide the experts' ffn " +
           std::to_string(shape.moe->layer.ffn);
  if (tp > cluster.gpusPerNode)
    return "tp " + std::to_string(tp) + " spans more than a node's " +
           std::to_string(cluster.gpusPerNode) + " GPUs";
  if (pp > shape.layers)
    return "pp " + std::to_string(pp) + " exceeds the " + std::to_string(shape.layers) + " blocks";
  if (tp * pp > cluster.worldSize())
    return "tp x pp " + std::to_string(tp * pp) + " exceeds the cluster's " +
           std::to_string(cluster.worldSize()) + " GPUs";
  return "";
}

PhaseTime prefillTime(const TransformerShape &shape, const ServingParallel &parallel,
                      const ServingWorkload &workload, const CostModel &model, AllReducePolicy policy) {
  const int64_t tp = parallel.tp;
  const double tokens = double(workload.promptTokens);
  const DType dtype = workload.weightDtype;
  const double actBytes = elementBytes(dtype);
  const AttentionGemms g = attentionGemms(shape, tp);
  // Causal FlashAttention: half of the tokens x tokens scores, QK^T and PV, the rank's heads.
  const double attentionFlops = 2.0 * tokens * tokens * double(shape.hidden) / double(tp);
  const double attentionBytes = 4.0 * tokens * g.qkvN * actBytes;
  const double attentionRegion = weightGemmUs(model, InferencePhase::Prefill, tokens, g.qkvN, g.qkvK, 1, dtype) +
                                 model.computeUs(attentionFlops, attentionBytes, dtype) +
                                 weightGemmUs(model, InferencePhase::Prefill, tokens, g.outN, g.outK, 1, dtype);
  const double mlpRegion = mlpUs(shape, tp, InferencePhase::Prefill, tokens, dtype, model);
  const double allReduceBytes = tokens * double(shape.hidden) * actBytes;

  PhaseTime time;
  time.allReduce = tensorParallelAllReduce(model, allReduceBytes, tp, policy);
  double bestBlockUs = kInfinity;
  for (int64_t chunks : {1, 2, 4, 8}) {
    if (workload.promptTokens % chunks != 0 || (chunks > 1 && tp <= 1))
      continue;
    const double blockUs = regionUs(model, attentionRegion, allReduceBytes, tp, chunks, policy) +
                           regionUs(model, mlpRegion, allReduceBytes, tp, chunks, policy);
    if (blockUs < bestBlockUs) {
      bestBlockUs = blockUs;
      time.chunks = chunks;
    }
  }
  const double blockComputeUs = attentionRegion + mlpRegion;
  // Only the last position's logits are needed to sample the first token.
  const double headUs = weightGemmUs(model, InferencePhase::Prefill, 1, double(shape.vocab) / double(tp), double(shape.hidden), 1, dtype);
  const double blocks = double(shape.layers);  // a request passes every stage's blocks in turn
  time.computeUs = blocks * blockComputeUs + headUs;
  time.allReduceUs = blocks * (bestBlockUs - blockComputeUs);
  time.p2pUs = double(parallel.pp - 1) * stageHandOffUs(model, parallel, allReduceBytes);
  return time;
}

PhaseTime decodeStepTime(const TransformerShape &shape, const ServingParallel &parallel,
                         int64_t batch, double contextTokens, const ServingWorkload &workload,
                         const CostModel &model, AllReducePolicy policy) {
  const int64_t tp = parallel.tp, pp = parallel.pp;
  const DType dtype = workload.weightDtype;
  const double actBytes = elementBytes(dtype);
  // pp groups of requests in flight, one on each stage: a step is pp stage times.
  const double rows = std::max(1.0, std::ceil(double(batch) / double(pp)));
  const AttentionGemms g = attentionGemms(shape, tp);
  const double headDim = double(shape.hidden) / double(shape.heads);
  const double kvBytes = rows * contextTokens * 2.0 * double(kvHeadsPerRank(shape, tp)) * headDim *
                         workload.kvElementBytes;
  const double attentionFlops = 4.0 * rows * contextTokens * double(shape.hidden) / double(tp);
  const double blockComputeUs = weightGemmUs(model, InferencePhase::Decode, rows, g.qkvN, g.qkvK, 1, dtype) +
                                model.computeUs(attentionFlops, kvBytes, dtype) +
                                weightGemmUs(model, InferencePhase::Decode, rows, g.outN, g.outK, 1, dtype) +
                                mlpUs(shape, tp, InferencePhase::Decode, rows, dtype, model);
  const double allReduceBytes = rows * double(shape.hidden) * actBytes;
  const double headUs = weightGemmUs(model, InferencePhase::Decode, rows, double(shape.vocab) / double(tp), double(shape.hidden), 1, dtype);
  double logitsGatherUs = 0;
  if (tp > 1)
    logitsGatherUs = model.collective(CollectiveKind::AllGather, rows * double(shape.vocab) * actBytes,
                                      model.groupOf(tp)).timeUs;

  PhaseTime time;
  time.allReduce = tensorParallelAllReduce(model, allReduceBytes, tp, policy);
  const double stageBlocks = double(blocksPerStage(shape, parallel));
  const double stageComputeUs = stageBlocks * blockComputeUs + headUs;
  const double stageCommUs = stageBlocks * 2.0 * time.allReduce.us + logitsGatherUs;
  time.computeUs = double(pp) * stageComputeUs;
  time.allReduceUs = double(pp) * stageCommUs;
  time.p2pUs = double(pp) * stageHandOffUs(model, parallel, allReduceBytes);
  return time;
}

KvCachePlan kvCachePlan(const TransformerShape &shape, const ServingParallel &parallel,
                        const ServingWorkload &workload, const CostModel &model) {
  const int64_t tp = parallel.tp;
  const double actBytes = elementBytes(workload.weightDtype);
  const double stageBlocks = double(blocksPerStage(shape, parallel));
  KvCachePlan plan;
  ServingMemory &memory = plan.memory;
  memory.capacityBytes = model.cluster().gpu.memoryGB * 1e9;
  // The fullest stage: its blocks with the embedding (first) or the head (last); one stage
  // holds both. Norms and biases are split like their GEMMs (a small overcount).
  const double ends = parallel.pp == 1 ? shape.embeddingParams + shape.headParams
                                       : std::max(shape.embeddingParams, shape.headParams);
  memory.weightsBytes = (stageBlocks * meanBlockParams(shape) + ends) / double(tp) * actBytes;
  // A prefill's largest live tensors inside a block: the residual stream and normed input,
  // the QKV projection and the MLP's gate and up outputs with their product.
  const double tokens = double(workload.promptTokens);
  const AttentionGemms g = attentionGemms(shape, tp);
  const int64_t mlpWidth = shape.moe ? std::max(shape.ffn, shape.moe->layer.ffn * shape.moe->layer.topK)
                                     : shape.ffn;
  const double upWidth = (shape.gatedMlp() ? 2.0 : 1.0) * double(mlpWidth) / double(tp);
  memory.activationsBytes = tokens * (2.0 * double(shape.hidden) + g.qkvN + 1.5 * upWidth) * actBytes;
  memory.buffersBytes = peerMemory(model, tp) ? 2.0 * kPeerMemoryMaxBytes : 0;
  memory.reserveBytes = reserveBytes(memory.capacityBytes, memory.activationsBytes + memory.buffersBytes);
  const double headDim = double(shape.hidden) / double(shape.heads);
  plan.kvBlockBytes = double(kKvBlockTokens) * stageBlocks * 2.0 * double(kvHeadsPerRank(shape, tp)) *
                      headDim * workload.kvElementBytes;
  plan.blocksPerRequest =
      (workload.promptTokens + workload.outputTokens + kKvBlockTokens - 1) / kKvBlockTokens;
  const double left = memory.capacityBytes * kServingMemoryUtilization - memory.weightsBytes -
                      memory.activationsBytes - memory.buffersBytes - memory.reserveBytes;
  if (memory.capacityBytes <= 0) {
    // No capacity given: the cache holds one request for every GPU of the cluster.
    plan.kvBlocks = plan.blocksPerRequest * model.cluster().worldSize();
  } else if (left > 0 && plan.kvBlockBytes > 0) {
    plan.kvBlocks = int64_t(std::floor(left / plan.kvBlockBytes));
  }
  memory.kvCacheBytes = double(plan.kvBlocks) * plan.kvBlockBytes;
  plan.maxBatchByMemory = plan.blocksPerRequest > 0 ? plan.kvBlocks / plan.blocksPerRequest : 0;
  return plan;
}

} // namespace zen::cost

//===- Serving.h - inference serving costs (prefill, decode, KV cache) -*- C++ -*-===//
//
// The price of serving a recognised decoder (docs/design.md "Inference serving"): one
// request's prefill, one decode step of a batch, the tensor-parallel all-reduces of both
// with the kernel each size runs best on, and a GPU's memory with its KV cache. An
// analysis: it prices configurations, the serving planner (zen/Passes/Serving.h) chooses.
//
//===----------------------------------------------------------------------===//
#ifndef ZEN_COSTMODEL_SERVING_H
#define ZEN_COSTMODEL_SERVING_H

#include "zen/CostModel/CostModel.h"
#include "zen/CostModel/Transformer.h"

#include <cstdint>
#include <optional>
#include <string>

namespace zen::cost {

/// What the requests look like and what they must meet.
struct ServingWorkload {
  int64_t promptTokens = 1024;
  int64_t outputTokens = 256;
  DType weightDtype = DType::BF16;  // --precision: weights and activations
  double kvElementBytes = 2;        // --kv-dtype: bytes a cached key or value element takes
  double ttftTargetUs = 0;          // 0: no target
  double tpotTargetUs = 0;          // 0: no target
};

/// Bytes of one KV-cache element under a --kv-dtype spelling (fp32, bf16, fp16, fp8,
/// int8); nullopt for anything else.
std::optional<double> kvElementBytes(const std::string &spelling);

/// How one tensor-parallel all-reduce runs.
///  - nccl: NCCL's own choice of ring or tree and LL, LL128 or Simple (CostModel::collective);
///  - one-shot: every GPU reads each peer's whole buffer over NVLink peer memory and reduces
///    it, between two barriers (vLLM's and TensorRT-LLM's custom all-reduce, small messages);
///  - two-shot: a reduce-scatter then an all-gather through peer memory, three barriers.
enum class AllReduceKernel { Nccl, OneShot, TwoShot };
const char *toString(AllReduceKernel kernel);  // "nccl", "one-shot", "two-shot"

/// Which kernels a deployment may use.
///  - Best: the cheapest of the three for each size (zenopt's choice);
///  - Vllm: vLLM's rules (csrc/custom_all_reduce.cuh, distributed/device_communicators/
///    custom_all_reduce.py, v0.4-0.6): the custom kernels on one node of 2, 4, 6 or 8 GPUs
///    with NVLink, below 8 MiB; one-shot for 2 GPUs, below 512 KiB on up to 4 and below
///    256 KiB on up to 8; two-shot above; NCCL otherwise;
///  - NcclOnly: NCCL for every size.
enum class AllReducePolicy { Best, Vllm, NcclOnly };

struct AllReduceChoice {
  double bytes = 0;
  AllReduceKernel kernel = AllReduceKernel::Nccl;
  double us = 0;  // of the kernel chosen
  /// The three priced side by side (+infinity where a kernel cannot run: peer memory
  /// needs every rank on one node with NVLink).
  double ncclUs = 0, oneShotUs = 0, twoShotUs = 0;
  std::string ncclAlgorithm;  // "ring" or "tree", and the protocol NCCL would pick
  std::string ncclProtocol;
};

/// One all-reduce of `bytes` over `tp` ranks of one node under `policy`.
AllReduceChoice tensorParallelAllReduce(const CostModel &model, double bytes, int64_t tp,
                                        AllReducePolicy policy);

/// Tensor and pipeline parallelism of one serving instance (tp x pp GPUs).
struct ServingParallel {
  int64_t tp = 1, pp = 1;
  int64_t gpus() const { return tp * pp; }
};

/// "" when `parallel` can serve `shape` (tp dividing the heads, the key/value heads or
/// being their multiple, and the ffn; pp dividing the layers; the instance fitting the
/// cluster with tp within one node), else why not.
std::string checkServingParallel(const TransformerShape &shape, const ServingParallel &parallel,
                                 const Cluster &cluster);

/// One phase's time on one instance: the slowest stage's compute and exposed all-reduces
/// over every stage (a token passes all of them in turn), and the pipeline hand-offs.
struct PhaseTime {
  double computeUs = 0;
  double allReduceUs = 0;  // exposed, every block of every stage
  double p2pUs = 0;        // hand-offs between stages
  double totalUs() const { return computeUs + allReduceUs + p2pUs; }
  AllReduceChoice allReduce;  // one block's all-reduce (two a block)
  int64_t chunks = 1;         // prefill: pieces each GEMM and its all-reduce are split into
};

/// Mixture-of-Experts blocks serve with every expert split over the tp ranks (vLLM's
/// default for Mixtral: no all-to-all, the block's all-reduce as a dense one's); a step
/// reads the weights of the experts its tokens reach.
///
/// One request's prefill of workload.promptTokens tokens. With tp > 1 each block's two
/// all-reduces may be split with their GEMMs into chunks whose all-reduce runs while the
/// next chunk computes (Flux, async-TP): the cheapest of 1, 2, 4 and 8 chunks.
PhaseTime prefillTime(const TransformerShape &shape, const ServingParallel &parallel,
                      const ServingWorkload &workload, const CostModel &model, AllReducePolicy policy);

/// One decode step generating a token for each of `batch` requests whose caches hold
/// `contextTokens` tokens each: the weight GEMMs (memory-bound at small batch), attention
/// reading the KV cache, the head; under pp the batch is split over the stages in flight,
/// so a step is pp stage times of batch / pp requests.
PhaseTime decodeStepTime(const TransformerShape &shape, const ServingParallel &parallel,
                         int64_t batch, double contextTokens, const ServingWorkload &workload,
                         const CostModel &model, AllReducePolicy policy);

/// One GPU's memory when serving (the fullest stage's).
struct ServingMemory {
  double weightsBytes = 0;
  double kvCacheBytes = 0;     // what the cache is given: every byte left after the rest
  double activationsBytes = 0; // the prefill's transient activations, the largest phase's
  double buffersBytes = 0;     // peer-memory all-reduce buffers
  double reserveBytes = 0;     // CUDA context, cuBLAS and NCCL (kDeviceRuntimeBytes), fragmentation
  double capacityBytes = 0;
  double usedBytes() const {
    return weightsBytes + kvCacheBytes + activationsBytes + buffersBytes + reserveBytes;
  }
};

/// Paged KV cache (vLLM's PagedAttention): blocks of kKvBlockTokens tokens.
constexpr int64_t kKvBlockTokens = 16;
/// vLLM's gpu_memory_utilization default: the share of a GPU's memory the engine uses.
constexpr double kServingMemoryUtilization = 0.9;

/// The memory of `parallel` with the KV cache taking what is left of
/// kServingMemoryUtilization of the capacity; `kvBlockBytes` is one block's size on a GPU
/// (its stage's layers, its share of the key/value heads).
struct KvCachePlan {
  ServingMemory memory;
  double kvBlockBytes = 0;
  int64_t kvBlocks = 0;            // 0: nothing left for the cache
  int64_t blocksPerRequest = 0;    // ceil((prompt + output) / kKvBlockTokens)
  int64_t maxBatchByMemory = 0;    // kvBlocks / blocksPerRequest
};
KvCachePlan kvCachePlan(const TransformerShape &shape, const ServingParallel &parallel,
                        const ServingWorkload &workload, const CostModel &model);

} // namespace zen::cost

#endif // ZEN_COSTMODEL_SERVING_H

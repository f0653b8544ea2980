//===- Transformer.h - large-model configurations, memory and cost -*- C++ -*-===//
//
// The large-model side of the cost model (docs/design.md "Large models"): a
// transformer's shape as recognised in the IR, a parallel configuration
// (tensor, pipeline and data parallelism, ZeRO, sequence parallelism,
// recomputation, micro-batching, pipeline schedule), the memory one GPU needs
// under it, and the time of one training iteration. Pure C++: no IR.
//
//===----------------------------------------------------------------------===//
#ifndef ZEN_COSTMODEL_TRANSFORMER_H
#define ZEN_COSTMODEL_TRANSFORMER_H

#include "zen/CostModel/CostModel.h"
#include "zen/CostModel/MoeShape.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace zen::cost {

/// The blocks of a transformer whose MLP is a Mixture-of-Experts layer (router
/// GEMM, dispatch, experts, combine: GShard, Switch, Mixtral), all alike.
struct MoeBlocks {
  std::vector<int64_t> blocks;  // their indices among the model's blocks, increasing
  /// One layer as exported: tokens = the model's batch x sequence, the
  /// dispatch buffer's capacity rows as the model fixes them.
  MoeShape layer;
  double blockParams = 0;   // an MoE block's parameters besides its experts (attention, norms, router)
  double expertParams = 0;  // every expert of one layer

  /// MoE blocks among blocks [first, first + count).
  int64_t countIn(int64_t first, int64_t count) const;
  bool contains(int64_t block) const;
};

/// A stack of transformer blocks between an embedding and a head, as
/// the recognition in passes/lib/Analysis/Transformer.cpp reads it from imported IR.
/// Parameter counts are exact (summed from the IR's parameters), the shape
/// fields drive the per-layer FLOP, activation and collective formulas. The
/// dense blocks are alike; with `moe`, its blocks are alike too.
struct TransformerShape {
  std::string family;        // "gpt" (causal decoder), "bert" (encoder) or "encoder-decoder"
  int64_t layers = 0;
  int64_t hidden = 0;
  int64_t heads = 0;
  /// Key/value heads: fewer than `heads` under grouped-query (and 1 under
  /// multi-query) attention, each shared by heads / kvHeads query heads.
  int64_t kvHeads = 0;
  int64_t ffn = 0;           // the MLP's inner width (4 * hidden usually; a gated MLP's gate and up)
  /// "gelu" or "relu": two GEMMs; "swiglu" or "geglu": gate and up GEMMs of
  /// width ffn, their gated product, then the down GEMM (three GEMMs).
  std::string mlp = "gelu";
  std::string norm = "layernorm";  // "layernorm" or "rmsnorm"
  std::string positions = "learned";  // "learned", "rotary" or "none"
  bool tiedEmbeddings = false;  // the output projection reuses the token embedding
  /// Decoder blocks of an encoder-decoder stack: each has a cross-attention
  /// (Q from the block, K/V from the encoder's output) besides its self-attention.
  /// They are the last crossAttentionBlocks blocks (the encoder's run first).
  int64_t crossAttentionBlocks = 0;
  double crossAttentionParams = 0;  // one cross-attention's (its GEMMs and norm)
  int64_t seq = 0;           // tokens per sample
  int64_t vocab = 0;         // 0 when the model has no vocabulary projection
  int64_t modelBatch = 1;    // samples per step the model was exported with
  double layerParams = 0;    // trainable parameters of one dense block (0 when every block is MoE)
  double embeddingParams = 0;  // token + position embeddings (first stage)
  double headParams = 0;     // final norm and output projection (last stage)
  /// Weight GEMMs that the Megatron partitioning does not split, by node name;
  /// they stay replicated on every tensor-parallel rank.
  std::vector<std::string> replicated;
  std::optional<MoeBlocks> moe;

  int64_t moeBlocks() const { return moe ? int64_t(moe->blocks.size()) : 0; }
  bool gatedMlp() const { return mlp == "swiglu" || mlp == "geglu"; }
  int64_t keyValueHeads() const { return kvHeads > 0 ? kvHeads : heads; }
  double totalParams() const {
    double params = (layers - moeBlocks()) * layerParams + embeddingParams + headParams +
                    crossAttentionBlocks * crossAttentionParams;
    if (moe)
      params += moeBlocks() * (moe->blockParams + moe->expertParams);
    return params;
  }
};

using vocab::AttentionKernel;
using vocab::parseAttentionKernel;
using vocab::parseRecompute;
using vocab::parseZero3Regather;
using vocab::Recompute;
using vocab::Zero3Regather;

enum class Optimizer { Adam, SGD };
const char *toString(Optimizer optimizer);  // "adam", "sgd"
std::optional<Optimizer> parseOptimizer(const std::string &text);

/// How finely each block's tensor-parallel GEMMs and the collectives next to
/// them are split along the tokens so that chunk i's collective runs while
/// chunk i + 1's GEMM computes (Flux, PyTorch async-TP): chunks per TP region
/// (attention, MLP) and phase; 1 = not decomposed.
struct Decomposition {
  int64_t attentionForward = 1, attentionBackward = 1;
  int64_t mlpForward = 1, mlpBackward = 1;
  static Decomposition uniform(int64_t chunks) { return {chunks, chunks, chunks, chunks}; }
  bool operator==(const Decomposition &other) const;
};

/// One way to run a training iteration on tp * pp * dp GPUs.
struct ParallelConfig {
  int64_t tp = 1;
  int64_t pp = 1;
  int64_t dp = 1;
  int zero = 0;                  // ZeRO stage over the dp group, 0-3
  bool sequenceParallel = false;
  Recompute recompute = Recompute::None;
  int64_t microBatch = 1;        // samples per micro-batch
  int64_t microBatches = 1;      // per pipeline per iteration: global batch / (dp * microBatch)
  int64_t virtualStages = 1;     // 1: 1F1B; V > 1: interleaved 1F1B with V chunks per stage
  /// Transformer blocks per pipeline stage (pp entries summing to the layers);
  /// empty: as evenly as possible, the first stages taking one more.
  std::vector<int64_t> stageLayers;
  Decomposition decomposition;
  /// MoE blocks: experts over ep ranks of each dp group (ep divides dp), and
  /// how every MoE layer runs (pipelining degrees, all-to-all algorithm).
  int64_t ep = 1;
  MoeLayerChoice experts;
  /// Every expert split over the tp ranks along its ffn (Megatron-Core's
  /// default expert tensor parallelism, ETP = tp); false: whole experts, each
  /// tp rank routing its share of the tokens through them (ETP = 1).
  bool expertTensorParallel = false;

  int64_t gpus() const { return tp * pp * dp; }
  /// "1f1b" or "interleaved:V"
  std::string schedule() const;
  bool operator==(const ParallelConfig &other) const;
};

/// Parses "1f1b" or "interleaved:V" (V >= 2) into the number of virtual stages.
std::optional<int64_t> parseSchedule(const std::string &text);

/// The largest global batch (samples per iteration) a setup may have: 2^30,
/// 2^14 times the largest published ones (65 536, LAMB's BERT). The search
/// enumerates the divisors of the samples per pipeline (sqrt(B) steps per tp x pp)
/// and multiplies counts under it, which stay far inside int64.
constexpr int64_t kMaxGlobalBatch = int64_t{1} << 30;

/// The most pipeline steps (pp x virtual stages x micro-batches per pipeline)
/// a configuration may have: the schedule's event simulation keeps about 144
/// bytes per step and runs for every finalist, and the plan file names every
/// step of every stage's program. At 2^20 steps planning GPT-2 took 21 s and
/// 0.45 GB (a 44 MB plan file); 2^18 keeps it near 5 s. Megatron-LM's largest
/// published run (SC21, 1T parameters: pp 64 x 512 micro-batches) has 2^15.
/// zenopt-run's plan reader accepts up to 2^22.
constexpr int64_t kMaxPipelineSteps = int64_t{1} << 18;

/// What a training iteration runs besides the configuration.
struct TrainingSetup {
  int64_t globalBatch = 1;          // samples per iteration over all data-parallel ranks
  Optimizer optimizer = Optimizer::Adam;
  /// Forward/backward precision: BF16/F16 is mixed precision (16-bit weights and
  /// activations, fp32 master weights), F32/TF32 keeps everything in fp32.
  DType computeDtype = DType::BF16;
  /// MoE blocks: the busiest expert's load over the mean (--moe-imbalance).
  double moeImbalance = 1.0;
  /// The dtype gradients accumulate (and are reduced) in (--grad-accumulation-dtype);
  /// unset: the frameworks' default, gradientAccumulationDtype.
  std::optional<DType> gradientAccumulation;
  AttentionKernel attention = AttentionKernel::Flash;
  Zero3Regather zero3Regather = Zero3Regather::PerMicroBatch;
  /// Units (blocks, the embedding, the head) whose ZeRO-3 gather may run ahead of the one
  /// computing (--zero3-prefetch-depth): FSDP's forward and backward prefetch issue the next
  /// unit's, 1; each adds a gathered unit's buffer.
  int64_t zero3PrefetchDepth = 1;
};

/// The dtype a setup's gradients accumulate in: the one given, else what Megatron-LM and
/// DeepSpeed do by default: fp32 main gradients under bf16 (Megatron forces
/// accumulate_allreduce_grads_in_fp32 with bf16; DeepSpeed's BF16_Optimizer keeps fp32
/// gradients), 16-bit ones under fp16, and fp32 in fp32/tf32 training.
DType gradientAccumulationDtype(const TrainingSetup &setup);

/// Bytes per parameter the memory model assumes (documented in
/// costmodel/README.md "Memory model"). Mixed precision follows ZeRO
/// (Rajbhandari et al., SC20, section 3.1): 2 (16-bit weights) + the gradients at
/// gradientAccumulationDtype (4 for fp32 main gradients, bf16's default: 18 bytes with Adam;
/// 2 for 16-bit ones: ZeRO's 16) + 12 for Adam (fp32 master weights, momentum, variance) or
/// 8 for SGD (fp32 master weights, momentum); fp32 training: 4 + 4 + 8 (Adam) or 4 (SGD).
struct BytesPerParameter {
  double weights = 0, gradients = 0, optimizer = 0;
};
BytesPerParameter bytesPerParameter(const TrainingSetup &setup);

/// One GPU's memory under a configuration: the fullest pipeline stage's.
struct MemoryBreakdown {
  int64_t stage = 0;              // the stage this breakdown is for
  double weightsBytes = 0;
  double gradientsBytes = 0;
  double optimizerBytes = 0;
  double activationsBytes = 0;    // every micro-batch in flight, recomputation applied
  double buffersBytes = 0;        // communication buffers: gradient buckets, gathered ZeRO-3 layers, p2p
  double reserveBytes = 0;        // CUDA context, library and NCCL buffers, allocator fragmentation (reserveBytes)
  double capacityBytes = 0;       // gpu.memory_gb (0: not given, everything fits)

  double perGpuBytes() const {
    return weightsBytes + gradientsBytes + optimizerBytes + activationsBytes + buffersBytes +
           reserveBytes;
  }
  bool fits() const { return capacityBytes <= 0 || perGpuBytes() <= capacityBytes; }
};

/// Why a configuration cannot run a shape at all (divisibility: tp must divide
/// heads, key/value heads and ffn, pp * virtual stages the layers, dp * micro-batch the global
/// batch; sequence parallelism needs tp > 1; interleaving needs pp > 1 and
/// micro-batches divisible by pp; explicit stage layers: one positive count per
/// stage summing to the layers, 1F1B only; decomposition degrees positive and
/// dividing a micro-batch's tokens; MoE blocks: ep dividing dp and the experts
/// and placeable on the dp group's nodes, tp dividing a micro-batch's tokens
/// (each tensor-parallel rank routes its share), the MoE degrees dividing
/// moeLayerShape's capacity; without MoE blocks ep 1; at most kMaxGlobalBatch
/// samples and kMaxPipelineSteps pipeline steps); "" when it can. Memory is not
/// checked here.
std::string checkConfig(const TransformerShape &shape, const ParallelConfig &config,
                        const TrainingSetup &setup, int64_t gpus);

/// Memory of the fullest stage (activations per Korthikanti et al. 2022, table 2;
/// micro-batches in flight under 1F1B: min(pp - stage, micro-batches)).
MemoryBreakdown memoryPerGpu(const TransformerShape &shape, const ParallelConfig &config,
                             const TrainingSetup &setup, const CostModel &model);

/// What a GPU holds besides the model's tensors when `dynamicBytes` of activations and
/// communication buffers come and go: the CUDA context with cuBLAS's and NCCL's workspaces
/// and buffers (kDeviceRuntimeBytes), and the caching allocator's fragmentation of the dynamic
/// allocations (kAllocatorFragmentation of the memory it reserves for them). 0 when the GPU's
/// capacity is not given.
constexpr double kDeviceRuntimeBytes = 1e9;
/// GMLake (Guo et al., ASPLOS 2024) measured PyTorch's caching allocator leaving 15% of the
/// reserved memory fragmented on average over eight LLM training setups on A100-80GB (their
/// defragmentation removes it). Weights, gradients and optimizer state are allocated once
/// and stay; only the activations and buffers fragment.
constexpr double kAllocatorFragmentation = 0.15;
double reserveBytes(double capacityBytes, double dynamicBytes);

/// One GPU's memory for `params` parameters replicated on every rank (ZeRO 0)
/// — weights, gradients and optimizer state at bytesPerParameter — and
/// `activationBytes` kept for backward, with the reserve and capacity memoryPerGpu
/// applies; no buffers.
MemoryBreakdown replicatedParameterMemory(double params, double activationBytes,
                                          const TrainingSetup &setup, const CostModel &model);

/// Time of one GEMM (batch x [m x k] * [k x n]) at `dtype`: the roofline with
/// the GPU's GEMM efficiency, derated by wave quantisation: 128x128 output
/// tiles spread over the SMs in waves, the last wave partly idle.
double gemmUs(const CostModel &model, double m, double n, double k, double batch, DType dtype);

/// `chunks` > 1 pieces of compute `chunkComputeUs` and communication
/// `chunkCommUs` each, piece i's communication running while piece i + 1
/// computes (Flux, PipeMoE): c + m + (chunks - 1)(max(c, m) + (s - 1) min(c, m)),
/// overlapped compute running `slowdown` (s) times slower.
double chunkPipelineUs(double chunkComputeUs, double chunkCommUs, int64_t chunks, double slowdown);

/// Where the GPUs of a configuration sit (Megatron's rank order: tensor
/// parallel innermost, then data parallel, then pipeline stages).
struct ParallelGroups {
  Group tensor;      // the tensor-parallel group touching the most nodes
  Group data;        // one data-parallel group
  Group pipelineHop; // two neighbouring stages (2 ranks; 2 nodes when they differ)
};
ParallelGroups parallelGroups(const ParallelConfig &config, const Cluster &cluster);

/// One pipeline stage's work per micro-batch, and what its data-parallel
/// gradient sync needs. Times in microseconds.
struct StageCost {
  int64_t firstLayer = 0, layers = 0;  // transformer blocks of this stage
  bool hasEmbedding = false, hasHead = false;
  double forwardUs = 0;      // compute of one micro-batch's forward (all virtual chunks)
  double backwardUs = 0;     // compute of one micro-batch's backward
  double recomputeUs = 0;    // forward work repeated during backward (included in backwardUs)
  double tensorCommUs = 0;   // TP collectives on the critical path, forward + backward (+ recompute)
  double pipelineCommUs = 0; // p2p send/recv of activations and their gradients
  double zeroCommUs = 0;     // ZeRO-3 gathers / ZeRO-2,3 reduce-scatters not hidden behind compute
  double flops = 0;          // executed per micro-batch, recomputation included
  double modelFlops = 0;     // without recomputation
  /// Backward compute of each block of the last micro-batch and its gradient
  /// bytes per GPU (in ready order: last block first), for planning the
  /// data-parallel sync; the embedding's and head's as one extra entry each.
  struct Unit {
    std::string name;
    double backwardUs = 0, forwardUs = 0;
    double gradientElements = 0;  // synchronised over the dp group
    /// An MoE block's experts on this rank (experts / ep of them), synchronised
    /// over the dp / ep ranks holding the same experts.
    double expertElements = 0;
  };
  std::vector<Unit> units;
  double optimizerUs = 0;    // the optimizer step over this GPU's shard
  /// Tied embeddings with pp > 1: the first stage's word embedding and the
  /// last stage's copy of it (the output layer) all-reduce their gradient
  /// over the two stages after backward, before the optimizer step
  /// (Megatron's embedding group); 0 on the other stages.
  double embeddingSyncUs = 0;
  double perMicroBatchUs() const {
    return forwardUs + backwardUs + tensorCommUs + pipelineCommUs + zeroCommUs;
  }
};

/// The stages' costs (stage i holds config.stageLayers[i] blocks, else split as
/// evenly as possible; the embedding on stage 0 and the head on the last).
/// Blocks differ by kind (dense or MoE, with a cross-attention or not): each
/// stage sums its own blocks' kinds.
std::vector<StageCost> stageCosts(const TransformerShape &shape, const ParallelConfig &config,
                                  const TrainingSetup &setup, const CostModel &model);

/// The pipeline's time for `microBatches` through stages with these
/// per-micro-batch times under 1F1B with `virtualStages` chunks per stage:
/// m * slowest + (pp - 1) / V * mean (the bubble).
struct PipelineTime {
  double totalUs = 0;
  double bubbleUs = 0;
};
PipelineTime pipelineTime(const std::vector<StageCost> &stages, int64_t microBatches,
                          int64_t virtualStages);
/// Chunk counts the decomposition considers: 1, 2, 4, 8 where they divide a
/// micro-batch's tokens (the dimension the chunks split).
std::vector<int64_t> decompositionDegrees(const TransformerShape &shape, const ParallelConfig &config);
/// The decomposition that minimises a block's time: each region and phase
/// takes its fastest degree on its own (their times add up).
Decomposition chooseDecomposition(const TransformerShape &shape, const ParallelConfig &config,
                                  const TrainingSetup &setup, const CostModel &model);

/// One MoE layer as one tensor-parallel rank runs it per micro-batch: each of
/// the tp ranks routes micro-batch x sequence / tp tokens (Megatron-Core's
/// experts are not split by tp here), the capacity derived from the exported
/// layer's capacity rows as a capacity factor. `shape.moe` must be set.
MoeShape moeLayerShape(const TransformerShape &shape, const ParallelConfig &config);

/// The ep values a configuration can take: 1 without MoE blocks, else the
/// divisors of the experts that divide dp and can be placed on its nodes.
std::vector<int64_t> expertParallelDegrees(const TransformerShape &shape, const ParallelConfig &config,
                                           const Cluster &cluster);

/// How the MoE layers run under a configuration (its ep): the forward and the
/// backward pipelining degree (of 1, 2, 4, 8, 16 dividing the capacity) that
/// minimise each phase alone (cost::moePhaseUs), and the all-to-all algorithm
/// and the tokens' compression (none, or one of `compressions` that shrinks
/// them at the compute precision, with ep > 1) that minimise the two phases'
/// sum. Default choice without MoE blocks.
MoeLayerChoice chooseMoeSchedule(const TransformerShape &shape, const ParallelConfig &config,
                                 const TrainingSetup &setup, const CostModel &model,
                                 const std::vector<CompressionMethod> &compressions = {});

/// Blocks per stage for a 1F1B configuration that minimise the slowest stage's
/// per-micro-batch time (which paces the pipeline) while every stage fits in
/// memory: blocks go one at a time to the stage they slow least among those
/// with room, which is optimal because a stage's time and memory grow
/// linearly in its blocks. The embedding's and head's work and the first
/// stages' extra in-flight activations thus move blocks to the other stages.
/// Empty when no split fits, and for a model with MoE or cross-attention
/// blocks (its blocks differ, so a stage's time is not linear in its count:
/// the even split).
std::vector<int64_t> balanceStages(const TransformerShape &shape, const ParallelConfig &config,
                                   const TrainingSetup &setup, const CostModel &model);

}  // namespace zen::cost

#endif  // ZEN_COSTMODEL_TRANSFORMER_H

//===- Transformer.cpp - large-model configurations, memory and cost -----===//
//
// The formulas are Megatron-LM's (Narayanan et al., SC21: tensor/pipeline
// partitioning, 1F1B and interleaved schedules) and Korthikanti et al. 2022
// ("Reducing Activation Recomputation in Large Transformer Models": activation
// bytes, sequence parallelism, selective recomputation). docs/design.md "Large
// models" and costmodel/README.md "Memory model" explain each term.
//
//===----------------------------------------------------------------------===//
#include "zen/CostModel/Transformer.h"

#include "zen/CostModel/Moe.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <string>

namespace zen::cost {


const char *toString(Optimizer optimizer) {
  return optimizer == Optimizer::Adam ? "adam" : "sgd";
}

std::optional<Optimizer> parseOptimizer(const std::string &text) {
  if (text == "adam")
    return Optimizer::Adam;
  if (text == "sgd")
    return Optimizer::SGD;
  return std::nullopt;
}

std::string ParallelConfig::schedule() const {
  return virtualStages > 1 ? "interleaved:" + std::to_string(virtualStages) : "1f1b";
}

bool ParallelConfig::operator==(const ParallelConfig &o) const {
  return tp == o.tp && pp == o.pp && dp == o.dp && zero == o.zero &&
         sequenceParallel == o.sequenceParallel && recompute == o.recompute &&
         microBatch == o.microBatch && microBatches == o.microBatches &&
         virtualStages == o.virtualStages && stageLayers == o.stageLayers &&
         decomposition == o.decomposition && ep == o.ep && experts.forward == o.experts.forward &&
         experts.backward == o.experts.backward && experts.algorithm == o.experts.algorithm &&
         experts.tokens == o.experts.tokens &&
         expertTensorParallel == o.expertTensorParallel;
}

int64_t MoeBlocks::countIn(int64_t first, int64_t count) const {
  return std::count_if(blocks.begin(), blocks.end(),
                       [&](int64_t block) { return block >= first && block < first + count; });
}

bool MoeBlocks::contains(int64_t block) const {
  return std::binary_search(blocks.begin(), blocks.end(), block);
}

bool Decomposition::operator==(const Decomposition &o) const {
  return attentionForward == o.attentionForward && attentionBackward == o.attentionBackward &&
         mlpForward == o.mlpForward && mlpBackward == o.mlpBackward;
}

std::optional<int64_t> parseSchedule(const std::string &text) {
  if (text == "1f1b")
    return 1;
  const std::string prefix = "interleaved:";
  if (text.rfind(prefix, 0) != 0 || text.size() == prefix.size() || text.size() > prefix.size() + 6)
    return std::nullopt;
  int64_t chunks = 0;
  for (char c : text.substr(prefix.size())) {
    if (c < '0' || c > '9')
      return std::nullopt;
    chunks = chunks * 10 + (c - '0');
  }
  if (chunks < 2)
    return std::nullopt;
  return chunks;
}

namespace {

bool isMixedPrecision(DType dtype) { return dtype == DType::BF16 || dtype == DType::F16; }
double activationElementBytes(DType dtype) { return isMixedPrecision(dtype) ? 2 : 4; }
bool isLastStage(int64_t stage, const ParallelConfig &config) { return stage == config.pp - 1; }

/// First block and block count of stage `stage`: the configuration's split,
/// else as even as possible (the first stages take one more).
std::pair<int64_t, int64_t> stageLayers(const TransformerShape &shape, const ParallelConfig &config,
                                        int64_t stage) {
  if (!config.stageLayers.empty()) {
    int64_t first = 0;
    for (int64_t s = 0; s < stage; ++s)
      first += config.stageLayers[s];
    return {first, config.stageLayers[stage]};
  }
  int64_t base = shape.layers / config.pp, extra = shape.layers % config.pp;
  int64_t first = stage * base + std::min(stage, extra);
  return {first, base + (stage < extra ? 1 : 0)};
}

/// Memory-bound time of moving `bytes` through HBM; on a cluster whose compute was profiled
/// (host ranks), a kernel of that traffic as measured (CostModel::computeUs), so the
/// data-parallel and large-model paths price one machine alike.
double memoryUs(const CostModel &model, double bytes) {
  if (model.cluster().profiledCompute.measured())
    return model.computeUs(0, bytes, DType::F32);
  const GpuSpec &gpu = model.cluster().gpu;
  return bytes / (gpu.hbmBandwidthGBps * gpu.memoryEfficiency * 1e3);
}

double collectiveUs(const CostModel &model, CollectiveKind kind, double bytes, Group group) {
  if (group.ranks <= 1 || bytes <= 0)
    return 0;
  return model.collective(kind, bytes, group).timeUs;
}

/// Key/value heads over query heads: 1 under multi-head attention, less under
/// grouped-query (and multi-query) attention.
double kvShare(const TransformerShape &shape) {
  return double(shape.keyValueHeads()) / double(shape.heads);
}

/// The QKV GEMM's output width: h for Q plus 2 h kvHeads / heads for K and V
/// (3 h under multi-head attention).
double qkvWidth(const TransformerShape &shape) {
  const double h = double(shape.hidden);
  return h + 2.0 * h * double(shape.keyValueHeads()) / double(shape.heads);
}

/// The first MLP GEMM's output width: ffn, or gate and up fused into one
/// h -> 2 ffn GEMM under a gated MLP (Megatron's linear_fc1 with --swiglu).
double mlpInWidth(const TransformerShape &shape) {
  return shape.gatedMlp() ? 2.0 * double(shape.ffn) : double(shape.ffn);
}

/// Activation bytes one transformer block keeps for backward per micro-batch,
/// Korthikanti et al. 2022 table 2 (their counts assume 16-bit activations and
/// 1-byte dropout masks; fp32 training doubles them).
/// An MoE block keeps the attention's share here; its experts' rows are
/// cost::moeMemoryPerGpu's.
double blockActivationBytes(const TransformerShape &shape, const ParallelConfig &config,
                            Recompute recompute, const TrainingSetup &setup, bool moeBlock = false) {
  const DType dtype = setup.computeDtype;
  double sbh = double(shape.seq) * config.microBatch * shape.hidden;
  double t = double(config.tp);
  // The scores, softmax and dropout mask (5 a s / h per token); FlashAttention keeps none of
  // them (only the softmax statistics, 4 a bytes per token, left out).
  double attention = setup.attention == AttentionKernel::Unfused
                         ? 5.0 * shape.heads * shape.seq / (shape.hidden * t)
                         : 0.0;
  // Korthikanti's 34 = 10 (layer norms, dropout masks and residual inputs,
  // replicated across TP ranks unless sequence parallel) + 24 (inside the TP regions).
  // Their 24 = 8 for the attention (Q and K for the scores, V, the output
  // GEMM's input: 2 sbh each) + 16 for the MLP (the activation's input and the
  // second GEMM's input, each 2 sb ffn with ffn = 4h). Grouped-query attention
  // keeps K and V of its kvHeads only (attention kernels that read each K/V
  // head for its query group, FlashAttention-2 and cuDNN's; an unfused path
  // that repeats them to every head would keep heads' worth): 4 + 4 kv/a.
  // A gated MLP keeps the gate's and the up GEMM's outputs (the SiLU/GeLU
  // input and the other factor of the product) and the product (the down
  // GEMM's input): three ffn-wide tensors, 24 (ffn/4h) in place of 16 (ffn/4h).
  double ffnScale = double(shape.ffn) / (4.0 * shape.hidden);
  double mlpInside = (shape.gatedMlp() ? 24.0 : 16.0) * ffnScale;
  double inside = 4.0 + 4.0 * kvShare(shape) + (moeBlock ? 0.0 : mlpInside);
  double outside = config.sequenceParallel ? 10.0 / t : 10.0;
  double perToken;
  switch (recompute) {
  case Recompute::None: perToken = outside + inside / t + attention; break;
  case Recompute::Selective: perToken = outside + inside / t; break;
  case Recompute::Full: perToken = config.sequenceParallel ? 2.0 / t : 2.0; break;
  }
  return sbh * perToken * activationElementBytes(dtype) / 2.0;
}

/// What a decoder block's cross-attention adds to its activations, counted
/// as Korthikanti counts the self-attention: outside the TP region its input
/// norm's input (2), the Q GEMM's input (2) and the dropout mask (1); inside
/// Q, K and V (K and V of the encoder's output, its kvHeads) and the output
/// GEMM's input, 4 + 4 kv/a; the scores' 5 a s / (h t) (the encoder's output
/// assumed as long as the block's sequence). Full recomputation keeps only the
/// block's input (counted by blockActivationBytes); the encoder's output
/// that every cross-attention reads is kept once per stage (stageMemory).
double crossAttentionActivationBytes(const TransformerShape &shape, const ParallelConfig &config,
                                     Recompute recompute, const TrainingSetup &setup) {
  if (recompute == Recompute::Full)
    return 0;
  const double sbh = double(shape.seq) * config.microBatch * shape.hidden;
  const double t = double(config.tp);
  double perToken = (config.sequenceParallel ? 5.0 / t : 5.0) + (4.0 + 4.0 * kvShare(shape)) / t;
  if (recompute == Recompute::None && setup.attention == AttentionKernel::Unfused)
    perToken += 5.0 * shape.heads * shape.seq / (shape.hidden * t);
  return sbh * perToken * activationElementBytes(setup.computeDtype) / 2.0;
}

/// Whether block `block` is a decoder block with a cross-attention (the last
/// crossAttentionBlocks blocks).
bool hasCrossAttention(const TransformerShape &shape, int64_t block) {
  return block >= shape.layers - shape.crossAttentionBlocks;
}

/// Cross-attention blocks among blocks [first, first + count).
int64_t crossAttentionIn(const TransformerShape &shape, int64_t first, int64_t count) {
  const int64_t decoderStart = shape.layers - shape.crossAttentionBlocks;
  return std::max<int64_t>(0, first + count - std::max(first, decoderStart));
}

/// The word embedding's parameters the last stage holds a copy of (tied
/// input/output embeddings with pp > 1, as Megatron keeps them), else 0. The
/// IR counts the tied matrix once, in the embedding.
double tiedCopyParams(const TransformerShape &shape, const ParallelConfig &config) {
  return shape.tiedEmbeddings && config.pp > 1 ? double(shape.vocab) * double(shape.hidden) : 0.0;
}

} // namespace

DType gradientAccumulationDtype(const TrainingSetup &setup) {
  if (setup.gradientAccumulation)
    return *setup.gradientAccumulation;
  return setup.computeDtype == DType::F16 ? DType::F16 : DType::F32;
}

BytesPerParameter bytesPerParameter(const TrainingSetup &setup) {
  const double gradients = gradientAccumulationDtype(setup) == DType::F32 ? 4 : 2;
  if (isMixedPrecision(setup.computeDtype))
    return {2, gradients, setup.optimizer == Optimizer::Adam ? 12.0 : 8.0};
  return {4, gradients, setup.optimizer == Optimizer::Adam ? 8.0 : 4.0};
}

std::string checkConfig(const TransformerShape &shape, const ParallelConfig &config,
                        const TrainingSetup &setup, int64_t gpus) {
  auto text = [](const char *what, int64_t value) { return std::string(what) + " " + std::to_string(value); };
  if (config.tp < 1 || config.pp < 1 || config.dp < 1 || config.microBatch < 1 ||
      config.microBatches < 1 || config.virtualStages < 1 || config.zero < 0 || config.zero > 3)
    return "tp, pp, dp, micro-batch, micro-batches and virtual stages must be positive, zero 0-3";
  if (setup.zero3PrefetchDepth < 1)
    return "the ZeRO-3 prefetch depth " + std::to_string(setup.zero3PrefetchDepth) + " is not positive";
  if (setup.globalBatch < 1 || setup.globalBatch > kMaxGlobalBatch)
    return "the global batch " + std::to_string(setup.globalBatch) + " is not from 1 to the limit of " +
           std::to_string(kMaxGlobalBatch) + " samples";
  if (config.gpus() != gpus)
    return "tp * pp * dp = " + std::to_string(config.gpus()) + " but the cluster has " +
           std::to_string(gpus) + " GPUs";
  if (shape.heads % config.tp != 0)
    return text("tp", config.tp) + " does not divide the " + std::to_string(shape.heads) + " attention heads";
  // The K/V projections are column-split by key/value head (query group), so
  // tp must divide them, as Megatron-LM requires (num_query_groups % tp == 0).
  // vLLM instead replicates each K/V head over tp / kvHeads ranks; training
  // would then sync the replicas' gradients, which Megatron does not offer.
  if (shape.keyValueHeads() % config.tp != 0)
    return text("tp", config.tp) + " does not divide the " + std::to_string(shape.keyValueHeads()) +
           " key/value heads";
  if (shape.ffn % config.tp != 0)
    return text("tp", config.tp) + " does not divide the MLP width " + std::to_string(shape.ffn);
  if (shape.seq % config.tp != 0 && config.sequenceParallel)
    return text("tp", config.tp) + " does not divide the sequence length " + std::to_string(shape.seq) +
           " (sequence parallelism)";
  if (config.pp * config.virtualStages > shape.layers)
    return text("pp", config.pp) + " x " + std::to_string(config.virtualStages) +
           " virtual stages exceeds the " + std::to_string(shape.layers) + " layers";
  if (config.virtualStages > 1 && shape.layers % (config.pp * config.virtualStages) != 0)
    return "the interleaved schedule needs the " + std::to_string(shape.layers) +
           " layers divisible by pp x virtual stages = " + std::to_string(config.pp * config.virtualStages);
  if (config.virtualStages > 1 && (config.pp < 2 || config.microBatches % config.pp != 0))
    return "the interleaved schedule needs pp > 1 and micro-batches divisible by pp";
  if (config.sequenceParallel && config.tp < 2)
    return "sequence parallelism needs tp > 1";
  if (!config.stageLayers.empty()) {
    int64_t sum = 0;
    bool positive = true;
    for (int64_t layers : config.stageLayers) {
      sum += layers;
      positive = positive && layers >= 1;
    }
    if (int64_t(config.stageLayers.size()) != config.pp || !positive || sum != shape.layers)
      return "the stage layers must give each of the " + std::to_string(config.pp) +
             " stages at least one of the " + std::to_string(shape.layers) + " layers";
    if (config.virtualStages > 1)
      return "explicit stage layers need the 1f1b schedule";
  }
  const Decomposition &d = config.decomposition;
  const int64_t tokens = config.microBatch * shape.seq;
  for (int64_t chunks : {d.attentionForward, d.attentionBackward, d.mlpForward, d.mlpBackward})
    if (chunks < 1 || tokens % chunks != 0)
      return "decomposition into " + std::to_string(chunks) + " chunks does not divide the " +
             std::to_string(tokens) + " tokens of a micro-batch";
  if (double(config.dp) * double(config.microBatch) * double(config.microBatches) !=
      double(setup.globalBatch))
    return "dp " + std::to_string(config.dp) + " x micro-batch " + std::to_string(config.microBatch) +
           " x micro-batches " + std::to_string(config.microBatches) + " is not the global batch " +
           std::to_string(setup.globalBatch);
  // pp x V <= layers here, and micro-batches <= the global batch: no overflow.
  if (const int64_t steps = config.pp * config.virtualStages * config.microBatches; steps > kMaxPipelineSteps)
    return "pp " + std::to_string(config.pp) + " x " + std::to_string(config.virtualStages) +
           " virtual stages x " + std::to_string(config.microBatches) + " micro-batches (global batch " +
           std::to_string(setup.globalBatch) + " over dp " + std::to_string(config.dp) + " x micro-batch " +
           std::to_string(config.microBatch) + ") = " + std::to_string(steps) +
           " pipeline steps, more than the limit of " + std::to_string(kMaxPipelineSteps);
  if (!shape.moe)
    return config.ep == 1 && !config.expertTensorParallel
               ? ""
               : text("ep", config.ep) + " and expert tensor parallelism need a model with MoE blocks";
  const MoeShape &exported = shape.moe->layer;
  if (config.expertTensorParallel &&
      (config.tp < 2 || exported.ffn % config.tp || exported.firstGemmRows() % config.tp))
    return "expert tensor parallelism needs tp > 1 dividing the experts' width " +
           std::to_string(exported.ffn);
  if (tokens % config.tp != 0)
    return text("tp", config.tp) + " does not divide the " + std::to_string(tokens) +
           " tokens of a micro-batch that the MoE blocks route";
  const MoeShape layer = moeLayerShape(shape, config);
  if (std::string why = checkExpertParallel(layer, config.ep, config.dp); !why.empty())
    return why;
  for (int64_t chunks : {config.experts.forward, config.experts.backward})
    if (chunks < 1 || layer.capacity() % chunks != 0)
      return "the MoE pipelining degree " + std::to_string(chunks) + " does not divide the " +
             std::to_string(layer.capacity()) + " capacity rows of a micro-batch";
  return "";
}

MoeShape moeLayerShape(const TransformerShape &shape, const ParallelConfig &config) {
  const MoeShape &exported = shape.moe->layer;
  MoeShape layer = exported;
  layer.tokens = std::max<int64_t>(1, config.microBatch * shape.seq / config.tp);
  // The exported buffer's rows per token, rounded up as GShard sizes it.
  if (exported.capacityRows > 0 && exported.tokens > 0)
    layer.capacityRows = std::max<int64_t>(
        1, (exported.capacityRows * layer.tokens + exported.tokens - 1) / exported.tokens);
  return layer;
}

namespace {

/// The tp ranks every expert is split over (expert tensor parallelism), or one rank.
Group expertShardGroup(const ParallelConfig &config, const Cluster &cluster) {
  return config.expertTensorParallel ? parallelGroups(config, cluster).tensor : Group{1, 1};
}

/// One rank's expert parameters of one MoE layer: experts / ep of them, each
/// split over the shards (the IR's count scaled by a shard's share).
double expertParamsPerRank(const TransformerShape &shape, const ParallelConfig &config) {
  const MoeShape &layer = shape.moe->layer;
  const double share = config.expertTensorParallel
                           ? expertShard(layer, config.tp).expertParams() / layer.expertParams()
                           : 1.0;
  return shape.moe->expertParams / double(config.ep) * share;
}

} // namespace

double chunkPipelineUs(double chunkComputeUs, double chunkCommUs, int64_t chunks, double slowdown) {
  const double step = std::max(chunkComputeUs, chunkCommUs) +
                      (slowdown - 1.0) * std::min(chunkComputeUs, chunkCommUs);
  return chunkComputeUs + chunkCommUs + double(chunks - 1) * step;
}

double gemmUs(const CostModel &model, double m, double n, double k, double batch, DType dtype) {
  if (m <= 0 || n <= 0 || k <= 0 || batch <= 0)
    return 0;
  const double elementBytes = activationElementBytes(dtype);
  const double bytes = elementBytes * batch * (m * k + k * n + m * n);
  // Measured host compute prices a GEMM at the rate timed for its FLOPs (no tiles or waves).
  if (model.cluster().profiledCompute.measured())
    return model.computeUs(2.0 * m * n * k * batch, bytes, dtype);
  const GpuSpec &gpu = model.cluster().gpu;
  auto peak = gpu.peakTflops.find(dtype);
  if (peak == gpu.peakTflops.end())
    peak = gpu.peakTflops.find(DType::F32);
  double peakTflops = peak == gpu.peakTflops.end() ? 1.0 : peak->second;
  double efficiency = gpu.gemmEfficiency > 0 ? gpu.gemmEfficiency : gpu.computeEfficiency;
  // Wave quantisation (NVIDIA Deep Learning Performance Guide, "Matrix
  // Multiplication Background"): output tiles are scheduled over the SMs in
  // waves; a partial last wave leaves SMs idle. cuBLAS picks tiles from 64 to
  // 256 wide; 128x128 stands for them.
  if (gpu.sms > 0) {
    constexpr double kTile = 128;
    double tiles = std::ceil(m / kTile) * std::ceil(n / kTile) * batch;
    double waves = std::ceil(tiles / double(gpu.sms));
    // Tile quantisation too: a 100-row GEMM still computes a 128-row tile.
    double useful = (m * n * batch) / (tiles * kTile * kTile);
    efficiency *= useful * tiles / (waves * double(gpu.sms));
  }
  double flopUs = 2.0 * m * n * k * batch / (peakTflops * efficiency * 1e6);
  return std::max(flopUs, memoryUs(model, bytes));
}

ParallelGroups parallelGroups(const ParallelConfig &config, const Cluster &cluster) {
  const int64_t perNode = std::max<int64_t>(cluster.gpusPerNode, 1);
  auto span = [&](int64_t ranks, int64_t stride) {
    // `ranks` GPUs `stride` apart: how many nodes they touch.
    int64_t extent = ranks * stride;
    int64_t nodes = std::max<int64_t>(1, (extent + perNode - 1) / perNode);
    return Group{ranks, std::min(nodes, ranks)};
  };
  ParallelGroups groups;
  // A tensor-parallel group is tp consecutive ranks starting at a multiple of tp, so at
  // some multiple of gcd(tp, GPUs per node) within a node: the group starting latest in its
  // node touches the most nodes, and its collectives pace every block. A tp that neither
  // divides nor is a multiple of the GPUs per node has groups across part of two nodes
  // (the search never chooses one; a plan file may carry it).
  const int64_t latestStart = perNode - std::gcd(config.tp, perNode);
  groups.tensor = Group{config.tp, std::min(config.tp, (latestStart + config.tp + perNode - 1) / perNode)};
  groups.data = span(config.dp, config.tp);
  // Every tensor-parallel rank's data-parallel group synchronises at once: those sharing a node
  // share its NICs.
  if (groups.data.nodes > 1)
    groups.data.perNode =
        std::max<int64_t>(1, perNode / ((groups.data.ranks + groups.data.nodes - 1) / groups.data.nodes));
  // Stages are tp * dp ranks apart; once they span more than a node, the
  // slowest hop (which paces the pipeline) crosses the network.
  bool crossNode = config.pp > 1 && config.tp * config.dp * config.pp > perNode;
  groups.pipelineHop = Group{2, crossNode ? 2 : 1};
  return groups;
}

namespace {

/// The ZeRO stage a configuration's memory is sharded as: ZeRO-3 gathering once a step keeps
/// the weights and the accumulated gradients whole, as ZeRO 1 does.
int memoryShardingStage(const ParallelConfig &config, const TrainingSetup &setup) {
  return config.zero >= 3 && setup.zero3Regather == Zero3Regather::PerStep ? 1 : config.zero;
}

/// Memory of one GPU of `stage` holding `layers` blocks from `first` on.
MemoryBreakdown stageMemory(const TransformerShape &shape, const ParallelConfig &config,
                            const TrainingSetup &setup, const CostModel &model, int64_t stage,
                            int64_t first, int64_t layers) {
  BytesPerParameter perParam = bytesPerParameter(setup);
  const double t = double(config.tp), d = double(config.dp);
  const double elementBytes = activationElementBytes(setup.computeDtype);
  const double tokens = double(config.microBatch) * shape.seq;
  const double capacity = model.cluster().gpu.memoryGB * 1e9;
  const int64_t moeLayers = shape.moe ? shape.moe->countIn(first, layers) : 0;
  const int64_t denseLayers = layers - moeLayers;
  // Cross-attention blocks, and those of them that are MoE blocks.
  const int64_t crossLayers = crossAttentionIn(shape, first, layers);
  int64_t crossMoeLayers = 0;
  for (int64_t block = first + layers - crossLayers; block < first + layers; ++block)
    crossMoeLayers += shape.moe && shape.moe->contains(block) ? 1 : 0;
  double params = (denseLayers * shape.layerParams + moeLayers * (shape.moe ? shape.moe->blockParams : 0) +
                   crossLayers * shape.crossAttentionParams) / t;
  if (stage == 0)
    params += shape.embeddingParams / t;
  if (isLastStage(stage, config))
    params += (shape.headParams + tiedCopyParams(shape, config)) / t;
  MemoryBreakdown memory;
  memory.stage = stage;
  memory.capacityBytes = capacity;
  const int shardedStage = memoryShardingStage(config, setup);
  memory.weightsBytes = params * perParam.weights / (shardedStage >= 3 ? d : 1);
  memory.gradientsBytes = params * perParam.gradients / (shardedStage >= 2 ? d : 1);
  memory.optimizerBytes = params * perParam.optimizer / (shardedStage >= 1 ? d : 1);
  // 1F1B keeps min(pp - stage, m) micro-batches in flight at a stage; the
  // interleaved schedule (pp - 1) / (pp V) more on the first (Korthikanti
  // et al. 2022, section 4.2.3).
  double inFlight = double(std::min<int64_t>(config.pp - stage, config.microBatches));
  if (config.virtualStages > 1)
    inFlight *= 1.0 + double(config.pp - 1) / double(config.pp * config.virtualStages);
  const DType dtype = setup.computeDtype;
  memory.activationsBytes =
      inFlight * (denseLayers * blockActivationBytes(shape, config, config.recompute, setup) +
                  moeLayers * blockActivationBytes(shape, config, config.recompute, setup, true));
  // Recomputing a whole block during backward materialises its activations
  // once (a block with a cross-attention, the larger, when the stage has one).
  const double crossRecomputed = crossAttentionActivationBytes(shape, config, Recompute::None, setup);
  const double recomputedDense =
      denseLayers == 0 ? 0.0
                       : blockActivationBytes(shape, config, Recompute::None, setup) +
                             (crossLayers > crossMoeLayers ? crossRecomputed : 0.0);
  if (config.recompute == Recompute::Full)
    memory.activationsBytes += recomputedDense;
  if (stage == 0)
    memory.activationsBytes +=
        inFlight * tokens * shape.hidden * elementBytes / (config.sequenceParallel ? t : 1.0);
  // Cross-attention: each block's own activations, and the encoder's output
  // that all of them read as K/V input, once.
  if (crossLayers > 0)
    memory.activationsBytes +=
        inFlight * (crossLayers * crossAttentionActivationBytes(shape, config, config.recompute, setup) +
                    tokens * shape.hidden * elementBytes / (config.sequenceParallel ? t : 1.0));
  if (isLastStage(stage, config) && shape.vocab > 0)
    memory.activationsBytes += 2.0 * tokens * shape.vocab / t * 4.0;  // fp32 logits and their gradient
  // Buffers: a 25 MiB gradient bucket in flight (DDP's cap), the gathered
  // unit and the ones prefetched under ZeRO-3 re-gathering per micro-batch, send and
  // receive buffers between stages, the gathered input of a sequence-parallel region.
  double buffers = 0;
  if (config.dp > 1 && shardedStage < 2)
    buffers += std::min(params * 4.0, 2.0 * 25.0 * 1048576.0);
  if (shardedStage >= 3) {
    // The largest unit: a block (a cross-attention adds its parameters to a decoder block's),
    // the embedding or the head.
    const double crossParams = shape.crossAttentionBlocks > 0 ? shape.crossAttentionParams / t : 0.0;
    double gatheredUnit = shape.layerParams / t + crossParams;
    if (shape.moe)
      gatheredUnit =
          std::max(gatheredUnit, shape.moe->blockParams / t + expertParamsPerRank(shape, config) + crossParams);
    if (stage == 0)
      gatheredUnit = std::max(gatheredUnit, shape.embeddingParams / t);
    if (isLastStage(stage, config))
      gatheredUnit = std::max(gatheredUnit, (shape.headParams + tiedCopyParams(shape, config)) / t);
    buffers += double(1 + setup.zero3PrefetchDepth) * gatheredUnit * perParam.weights;
  }
  if (config.pp > 1)
    buffers += 2.0 * tokens * shape.hidden * elementBytes;
  if (config.tp > 1)
    buffers += tokens * shape.hidden * elementBytes;
  memory.buffersBytes = buffers;
  memory.reserveBytes = reserveBytes(capacity, memory.activationsBytes + buffers);
  if (moeLayers == 0)
    return memory;
  // The experts: experts / ep per layer, ZeRO over their replicas; without
  // full recomputation their rows stay for backward, with it the block being
  // recomputed materialises them once (the larger of a dense and an MoE
  // block's, the dense one counted above).
  // Split experts (expert tensor parallelism): a tp-th of every expert, run on
  // the rows every shard received (gathered: tp times the capacity rows).
  const MoeShape routed = moeLayerShape(shape, config);
  const int64_t shards = config.expertTensorParallel ? config.tp : 1;
  MoeShape layer = expertShard(routed, shards);
  layer.capacityRows = routed.capacity() * shards;
  MoeMemory experts = moeMemoryPerGpu(layer, moeLayers, config.ep, config.dp, shardedStage, inFlight, setup);
  if (config.recompute == Recompute::Full) {
    const double recomputedMoe =
        blockActivationBytes(shape, config, Recompute::None, setup, true) +
        moeMemoryPerGpu(layer, 1, config.ep, config.dp, shardedStage, 1, setup).activationsBytes +
        (crossMoeLayers > 0 ? crossRecomputed : 0.0);
    experts.activationsBytes = std::max(0.0, recomputedMoe - recomputedDense);
  }
  return withMoeMemory(memory, experts);
}

} // namespace

double reserveBytes(double capacityBytes, double dynamicBytes) {
  if (capacityBytes <= 0)
    return 0;
  return kDeviceRuntimeBytes +
         dynamicBytes * kAllocatorFragmentation / (1.0 - kAllocatorFragmentation);
}

MemoryBreakdown replicatedParameterMemory(double params, double activationBytes,
                                          const TrainingSetup &setup, const CostModel &model) {
  const BytesPerParameter perParam = bytesPerParameter(setup);
  MemoryBreakdown memory;
  memory.capacityBytes = model.cluster().gpu.memoryGB * 1e9;
  memory.weightsBytes = params * perParam.weights;
  memory.gradientsBytes = params * perParam.gradients;
  memory.optimizerBytes = params * perParam.optimizer;
  memory.activationsBytes = activationBytes;
  memory.reserveBytes = reserveBytes(memory.capacityBytes, activationBytes);
  return memory;
}

MemoryBreakdown memoryPerGpu(const TransformerShape &shape, const ParallelConfig &config,
                             const TrainingSetup &setup, const CostModel &model) {
  MemoryBreakdown fullest;
  for (int64_t stage = 0; stage < config.pp; ++stage) {
    auto [first, layers] = stageLayers(shape, config, stage);
    MemoryBreakdown memory = stageMemory(shape, config, setup, model, stage, first, layers);
    if (stage == 0 || memory.perGpuBytes() > fullest.perGpuBytes())
      fullest = memory;
  }
  return fullest;
}

namespace {

/// One block's work per micro-batch on one TP rank.
struct BlockCost {
  /// attentionCore*: what selective recomputation repeats (unfused attention's scores,
  /// softmax and context; nothing under FlashAttention, which never keeps them).
  double forwardUs = 0, backwardUs = 0, attentionCoreUs = 0;
  double forwardFlops = 0, attentionCoreFlops = 0;
  double backwardRecomputeFlops = 0;  // FlashAttention's backward recomputing the scores
  double tensorCommForwardUs = 0;   // TP collectives forward not hidden by decomposition
  double tensorCommBackwardUs = 0;  // and backward
};

/// An MoE block (`moeBlock`) runs its attention as a dense one; in place of
/// the MLP's tensor-parallel region each tensor-parallel rank routes its
/// share of the tokens through the router GEMM and the pipelined MoE layer
/// (cost::moePhaseUs over the experts' ep ranks of the dp group), and without
/// sequence parallelism all-gathers the output (forward) and the input
/// gradient (backward) over the tensor-parallel group. A decoder block of an
/// encoder-decoder stack (`crossAttention`) runs a second attention after its
/// self-attention: Q from the block, K and V from the encoder's output.
BlockCost blockCost(const TransformerShape &shape, const ParallelConfig &config,
                    const TrainingSetup &setup, const CostModel &model, const ParallelGroups &groups,
                    bool moeBlock = false, bool crossAttention = false) {
  const DType dtype = setup.computeDtype;
  const double t = double(config.tp), b = double(config.microBatch), s = double(shape.seq);
  const double h = double(shape.hidden), a = double(shape.heads), f = double(shape.ffn);
  const double tokens = b * s, headDim = h / a;
  // Grouped-query attention: Q's h columns and K's and V's kvHeads x headDim
  // each, every part column-split by tp (checkConfig: tp divides kvHeads).
  const double qkv = qkvWidth(shape), kv = qkv - h;
  const double mlpIn = mlpInWidth(shape);
  BlockCost cost;
  // Forward GEMMs [m x k] * [k x n] (x batch); backward runs two GEMMs of the
  // same FLOPs per forward GEMM: the input gradient [m x n] * [n x k] and the
  // weight gradient [k x m] * [m x n]. Every query head scores against its
  // group's K and V, so the attention core's GEMMs keep the query heads.
  enum class Core { None, Scores, Context };
  struct Gemm { double m, n, k, batch; Core core; };
  std::vector<Gemm> gemms = {
      {tokens, qkv / t, h, 1, Core::None},              // QKV, column-parallel
      {s, s, headDim, b * a / t, Core::Scores},         // scores Q K^T, heads split
      {s, headDim, s, b * a / t, Core::Context},        // context softmax(.) V
      {tokens, h, h / t, 1, Core::None},                // attention output, row-parallel
  };
  if (moeBlock) {
    gemms.push_back({tokens / t, double(shape.moe->layer.experts), h, 1, Core::None});  // router, this rank's tokens
  } else {
    // Gated MLP: gate and up fused (h -> 2 ffn), both column-parallel.
    gemms.push_back({tokens, mlpIn / t, h, 1, Core::None});  // first MLP GEMM, column-parallel
    gemms.push_back({tokens, h, f / t, 1, Core::None});      // second (down) MLP GEMM, row-parallel
  }
  if (crossAttention) {
    gemms.push_back({tokens, h / t, h, 1, Core::None});            // Q of the block, column-parallel
    gemms.push_back({tokens, kv / t, h, 1, Core::None});           // K and V of the encoder's output, column-parallel
    gemms.push_back({s, s, headDim, b * a / t, Core::Scores});     // scores
    gemms.push_back({s, headDim, s, b * a / t, Core::Context});    // context
    gemms.push_back({tokens, h, h / t, 1, Core::None});            // output, row-parallel
  }
  // FlashAttention (Dao 2022; FlashAttention-2, Dao 2023) runs the attention core in on-chip
  // memory: its GEMMs as these, the scores never written, and backward recomputes the scores
  // (five GEMMs to forward's two: 2.5x the FLOPs).
  const bool flash = setup.attention == AttentionKernel::Flash;
  for (const Gemm &g : gemms) {
    double forward = gemmUs(model, g.m, g.n, g.k, g.batch, dtype);
    double backward = gemmUs(model, g.m, g.k, g.n, g.batch, dtype) +
                      gemmUs(model, g.k, g.n, g.m, g.batch, dtype);
    double flops = 2 * g.m * g.n * g.k * g.batch;
    cost.forwardUs += forward;
    cost.backwardUs += backward;
    cost.forwardFlops += flops;
    if (g.core == Core::None)
      continue;
    if (!flash) {
      cost.attentionCoreUs += forward;
      cost.attentionCoreFlops += flops;
    } else if (g.core == Core::Scores) {
      cost.backwardUs += forward;
      cost.backwardRecomputeFlops += flops;
    }
  }
  // Element-wise work is memory-bound (Megatron's fused kernels: layer norms,
  // bias + dropout + residual, bias + GeLU, scale + mask + softmax + dropout).
  // Forward elements moved: layer norms and dropout-residuals read and write
  // ~10 h per token (replicated unless sequence parallel), bias-GeLU 2 f / t
  // (a gated MLP's SiLU/GeLU and product read gate and up and write the
  // product: 3 f / t), the attention scores 5 a s / t (Korthikanti's
  // activation count). RMSNorm moves what LayerNorm moves (read the input,
  // write the output; backward read both and the gradient): it skips the
  // mean and the bias, per-token and per-channel vectors this count omits for
  // both, so the two norms cost the same here. Rotary positions rotate Q and
  // K in place: read and write (h + h kv/a) / t per token. A cross-attention adds
  // its norm and dropout-residual (5 h) and its scores.
  // Backward reads the saved tensors and the incoming gradients: twice forward.
  const double elementBytes = activationElementBytes(dtype);
  const double outsidePerToken = crossAttention ? 15.0 : 10.0;
  double outside = outsidePerToken * tokens * h / (config.sequenceParallel ? t : 1.0);
  double attentionElements = flash ? 0.0 : (crossAttention ? 2.0 : 1.0) * 5.0 * a * s * s * b / t;
  double mlpElements = moeBlock ? 0.0 : (shape.gatedMlp() ? 3.0 : 2.0) * tokens * f / t;
  if (shape.positions == "rotary")
    outside += 2.0 * tokens * (h + kv / 2.0) / t;  // kv holds K's and V's columns
  double elementwiseForwardUs =
      memoryUs(model, elementBytes * (outside + mlpElements + attentionElements));
  double attentionElementwiseUs = memoryUs(model, elementBytes * attentionElements);
  cost.forwardUs += elementwiseForwardUs;
  cost.backwardUs += 2 * elementwiseForwardUs;
  cost.attentionCoreUs += attentionElementwiseUs;
  // Two TP regions per block: an all-reduce after each row-parallel GEMM, or
  // with sequence parallelism a reduce-scatter after it and an all-gather
  // before the next column-parallel GEMM (Korthikanti et al. 2022, section
  // 4.2.2); backward, the duals next to the column-parallel GEMMs' input
  // gradients. Each collective pairs with the GEMM next to it: decomposed into
  // k chunks along the tokens, chunk i's collective overlaps chunk i + 1's
  // GEMM (Flux; PyTorch async-TP), each chunk GEMM priced by its own shape
  // (wave quantisation) and each chunk collective paying its latency; running
  // together, both run `overlap_slowdown` slower.
  const Decomposition &d = config.decomposition;
  struct Pair {
    double m, n, k;
    CollectiveKind kind;
    int64_t chunks;
    bool forward;
  };
  const CollectiveKind reduce = config.sequenceParallel ? CollectiveKind::ReduceScatter : CollectiveKind::AllReduce;
  std::vector<Pair> pairs = {
      {tokens, h, h / t, reduce, d.attentionForward, true},       // attention output GEMM, then reduce
      {tokens, h, qkv / t, reduce, d.attentionBackward, false},   // QKV input gradient, then reduce
  };
  if (!moeBlock) {
    pairs.push_back({tokens, h, f / t, reduce, d.mlpForward, true});       // second MLP GEMM, then reduce
    pairs.push_back({tokens, h, mlpIn / t, reduce, d.mlpBackward, false}); // first MLP input gradient, then reduce
  }
  // A cross-attention is a third TP region: its output GEMM's reduce forward;
  // backward the Q GEMM's input gradient (the block's stream) and the K/V
  // GEMM's (into the encoder's output) each reduced.
  if (crossAttention) {
    pairs.push_back({tokens, h, h / t, reduce, d.attentionForward, true});
    pairs.push_back({tokens, h, h / t, reduce, d.attentionBackward, false});
    pairs.push_back({tokens, h, kv / t, reduce, d.attentionBackward, false});
  }
  if (config.sequenceParallel) {
    const CollectiveKind gather = CollectiveKind::AllGather;
    pairs.push_back({tokens, qkv / t, h, gather, d.attentionForward, true});      // gather, then QKV
    pairs.push_back({tokens, h / t, h, gather, d.attentionBackward, false});      // gather, attention output input gradient
    if (!moeBlock) {
      pairs.push_back({tokens, mlpIn / t, h, gather, d.mlpForward, true});        // gather, then first MLP
      pairs.push_back({tokens, f / t, h, gather, d.mlpBackward, false});          // gather, second MLP input gradient
    }
    if (crossAttention) {
      pairs.push_back({tokens, h / t, h, gather, d.attentionForward, true});      // gather, then Q
      pairs.push_back({tokens, kv / t, h, gather, d.attentionForward, true});     // gather the encoder's output, then K/V
      pairs.push_back({tokens, h / t, h, gather, d.attentionBackward, false});    // gather, output input gradient
    }
  }
  const double activationBytes = tokens * h * elementBytes;
  const double slowdown = model.overlapSlowdown();
  for (const Pair &pair : pairs) {
    const double whole = gemmUs(model, pair.m, pair.n, pair.k, 1, dtype);
    const double chunkGemm = gemmUs(model, pair.m / pair.chunks, pair.n, pair.k, 1, dtype);
    const double chunkComm = collectiveUs(model, pair.kind, activationBytes / pair.chunks, groups.tensor);
    const double gemms = pair.chunks * chunkGemm;
    double exposed = chunkComm;
    if (pair.chunks > 1)
      exposed = chunkPipelineUs(chunkGemm, chunkComm, pair.chunks, slowdown) - gemms;
    (pair.forward ? cost.forwardUs : cost.backwardUs) += gemms - whole;
    (pair.forward ? cost.tensorCommForwardUs : cost.tensorCommBackwardUs) += exposed;
  }
  if (!moeBlock)
    return cost;
  const MoeShape layer = moeLayerShape(shape, config);
  const MoeLayerChoice &choice = config.experts;
  const Group shards = expertShardGroup(config, model.cluster());
  cost.forwardUs += moePhaseUs(model, layer, config.ep, groups.data, choice.forward, choice.algorithm,
                               false, setup.moeImbalance, dtype, choice.tokens, shards);
  cost.backwardUs += moePhaseUs(model, layer, config.ep, groups.data, choice.backward, choice.algorithm,
                                true, setup.moeImbalance, dtype, choice.tokens, shards);
  // Useful expert FLOPs: every token through top-k experts' two GEMMs.
  cost.forwardFlops += 2.0 * double(layer.tokens) * double(layer.topK) *
                       (double(layer.firstGemmRows()) * h + h * double(layer.ffn));
  if (!config.sequenceParallel && config.tp > 1) {
    const double gatherUs = collectiveUs(model, CollectiveKind::AllGather, activationBytes, groups.tensor);
    cost.tensorCommForwardUs += gatherUs;
    cost.tensorCommBackwardUs += gatherUs;
  }
  return cost;
}

} // namespace

namespace {

/// One unit ZeRO gathers and reduce-scatters as a whole (the embedding, a block, the head),
/// per micro-batch: its compute (tensor-parallel collectives included) and its collectives.
struct ZeroUnit {
  double forwardUs = 0, backwardUs = 0;
  double gatherUs = 0;   // all-gather of its weights
  double scatterUs = 0;  // reduce-scatter of its gradients
};

/// Which of ZeRO's collectives one micro-batch runs.
struct ZeroMicroBatch {
  bool gatherForward = false, gatherBackward = false, scatter = false;
};

/// ZeRO's collectives of one stage as executed: its micro-batches run forward then backward,
/// unit by unit (`units` in forward order), on one compute stream; the gathers and
/// reduce-scatters share one network channel in the order they are issued. A unit's gather is
/// issued when the unit `depth` places ahead of it starts computing (the first `depth` at the
/// phase's start), and its compute waits for it; a unit's reduce-scatter is issued when its
/// backward ends, so the last one runs after the compute (on the critical path of the last
/// micro-batch), and the next micro-batch's gathers queue behind the others. Compute overlapped
/// by the channel runs `slowdown` times slower. Returns the stage's time beyond its compute over
/// all `microBatches` (the slowdown and the waits): micro-batches beyond the fourth repeat the
/// steady third one.
double zeroExposedUs(const std::vector<ZeroUnit> &units, int64_t microBatches, int64_t depth,
                     double slowdown, const std::function<ZeroMicroBatch(int64_t)> &collectivesOf) {
  const int64_t n = int64_t(units.size());
  double computeFree = 0, commFree = 0, computeUs = 0;
  std::vector<double> gathered(size_t(n), 0.0);
  auto gather = [&](int64_t unit, double at, bool runs) {
    if (!runs)
      return;
    commFree = std::max(commFree, at) + units[size_t(unit)].gatherUs;
    gathered[size_t(unit)] = commFree;
  };
  auto compute = [&](double work, double start) {
    computeFree = start + work + (slowdown - 1.0) * std::clamp(commFree - start, 0.0, work);
    computeUs += work;
  };
  auto runMicroBatch = [&](ZeroMicroBatch run) {
    // Forward, unit 0 first; backward from the last unit.
    for (bool forward : {true, false}) {
      const bool gathers = forward ? run.gatherForward : run.gatherBackward;
      auto unitAt = [&](int64_t position) { return forward ? position : n - 1 - position; };
      std::fill(gathered.begin(), gathered.end(), 0.0);
      for (int64_t position = 0; position < std::min(depth, n); ++position)
        gather(unitAt(position), computeFree, gathers);
      for (int64_t position = 0; position < n; ++position) {
        const ZeroUnit &unit = units[size_t(unitAt(position))];
        const double start = std::max(computeFree, gathered[size_t(unitAt(position))]);
        // The prefetch is issued as this unit starts (FSDP's pre-forward/pre-backward hook).
        if (position + depth < n)
          gather(unitAt(position + depth), start, gathers);
        compute(forward ? unit.forwardUs : unit.backwardUs, start);
        if (!forward && run.scatter)
          commFree = std::max(commFree, computeFree) + unit.scatterUs;
      }
    }
  };
  double steadyUs = 0;
  for (int64_t microBatch = 0; microBatch < microBatches; ++microBatch) {
    const double before = computeFree;
    runMicroBatch(collectivesOf(microBatch));
    // From the fourth on, the micro-batches before the last repeat the third.
    if (microBatch == 2)
      steadyUs = computeFree - before;
    if (microBatch == 2 && microBatches > 4) {
      const double repeated = double(microBatches - 4);
      computeFree += repeated * steadyUs;
      commFree += repeated * steadyUs;
      double unitsUs = 0;
      for (const ZeroUnit &unit : units)
        unitsUs += unit.forwardUs + unit.backwardUs;
      computeUs += repeated * unitsUs;
      microBatch = microBatches - 2;
    }
  }
  return std::max(computeFree, commFree) - computeUs;
}

} // namespace

std::vector<StageCost> stageCosts(const TransformerShape &shape, const ParallelConfig &config,
                                  const TrainingSetup &setup, const CostModel &model) {
  const ParallelGroups groups = parallelGroups(config, model.cluster());
  const BytesPerParameter perParam = bytesPerParameter(setup);
  const DType dtype = setup.computeDtype;
  const double t = double(config.tp), d = double(config.dp);
  const double tokens = double(config.microBatch) * shape.seq;
  const double elementBytes = activationElementBytes(dtype);
  const double activationBytes = tokens * shape.hidden * elementBytes;
  const double slowdown = model.overlapSlowdown();

  // One kind of block (dense or MoE, with a cross-attention or not) per
  // micro-batch, everything included.
  struct Kind {
    BlockCost block;
    double recomputeUs = 0, recomputeFlops = 0, recomputeCommUs = 0;
    double backwardUs = 0;            // with recomputation
    ZeroUnit zero;                    // its compute and ZeRO collectives per micro-batch
    double blockParams = 0;               // one block's, synchronised over dp (whole, before tp)
    double params = 0, expertParams = 0;  // per rank: synchronised over dp / over the experts' replicas
  };
  const Group replicas = expertReplicaGroup(config.ep, groups.data);
  // A unit as ZeRO moves it: ZeRO-3's all-gather of its weights and ZeRO 2/3's reduce-scatter
  // of its gradients over the data-parallel group (the experts' over their replicas), which
  // zeroExposedUs places around its compute.
  auto zeroUnit = [&](double forwardUs, double backwardUs, double params, double expertParams) {
    auto over = [&](CollectiveKind collective, double bytesPerParam) {
      return collectiveUs(model, collective, params * bytesPerParam, groups.data) +
             collectiveUs(model, collective, expertParams * bytesPerParam, replicas);
    };
    return ZeroUnit{forwardUs, backwardUs,
                    config.zero >= 3 ? over(CollectiveKind::AllGather, perParam.weights) : 0.0,
                    config.zero >= 2 ? over(CollectiveKind::ReduceScatter, perParam.gradients) : 0.0};
  };
  auto kindOf = [&](bool moeBlock, bool crossBlock) {
    Kind kind;
    kind.block = blockCost(shape, config, setup, model, groups, moeBlock, crossBlock);
    const BlockCost &block = kind.block;
    // Recomputation repeats forward work inside backward.
    if (config.recompute == Recompute::Full) {
      kind.recomputeUs = block.forwardUs;
      kind.recomputeFlops = block.forwardFlops;
      kind.recomputeCommUs = block.tensorCommForwardUs;
    } else if (config.recompute == Recompute::Selective) {
      kind.recomputeUs = block.attentionCoreUs;
      kind.recomputeFlops = block.attentionCoreFlops;
    }
    kind.backwardUs = block.backwardUs + kind.recomputeUs;
    kind.blockParams = moeBlock ? shape.moe->blockParams : shape.layerParams;
    if (crossBlock)
      kind.blockParams += shape.crossAttentionParams;
    kind.params = kind.blockParams / t;
    kind.expertParams = moeBlock ? expertParamsPerRank(shape, config) : 0.0;
    kind.zero = zeroUnit(block.forwardUs + block.tensorCommForwardUs,
                         kind.backwardUs + block.tensorCommBackwardUs + kind.recomputeCommUs, kind.params,
                         kind.expertParams);
    return kind;
  };
  // Kinds by index: dense, MoE, dense with a cross-attention, MoE with one;
  // each made once, when a block of it exists.
  std::optional<Kind> kinds[4];
  auto kindIndex = [&](int64_t block) {
    return (shape.moe && shape.moe->contains(block) ? 1 : 0) + (hasCrossAttention(shape, block) ? 2 : 0);
  };
  for (int64_t block = 0; block < shape.layers; ++block)
    if (int index = kindIndex(block); !kinds[index])
      kinds[index] = kindOf(index % 2 == 1, index >= 2);

  // Pipeline p2p: each micro-batch sends its activations forward and their
  // gradient backward once per virtual chunk. With tp > 1 across nodes Megatron
  // splits the tensor over the TP ranks and all-gathers it on arrival (SC21
  // section 4.1, scatter/gather).
  double p2pUs = 0;
  if (config.pp > 1) {
    bool scatterGather = config.tp > 1 && groups.pipelineHop.nodes > 1;
    double sendBytes = scatterGather ? activationBytes / t : activationBytes;
    p2pUs = collectiveUs(model, CollectiveKind::SendRecv, sendBytes, groups.pipelineHop);
    if (scatterGather)
      p2pUs += collectiveUs(model, CollectiveKind::AllGather, activationBytes, groups.tensor);
    p2pUs *= 2.0 * config.virtualStages;
  }

  std::vector<StageCost> stages;
  for (int64_t stage = 0; stage < config.pp; ++stage) {
    StageCost cost;
    auto [first, layers] = stageLayers(shape, config, stage);
    cost.firstLayer = first;
    cost.layers = layers;
    cost.hasEmbedding = stage == 0;
    cost.hasHead = isLastStage(stage, config);
    // A stage of decoder blocks passes the encoder's output on with the
    // decoder's hidden states (and their gradients back): two tensors a hop.
    cost.pipelineCommUs = crossAttentionIn(shape, first, layers) > 0 ? 2.0 * p2pUs : p2pUs;
    int64_t count[4] = {0, 0, 0, 0};
    for (int64_t block = first; block < first + layers; ++block)
      ++count[kindIndex(block)];
    double params = 0, expertParams = 0;
    std::vector<ZeroUnit> zeroUnits;  // in ready order until reversed
    auto add = [&](const Kind &kind, double l) {
      cost.forwardUs += l * kind.block.forwardUs;
      cost.recomputeUs += l * kind.recomputeUs;
      cost.backwardUs += l * kind.block.backwardUs + l * kind.recomputeUs;
      cost.tensorCommUs += l * (kind.block.tensorCommForwardUs + kind.block.tensorCommBackwardUs +
                                kind.recomputeCommUs);
      cost.modelFlops += l * 3 * kind.block.forwardFlops;
      cost.flops += l * (3 * kind.block.forwardFlops + kind.block.backwardRecomputeFlops + kind.recomputeFlops);
      params += l * kind.blockParams / t;
      expertParams += l * kind.expertParams;
    };
    for (int index = 0; index < 4; ++index)
      if (count[index] > 0)
        add(*kinds[index], double(count[index]));

    // Ready order for the data-parallel sync: head first, blocks last to first.
    if (cost.hasHead) {
      double headForward = 0, headBackward = 0, headFlops = 0;
      if (shape.vocab > 0) {
        // Vocabulary-parallel output GEMM, fp32 cross-entropy over the logits
        // (read and written about three times forward and back).
        headForward = gemmUs(model, tokens, shape.vocab / t, shape.hidden, 1, dtype) +
                      memoryUs(model, 3.0 * tokens * shape.vocab / t * 4.0);
        headBackward = gemmUs(model, tokens, shape.hidden, shape.vocab / t, 1, dtype) +
                       gemmUs(model, shape.hidden, shape.vocab / t, tokens, 1, dtype) +
                       memoryUs(model, 3.0 * tokens * shape.vocab / t * 4.0);
        headFlops = 2.0 * tokens * shape.vocab / t * shape.hidden;
      }
      headForward += memoryUs(model, 2.0 * activationBytes);  // final layer norm
      headBackward += memoryUs(model, 4.0 * activationBytes);
      cost.forwardUs += headForward;
      cost.backwardUs += headBackward;
      cost.modelFlops += 3 * headFlops;
      cost.flops += 3 * headFlops;
      // Tied embeddings with pp > 1: the head holds the word embedding's copy
      // (synchronised over dp with the head, and with the first stage's below).
      const double headParams = (shape.headParams + tiedCopyParams(shape, config)) / t;
      cost.units.push_back({"head", headBackward, headForward, headParams});
      zeroUnits.push_back(zeroUnit(headForward, headBackward, headParams, 0.0));
      params += headParams;
    }
    for (int64_t layer = first + layers - 1; layer >= first; --layer) {
      const Kind &kind = *kinds[kindIndex(layer)];
      cost.units.push_back({"block." + std::to_string(layer), kind.backwardUs, kind.block.forwardUs,
                            kind.params, kind.expertParams});
      zeroUnits.push_back(kind.zero);
    }
    if (cost.hasEmbedding) {
      // Token lookup, position add and dropout forward; a scatter-add backward
      // (memory-bound), and the vocabulary-parallel embedding's all-reduce.
      double embeddingForward = memoryUs(model, 3.0 * activationBytes);
      double embeddingBackward = memoryUs(model, 3.0 * activationBytes);
      cost.forwardUs += embeddingForward;
      cost.backwardUs += embeddingBackward;
      const double lookupAllReduceUs =
          collectiveUs(model, CollectiveKind::AllReduce, activationBytes, groups.tensor);
      cost.tensorCommUs += lookupAllReduceUs;
      cost.units.push_back({"embedding", embeddingBackward, embeddingForward, shape.embeddingParams / t});
      zeroUnits.push_back(
          zeroUnit(embeddingForward + lookupAllReduceUs, embeddingBackward, shape.embeddingParams / t, 0.0));
      params += shape.embeddingParams / t;
    }
    // ZeRO 2/3: the stage's gathers and reduce-scatters as executed (zeroExposedUs), unit by
    // unit in forward order. ZeRO 2 (DeepSpeed) reduce-scatters every micro-batch; ZeRO 3
    // gathers and reduce-scatters every micro-batch or once a step (setup.zero3Regather).
    if (config.zero >= 2) {
      std::reverse(zeroUnits.begin(), zeroUnits.end());
      const int64_t m = config.microBatches;
      const bool perStep = setup.zero3Regather == Zero3Regather::PerStep;
      auto collectivesOf = [&](int64_t microBatch) -> ZeroMicroBatch {
        if (config.zero < 3)
          return {false, false, true};
        if (!perStep)
          return {true, true, true};
        return {microBatch == 0, false, microBatch == m - 1};
      };
      cost.zeroCommUs =
          zeroExposedUs(zeroUnits, m, setup.zero3PrefetchDepth, slowdown, collectivesOf) / double(m);
    }
    // The optimizer step over this rank's shard: read the gradient and the
    // state, write the state and the 16-bit (or fp32) weights.
    double shard = params / (config.zero >= 1 ? d : 1.0) +
                   expertParams / (config.zero >= 1 ? double(replicas.ranks) : 1.0);
    cost.optimizerUs =
        memoryUs(model, shard * (perParam.gradients + 2 * perParam.optimizer + perParam.weights));
    // Megatron all-reduces the tied embedding's gradient between the first and
    // the last stage (same tp and dp rank: a group of two, one pipeline hop's
    // placement apart) after backward; fp32 main gradients, as the dp sync's.
    if (tiedCopyParams(shape, config) > 0 && (cost.hasEmbedding || cost.hasHead))
      cost.embeddingSyncUs = collectiveUs(model, CollectiveKind::AllReduce,
                                          tiedCopyParams(shape, config) / t * 4.0, groups.pipelineHop);
    stages.push_back(std::move(cost));
  }
  return stages;
}

std::vector<int64_t> decompositionDegrees(const TransformerShape &shape, const ParallelConfig &config) {
  std::vector<int64_t> degrees;
  const int64_t tokens = config.microBatch * shape.seq;
  for (int64_t chunks : {1, 2, 4, 8})
    if (tokens % chunks == 0)
      degrees.push_back(chunks);
  return degrees;
}

Decomposition chooseDecomposition(const TransformerShape &shape, const ParallelConfig &config,
                                  const TrainingSetup &setup, const CostModel &model) {
  Decomposition best;
  if (config.tp < 2)
    return best;
  const ParallelGroups groups = parallelGroups(config, model.cluster());
  auto blockUs = [&](const Decomposition &d) {
    ParallelConfig candidate = config;
    candidate.decomposition = d;
    auto us = [&](bool crossAttention) {
      BlockCost cost = blockCost(shape, candidate, setup, model, groups, false, crossAttention);
      return cost.forwardUs + cost.backwardUs + cost.tensorCommForwardUs + cost.tensorCommBackwardUs;
    };
    // Cross-attentions take the attention degrees too: both kinds, by their count.
    if (shape.crossAttentionBlocks == 0)
      return us(false);
    return double(shape.layers - shape.crossAttentionBlocks) * us(false) +
           double(shape.crossAttentionBlocks) * us(true);
  };
  // The regions' and phases' times add up: each takes its fastest degree alone.
  const bool denseMlp = shape.moeBlocks() < shape.layers;
  for (int64_t Decomposition::*field : {&Decomposition::attentionForward, &Decomposition::attentionBackward,
                                        &Decomposition::mlpForward, &Decomposition::mlpBackward}) {
    // Without a dense block there is no MLP region to decompose.
    if (!denseMlp && (field == &Decomposition::mlpForward || field == &Decomposition::mlpBackward))
      continue;
    double bestUs = 0;
    for (int64_t chunks : decompositionDegrees(shape, config)) {
      Decomposition candidate;
      candidate.*field = chunks;
      double us = blockUs(candidate);
      if (chunks == 1 || us < bestUs * (1 - 1e-9))
        bestUs = us, best.*field = chunks;
    }
  }
  return best;
}

std::vector<int64_t> expertParallelDegrees(const TransformerShape &shape, const ParallelConfig &config,
                                           const Cluster &cluster) {
  if (!shape.moe)
    return {1};
  const Group data = parallelGroups(config, cluster).data;
  std::vector<int64_t> degrees;
  for (int64_t ep = 1; ep <= shape.moe->layer.experts; ++ep)
    if (shape.moe->layer.experts % ep == 0 && config.dp % ep == 0 &&
        checkExpertPlacement(ep, data).empty())
      degrees.push_back(ep);
  return degrees;
}

MoeLayerChoice chooseMoeSchedule(const TransformerShape &shape, const ParallelConfig &config,
                                 const TrainingSetup &setup, const CostModel &model,
                                 const std::vector<CompressionMethod> &compressions) {
  if (!shape.moe)
    return {};
  return fastestMoePhases(model, moeLayerShape(shape, config), config.ep,
                          parallelGroups(config, model.cluster()).data, setup.moeImbalance,
                          setup.computeDtype, compressions, expertShardGroup(config, model.cluster()))
      .choice;
}

std::vector<int64_t> balanceStages(const TransformerShape &shape, const ParallelConfig &config,
                                   const TrainingSetup &setup, const CostModel &model) {
  if (shape.moe || shape.crossAttentionBlocks > 0)
    return {};
  const int64_t p = config.pp;
  // Per-micro-batch time of a stage with no blocks, and what one block adds.
  ParallelConfig probe = config;
  probe.virtualStages = 1;
  probe.stageLayers.assign(p, 0);
  std::vector<StageCost> empty = stageCosts(shape, probe, setup, model);
  probe.stageLayers.assign(p, 1);
  std::vector<StageCost> one = stageCosts(shape, probe, setup, model);
  // The most blocks each stage holds in memory: beyond its first block (full
  // recomputation adds one block's activations once) memory grows by the same
  // amount per block.
  std::vector<int64_t> most(p, 0);
  for (int64_t s = 0; s < p; ++s) {
    MemoryBreakdown oneBlock = stageMemory(shape, config, setup, model, s, 0, 1);
    if (!oneBlock.fits())
      return {};  // every stage runs at least one block (the pipeline pass cuts between blocks)
    double perBlock =
        stageMemory(shape, config, setup, model, s, 0, 2).perGpuBytes() - oneBlock.perGpuBytes();
    double room = oneBlock.capacityBytes - oneBlock.perGpuBytes();
    most[s] = oneBlock.capacityBytes <= 0 || perBlock <= 0
                  ? shape.layers
                  : 1 + int64_t(std::min(std::floor(room / perBlock), double(shape.layers)));
  }
  std::vector<int64_t> layers(p, 1);
  for (int64_t placed = p; placed < shape.layers; ++placed) {
    int64_t best = -1;
    double bestUs = 0;
    for (int64_t s = 0; s < p; ++s) {
      double blockUs = one[s].perMicroBatchUs() - empty[s].perMicroBatchUs();
      double us = empty[s].perMicroBatchUs() + double(layers[s] + 1) * blockUs;
      // Strictly less: ties go to the earlier stage, deterministically.
      if (layers[s] < most[s] && (best < 0 || us < bestUs))
        best = s, bestUs = us;
    }
    if (best < 0)
      return {};
    ++layers[best];
  }
  return layers;
}

PipelineTime pipelineTime(const std::vector<StageCost> &stages, int64_t microBatches,
                          int64_t virtualStages) {
  PipelineTime time;
  if (stages.empty())
    return time;
  double slowest = 0, sum = 0;
  for (const StageCost &stage : stages) {
    slowest = std::max(slowest, stage.perMicroBatchUs());
    sum += stage.perMicroBatchUs();
  }
  double mean = sum / double(stages.size());
  // Narayanan et al. SC21, section 2.2: the bubble is (p - 1) / V micro-batch
  // times; a slower stage paces every micro-batch.
  time.bubbleUs = double(stages.size() - 1) / double(virtualStages) * mean;
  time.totalUs = double(microBatches) * slowest + time.bubbleUs;
  return time;
}

}  // namespace zen::cost

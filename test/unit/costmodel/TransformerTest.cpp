//===- TransformerTest.cpp - large-model costs of real-model shapes -------===//
//
// Grouped-query attention, gated MLPs, RMSNorm, tied embeddings and
// cross-attention blocks in the large-model cost model (costmodel/lib/
// Transformer.cpp): each test compares against a closed form, Megatron-LM's
// where it has one.
//
//===----------------------------------------------------------------------===//
#include "zen/CostModel/Transformer.h"

#include <gtest/gtest.h>

using namespace zen::cost;

namespace {

/// A Llama-style decoder without a vocabulary (so the head adds no FLOPs):
/// 4 blocks of hidden 1024, 16 heads of 64, ffn 4096, sequence 1024.
TransformerShape decoder() {
  TransformerShape shape;
  shape.family = "gpt";
  shape.layers = 4;
  shape.hidden = 1024;
  shape.heads = 16;
  shape.ffn = 4096;
  shape.seq = 1024;
  shape.layerParams = 12.0 * 1024 * 1024;
  shape.headParams = 1024;
  return shape;
}

ParallelConfig config(int64_t tp, int64_t pp) {
  ParallelConfig c;
  c.tp = tp;
  c.pp = pp;
  return c;
}

CostModel a100() { return CostModel(withNodes(loadCluster("a100x64"), 1)); }

double modelFlops(const TransformerShape &shape, const ParallelConfig &c) {
  double flops = 0;
  for (const StageCost &stage : stageCosts(shape, c, TrainingSetup{}, a100()))
    flops += stage.modelFlops;
  return flops;
}

double activations(const TransformerShape &shape, const ParallelConfig &c) {
  return memoryPerGpu(shape, c, TrainingSetup{}, a100()).activationsBytes;
}

/// Megatron-LM's model FLOPs of one iteration (training.py,
/// num_floating_point_operations, without the vocabulary and causal terms):
/// 12 b s L h^2 ((1 + g/a + s/h) + (ffn/h) x 3/2 if gated), per tp rank.
double megatronFlops(const TransformerShape &shape, int64_t tp) {
  const double h = double(shape.hidden), s = double(shape.seq);
  const double g = double(shape.keyValueHeads()), a = double(shape.heads);
  const double gated = shape.gatedMlp() ? 1.5 : 1.0;
  return 12.0 * s * double(shape.layers) * h * h *
         ((1 + g / a + s / h) + double(shape.ffn) / h * gated) / double(tp);
}


TEST(TransformerCost, GroupedQueryAttentionNarrowsTheQkvGemmByTheMissingKeyValueHeads) {
  TransformerShape mha = decoder(), gqa = decoder();
  gqa.kvHeads = 4;
  EXPECT_DOUBLE_EQ(modelFlops(mha, config(1, 1)), megatronFlops(mha, 1));
  EXPECT_DOUBLE_EQ(modelFlops(gqa, config(1, 1)), megatronFlops(gqa, 1));
  // K and V lose (a - g) heads of 64 columns each: 3 passes x 2 tokens h
  // x 2 (a - g) headDim per block, over the tp ranks.
  const double tokens = 1024, h = 1024, t = 2;
  EXPECT_DOUBLE_EQ(modelFlops(mha, config(2, 1)) - modelFlops(gqa, config(2, 1)),
                   4 * 3 * 2 * tokens * h * 2 * (16 - 4) * 64 / t);
  // Their K and V activations shrink alike: Korthikanti's 8 inside the
  // attention's TP region becomes 4 + 4 g/a.
  EXPECT_DOUBLE_EQ(activations(mha, config(2, 1)) - activations(gqa, config(2, 1)),
                   4 * tokens * h * 4 * (1 - 4.0 / 16) / t);
  // Multi-query attention: one K/V head.
  TransformerShape mqa = decoder();
  mqa.kvHeads = 1;
  EXPECT_DOUBLE_EQ(modelFlops(mqa, config(1, 1)), megatronFlops(mqa, 1));
}

TEST(TransformerCost, TensorParallelismMustDivideTheKeyValueHeads) {
  TransformerShape shape = decoder();
  shape.kvHeads = 4;
  TrainingSetup setup;
  EXPECT_EQ(checkConfig(shape, config(4, 1), setup, 4), "");
  EXPECT_EQ(checkConfig(shape, config(8, 1), setup, 8), "tp 8 does not divide the 4 key/value heads");
  shape.kvHeads = 0;  // multi-head: the heads decide
  EXPECT_EQ(checkConfig(shape, config(8, 1), setup, 8), "");
}

TEST(TransformerCost, TheGlobalBatchAndThePipelineStepsAreBounded) {
  // 4 blocks, pp 2: pp x V x micro-batches steps, each simulated and named in the plan.
  TransformerShape shape = decoder();
  ParallelConfig c = config(1, 2);
  TrainingSetup setup;
  c.microBatches = setup.globalBatch = kMaxPipelineSteps / 2;
  EXPECT_EQ(checkConfig(shape, c, setup, 2), "");
  c.microBatches = setup.globalBatch = kMaxPipelineSteps / 2 + 1;
  EXPECT_EQ(checkConfig(shape, c, setup, 2),
            "pp 2 x 1 virtual stages x 131073 micro-batches (global batch 131073 over dp 1 x micro-batch 1)"
            " = 262146 pipeline steps, more than the limit of 262144");
  // Interleaving multiplies the steps too.
  c.virtualStages = 2;
  c.microBatches = setup.globalBatch = kMaxPipelineSteps / 4;
  EXPECT_EQ(checkConfig(shape, c, setup, 2), "");
  c.microBatches = setup.globalBatch = kMaxPipelineSteps / 2;
  EXPECT_NE(checkConfig(shape, c, setup, 2).find("= 524288 pipeline steps"), std::string::npos);
  // The global batch itself, whatever divides it.
  c = config(1, 1);
  c.dp = 2;
  c.microBatch = kMaxGlobalBatch;
  setup.globalBatch = 2 * kMaxGlobalBatch;
  EXPECT_EQ(checkConfig(shape, c, setup, 2),
            "the global batch 2147483648 is not from 1 to the limit of 1073741824 samples");
}

TEST(TransformerCost, TensorGroupsAcrossNodesArePricedOnTheNetwork) {
  // 3 nodes of 8: tp innermost, so tp 3 puts ranks 6, 7, 8 in one group over two nodes.
  const Cluster cluster = withNodes(loadCluster("a100x64"), 3);
  auto tensor = [&](int64_t tp) {
    ParallelConfig c = config(tp, 1);
    c.dp = 24 / tp;
    return parallelGroups(c, cluster).tensor;
  };
  for (auto [tp, nodes] : {std::pair<int64_t, int64_t>{1, 1}, {2, 1}, {3, 2}, {4, 1}, {6, 2}, {8, 1},
                           {12, 2}, {24, 3}}) {
    EXPECT_EQ(tensor(tp).ranks, tp);
    EXPECT_EQ(tensor(tp).nodes, nodes) << "tp " << tp;
  }
  // Its all-reduce then runs at the network's rate, not NVLink's.
  const CostModel model(cluster);
  EXPECT_GT(model.collective(CollectiveKind::AllReduce, 64e6, tensor(3)).timeUs,
            2 * model.collective(CollectiveKind::AllReduce, 64e6, Group{3, 1}).timeUs);
}

TEST(TransformerCost, GatedMlpRunsThreeGemmsAndKeepsThreeFfnWideActivations) {
  TransformerShape gelu = decoder(), swiglu = decoder();
  swiglu.mlp = "swiglu";
  swiglu.ffn = gelu.ffn = 2816;
  EXPECT_DOUBLE_EQ(modelFlops(swiglu, config(1, 1)), megatronFlops(swiglu, 1));
  EXPECT_DOUBLE_EQ(modelFlops(gelu, config(1, 1)), megatronFlops(gelu, 1));
  // The third GEMM: h x ffn more per token, 3 passes, 4 blocks, over tp.
  const double tokens = 1024, h = 1024, f = 2816, t = 2;
  EXPECT_DOUBLE_EQ(modelFlops(swiglu, config(2, 1)) - modelFlops(gelu, config(2, 1)),
                   4 * 3 * 2 * tokens * h * f / t);
  // Activations: gate, up and their product (6 f bytes a token) against the
  // activation's input and the second GEMM's (4 f): Korthikanti's 16 ffn/4h
  // becomes 24 ffn/4h inside the TP region.
  EXPECT_DOUBLE_EQ(activations(swiglu, config(2, 1)) - activations(gelu, config(2, 1)),
                   4 * tokens * 2 * f / t);
  // SiLU and the product move more bytes than bias-GeLU, and the backward
  // all-reduce pairs with the wider fused gate/up GEMM: slower, same TP traffic.
  const StageCost a = stageCosts(gelu, config(2, 1), TrainingSetup{}, a100()).front();
  const StageCost b = stageCosts(swiglu, config(2, 1), TrainingSetup{}, a100()).front();
  EXPECT_GT(b.forwardUs, a.forwardUs);
  EXPECT_GT(b.backwardUs, a.backwardUs);
  swiglu.mlp = "geglu";
  EXPECT_DOUBLE_EQ(modelFlops(swiglu, config(1, 1)), megatronFlops(swiglu, 1));
}

TEST(TransformerCost, RmsNormCostsAndKeepsWhatLayerNormDoes) {
  // Both read the input and write the output (backward: input, gradient,
  // output gradient) and keep their input; they differ by the mean and the
  // bias, which the element counts do not resolve for either.
  TransformerShape layerNorm = decoder(), rmsNorm = decoder();
  rmsNorm.norm = "rmsnorm";
  for (bool sequenceParallel : {false, true}) {
    ParallelConfig c = config(2, 2);
    c.sequenceParallel = sequenceParallel;
    const StageCost a = stageCosts(layerNorm, c, TrainingSetup{}, a100()).back();
    const StageCost b = stageCosts(rmsNorm, c, TrainingSetup{}, a100()).back();
    EXPECT_EQ(a.forwardUs, b.forwardUs);
    EXPECT_EQ(a.backwardUs, b.backwardUs);
    EXPECT_EQ(activations(layerNorm, c), activations(rmsNorm, c));
  }
}

TEST(TransformerCost, RotaryPositionsRotateQueriesAndKeysInPlace) {
  TransformerShape learned = decoder(), rotary = decoder();
  learned.kvHeads = rotary.kvHeads = 4;
  rotary.positions = "rotary";
  const CostModel model = a100();
  const StageCost a = stageCosts(learned, config(1, 1), TrainingSetup{}, model).front();
  const StageCost b = stageCosts(rotary, config(1, 1), TrainingSetup{}, model).front();
  // Q (h) and K (h g/a) read and written, 16-bit, per token and block;
  // backward twice that.
  const GpuSpec &gpu = model.cluster().gpu;
  const double rotaryUs =
      4 * (2.0 * 1024 * (1024 + 1024 * 4 / 16) * 2) / (gpu.hbmBandwidthGBps * gpu.memoryEfficiency * 1e3);
  EXPECT_NEAR(b.forwardUs - a.forwardUs, rotaryUs, rotaryUs * 1e-9);
  EXPECT_NEAR(b.backwardUs - a.backwardUs, 2 * rotaryUs, rotaryUs * 1e-9);
  EXPECT_EQ(a.modelFlops, b.modelFlops);
  EXPECT_EQ(activations(learned, config(1, 1)), activations(rotary, config(1, 1)));
}

TEST(TransformerCost, TiedEmbeddingsKeepACopyOnTheLastStageAndAllReduceItsGradient) {
  TransformerShape shape = decoder();
  shape.vocab = 32000;
  shape.embeddingParams = 32000.0 * 1024;
  shape.tiedEmbeddings = true;
  const CostModel model = a100();
  const TrainingSetup setup;
  const double t = 2, copy = 32000.0 * 1024;
  // pp 2: the last stage (logits, and the copy) is the fullest; it holds its
  // two blocks, the final norm and the word embedding's copy, 2 bytes each.
  const MemoryBreakdown memory = memoryPerGpu(shape, config(2, 2), setup, model);
  EXPECT_EQ(memory.stage, 1);
  EXPECT_DOUBLE_EQ(memory.weightsBytes, (2 * shape.layerParams + shape.headParams + copy) / t * 2);
  EXPECT_DOUBLE_EQ(memory.optimizerBytes, (2 * shape.layerParams + shape.headParams + copy) / t * 12);
  // As much as an untied output matrix (which the IR counts in the head).
  TransformerShape untied = shape;
  untied.tiedEmbeddings = false;
  untied.headParams += copy;
  EXPECT_DOUBLE_EQ(memoryPerGpu(untied, config(2, 2), setup, model).perGpuBytes(), memory.perGpuBytes());
  untied.headParams = shape.headParams;
  // One all-reduce of the copy's fp32 gradient over the first and the last
  // stage; the stages between take no part.
  const std::vector<StageCost> stages = stageCosts(shape, config(2, 4), setup, model);
  const double allReduceUs =
      model.collective(CollectiveKind::AllReduce, copy / t * 4, Group{2, 1}).timeUs;
  EXPECT_GT(allReduceUs, 0);
  EXPECT_DOUBLE_EQ(stages.front().embeddingSyncUs, allReduceUs);
  EXPECT_DOUBLE_EQ(stages.back().embeddingSyncUs, allReduceUs);
  EXPECT_EQ(stages[1].embeddingSyncUs, 0);
  EXPECT_EQ(stages[2].embeddingSyncUs, 0);
  // The copy's gradient joins the last stage's data-parallel sync.
  EXPECT_DOUBLE_EQ(stages.back().units.front().gradientElements, (shape.headParams + copy) / t);
  // pp 1: one matrix serves both; nothing changes.
  const StageCost tiedOne = stageCosts(shape, config(2, 1), setup, model).front();
  const StageCost untiedOne = stageCosts(untied, config(2, 1), setup, model).front();
  EXPECT_EQ(tiedOne.embeddingSyncUs, 0);
  EXPECT_EQ(tiedOne.optimizerUs, untiedOne.optimizerUs);
  EXPECT_EQ(memoryPerGpu(shape, config(2, 1), setup, model).perGpuBytes(),
            memoryPerGpu(untied, config(2, 1), setup, model).perGpuBytes());
}

TEST(TransformerCost, CrossAttentionBlocksAddASecondAttentionOnTheDecoderStages) {
  // Two encoder blocks, then two decoder blocks with a cross-attention each.
  TransformerShape shape = decoder();
  shape.family = "encoder-decoder";
  shape.crossAttentionBlocks = 2;
  shape.crossAttentionParams = 4.0 * 1024 * 1024 + 2 * 1024;
  const CostModel model = a100();
  TrainingSetup setup;
  setup.attention = AttentionKernel::Unfused;  // Korthikanti's count keeps the scores
  const double tokens = 1024, s = 1024, h = 1024, a = 16, t = 2, headDim = 64;
  const std::vector<StageCost> stages = stageCosts(shape, config(2, 2), setup, model);
  // Q (h -> h) on the block's tokens, K/V (h -> 2h) on the encoder's output,
  // the scores and context of every head, the output (h -> h): 3 passes.
  const double crossForward =
      (2 * tokens * h * h + 2 * tokens * h * 2 * h + 2 * 2 * s * s * headDim * a + 2 * tokens * h * h) / t;
  EXPECT_DOUBLE_EQ(stages[1].modelFlops - stages[0].modelFlops, 2 * 3 * crossForward);
  EXPECT_DOUBLE_EQ(modelFlops(shape, config(2, 2)), megatronFlops(shape, 2) + 2 * 3 * crossForward);
  // A third TP region: one more reduce forward, two backward (Q's input
  // gradient and the encoder output's).
  EXPECT_GT(stages[1].tensorCommUs, stages[0].tensorCommUs);
  // The decoder stage passes the encoder's output on with its hidden states.
  EXPECT_DOUBLE_EQ(stages[1].pipelineCommUs, 2 * stages[0].pipelineCommUs);
  // The decoder stage is the fullest (one micro-batch in flight on each):
  // its blocks' and cross-attentions' parameters, Korthikanti's activations
  // for both attentions and the encoder's output kept once.
  const MemoryBreakdown memory = memoryPerGpu(shape, config(2, 2), setup, model);
  EXPECT_EQ(memory.stage, 1);
  EXPECT_DOUBLE_EQ(memory.weightsBytes,
                   (2 * shape.layerParams + 2 * shape.crossAttentionParams + shape.headParams) / t * 2);
  const double sbh = tokens * h, scores = 5 * a * s / (h * t);
  EXPECT_DOUBLE_EQ(memory.activationsBytes,
                   2 * sbh * (10 + 24 / t + scores) + 2 * sbh * (5 + 8 / t + scores) + 2 * sbh);
  // Its gradients sync with the decoder blocks.
  EXPECT_DOUBLE_EQ(stages[1].units[1].gradientElements,
                   (shape.layerParams + shape.crossAttentionParams) / t);
  // The blocks differ: the stages keep the even split.
  EXPECT_TRUE(balanceStages(shape, config(2, 2), setup, model).empty());
}

TEST(TransformerCost, FlashAttentionKeepsNoScoresAndRecomputesThemInBackward) {
  const TransformerShape shape = decoder();
  const CostModel model = a100();
  TrainingSetup flash, unfused;
  unfused.attention = AttentionKernel::Unfused;
  const double sbh = 1024.0 * 1024, s = 1024, h = 1024, a = 16, headDim = 64, layers = 4;
  // Unfused attention keeps Korthikanti's 5 a s / h bytes per token of scores, softmax and
  // dropout mask in each block; FlashAttention none, so selective recomputation saves nothing.
  EXPECT_DOUBLE_EQ(activations(shape, config(1, 1)),
                   memoryPerGpu(shape, config(1, 1), flash, model).activationsBytes);
  EXPECT_DOUBLE_EQ(memoryPerGpu(shape, config(1, 1), unfused, model).activationsBytes -
                       memoryPerGpu(shape, config(1, 1), flash, model).activationsBytes,
                   layers * sbh * 5 * a * s / h);
  ParallelConfig selective = config(1, 1);
  selective.recompute = Recompute::Selective;
  EXPECT_DOUBLE_EQ(memoryPerGpu(shape, selective, flash, model).activationsBytes,
                   memoryPerGpu(shape, config(1, 1), flash, model).activationsBytes);
  const StageCost flashStage = stageCosts(shape, selective, flash, model).front();
  const StageCost unfusedStage = stageCosts(shape, selective, unfused, model).front();
  EXPECT_EQ(flashStage.recomputeUs, 0.0);
  EXPECT_GT(unfusedStage.recomputeUs, 0.0);
  // The scores never go through memory: a faster forward. Backward recomputes them: the scores
  // GEMM once more per block, executed but no model FLOPs (selective recomputation's unfused
  // repeat was both GEMMs of the core).
  EXPECT_LT(flashStage.forwardUs, unfusedStage.forwardUs);
  EXPECT_DOUBLE_EQ(flashStage.modelFlops, unfusedStage.modelFlops);
  EXPECT_DOUBLE_EQ(flashStage.flops - flashStage.modelFlops, layers * 2 * s * s * headDim * a);
  EXPECT_DOUBLE_EQ(unfusedStage.flops - unfusedStage.modelFlops, layers * 2 * 2 * s * s * headDim * a);
}

/// decoder() over 16 data-parallel ranks on 16 one-V100 nodes joined by 10 GbE, ZeRO 3, eight
/// micro-batches of one sample: the network is far slower than the compute.
struct Zero3Case {
  TransformerShape shape = decoder();
  CostModel model{withNodes(loadCluster("v100x16-10gbe"), 16)};
  ParallelConfig config;
  TrainingSetup setup;
  Zero3Case() {
    config.dp = 16;
    config.zero = 3;
    config.microBatches = 8;
    setup.globalBatch = 128;
    setup.computeDtype = DType::F16;
  }
  StageCost stage() const { return stageCosts(shape, config, setup, model).front(); }
  double collectiveUs(CollectiveKind kind, double bytes) const {
    return model.collective(kind, bytes, Group{16, 16}).timeUs;
  }
};

TEST(TransformerCost, Zero3GathersEveryMicroBatchOrOncePerStepOverOneNetworkChannel) {
  Zero3Case c;
  ASSERT_EQ(checkConfig(c.shape, c.config, c.setup, 16), "");
  const double m = 8, params = c.shape.layerParams, compute = c.stage().forwardUs + c.stage().backwardUs;
  // Per block: its 16-bit weights gathered, its gradients (16-bit under fp16) reduce-scattered;
  // the head's 1024 parameters too (no embedding parameters here).
  const double gather = 4 * c.collectiveUs(CollectiveKind::AllGather, 2 * params) +
                        c.collectiveUs(CollectiveKind::AllGather, 2 * 1024.0);
  const double scatter = 4 * c.collectiveUs(CollectiveKind::ReduceScatter, 2 * params) +
                         c.collectiveUs(CollectiveKind::ReduceScatter, 2 * 1024.0);
  ASSERT_GT(gather, 5 * compute);  // network-bound
  // DeepSpeed ZeRO-3 / FULL_SHARD: every micro-batch gathers forward and backward and
  // reduce-scatters, all on the one channel; the step lasts at least that and at most that
  // with the compute (slowed by overlap) run serially after it.
  const double perMicroBatch = m * (c.stage().zeroCommUs + compute);
  EXPECT_GE(perMicroBatch, m * (2 * gather + scatter));
  EXPECT_LE(perMicroBatch, m * (2 * gather + scatter) + c.model.overlapSlowdown() * m * compute);
  // Once a step: one gather, one reduce-scatter.
  c.setup.zero3Regather = Zero3Regather::PerStep;
  const double perStep = m * (c.stage().zeroCommUs + compute);
  EXPECT_GE(perStep, gather + scatter);
  EXPECT_LE(perStep, gather + scatter + c.model.overlapSlowdown() * m * compute);
  // ... at ZeRO 1's memory for the weights and the accumulated gradients (2 + 2 bytes, fp16).
  const MemoryBreakdown memory = memoryPerGpu(c.shape, c.config, c.setup, c.model);
  const double all = 4 * params + 1024;
  EXPECT_DOUBLE_EQ(memory.weightsBytes, 2 * all);
  EXPECT_DOUBLE_EQ(memory.gradientsBytes, 2 * all);
  EXPECT_DOUBLE_EQ(memory.optimizerBytes, 12 * all / 16);
  c.setup.zero3Regather = Zero3Regather::PerMicroBatch;
  EXPECT_DOUBLE_EQ(memoryPerGpu(c.shape, c.config, c.setup, c.model).weightsBytes, 2 * all / 16);
}

TEST(TransformerCost, Zero3LastReduceScatterRunsAfterTheCompute) {
  // One A100 node, a compute-bound step: the gathers hide behind the blocks, but the first
  // block's reduce-scatter is issued as its backward ends and only the embedding's backward is
  // left to hide it.
  const TransformerShape shape = decoder();
  const CostModel model = a100();
  ParallelConfig c = config(1, 1);
  c.dp = 8;
  c.zero = 3;
  c.microBatch = 4;
  TrainingSetup setup;
  setup.globalBatch = 32;
  const StageCost stage = stageCosts(shape, c, setup, model).front();
  const double blockScatter =
      model.collective(CollectiveKind::ReduceScatter, 4 * shape.layerParams, Group{8, 1}).timeUs;
  ASSERT_EQ(stage.units.back().name, "embedding");
  ASSERT_LT(stage.units.back().backwardUs, blockScatter);
  EXPECT_GE(stage.zeroCommUs, blockScatter - stage.units.back().backwardUs);
}

TEST(TransformerCost, Zero3PrefetchDepthBuffersAUnitEachAndNeverSlows) {
  Zero3Case c;
  c.shape.layers = 8;
  c.shape.vocab = 32000;
  c.shape.embeddingParams = 32000.0 * 1024;  // a unit larger than a block
  c.model = CostModel(withNodes(loadCluster("a100x64"), 2));
  c.setup.computeDtype = DType::BF16;
  std::vector<double> exposed, buffers;
  for (int64_t depth : {1, 2, 3}) {
    c.setup.zero3PrefetchDepth = depth;
    exposed.push_back(c.stage().zeroCommUs);
    buffers.push_back(memoryPerGpu(c.shape, c.config, c.setup, c.model).buffersBytes);
  }
  // The largest unit gathered: the embedding, 2 bytes a parameter.
  EXPECT_DOUBLE_EQ(buffers[1] - buffers[0], 2 * c.shape.embeddingParams);
  EXPECT_DOUBLE_EQ(buffers[2] - buffers[1], 2 * c.shape.embeddingParams);
  EXPECT_LE(exposed[1], exposed[0]);
  EXPECT_LE(exposed[2], exposed[1]);
  c.setup.zero3PrefetchDepth = 0;
  EXPECT_NE(checkConfig(c.shape, c.config, c.setup, 16).find("prefetch depth 0"), std::string::npos);
}

TEST(TransformerCost, DataParallelGroupsOfOneNodeShareItsNics) {
  // Eight GPUs and four NICs a node (AWS p4d), two nodes, tp 2: each node holds four ranks of
  // each of the two data-parallel groups, which synchronise at once over the node's four NICs:
  // two NICs each, as one group on a node with two NICs.
  Cluster fourNics = withNodes(loadCluster("a100x64"), 2);
  fourNics.nicsPerNode = 4;
  Cluster twoNics = fourNics;
  twoNics.nicsPerNode = 2;
  ParallelConfig c = config(2, 1);
  c.dp = 8;
  const Group data = parallelGroups(c, fourNics).data;
  EXPECT_EQ(data.ranks, 8);
  EXPECT_EQ(data.nodes, 2);
  EXPECT_EQ(data.perNode, 2);
  const double bytes = 256e6;
  EXPECT_DOUBLE_EQ(CostModel(fourNics).collective(CollectiveKind::AllReduce, bytes, data).timeUs,
                   CostModel(twoNics).collective(CollectiveKind::AllReduce, bytes, Group{8, 2}).timeUs);
  // With a NIC for every GPU each group keeps four.
  Cluster eightNics = fourNics;
  eightNics.nicsPerNode = 8;
  EXPECT_DOUBLE_EQ(CostModel(eightNics).collective(CollectiveKind::AllReduce, bytes, data).timeUs,
                   CostModel(eightNics).collective(CollectiveKind::AllReduce, bytes, Group{8, 2}).timeUs);
}

} // namespace

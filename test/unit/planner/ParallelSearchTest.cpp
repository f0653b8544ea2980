//===- ParallelSearchTest.cpp - large-model configuration search ----------===//
#include "zen/Planner/ParallelSearch.h"

#include "zen/CostModel/Moe.h"
#include "zen/CostModel/Pipeline.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <tuple>

namespace zen::plan {
namespace {

using cost::ParallelConfig;
using cost::Recompute;

/// Megatron-LM's GPT (SC21): 12 h^2 + 13 h parameters per block, tied
/// input/output embedding (V h + s h), the final layer norm in the head.
cost::TransformerShape megatronGpt(int64_t layers, int64_t hidden, int64_t heads) {
  cost::TransformerShape shape;
  shape.family = "gpt";
  shape.layers = layers;
  shape.hidden = hidden;
  shape.heads = heads;
  shape.ffn = 4 * hidden;
  shape.seq = 2048;
  shape.vocab = 51200;
  shape.layerParams = 12.0 * hidden * hidden + 13.0 * hidden;
  shape.embeddingParams = double(shape.vocab) * hidden + double(shape.seq) * hidden;
  shape.headParams = 2.0 * hidden;
  shape.tiedEmbeddings = true;  // the output layer is the word embedding (Megatron's default)
  return shape;
}

cost::CostModel a100Nodes(int64_t nodes) {
  return cost::CostModel(cost::withNodes(cost::loadCluster("a100x64"), nodes));
}

struct Sc21Row {
  double billions;
  int64_t heads, hidden, layers, tp, pp, gpus, batch;
  double publishedTflops;
};

// Narayanan et al., SC21, table 1 (weak scaling on Selene's DGX A100s):
// sequence 2048, vocabulary 51200, achieved teraFLOP/s per GPU.
const Sc21Row kSc21[] = {
    {1.7, 24, 2304, 24, 1, 1, 32, 512, 137},     {3.6, 32, 3072, 30, 2, 1, 64, 512, 138},
    {7.5, 32, 4096, 36, 4, 1, 128, 512, 142},    {18.4, 48, 6144, 40, 8, 1, 256, 1024, 135},
    {39.1, 64, 8192, 48, 8, 2, 512, 1536, 138},  {76.1, 80, 10240, 60, 8, 4, 1024, 1792, 140},
    {145.6, 96, 12288, 80, 8, 8, 1536, 2304, 148}, {310.1, 128, 16384, 96, 8, 16, 1920, 2160, 155},
    {529.6, 128, 20480, 105, 8, 35, 2520, 2520, 163}, {1008.0, 160, 25600, 128, 8, 64, 3072, 3072, 163},
};

TEST(ParallelSearchTest, ForcedSc21ConfigurationsPredictPublishedThroughputWithin15Percent) {
  for (const Sc21Row &row : kSc21) {
    cost::TransformerShape shape = megatronGpt(row.layers, row.hidden, row.heads);
    EXPECT_NEAR(shape.totalParams() / 1e9, row.billions, 0.03 * row.billions);  // the table rounds
    cost::CostModel model = a100Nodes(row.gpus / 8);
    ParallelConfig config;
    config.tp = row.tp;
    config.pp = row.pp;
    config.dp = row.gpus / (row.tp * row.pp);
    config.recompute = Recompute::Full;
    config.microBatch = 1;
    config.microBatches = row.batch / config.dp;
    cost::TrainingSetup setup;
    setup.globalBatch = row.batch;
    setup.attention = cost::AttentionKernel::Unfused;  // SC21's Megatron-LM had no FlashAttention
    ASSERT_EQ(cost::checkConfig(shape, config, setup, row.gpus), "") << row.billions;
    ParallelEvaluation eval = scoreWithSync(shape, config, setup, model, AutotuneOptions{});
    EXPECT_TRUE(eval.memory.fits()) << row.billions << "B needs " << eval.memory.perGpuBytes() / 1e9;
    double error = eval.tflopsPerGpu / row.publishedTflops - 1;
    std::printf("%7.1fB tp %2lld pp %2lld dp %3lld: predicted %6.1f TFLOP/s, published %5.1f (%+.1f%%) "
                "bubble %.0f%% tp %.0f%% pp %.0f%% dp %.0f%% mem %.1f GB\n",
                row.billions, (long long)row.tp, (long long)row.pp, (long long)config.dp,
                eval.tflopsPerGpu, row.publishedTflops, 100 * error,
                100 * eval.pipeline.bubbleUs / eval.iterationUs, 100 * eval.tensorCommUs / eval.iterationUs,
                100 * eval.pipelineCommUs / eval.iterationUs, 100 * eval.dataCommUs / eval.iterationUs,
                eval.memory.perGpuBytes() / 1e9);
    EXPECT_LT(std::abs(error), 0.15) << row.billions << "B";
  }
}

/// Megatron-LM's setting of SC21 and Korthikanti et al. 2022, which these tests check
/// against: unfused attention.
cost::TrainingSetup bf16Adam(int64_t globalBatch) {
  cost::TrainingSetup setup;
  setup.globalBatch = globalBatch;
  setup.attention = cost::AttentionKernel::Unfused;
  return setup;
}

TEST(ParallelSearchTest, MixedPrecisionAdamKeepsEighteenBytesPerParameterAndZeroShardsThem) {
  // bf16 keeps fp32 main gradients by default (Megatron-LM, DeepSpeed): 2 + 4 + 12; with
  // 16-bit gradients ZeRO's 16 (section 3.1); fp16 defaults to 16-bit gradients.
  cost::BytesPerParameter adam = cost::bytesPerParameter(bf16Adam(8));
  EXPECT_EQ(adam.weights + adam.gradients + adam.optimizer, 18);
  cost::TrainingSetup halfGradients = bf16Adam(8);
  halfGradients.gradientAccumulation = cost::DType::BF16;
  cost::BytesPerParameter zeroPaper = cost::bytesPerParameter(halfGradients);
  EXPECT_EQ(zeroPaper.weights + zeroPaper.gradients + zeroPaper.optimizer, 16);
  cost::TrainingSetup fp16 = bf16Adam(8);
  fp16.computeDtype = cost::DType::F16;
  EXPECT_EQ(cost::bytesPerParameter(fp16).gradients, 2);
  cost::TransformerShape shape = megatronGpt(4, 1024, 16);
  cost::CostModel model = a100Nodes(1);
  ParallelConfig config;
  config.dp = 8;
  config.microBatches = 1;
  const double params = shape.totalParams();
  cost::MemoryBreakdown zero0 = cost::memoryPerGpu(shape, config, bf16Adam(8), model);
  EXPECT_DOUBLE_EQ(zero0.weightsBytes, 2 * params);
  EXPECT_DOUBLE_EQ(zero0.gradientsBytes, 4 * params);
  EXPECT_DOUBLE_EQ(zero0.optimizerBytes, 12 * params);
  // The CUDA context and NCCL, and the allocator's fragmentation of the activations and
  // buffers (15% of what it reserves for them).
  EXPECT_DOUBLE_EQ(zero0.reserveBytes, cost::kDeviceRuntimeBytes + (zero0.activationsBytes + zero0.buffersBytes) *
                                                                      0.15 / 0.85);
  EXPECT_DOUBLE_EQ(cost::memoryPerGpu(shape, config, halfGradients, model).gradientsBytes, 2 * params);
  config.zero = 1;
  EXPECT_DOUBLE_EQ(cost::memoryPerGpu(shape, config, bf16Adam(8), model).optimizerBytes, 12 * params / 8);
  config.zero = 2;
  EXPECT_DOUBLE_EQ(cost::memoryPerGpu(shape, config, bf16Adam(8), model).gradientsBytes, 4 * params / 8);
  config.zero = 3;
  cost::MemoryBreakdown zero3 = cost::memoryPerGpu(shape, config, bf16Adam(8), model);
  EXPECT_DOUBLE_EQ(zero3.weightsBytes, 2 * params / 8);
  EXPECT_GT(zero3.buffersBytes, zero0.buffersBytes - 2 * 25 * 1048576.0);  // gathered layers
}

TEST(ParallelSearchTest, ActivationsFollowKorthikantiTable2) {
  // GPT-3 175B shapes, tp 8, one stage, one micro-batch: per layer s b h (10 +
  // 24 / t + 5 a s / (h t)) bytes, sbh 34 / t with sequence parallelism and
  // selective recomputation, 2 s b h with full recomputation (plus the one
  // block being recomputed).
  cost::TransformerShape shape = megatronGpt(96, 12288, 96);
  shape.vocab = 0;  // no logits: compare the blocks alone
  shape.embeddingParams = 0;
  cost::CostModel model = a100Nodes(1);
  ParallelConfig config;
  config.tp = 8;
  config.microBatches = 1;
  const double sbh = 2048.0 * 12288, layers = 96, t = 8;
  const double perLayerNone = sbh * (10 + 24 / t + 5.0 * 96 * 2048 / (12288 * t));
  auto activations = [&](const ParallelConfig &c) {
    cost::MemoryBreakdown memory = cost::memoryPerGpu(shape, c, bf16Adam(1), model);
    // The embedding output of stage 0 is not a block's.
    return memory.activationsBytes - 2048.0 * 12288 * 2 / (c.sequenceParallel ? t : 1);
  };
  EXPECT_NEAR(activations(config), layers * perLayerNone, 1);
  config.sequenceParallel = true;
  config.recompute = Recompute::Selective;
  EXPECT_NEAR(activations(config), layers * sbh * 34 / t, 1);
  config.sequenceParallel = false;
  config.recompute = Recompute::Full;
  EXPECT_NEAR(activations(config), layers * 2 * sbh + perLayerNone, 1);
}

TEST(ParallelSearchTest, OneFOneBKeepsPipelineDepthMicroBatchesInFlightOnTheFirstStage) {
  cost::TransformerShape shape = megatronGpt(8, 1024, 16);
  cost::CostModel model = a100Nodes(1);
  ParallelConfig config;
  config.pp = 4;
  config.dp = 2;
  config.microBatches = 8;
  cost::MemoryBreakdown memory = cost::memoryPerGpu(shape, config, bf16Adam(16), model);
  EXPECT_EQ(memory.stage, 0);
  config.microBatches = 2;  // fewer micro-batches than stages: only those are in flight
  EXPECT_LT(cost::memoryPerGpu(shape, config, bf16Adam(4), model).activationsBytes, memory.activationsBytes);
}

TEST(ParallelSearchTest, WaveQuantisationSlowsAGemmOneTileOverAFullWave) {
  cost::CostModel model = a100Nodes(1);
  // 108 SMs: 12 x 9 tiles of 128x128 fill one wave; 13 x 9 need a second, so
  // 13/12 of the work takes twice as long (both compute-bound).
  double full = cost::gemmUs(model, 128 * 12, 128 * 9, 8192, 1, cost::DType::BF16);
  double spill = cost::gemmUs(model, 128 * 13, 128 * 9, 8192, 1, cost::DType::BF16);
  EXPECT_NEAR(spill / full, 2.0, 0.01);
}

TEST(ParallelSearchTest, PipelineBubbleIsPipelineDepthMinusOneOverVirtualStages) {
  std::vector<cost::StageCost> stages(4);
  for (cost::StageCost &stage : stages)
    stage.forwardUs = 10, stage.backwardUs = 20;
  EXPECT_DOUBLE_EQ(cost::pipelineTime(stages, 8, 1).totalUs, (8 + 3) * 30.0);
  EXPECT_DOUBLE_EQ(cost::pipelineTime(stages, 8, 2).bubbleUs, 1.5 * 30.0);
}

TEST(ParallelSearchTest, SimulatedScheduleMatchesTheClosedFormOnUniformStages) {
  std::vector<cost::StageCost> stages(4);
  for (cost::StageCost &stage : stages)
    stage.forwardUs = 10, stage.backwardUs = 20;
  for (int64_t v : {1, 2}) {
    cost::PipelineSchedule schedule = cost::simulatePipeline(stages, 8, v);
    EXPECT_NEAR(schedule.totalUs, cost::pipelineTime(stages, 8, v).totalUs, 1e-9) << v;
    EXPECT_NEAR(schedule.bubbleUs, cost::pipelineTime(stages, 8, v).bubbleUs, 1e-9) << v;
  }
}

TEST(ParallelSearchTest, SimulatedStepsWaitForTheirNeighboursAndNeverOverlapOnAStage) {
  // A slow last stage: everything upstream waits for its backwards.
  std::vector<cost::StageCost> stages(3);
  for (cost::StageCost &stage : stages)
    stage.forwardUs = 10, stage.backwardUs = 20;
  stages[2].backwardUs = 50;
  const int64_t m = 6;
  cost::PipelineSchedule schedule = cost::simulatePipeline(stages, m, 1);
  std::map<std::tuple<int64_t, bool, int64_t>, std::pair<double, double>> spans;
  auto start = [&](int64_t s, bool backward, int64_t micro) { return spans[{s, backward, micro}].first; };
  auto end = [&](int64_t s, bool backward, int64_t micro) { return spans[{s, backward, micro}].second; };
  for (int64_t s = 0; s < 3; ++s) {
    ASSERT_EQ(schedule.stages[s].size(), size_t(2 * m));
    double free = 0;
    for (const cost::TimedStep &timed : schedule.stages[s]) {
      EXPECT_GE(timed.startUs, free - 1e-9);
      free = timed.startUs + timed.durationUs;
      spans[{s, timed.step.backward, timed.step.microBatch}] = {timed.startUs, free};
    }
  }
  for (int64_t micro = 0; micro < m; ++micro) {
    for (int64_t s = 1; s < 3; ++s)
      EXPECT_GE(start(s, false, micro), end(s - 1, false, micro) - 1e-9);
    for (int64_t s = 0; s < 2; ++s)
      EXPECT_GE(start(s, true, micro), end(s + 1, true, micro) - 1e-9);
    EXPECT_GE(start(2, true, micro), end(2, false, micro) - 1e-9);
  }
  // The slow stage paces every micro-batch: at least m of its 60 us steps.
  EXPECT_GE(schedule.totalUs, m * 60.0 + 2 * 10.0 + 2 * 20.0 - 1e-9);
  EXPECT_NEAR(schedule.bubbleUs, schedule.totalUs - m * 60.0, 1e-9);
}

TEST(ParallelSearchTest, BalancedStagesMoveBlocksOffTheHeadAndOffAFullFirstStage) {
  cost::TransformerShape shape = megatronGpt(30, 2048, 16);
  shape.vocab = 256000;  // a heavy output projection and cross-entropy on the last stage
  cost::CostModel model = a100Nodes(1);
  ParallelConfig config;
  config.pp = 4;
  config.dp = 2;
  config.microBatch = 1;
  config.microBatches = 16;
  cost::TrainingSetup setup = bf16Adam(32);
  ASSERT_EQ(cost::checkConfig(shape, config, setup, 8), "");
  auto slowest = [&](const ParallelConfig &c) {
    double us = 0;
    for (const cost::StageCost &stage : cost::stageCosts(shape, c, setup, model))
      us = std::max(us, stage.perMicroBatchUs());
    return us;
  };
  ParallelConfig balanced = config;
  balanced.stageLayers = cost::balanceStages(shape, config, setup, model);
  ASSERT_EQ(balanced.stageLayers.size(), 4u);
  EXPECT_EQ(cost::checkConfig(shape, balanced, setup, 8), "");
  EXPECT_LT(balanced.stageLayers[3], balanced.stageLayers[1]);
  EXPECT_LT(slowest(balanced), slowest(config));
  // No other split with the same total is faster: moving one block anywhere
  // slows the slowest stage or leaves it as it is.
  for (int64_t from = 0; from < 4; ++from)
    for (int64_t to = 0; to < 4; ++to) {
      ParallelConfig moved = balanced;
      if (from == to || moved.stageLayers[from] == 1)
        continue;
      --moved.stageLayers[from];
      ++moved.stageLayers[to];
      EXPECT_GE(slowest(moved), slowest(balanced) - 1e-6) << from << "->" << to;
    }
  // Memory tight enough that the first stage (4 micro-batches in flight
  // without recomputation) cannot hold its share: it gets fewer blocks and
  // every stage fits.
  cost::MemoryBreakdown even = cost::memoryPerGpu(shape, config, setup, model);
  cost::Cluster tight = model.cluster();
  // The reserve is 1 GB + 5% of the capacity: 2% below what the even split needs.
  tight.gpu.memoryGB = 0.98 * (even.perGpuBytes() - even.reserveBytes + 1e9) / 0.95 / 1e9;
  cost::CostModel tightModel(tight);
  ASSERT_FALSE(cost::memoryPerGpu(shape, config, setup, tightModel).fits());
  ParallelConfig squeezed = config;
  squeezed.stageLayers = cost::balanceStages(shape, config, setup, tightModel);
  ASSERT_EQ(squeezed.stageLayers.size(), 4u);
  EXPECT_TRUE(cost::memoryPerGpu(shape, squeezed, setup, tightModel).fits());
  EXPECT_LT(squeezed.stageLayers[0], balanced.stageLayers[0]);
  // Nothing fits at all: no split.
  tight.gpu.memoryGB = 1;
  EXPECT_TRUE(cost::balanceStages(shape, config, setup, cost::CostModel(tight)).empty());
}

TEST(ParallelSearchTest, ExplicitStageLayersMustCoverTheLayersOnePositiveCountPerStage) {
  cost::TransformerShape shape = megatronGpt(8, 1024, 16);
  ParallelConfig config;
  config.pp = 2;
  config.dp = 4;
  config.microBatches = 2;
  cost::TrainingSetup setup = bf16Adam(8);
  config.stageLayers = {3, 5};
  EXPECT_EQ(cost::checkConfig(shape, config, setup, 8), "");
  for (std::vector<int64_t> wrong : {std::vector<int64_t>{3, 4}, {8, 0}, {2, 3, 3}}) {
    config.stageLayers = wrong;
    EXPECT_NE(cost::checkConfig(shape, config, setup, 8).find("stage layers"), std::string::npos);
  }
}

namespace {
double blockTimeUs(const cost::TransformerShape &shape, const ParallelConfig &config,
                   const cost::TrainingSetup &setup, const cost::CostModel &model) {
  ParallelConfig oneStage = config;
  oneStage.pp = 1;
  cost::StageCost stage = cost::stageCosts(shape, oneStage, setup, model).front();
  return stage.perMicroBatchUs();
}
} // namespace

TEST(ParallelSearchTest, DecompositionPipelinesTensorParallelCommunicationWhereItPays) {
  cost::CostModel model(cost::loadCluster("h100x256"));
  cost::TrainingSetup setup = bf16Adam(256);
  ParallelConfig config;
  config.tp = 8;
  config.dp = 32;
  config.microBatches = 8;
  // GPT-3 blocks: GEMMs and TP all-reduces of similar length, so chunking hides
  // most of the communication and every region takes more than one chunk.
  cost::TransformerShape gpt3 = megatronGpt(8, 12288, 96);
  config.microBatch = 1;
  cost::Decomposition chosen = cost::chooseDecomposition(gpt3, config, setup, model);
  EXPECT_GT(chosen.mlpForward, 1);
  EXPECT_GT(chosen.mlpBackward, 1);
  ParallelConfig decomposed = config;
  decomposed.decomposition = chosen;
  const double none = blockTimeUs(gpt3, config, setup, model);
  const double best = blockTimeUs(gpt3, decomposed, setup, model);
  EXPECT_LT(best, 0.97 * none);
  // The chosen mix is no slower than any single degree for the whole block.
  for (int64_t chunks : cost::decompositionDegrees(gpt3, config)) {
    ParallelConfig uniform = config;
    uniform.decomposition = cost::Decomposition::uniform(chunks);
    EXPECT_LE(best, blockTimeUs(gpt3, uniform, setup, model) * (1 + 1e-9)) << chunks;
  }
  // Tiny GEMMs: each chunk's collective latency costs more than it hides.
  cost::TransformerShape tiny = megatronGpt(8, 256, 8);
  tiny.seq = 64;
  cost::Decomposition none1 = cost::chooseDecomposition(tiny, config, setup, model);
  EXPECT_EQ(none1, cost::Decomposition{});
  // Without tensor parallelism there is nothing to pipeline.
  ParallelConfig noTp = config;
  noTp.tp = 1;
  noTp.dp = 256;
  EXPECT_EQ(cost::chooseDecomposition(gpt3, noTp, setup, model), cost::Decomposition{});
  // The chunks split a micro-batch's tokens.
  ParallelConfig odd = config;
  odd.decomposition.mlpBackward = 3;
  EXPECT_NE(cost::checkConfig(gpt3, odd, setup, 256).find("does not divide the 2048 tokens"), std::string::npos);
}

TEST(ParallelSearchTest, DecompositionBaselinesAreTheChosenConfigurationWithFixedDegrees) {
  cost::TransformerShape shape = megatronGpt(32, 12288, 96);
  cost::CostModel model(cost::loadCluster("h100x256"));
  ParallelRequest request;
  request.setup = bf16Adam(512);
  request.tp = 8;
  ParallelResult result = searchParallel(shape, model, request);
  ASSERT_TRUE(result.best);
  for (const char *name : {"tp-nodecomp", "tp-asynctp", "tp-uniform"}) {
    ASSERT_TRUE(result.baselines.count(name)) << name;
    const ParallelConfig &baseline = result.baselines[name].config;
    ParallelConfig sameButDecomposition = baseline;
    sameButDecomposition.decomposition = result.best->config.decomposition;
    EXPECT_EQ(sameButDecomposition, result.best->config) << name;
    EXPECT_LE(result.best->iterationUs, result.baselines[name].iterationUs) << name;
  }
  EXPECT_EQ(result.baselines["tp-nodecomp"].config.decomposition, cost::Decomposition{});
  EXPECT_EQ(result.baselines["tp-asynctp"].config.decomposition, cost::Decomposition::uniform(8));
  EXPECT_LT(result.best->iterationUs, result.baselines["tp-nodecomp"].iterationUs);
}

TEST(ParallelSearchTest, Gpt3DoesNotFitDataParallelAndAutoFitsNoSlowerThanAnySeed) {
  cost::TransformerShape shape = megatronGpt(96, 12288, 96);
  cost::CostModel model = a100Nodes(8);
  ParallelRequest request;
  request.setup = bf16Adam(512);
  ParallelResult result = searchParallel(shape, model, request);
  EXPECT_EQ(result.baselines.count("ddp"), 0u);
  EXPECT_NE(result.baselinesWhyNot["ddp"].find("does not fit"), std::string::npos);
  ASSERT_TRUE(result.best);
  EXPECT_TRUE(result.best->memory.fits());
  EXPECT_GT(result.best->config.tp * result.best->config.pp, 1);
  for (const auto &[name, baseline] : result.baselines)
    EXPECT_LE(result.best->iterationUs, baseline.iterationUs) << name;
  EXPECT_GT(result.configurationsScored, 10);
}

TEST(ParallelSearchTest, TiedEmbeddingAllReduceRunsBetweenBackwardAndTheOptimizerStep) {
  cost::TransformerShape shape = megatronGpt(8, 1024, 16);
  shape.tiedEmbeddings = true;
  cost::CostModel model = a100Nodes(1);
  ParallelConfig config;
  config.tp = 2;
  config.pp = 4;
  config.microBatches = 4;
  ParallelEvaluation eval = scoreConfig(shape, config, bf16Adam(4), model);
  const double syncUs = eval.stages.front().embeddingSyncUs;
  ASSERT_GT(syncUs, 0);
  double stepUs = 0;
  for (const cost::StageCost &stage : eval.stages)
    stepUs = std::max(stepUs, stage.embeddingSyncUs + stage.optimizerUs);
  EXPECT_DOUBLE_EQ(eval.iterationUs, eval.pipeline.totalUs + stepUs);  // dp 1: no data-parallel sync
  EXPECT_DOUBLE_EQ(eval.pipelineCommUs, 4 * eval.stages.front().pipelineCommUs + syncUs);
  shape.tiedEmbeddings = false;
  EXPECT_LT(scoreConfig(shape, config, bf16Adam(4), model).iterationUs, eval.iterationUs);
}

TEST(ParallelSearchTest, ForcedConfigurationsAreKeptOrRefusedWithTheReason) {
  cost::TransformerShape shape = megatronGpt(96, 12288, 96);
  cost::CostModel model = a100Nodes(8);
  ParallelRequest request;
  request.setup = bf16Adam(512);
  request.tp = 8;
  request.pp = 8;
  ParallelResult kept = searchParallel(shape, model, request);
  ASSERT_TRUE(kept.best);
  EXPECT_EQ(kept.best->config.tp, 8);
  EXPECT_EQ(kept.best->config.pp, 8);

  request.tp = 1;
  request.pp = 1;
  request.zero = 0;
  ParallelResult tooBig = searchParallel(shape, model, request);
  EXPECT_FALSE(tooBig.best);
  ASSERT_TRUE(tooBig.smallestRequirement);
  EXPECT_GT(tooBig.smallestRequirement->memory.perGpuBytes(), 80e9);

  request.tp = 5;  // does not divide 96 heads
  request.pp = 1;
  request.dp = 64 / 5;
  request.microBatch = 1;
  ParallelResult invalid = searchParallel(shape, model, request);
  EXPECT_FALSE(invalid.best);
  EXPECT_FALSE(invalid.invalid.empty());
}

TEST(ParallelSearchTest, ForcedDegreesAreRefusedByTheFirstConstraintTheyBreak) {
  cost::TransformerShape shape = megatronGpt(12, 768, 12);  // 12 heads: tp 3 and 6 divide them
  auto refusal = [&](const cost::CostModel &model, auto force) {
    ParallelRequest request;
    request.setup = bf16Adam(96);  // every dp of 24 or 64 GPUs divides it but 64
    force(request);
    ParallelResult result = searchParallel(shape, model, request);
    EXPECT_FALSE(result.best);
    return result.invalid;
  };
  const cost::CostModel a100x64 = a100Nodes(8), a100x24 = a100Nodes(3);
  EXPECT_EQ(refusal(a100x64, [](ParallelRequest &r) { r.tp = 2, r.pp = 2, r.dp = 8; }),
            "tp 2 x pp 2 x dp 8 = 32 GPUs, but the cluster has 64");
  EXPECT_EQ(refusal(a100x64, [](ParallelRequest &r) { r.tp = 4, r.dp = 32; }),
            "tp 4 x dp 32 = 128 does not divide the 64 GPUs");
  EXPECT_EQ(refusal(a100x64, [](ParallelRequest &r) { r.virtualStages = 1000; }),
            "pp 1 x 1000 virtual stages exceeds the 12 layers");
  EXPECT_EQ(refusal(a100x64, [](ParallelRequest &r) { r.pp = 4, r.virtualStages = 4; }),
            "pp 4 x 4 virtual stages exceeds the 12 layers");
  // Megatron-LM places tp innermost: tp 3 on 8-GPU nodes puts ranks 6, 7, 8 in one group.
  EXPECT_EQ(refusal(a100x24, [](ParallelRequest &r) { r.tp = 3; }),
            "tp 3 neither divides nor is a multiple of the 8 GPUs per node: tensor-parallel groups "
            "would straddle nodes");
  // Searched, tp stays inside a node.
  ParallelRequest searched;
  searched.setup = bf16Adam(96);
  searched.pp = 1;
  ParallelResult result = searchParallel(shape, a100x24, searched);
  ASSERT_TRUE(result.best);
  EXPECT_EQ(8 % result.best->config.tp, 0);
  // A pipeline of more steps than the simulation allows is refused, naming them.
  EXPECT_NE(refusal(a100x64,
                    [](ParallelRequest &r) {
                      r.tp = 2, r.pp = 2, r.dp = 16, r.microBatch = 1;
                      r.setup.globalBatch = 16 * (cost::kMaxPipelineSteps / 2 + 1);
                    })
                .find("pipeline steps, more than the limit of " + std::to_string(cost::kMaxPipelineSteps)),
            std::string::npos);
}


/// Mixtral 8x7B's shape (Jiang et al. 2024): 32 blocks of hidden 4096 and 32
/// heads, every MLP 8 experts of ffn 14336 (SwiGLU: fc1 holds 2 x ffn rows, no
/// biases), top 2, 4096 tokens, the buffer at capacity factor 1.
cost::TransformerShape mixtral() {
  cost::TransformerShape shape = megatronGpt(32, 4096, 32);
  shape.seq = 4096;
  shape.vocab = 32000;
  shape.ffn = 14336;
  shape.layerParams = 0;
  cost::MoeBlocks moe;
  for (int64_t block = 0; block < 32; ++block)
    moe.blocks.push_back(block);
  moe.layer.tokens = 4096;
  moe.layer.hidden = 4096;
  moe.layer.ffn = 14336;
  moe.layer.fc1Rows = 2 * 14336;
  moe.layer.experts = 8;
  moe.layer.topK = 2;
  moe.layer.biases = false;
  moe.layer.capacityRows = 2 * 4096 / 8;
  moe.blockParams = 4.0 * 4096 * 4096 + 2.0 * 4096 + 8.0 * 4096;  // attention, norms, router
  moe.expertParams = 8 * moe.layer.expertParams();
  shape.moe = moe;
  return shape;
}

cost::CostModel h100Cluster() { return cost::CostModel(cost::loadCluster("h100x256")); }

/// tp x pp x dp with experts over ep ranks, `microBatches` of one sample.
ParallelConfig expertParallel(int64_t tp, int64_t pp, int64_t dp, int64_t ep, int zero,
                              int64_t microBatches = 1) {
  ParallelConfig config;
  config.tp = tp;
  config.pp = pp;
  config.dp = dp;
  config.ep = ep;
  config.zero = zero;
  config.microBatches = microBatches;
  return config;
}

ParallelConfig dataParallel(int64_t dp, int64_t ep, int zero) { return expertParallel(1, 1, dp, ep, zero); }

TEST(MoeLargeModelTest, ExpertWeightsSpreadOverEpAndZeroShardsThemOverTheirReplicas) {
  const cost::TransformerShape shape = mixtral();
  const cost::CostModel model = h100Cluster();
  const cost::TrainingSetup setup = bf16Adam(256);
  const double experts = 32 * shape.moe->expertParams;
  cost::MemoryBreakdown one = cost::memoryPerGpu(shape, dataParallel(256, 1, 0), setup, model);
  cost::MemoryBreakdown eight = cost::memoryPerGpu(shape, dataParallel(256, 8, 0), setup, model);
  // bf16 weights: each rank keeps 1/8 of every layer's experts at ep 8.
  EXPECT_NEAR(one.weightsBytes - eight.weightsBytes, 2.0 * experts * (1 - 1.0 / 8), 1e-6 * experts);
  // ZeRO 1 shards the dense optimizer state over the 256 dp ranks and the
  // experts' over the 32 ranks holding the same experts.
  cost::MemoryBreakdown sharded = cost::memoryPerGpu(shape, dataParallel(256, 8, 1), setup, model);
  const double dense = 32 * shape.moe->blockParams + shape.embeddingParams + shape.headParams;
  EXPECT_NEAR(sharded.optimizerBytes, 12.0 * dense / 256 + 12.0 * experts / 8 / 32, 1e-6 * experts);
  EXPECT_LT(sharded.perGpuBytes(), eight.perGpuBytes());
}

TEST(MoeLargeModelTest, MoeBlocksRunTheirLayersPipelinedPhasesInPlaceOfTheMlp) {
  const cost::TransformerShape shape = mixtral();
  const cost::CostModel model = h100Cluster();
  const cost::TrainingSetup setup = bf16Adam(256);
  ParallelConfig config = dataParallel(256, 8, 1);
  const cost::MoeShape layer = cost::moeLayerShape(shape, config);
  EXPECT_EQ(layer.tokens, 4096);
  EXPECT_EQ(layer.capacity(), 1024);
  const cost::Group data = cost::parallelGroups(config, model.cluster()).data;
  auto phase = [&](int64_t chunks, bool backward) {
    return cost::moePhaseUs(model, layer, 8, data, chunks, cost::AllToAllAlgorithm::Flat, backward, 1.0,
                            setup.computeDtype);
  };
  const cost::StageCost plain = cost::stageCosts(shape, config, setup, model).front();
  config.experts.forward = 4;
  config.experts.backward = 2;
  const cost::StageCost pipelined = cost::stageCosts(shape, config, setup, model).front();
  EXPECT_NEAR(pipelined.forwardUs - plain.forwardUs, 32 * (phase(4, false) - phase(1, false)), 1e-6 * plain.forwardUs);
  EXPECT_NEAR(pipelined.backwardUs - plain.backwardUs, 32 * (phase(2, true) - phase(1, true)), 1e-6 * plain.backwardUs);
  // The chosen schedule is each phase's fastest degree.
  const cost::MoeLayerChoice chosen = cost::chooseMoeSchedule(shape, config, setup, model);
  for (int64_t chunks : cost::moeDegrees(layer)) {
    if (chosen.algorithm == cost::AllToAllAlgorithm::Flat) {
      EXPECT_LE(phase(chosen.forward, false), phase(chunks, false));
      EXPECT_LE(phase(chosen.backward, true), phase(chunks, true));
    }
  }
  // Each MoE block's unit carries its experts on this rank apart.
  ASSERT_FALSE(plain.units.empty());
  EXPECT_EQ(plain.units[1].name, "block.31");
  EXPECT_DOUBLE_EQ(plain.units[1].expertElements, shape.moe->expertParams / 8);
  EXPECT_DOUBLE_EQ(plain.units[1].gradientElements, shape.moe->blockParams);
}

TEST(MoeLargeModelTest, ExpertGradientsSynchroniseOverTheirReplicas) {
  const cost::TransformerShape shape = mixtral();
  const cost::CostModel model = h100Cluster();
  const cost::TrainingSetup setup = bf16Adam(256);
  ParallelConfig config = expertParallel(8, 4, 8, 4, 1, 32);
  ASSERT_EQ(cost::checkConfig(shape, config, setup, 256), "");
  ParallelEvaluation eval = scoreWithSync(shape, config, setup, model, AutotuneOptions{});
  ASSERT_TRUE(eval.syncProblem && eval.syncPlan);
  EXPECT_EQ(eval.syncProblem->expertReplicas.ranks, 2);
  int experts = 0;
  for (const GradientTensor &gradient : eval.syncProblem->gradients)
    if (gradient.expertParallel > 1) {
      ++experts;
      EXPECT_EQ(gradient.expertParallel, 4);
      EXPECT_EQ(gradient.elements, int64_t(shape.moe->expertParams / 4));
    }
  EXPECT_EQ(experts, 8);  // the first stage's 8 blocks
  bool replicaBucket = false;
  for (const BucketChoice &bucket : eval.syncPlan->buckets)
    replicaBucket = replicaBucket || bucket.expertReplicas;
  EXPECT_TRUE(replicaBucket);
}

TEST(MoeLargeModelTest, SearchFitsMixtralWhereDataParallelismDoesNot) {
  const cost::TransformerShape shape = mixtral();
  const cost::CostModel model = h100Cluster();
  ParallelRequest request;
  request.setup = bf16Adam(256);
  ParallelResult result = searchParallel(shape, model, request);
  ASSERT_TRUE(result.best);
  EXPECT_TRUE(result.best->memory.fits());
  EXPECT_TRUE(result.baselinesWhyNot.count("ddp"));
  // The MoE baselines run the chosen configuration; auto is never slower by
  // construction (they compete like the seeds), not a finding.
  ASSERT_TRUE(result.baselines.count("moe-nopipe") && result.baselines.count("tutel"));
  EXPECT_EQ(result.baselines.at("moe-nopipe").config.experts.forward, 1);
  EXPECT_LE(result.best->iterationUs, result.baselines.at("moe-nopipe").iterationUs);
  // At ep 1 every rank would hold every expert: the search spreads them.
  cost::MemoryBreakdown spread = result.best->memory;
  ParallelConfig gathered = result.best->config;
  gathered.ep = 1;
  EXPECT_GT(cost::memoryPerGpu(shape, gathered, request.setup, model).perGpuBytes(), spread.perGpuBytes());
}

TEST(MoeLargeModelTest, ForcedExpertParallelismIsKeptOrRefused) {
  const cost::TransformerShape shape = mixtral();
  const cost::CostModel model = h100Cluster();
  ParallelRequest request;
  request.setup = bf16Adam(256);
  request.tp = 8;
  request.pp = 4;
  request.ep = 4;
  ParallelResult kept = searchParallel(shape, model, request);
  ASSERT_TRUE(kept.best);
  EXPECT_EQ(kept.best->config.ep, 4);
  request.ep = 3;
  ParallelResult refused = searchParallel(shape, model, request);
  EXPECT_FALSE(refused.best);
  EXPECT_NE(refused.invalid.find("ep 3"), std::string::npos) << refused.invalid;
  // Each tensor-parallel rank routes its share of a micro-batch's tokens, and
  // the pipelining degrees cut the capacity into equal pieces.
  cost::TransformerShape odd = shape;
  odd.seq = 4095;
  ParallelConfig shared = expertParallel(2, 1, 128, 8, 0, 2);
  EXPECT_NE(cost::checkConfig(odd, shared, request.setup, 256).find("tokens of a micro-batch that the MoE blocks route"),
            std::string::npos);
  shared.experts.forward = 3;
  EXPECT_NE(cost::checkConfig(shape, shared, request.setup, 256).find("MoE pipelining degree 3 does not divide"),
            std::string::npos);
  // A dense model has no experts to spread.
  ParallelConfig config = dataParallel(64, 2, 0);
  config.microBatches = 8;
  EXPECT_NE(cost::checkConfig(megatronGpt(24, 2304, 24), config, bf16Adam(512), 64).find("MoE"),
            std::string::npos);
}

TEST(MoeLargeModelTest, ExpertTensorParallelismSplitsEveryExpertOverTheTpRanks) {
  const cost::TransformerShape shape = mixtral();
  const cost::CostModel model = h100Cluster();
  const cost::TrainingSetup setup = bf16Adam(256);
  ParallelConfig whole = expertParallel(8, 1, 32, 8, 0, 8);
  whole.sequenceParallel = true;
  ParallelConfig split = whole;
  split.expertTensorParallel = true;
  ASSERT_EQ(cost::checkConfig(shape, split, setup, 256), "");
  // Weights: the same experts / ep per rank, each an eighth as wide (no biases here).
  const double expertsPerRank = 32 * shape.moe->expertParams / 8;
  EXPECT_NEAR(cost::memoryPerGpu(shape, whole, setup, model).weightsBytes -
                  cost::memoryPerGpu(shape, split, setup, model).weightsBytes,
              2.0 * expertsPerRank * (1 - 1.0 / 8), 1e-6 * expertsPerRank);
  // They keep the rows every shard received: the input and output rows eight
  // times over (the hidden ones are as many elements, an eighth as wide).
  const double rows = 8.0 * double(cost::moeLayerShape(shape, split).capacity());
  EXPECT_NEAR(cost::memoryPerGpu(shape, split, setup, model).activationsBytes -
                  cost::memoryPerGpu(shape, whole, setup, model).activationsBytes,
              32 * 7 * rows * 2 * 4096 * 2.0, 1e-6 * rows * 4096);
  // A piece's experts run on every shard's rows with an eighth of the width,
  // between an all-gather and a reduce-scatter over the tensor-parallel group.
  const cost::MoeShape layer = cost::moeLayerShape(shape, split);
  const cost::ParallelGroups groups = cost::parallelGroups(split, model.cluster());
  const cost::MoePieces pieces =
      cost::moePhasePieces(model, layer, 8, groups.data, 2, cost::AllToAllAlgorithm::Flat, false, 1.0,
                           setup.computeDtype, cost::CompressionMethod::None, groups.tensor);
  const double pieceRows = 8.0 * 8 * cost::busiestExpertRows(layer, 1.0) / 2;
  const double gathered = 8 * cost::dispatchBytes(layer, setup.computeDtype) / 2;
  EXPECT_NEAR(pieces.computeUs,
              cost::expertForwardUs(model, cost::expertShard(layer, 8), pieceRows, 1, setup.computeDtype) +
                  model.collective(cost::CollectiveKind::AllGather, gathered, groups.tensor).timeUs +
                  model.collective(cost::CollectiveKind::ReduceScatter, gathered, groups.tensor).timeUs,
              1e-9 * pieces.computeUs);
  // Without tensor parallelism there is nothing to split over.
  ParallelConfig alone = dataParallel(256, 8, 0);
  alone.expertTensorParallel = true;
  EXPECT_NE(cost::checkConfig(shape, alone, setup, 256).find("expert tensor parallelism"), std::string::npos);
  // Megatron's seed splits the experts over its tp (Megatron-Core's default),
  // which lets it fit on one node with two-matrix experts (zenopt-modelgen's).
  cost::TransformerShape gelu = shape;
  gelu.moe->layer.fc1Rows = 0;
  gelu.moe->expertParams = 8 * gelu.moe->layer.expertParams();
  ParallelRequest request;
  request.setup = bf16Adam(8);
  ParallelResult result = searchParallel(gelu, cost::CostModel(cost::loadCluster("a100x8")), request);
  ASSERT_TRUE(result.baselines.count("megatron")) << result.baselinesWhyNot["megatron"];
  EXPECT_TRUE(result.baselines.at("megatron").config.expertTensorParallel);
}


TEST(MoeLargeModelTest, TokensAreCompressedOnlyWhenAllowedShrinkingAndPaying) {
  const cost::TransformerShape shape = mixtral();
  const cost::CostModel model(cost::loadCluster("v100x16-10gbe"));
  const cost::TrainingSetup setup = bf16Adam(16);
  ParallelConfig config = dataParallel(16, 8, 3);  // experts over 8 single-GPU nodes
  ASSERT_EQ(cost::checkConfig(shape, config, setup, 16), "");
  auto phasesUs = [&](const cost::MoeLayerChoice &choice) {
    const cost::MoeShape layer = cost::moeLayerShape(shape, config);
    const cost::Group data = cost::parallelGroups(config, model.cluster()).data;
    return cost::moePhaseUs(model, layer, 8, data, choice.forward, choice.algorithm, false, 1.0,
                            setup.computeDtype, choice.tokens) +
           cost::moePhaseUs(model, layer, 8, data, choice.backward, choice.algorithm, true, 1.0,
                            setup.computeDtype, choice.tokens);
  };
  const cost::MoeLayerChoice exact = cost::chooseMoeSchedule(shape, config, setup, model);
  EXPECT_EQ(exact.tokens, cost::CompressionMethod::None);
  // Over 10 GbE int8 tokens pay for their kernels; fp16 does not shrink bf16 activations.
  const cost::MoeLayerChoice int8 = cost::chooseMoeSchedule(
      shape, config, setup, model, {cost::CompressionMethod::FP16, cost::CompressionMethod::Int8});
  EXPECT_EQ(int8.tokens, cost::CompressionMethod::Int8);
  EXPECT_LT(phasesUs(int8), phasesUs(exact));
  EXPECT_EQ(cost::chooseMoeSchedule(shape, config, setup, model, {cost::CompressionMethod::FP16}).tokens,
            cost::CompressionMethod::None);
  // Without expert parallelism there is no all-to-all to shrink.
  config.ep = 1;
  EXPECT_EQ(cost::chooseMoeSchedule(shape, config, setup, model, {cost::CompressionMethod::Int8}).tokens,
            cost::CompressionMethod::None);
}

} // namespace
} // namespace zen::plan

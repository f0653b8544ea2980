//===- ServingTest.cpp - the serving search --------------------------------===//
#include "zen/Planner/Serving.h"

#include "zen/Errors.h"

#include <gtest/gtest.h>

namespace zen::plan {
namespace {

cost::TransformerShape llama(int64_t layers, int64_t hidden, int64_t heads, int64_t kvHeads, int64_t ffn) {
  cost::TransformerShape shape;
  shape.family = "gpt";
  shape.layers = layers;
  shape.hidden = hidden;
  shape.heads = heads;
  shape.kvHeads = kvHeads;
  shape.ffn = ffn;
  shape.mlp = "swiglu";
  shape.seq = 4096;
  shape.vocab = 32000;
  const double h = double(hidden), kvWidth = double(kvHeads) * h / double(heads);
  shape.layerParams = 2 * h * h + 2 * h * kvWidth + 3 * h * double(ffn);
  shape.embeddingParams = shape.headParams = 32000 * h;
  return shape;
}
cost::TransformerShape llama70b() { return llama(80, 8192, 64, 8, 28672); }

cost::CostModel a100Node() { return cost::CostModel(cost::withNodes(cost::loadCluster("a100x8"), 1)); }

ServingRequest withTargets(double ttftMs, double tpotMs) {
  ServingRequest request;
  request.workload.ttftTargetUs = ttftMs * 1e3;
  request.workload.tpotTargetUs = tpotMs * 1e3;
  return request;
}

TEST(ServingSearch, MeetsTheTargetsAtTheLargestBatch) {
  const ServingDecision d = planServing(llama70b(), a100Node(), withTargets(0, 50));
  const ServingCandidate &c = d.chosen;
  ASSERT_TRUE(c.meetsTargets);
  EXPECT_LE(c.tpotUs, 50e3);
  EXPECT_LE(c.batch, std::min(kMaxServingBatch, c.kv.maxBatchByMemory));
  // One request more would miss the target or not fit.
  if (c.batch < std::min(kMaxServingBatch, c.kv.maxBatchByMemory)) {
    const double stepUs = cost::decodeStepTime(llama70b(), c.decode, c.batch + 1, 1024 + 128, {}, a100Node(),
                                               c.policy).totalUs();
    const double tpot = c.disaggregated ? stepUs : stepUs + double(c.batch + 1) * c.prefillPhase.totalUs() / 256;
    EXPECT_GT(tpot, 50e3);
  }
  EXPECT_GT(d.configurationsScored, 4);
  // The baselines are searched configurations under other kernels: the choice is at least
  // as fast by construction (not a finding).
  for (const auto &[name, baseline] : d.baselines)
    EXPECT_GE(c.tokensPerSPerGpu, baseline.tokensPerSPerGpu * (1 - 1e-12)) << name;
  EXPECT_EQ(d.baselines.at("vllm-default").decode.tp, 8);
  EXPECT_EQ(d.baselines.at("vllm-default").policy, cost::AllReducePolicy::Vllm);
  EXPECT_EQ(d.baselines.at("nccl-only").decode.tp, c.decode.tp);
}

TEST(ServingSearch, TighterTargetsSmallerBatches) {
  const ServingDecision loose = planServing(llama70b(), a100Node(), withTargets(0, 100));
  const ServingDecision tight = planServing(llama70b(), a100Node(), withTargets(0, 30));
  ASSERT_TRUE(tight.chosen.meetsTargets);
  EXPECT_LE(tight.chosen.tpotUs, 30e3);
  EXPECT_GE(loose.chosen.tokensPerSPerGpu, tight.chosen.tokensPerSPerGpu);
  // A TTFT target rules out prefill on too few GPUs.
  const ServingDecision fastFirst = planServing(llama70b(), a100Node(), withTargets(100, 50));
  ASSERT_TRUE(fastFirst.chosen.meetsTargets);
  EXPECT_LE(fastFirst.chosen.ttftUs, 100e3);
  EXPECT_GE(fastFirst.chosen.prefill.tp, 4);
}

TEST(ServingSearch, UnmeetableTargetGivesTheLowestTpot) {
  const ServingDecision d = planServing(llama70b(), a100Node(), withTargets(0, 1));
  EXPECT_FALSE(d.chosen.meetsTargets);
  EXPECT_EQ(d.chosen.batch, 1);
  for (int64_t tp : {2, 4, 8}) {
    const ServingCandidate c =
        priceColocated(llama70b(), a100Node(), {}, {tp, 1}, cost::AllReducePolicy::Best);
    if (c.batch > 0)
      EXPECT_LE(d.chosen.tpotUs, c.tpotUs * (1 + 1e-12)) << "tp " << tp;
  }
}

TEST(ServingSearch, ColocatedPrefillsSlowTheDecoding) {
  const ServingCandidate c =
      priceColocated(llama70b(), a100Node(), {}, {8, 1}, cost::AllReducePolicy::Best);
  ASSERT_GT(c.batch, 0);
  EXPECT_NEAR(c.tpotUs, c.decodePhase.totalUs() + double(c.batch) * c.prefillPhase.totalUs() / 256, 1e-6);
  EXPECT_NEAR(c.tokensPerSPerGpu, double(c.batch) * 1e6 / (c.tpotUs * 8), 1e-6);
}

TEST(ServingSearch, ForcedAndRefused) {
  ServingRequest request;
  request.tp = 8;
  const ServingDecision forced = planServing(llama70b(), a100Node(), request);
  EXPECT_EQ(forced.chosen.decode.tp, 8);
  EXPECT_EQ(forced.chosen.prefill.tp, 8);
  EXPECT_FALSE(forced.chosen.disaggregated);
  request.tp = 3;
  try {
    planServing(llama70b(), a100Node(), request);
    FAIL() << "tp 3 planned";
  } catch (const Error &error) {
    EXPECT_EQ(error.kind, ErrorKind::BadUsage);
    EXPECT_STREQ(error.what(), "--serve: tp 3 does not divide the 64 heads");
  }
  // 640 B parameters hold no instance of one 8-GPU node.
  try {
    planServing(llama(160, 16384, 128, 8, 53248), a100Node(), ServingRequest{});
    FAIL() << "a model larger than the node planned";
  } catch (const Error &error) {
    EXPECT_EQ(error.kind, ErrorKind::BadInput);
  }
}

TEST(ServingSearch, Deterministic) {
  const ServingDecision a = planServing(llama70b(), a100Node(), withTargets(200, 40));
  const ServingDecision b = planServing(llama70b(), a100Node(), withTargets(200, 40));
  EXPECT_EQ(a.chosen.batch, b.chosen.batch);
  EXPECT_EQ(a.chosen.tpotUs, b.chosen.tpotUs);
  EXPECT_EQ(a.chosen.prefill.tp, b.chosen.prefill.tp);
  EXPECT_EQ(a.chosen.decode.tp, b.chosen.decode.tp);
}

} // namespace
} // namespace zen::plan

//===- SparsePlanTest.cpp - sparse_tensors and the sparse summary ----------===//
#include "zen/Codegen/SparsePlan.h"

#include <gtest/gtest.h>

using namespace zen;

namespace {
plan::SparsePlan plannedEmbedding(int64_t nodes, int64_t lookups) {
  cost::CostModel model(cost::withNodes(cost::loadCluster("a100x64"), nodes));
  return plan::planSparseTensors({{"embedding.weight", {200000, 64}, lookups, std::nullopt}},
                                 model, model.worldGroup());
}
} // namespace

// The plan's entries carry the choice and its statistics; block_rows only for omnireduce,
// dense_threshold only for sparcml (zenrt validates and writes them, PlanTest).
TEST(SparsePlan, PlanEntriesCarryTheChoice) {
  plan::SparsePlan plan = plannedEmbedding(16, 4096);
  const plan::SparseDecision &decision = plan.tensors.at(0);
  auto entryAs = [&](const cost::SparseSyncCost &priced) {
    return codegen::sparseTensorOf(decision.name, decision.table, decision.statistics, priced);
  };
  const zenrt::SparseTensor tensor = entryAs(decision.chosen());
  EXPECT_EQ(tensor.name, "embedding.weight");
  EXPECT_EQ(tensor.rows, 200000);
  EXPECT_EQ(tensor.rowElements, 64);
  EXPECT_EQ(tensor.scheme, vocab::SparseScheme::Balanced);
  EXPECT_EQ(tensor.blockRows, 0);
  EXPECT_EQ(tensor.denseThreshold, 0);
  EXPECT_EQ(tensor.statistics.source, "model");
  EXPECT_EQ(tensor.statistics.gamma.size(), 8u);
  EXPECT_EQ(tensor.statistics.gamma[0], 1.0);
  EXPECT_EQ(tensor.predictedUs, plan.tensors[0].chosen().timeUs);

  // Other schemes carry their parameter.
  auto forcedTo = [&](vocab::SparseScheme scheme) {
    for (const cost::SparseSyncCost &priced : decision.ranking)
      if (priced.scheme == scheme)
        return entryAs(priced);
    ADD_FAILURE() << "no price for " << vocab::toString(scheme);
    return zenrt::SparseTensor{};
  };
  EXPECT_EQ(forcedTo(vocab::SparseScheme::OmniReduce).blockRows, 4);
  EXPECT_EQ(forcedTo(vocab::SparseScheme::OmniReduce).denseThreshold, 0);
  EXPECT_NEAR(forcedTo(vocab::SparseScheme::SparCml).denseThreshold, 256.0 / 260, 1e-12);
  EXPECT_EQ(forcedTo(vocab::SparseScheme::SparCml).blockRows, 0);
}

TEST(SparsePlan, SummarySaysWhy) {
  plan::SparsePlan plan = plannedEmbedding(16, 4096);
  nlohmann::ordered_json summary = codegen::sparseSummaryJson(plan);
  EXPECT_EQ(summary["tensors"][0]["runner_up"]["scheme"], "dense");
  EXPECT_TRUE(summary["baselines"].contains("horovod-agsparse"));
  std::string text = codegen::sparseSummaryText(plan);
  EXPECT_NE(text.find("embedding.weight 200000x64: balanced"), std::string::npos) << text;
  EXPECT_NE(text.find("faster than dense"), std::string::npos) << text;
  EXPECT_NE(text.find("gamma(128)"), std::string::npos) << text;
  EXPECT_EQ(codegen::sparseSummaryText({}), "");
}

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

// The contract's fields exactly (docs/design.md "Sparse gradients"): block_rows only for
// omnireduce, dense_threshold only for sparcml.
TEST(SparsePlan, PlanEntryHasTheContractFields) {
  plan::SparsePlan plan = plannedEmbedding(16, 4096);
  nlohmann::ordered_json list = codegen::sparseTensorsJson(plan);
  ASSERT_EQ(list.size(), 1u);
  const auto &entry = list[0];
  std::vector<std::string> keys;
  for (const auto &item : entry.items())
    keys.push_back(item.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"name", "rows", "row_elements", "scheme", "statistics",
                                            "predicted_us"}));
  EXPECT_EQ(entry["scheme"], "balanced");
  EXPECT_EQ(entry["rows"], 200000);
  EXPECT_EQ(entry["statistics"]["source"], "model");
  EXPECT_EQ(entry["statistics"]["gamma"].size(), 8u);
  EXPECT_EQ(entry["statistics"]["gamma"][0], 1.0);

  // Forced schemes write their parameter.
  plan::SparseDecision omni = plan.tensors[0];
  for (auto &priced : omni.ranking)
    if (priced.scheme == vocab::SparseScheme::OmniReduce)
      std::swap(priced, omni.ranking.front());
  plan::SparsePlan forced;
  forced.tensors = {omni};
  EXPECT_EQ(codegen::sparseTensorsJson(forced)[0]["block_rows"], 4);
  EXPECT_FALSE(codegen::sparseTensorsJson(forced)[0].contains("dense_threshold"));
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

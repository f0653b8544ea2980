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

// A table the plan leaves in its buckets: dense first (what the plan runs), the cheaper
// scheme named with its price where dense is not the cheapest, and the dense choice's
// reason where it is.
TEST(SparsePlan, DenseSyncedTablesSayWhatASparseSchemeWouldTake) {
  cost::CostModel model(cost::loadCluster("a100x64"));
  zenrt::Plan plan;
  plan.cluster.worldSize = 64;
  const plan::SparseTensorRequest sparse{"embedding.weight", {200000, 64}, 4096, std::nullopt};
  plan::SparseTensorRequest shared{"positions.weight", {128, 64}, 128, std::nullopt};
  shared.sharedRows = true;
  codegen::DenseSyncedTables dense =
      codegen::denseSyncedTables({sparse, shared}, plan, model, "the path plans no sparse scheme");
  ASSERT_EQ(dense.tables.size(), 2u);
  for (const plan::SparseDecision &table : dense.tables)
    EXPECT_EQ(table.chosen().scheme, vocab::SparseScheme::Dense) << table.name;

  nlohmann::ordered_json json = codegen::denseSyncedJson(dense);
  EXPECT_EQ(json["reason"], "the path plans no sparse scheme");
  const nlohmann::ordered_json &table = json["tensors"][0];
  EXPECT_EQ(table["name"], "embedding.weight");
  EXPECT_EQ(table["scheme"], "dense");
  EXPECT_EQ(table["dense_us"].get<double>(), dense.tables[0].chosen().timeUs);
  EXPECT_NE(table["cheapest"]["scheme"], "dense");
  EXPECT_LT(table["cheapest"]["predicted_us"].get<double>(), table["dense_us"].get<double>());
  EXPECT_NE(table["reason"].get<std::string>().find(" would take "), std::string::npos);
  // Every sample looks up the same 128 positions: dense is the cheapest, and says so.
  EXPECT_EQ(json["tensors"][1]["cheapest"]["scheme"], "dense");
  EXPECT_EQ(json["tensors"][1]["reason"].get<std::string>().rfind("dense ", 0), 0u);
  EXPECT_NE(json["tensors"][1]["reason"].get<std::string>().find("faster than"), std::string::npos);

  const std::string text = codegen::denseSyncedText(dense);
  EXPECT_EQ(text.rfind("row-sparse gradients synchronised dense: the path plans no sparse scheme\n", 0), 0u)
      << text;
  EXPECT_NE(text.find("  embedding.weight 200000x64: dense "), std::string::npos) << text;
  EXPECT_EQ(codegen::denseSyncedText({}), "");
  EXPECT_TRUE(codegen::denseSyncedTables({}, plan, model, "none").tables.empty());
  // Dense the cheapest for every table: that is the reason, not the path's.
  EXPECT_EQ(codegen::denseSyncedTables({shared}, plan, model, "the path plans no sparse scheme").reason,
            "dense is the cheapest scheme for each over the data-parallel group");
}

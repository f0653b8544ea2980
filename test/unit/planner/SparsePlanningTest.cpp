//===- SparsePlanningTest.cpp - each row-sparse gradient's scheme ----------===//
#include "zen/Planner/Sparse.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace zen;
using namespace zen::plan;

namespace {
cost::CostModel clusterOf(int64_t nodes, const char *preset = "a100x64") {
  return cost::CostModel(cost::withNodes(cost::loadCluster(preset), nodes));
}

/// The 200 000 x 64 embedding, `lookups` per rank per step.
SparseTensorRequest embedding(int64_t lookups) {
  return {"embedding.weight", {200000, 64}, lookups, std::nullopt};
}
} // namespace

// 128 ranks, ~1% density (4096 lookups of 200 000 Zipf rows): neither agsparse nor dense,
// and the reason names the runner-up with its time.
TEST(SparsePlanning, ChoosesASparseSchemeAt128Ranks) {
  cost::CostModel model = clusterOf(16);
  SparsePlan plan = planSparseTensors({embedding(4096)}, model, model.worldGroup());
  ASSERT_EQ(plan.tensors.size(), 1u);
  const SparseDecision &decision = plan.tensors[0];
  EXPECT_NEAR(decision.statistics.density, 0.011, 0.001);
  EXPECT_NE(decision.chosen().scheme, vocab::SparseScheme::Dense);
  EXPECT_NE(decision.chosen().scheme, vocab::SparseScheme::AgSparse);
  EXPECT_NE(decision.reason().find("faster than"), std::string::npos) << decision.reason();
  EXPECT_EQ(plan.chosenUs, decision.chosen().timeUs);
  // Every baseline forces one scheme: none beats the choice.
  ASSERT_EQ(plan.baselines.size(), 4u);
  for (const auto &[name, us] : plan.baselines)
    EXPECT_GE(us, plan.chosenUs) << name;
  EXPECT_EQ(sparseBaselineNames(),
            (std::vector<std::string>{"ddp-dense", "horovod-agsparse", "sparcml", "omnireduce"}));
}

// Measured statistics replace the model; dense wins on 2 GPUs when the table is mostly hit.
TEST(SparsePlanning, MeasuredStatisticsAndDenseOnFewRanks) {
  cost::CostModel model = clusterOf(1, "a100x8");
  cost::SparsityStatistics measured;
  measured.density = 0.8;
  measured.gamma = {1.0, 1.2};
  measured.skew = 0.2;
  measured.source = cost::SparsitySource::Measured;
  SparseTensorRequest request = embedding(0);
  request.measured = measured;
  SparsePlan plan = planSparseTensors({request}, model, model.groupOf(2));
  EXPECT_EQ(plan.tensors[0].chosen().scheme, vocab::SparseScheme::Dense);
  EXPECT_EQ(plan.tensors[0].statistics.source, cost::SparsitySource::Measured);
  EXPECT_GT(plan.tensors[0].statistics.blockDensity, 0.8); // completed for OmniReduce
}

TEST(SparsePlanning, RefusesStatisticsOutOfRange) {
  cost::CostModel model = clusterOf(1, "a100x8");
  auto refused = [&](cost::SparsityStatistics stats) {
    SparseTensorRequest request = embedding(0);
    request.measured = stats;
    try {
      planSparseTensors({request}, model, model.groupOf(8));
    } catch (const zen::Error &error) {
      EXPECT_EQ(error.kind, zen::ErrorKind::BadInput);
      return std::string(error.what());
    }
    return std::string();
  };
  cost::SparsityStatistics good;
  good.density = 0.01;
  good.gamma = {1, 2, 3};
  good.skew = 0.5;
  EXPECT_EQ(refused(good), "");
  auto bad = good;
  bad.density = 0;
  EXPECT_NE(refused(bad).find("'embedding.weight': density"), std::string::npos);
  bad = good;
  bad.gamma = {1, 3, 2};
  EXPECT_NE(refused(bad).find("gamma[2]"), std::string::npos);
  bad = good;
  bad.gamma = {2};
  EXPECT_NE(refused(bad).find("gamma must start at 1"), std::string::npos);
  bad = good;
  bad.skew = 0.01;
  EXPECT_NE(refused(bad).find("skew"), std::string::npos);
}

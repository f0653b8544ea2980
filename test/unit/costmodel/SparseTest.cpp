//===- SparseTest.cpp - sparsity statistics and sparse scheme prices ------===//
#include "zen/CostModel/Sparse.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

using namespace zen::cost;
using zen::vocab::SparseScheme;

namespace {

const SparseTable kTable{200000, 64}; // the 200 000 x 64 embedding

CostModel clusterOf(int64_t nodes, const char *preset = "a100x64") {
  return CostModel(withNodes(loadCluster(preset), nodes));
}

/// Statistics of `density` per rank growing as independent uniform draws do:
/// merged density 1 - (1 - d)^k.
SparsityStatistics uniformStatistics(double density, int64_t world) {
  SparsityStatistics stats;
  stats.density = density;
  for (int64_t ranks = 1; ranks <= world; ranks *= 2)
    stats.gamma.push_back((1 - std::pow(1 - density, double(ranks))) / density);
  stats.blockDensity = 1 - std::pow(1 - density, double(omniReduceBlockRows(kTable)));
  for (int64_t ranks = 1; ranks <= world; ranks *= 2)
    stats.blockGamma.push_back(
        (1 - std::pow(1 - stats.blockDensity, double(ranks))) / stats.blockDensity);
  return stats;
}

SparseScheme cheapest(const CostModel &model, const SparsityStatistics &stats, Group group) {
  return rankSparseSchemes(model, kTable, stats, group).front().scheme;
}

} // namespace

// The Zipf model: the density is the expected distinct rows of the lookups, below the lookups
// themselves; gamma starts at 1, grows, and is bounded by 1 / density; a frequency-ordered
// table is range-skewed.
TEST(SparseStatistics, ZipfModelIsConsistent) {
  SparsityStatistics stats = zipfStatistics(kTable, 32 * 16, 128);
  ASSERT_EQ(stats.gamma.size(), 8u); // 1, 2, 4, ..., 128
  EXPECT_EQ(stats.gamma[0], 1.0);
  EXPECT_GT(stats.density, 0.0);
  EXPECT_LT(stats.density * kTable.rows, 32.0 * 16);
  for (size_t k = 1; k < stats.gamma.size(); ++k) {
    EXPECT_GT(stats.gamma[k], stats.gamma[k - 1]);
    EXPECT_LE(stats.gamma[k], double(size_t(1) << k) + 1e-9); // at most k disjoint ranks' rows
    EXPECT_LE(stats.density * stats.gamma[k], 1.0 + 1e-12);
  }
  EXPECT_GT(stats.skew, 0.6); // Zen: over 60% in the first of 8 partitions
  EXPECT_EQ(stats.hashSkew, 1.0 / 8);
  EXPECT_GE(stats.blockDensity, stats.density); // a block holds a row when any of its rows is
  EXPECT_EQ(stats.source, SparsitySource::Model);
}

// With few lookups every one hits a distinct row almost surely (density ~ lookups / rows);
// uniform popularity (exponent 0) matches the closed form 1 - (1 - 1/R)^L.
TEST(SparseStatistics, ZipfModelLimits) {
  SparsityStatistics uniform = zipfStatistics(kTable, 2000, 4, 0.0);
  const double expected = 1 - std::pow(1 - 1.0 / kTable.rows, 2000.0);
  EXPECT_NEAR(uniform.density, expected, 1e-6 * expected);
  EXPECT_NEAR(uniform.skew, 1.0 / 8, 1e-3);
  EXPECT_NEAR(uniform.gamma[2], (1 - std::pow(1 - 1.0 / kTable.rows, 8000.0)) / expected, 1e-6);
  // Deterministic: the same inputs give the same numbers.
  SparsityStatistics again = zipfStatistics(kTable, 2000, 4, 0.0);
  EXPECT_EQ(again.density, uniform.density);
  EXPECT_EQ(again.gamma, uniform.gamma);
}

TEST(SparseStatistics, GammaInterpolatesAndRangeShareFollowsSkew) {
  SparsityStatistics stats;
  stats.density = 0.01;
  stats.gamma = {1, 2, 3};
  EXPECT_EQ(stats.gammaAt(1), 1);
  EXPECT_EQ(stats.gammaAt(4), 3);
  EXPECT_EQ(stats.gammaAt(64), 3);
  EXPECT_NEAR(stats.gammaAt(std::sqrt(2.0)), 1.5, 1e-12);
  stats.skew = 1.0 / 8;
  EXPECT_NEAR(stats.rangeShare(16), 1.0 / 16, 1e-12);
  stats.skew = 0.6;
  EXPECT_NEAR(stats.rangeShare(8), 0.6, 1e-12);
  EXPECT_GT(stats.rangeShare(2), 0.6);
  EXPECT_LT(stats.rangeShare(64), 0.6);
  EXPECT_GE(stats.rangeShare(64), 1.0 / 64);
}

// Dense is the collective model's all-reduce of the whole table, nothing added.
TEST(SparseCost, DenseIsTheAllReduce) {
  CostModel model = clusterOf(16);
  SparsityStatistics stats = uniformStatistics(0.01, 128);
  SparseSyncCost dense = sparseSyncCost(model, SparseScheme::Dense, kTable, stats, model.worldGroup());
  EXPECT_DOUBLE_EQ(dense.timeUs, model.collective(CollectiveKind::AllReduce,
                                                  kTable.denseBytes(), model.worldGroup())
                                     .timeUs);
  EXPECT_EQ(dense.kernelUs, 0);
}

// AGsparse moves every rank's pairs to every rank: n x the pairs' bytes gathered.
TEST(SparseCost, AgSparseGathersEveryRanksPairs) {
  CostModel model = clusterOf(16);
  SparsityStatistics stats = uniformStatistics(0.01, 128);
  SparseSyncCost ag = sparseSyncCost(model, SparseScheme::AgSparse, kTable, stats, model.worldGroup());
  const double pairs = 0.01 * kTable.rows * (64 * 4 + indexBytes(kTable));
  EXPECT_NEAR(ag.wireBytes, 127.0 * pairs, 1e-6 * ag.wireBytes);
  EXPECT_GE(ag.communicationUs,
            model.collective(CollectiveKind::AllGather, 128 * pairs, model.worldGroup()).timeUs - 1e-9);
  EXPECT_GT(ag.kernelUs, 0);
}

// Balanced follows Zen's (n-1)/n (gamma_n + 1) M d / b in bytes: push the pairs, pull the
// merged shards (and the bitmap).
TEST(SparseCost, BalancedSendsZensBytes) {
  CostModel model = clusterOf(16);
  SparsityStatistics stats = uniformStatistics(0.01, 128);
  SparseSyncCost balanced =
      sparseSyncCost(model, SparseScheme::Balanced, kTable, stats, model.worldGroup());
  const double d = 0.01, n = 128, rows = kTable.rows, rowBytes = 256;
  const double expected = (n - 1) / n *
                          (d * rows * (rowBytes + 4) + stats.mergedDensity(n) * rows * rowBytes +
                           rows / 8);
  EXPECT_NEAR(balanced.wireBytes, expected, 1e-9 * expected);
  EXPECT_LT(balanced.wireBytes, kTable.denseBytes());
}

// SparCML's rounds follow sum_i gamma_{2^(i-1)} M d in pairs while they are lighter than the
// dense table, then the dense all-reduce; its threshold is where pairs outweigh dense rows.
TEST(SparseCost, SparCmlDoublesUntilDense) {
  CostModel model = clusterOf(16);
  SparsityStatistics sparse = uniformStatistics(0.001, 128);
  SparseSyncCost rounds = sparseSyncCost(model, SparseScheme::SparCml, kTable, sparse, model.worldGroup());
  double expected = 0;
  for (int64_t holders = 1; holders < 128; holders *= 2)
    expected += sparse.mergedDensity(double(holders)) * kTable.rows * (256 + 4);
  EXPECT_NEAR(rounds.wireBytes, expected, 1e-9 * expected);
  EXPECT_NEAR(rounds.denseThreshold, 256.0 / 260.0, 1e-12);
  // At 40% density the merged pairs pass the table's size after a round or two: the dense
  // all-reduce ends it, so SparCML costs more than dense alone.
  SparsityStatistics dense = uniformStatistics(0.4, 128);
  SparseSyncCost switched = sparseSyncCost(model, SparseScheme::SparCml, kTable, dense, model.worldGroup());
  EXPECT_GT(switched.timeUs,
            sparseSyncCost(model, SparseScheme::Dense, kTable, dense, model.worldGroup()).timeUs);
}

// OmniReduce sends whole blocks, range-partitioned: skew makes its fullest owner the
// bottleneck.
TEST(SparseCost, OmniReduceSuffersSkew) {
  CostModel model = clusterOf(16);
  SparsityStatistics even = uniformStatistics(0.01, 128);
  SparsityStatistics skewed = even;
  skewed.skew = 0.6;
  SparseSyncCost a = sparseSyncCost(model, SparseScheme::OmniReduce, kTable, even, model.worldGroup());
  SparseSyncCost b = sparseSyncCost(model, SparseScheme::OmniReduce, kTable, skewed, model.worldGroup());
  EXPECT_EQ(a.blockRows, 4); // 256 elements of 64-element rows
  EXPECT_GT(b.timeUs, 2 * a.timeUs);
  // Balanced hashes, so the range skew does not touch it.
  EXPECT_EQ(sparseSyncCost(model, SparseScheme::Balanced, kTable, even, model.worldGroup()).timeUs,
            sparseSyncCost(model, SparseScheme::Balanced, kTable, skewed, model.worldGroup()).timeUs);
}

// Hierarchical needs several nodes of several ranks.
TEST(SparseCost, HierarchicalNeedsNodes) {
  CostModel one = clusterOf(1);
  SparsityStatistics stats = uniformStatistics(0.01, 8);
  EXPECT_TRUE(std::isinf(
      sparseSyncCost(one, SparseScheme::Hierarchical, kTable, stats, one.worldGroup()).timeUs));
  CostModel many = clusterOf(16);
  EXPECT_TRUE(std::isfinite(sparseSyncCost(many, SparseScheme::Hierarchical, kTable,
                                           uniformStatistics(0.01, 128), many.worldGroup())
                                .timeUs));
}

// The bar: at 128 ranks and ~1% density the cheapest is neither AGsparse nor dense;
// at 2-4 ranks with high density, dense.
TEST(SparseCost, ChoiceAt128RanksAndOnePercentIsSparseNotAgSparse) {
  CostModel model = clusterOf(16);
  for (const SparsityStatistics &stats :
       {uniformStatistics(0.01, 128), zipfStatistics(kTable, 2000, 128)}) {
    SparseScheme best = cheapest(model, stats, model.worldGroup());
    EXPECT_NE(best, SparseScheme::AgSparse) << stats.density;
    EXPECT_NE(best, SparseScheme::Dense) << stats.density;
  }
}

// "High" is where the merged pairs outweigh the all-reduce's 2(n-1)/n M: at 2 ranks a rank
// sends M dense and d M (1 + index/row) sparse, so 30% still goes sparse there.
TEST(SparseCost, DenseWinsOnFewRanksAtHighDensity) {
  CostModel model = clusterOf(1, "a100x8");
  for (int64_t ranks : {2, 4}) {
    Group group = model.groupOf(ranks);
    for (double density : {0.6, 0.9})
      EXPECT_EQ(cheapest(model, uniformStatistics(density, ranks), group), SparseScheme::Dense)
          << ranks << " ranks, density " << density;
  }
  EXPECT_NE(cheapest(model, uniformStatistics(0.3, 2), model.groupOf(2)), SparseScheme::Dense);
}

// Every scheme's price is finite and positive where it runs, and the ranking is sorted.
TEST(SparseCost, RankingIsSortedAndFinite) {
  CostModel model = clusterOf(16);
  auto ranking = rankSparseSchemes(model, kTable, uniformStatistics(0.05, 128), model.worldGroup());
  ASSERT_EQ(ranking.size(), std::size(zen::vocab::kSparseSchemes));
  for (size_t i = 0; i < ranking.size(); ++i) {
    EXPECT_TRUE(std::isfinite(ranking[i].timeUs));
    EXPECT_GT(ranking[i].timeUs, 0);
    if (i)
      EXPECT_LE(ranking[i - 1].timeUs, ranking[i].timeUs);
  }
}

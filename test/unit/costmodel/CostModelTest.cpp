//===- CostModelTest.cpp - collective and compute costs -------------------===//
#include "zen/CostModel/CostModel.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace zen::cost;

namespace {
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

const CollectiveKind kAllKinds[] = {CollectiveKind::AllReduce, CollectiveKind::ReduceScatter,
                                    CollectiveKind::AllGather, CollectiveKind::AllToAll,
                                    CollectiveKind::Broadcast, CollectiveKind::SendRecv};
} // namespace

// docs/design.md: 1 GiB allreduce on 8 GPUs at busbw 235 GB/s = 2*7/8 * 1 GiB / 235 GB/s = 8.00 ms.
TEST(CostModel, WorkedAllReduceOnOneDgxA100) {
  CostModel model(loadCluster("a100x8"));
  CollectiveCost cost = model.collective(CollectiveKind::AllReduce, kGiB, model.worldGroup());
  EXPECT_NEAR(cost.timeUs, 8000, 80);
  EXPECT_EQ(cost.algorithm, Algorithm::Ring);
  EXPECT_NEAR(cost.busBandwidthGBps, 235, 2.35);
}

// docs/design.md: on 64 GPUs at 200 GB/s per node: 2*63/64 * 1 GiB / 200 GB/s = 10.57 ms.
TEST(CostModel, WorkedAllReduceOnEightNodesAt200GBps) {
  Cluster cluster = loadCluster("a100x64");
  cluster.interNode.efficiency = 1.0;  // 8 x 25 GB/s = 200 GB/s per node exactly
  CostModel model(cluster);
  CollectiveCost cost = model.collective(CollectiveKind::AllReduce, kGiB, model.worldGroup());
  EXPECT_NEAR(cost.timeUs, 10570, 105.7);
  EXPECT_EQ(cost.algorithm, Algorithm::Ring);
  // The preset's 0.92 network efficiency gives the measured ~184 GB/s busbw.
  CostModel preset(loadCluster("a100x64"));
  EXPECT_NEAR(preset.collective(CollectiveKind::AllReduce, kGiB, preset.worldGroup()).busBandwidthGBps,
              184, 2);
}

// docs/design.md: an 8-byte allreduce on 8 NVLink GPUs takes ~15 us (NCCL LL: 6.6 + 14 * 0.6).
TEST(CostModel, WorkedSmallAllReduceLatency) {
  CostModel model(loadCluster("a100x8"));
  CollectiveCost cost = model.collective(CollectiveKind::AllReduce, 8, model.worldGroup());
  EXPECT_NEAR(cost.timeUs, 15, 1);
  EXPECT_EQ(cost.protocol, Protocol::LL);
}

TEST(CostModel, MonotoneInBytesForEveryKindAlgorithmAndPreset) {
  for (const char *preset : {"a100x64", "a100x8", "h100x256", "v100x16-10gbe", "cpu-local"}) {
    CostModel model(loadCluster(preset));
    for (CollectiveKind kind : kAllKinds) {
      Group group = kind == CollectiveKind::SendRecv ? Group{2, std::min<int64_t>(2, model.cluster().nodes)}
                                                     : model.worldGroup();
      for (Algorithm algorithm : {Algorithm::Ring, Algorithm::Tree, Algorithm::Hierarchical, Algorithm::Direct}) {
        if (!CostModel::supports(kind, algorithm, group))
          continue;
        double previous = 0;
        for (double bytes = 1; bytes <= 8 * kGiB; bytes *= 2) {
          double time = model.collective(kind, bytes, group, algorithm).timeUs;
          EXPECT_TRUE(std::isfinite(time));
          EXPECT_GE(time, previous) << preset << " " << toString(kind) << " "
                                    << toString(algorithm) << " at " << bytes << " B";
          previous = time;
        }
      }
      double previous = 0;
      for (double bytes = 1; bytes <= 8 * kGiB; bytes *= 1.5) {
        double time = model.collective(kind, bytes, group).timeUs;
        EXPECT_GE(time, previous) << preset << " " << toString(kind) << " at " << bytes;
        previous = time;
      }
    }
  }
}

TEST(CostModel, SmallMessagesAreLatencyBoundLargeOnesBandwidthBound) {
  for (const char *preset : {"a100x64", "a100x8", "h100x256", "v100x16-10gbe"}) {
    CostModel model(loadCluster(preset));
    for (CollectiveKind kind : {CollectiveKind::AllReduce, CollectiveKind::AllGather,
                                CollectiveKind::ReduceScatter, CollectiveKind::AllToAll}) {
      CollectiveCost small = model.collective(kind, 256, model.worldGroup());
      CollectiveCost large = model.collective(kind, kGiB, model.worldGroup());
      EXPECT_LT(small.bandwidthUs, 0.1 * small.timeUs) << preset << " " << toString(kind);
      EXPECT_GT(large.bandwidthUs, 0.9 * large.timeUs) << preset << " " << toString(kind);
      // Doubling a tiny message barely moves the time; doubling a huge one doubles it.
      EXPECT_LT(model.collective(kind, 512, model.worldGroup()).timeUs, 1.1 * small.timeUs);
      EXPECT_NEAR(model.collective(kind, 2 * kGiB, model.worldGroup()).timeUs / large.timeUs, 2.0, 0.1);
    }
  }
}

TEST(CostModel, PicksTheCheapestAlgorithmLikeNccl) {
  CostModel model(loadCluster("a100x64"));
  Group world = model.worldGroup();
  // Small allreduce across nodes: the tree's log-depth latency wins.
  CollectiveCost small = model.collective(CollectiveKind::AllReduce, 1024, world);
  EXPECT_EQ(small.algorithm, Algorithm::Tree);
  EXPECT_LT(small.timeUs, model.collective(CollectiveKind::AllReduce, 1024, world, Algorithm::Ring).timeUs);
  // Large allreduce: the ring's bandwidth wins.
  EXPECT_EQ(model.collective(CollectiveKind::AllReduce, kGiB, world).algorithm, Algorithm::Ring);
  // Inside one node there is no tree advantage.
  CostModel dgx(loadCluster("a100x8"));
  EXPECT_EQ(dgx.collective(CollectiveKind::AllReduce, kGiB, dgx.worldGroup()).algorithm, Algorithm::Ring);
  EXPECT_EQ(model.collective(CollectiveKind::AllToAll, kGiB, world).algorithm, Algorithm::Direct);
  // Two nodes sharing one NIC each: the 2D algorithm moves 1/g of the data across.
  Cluster oneNic = loadCluster("a100x64");
  oneNic.nodes = 2;
  oneNic.nicsPerNode = 1;
  CostModel few(oneNic);
  EXPECT_EQ(few.collective(CollectiveKind::AllReduce, kGiB, few.worldGroup()).algorithm,
            Algorithm::Hierarchical);
  // The choice is the minimum over supported algorithms.
  for (double bytes : {64.0, 65536.0, 1e8}) {
    CollectiveCost best = model.collective(CollectiveKind::AllReduce, bytes, world);
    for (Algorithm algorithm : {Algorithm::Ring, Algorithm::Tree, Algorithm::Hierarchical})
      EXPECT_LE(best.timeUs, model.collective(CollectiveKind::AllReduce, bytes, world, algorithm).timeUs);
  }
}

TEST(CostModel, UnsupportedAlgorithmIsInfinite) {
  CostModel model(loadCluster("a100x8"));
  EXPECT_FALSE(CostModel::supports(CollectiveKind::AllGather, Algorithm::Tree, model.worldGroup()));
  EXPECT_FALSE(CostModel::supports(CollectiveKind::AllReduce, Algorithm::Hierarchical, model.worldGroup()));
  EXPECT_TRUE(std::isinf(
      model.collective(CollectiveKind::AllGather, 1024, model.worldGroup(), Algorithm::Tree).timeUs));
}

TEST(CostModel, TrivialCollectivesAreFree) {
  CostModel model(loadCluster("a100x64"));
  EXPECT_EQ(model.collective(CollectiveKind::AllReduce, 1e9, Group{1, 1}).timeUs, 0);
  EXPECT_EQ(model.collective(CollectiveKind::AllReduce, 0, model.worldGroup()).timeUs, 0);
}

TEST(CostModel, BusBandwidthFollowsNcclTestsConvention) {
  CostModel model(loadCluster("a100x8"));
  CollectiveCost cost = model.collective(CollectiveKind::AllGather, kGiB, model.worldGroup());
  EXPECT_NEAR(cost.algBandwidthGBps, kGiB / cost.timeUs / 1e3, 1e-9);
  EXPECT_NEAR(cost.busBandwidthGBps, cost.algBandwidthGBps * 7.0 / 8.0, 1e-9);
  EXPECT_NEAR(cost.busBandwidthGBps, 235, 3);
}

TEST(CostModel, GroupsFillNodesInOrder) {
  CostModel model(loadCluster("a100x64"));
  EXPECT_EQ(model.groupOf(8).nodes, 1);
  EXPECT_EQ(model.groupOf(9).nodes, 2);
  EXPECT_EQ(model.groupOf(64).nodes, 8);
  EXPECT_EQ(model.worldGroup().ranks, 64);
  // Crossing a node boundary costs more than staying inside one.
  EXPECT_GT(model.collective(CollectiveKind::AllReduce, kGiB, model.groupOf(16)).timeUs,
            model.collective(CollectiveKind::AllReduce, kGiB, model.groupOf(8)).timeUs);
}

TEST(CostModel, ProfiledOverridesReplaceTheAnalyticModel) {
  Cluster cluster = loadCluster("cpu-local");
  cluster.profiled.push_back({CollectiveKind::AllReduce, 4, 4, 1024, 20, 0.01, 0.99, 0.1});
  cluster.profiled.push_back({CollectiveKind::AllReduce, 4, 1024, 1 << 26, 100, 0.002, 0.99, 0.1});
  CostModel model(cluster);
  Group group{4, 1};
  CollectiveCost small = model.collective(CollectiveKind::AllReduce, 512, group);
  EXPECT_TRUE(small.profiled);
  EXPECT_DOUBLE_EQ(small.timeUs, 20 + 0.01 * 512);
  EXPECT_DOUBLE_EQ(small.latencyUs, 20);
  EXPECT_DOUBLE_EQ(model.collective(CollectiveKind::AllReduce, 1 << 20, group).timeUs, 100 + 0.002 * (1 << 20));
  // Outside every range: the nearest range extrapolates.
  EXPECT_DOUBLE_EQ(model.collective(CollectiveKind::AllReduce, 1.0 * (1LL << 30), group).timeUs,
                   100 + 0.002 * (1LL << 30));
  EXPECT_DOUBLE_EQ(model.collective(CollectiveKind::AllReduce, 1, group).timeUs, 20 + 0.01);
  // Another rank count or collective keeps the analytic model.
  EXPECT_FALSE(model.collective(CollectiveKind::AllReduce, 512, Group{2, 1}).profiled);
  EXPECT_FALSE(model.collective(CollectiveKind::AllGather, 512, group).profiled);
  // The lower bound uses the large-message slope.
  CostModel world(cluster);
  EXPECT_DOUBLE_EQ(world.bandwidthOptimalAllReduceUs(1e6), 0.002 * 1e6);
}

TEST(CostModel, ChunkingPaysLatencyPerChunk) {
  CostModel model(loadCluster("a100x64"));
  Group world = model.worldGroup();
  CollectiveCost whole = model.chunkedCollective(CollectiveKind::AllReduce, 1e8, world, 1);
  CollectiveCost four = model.chunkedCollective(CollectiveKind::AllReduce, 1e8, world, 4);
  EXPECT_DOUBLE_EQ(whole.timeUs, model.collective(CollectiveKind::AllReduce, 1e8, world).timeUs);
  EXPECT_NEAR(four.timeUs, 4 * model.collective(CollectiveKind::AllReduce, 2.5e7, world).timeUs, 1e-6);
  EXPECT_GT(four.timeUs, whole.timeUs);
  EXPECT_NEAR(four.latencyUs + four.bandwidthUs, four.timeUs, 1e-6);
}

TEST(CostModel, BandwidthOptimalAllReduce) {
  CostModel model(loadCluster("a100x64"));
  // 2(n-1)/n * S / (8 x 25 GB/s x 0.92).
  EXPECT_NEAR(model.bandwidthOptimalAllReduceUs(kGiB), 2.0 * 63 / 64 * kGiB / 184e3, 1e-6);
  EXPECT_LE(model.bandwidthOptimalAllReduceUs(kGiB),
            model.collective(CollectiveKind::AllReduce, kGiB, model.worldGroup()).timeUs);
  EXPECT_EQ(CostModel(loadCluster("a100x8")).bandwidthOptimalAllReduceUs(0), 0);
  EXPECT_DOUBLE_EQ(model.bandwidthOptimalAllReduceUs(kGiB, model.worldGroup()),
                   model.bandwidthOptimalAllReduceUs(kGiB));
}

TEST(CostModel, BandwidthOptimalAllReduceOverASmallerGroup) {
  CostModel model(loadCluster("a100x64"));
  // 8 ranks fill one node: NVLink, 300 GB/s x 0.7833 = 235 GB/s (docs/design.md: 8.00 ms
  // for 1 GiB), not the 184 GB/s of the nodes' NICs.
  double oneNode = model.bandwidthOptimalAllReduceUs(kGiB, model.groupOf(8));
  EXPECT_NEAR(oneNode, 2.0 * 7 / 8 * kGiB / (300 * 0.7833 * 1e3), 1e-6);
  EXPECT_NEAR(oneNode, 8000, 10);
  EXPECT_LE(oneNode, model.collective(CollectiveKind::AllReduce, kGiB, model.groupOf(8)).timeUs);
  // 16 ranks span two nodes: the network again, with 2(n-1)/n for n = 16.
  EXPECT_NEAR(model.bandwidthOptimalAllReduceUs(kGiB, model.groupOf(16)),
              2.0 * 15 / 16 * kGiB / 184e3, 1e-6);
  EXPECT_EQ(model.bandwidthOptimalAllReduceUs(kGiB, model.groupOf(1)), 0);
  // A profiled fit applies to its own rank count only.
  Cluster cluster = loadCluster("a100x64");
  cluster.profiled.push_back({CollectiveKind::AllReduce, 8, 1024, 1 << 26, 10, 5e-6, 0.99, 0.1});
  CostModel profiled(cluster);
  EXPECT_DOUBLE_EQ(profiled.bandwidthOptimalAllReduceUs(1e6, profiled.groupOf(8)), 5e-6 * 1e6);
  EXPECT_DOUBLE_EQ(profiled.bandwidthOptimalAllReduceUs(kGiB), model.bandwidthOptimalAllReduceUs(kGiB));
}

TEST(CostModel, ComputeRoofline) {
  CostModel model(loadCluster("a100x8"));
  // 1 TFLOP of bf16 at 312 x 0.6 TFLOP/s.
  EXPECT_NEAR(model.computeUs(1e12, 0, DType::BF16), 1e6 / (312 * 0.6), 1e-6);
  // 1 GB moved at 2039 x 0.8 GB/s.
  EXPECT_NEAR(model.computeUs(0, 1e9, DType::F32), 1e6 / (2039 * 0.8), 1e-6);
  // The bound that binds wins.
  EXPECT_DOUBLE_EQ(model.computeUs(1e12, 1e9, DType::F32), model.computeUs(1e12, 0, DType::F32));
  // V100 has no bf16: it runs at the fp32 rate.
  CostModel v100(loadCluster("v100x16-10gbe"));
  EXPECT_DOUBLE_EQ(v100.computeUs(1e12, 0, DType::BF16), v100.computeUs(1e12, 0, DType::F32));
  EXPECT_LT(v100.computeUs(1e12, 0, DType::F16), v100.computeUs(1e12, 0, DType::F32));
}

//===- CostModelTest.cpp - collective and compute costs -------------------===//
#include "zen/CostModel/CostModel.h"
#include "zen/CostModel/Transformer.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace zen::cost;

namespace {
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

const CollectiveKind kAllKinds[] = {CollectiveKind::AllReduce, CollectiveKind::ReduceScatter,
                                    CollectiveKind::AllGather, CollectiveKind::AllToAll,
                                    CollectiveKind::Broadcast, CollectiveKind::SendRecv};
} // namespace

// Per-hop latencies of the a100 presets (NCCL's ratios applied to their measured 1.9 us LL hop).
constexpr double kNvlinkLL = 1.9, kNvlinkSimple = 1.9 * 3.4 / 0.6;
constexpr double kNetSimple = 2.7 * 14.0 / 2.7;

// docs/design.md: 1 GiB allreduce on 8 GPUs at busbw 235 GB/s = 2*7/8 * 1 GiB / 235 GB/s = 8.00 ms,
// plus the ring's Simple latency: NCCL's 8.4 us base and 2(n-1) = 14 NVLink hops.
TEST(CostModel, WorkedAllReduceOnOneDgxA100) {
  CostModel model(loadCluster("a100x8"));
  CollectiveCost cost = model.collective(CollectiveKind::AllReduce, kGiB, model.worldGroup());
  const double bandwidthUs = 2.0 * 7 / 8 * kGiB / (300 * 0.7833 * 1e3);
  EXPECT_NEAR(bandwidthUs, 8000, 5);
  EXPECT_EQ(cost.algorithm, Algorithm::Ring);
  EXPECT_EQ(cost.protocol, Protocol::Simple);
  EXPECT_NEAR(cost.bandwidthUs, bandwidthUs, 1e-6);
  EXPECT_NEAR(cost.latencyUs, 8.4 + 14 * kNvlinkSimple, 1e-9);
  EXPECT_DOUBLE_EQ(cost.timeUs, cost.latencyUs + cost.bandwidthUs);
}

// docs/design.md: on 64 GPUs at 200 GB/s per node the ring moves 2*63/64 * 1 GiB in 10.57 ms;
// its latency is 2(n-1) = 126 steps, 2(N-1) = 14 of them across nodes.
TEST(CostModel, WorkedAllReduceOnEightNodesAt200GBps) {
  Cluster cluster = loadCluster("a100x64");
  cluster.interNode.efficiency = 1.0;  // 8 x 25 GB/s = 200 GB/s per node exactly
  CostModel model(cluster);
  CollectiveCost ring =
      model.collective(CollectiveKind::AllReduce, kGiB, model.worldGroup(), Algorithm::Ring);
  EXPECT_NEAR(ring.bandwidthUs, 10570, 5);
  EXPECT_NEAR(ring.latencyUs, 8.4 + 112 * kNvlinkSimple + 14 * kNetSimple, 1e-9);
  // At 8 GiB the ring's bandwidth wins over the tree's 0.92 efficiency.
  CollectiveCost large = model.collective(CollectiveKind::AllReduce, 8 * kGiB, model.worldGroup());
  EXPECT_EQ(large.algorithm, Algorithm::Ring);
  // The preset's 0.96 network efficiency gives NVIDIA's measured ~192 GB/s busbw.
  CostModel preset(loadCluster("a100x64"));
  EXPECT_NEAR(
      preset.collective(CollectiveKind::AllReduce, 8 * kGiB, preset.worldGroup()).busBandwidthGBps,
      192, 4);
}

// nccl-tests#123: on a DGX A100 a ring all-reduce of <= 128 B takes 33.7 us on 8 GPUs: NCCL's
// 6.6 us LL base latency and 14 LL hops of 1.9 us.
TEST(CostModel, WorkedSmallAllReduceLatency) {
  CostModel model(loadCluster("a100x8"));
  CollectiveCost cost = model.collective(CollectiveKind::AllReduce, 8, model.worldGroup());
  EXPECT_NEAR(cost.latencyUs, 6.6 + 14 * kNvlinkLL, 1e-9);
  EXPECT_NEAR(cost.timeUs, 33.7, 1);
  EXPECT_EQ(cost.protocol, Protocol::LL);
}

// Every kind, algorithm and preset: time strictly increases with size (the cost bar:
// an all-gather on a100x64 no longer costs the same from 1 KB to 128 KB), chunked or not.
TEST(CostModel, StrictlyIncreasingInBytesForEveryKindAlgorithmAndPreset) {
  for (const std::string &preset : presetNames()) {
    CostModel model(loadCluster(preset));
    std::vector<Group> groups = {model.worldGroup(), model.groupOf(2)};
    if (model.cluster().nodes > 1)
      groups.push_back(model.groupOf(model.cluster().gpusPerNode + 1));
    for (Group group : groups)
      for (CollectiveKind kind : kAllKinds) {
        Group used = kind == CollectiveKind::SendRecv ? model.groupOf(2) : group;
        if (used.ranks < 2)
          continue;
        for (Algorithm algorithm :
             {Algorithm::Ring, Algorithm::Tree, Algorithm::Hierarchical, Algorithm::Direct}) {
          if (!CostModel::supports(kind, algorithm, used))
            continue;
          double previous = 0;
          for (double bytes = 1; bytes <= 16 * kGiB; bytes *= 1.25) {
            double time = model.collective(kind, bytes, used, algorithm).timeUs;
            EXPECT_TRUE(std::isfinite(time));
            EXPECT_GT(time, previous) << preset << " " << toString(kind) << " "
                                      << toString(algorithm) << " ranks " << used.ranks << " at "
                                      << bytes << " B";
            previous = time;
          }
        }
        for (int64_t chunks : {1, 4}) {
          double previous = 0;
          for (double bytes = 1; bytes <= 16 * kGiB; bytes *= 1.1) {
            double time = model.chunkedCollective(kind, bytes, used, chunks).timeUs;
            EXPECT_GT(time, previous) << preset << " " << toString(kind) << " ranks "
                                      << used.ranks << " chunks " << chunks << " at " << bytes;
            previous = time;
          }
        }
      }
  }
  CostModel model(loadCluster("a100x64"));
  EXPECT_GT(model.collective(CollectiveKind::AllGather, 128 * 1024, model.worldGroup()).timeUs,
            model.collective(CollectiveKind::AllGather, 1024, model.worldGroup()).timeUs);
}

TEST(CostModel, SmallMessagesAreLatencyBoundLargeOnesBandwidthBound) {
  // On 256 ranks a ring's 255 steps of latency are still a third of a 1 GiB all-gather: "large"
  // is 16 GiB here.
  constexpr double kLarge = 16 * kGiB;
  for (const char *preset : {"a100x64", "a100x8", "h100x256", "v100x16-10gbe"}) {
    CostModel model(loadCluster(preset));
    for (CollectiveKind kind : {CollectiveKind::AllReduce, CollectiveKind::AllGather,
                                CollectiveKind::ReduceScatter, CollectiveKind::AllToAll}) {
      CollectiveCost small = model.collective(kind, 256, model.worldGroup());
      CollectiveCost large = model.collective(kind, kLarge, model.worldGroup());
      EXPECT_LT(small.bandwidthUs, 0.1 * small.timeUs) << preset << " " << toString(kind);
      EXPECT_GT(large.bandwidthUs, 0.9 * large.timeUs) << preset << " " << toString(kind);
      // Doubling a tiny message barely moves the time; doubling a huge one doubles it.
      EXPECT_LT(model.collective(kind, 512, model.worldGroup()).timeUs, 1.1 * small.timeUs);
      EXPECT_NEAR(model.collective(kind, 2 * kLarge, model.worldGroup()).timeUs / large.timeUs, 2.0,
                  0.1);
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
  EXPECT_EQ(model.collective(CollectiveKind::AllReduce, 8 * kGiB, world).algorithm, Algorithm::Ring);
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
  CollectiveCost cost = model.collective(CollectiveKind::AllGather, 8 * kGiB, model.worldGroup());
  EXPECT_NEAR(cost.algBandwidthGBps, 8 * kGiB / cost.timeUs / 1e3, 1e-9);
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
  // The bound's slope is the least over every fitted range.
  EXPECT_DOUBLE_EQ(model.cheapestUsPerByte(CollectiveKind::AllReduce, group), 0.002);
  EXPECT_DOUBLE_EQ(model.communicationBoundUs(1e6, group), 0.002 * 1e6);
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

// How busy each collective keeps a rank's links inside its node and the node's NICs, which
// the simulator shares apart. a100x64: NVLink 300 x 0.7833 GB/s per rank, NICs 8 x 25 x 0.96
// GB/s per node.
TEST(CostModel, LinkLevelsOfEachAlgorithm) {
  CostModel model(loadCluster("a100x64"));
  const double nvlink = 300 * 0.7833, nics = 8 * 25 * 0.96;
  auto cost = [&](Algorithm algorithm, Group group, int64_t chunks = 1) {
    return model.chunkedCollective(CollectiveKind::AllReduce, kGiB, group, chunks, algorithm);
  };
  // Inside a node the ring is NVLink's alone.
  CollectiveCost inside = cost(Algorithm::Ring, Group{8, 1});
  EXPECT_DOUBLE_EQ(inside.intraNodeUs, inside.bandwidthUs);
  EXPECT_DOUBLE_EQ(inside.interNodeUs, 0);
  // Across nodes the ring and the tree are bound by the NICs and keep NVLink busy for
  // the ratio of the rates.
  for (Algorithm algorithm : {Algorithm::Ring, Algorithm::Tree}) {
    CollectiveCost across = cost(algorithm, Group{64, 8});
    EXPECT_DOUBLE_EQ(across.interNodeUs, across.bandwidthUs) << toString(algorithm);
    EXPECT_NEAR(across.intraNodeUs, across.bandwidthUs * nics / nvlink, 1e-6 * across.bandwidthUs)
        << toString(algorithm);
  }
  // One rank per node: the NICs alone.
  CollectiveCost spread = cost(Algorithm::Ring, Group{8, 8});
  EXPECT_DOUBLE_EQ(spread.intraNodeUs, 0);
  EXPECT_DOUBLE_EQ(spread.interNodeUs, spread.bandwidthUs);
  // The 2D algorithm's phases run one after another: it holds both levels all along.
  CollectiveCost twoD = cost(Algorithm::Hierarchical, Group{64, 8});
  EXPECT_DOUBLE_EQ(twoD.intraNodeUs, twoD.bandwidthUs);
  EXPECT_DOUBLE_EQ(twoD.interNodeUs, twoD.bandwidthUs);
  // Pieces add, as their bandwidth parts do.
  CollectiveCost four = cost(Algorithm::Ring, Group{64, 8}, 4);
  CollectiveCost piece =
      model.collective(CollectiveKind::AllReduce, kGiB / 4, Group{64, 8}, Algorithm::Ring);
  EXPECT_NEAR(four.intraNodeUs, 4 * piece.intraNodeUs, 1e-6);
  EXPECT_NEAR(four.interNodeUs, 4 * piece.interNodeUs, 1e-6);
  // A profiled fit does not say which level limits it: it holds every level its group uses.
  Cluster cluster = loadCluster("a100x64");
  cluster.profiled.push_back({CollectiveKind::AllReduce, 16, 1, 1e12, 10, 1e-6, 1, 0});
  CollectiveCost fitted =
      CostModel(cluster).collective(CollectiveKind::AllReduce, kGiB, Group{16, 2});
  EXPECT_TRUE(fitted.profiled);
  EXPECT_DOUBLE_EQ(fitted.intraNodeUs, fitted.bandwidthUs);
  EXPECT_DOUBLE_EQ(fitted.interNodeUs, fitted.bandwidthUs);
}

TEST(CostModel, CommunicationBoundIsTheCheapestSlope) {
  CostModel model(loadCluster("a100x64"));
  Group world = model.worldGroup();
  // Across 8 nodes the flat ring is the cheapest way per byte: 2(n-1)/n * S / (8 x 25 GB/s x 0.96).
  EXPECT_NEAR(model.communicationBoundUs(kGiB, world), 2.0 * 63 / 64 * kGiB / 192e3, 1e-6);
  EXPECT_EQ(model.communicationBoundUs(0, world), 0);
  EXPECT_EQ(model.communicationBoundUs(kGiB, model.groupOf(1)), 0);
  // Below every algorithm at every size, chunked or not.
  for (double bytes : {1.0, 4096.0, 1e6, 1e8, kGiB, 16 * kGiB})
    for (CollectiveKind kind : kAllKinds)
      for (Algorithm algorithm :
           {Algorithm::Ring, Algorithm::Tree, Algorithm::Hierarchical, Algorithm::Direct}) {
        if (!CostModel::supports(kind, algorithm, world))
          continue;
        CollectiveCost cost = model.collective(kind, bytes, world, algorithm);
        EXPECT_GE(cost.bandwidthUs, bytes * model.cheapestUsPerByte(kind, world) * (1 - 1e-12))
            << toString(kind) << " " << toString(algorithm) << " " << bytes;
      }
}

TEST(CostModel, CommunicationBoundOverASmallerGroup) {
  CostModel model(loadCluster("a100x64"));
  // 8 ranks fill one node: NVLink, 300 GB/s x 0.7833 = 235 GB/s (docs/design.md: 8.00 ms
  // for 1 GiB), not the nodes' NICs.
  double oneNode = model.communicationBoundUs(kGiB, model.groupOf(8));
  EXPECT_NEAR(oneNode, 2.0 * 7 / 8 * kGiB / (300 * 0.7833 * 1e3), 1e-6);
  EXPECT_LE(oneNode, model.collective(CollectiveKind::AllReduce, kGiB, model.groupOf(8)).timeUs);
  // 16 ranks span two nodes: the network again, with 2(n-1)/n for n = 16.
  EXPECT_NEAR(model.communicationBoundUs(kGiB, model.groupOf(16)), 2.0 * 15 / 16 * kGiB / 192e3,
              1e-6);
  // A profiled fit applies to its own rank count only.
  Cluster cluster = loadCluster("a100x64");
  cluster.profiled.push_back({CollectiveKind::AllReduce, 8, 1024, 1 << 26, 10, 5e-6, 0.99, 0.1});
  CostModel profiled(cluster);
  EXPECT_DOUBLE_EQ(profiled.communicationBoundUs(1e6, profiled.groupOf(8)), 5e-6 * 1e6);
  EXPECT_DOUBLE_EQ(profiled.communicationBoundUs(kGiB, profiled.worldGroup()),
                   model.communicationBoundUs(kGiB, model.worldGroup()));
}

// The counterexample to the old bound 2(n-1)/n S / min(B_intra, B_node): on two nodes
// with one NIC each the model's own 2D all-reduce sends only 1/g of the bytes across.
TEST(CostModel, CommunicationBoundOnTwoNodesWithOneNicEach) {
  Cluster cluster = loadCluster("a100x64");
  cluster.nodes = 2;
  cluster.nicsPerNode = 1;
  CostModel model(cluster);
  Group world = model.worldGroup();
  const double flatRing = 2.0 * 15 / 16 * kGiB / (25 * 0.96 * 1e3);
  CollectiveCost hierarchical =
      model.collective(CollectiveKind::AllReduce, kGiB, world, Algorithm::Hierarchical);
  ASSERT_LT(hierarchical.timeUs, flatRing);  // the old bound was above a plan
  double bound = model.communicationBoundUs(kGiB, world);
  EXPECT_LE(bound, hierarchical.bandwidthUs * (1 + 1e-12));
  // Intra reduce-scatter + all-gather over NVLink, the inter all-reduce of a 1/8 shard over a
  // 1/8 share of the NIC (2 nodes: ring 2(2-1)/2, tree 2 x 0.92): the ring phase is cheaper.
  const double nvlink = 300 * 0.7833 * 1e3, share = 25 * 0.96 * 1e3 / 8;
  EXPECT_NEAR(bound, 2.0 * 7 / 8 * kGiB / nvlink + 1.0 * (kGiB / 8) / share, 1e-6);
  for (double bytes : {1e3, 1e6, kGiB})
    EXPECT_LE(model.communicationBoundUs(bytes, world),
              model.collective(CollectiveKind::AllReduce, bytes, world).timeUs);
}

TEST(CostModel, CommunicationBoundWithCompressors) {
  CostModel model(loadCluster("v100x16-10gbe"));
  Group world = model.worldGroup();
  auto spec = [](CompressionMethod method, double ratio = 0, int64_t rank = 0) {
    CompressionSpec made;
    made.method = method;
    made.ratio = ratio;
    made.rank = rank;
    return made;
  };
  const double bytes = 4e8, elements = bytes / 4;
  double dense = model.communicationBoundUs(bytes, world);
  double allReduce = model.cheapestUsPerByte(CollectiveKind::AllReduce, world);
  double allGather = model.cheapestUsPerByte(CollectiveKind::AllGather, world);
  // fp16 halves the bytes; with int8 allowed too, its byte and scale per 1024 bound it.
  EXPECT_NEAR(model.communicationBoundUs(bytes, world, {spec(CompressionMethod::FP16)}), dense / 2,
              1e-6 * dense);
  EXPECT_NEAR(model.communicationBoundUs(bytes, world,
                                         {spec(CompressionMethod::FP16), spec(CompressionMethod::Int8)}),
              elements * (1 + 4.0 / 1024) * allReduce, 1e-6 * dense);
  // Top-k payloads are all-gathered: every rank receives all 16 payloads.
  EXPECT_NEAR(model.communicationBoundUs(bytes, world, {spec(CompressionMethod::TopK, 0.01)}),
              std::min(dense, 8 * 0.01 * elements * 16 * allGather), 1e-6 * dense);
  // PowerSGD rank 4: at least 2 r sqrt(e) floats however the buckets fall.
  EXPECT_NEAR(model.communicationBoundUs(bytes, world, {spec(CompressionMethod::PowerSGD, 0, 4)}),
              4 * 2 * 4 * std::sqrt(elements) * allReduce, 1e-6);
}

TEST(CostModel, ProfiledComputeAddsTheMeasuredKernels) {
  Cluster cluster = loadCluster("cpu-local");
  cluster.profiledCompute.gemms = {{16, 16, 16, 10}, {256, 256, 256, 40}};
  cluster.profiledCompute.memoryGBps = 20;
  cluster.profiledCompute.kernelOverheadUs = 0.5;
  CostModel model(cluster);
  const double small = 2.0 * 16 * 16 * 16, large = 2.0 * 256 * 256 * 256;
  // At a timed size: its rate; 1 GB/s = 1e3 bytes per us.
  EXPECT_NEAR(model.computeUs(large, 0), 0.5 + large / 40e3, 1e-9);
  EXPECT_NEAR(model.computeUs(small, 0), 0.5 + small / 10e3, 1e-9);
  // Between them: interpolated in log(FLOPs), halfway in log is halfway in rate.
  const double middle = std::sqrt(small * large);
  EXPECT_NEAR(model.computeUs(middle, 0), 0.5 + middle / 25e3, 1e-9);
  // Outside: the nearest timed shape's rate.
  EXPECT_NEAR(model.computeUs(4 * large, 0), 0.5 + 4 * large / 40e3, 1e-9);
  // GEMM and memory pass add (separate kernels on the same cores); nothing to do costs 0.
  EXPECT_NEAR(model.computeUs(large, 1e6), 0.5 + large / 40e3 + 1e6 / 20e3, 1e-9);
  EXPECT_EQ(model.computeUs(0, 0), 0);
  // The dtype does not change a profile timed in fp32.
  EXPECT_EQ(model.computeUs(large, 0, DType::BF16), model.computeUs(large, 0, DType::F32));
}

TEST(CostModel, ProfiledComputePricesTransformerKernelsAlike) {
  // One machine, one price: the large-model path's GEMMs and element-wise kernels go through
  // the measured rates as the data-parallel path's tasks do.
  Cluster cluster = loadCluster("cpu-local");
  const double before = gemmUs(CostModel(cluster), 256, 256, 256, 1, DType::F32);
  cluster.profiledCompute.gemms = {{16, 16, 16, 10}, {256, 256, 256, 40}};
  cluster.profiledCompute.memoryGBps = 20;
  cluster.profiledCompute.kernelOverheadUs = 0.5;
  CostModel model(cluster);
  const double flops = 2.0 * 256 * 256 * 256, bytes = 4.0 * 3 * 256 * 256;
  EXPECT_NEAR(gemmUs(model, 256, 256, 256, 1, DType::F32), model.computeUs(flops, bytes), 1e-9);
  EXPECT_NEAR(gemmUs(model, 256, 256, 256, 1, DType::F32), 0.5 + flops / 40e3 + bytes / 20e3, 1e-9);
  EXPECT_NE(gemmUs(model, 256, 256, 256, 1, DType::F32), before);
}

TEST(CostModel, ExecutorOverheadOnlyWhenProfiledAndShared) {
  Cluster cluster = loadCluster("cpu-local");
  EXPECT_EQ(CostModel(cluster).executorOverheadUs(1000, Group{4, 1}), 0);
  cluster.profiledExecutor = ProfiledExecutor{12, 0.001, "test"};
  CostModel model(cluster);
  EXPECT_DOUBLE_EQ(model.executorOverheadUs(1000, Group{4, 1}), 12 + 0.001 * 4000);
  EXPECT_EQ(model.executorOverheadUs(1000, Group{1, 1}), 0);  // one rank: nothing to sync
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

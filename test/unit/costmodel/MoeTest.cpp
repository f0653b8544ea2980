//===- MoeTest.cpp - Mixture-of-Experts costs and memory ------------------===//
#include "zen/CostModel/Moe.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>

using namespace zen::cost;

namespace {
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

/// A Switch/GShard-style layer: 1024 tokens per rank, 8 experts, top 2,
/// capacity 1.25.
MoeShape switchLayer() {
  MoeShape shape;
  shape.tokens = 1024;
  shape.hidden = 1024;
  shape.ffn = 4096;
  shape.experts = 8;
  shape.topK = 2;
  shape.capacityFactor = 1.25;
  return shape;
}

TrainingSetup bf16Adam() {
  TrainingSetup setup;
  setup.computeDtype = DType::BF16;
  setup.optimizer = Optimizer::Adam;
  return setup;
}
} // namespace

TEST(Moe, CapacityAndExpertParameters) {
  MoeShape shape = switchLayer();
  // ceil(1.25 x 2 x 1024 / 8) = 320 rows per expert and source rank.
  EXPECT_EQ(shape.capacity(), 320);
  EXPECT_DOUBLE_EQ(shape.expertParams(), 4096.0 * 1024 + 1024.0 * 4096 + 4096 + 1024);
  shape.biases = false;
  shape.fc1Rows = 2 * shape.ffn; // SwiGLU: the gate and linear halves in one weight
  EXPECT_DOUBLE_EQ(shape.expertParams(), 8192.0 * 1024 + 1024.0 * 4096);
  // A tiny load still gets a row.
  shape.tokens = 1;
  shape.capacityFactor = 0.01;
  EXPECT_EQ(shape.capacity(), 1);
}

TEST(Moe, ExpertParallelDegreeDividesExpertsAndDataParallelGroup) {
  const MoeShape shape = switchLayer();
  EXPECT_EQ(checkExpertParallel(shape, 8, 16), "");
  EXPECT_EQ(checkExpertParallel(shape, 1, 3), "");
  EXPECT_EQ(checkExpertParallel(shape, 3, 3), "ep 3 does not divide the 8 experts");
  EXPECT_EQ(checkExpertParallel(shape, 4, 6), "ep 4 does not divide dp 6");
  EXPECT_EQ(checkExpertParallel(shape, 0, 8), "ep and dp must be at least 1");
  MoeShape wide = shape;
  wide.topK = 9;
  EXPECT_EQ(checkExpertParallel(wide, 1, 1), "top-k 9 must be between 1 and the 8 experts");
  MoeShape empty = shape;
  empty.experts = 0;
  EXPECT_NE(checkExpertParallel(empty, 1, 1), "");
  MoeShape unbounded = shape;
  unbounded.capacityFactor = std::numeric_limits<double>::infinity();
  EXPECT_EQ(checkExpertParallel(unbounded, 1, 1), "the capacity factor must be positive");
}

TEST(Moe, BusiestExpertGetsImbalanceTimesTheMeanLoadUpToItsCapacity) {
  const MoeShape shape = switchLayer(); // mean load 2 x 1024 / 8 = 256, capacity 320
  EXPECT_DOUBLE_EQ(busiestExpertRows(shape, 1.0), 256);
  EXPECT_DOUBLE_EQ(busiestExpertRows(shape, 1.2), 308); // ceil(307.2)
  EXPECT_DOUBLE_EQ(busiestExpertRows(shape, 2.0), 320); // the rest is dropped
  EXPECT_THROW(busiestExpertRows(shape, 0.5), zen::Error);
  EXPECT_THROW(busiestExpertRows(shape, std::nan("")), zen::Error);
  EXPECT_THROW(busiestExpertRows(shape, std::numeric_limits<double>::infinity()),
               zen::Error);
}

TEST(Moe, DispatchBuffersAreCapacityPadded) {
  // 8 experts x 320 rows x 1024 features, 2 bytes in bf16, 4 in fp32.
  EXPECT_DOUBLE_EQ(dispatchBytes(switchLayer(), DType::BF16), 8.0 * 320 * 1024 * 2);
  EXPECT_DOUBLE_EQ(dispatchBytes(switchLayer(), DType::F32), 8.0 * 320 * 1024 * 4);
}

// The flat all-to-all is the cost model's direct all-to-all: inside a node
// every rank sends (g - 1)/g of its buffer over its own NVLink (300 GB/s x
// 0.7833); across nodes the off-node share (n - g)/n goes through the rank's
// share of the node's 8 x 25 GB/s x 0.96 NICs. Both levels move at once, so
// the slower (the NICs) is busy all along and NVLink for the ratio.
TEST(Moe, FlatAllToAllPricesEachLinkLevel) {
  CostModel model(loadCluster("a100x64"));
  auto slope = [&](Group group) {
    CollectiveCost small = allToAllCost(model, kGiB, group, AllToAllAlgorithm::Flat);
    CollectiveCost large = allToAllCost(model, 2 * kGiB, group, AllToAllAlgorithm::Flat);
    EXPECT_EQ(large.algorithm, Algorithm::Direct);
    return (large.timeUs - small.timeUs) / kGiB;
  };
  const double nvlinkUsPerByte = 7.0 / 8 / (300 * 0.7833 * 1e3);
  EXPECT_NEAR(slope(Group{8, 1}), nvlinkUsPerByte, 1e-12);
  const double nicShareGBps = 8 * 25 * 0.96 / 8;
  const double nicUsPerByte = 56.0 / 64 / (nicShareGBps * 1e3);
  EXPECT_NEAR(slope(Group{64, 8}), nicUsPerByte, 1e-12);
  EXPECT_DOUBLE_EQ(
      allToAllCost(model, kGiB, Group{64, 8}, AllToAllAlgorithm::Flat).timeUs,
      model.collective(CollectiveKind::AllToAll, kGiB, Group{64, 8}, Algorithm::Direct).timeUs);

  CollectiveCost inside = allToAllCost(model, kGiB, Group{8, 1}, AllToAllAlgorithm::Flat);
  EXPECT_DOUBLE_EQ(inside.intraNodeUs, inside.bandwidthUs);
  EXPECT_DOUBLE_EQ(inside.interNodeUs, 0);
  CollectiveCost across = allToAllCost(model, kGiB, Group{64, 8}, AllToAllAlgorithm::Flat);
  EXPECT_DOUBLE_EQ(across.interNodeUs, across.bandwidthUs);
  const double localUsPerByte = 7.0 / 64 / (300 * 0.7833 * 1e3);
  EXPECT_NEAR(across.intraNodeUs / across.interNodeUs, localUsPerByte / nicUsPerByte, 1e-9);

  // Half the NICs double the off-node time and leave the intra-node one. (A rank drives at
  // most one NIC, so more NICs than ranks would change nothing.)
  Cluster halved = loadCluster("a100x64");
  halved.nicsPerNode = 4;
  CostModel fewer(halved);
  auto bandwidthUs = [](const CostModel &m, Group group) {
    return m.collective(CollectiveKind::AllToAll, kGiB, group, Algorithm::Direct).bandwidthUs;
  };
  EXPECT_NEAR(bandwidthUs(fewer, Group{64, 8}), 2 * bandwidthUs(model, Group{64, 8}), 1e-6);
  EXPECT_DOUBLE_EQ(bandwidthUs(fewer, Group{8, 1}), bandwidthUs(model, Group{8, 1}));
}

// Tutel's 2D-hierarchical all-to-all: an intra-node all-to-all among the 8
// ranks of a node, an inter-node one among the 8 ranks of each local index (the
// node's 8 such groups sharing its NICs), two layout swaps in between.
TEST(Moe, HierarchicalAllToAllAddsItsPhases) {
  CostModel model(loadCluster("a100x64"));
  const double bytes = 64 * 1024 * 1024;
  auto direct = [](const CostModel &m, double b, Group group) {
    return m.collective(CollectiveKind::AllToAll, b, group, Algorithm::Direct);
  };
  CollectiveCost twoD = allToAllCost(model, bytes, Group{64, 8}, AllToAllAlgorithm::Hierarchical);
  EXPECT_EQ(twoD.algorithm, Algorithm::Hierarchical);
  const CollectiveCost intra = direct(model, bytes, Group{8, 1});
  // 8 NICs per node: each local index's group drives its own NIC.
  const CollectiveCost inter = direct(model, bytes, Group{8, 8});
  const double layoutUs = model.computeUs(0, 4 * bytes, DType::BF16);
  EXPECT_NEAR(twoD.timeUs, intra.timeUs + inter.timeUs + layoutUs, 1e-9);
  // The swaps share the transfer's time; the phases run one after another, so
  // both levels are held all along.
  EXPECT_NEAR(twoD.bandwidthUs, intra.bandwidthUs + inter.bandwidthUs + layoutUs, 1e-9);
  EXPECT_DOUBLE_EQ(twoD.intraNodeUs, twoD.bandwidthUs);
  EXPECT_DOUBLE_EQ(twoD.interNodeUs, twoD.bandwidthUs);
  // Half the NICs: two groups share each.
  Cluster halved = loadCluster("a100x64");
  halved.nicsPerNode = 4;
  CostModel fewer(halved);
  EXPECT_NEAR(allToAllCost(fewer, bytes, Group{64, 8}, AllToAllAlgorithm::Hierarchical).timeUs,
              direct(fewer, bytes, Group{8, 1}).timeUs + direct(fewer, 2 * bytes, Group{8, 8}).timeUs +
                  layoutUs,
              1e-9);

  // Small messages: 14 peers' latencies instead of 63 make 2D faster; large
  // ones pay the extra intra-node pass and the swaps, and flat wins.
  auto time = [&](double b, AllToAllAlgorithm algorithm) {
    return allToAllCost(model, b, Group{64, 8}, algorithm).timeUs;
  };
  EXPECT_LT(time(64 * 1024, AllToAllAlgorithm::Hierarchical),
            time(64 * 1024, AllToAllAlgorithm::Flat));
  EXPECT_GT(time(kGiB, AllToAllAlgorithm::Hierarchical), time(kGiB, AllToAllAlgorithm::Flat));

  // Nothing to split inside one node or with one rank per node.
  for (Group group : {Group{8, 1}, Group{8, 8}}) {
    EXPECT_EQ(collectiveAlgorithm(AllToAllAlgorithm::Hierarchical, group), Algorithm::Direct);
    EXPECT_DOUBLE_EQ(allToAllCost(model, bytes, group, AllToAllAlgorithm::Hierarchical).timeUs,
                     allToAllCost(model, bytes, group, AllToAllAlgorithm::Flat).timeUs);
  }
  EXPECT_DOUBLE_EQ(allToAllCost(model, bytes, Group{1, 1}, AllToAllAlgorithm::Flat).timeUs, 0);
}

// A pipelined chunk of rows / r rows runs its GEMMs on its own: below 128 rows
// a tile is partly empty and few tiles leave SMs idle, so the achieved FLOP/s
// falls with r.
TEST(Moe, SmallExpertChunksRunBelowPeak) {
  CostModel model(loadCluster("a100x64"));
  MoeShape shape = switchLayer();
  shape.hidden = 4096;
  shape.ffn = 16384;
  const int64_t localExperts = 2;
  const double rows = 1024;
  auto flopRate = [&](double chunkRows) {
    double flops = 2.0 * chunkRows * shape.hidden * (2.0 * shape.ffn) * localExperts;
    return flops / expertForwardUs(model, shape, chunkRows, localExperts, DType::BF16);
  };
  const double whole = expertForwardUs(model, shape, rows, localExperts, DType::BF16);
  double previousRate = flopRate(rows);
  for (int r : {2, 4, 8, 16, 64}) {
    const double chunk = expertForwardUs(model, shape, rows / r, localExperts, DType::BF16);
    EXPECT_GE(r * chunk, whole * (1 - 1e-12)) << "r = " << r;
    EXPECT_LE(flopRate(rows / r), previousRate * (1 + 1e-12)) << "r = " << r;
    previousRate = flopRate(rows / r);
  }
  // 16-row chunks fill an eighth of each 128-row tile.
  EXPECT_LT(flopRate(16), 0.2 * flopRate(rows));
  // Large: near the preset's GEMM efficiency, 0.75 of 312 TFLOP/s.
  EXPECT_GT(flopRate(rows), 0.7 * 312e6);
  EXPECT_LE(flopRate(rows), 0.75 * 312e6 * (1 + 1e-12));

  // Backward: an input and a weight gradient per forward GEMM, about twice the
  // forward.
  const double backward = expertBackwardUs(model, shape, 4096, localExperts, DType::BF16);
  const double forward = expertForwardUs(model, shape, 4096, localExperts, DType::BF16);
  EXPECT_GT(backward, 1.8 * forward);
  EXPECT_LT(backward, 2.2 * forward);
}

TEST(Moe, ExpertMemoryUnderExpertParallelismAndZero) {
  const MoeShape shape = switchLayer();
  const double perExpert = shape.expertParams();
  const int64_t layers = 6, ep = 8,
                dp = 16; // one expert per rank, two replicas of each
  const double params = layers * 1.0 * perExpert;
  MoeMemory zero0 = moeMemoryPerGpu(shape, layers, ep, dp, 0, 1, bf16Adam());
  EXPECT_DOUBLE_EQ(zero0.weightsBytes, 2 * params);
  EXPECT_DOUBLE_EQ(zero0.gradientsBytes, 4 * params);  // fp32 main gradients under bf16
  EXPECT_DOUBLE_EQ(zero0.optimizerBytes, 12 * params);
  MoeMemory zero1 = moeMemoryPerGpu(shape, layers, ep, dp, 1, 1, bf16Adam());
  EXPECT_DOUBLE_EQ(zero1.optimizerBytes, 12 * params / 2);
  EXPECT_DOUBLE_EQ(zero1.gradientsBytes, 4 * params);
  MoeMemory zero3 = moeMemoryPerGpu(shape, layers, ep, dp, 3, 1, bf16Adam());
  EXPECT_DOUBLE_EQ(zero3.weightsBytes, 2 * params / 2);
  EXPECT_DOUBLE_EQ(zero3.gradientsBytes, 4 * params / 2);
  // Without expert parallelism every rank holds all 8 experts.
  EXPECT_DOUBLE_EQ(moeMemoryPerGpu(shape, layers, 1, dp, 0, 1, bf16Adam()).weightsBytes,
                   8 * 2 * params);

  // Activations per layer and micro-batch: the [1024, 8] probabilities and, for
  // the 8 x 320 rows a rank receives, input and output (1024 each), the first
  // GEMM's output and the activation's (4096 each); 16-bit, for 6 layers and 3
  // micro-batches in flight.
  MoeMemory inFlight = moeMemoryPerGpu(shape, layers, ep, dp, 0, 3, bf16Adam());
  const double perLayer = 1024.0 * 8 + 8.0 * 320 * (2 * 1024 + 4096 + 4096);
  EXPECT_DOUBLE_EQ(inFlight.activationsBytes, perLayer * 2 * layers * 3);
  // One layer's send and receive buffers.
  EXPECT_DOUBLE_EQ(inFlight.buffersBytes, 2 * dispatchBytes(shape, DType::BF16));

  MemoryBreakdown base;
  base.weightsBytes = 1e9;
  base.activationsBytes = 2e9;
  MemoryBreakdown total = withMoeMemory(base, inFlight);
  EXPECT_DOUBLE_EQ(total.perGpuBytes(), base.perGpuBytes() + inFlight.weightsBytes +
                                            inFlight.gradientsBytes + inFlight.optimizerBytes +
                                            inFlight.activationsBytes + inFlight.buffersBytes);
  EXPECT_DOUBLE_EQ(total.weightsBytes, 1e9 + inFlight.weightsBytes);

  EXPECT_THROW(moeMemoryPerGpu(shape, layers, 3, dp, 0, 1, bf16Adam()), zen::Error);
  EXPECT_THROW(moeMemoryPerGpu(shape, layers, ep, dp, 4, 1, bf16Adam()), zen::Error);
  EXPECT_THROW(moeMemoryPerGpu(shape, layers, ep, dp, 0, 0.5, bf16Adam()), zen::Error);
  EXPECT_DOUBLE_EQ(moeMemoryPerGpu(shape, 0, ep, dp, 0, 1, bf16Adam()).buffersBytes, 0);
}

TEST(Moe, ExpertRanksSitInsideANodeOrOverWholeNodes) {
  const Group dp{64, 8}; // 8 nodes of 8
  EXPECT_EQ(checkExpertPlacement(4, dp), "");
  EXPECT_EQ(checkExpertPlacement(16, dp), "");
  EXPECT_EQ(checkExpertPlacement(3, dp), "ep 3 does not divide dp 64");
  EXPECT_EQ(checkExpertPlacement(4, Group{24, 4}),
            "ep 4 neither divides nor is a multiple of the 6 data-parallel ranks per node");
  EXPECT_EQ(expertGroup(4, dp).ranks, 4);
  EXPECT_EQ(expertGroup(4, dp).nodes, 1);
  EXPECT_EQ(expertGroup(16, dp).nodes, 2);
  // Replicas of an expert: every ep-th rank, 2 per node for ep 4, one per node
  // on 4 nodes for ep 16.
  EXPECT_EQ(expertReplicaGroup(4, dp).ranks, 16);
  EXPECT_EQ(expertReplicaGroup(4, dp).nodes, 8);
  EXPECT_EQ(expertReplicaGroup(16, dp).ranks, 4);
  EXPECT_EQ(expertReplicaGroup(16, dp).nodes, 4);
}

// A phase in r pieces: chunkPipelineUs of a piece's experts and its two
// all-to-alls, which share the network; one piece is their sum.
TEST(Moe, PhasePipelinesPiecesOfExpertsAndAllToAlls) {
  CostModel model(loadCluster("a100x64"));
  const MoeShape shape = switchLayer(); // capacity 320, busiest expert 256 rows at imbalance 1
  const Group dp = model.worldGroup();
  const double bytes = dispatchBytes(shape, DType::BF16);
  // 8 experts over the 8 ranks of a node: one local expert receiving 8 x 256 rows.
  auto expected = [&](int64_t r, bool backward) {
    const double rows = 8.0 * 256 / double(r);
    const double compute = backward ? expertBackwardUs(model, shape, rows, 1, DType::BF16)
                                    : expertForwardUs(model, shape, rows, 1, DType::BF16);
    const double comm =
        allToAllCost(model, bytes / double(r), Group{8, 1}, AllToAllAlgorithm::Flat)
            .timeUs;
    return chunkPipelineUs(compute, 2 * comm, r, model.overlapSlowdown());
  };
  for (int64_t r : {1, 4})
    for (bool backward : {false, true})
      EXPECT_DOUBLE_EQ(
          moePhaseUs(model, shape, 8, dp, r, AllToAllAlgorithm::Flat, backward, 1.0, DType::BF16),
          expected(r, backward));
  EXPECT_DOUBLE_EQ(expected(1, false),
                   expertForwardUs(model, shape, 8.0 * 256, 1, DType::BF16) +
                       2 * allToAllCost(model, bytes, Group{8, 1}, AllToAllAlgorithm::Flat)
                               .timeUs);
  // Pieces overlap: 4 of them take less than 4 x (experts + all-to-alls) of a piece.
  EXPECT_LT(expected(4, false), 4 * (expertForwardUs(model, shape, 512, 1, DType::BF16) +
                                     2 * allToAllCost(model, bytes / 4, Group{8, 1}, AllToAllAlgorithm::Flat)
                                             .timeUs));
  // Without expert parallelism no all-to-all.
  EXPECT_DOUBLE_EQ(
      moePhaseUs(model, shape, 1, dp, 1, AllToAllAlgorithm::Flat, false, 1.0, DType::BF16),
      expertForwardUs(model, shape, 256, 8, DType::BF16));
  EXPECT_THROW(moePhaseUs(model, shape, 8, dp, 0, AllToAllAlgorithm::Flat, false, 1.0,
                          DType::BF16),
               zen::Error);
  EXPECT_THROW(moePhaseUs(model, shape, 8, dp, 3, AllToAllAlgorithm::Flat, false, 1.0,
                          DType::BF16),
               zen::Error); // 3 does not divide the 320 capacity rows
  EXPECT_THROW(moePhaseUs(model, shape, 3, dp, 1, AllToAllAlgorithm::Flat, false, 1.0,
                          DType::BF16),
               zen::Error);
}

// Token compression (ScheMoE): only casts narrower than the activations shrink
// the all-to-alls; int8 sends a byte per element and an fp32 scale per row.
TEST(Moe, TokenCompressionShrinksOnlyWiderActivations) {
  EXPECT_TRUE(compressesTokens(CompressionMethod::FP16, DType::F32));
  EXPECT_TRUE(compressesTokens(CompressionMethod::BF16, DType::F32));
  EXPECT_FALSE(compressesTokens(CompressionMethod::FP16, DType::BF16));
  EXPECT_FALSE(compressesTokens(CompressionMethod::BF16, DType::F16));
  EXPECT_TRUE(compressesTokens(CompressionMethod::Int8, DType::BF16));
  for (CompressionMethod method : {CompressionMethod::None, CompressionMethod::TopK,
                                   CompressionMethod::Sign, CompressionMethod::PowerSGD})
    EXPECT_FALSE(compressesTokens(method, DType::F32));

  const MoeShape shape = switchLayer(); // 8 experts x 320 rows x 1024
  const double rows = 8.0 * 320;
  EXPECT_DOUBLE_EQ(dispatchWireBytes(shape, DType::BF16, CompressionMethod::None),
                   dispatchBytes(shape, DType::BF16));
  EXPECT_DOUBLE_EQ(dispatchWireBytes(shape, DType::BF16, CompressionMethod::Int8),
                   rows * (1024 + 4));
  EXPECT_DOUBLE_EQ(dispatchWireBytes(shape, DType::F32, CompressionMethod::FP16),
                   dispatchBytes(shape, DType::F32) / 2);
  EXPECT_THROW(dispatchWireBytes(shape, DType::BF16, CompressionMethod::FP16),
               zen::Error);
}

// A compressed piece moves fewer bytes and its compute stage encodes and
// decodes both all-to-alls' buffers: over the network between nodes int8 pays,
// within a node's NVLink the kernels cost more than they save.
TEST(Moe, CompressedPhaseTradesKernelsForBytes) {
  CostModel model(loadCluster("h100x256"));
  MoeShape shape = switchLayer();
  shape.experts = 64;
  const Group dp = model.worldGroup();
  auto phase = [&](int64_t ep, CompressionMethod tokens) {
    return moePhaseUs(model, shape, ep, dp, 1, AllToAllAlgorithm::Flat, false, 1.0, DType::BF16,
                      tokens);
  };
  // One piece: the sum of its stages, so the difference is exactly bytes and kernels.
  const Group across = expertGroup(64, dp);
  const double elements = 64.0 * double(shape.capacity()) * 1024;
  CompressionSpec int8;
  int8.method = CompressionMethod::Int8;
  const CompressionCost codec = model.compression(int8, int64_t(elements), 1, 2);
  const auto a2a = [&](CompressionMethod tokens) {
    return allToAllCost(model, dispatchWireBytes(shape, DType::BF16, tokens), across, AllToAllAlgorithm::Flat)
        .timeUs;
  };
  EXPECT_NEAR(phase(64, CompressionMethod::Int8) - phase(64, CompressionMethod::None),
              2 * (codec.encodeUs + codec.decodeUs) + 2 * (a2a(CompressionMethod::Int8) -
                                                           a2a(CompressionMethod::None)),
              1e-6 * phase(64, CompressionMethod::None));
  EXPECT_LT(phase(64, CompressionMethod::Int8), phase(64, CompressionMethod::None));
  EXPECT_GT(phase(8, CompressionMethod::Int8), phase(8, CompressionMethod::None));
  // Without an all-to-all there is nothing to compress.
  EXPECT_DOUBLE_EQ(phase(1, CompressionMethod::Int8), phase(1, CompressionMethod::None));
  EXPECT_THROW(phase(64, CompressionMethod::FP16), zen::Error);
}

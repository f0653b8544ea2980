//===- CompressionTest.cpp - compression costs and wire sizes -------------===//
#include "zen/CostModel/CostModel.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

using namespace zen::cost;

namespace {
CompressionSpec spec(CompressionMethod method, double ratio = 0, int64_t rank = 0,
                     Device device = Device::GPU) {
  CompressionSpec result;
  result.method = method;
  result.ratio = ratio;
  result.rank = rank;
  result.device = device;
  return result;
}
} // namespace

TEST(Compression, WireBytesPerMethod) {
  const int64_t e = 1'000'000;
  EXPECT_EQ(CostModel::wireBytes(spec(CompressionMethod::None), e), 4e6);
  EXPECT_EQ(CostModel::wireBytes(spec(CompressionMethod::FP16), e), 2e6);
  EXPECT_EQ(CostModel::wireBytes(spec(CompressionMethod::BF16), e), 2e6);
  EXPECT_EQ(CostModel::wireBytes(spec(CompressionMethod::Int8), e), 1e6 + std::ceil(1e6 / 1024) * 4);
  EXPECT_EQ(CostModel::wireBytes(spec(CompressionMethod::TopK, 0.01), e), 8 * 10'000);
  // Random-k's ranks draw the same indices: only the values travel.
  EXPECT_EQ(CostModel::wireBytes(spec(CompressionMethod::RandomK, 0.001), e), 4 * 1'000);
  EXPECT_EQ(CostModel::wireBytes(spec(CompressionMethod::Sign), e), 125'000 + 4);
  // 1e6 elements as a 1000 x 1000 matrix, rank 4: 4 * (1000 + 1000) fp32 values.
  EXPECT_EQ(CostModel::wireBytes(spec(CompressionMethod::PowerSGD, 0, 4), e), 4 * 2000 * 4);
  // A tiny top-k still sends one element; the rank never exceeds the matrix.
  EXPECT_EQ(CostModel::wireBytes(spec(CompressionMethod::TopK, 1e-9), 10), 8);
  EXPECT_EQ(CostModel::wireBytes(spec(CompressionMethod::PowerSGD, 0, 64), 4), 2 * (2 + 2) * 4);
}

// wireBytesLowerBound bounds the bytes of every split into buckets, for every method, so the
// lower bound holds whatever buckets a plan forms (splitmix64: a portable random sequence).
TEST(Compression, WireBytesLowerBoundHoldsForEveryBucketing) {
  uint64_t state = 12345;
  auto next = [&state] {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  const std::vector<CompressionSpec> specs = {
      spec(CompressionMethod::None),           spec(CompressionMethod::FP16),
      spec(CompressionMethod::BF16),           spec(CompressionMethod::Int8),
      spec(CompressionMethod::TopK, 0.01),     spec(CompressionMethod::TopK, 0.3),
      spec(CompressionMethod::RandomK, 0.001), spec(CompressionMethod::Sign),
      spec(CompressionMethod::PowerSGD, 0, 1), spec(CompressionMethod::PowerSGD, 0, 4),
      spec(CompressionMethod::PowerSGD, 0, 64)};
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<int64_t> buckets(1 + next() % 12);
    int64_t total = 0;
    for (int64_t &elements : buckets) {
      // Log-uniform from 1 to 2^26 elements.
      elements = int64_t(1) << (next() % 27);
      elements += static_cast<int64_t>(next() % static_cast<uint64_t>(elements));
      total += elements;
    }
    for (const CompressionSpec &method : specs) {
      double sent = 0;
      for (int64_t elements : buckets)
        sent += CostModel::wireBytes(method, elements);
      EXPECT_GE(sent, CostModel::wireBytesLowerBound(method, static_cast<double>(total)))
          << toString(method.method) << " rank " << method.rank << " trial " << trial;
    }
  }
  // Tight where it can be: dense and fp16 exactly, PowerSGD on a square matrix exactly.
  EXPECT_EQ(CostModel::wireBytesLowerBound(spec(CompressionMethod::None), 1e6), 4e6);
  EXPECT_EQ(CostModel::wireBytesLowerBound(spec(CompressionMethod::FP16), 1e6), 2e6);
  EXPECT_EQ(CostModel::wireBytesLowerBound(spec(CompressionMethod::PowerSGD, 0, 4), 1e6),
            CostModel::wireBytes(spec(CompressionMethod::PowerSGD, 0, 4), 1'000'000));
}

// PowerSGD as the runtime runs it: all-reduce P, orthogonalise and form Q, all-reduce Q.
TEST(Compression, PowerSgdExchangesTwoDependentAllReduces) {
  CostModel model(loadCluster("a100x64"));
  Group world = model.worldGroup();
  const int64_t e = 1'000'000;  // a 1000 x 1000 matrix
  CompressionSpec powerSgd = spec(CompressionMethod::PowerSGD, 0, 4);
  CollectiveCost p = model.collective(CollectiveKind::AllReduce, 1000 * 4 * 4, world);
  CollectiveCost exchange =
      model.syncCost(powerSgd, SyncScheme::AllReduce, e, 4.0 * e, world).reduction;
  CompressionCost kernels = model.compression(powerSgd, e);
  EXPECT_GT(kernels.betweenUs, 0);
  // P and Q have the same shape here: two equal all-reduces and the work between them.
  EXPECT_NEAR(exchange.timeUs, 2 * p.timeUs + kernels.betweenUs, 1e-9);
  EXPECT_NEAR(exchange.bandwidthUs, 2 * p.bandwidthUs, 1e-9);
  EXPECT_NEAR(exchange.latencyUs, 2 * p.latencyUs + kernels.betweenUs, 1e-9);
  // Not one all-reduce of both factors: a second latency and the orthogonalisation.
  EXPECT_GT(exchange.timeUs,
            model.collective(CollectiveKind::AllReduce, kernels.wireBytes, world).timeUs +
                p.latencyUs);
  // The other methods: one all-reduce, or one all-gather of every rank's payload.
  CompressionSpec fp16 = spec(CompressionMethod::FP16);
  EXPECT_DOUBLE_EQ(model.syncCost(fp16, SyncScheme::AllReduce, e, 4.0 * e, world).reduction.timeUs,
                   model.collective(CollectiveKind::AllReduce, 2e6, world).timeUs);
  CompressionSpec topk = spec(CompressionMethod::TopK, 0.01);
  EXPECT_DOUBLE_EQ(
      model.syncCost(topk, SyncScheme::AllGather, e, 4.0 * e, world, 2).reduction.timeUs,
      model.chunkedCollective(CollectiveKind::AllGather, 8e4 * 64, world, 2).timeUs);
  // Random-k's ranks draw the same indices: its values alone are all-reduced.
  CompressionSpec randomk = spec(CompressionMethod::RandomK, 0.01);
  EXPECT_DOUBLE_EQ(
      model.syncCost(randomk, SyncScheme::AllReduce, e, 4.0 * e, world).reduction.timeUs,
      model.collective(CollectiveKind::AllReduce, 4e4, world).timeUs);
}

TEST(Compression, CostsArePositiveAndScaleWithSize) {
  CostModel model(loadCluster("a100x64"));
  for (CompressionMethod method :
       {CompressionMethod::FP16, CompressionMethod::BF16, CompressionMethod::Int8,
        CompressionMethod::TopK, CompressionMethod::RandomK, CompressionMethod::Sign,
        CompressionMethod::PowerSGD}) {
    for (Device device : {Device::GPU, Device::CPU}) {
      CompressionSpec s = spec(method, 0.01, 4, device);
      CompressionCost small = model.compression(s, 1 << 16);
      CompressionCost large = model.compression(s, 1 << 26);
      EXPECT_GT(small.encodeUs, 0) << toString(method);
      EXPECT_GT(small.decodeUs, 0) << toString(method);
      EXPECT_GT(large.encodeUs, small.encodeUs) << toString(method);
      EXPECT_GT(large.decodeUs, small.decodeUs) << toString(method);
    }
  }
  EXPECT_EQ(model.compression(spec(CompressionMethod::None), 1 << 20).encodeUs, 0);
}

TEST(Compression, GpuKernelsRunNearMemoryBandwidth) {
  CostModel model(loadCluster("a100x8"));
  const int64_t e = 1 << 26;
  // fp16 encode reads 4 B and writes 2 B per element at 2039 x 0.8 GB/s, plus one launch.
  double expected = 6.0 * e / (2039 * 0.8 * 1e3) + 4;
  EXPECT_NEAR(model.compression(spec(CompressionMethod::FP16), e).encodeUs, expected, 1e-6);
}

TEST(Compression, CpuOffloadPaysPcieBothWays) {
  CostModel model(loadCluster("a100x8"));
  const int64_t e = 1 << 24;
  double pcieUs = 4.0 * e / (25 * 1e3);
  CompressionCost cpu = model.compression(spec(CompressionMethod::FP16, 0, 0, Device::CPU), e);
  EXPECT_GT(cpu.encodeUs, pcieUs);
  EXPECT_GT(cpu.decodeUs, pcieUs);
  EXPECT_GT(cpu.encodeUs, model.compression(spec(CompressionMethod::FP16), e).encodeUs);
  // A profiled CPU throughput replaces the configured one.
  Cluster profiled = loadCluster("a100x8");
  profiled.profiledCompressionGBps[CompressionMethod::FP16] = 100;
  CostModel fast(profiled);
  EXPECT_LT(fast.compression(spec(CompressionMethod::FP16, 0, 0, Device::CPU), e).encodeUs, cpu.encodeUs);
}

TEST(Compression, GatheredPayloadsAndErrorFeedbackCostMore) {
  CostModel model(loadCluster("a100x64"));
  CompressionSpec topk = spec(CompressionMethod::TopK, 0.01);
  EXPECT_GT(model.compression(topk, 1 << 24, 64).decodeUs, model.compression(topk, 1 << 24, 1).decodeUs);
  CompressionSpec withFeedback = topk;
  withFeedback.errorFeedback = true;
  EXPECT_GT(model.compression(withFeedback, 1 << 24).encodeUs, model.compression(topk, 1 << 24).encodeUs);
}

TEST(Compression, ParseSpec) {
  auto parsed = parseCompressionSpec("topk:0.01");
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->method, CompressionMethod::TopK);
  EXPECT_DOUBLE_EQ(parsed->ratio, 0.01);
  EXPECT_EQ(parsed->device, Device::GPU);
  EXPECT_FALSE(parsed->deviceFixed);  // a planner may offload it
  parsed = parseCompressionSpec("powersgd:4@cpu");
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->rank, 4);
  EXPECT_EQ(parsed->device, Device::CPU);
  EXPECT_TRUE(parsed->deviceFixed);
  parsed = parseCompressionSpec("int8@gpu");
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->device, Device::GPU);
  EXPECT_TRUE(parsed->deviceFixed);
  EXPECT_TRUE(parseCompressionSpec("fp16"));
  EXPECT_TRUE(parseCompressionSpec("none"));
  for (const char *bad : {"topk", "topk:0", "topk:1.5", "topk:x", "powersgd:0", "powersgd:2.5",
                          "fp16:3", "zip", "fp16@tpu", ""}) {
    std::string error;
    EXPECT_FALSE(parseCompressionSpec(bad, &error)) << bad;
    EXPECT_NE(error.find("invalid compressor"), std::string::npos) << bad;
  }
}

//===- NcclTestsReferenceTest.cpp - presets against published nccl-tests -===//
//
// Every GPU preset against published nccl-tests numbers (time at small sizes,
// bus bandwidth at large ones). Sources are NVIDIA's nccl / nccl-tests issue
// threads, where NVIDIA engineers state expected numbers or users post
// measurements; each point names its thread.
//
// Tolerances: 10% on bus bandwidth. Published numbers for one hardware class
// spread by about that much (232.5 GB/s measured vs ~235 GB/s commonly quoted
// for 8 A100s; 46-48 GB/s per NDR NIC in NVIDIA's own words), while a wrongly
// set preset is off by more (H100 NVLink at full line rate gives 450 GB/s
// against NCCL's ~370). 15% on small-message time, where the two published
// 2-GPU A100 measurements already differ (10.0 and 10.14 us) and the model's
// one fitted hop latency serves 2 and 8 GPUs.
//
// Where no published number was found for a preset and size, the comment says
// so and the test checks what can be checked: that the model never beats a
// published floor (the small-message time, the large-message bus bandwidth).
//
//===----------------------------------------------------------------------===//
#include "zen/CostModel/CostModel.h"

#include <gtest/gtest.h>

#include <optional>

using namespace zen::cost;

namespace {
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kBandwidthTolerance = 0.10;
constexpr double kLatencyTolerance = 0.15;

double busGBps(const CostModel &model, CollectiveKind kind, double bytes, Group group,
               std::optional<Algorithm> algorithm = std::nullopt) {
  return (algorithm ? model.collective(kind, bytes, group, *algorithm)
                    : model.collective(kind, bytes, group))
      .busBandwidthGBps;
}

double timeUs(const CostModel &model, CollectiveKind kind, double bytes, Group group,
              std::optional<Algorithm> algorithm = std::nullopt) {
  return (algorithm ? model.collective(kind, bytes, group, *algorithm)
                    : model.collective(kind, bytes, group))
      .timeUs;
}

/// Bytes a ring moves per rank for nccl-tests' bus bandwidth: all-reduce 2(n-1)/n.
double allReduceBusBytes(double bytes, int64_t ranks) {
  return 2.0 * static_cast<double>(ranks - 1) / static_cast<double>(ranks) * bytes;
}
} // namespace

// 8 x A100 on NVSwitch (a100x8; a100x64's nodes are the same).
TEST(NcclTestsReference, A100OneNode) {
  for (const char *preset : {"a100x8", "a100x64"}) {
    SCOPED_TRACE(preset);
    CostModel model(loadCluster(preset));
    const Group eight = model.groupOf(8), two = model.groupOf(2);

    // Small. github.com/NVIDIA/nccl-tests/issues/123 (DGX A100, NCCL_ALGO=Ring, 8-128 B):
    // 10 us on 2 GPUs, 33.7 us on 8. github.com/NVIDIA/nccl/issues/583 (A100-SXM4, default
    // algorithm, 32 B on 2 GPUs): 10.14 us.
    EXPECT_NEAR(timeUs(model, CollectiveKind::AllReduce, 8, eight, Algorithm::Ring), 33.7,
                33.7 * kLatencyTolerance);
    EXPECT_NEAR(timeUs(model, CollectiveKind::AllReduce, 8, two, Algorithm::Ring), 10.0,
                10.0 * kLatencyTolerance);
    EXPECT_NEAR(timeUs(model, CollectiveKind::AllReduce, 32, two), 10.14,
                10.14 * kLatencyTolerance);
    // 8-64 KB: no published 8-GPU A100 number found. NCCL is still latency-bound there (LL moves
    // 64 KB in ~1 us at this bus bandwidth), so the time stays near the measured floor.
    for (double bytes : {8192.0, 65536.0})
      EXPECT_NEAR(timeUs(model, CollectiveKind::AllReduce, bytes, eight), 33.7,
                  33.7 * kLatencyTolerance)
          << bytes;

    // Medium (1-4 MB): no published 8-GPU A100 table found. The model must not beat either
    // published floor: the small-message time or the large-message bus bandwidth below.
    for (double bytes : {1048576.0, 4194304.0}) {
      double time = timeUs(model, CollectiveKind::AllReduce, bytes, eight);
      EXPECT_GE(time, 33.7 * (1 - kLatencyTolerance)) << bytes;
      EXPECT_GE(time, allReduceBusBytes(bytes, 8) / (232.54 * (1 + kBandwidthTolerance) * 1e3))
          << bytes;
    }

    // Large. github.com/NVIDIA/nccl-tests/issues/175: all_reduce_perf -b 8 -e 4G -g 8 on
    // 8 A100s, 232.54 GB/s busbw.
    EXPECT_NEAR(busGBps(model, CollectiveKind::AllReduce, 4 * kGiB, eight), 232.54,
                232.54 * kBandwidthTolerance);
  }
}

// DGX A100 nodes with 8 x HDR 200 Gb/s (a100x64).
TEST(NcclTestsReference, A100AcrossNodes) {
  CostModel model(loadCluster("a100x64"));
  // Large. github.com/NVIDIA/nccl/issues/812 (NVIDIA): "On an Nvidia DGX-A100 system we have
  // 8x200Gbit/s IB cards and we measure 192GB/s AllReduce BusBW", answering a two-node
  // NCCL_ALGO=RING question; github.com/NVIDIA/nccl/issues/412 (NVIDIA): look at busbw at 8G,
  // ~24 GB/s per HDR NIC.
  EXPECT_NEAR(busGBps(model, CollectiveKind::AllReduce, 8 * kGiB, model.groupOf(16),
                      Algorithm::Ring),
              192, 192 * kBandwidthTolerance);
  // One GPU per node drives one NIC.
  EXPECT_NEAR(busGBps(model, CollectiveKind::AllReduce, 8 * kGiB, Group{2, 2}), 24,
              24 * kBandwidthTolerance);
  // Small and medium sizes across nodes, and the 64-GPU world at any size: no published
  // number found for this configuration. The world's all-reduce never beats the nodes'
  // network at large sizes nor the single-node measured latency at small ones.
  EXPECT_LE(busGBps(model, CollectiveKind::AllReduce, 8 * kGiB, model.worldGroup()),
            192 * (1 + kBandwidthTolerance));
  EXPECT_GE(timeUs(model, CollectiveKind::AllReduce, 8, model.worldGroup()),
            33.7 * (1 - kLatencyTolerance));
}

// DGX H100 nodes: NVLink4 on NVSwitch, 8 x NDR 400 Gb/s (h100x256).
TEST(NcclTestsReference, H100) {
  CostModel model(loadCluster("h100x256"));
  const Group eight = model.groupOf(8);
  // Large, one node. github.com/NVIDIA/nccl-tests/issues/212 (NVIDIA): NCCL's effective NVLink
  // bandwidth is ~370 GB/s, "which you can observe as BusBw when running non-allreduce
  // operations, or when running with NCCL_ALGO=RING"; peak needs sizes beyond 256 MB.
  EXPECT_NEAR(busGBps(model, CollectiveKind::AllGather, 8 * kGiB, eight), 370,
              370 * kBandwidthTolerance);
  EXPECT_NEAR(busGBps(model, CollectiveKind::AllReduce, 8 * kGiB, eight, Algorithm::Ring), 370,
              370 * kBandwidthTolerance);
  // The same thread: all-reduce with NVLink SHARP reaches ~480 GB/s busbw on 8 GPUs (and
  // github.com/NVIDIA/nccl-tests/issues/290: 476 GB/s). The model has no NVLS algorithm and
  // prices it as a ring: ~23% low, which this test records rather than hides.
  EXPECT_LT(busGBps(model, CollectiveKind::AllReduce, 8 * kGiB, eight), 480 * 0.8);

  // Large, across nodes. github.com/NVIDIA/nccl-tests/issues/290 (NVIDIA): with NDR 400 Gb/s
  // "you should see 46-48GB/s per NIC", benchmarking two nodes with NCCL_ALGO=RING.
  EXPECT_NEAR(busGBps(model, CollectiveKind::AllReduce, 8 * kGiB, model.groupOf(16),
                      Algorithm::Ring),
              8 * 47, 8 * 47 * kBandwidthTolerance);
  EXPECT_NEAR(busGBps(model, CollectiveKind::AllReduce, 8 * kGiB, Group{2, 2}), 47,
              47 * kBandwidthTolerance);
  // Small and medium sizes: no published H100 ring measurement found (published small-message
  // H100 numbers are NVLS, e.g. ~6 us on 2 GPUs in github.com/NVIDIA/nccl/issues/1259). The
  // preset takes the DGX A100's measured NVSwitch hop; the model must at least not beat the
  // large-message bandwidth at medium sizes.
  for (double bytes : {1048576.0, 4194304.0})
    EXPECT_GE(timeUs(model, CollectiveKind::AllReduce, bytes, eight),
              allReduceBusBytes(bytes, 8) / (370 * (1 + kBandwidthTolerance) * 1e3))
        << bytes;
}

// 16 servers with one V100 each on 10 GbE (v100x16-10gbe).
TEST(NcclTestsReference, V100OnTenGigabitEthernet) {
  CostModel model(loadCluster("v100x16-10gbe"));
  // No published nccl-tests run on 10 GbE was found. Physics instead: TCP over a 1500-byte MTU
  // carries 1448 payload bytes per 1538 on the wire (Ethernet preamble, header, FCS and gap;
  // IP and TCP headers with timestamps), 9.41 Gb/s = 1.177 GB/s of goodput, which a ring's
  // large-message busbw cannot exceed and NCCL's socket transport comes close to.
  const double goodputGBps = 10.0 / 8 * 1448 / 1538;
  double large = busGBps(model, CollectiveKind::AllReduce, 8 * kGiB, model.worldGroup());
  EXPECT_LE(large, goodputGBps);
  EXPECT_NEAR(large, goodputGBps, goodputGBps * kBandwidthTolerance);
  // Small and medium sizes: no published number found.
}

//===- ClusterTest.cpp - cluster JSON loading and validation --------------===//
#include "zen/CostModel/Cluster.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <limits>

using namespace zen::cost;

namespace {

const char *kMinimal = R"({
  "name": "tiny", "nodes": 2, "gpus_per_node": 4,
  "gpu": { "name": "g", "peak_tflops": { "fp32": 10 }, "hbm_bandwidth_gbps": 1000 },
  "intra_node": { "kind": "nvlink", "bandwidth_gbps": 100, "latency_us": 0.6 },
  "inter_node": { "kind": "infiniband", "nics_per_node": 2, "bandwidth_gbps": 25, "latency_us": 2.7 }
})";

/// Parses `text` and returns the error, failing the test if it parsed.
ClusterError parseError(const std::string &text) {
  try {
    parseCluster(text, "c.json");
  } catch (const ClusterError &error) {
    return error;
  }
  ADD_FAILURE() << "parsed without error: " << text;
  return ClusterError(zen::ErrorKind::Internal, "");
}

std::string replaced(std::string text, const std::string &from, const std::string &to) {
  size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return text.replace(at, from.size(), to);
}

} // namespace

TEST(Cluster, EveryPresetLoadsAndIsNamedAfterItsFile) {
  std::vector<std::string> names = presetNames();
  for (const char *expected : {"a100x64", "a100x8", "h100x256", "v100x16-10gbe", "cpu-local"})
    EXPECT_NE(std::find(names.begin(), names.end(), expected), names.end()) << expected;
  for (const std::string &name : names)
    EXPECT_EQ(loadCluster(name).name, name);
  EXPECT_STREQ(defaultPresetName(), "a100x64");
}

TEST(Cluster, PresetShapes) {
  Cluster a100 = loadCluster("a100x64");
  EXPECT_EQ(a100.worldSize(), 64);
  EXPECT_EQ(a100.nicsPerNode, 8);
  EXPECT_DOUBLE_EQ(a100.gpu.peakTflops.at(DType::BF16), 312);
  EXPECT_EQ(loadCluster("h100x256").worldSize(), 256);
  Cluster v100 = loadCluster("v100x16-10gbe");
  EXPECT_EQ(v100.worldSize(), 16);
  EXPECT_EQ(v100.interNode.kind, "ethernet");
  EXPECT_EQ(loadCluster("a100x8").nodes, 1);
  EXPECT_EQ(loadCluster("cpu-local").intraNode.kind, "shm");
}

// Device memory per GPU: A100-SXM4-80GB and H100 SXM 80 GB, V100 SXM2 32 GB, cpu-local 6 GB
// (24 GiB of RAM over 4 ranks); a file without the field leaves it unknown (0).
TEST(Cluster, PresetsGiveGpuMemory) {
  EXPECT_DOUBLE_EQ(loadCluster("a100x64").gpu.memoryGB, 80);
  EXPECT_DOUBLE_EQ(loadCluster("a100x8").gpu.memoryGB, 80);
  EXPECT_DOUBLE_EQ(loadCluster("h100x256").gpu.memoryGB, 80);
  EXPECT_DOUBLE_EQ(loadCluster("v100x16-10gbe").gpu.memoryGB, 32);
  EXPECT_DOUBLE_EQ(loadCluster("cpu-local").gpu.memoryGB, 6);
  EXPECT_DOUBLE_EQ(parseCluster(kMinimal, "c.json").gpu.memoryGB, 0);
  // GEMM efficiency and SM counts for large-model planning (sources in the presets).
  EXPECT_EQ(loadCluster("a100x64").gpu.sms, 108);
  EXPECT_DOUBLE_EQ(loadCluster("a100x64").gpu.gemmEfficiency, 0.75);
  EXPECT_EQ(loadCluster("h100x256").gpu.sms, 132);
  EXPECT_EQ(loadCluster("v100x16-10gbe").gpu.sms, 80);
  EXPECT_EQ(parseCluster(kMinimal, "c.json").gpu.sms, 0);
  EXPECT_DOUBLE_EQ(parseCluster(kMinimal, "c.json").gpu.gemmEfficiency, 0);
}

TEST(Cluster, WithNodesResizesTheWorldAndRejectsWhatCannotExist) {
  Cluster two = withNodes(loadCluster("a100x64"), 2);
  EXPECT_EQ(two.worldSize(), 16);
  EXPECT_EQ(two.gpusPerNode, 8);
  EXPECT_EQ(two.nicsPerNode, 8);
  for (int64_t nodes : {int64_t(0), int64_t(-3), int64_t(1) << 20,
                        std::numeric_limits<int64_t>::max()}) {
    try {
      withNodes(loadCluster("a100x64"), nodes);
      ADD_FAILURE() << nodes << " nodes accepted";
    } catch (const ClusterError &error) {
      EXPECT_EQ(error.kind, zen::ErrorKind::BadUsage) << nodes;
      EXPECT_NE(std::string(error.what()).find("--nodes " + std::to_string(nodes)),
                std::string::npos)
          << error.what();
    }
  }
}

TEST(Cluster, OptionalFieldsTakeDefaults) {
  Cluster cluster = parseCluster(kMinimal, "dir/tiny.json");
  EXPECT_EQ(cluster.name, "tiny");
  EXPECT_DOUBLE_EQ(cluster.intraNode.efficiency, 1.0);
  EXPECT_DOUBLE_EQ(cluster.gpu.computeEfficiency, 0.6);
  EXPECT_DOUBLE_EQ(cluster.overlapSlowdown, 1.1);
  Cluster unnamed = parseCluster(replaced(kMinimal, R"("name": "tiny", )", ""), "dir/lab.json");
  EXPECT_EQ(unnamed.name, "lab");
}

TEST(Cluster, WriteThenParseRoundTrips) {
  Cluster cluster = loadCluster("a100x64");
  cluster.profiledBackend = "mpi";
  cluster.profiled.push_back({CollectiveKind::AllGather, 4, 4, 1 << 20, 12.5, 1e-4, 0.99, 0.05});
  cluster.validation.push_back({CollectiveKind::AllGather, 4, 12, 0.07, 0.2});
  cluster.profiledCompressionGBps[CompressionMethod::Int8] = 3.5;
  std::string text = writeCluster(cluster);
  Cluster back = parseCluster(text, "x.json");
  EXPECT_EQ(writeCluster(back), text);
  EXPECT_DOUBLE_EQ(back.gpu.memoryGB, 80);
  EXPECT_EQ(back.gpu.sms, 108);
  EXPECT_DOUBLE_EQ(back.gpu.gemmEfficiency, 0.75);
  ASSERT_EQ(back.profiled.size(), 1u);
  EXPECT_EQ(back.profiled[0].kind, CollectiveKind::AllGather);
  EXPECT_DOUBLE_EQ(back.profiled[0].betaUsPerByte, 1e-4);
  EXPECT_DOUBLE_EQ(back.profiledCompressionGBps.at(CompressionMethod::Int8), 3.5);
  EXPECT_EQ(back.validation.at(0).points, 12);
  EXPECT_FALSE(back.profiledCompute.measured());
  EXPECT_FALSE(back.profiledInterference);
}

TEST(Cluster, ProfiledComputeInterferenceAndExecutorRoundTrip) {
  Cluster cluster = loadCluster("cpu-local");
  cluster.profiledBackend = "mpi";
  cluster.profiledCompute.gemms = {{16, 16, 16, 9.5}, {32, 1024, 1024, 30}};
  cluster.profiledCompute.memoryGBps = 24;
  cluster.profiledCompute.kernelOverheadUs = 0.02;
  cluster.profiledCompute.method = "timed";
  cluster.profiledInterference = ProfiledInterference{1.1, 3.5, 4 << 20, "beside"};
  cluster.profiledExecutor = ProfiledExecutor{12.5, 2.8e-4, "through"};
  std::string text = writeCluster(cluster);
  Cluster back = parseCluster(text, "p.json");
  EXPECT_EQ(writeCluster(back), text);
  ASSERT_EQ(back.profiledCompute.gemms.size(), 2u);
  EXPECT_EQ(back.profiledCompute.gemms[1].k, 1024);
  EXPECT_DOUBLE_EQ(back.profiledCompute.gemms[1].gflops, 30);
  EXPECT_EQ(back.profiledCompute.method, "timed");
  ASSERT_TRUE(back.profiledInterference);
  EXPECT_DOUBLE_EQ(back.profiledInterference->collectiveSlowdown, 3.5);
  ASSERT_TRUE(back.profiledExecutor);
  EXPECT_DOUBLE_EQ(back.profiledExecutor->betaUsPerByte, 2.8e-4);
}

struct BadCase {
  const char *what;
  std::string text;
  std::string message;  // expected substring: file, JSON path, reason
};

TEST(Cluster, BadFilesNameTheFileAndJsonPath) {
  std::vector<BadCase> cases = {
      {"unknown field", replaced(kMinimal, R"("nodes": 2)", R"("nodes": 2, "nodez": 3)"),
       "c.json: /nodez: unknown field"},
      {"unknown nested field", replaced(kMinimal, R"("latency_us": 2.7)", R"("latency_us": 2.7, "mtu": 4096)"),
       "c.json: /inter_node/mtu: unknown field"},
      {"non-finite", replaced(kMinimal, R"("bandwidth_gbps": 25)", R"("bandwidth_gbps": 1e999)"),
       "c.json: /inter_node/bandwidth_gbps: must be a finite number"},
      {"non-finite in an array", replaced(kMinimal, R"("nodes": 2)", R"("nodes": 2, "profiled": {"collectives": [{}, {"alpha_us": -1e999}]})"),
       "c.json: /profiled/collectives/1/alpha_us: must be a finite number"},
      {"non-positive", replaced(kMinimal, R"("hbm_bandwidth_gbps": 1000)", R"("hbm_bandwidth_gbps": 0)"),
       "c.json: /gpu/hbm_bandwidth_gbps: must be a finite positive number"},
      {"non-positive memory", replaced(kMinimal, R"("hbm_bandwidth_gbps": 1000)", R"("hbm_bandwidth_gbps": 1000, "memory_gb": -80)"),
       "c.json: /gpu/memory_gb: must be a finite positive number"},
      {"fractional SMs", replaced(kMinimal, R"("hbm_bandwidth_gbps": 1000)", R"("hbm_bandwidth_gbps": 1000, "sms": 10.5)"),
       "c.json: /gpu/sms: must be a positive integer"},
      {"GEMM efficiency above one", replaced(kMinimal, R"("hbm_bandwidth_gbps": 1000)",
                                             R"("hbm_bandwidth_gbps": 1000, "efficiencies": { "gemm": 1.2 })"),
       "c.json: /gpu/efficiencies/gemm: must be in (0, 1]"},
      {"negative integer", replaced(kMinimal, R"("nodes": 2)", R"("nodes": -2)"),
       "c.json: /nodes: must be a positive integer"},
      {"wrong type", replaced(kMinimal, R"("gpus_per_node": 4)", R"("gpus_per_node": "4")"),
       "c.json: /gpus_per_node: must be a positive integer"},
      {"wrong type string", replaced(kMinimal, R"("name": "g")", R"("name": 7)"),
       "c.json: /gpu/name: must be a string"},
      {"missing field", replaced(kMinimal, R"(, "latency_us": 0.6 })", " }"),
       "c.json: /intra_node/latency_us: required field is missing"},
      {"bad kind", replaced(kMinimal, R"("kind": "nvlink")", R"("kind": "carrier-pigeon")"),
       "c.json: /intra_node/kind: must be one of nvlink, pcie, shm"},
      {"efficiency above one", replaced(kMinimal, R"("latency_us": 0.6 })", R"("latency_us": 0.6, "efficiency": 1.5 })"),
       "c.json: /intra_node/efficiency: must be in (0, 1]"},
      {"not an object", "[1, 2]", "c.json: /: must be an object"},
      // Physical ranges: valid positive numbers that would make a time infinite or absurd.
      {"subnormal bandwidth", replaced(kMinimal, R"("bandwidth_gbps": 25)", R"("bandwidth_gbps": 5e-324)"),
       "c.json: /inter_node/bandwidth_gbps: must be from 1e-06 to 100000 GB/s (got 4.94066e-324;"},
      {"huge HBM bandwidth", replaced(kMinimal, R"("hbm_bandwidth_gbps": 1000)", R"("hbm_bandwidth_gbps": 1e308)"),
       "c.json: /gpu/hbm_bandwidth_gbps: must be from 1e-06 to 100000 GB/s (got 1e+308;"},
      {"tiny peak", replaced(kMinimal, R"("fp32": 10)", R"("fp32": 1e-300)"),
       "c.json: /gpu/peak_tflops/fp32: must be from 0.001 to 100000 TFLOP/s"},
      {"tiny efficiency", replaced(kMinimal, R"("latency_us": 0.6 })", R"("latency_us": 0.6, "efficiency": 5e-324 })"),
       "c.json: /intra_node/efficiency: must be from 0.01 to 1"},
      {"huge latency", replaced(kMinimal, R"("latency_us": 0.6)", R"("latency_us": 1e308)"),
       "c.json: /intra_node/latency_us: must be at most 1e+06 us"},
      {"huge slowdown", replaced(kMinimal, R"("nodes": 2)", R"("nodes": 2, "overlap_slowdown": 1e308)"),
       "c.json: /overlap_slowdown: must be from 1 to 10"},
      {"huge SM count", replaced(kMinimal, R"("hbm_bandwidth_gbps": 1000)", R"("hbm_bandwidth_gbps": 1000, "sms": 1000000)"),
       "c.json: /gpu/sms: must be at most 100000"},
      {"not JSON", "{ \"nodes\": ", "c.json: not valid JSON"},
      {"empty profiled GEMMs", replaced(kMinimal, R"("nodes": 2)", R"("nodes": 2, "profiled": {"compute": {"gemm": []}})"),
       "c.json: /profiled/compute/gemm: must be a non-empty array"},
      {"huge GEMM dimension",
       replaced(kMinimal, R"("nodes": 2)",
                R"("nodes": 2, "profiled": {"compute": {"gemm": [{"m": 1, "n": 1, "k": 4000000000, "gflops": 1}]}})"),
       "c.json: /profiled/compute/gemm/0/k: must be at most 1048576"},
      {"missing copy rate",
       replaced(kMinimal, R"("nodes": 2)",
                R"("nodes": 2, "profiled": {"compute": {"gemm": [{"m": 1, "n": 1, "k": 1, "gflops": 1}]}})"),
       "c.json: /profiled/compute/memory_gbps: required field is missing"},
      {"interference below one",
       replaced(kMinimal, R"("nodes": 2)",
                R"("nodes": 2, "profiled": {"interference": {"compute_slowdown": 0.5, "collective_slowdown": 1, "collective_bytes": 8, "method": ""}})"),
       "c.json: /profiled/interference/compute_slowdown: must be from 1 to 10"},
      {"unknown executor field",
       replaced(kMinimal, R"("nodes": 2)", R"("nodes": 2, "profiled": {"executor": {"gamma_us": 1}})"),
       "c.json: /profiled/executor/gamma_us: unknown field"},
      {"bad profiled op", replaced(kMinimal, R"("nodes": 2)", R"("nodes": 2, "profiled": {"collectives": [{"op": "all_sum"}]})"),
       "c.json: /profiled/collectives/0/op: unknown collective \"all_sum\""},
  };
  for (const BadCase &bad : cases) {
    ClusterError error = parseError(bad.text);
    EXPECT_EQ(error.kind, zen::ErrorKind::BadInput) << bad.what;
    EXPECT_NE(std::string(error.what()).find(bad.message), std::string::npos)
        << bad.what << ": got \"" << error.what() << "\"";
  }
}

TEST(Cluster, MissingFileIsExit66AndListsPresets) {
  try {
    loadCluster("/nonexistent/cluster.json");
    FAIL() << "loaded a missing file";
  } catch (const ClusterError &error) {
    EXPECT_EQ(error.kind, zen::ErrorKind::Unreadable);
    std::string message = error.what();
    EXPECT_NE(message.find("/nonexistent/cluster.json"), std::string::npos);
    EXPECT_NE(message.find("a100x64"), std::string::npos);
  }
}

TEST(Cluster, WriteFileIsAtomicAndReportsUnwritablePaths) {
  std::string path = ::testing::TempDir() + "zen_cluster_write.json";
  writeClusterFile(loadCluster("a100x8"), path);
  EXPECT_EQ(loadCluster(path).name, "a100x8");
  std::ifstream leftover(path + ".tmp");
  EXPECT_FALSE(leftover.good());
  std::remove(path.c_str());
  try {
    writeClusterFile(loadCluster("a100x8"), "/nonexistent-dir/x.json");
    FAIL() << "wrote into a missing directory";
  } catch (const ClusterError &error) {
    EXPECT_EQ(error.kind, zen::ErrorKind::Unwritable);
    EXPECT_NE(std::string(error.what()).find("/nonexistent-dir/x.json"), std::string::npos);
  }
}

//===- ClusterFuzzer.cpp - fuzz target: the cluster description parser ----===//
//
// Arbitrary bytes as a cluster file. A ClusterError(BadInput) is the expected answer to bad
// input; an accepted cluster must round-trip through writeCluster, and every collective
// it prices, at sizes from 0 bytes to 1 TiB on every group size up to the world, must
// take a finite, non-negative time. Anything else is a bug.
//
//===----------------------------------------------------------------------===//
#include "zen/CostModel/Cluster.h"
#include "zen/CostModel/CostModel.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {
[[noreturn]] void bug(const std::string &what) {
  std::fprintf(stderr, "cluster fuzz target: %s\n", what.c_str());
  std::abort();
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace zen::cost;
  std::string text(reinterpret_cast<const char *>(data), size);
  Cluster cluster;
  try {
    cluster = parseCluster(text, "fuzz.json");
  } catch (const ClusterError &error) {
    if (error.kind != zen::ErrorKind::BadInput)
      bug("parseCluster failed with error kind " + std::to_string(static_cast<int>(error.kind)));
    return 0;
  }
  std::string written = writeCluster(cluster);
  try {
    if (writeCluster(parseCluster(written, "rewritten.json")) != written)
      bug("the cluster does not round-trip");
  } catch (const ClusterError &error) {
    bug(std::string("an accepted cluster does not round-trip: ") + error.what());
  }
  CostModel model(cluster);
  const CollectiveKind kinds[] = {CollectiveKind::AllReduce, CollectiveKind::ReduceScatter,
                                  CollectiveKind::AllGather, CollectiveKind::AllToAll,
                                  CollectiveKind::Broadcast};
  for (int64_t ranks = 1; ranks <= cluster.worldSize(); ranks = ranks * 4 + 1) {
    Group group = model.groupOf(ranks);
    for (CollectiveKind kind : kinds)
      for (double bytes : {0.0, 8.0, 65536.0, 1.0 * (1 << 30), 1099511627776.0}) {
        double time = model.collective(kind, bytes, group).timeUs;
        if (!std::isfinite(time) || time < 0)
          bug(std::string("priced ") + toString(kind) + " of " + std::to_string(bytes) +
              " bytes on " + std::to_string(ranks) + " ranks at " + std::to_string(time) + " us");
      }
  }
  return 0;
}

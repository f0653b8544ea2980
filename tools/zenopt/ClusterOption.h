//===- ClusterOption.h - the cluster a zenopt command prices on --*- C++ -*-===//
#ifndef ZEN_TOOLS_ZENOPT_CLUSTEROPTION_H
#define ZEN_TOOLS_ZENOPT_CLUSTEROPTION_H

#include "Command.h"

#include "zen/CostModel/Cluster.h"

#include <string>

namespace zen::cli {

/// `cluster` (a preset name or a JSON file) resized to `nodes` nodes when positive; a
/// cluster that cannot be read or is invalid is a CommandError with its exit code.
inline cost::Cluster loadClusterOption(const std::string &cluster, int64_t nodes) {
  try {
    cost::Cluster loaded = cost::loadCluster(cluster);
    if (nodes > 0)
      loaded = cost::withNodes(std::move(loaded), nodes);
    return loaded;
  } catch (const cost::ClusterError &error) {
    throw CommandError(exitCodeOf(error.kind), error.what());
  }
}

} // namespace zen::cli

#endif // ZEN_TOOLS_ZENOPT_CLUSTEROPTION_H

//===- SparseCostCommand.cpp - `zenopt sparse-cost`: price a sparse gradient's schemes -===//
//
//   zenopt sparse-cost --rows R --row-elements E (--lookups L | --statistics FILE)
//                      [--cluster C] [--nodes N] [--ranks n] [--json]
//
// Every SparseScheme's predicted time for one row-sparse gradient (cost::rankSparseSchemes),
// cheapest first, with the statistics they were priced from: the Zipf model for L lookups per
// rank per step, or a file `zenopt sparsity` wrote (source measured), and the planner's
// choice and reason (plan::planSparseTensors).
//
//===----------------------------------------------------------------------===//
#include "CliChecks.h"
#include "ClusterOption.h"
#include "Command.h"

#include "zen/Codegen/SparsePlan.h"
#include "zen/CostModel/Sparse.h"
#include "zen/Planner/Sparse.h"
#include "zen/Support/FileIO.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <iostream>

namespace zen::cli {
namespace {

struct SparseCostOptions {
  std::string cluster = cost::defaultPresetName();
  int64_t nodes = 0;
  int64_t ranks = 0; // 0: every GPU
  int64_t rows = 0;
  int64_t rowElements = 0;
  int64_t lookups = 0;
  std::string statistics;
  bool json = false;
};

int runSparseCost(const SparseCostOptions &options) {
  cost::Cluster cluster = loadClusterOption(options.cluster, options.nodes);
  if (options.ranks > cluster.worldSize())
    throw CommandError(ExitUsage, fmt::format("--ranks {} exceeds the {} GPUs of cluster {}",
                                              options.ranks, cluster.worldSize(), cluster.name));
  cost::CostModel model(cluster);
  const cost::Group group =
      options.ranks > 0 ? model.groupOf(options.ranks) : model.worldGroup();
  plan::SparseTensorRequest request;
  request.name = "table";
  request.table = {options.rows, options.rowElements};
  request.lookupsPerStep = options.lookups;
  if (!options.statistics.empty()) {
    try {
      request.measured = cost::parseSparsityStatistics(
          io::readBounded(options.statistics, cost::kMaxStatisticsFileBytes, "statistics file"),
          options.statistics);
    } catch (const Error &error) {
      throw CommandError(exitCodeOf(error.kind), error.what());
    }
  }
  plan::SparsePlan planned;
  try {
    planned = plan::planSparseTensors({request}, model, group);
  } catch (const Error &error) {
    throw CommandError(exitCodeOf(error.kind), options.statistics + ": " + error.what());
  }
  const plan::SparseDecision &decision = planned.tensors.front();
  if (options.json) {
    nlohmann::ordered_json out;
    out["cluster"] = cluster.name;
    out["ranks"] = group.ranks;
    out["nodes"] = group.nodes;
    out["sparse"] = codegen::sparseSummaryJson(planned);
    nlohmann::ordered_json schemes = nlohmann::ordered_json::array();
    for (const cost::SparseSyncCost &priced : decision.ranking) {
      if (!std::isfinite(priced.timeUs))
        continue;
      schemes.push_back({{"scheme", vocab::toString(priced.scheme)},
                         {"time_us", priced.timeUs},
                         {"communication_us", priced.communicationUs},
                         {"kernel_us", priced.kernelUs},
                         {"wire_bytes", priced.wireBytes}});
    }
    out["schemes"] = std::move(schemes);
    std::cout << out.dump(2) << "\n";
    return ExitSuccess;
  }
  std::cout << fmt::format("{} x {} fp32 table on {} ranks ({} node{}) of cluster {}\n",
                           options.rows, options.rowElements, group.ranks, group.nodes,
                           group.nodes == 1 ? "" : "s", cluster.name)
            << codegen::sparseSummaryText(planned);
  for (const cost::SparseSyncCost &priced : decision.ranking)
    if (std::isfinite(priced.timeUs))
      std::cout << fmt::format("  {:<13} {:>10.1f} us (network {:.1f}, kernels {:.1f}; {:.0f} bytes sent)\n",
                               vocab::toString(priced.scheme), priced.timeUs,
                               priced.communicationUs, priced.kernelUs, priced.wireBytes);
    else
      std::cout << fmt::format("  {:<13} does not run on this group\n",
                               vocab::toString(priced.scheme));
  return ExitSuccess;
}

CommandRegistration registration(
    "sparse-cost", "Price every sparse synchronisation scheme for one row-sparse gradient",
    [](CLI::App &app) -> std::function<int()> {
      auto options = std::make_shared<SparseCostOptions>();
      app.add_option("--cluster", options->cluster,
                     "Cluster preset name or JSON file (default: a100x64)");
      app.add_option("--nodes", options->nodes, "Node count, overriding the cluster's")
          ->check(wholeNumber(1));
      app.add_option("--ranks", options->ranks, "Ranks in the group (default: every GPU)")
          ->check(wholeNumber(1));
      app.add_option("--rows", options->rows, "Rows of the table")->required()->check(wholeNumber(1));
      app.add_option("--row-elements", options->rowElements, "fp32 elements per row")
          ->required()
          ->check(wholeNumber(1, int64_t(1) << 30));
      CLI::Option *lookups =
          app.add_option("--lookups", options->lookups,
                         "Row lookups per rank per step (the Zipf model's statistics)")
              ->check(wholeNumber(1, int64_t(1) << 40));
      CLI::Option *statistics =
          app.add_option("--statistics", options->statistics,
                         "Statistics file written by zenopt sparsity (source measured)");
      lookups->excludes(statistics);
      app.add_flag("--json", options->json, "Print one JSON object (times in microseconds)");
      return [options, lookups, statistics] {
        if (lookups->count() == 0 && statistics->count() == 0)
          throw CommandError(ExitUsage, "sparse-cost needs --lookups or --statistics");
        return runSparseCost(*options);
      };
    });

} // namespace
} // namespace zen::cli

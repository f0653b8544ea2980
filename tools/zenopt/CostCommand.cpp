//===- CostCommand.cpp - `zenopt cost`: price one collective --------------===//
//
//   zenopt cost --cluster C --op OP --bytes N [--ranks N] [--json]
//
// Prints the cost model's time for one collective, the algorithm and protocol
// its tuner picked, the bandwidths in the nccl-tests convention, and the time
// of every other algorithm that implements the collective.
//
//===----------------------------------------------------------------------===//
#include "CliChecks.h"
#include "ClusterOption.h"
#include "Command.h"

#include "zen/CostModel/CostModel.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <iostream>
#include <vector>

namespace zen::cli {
namespace {

struct CostOptions {
  std::string cluster = cost::defaultPresetName();
  int64_t nodes = 0;  // 0: the cluster's own
  std::string op;
  uint64_t bytes = 0;
  int64_t ranks = 0;  // 0: every GPU of the cluster
  bool json = false;
};

constexpr cost::Algorithm kAlgorithms[] = {cost::Algorithm::Ring, cost::Algorithm::Tree,
                                           cost::Algorithm::Hierarchical, cost::Algorithm::Direct};

int runCost(const CostOptions &options) {
  cost::Cluster cluster = loadClusterOption(options.cluster, options.nodes);
  cost::CollectiveKind kind = *cost::parseCollectiveKind(options.op);
  cost::CostModel model(cluster);
  int64_t world = cluster.worldSize();
  int64_t ranks = options.ranks > 0 ? options.ranks
                                    : (kind == cost::CollectiveKind::SendRecv ? 2 : world);
  if (ranks > world)
    throw CommandError(ExitUsage, fmt::format("--ranks {} exceeds the {} GPUs of cluster {}", ranks,
                                              world, cluster.name));
  if (kind == cost::CollectiveKind::SendRecv && ranks != 2)
    throw CommandError(ExitUsage, "send_recv is between exactly 2 ranks (--ranks 2)");
  cost::Group group = model.groupOf(ranks);
  double bytes = static_cast<double>(options.bytes);
  cost::CollectiveCost best = model.collective(kind, bytes, group);

  std::vector<std::pair<cost::Algorithm, double>> alternatives;
  for (cost::Algorithm algorithm : kAlgorithms)
    if (cost::CostModel::supports(kind, algorithm, group))
      alternatives.emplace_back(algorithm, model.collective(kind, bytes, group, algorithm).timeUs);

  if (options.json) {
    nlohmann::ordered_json out;
    out["cluster"] = cluster.name;
    out["op"] = options.op;
    out["bytes"] = options.bytes;
    out["ranks"] = group.ranks;
    out["nodes"] = group.nodes;
    out["algorithm"] = cost::toString(best.algorithm);
    out["protocol"] = cost::toString(best.protocol);
    out["profiled"] = best.profiled;
    out["time_us"] = best.timeUs;
    out["latency_us"] = best.latencyUs;
    out["bandwidth_us"] = best.bandwidthUs;
    out["algbw_gbps"] = best.algBandwidthGBps;
    out["busbw_gbps"] = best.busBandwidthGBps;
    nlohmann::ordered_json algorithms = nlohmann::ordered_json::object();
    for (const auto &[algorithm, timeUs] : alternatives)
      algorithms[cost::toString(algorithm)] = timeUs;
    out["algorithms_us"] = algorithms;
    std::cout << out.dump(2) << "\n";
    return ExitSuccess;
  }

  std::cout << fmt::format("{} of {} bytes on {} ranks ({} node{}) of cluster {}\n", options.op,
                           options.bytes, group.ranks, group.nodes, group.nodes == 1 ? "" : "s",
                           cluster.name);
  std::cout << fmt::format("  algorithm  {}/{}{}\n", cost::toString(best.algorithm),
                           cost::toString(best.protocol),
                           best.profiled ? " (profiled alpha-beta fit)" : "");
  std::cout << fmt::format("  time       {:.2f} us (latency {:.2f} us + transfer {:.2f} us)\n",
                           best.timeUs, best.latencyUs, best.bandwidthUs);
  std::cout << fmt::format("  bandwidth  algbw {:.2f} GB/s, busbw {:.2f} GB/s\n",
                           best.algBandwidthGBps, best.busBandwidthGBps);
  std::vector<std::string> perAlgorithm;
  for (const auto &[algorithm, timeUs] : alternatives)
    perAlgorithm.push_back(fmt::format("{} {:.2f} us", cost::toString(algorithm), timeUs));
  std::cout << fmt::format("  per algorithm: {}\n", fmt::join(perAlgorithm, ", "));
  return ExitSuccess;
}

CommandRegistration registration(
    "cost", "Price one collective on a cluster with the cost model",
    [](CLI::App &app) -> std::function<int()> {
      auto options = std::make_shared<CostOptions>();
      app.add_option("--cluster", options->cluster,
                     "Cluster preset name or JSON file (default: a100x64)");
      app.add_option("--nodes", options->nodes,
                     "Node count, overriding the cluster's (preset or file)")
          ->check(wholeNumber(1));
      app.add_option("--op", options->op, "Collective")
          ->required()
          ->check(CLI::IsMember(vocab::spellingsOf(vocab::kCollectiveKinds)));
      app.add_option("--bytes", options->bytes,
                     "Message size in bytes (nccl-tests convention; suffixes KB, MB, GB = 2^10.. accepted)")
          ->required()
          ->transform(byteSize());
      app.add_option("--ranks", options->ranks, "Ranks in the group (default: every GPU)")
          ->check(wholeNumber(1));
      app.add_flag("--json", options->json, "Print one JSON object (times in microseconds)");
      return [options] { return runCost(*options); };
    });

} // namespace
} // namespace zen::cli

//===- SimulateCommand.cpp - `zenopt simulate PLAN.json` ------------------===//
//
// Re-scores any plan file (written by zenopt or by hand) with the timeline
// simulator, on the plan's own cluster or on another one.
//
//===----------------------------------------------------------------------===//
#include "CliChecks.h"
#include "Command.h"

#include "zen/Codegen/PlanSimulation.h"
#include "zen/Codegen/Report.h"
#include "zen/Codegen/SparsePlan.h"
#include "zen/CostModel/Cluster.h"
#include "zen/Support/FileIO.h"

#include <iostream>

namespace zen::cli {
namespace {
struct SimulateOptions {
  std::string planPath;
  std::string cluster;
  int64_t nodes = 0;  // 0: the cluster's own
  std::string tracePath;
  std::string svgPath;
  bool json = false;
};

int runSimulate(const SimulateOptions &options) {
  try {
    zen::io::requireDistinctOutputs({{"--trace", options.tracePath},
                                     {"--timeline-svg", options.svgPath},
                                     {"standard output", "/dev/stdout"}});
    zenrt::Plan plan = zenrt::loadPlanFile(options.planPath);
    if (!plan.inference.empty())
      throw CommandError(ExitDataError, options.planPath + ": /inference: a serving plan has no training "
                                        "schedule to re-score; plan it again with zenopt MODEL --serve "
                                        "--cluster CLUSTER");
    // A plan carries its cluster's description, so it re-scores exactly without --cluster.
    cost::Cluster own = cost::parseCluster(plan.cluster.spec, options.planPath + ": /cluster/spec");
    cost::Cluster cluster = options.cluster.empty() ? own : cost::loadCluster(options.cluster);
    if (options.nodes > 0)
      cluster = cost::withNodes(std::move(cluster), options.nodes);
    // The baselines were predicted on the plan's own cluster, and re-scoring them needs the
    // model: on another cluster the summary compares the plan with none.
    const bool otherCluster = cost::writeCluster(cluster) != cost::writeCluster(own);
    if (otherCluster) {
      plan.baselines.clear();
      plan.baselinesUncompressed.clear();
    }
    cost::CostModel model(std::move(cluster));
    codegen::simulatePlan(plan, model);
    // All outputs or none: one that cannot be written leaves no other behind.
    zen::io::OutputFiles outputs;
    if (!options.tracePath.empty())
      outputs.add(options.tracePath, codegen::chromeTrace(plan));
    if (!options.svgPath.empty())
      outputs.add(options.svgPath, codegen::timelineSvg(plan));
    outputs.commit();
    // The row-sparse tables' decisions, re-priced on this cluster, as zenopt reports them.
    codegen::SummaryContext context;
    context.sparse = codegen::sparseDecisionsOf(
        plan, model, otherCluster ? codegen::PricedOn::OtherCluster : codegen::PricedOn::PlanCluster);
    if (options.json)
      std::cout << codegen::summaryJson(plan, context).dump() << "\n";
    else
      std::cout << codegen::summaryText(plan, context);
    return ExitSuccess;
  } catch (const zenrt::PlanError &error) {
    std::string message = error.what();
    // Errors raised while simulating name no file yet.
    if (message.rfind(options.planPath, 0) != 0 && exitCodeOf(error.kind) == ExitDataError)
      message = options.planPath + ": " + message;
    return reportError(message, exitCodeOf(error.kind));
  } catch (const cost::ClusterError &error) {
    return reportError(error.what(), exitCodeOf(error.kind));
  } catch (const zen::io::FileError &error) {
    return reportError(error.what(), exitCodeOf(error.kind));
  }
}

CommandRegistration registration(
    "simulate", "Re-score a plan file with the timeline simulator", [](CLI::App &app) {
      auto options = std::make_shared<SimulateOptions>();
      app.add_option("plan", options->planPath, "Plan file written by zenopt (or by hand)")
          ->required();
      app.add_option("--cluster", options->cluster,
                     "Cluster preset name or JSON file (default: the plan's own cluster)");
      app.add_option("--nodes", options->nodes,
                     "Node count, overriding the cluster's (the plan's own or --cluster's)")
          ->check(wholeNumber(1));
      app.add_option("--trace", options->tracePath, "Write a Chrome/Perfetto trace here");
      app.add_option("--timeline-svg", options->svgPath, "Write an SVG timeline picture here");
      app.add_flag("--json", options->json, "Print one JSON object (times in microseconds)");
      return [options] { return runSimulate(*options); };
    });
} // namespace
} // namespace zen::cli

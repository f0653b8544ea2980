//===- SparsePlan.cpp - row-sparse gradients in the plan and summary ------===//
#include "zen/Codegen/SparsePlan.h"

#include "zen/Codegen/PlanSimulation.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace zen::codegen {
namespace {

/// One tensor in the summary: the plan entry's fields (docs/plan-format.md "sparse_tensors").
nlohmann::ordered_json entryOf(const plan::SparseDecision &decision) {
  const cost::SparseSyncCost &chosen = decision.chosen();
  const auto &traits = vocab::traitsOf(chosen.scheme);
  nlohmann::ordered_json entry;
  entry["name"] = decision.name;
  entry["rows"] = decision.table.rows;
  entry["row_elements"] = decision.table.rowElements;
  entry["scheme"] = traits.spelling;
  if (traits.takesBlockRows)
    entry["block_rows"] = chosen.blockRows;
  if (traits.takesDenseThreshold)
    entry["dense_threshold"] = chosen.denseThreshold;
  const cost::SparsityStatistics &stats = decision.statistics;
  entry["statistics"] = {{"density", stats.density},
                         {"gamma", stats.gamma},
                         {"skew", stats.skew},
                         {"source", cost::toString(stats.source)}};
  entry["predicted_us"] = chosen.timeUs;
  return entry;
}

/// One table in the text summary: its shape, `why`, and the statistics it was priced from.
std::string tableLine(const plan::SparseDecision &decision, const std::string &why) {
  const cost::SparsityStatistics &stats = decision.statistics;
  return fmt::format("  {} {}x{}: {}; density {:.4f}, gamma({}) {:.2f}, skew {:.2f} ({})\n",
                     decision.name, decision.table.rows, decision.table.rowElements, why,
                     stats.density, int64_t(1) << (stats.gamma.size() - 1), stats.gamma.back(),
                     stats.skew, cost::toString(stats.source));
}

/// The scheme `decision` prices cheapest (not necessarily the one the plan runs).
const cost::SparseSyncCost &cheapestOf(const plan::SparseDecision &decision) {
  return *std::min_element(decision.ranking.begin(), decision.ranking.end(),
                           [](const cost::SparseSyncCost &a, const cost::SparseSyncCost &b) {
                             return a.timeUs < b.timeUs;
                           });
}

/// Why a table the plan synchronises dense (ranking.front()) is dense: the reason against the
/// runner-up, or what the cheapest scheme would take where dense is not the cheapest.
std::string denseReason(const plan::SparseDecision &decision) {
  const cost::SparseSyncCost &dense = decision.chosen(), &cheapest = cheapestOf(decision);
  if (cheapest.timeUs >= dense.timeUs)
    return decision.reason();
  return fmt::format("dense {:.1f} us; {} would take {:.1f} us, {:.2f}x less", dense.timeUs,
                     vocab::toString(cheapest.scheme), cheapest.timeUs,
                     cheapest.timeUs > 0 ? dense.timeUs / cheapest.timeUs : 1.0);
}

} // namespace

zenrt::SparseTensor sparseTensorOf(const std::string &name, const cost::SparseTable &table,
                                   const cost::SparsityStatistics &statistics,
                                   const cost::SparseSyncCost &priced) {
  const auto &traits = vocab::traitsOf(priced.scheme);
  zenrt::SparseTensor tensor;
  tensor.name = name;
  tensor.rows = table.rows;
  tensor.rowElements = table.rowElements;
  tensor.scheme = priced.scheme;
  tensor.blockRows = traits.takesBlockRows ? priced.blockRows : 0;
  tensor.denseThreshold = traits.takesDenseThreshold ? priced.denseThreshold : 0;
  tensor.statistics = sparseStatisticsOf(statistics);
  tensor.predictedUs = priced.timeUs;
  return tensor;
}

plan::SparsePlan sparseDecisionsOf(const zenrt::Plan &plan, const cost::CostModel &model,
                                   PricedOn pricedOn) {
  // Without tables there is nothing to rank, and the baselines' simulations of the whole
  // plan (a tenth of planning a 10 000-tensor model) would be thrown away.
  if (plan.sparseTensors.empty())
    return {};
  std::vector<plan::SparseTensorRequest> requests;
  for (const zenrt::SparseTensor &tensor : plan.sparseTensors) {
    plan::SparseTensorRequest request;
    request.name = tensor.name;
    request.table = {tensor.rows, tensor.rowElements};
    request.measured = sparsityStatisticsOf(tensor.statistics);
    requests.push_back(std::move(request));
  }
  plan::SparsePlan decisions =
      plan::planSparseTensors(requests, model, dataParallelGroup(plan, model));
  // The plan's iteration with every sparse tensor under each baseline's scheme.
  const std::vector<cost::SimTask> planned = planToSimTasks(plan, model);
  for (const auto &traits : vocab::kSparseSchemes) {
    if (!traits.baseline)
      continue;
    std::vector<cost::SimTask> tasks = planned;
    for (cost::SimTask &task : tasks)
      if (task.sparse) {
        cost::SparseSync forced = *task.sparse;
        forced.scheme = traits.value;
        task.sparse = std::make_shared<const cost::SparseSync>(std::move(forced));
      }
    const cost::SimResult result = cost::simulate(model, tasks);
    if (result.error.empty())
      decisions.baselineIterationUs[traits.baseline] = result.iterationUs;
  }
  // On the plan's own cluster the planner chose the cheapest scheme; re-costed on another
  // (zenopt simulate --cluster), the plan still runs its own, which is what is reported.
  decisions.chosenUs = 0;
  for (size_t t = 0; t < decisions.tensors.size(); ++t) {
    std::vector<cost::SparseSyncCost> &ranking = decisions.tensors[t].ranking;
    const vocab::SparseScheme runs = plan.sparseTensors[t].scheme;
    if (ranking.front().scheme != runs && pricedOn == PricedOn::PlanCluster)
      throw zen::Error(zen::ErrorKind::Internal,
                       "sparse tensor '" + plan.sparseTensors[t].name + "' runs " +
                           vocab::toString(runs) + " but " +
                           vocab::toString(ranking.front().scheme) +
                           " is the cheapest on cluster '" + model.cluster().name + "'");
    auto planned = std::find_if(ranking.begin(), ranking.end(),
                                [&](const cost::SparseSyncCost &cost) { return cost.scheme == runs; });
    if (planned != ranking.end())
      std::rotate(ranking.begin(), planned, planned + 1);
    decisions.chosenUs += decisions.tensors[t].chosen().timeUs;
  }
  return decisions;
}

nlohmann::ordered_json sparseSummaryJson(const plan::SparsePlan &plan) {
  nlohmann::ordered_json tensors = nlohmann::ordered_json::array();
  for (const plan::SparseDecision &decision : plan.tensors) {
    nlohmann::ordered_json entry = entryOf(decision);
    entry["reason"] = decision.reason();
    if (decision.ranking.size() > 1 && std::isfinite(decision.ranking[1].timeUs))
      entry["runner_up"] = {{"scheme", vocab::toString(decision.ranking[1].scheme)},
                            {"predicted_us", decision.ranking[1].timeUs}};
    tensors.push_back(std::move(entry));
  }
  nlohmann::ordered_json baselines = nlohmann::ordered_json::object();
  for (const std::string &name : plan::sparseBaselineNames())
    baselines[name] = plan.baselines.at(name);
  nlohmann::ordered_json iterations = nlohmann::ordered_json::object();
  for (const auto &[name, us] : plan.baselineIterationUs)
    iterations[name] = us;
  return {{"tensors", std::move(tensors)},
          {"chosen_us", plan.chosenUs},
          {"baselines", std::move(baselines)},
          {"baseline_iteration_us", std::move(iterations)}};
}

std::string sparseSummaryText(const plan::SparsePlan &plan) {
  if (plan.tensors.empty())
    return "";
  std::string text = "sparse gradients (scheme per tensor, statistics it used, why)\n";
  for (const plan::SparseDecision &decision : plan.tensors)
    text += tableLine(decision, decision.reason());
  text += fmt::format("  sparse sync {:.1f} us; baselines:", plan.chosenUs);
  for (const std::string &name : plan::sparseBaselineNames())
    text += fmt::format(" {} {:.1f}", name, plan.baselines.at(name));
  text += " us\n";
  if (!plan.baselineIterationUs.empty()) {
    text += "  iteration with every sparse gradient under a baseline's scheme (these buckets):";
    for (const auto &[name, us] : plan.baselineIterationUs)
      text += fmt::format(" {} {:.3f}", name, us / 1000.0);
    text += " ms\n";
  }
  return text;
}

DenseSyncedTables denseSyncedTables(const std::vector<plan::SparseTensorRequest> &requests,
                                    const zenrt::Plan &plan, const cost::CostModel &model,
                                    const std::string &whyNotSparse) {
  DenseSyncedTables dense;
  if (requests.empty())
    return dense;
  dense.tables = plan::planSparseTensors(requests, model, dataParallelGroup(plan, model)).tensors;
  bool denseCheapest = true;
  for (plan::SparseDecision &table : dense.tables) {
    std::vector<cost::SparseSyncCost> &ranking = table.ranking;
    auto runs = std::find_if(ranking.begin(), ranking.end(), [](const cost::SparseSyncCost &cost) {
      return cost.scheme == vocab::SparseScheme::Dense;
    });
    if (runs == ranking.end())
      throw zen::Error(zen::ErrorKind::Internal, "sparse tensor '" + table.name + "' has no dense price");
    std::rotate(ranking.begin(), runs, runs + 1);
    denseCheapest = denseCheapest && cheapestOf(table).timeUs >= table.chosen().timeUs;
  }
  dense.reason = denseCheapest ? "dense is the cheapest scheme for each over the data-parallel group"
                               : whyNotSparse;
  return dense;
}

nlohmann::ordered_json denseSyncedJson(const DenseSyncedTables &dense) {
  nlohmann::ordered_json tables = nlohmann::ordered_json::array();
  for (const plan::SparseDecision &decision : dense.tables) {
    nlohmann::ordered_json entry = entryOf(decision);
    entry.erase("predicted_us");
    entry["dense_us"] = decision.chosen().timeUs;
    const cost::SparseSyncCost &cheapest = cheapestOf(decision);
    entry["cheapest"] = {{"scheme", vocab::toString(cheapest.scheme)}, {"predicted_us", cheapest.timeUs}};
    entry["reason"] = denseReason(decision);
    tables.push_back(std::move(entry));
  }
  return {{"reason", dense.reason}, {"tensors", std::move(tables)}};
}

std::string denseSyncedText(const DenseSyncedTables &dense) {
  if (dense.tables.empty())
    return "";
  std::string text = "row-sparse gradients synchronised dense: " + dense.reason + "\n";
  for (const plan::SparseDecision &decision : dense.tables)
    text += tableLine(decision, denseReason(decision));
  return text;
}

} // namespace zen::codegen

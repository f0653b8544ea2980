//===- SparsePlan.cpp - row-sparse gradients in the plan and summary ------===//
#include "zen/Codegen/SparsePlan.h"

#include <fmt/format.h>

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

} // namespace

std::vector<zenrt::SparseTensor> planSparseTensors(const plan::SparsePlan &plan) {
  std::vector<zenrt::SparseTensor> tensors;
  for (const plan::SparseDecision &decision : plan.tensors) {
    const cost::SparseSyncCost &chosen = decision.chosen();
    const auto &traits = vocab::traitsOf(chosen.scheme);
    zenrt::SparseTensor tensor;
    tensor.name = decision.name;
    tensor.rows = decision.table.rows;
    tensor.rowElements = decision.table.rowElements;
    tensor.scheme = chosen.scheme;
    tensor.blockRows = traits.takesBlockRows ? chosen.blockRows : 0;
    tensor.denseThreshold = traits.takesDenseThreshold ? chosen.denseThreshold : 0;
    tensor.statistics.density = decision.statistics.density;
    tensor.statistics.gamma = decision.statistics.gamma;
    tensor.statistics.skew = decision.statistics.skew;
    tensor.statistics.source = cost::toString(decision.statistics.source);
    tensor.predictedUs = chosen.timeUs;
    tensors.push_back(std::move(tensor));
  }
  return tensors;
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
  return {{"tensors", std::move(tensors)}, {"chosen_us", plan.chosenUs},
          {"baselines", std::move(baselines)}};
}

std::string sparseSummaryText(const plan::SparsePlan &plan) {
  if (plan.tensors.empty())
    return "";
  std::string text = "sparse gradients (scheme per tensor, statistics it used, why)\n";
  for (const plan::SparseDecision &decision : plan.tensors) {
    const cost::SparsityStatistics &stats = decision.statistics;
    text += fmt::format("  {} {}x{}: {}; density {:.4f}, gamma({}) {:.2f}, skew {:.2f} ({})\n",
                        decision.name, decision.table.rows, decision.table.rowElements,
                        decision.reason(), stats.density,
                        int64_t(1) << (stats.gamma.size() - 1), stats.gamma.back(), stats.skew,
                        cost::toString(stats.source));
  }
  text += fmt::format("  sparse sync {:.1f} us; baselines:", plan.chosenUs);
  for (const std::string &name : plan::sparseBaselineNames())
    text += fmt::format(" {} {:.1f}", name, plan.baselines.at(name));
  return text + " us\n";
}

} // namespace zen::codegen

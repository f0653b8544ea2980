//===- Sparse.cpp - choosing each row-sparse gradient's scheme ------------===//
#include "zen/Planner/Sparse.h"

#include <fmt/format.h>

#include <cmath>
#include "zen/Errors.h"

namespace zen::plan {
namespace {

void checkStatistics(const std::string &name, const cost::SparsityStatistics &stats) {
  auto bad = [&](const std::string &what) {
    throw zen::Error(zen::ErrorKind::BadInput, "sparse tensor '" + name + "': " + what);
  };
  if (!(stats.density > 0 && stats.density <= 1))
    bad(fmt::format("density {} is not in (0, 1]", stats.density));
  if (stats.gamma.empty() || stats.gamma.front() != 1.0)
    bad("gamma must start at 1 (one rank)");
  for (size_t k = 1; k < stats.gamma.size(); ++k)
    if (!std::isfinite(stats.gamma[k]) || stats.gamma[k] < stats.gamma[k - 1])
      bad(fmt::format("gamma[{}] = {} decreases or is not finite", k, stats.gamma[k]));
  if (!(stats.skew >= 1.0 / double(cost::kSkewPartitions) && stats.skew <= 1))
    bad(fmt::format("skew {} is not in [1/8, 1]", stats.skew));
}

/// Measured statistics need not say how OmniReduce's blocks fill: a block of k rows is taken
/// to hold a non-zero row as k independent rows would, 1 - (1 - density)^k, and to grow so.
void completeBlockStatistics(const cost::SparseTable &table, cost::SparsityStatistics &stats) {
  if (stats.blockDensity > 0 && !stats.blockGamma.empty())
    return;
  const double rows = double(cost::omniReduceBlockRows(table));
  stats.blockDensity = -std::expm1(rows * std::log1p(-std::min(stats.density, 1.0)));
  stats.blockGamma.clear();
  for (double merged : stats.gamma) {
    const double density = std::min(1.0, stats.density * merged);
    stats.blockGamma.push_back(-std::expm1(rows * std::log1p(-density)) / stats.blockDensity);
  }
}

} // namespace

std::string SparseDecision::reason() const {
  const cost::SparseSyncCost &best = chosen();
  if (ranking.size() < 2 || !std::isfinite(ranking[1].timeUs))
    return fmt::format("{} {:.1f} us, the only scheme that runs", vocab::toString(best.scheme),
                       best.timeUs);
  const cost::SparseSyncCost &next = ranking[1];
  if (next.timeUs < best.timeUs)  // a plan re-costed on another cluster runs its own choice
    return fmt::format("{} {:.1f} us as planned, {:.2f}x slower than {} ({:.1f} us) here",
                       vocab::toString(best.scheme), best.timeUs,
                       next.timeUs > 0 ? best.timeUs / next.timeUs : 1.0,
                       vocab::toString(next.scheme), next.timeUs);
  return fmt::format("{} {:.1f} us, {:.2f}x faster than {} ({:.1f} us)",
                     vocab::toString(best.scheme), best.timeUs,
                     best.timeUs > 0 ? next.timeUs / best.timeUs : 1.0,
                     vocab::toString(next.scheme), next.timeUs);
}

std::vector<std::string> sparseBaselineNames() {
  std::vector<std::string> names;
  for (const auto &traits : vocab::kSparseSchemes)
    if (traits.baseline)
      names.push_back(traits.baseline);
  return names;
}

SparsePlan planSparseTensors(const std::vector<SparseTensorRequest> &requests,
                             const cost::CostModel &model, cost::Group group) {
  SparsePlan plan;
  for (const auto &traits : vocab::kSparseSchemes)
    if (traits.baseline)
      plan.baselines[traits.baseline] = 0;
  for (const SparseTensorRequest &request : requests) {
    if (request.table.rows <= 0 || request.table.rowElements <= 0)
      throw zen::Error(zen::ErrorKind::BadInput, "sparse tensor '" + request.name +
                                  "': rows and row elements must be positive");
    SparseDecision decision;
    decision.name = request.name;
    decision.table = request.table;
    const int64_t ranks = std::max<int64_t>(group.ranks, 1);
    decision.statistics =
        request.measured     ? *request.measured
        : request.sharedRows ? cost::sharedRowsStatistics(request.table, request.lookupsPerStep, ranks)
                             : cost::zipfStatistics(request.table, request.lookupsPerStep, ranks);
    checkStatistics(request.name, decision.statistics);
    completeBlockStatistics(request.table, decision.statistics);
    decision.ranking = cost::rankSparseSchemes(model, request.table, decision.statistics, group);
    plan.chosenUs += decision.chosen().timeUs;
    for (const cost::SparseSyncCost &priced : decision.ranking)
      if (const char *baseline = vocab::traitsOf(priced.scheme).baseline)
        plan.baselines[baseline] += priced.timeUs;
    plan.tensors.push_back(std::move(decision));
  }
  return plan;
}

} // namespace zen::plan

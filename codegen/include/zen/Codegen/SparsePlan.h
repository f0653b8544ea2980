//===- SparsePlan.h - row-sparse gradients in the plan and summary -*- C++ -*-===//
//
// The plan file's `sparse_tensors` (docs/design.md "Sparse gradients": the contract the
// runtime reads), and the summary's account of each decision: scheme, the statistics it
// used, and why (the runner-up's predicted time), beside the sparse baselines.
//
//===----------------------------------------------------------------------===//
#ifndef ZEN_CODEGEN_SPARSEPLAN_H
#define ZEN_CODEGEN_SPARSEPLAN_H

#include "zen/Planner/Sparse.h"
#include "zenrt/Plan.h"

#include <nlohmann/json.hpp>

#include <string>

namespace zen::codegen {

/// One of the plan's `sparseTensors` (written by zenrt::writePlan as `sparse_tensors`): `name`'s
/// table as `priced` synchronises it (its scheme, the scheme's parameter: block_rows for
/// omnireduce, dense_threshold for sparcml, and its predicted time), with the statistics it
/// was priced from.
zenrt::SparseTensor sparseTensorOf(const std::string &name, const cost::SparseTable &table,
                                   const cost::SparsityStatistics &statistics,
                                   const cost::SparseSyncCost &priced);

/// Where a plan's sparse decisions are re-priced: on the cluster the planner chose them for,
/// or on another one (`zenopt simulate --cluster`).
enum class PricedOn { PlanCluster, OtherCluster };

/// The decisions behind a plan's sparse_tensors: each tensor's schemes ranked again from the
/// statistics the plan carries, over its data-parallel group on `model`, the scheme the plan
/// runs first. On the plan's cluster that is the cheapest, or zen::Error (Internal) is thrown;
/// on another cluster the plan's scheme may be slower than the cheapest there, which its
/// reason says.
plan::SparsePlan sparseDecisionsOf(const zenrt::Plan &plan, const cost::CostModel &model,
                                   PricedOn pricedOn = PricedOn::PlanCluster);

/// The `--json` summary's `sparse`: per tensor its name, shape, scheme, statistics,
/// predicted_us, `reason` and `runner_up` {scheme, predicted_us}; `baselines` (name -> µs)
/// and `chosen_us`.
nlohmann::ordered_json sparseSummaryJson(const plan::SparsePlan &plan);

/// The text summary's lines: one per tensor, then the baselines. Empty without tensors.
std::string sparseSummaryText(const plan::SparsePlan &plan);

/// Row-sparse gradients a plan synchronises dense, in its buckets, and why.
struct DenseSyncedTables {
  /// Each table with every scheme priced over the plan's data-parallel group: dense first
  /// (what the plan runs), then the others cheapest first.
  std::vector<plan::SparseDecision> tables;
  /// Why the plan does not synchronise them by a sparse scheme.
  std::string reason;
};

/// `requests` (the row-sparse gradients a plan leaves in its buckets) priced over the plan's
/// data-parallel group on `model`, dense first. The reason is that dense is the cheapest where
/// it is for every table, else `whyNotSparse` (what kept the plan from a sparse scheme).
/// Throws zen::Error as plan::planSparseTensors.
DenseSyncedTables denseSyncedTables(const std::vector<plan::SparseTensorRequest> &requests,
                                    const zenrt::Plan &plan, const cost::CostModel &model,
                                    const std::string &whyNotSparse);

/// The `--json` summary's `sparse_synchronised_dense`: `reason`, and per table its name,
/// shape, statistics, `dense_us`, `cheapest` {scheme, predicted_us} and its own `reason`.
nlohmann::ordered_json denseSyncedJson(const DenseSyncedTables &dense);

/// The text summary's lines for them. Empty without tables.
std::string denseSyncedText(const DenseSyncedTables &dense);

} // namespace zen::codegen

#endif // ZEN_CODEGEN_SPARSEPLAN_H

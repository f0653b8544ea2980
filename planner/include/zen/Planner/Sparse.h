//===- Sparse.h - choosing each row-sparse gradient's scheme ----*- C++ -*-===//
//
// Every row-sparse gradient (importer: ModelGraph::sparseGradients) gets the cheapest
// SparseScheme the cost model prices for it (cost::sparseSyncCost), from its statistics: the
// measured ones when given, else the documented Zipf model. The sparse baselines force one
// scheme on every such tensor: ddp-dense, horovod-agsparse, sparcml, omnireduce
// (zen/SparseScheme.h's baseline names). No MLIR.
//
//===----------------------------------------------------------------------===//
#ifndef ZEN_PLANNER_SPARSE_H
#define ZEN_PLANNER_SPARSE_H

#include "zen/CostModel/Sparse.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace zen::plan {

/// One row-sparse gradient to plan.
struct SparseTensorRequest {
  std::string name;
  cost::SparseTable table;
  /// Row lookups per rank per step (importer::SparseGradient::lookupsPerStep).
  int64_t lookupsPerStep = 0;
  /// Measured statistics (zenopt --sparsity); the Zipf model when absent.
  std::optional<cost::SparsityStatistics> measured;
  /// Every sample looks up the same rows (position ids): cost::sharedRowsStatistics, not
  /// the Zipf model, when nothing was measured.
  bool sharedRows = false;
};

struct SparseDecision {
  std::string name;
  cost::SparseTable table;
  cost::SparsityStatistics statistics;
  /// Every scheme's price, cheapest first: ranking.front() is the choice, ranking[1] the
  /// runner-up.
  std::vector<cost::SparseSyncCost> ranking;
  const cost::SparseSyncCost &chosen() const { return ranking.front(); }
  /// Why: the choice against the runner-up, e.g. "balanced 558.5 us, 1.35x faster than
  /// dense (755.8 us)".
  std::string reason() const;
};

struct SparsePlan {
  std::vector<SparseDecision> tensors;
  /// Baseline name -> the summed sync time of every sparse tensor under its scheme (µs).
  std::map<std::string, double> baselines;
  /// The summed sync time of the chosen schemes (µs).
  double chosenUs = 0;
  /// Baseline name -> the whole iteration with every sparse tensor under its scheme and the
  /// dense buckets as planned (µs); filled by whoever simulates the plan (codegen).
  std::map<std::string, double> baselineIterationUs;
};

/// Chooses each tensor's scheme over `group`. Throws zen::Error (BadInput) naming the tensor
/// when its shape or statistics are out of range (rows or row elements not positive, a
/// density outside (0, 1], gamma not starting at 1 or decreasing).
SparsePlan planSparseTensors(const std::vector<SparseTensorRequest> &requests,
                             const cost::CostModel &model, cost::Group group);

/// The sparse baseline names, in SparseScheme order.
std::vector<std::string> sparseBaselineNames();

} // namespace zen::plan

#endif // ZEN_PLANNER_SPARSE_H

//===- CostModelAnalysis.h - the cost model as a cached analysis -*- C++ -*-===//
//
// The cluster a module is planned for is its `zen.cluster` attribute (a preset
// name or a cluster file; a100x64 when absent), resized to `zen.nodes` nodes
// when that is present. The cost model built from it is an MLIR analysis of the
// module: loaded once, kept across passes while both attributes stay the same.
//
//===----------------------------------------------------------------------===//
#ifndef ZEN_ANALYSIS_COSTMODELANALYSIS_H
#define ZEN_ANALYSIS_COSTMODELANALYSIS_H

#include "zen/CostModel/CostModel.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/AnalysisManager.h"

#include <optional>
#include <string>

namespace zen {

class CostModelAnalysis {
public:
  explicit CostModelAnalysis(mlir::Operation *module);

  /// The cluster spelling the module names (its zen.cluster, or the default preset).
  static std::string clusterOf(mlir::ModuleOp module);

  /// The cost model, or null when the cluster could not be loaded (error() says why).
  const cost::CostModel *model() const { return model_ ? &*model_ : nullptr; }
  const std::string &error() const { return error_; }
  /// The module's zen.nodes, or 0 when absent (the cluster's own node count).
  static int64_t nodesOf(mlir::ModuleOp module);

  /// The cluster spelling and node override it was built for.
  const std::string &cluster() const { return cluster_; }
  int64_t nodes() const { return nodes_; }

  /// Stale only when the module now names another cluster or node count.
  bool isInvalidated(const mlir::AnalysisManager::PreservedAnalyses &) const;

private:
  mlir::ModuleOp module_;
  std::string cluster_;
  int64_t nodes_ = 0;
  std::optional<cost::CostModel> model_;
  std::string error_;
};

} // namespace zen

#endif // ZEN_ANALYSIS_COSTMODELANALYSIS_H

//===- CostModelAnalysis.cpp - the cost model as a cached analysis --------===//
#include "zen/Analysis/CostModelAnalysis.h"

#include "zen/Dialect/ZenDialect.h"

#include <exception>

namespace zen {

std::string CostModelAnalysis::clusterOf(mlir::ModuleOp module) {
  if (auto name = module->getAttrOfType<mlir::StringAttr>(
          ZenDialect::ClusterAttrHelper::getNameStr()))
    return name.str();
  return cost::defaultPresetName();
}

int64_t CostModelAnalysis::nodesOf(mlir::ModuleOp module) {
  if (auto nodes = module->getAttrOfType<mlir::IntegerAttr>(
          ZenDialect::NodesAttrHelper::getNameStr()))
    return nodes.getInt();
  return 0;
}

CostModelAnalysis::CostModelAnalysis(mlir::Operation *module)
    : module_(mlir::cast<mlir::ModuleOp>(module)), cluster_(clusterOf(module_)),
      nodes_(nodesOf(module_)) {
  // The cost model never throws past this point: a bad cluster becomes error().
  try {
    cost::Cluster cluster = cost::loadCluster(cluster_);
    model_.emplace(nodes_ > 0 ? cost::withNodes(std::move(cluster), nodes_) : std::move(cluster));
  } catch (const std::exception &error) {
    error_ = "cannot load cluster '" + cluster_ + "': " + error.what();
  }
}

bool CostModelAnalysis::isInvalidated(const mlir::AnalysisManager::PreservedAnalyses &) const {
  return clusterOf(module_) != cluster_ || nodesOf(module_) != nodes_;
}

} // namespace zen

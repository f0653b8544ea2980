//===- CostModelAnalysis.cpp - the cost model as a cached analysis --------===//
#include "zen/Passes/CostModelAnalysis.h"

#include "zen/Dialect/ZenDialect.h"

#include <exception>

namespace zen {

std::string CostModelAnalysis::clusterOf(mlir::ModuleOp module) {
  if (auto name = module->getAttrOfType<mlir::StringAttr>(
          ZenDialect::ClusterAttrHelper::getNameStr()))
    return name.str();
  return cost::defaultPresetName();
}

CostModelAnalysis::CostModelAnalysis(mlir::Operation *module)
    : module_(mlir::cast<mlir::ModuleOp>(module)), cluster_(clusterOf(module_)) {
  // The cost model never throws past this point: a bad cluster becomes error().
  try {
    model_.emplace(cost::loadCluster(cluster_));
  } catch (const std::exception &error) {
    error_ = "cannot load cluster '" + cluster_ + "': " + error.what();
  }
}

bool CostModelAnalysis::isInvalidated(const mlir::AnalysisManager::PreservedAnalyses &) const {
  return clusterOf(module_) != cluster_;
}

} // namespace zen

//===- Partitioning.cpp - shared by the partitioning passes ---------------===//
#include "Partitioning.h"

#include "zen/Passes/LargeModel.h"

using namespace mlir;

namespace zen::detail {

llvm::StringMap<SmallVector<ComputeOp, 2>> backwardOpsByNode(func::FuncOp func) {
  llvm::StringMap<SmallVector<ComputeOp, 2>> byNode;
  func.walk([&](ComputeOp op) {
    if (op.getPhase() == Phase::backward)
      if (std::optional<StringRef> node = op.getNode())
        byNode[*node].push_back(op);
  });
  return byNode;
}

ParallelAttr parallelOf(ModuleOp module) {
  if (auto parallel =
          module->getAttrOfType<ParallelAttr>(ZenDialect::ParallelAttrHelper::getNameStr()))
    return parallel;
  return parallelAttr(module.getContext(), cost::ParallelConfig{});
}

void recordParallel(ModuleOp module, const std::function<void(cost::ParallelConfig &)> &edit) {
  cost::ParallelConfig config = parallelConfigOf(parallelOf(module));
  edit(config);
  module->setAttr(ZenDialect::ParallelAttrHelper::getNameStr(),
                  parallelAttr(module.getContext(), config));
}

void setRole(Operation *collective, CollectiveRole role) {
  collective->setAttr(ZenDialect::RoleAttrHelper::getNameStr(),
                      CollectiveRoleAttr::get(collective->getContext(), role));
}

RankedTensorType shardedType(RankedTensorType type, int64_t dim, int64_t parts) {
  SmallVector<int64_t> shape(type.getShape());
  shape[dim] /= parts;
  return RankedTensorType::get(shape, type.getElementType());
}

bool hasGradientSync(ModuleOp module) {
  bool found = false;
  module.walk([&](CollectiveOpInterface collective) {
    if (collective.getBucketId())
      found = true;
  });
  return found;
}

}  // namespace zen::detail

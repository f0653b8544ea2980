//===- Partitioning.cpp - shared by the partitioning passes ---------------===//
#include "Partitioning.h"

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
  return ParallelAttr::get(module.getContext(), 1, 1, 1, 0, false, Recompute::none, 1, 1, 1, 1,
                           false);
}

void recordParallel(ModuleOp module, const std::function<void(ParallelFields &)> &edit) {
  ParallelAttr old = parallelOf(module);
  ParallelFields fields{old.getTp(),
                        old.getPp(),
                        old.getDp(),
                        old.getZero(),
                        old.getSequenceParallel(),
                        old.getRecompute(),
                        old.getMicroBatch(),
                        old.getMicroBatches(),
                        old.getVirtualStages(),
                        old.getEp(),
                        old.getExpertTensorParallel()};
  edit(fields);
  module->setAttr(ZenDialect::ParallelAttrHelper::getNameStr(),
                  ParallelAttr::get(module.getContext(), fields.tp, fields.pp, fields.dp,
                                    fields.zero, fields.sequenceParallel, fields.recompute,
                                    fields.microBatch, fields.microBatches, fields.virtualStages,
                                    fields.ep, fields.expertTensorParallel));
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

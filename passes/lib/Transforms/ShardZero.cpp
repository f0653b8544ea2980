//===- ShardZero.cpp - ZeRO sharding over the data-parallel group ---------===//
//
// Runs on synchronised gradients. Stage 1 records the stage only (the
// optimizer state is not in the IR). From stage 2 every gradient bucket's
// all-reduce becomes a reduce-scatter: the pack lays the bucket out rank by
// rank (each rank's slice holds ceil(n / dp) elements of every member), so
// the unpack that closes the bucket yields each member's 1-D shard, which the
// optimizer step updates. Stage 3 also stores each parameter as its shard
// along its first dimension that dp divides and all-gathers it (role zero,
// prefetched one block ahead) before its first forward and its first
// backward use. docs/design.md "Partitioning passes".
//
//===----------------------------------------------------------------------===//
#include "../Partitioning.h"
#include "zen/Analysis/IRPlan.h"
#include "zen/Passes/Passes.h"

#include "mlir/IR/Builders.h"

namespace zen {
#define GEN_PASS_DEF_SHARDZERO
#include "zen/Passes/Passes.h.inc"
}  // namespace zen

using namespace mlir;

namespace zen {
namespace {

Operation *soleUser(Value value) { return value.hasOneUse() ? *value.getUsers().begin() : nullptr; }

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// Rewrites one bucket, whose main collective is `collective`, to
/// pack -> reduce_scatter -> unpack of the members' shards.
LogicalResult scatterBucket(Operation *collective, int64_t dp) {
  auto bucket = cast<CollectiveOpInterface>(collective);
  int64_t id = *bucket.getBucketId();
  Value input = collective->getOperand(0);
  if (isa<CompressedType>(input.getType()))
    return collective->emitError("zen-shard-zero: bucket ")
           << id << " is compressed; ZeRO reduce-scatters dense buckets only";
  // The ops of the bucket after its pack: the collective(s), then the unpack.
  SmallVector<Operation *> old{collective};
  Value synced = collective->getResult(0);
  if (isa<ReduceScatterOp>(collective)) {
    auto gather = dyn_cast_or_null<AllGatherOp>(soleUser(synced));
    if (!gather)
      return collective->emitError("zen-shard-zero: bucket ")
             << id << " is reduce-scattered already";
    old.push_back(gather);
    synced = gather.getResult();
  }
  auto pack = input.getDefiningOp<PackOp>();
  SmallVector<Value> members, syncedMembers;
  if (pack) {
    auto unpack = dyn_cast_or_null<UnpackOp>(soleUser(synced));
    if (!unpack)
      return collective->emitError("zen-shard-zero: bucket ") << id << " has no zen.unpack";
    old.push_back(unpack);
    llvm::append_range(members, pack.getInputs());
    llvm::append_range(syncedMembers, unpack.getOutputs());
  } else {
    members.push_back(input);
    syncedMembers.push_back(synced);
  }

  OpBuilder builder(collective);
  Location loc = collective->getLoc();
  MLIRContext *context = collective->getContext();
  auto elementType = cast<RankedTensorType>(members.front().getType()).getElementType();
  SmallVector<Type> shardTypes;
  int64_t shardElements = 0;
  for (Value member : members) {
    int64_t elements = ceilDiv(cast<RankedTensorType>(member.getType()).getNumElements(), dp);
    shardTypes.push_back(RankedTensorType::get({elements}, elementType));
    shardElements += elements;
  }
  auto bucketAttr = IntegerAttr::get(IntegerType::get(context, 64), id);
  auto newPack = builder.create<PackOp>(
      loc, RankedTensorType::get({shardElements * dp}, elementType), members, bucketAttr);
  auto reduction = isa<AllReduceOp>(collective) ? cast<AllReduceOp>(collective).getReduction()
                                                : cast<ReduceScatterOp>(collective).getReduction();
  auto scatter = builder.create<ReduceScatterOp>(
      loc, RankedTensorType::get({shardElements}, elementType), reduction, newPack.getResult(),
      bucket.getProcessGroup(), collective->getAttrOfType<CollectiveAlgorithmAttr>("algorithm"),
      bucket.getChunkCount(), bucket.getScheduleOrNull(), bucketAttr,
      collective->hasAttr("after_backward"),
      // The all-gather that ends the decomposition gathers the updated parameters.
      SyncSchemeAttr::get(builder.getContext(), SyncScheme::reduce_scatter_all_gather));
  auto unpack = builder.create<UnpackOp>(loc, shardTypes, scatter.getResult(), bucketAttr);
  if (Attribute stage = collective->getAttr("stage"))
    for (Operation *op : {newPack.getOperation(), scatter.getOperation(), unpack.getOperation()})
      op->setAttr("stage", stage);

  // The optimizer steps update the rank's shard: its type and a dp-th of the work.
  for (auto [before, shard] : llvm::zip(syncedMembers, unpack.getOutputs())) {
    for (Operation *user : llvm::make_early_inc_range(before.getUsers())) {
      user->replaceUsesOfWith(before, shard);
      if (auto step = dyn_cast<ComputeOp>(user); step && plan::isOptimizer(step)) {
        for (OpResult result : step->getResults())
          result.setType(shard.getType());
        step.setFlopsAttr(builder.getI64IntegerAttr(ceilDiv(step.getFlopsAttr().getInt(), dp)));
        step.setBytesAttr(builder.getI64IntegerAttr(ceilDiv(step.getBytesAttr().getInt(), dp)));
      }
    }
  }
  for (Operation *op : llvm::reverse(old))
    op->erase();
  if (pack && pack->use_empty())
    pack->erase();
  return success();
}

/// ZeRO-3: the parameter's type becomes its shard, and all-gathers restore it
/// before its first forward and its first backward use.
LogicalResult shardParameter(GradientOp gradient, int64_t dp, ProcessGroupAttr group) {
  auto param = gradient.getParam().getDefiningOp<ParamOp>();
  RankedTensorType full = param.getType();
  int64_t dim = 0;
  while (dim < full.getRank() && full.getDimSize(dim) % dp != 0)
    ++dim;
  if (dim == full.getRank())
    return param.emitError("zen-shard-zero: no dimension of parameter '")
           << param.getName() << "' (" << full << ") divides by dp = " << dp;
  param.getResult().setType(detail::shardedType(full, dim, dp));

  OpBuilder builder(param.getContext());
  auto gatherBefore = [&](Operation *firstUser, function_ref<bool(Operation *)> isUse) {
    builder.setInsertionPoint(firstUser);
    auto gather = builder.create<AllGatherOp>(param.getLoc(), full, param.getResult(), false, group,
                                              CollectiveAlgorithmAttr(), 1, ScheduleAttr(),
                                              IntegerAttr(), false, SyncSchemeAttr());
    detail::setRole(gather, CollectiveRole::zero);
    if (IntegerAttr stage = param.getStageAttr())
      gather->setAttr("stage", stage);
    gather->setAttr(ZenDialect::PrefetchAttrHelper::getNameStr(), builder.getI64IntegerAttr(1));
    param.getResult().replaceUsesWithIf(gather.getResult(), [&](OpOperand &use) {
      return use.getOwner() != gather && isUse(use.getOwner());
    });
  };
  // Every use but the gradient marker and the optimizer step (which update
  // the shard); a backward compute op's is a backward use.
  auto isBackward = [](Operation *op) {
    auto compute = dyn_cast<ComputeOp>(op);
    return compute && compute.getPhase() == Phase::backward;
  };
  auto isForward = [&](Operation *op) {
    return !isa<GradientOp>(op) && !plan::isOptimizer(op) && !isBackward(op);
  };
  Operation *firstForward = nullptr, *firstBackward = nullptr;
  for (Operation *user : param->getUsers()) {
    Operation **first = isBackward(user)  ? &firstBackward
                        : isForward(user) ? &firstForward
                                          : nullptr;
    if (first && (!*first || user->isBeforeInBlock(*first)))
      *first = user;
  }
  if (firstForward)
    gatherBefore(firstForward, isForward);
  if (firstBackward)
    gatherBefore(firstBackward, isBackward);
  return success();
}

struct ShardZeroPass : impl::ShardZeroBase<ShardZeroPass> {
  using ShardZeroBase::ShardZeroBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    ParallelAttr recorded = detail::parallelOf(module);
    const int64_t stage = zero ? static_cast<int64_t>(zero) : recorded.getZero();
    if (stage < 0 || stage > 3) {
      module.emitError("zero stage must be 0, 1, 2 or 3, got ") << stage;
      return signalPassFailure();
    }
    SmallVector<Operation *> bucketCollectives;
    module.walk([&](CollectiveOpInterface collective) {
      // A bucket's main collective: what its pack (or gradient) feeds.
      if (collective.getBucketId() && collective->getNumOperands() &&
          !collective->getOperand(0).getDefiningOp<ReduceScatterOp>())
        bucketCollectives.push_back(collective);
    });
    if (bucketCollectives.empty()) {
      module.emitError("zen-shard-zero needs the gradient synchronisation: run zen-autotune or "
                       "zen-insert-grad-sync first");
      return signalPassFailure();
    }
    ProcessGroupAttr group =
        cast<CollectiveOpInterface>(bucketCollectives.front()).getProcessGroup();
    const int64_t ranks = dp                     ? static_cast<int64_t>(dp)
                          : recorded.getDp() > 1 ? recorded.getDp()
                                                 : group.getSize();
    if (ranks != group.getSize()) {
      module.emitError("dp = ") << ranks << " differs from the " << group.getSize()
                                << " ranks the gradients are synchronised over";
      return signalPassFailure();
    }
    if (stage >= 2)
      for (Operation *collective : bucketCollectives)
        if (failed(scatterBucket(collective, ranks)))
          return signalPassFailure();
    if (stage == 3) {
      SmallVector<GradientOp> gradients;
      module.walk([&](GradientOp gradient) { gradients.push_back(gradient); });
      for (GradientOp gradient : gradients)
        if (failed(shardParameter(gradient, ranks, group)))
          return signalPassFailure();
    }
    detail::recordParallel(module, [&](cost::ParallelConfig &config) {
      config.zero = stage;
      config.dp = ranks;
    });
  }
};

}  // namespace
}  // namespace zen

//===- BucketRewrites.cpp - local edits of gradient synchronisation -------===//
#include "zen/Passes/BucketRewrites.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallPtrSet.h"

#include <algorithm>
#include <tuple>

using namespace mlir;

namespace zen::plan {
namespace {

bool sameCompression(const cost::CompressionSpec &a, const cost::CompressionSpec &b) {
  return a.method == b.method && a.ratio == b.ratio && a.rank == b.rank && a.device == b.device &&
         a.errorFeedback == b.errorFeedback;
}

/// The ops of `bucket` that run a collective, main one first.
SmallVector<CollectiveOpInterface> collectivesOf(const BucketOps &bucket) {
  SmallVector<CollectiveOpInterface> collectives;
  for (Operation *op : bucket.ops)
    if (auto collective = dyn_cast<CollectiveOpInterface>(op))
      collectives.push_back(collective);
  return collectives;
}

cost::Group groupOf(const BucketOps &bucket) {
  ProcessGroupAttr group = collectivesOf(bucket).front().getProcessGroup();
  return {group.getSize(), group.getNodes()};
}

/// Where an after-backward bucket ending before gradient `end` goes: before
/// the first after-backward chain of a later bucket, else before the first
/// optimizer step (backward is over by then).
Operation *afterBackwardInsertionPoint(TrainingFunction &training, int end) {
  DenseMap<Value, int> laterGradients;
  for (size_t g = end; g < training.gradients.size(); ++g)
    laterGradients[training.gradients[g].getResult()] = static_cast<int>(g);
  for (Operation &op : training.func.getBody().front()) {
    if (isOptimizer(&op))
      return &op;
    bool headsLaterChain = isa<PackOp, CompressOp, CollectiveOpInterface>(op) &&
                           op.getNumOperands() && laterGradients.count(op.getOperand(0));
    if (headsLaterChain) {
      // The chain is after backward when its collective says so.
      Operation *user = &op;
      while (user && !isa<CollectiveOpInterface>(user))
        user = user->getNumResults() && user->getResult(0).hasOneUse()
                   ? *user->getResult(0).getUsers().begin()
                   : nullptr;
      if (auto chainCollective = dyn_cast_or_null<CollectiveOpInterface>(user))
        if (chainCollective->hasAttr("after_backward"))
          return &op;
    }
  }
  return training.func.getBody().front().getTerminator();
}

} // namespace

BucketLayout layoutOf(const PlanChoice &choice, const BucketChoice &bucket) {
  return {choice.fused || bucket.decomposed() || bucket.size() > 1, choice.afterBackward};
}

void ensureOptimizerSteps(TrainingFunction &training) {
  Block &body = training.func.getBody().front();
  llvm::SmallPtrSet<Operation *, 16> optimized;
  for (Operation &op : body)
    if (isOptimizer(&op))
      for (Value input : op.getOperands())
        if (auto param = input.getDefiningOp<ParamOp>())
          optimized.insert(param);
  OpBuilder builder(training.func.getContext());
  builder.setInsertionPoint(body.getTerminator());
  // Shared by every step: uniqued once, not once per parameter.
  StringAttr sgd = builder.getStringAttr("SGD");
  PhaseAttr optimizerPhase = PhaseAttr::get(builder.getContext(), Phase::optimizer);
  I64AttrCache workAttrs(builder.getContext());
  for (GradientOp gradient : training.gradients) {
    auto param = gradient.getParam().getDefiningOp<ParamOp>();
    if (optimized.contains(param))
      continue;
    auto type = cast<RankedTensorType>(gradient.getType());
    int64_t elements = type.getNumElements();
    // The step runs on the stage that holds the parameter.
    builder.create<ComputeOp>(
        gradient.getLoc(), TypeRange{type}, sgd, optimizerPhase,
        ValueRange{gradient.getParam(), gradient.getResult()},
        workAttrs.get(optimizerFlops(elements)),
        workAttrs.get(optimizerBytes(elements, elementBytes(type))),
        builder.getStringAttr("sgd." + param.getName()), param.getStageAttr());
  }
}

LogicalResult emitBucket(TrainingFunction &training, const BucketChoice &bucket,
                         BucketLayout layout, cost::Group group) {
  MLIRContext *context = training.func.getContext();
  OpBuilder builder(context);
  if (layout.afterBackward) {
    builder.setInsertionPoint(afterBackwardInsertionPoint(training, bucket.end));
  } else {
    Operation *after = training.gradients[bucket.begin];
    for (int g = bucket.begin; g < bucket.end; ++g)
      if (after->isBeforeInBlock(training.gradients[g]))
        after = training.gradients[g];
    builder.setInsertionPointAfter(after);
  }
  Location loc = training.gradients[bucket.end - 1].getLoc();

  SmallVector<Value> members;
  SmallVector<Type> memberTypes;
  int64_t elements = 0;
  Type elementType =
      cast<RankedTensorType>(training.gradients[bucket.begin].getType()).getElementType();
  for (int g = bucket.begin; g < bucket.end; ++g) {
    auto type = cast<RankedTensorType>(training.gradients[g].getType());
    if (type.getElementType() != elementType)
      return training.gradients[g].emitError("cannot bucket gradients of element types ")
             << elementType << " and " << type.getElementType();
    members.push_back(training.gradients[g].getResult());
    memberTypes.push_back(type);
    elements += type.getNumElements();
  }
  if (!layout.packed && bucket.size() != 1)
    return training.func.emitError("an unpacked bucket holds exactly one gradient");

  auto groupAttr = ProcessGroupAttr::get(context, group.ranks, group.nodes);
  Value value = members.front();
  if (layout.packed)
    value = builder
                .create<PackOp>(loc, RankedTensorType::get({elements}, elementType), members,
                                IntegerAttr())
                .getResult();
  auto dense = cast<RankedTensorType>(value.getType());
  const bool compressed = bucket.compression.method != cost::CompressionMethod::None;
  Device device = fromVocabulary(bucket.compression.device);
  if (compressed) {
    auto method = CompressionAttr::get(context, fromVocabulary(bucket.compression.method),
                                       bucket.compression.ratio, bucket.compression.rank);
    value = builder
                .create<CompressOp>(loc, CompressedType::get(context, dense, method), value,
                                    device, bucket.compression.errorFeedback, ScheduleAttr(),
                                    IntegerAttr())
                .getResult();
  }
  // Issue order is numbered once all buckets stand (applyPlan).
  auto schedule = ScheduleAttr::get(context, bucket.stream, bucket.priority, 0);
  auto sync = SyncSchemeAttr::get(context, fromVocabulary(bucket.scheme));
  Operation *collective = nullptr;
  switch (bucket.scheme) {
  case vocab::SyncScheme::AllGather:
    collective = builder.create<AllGatherOp>(loc, value.getType(), value, false, groupAttr,
                                             CollectiveAlgorithmAttr(), bucket.chunks, schedule,
                                             IntegerAttr(), layout.afterBackward, sync);
    break;
  case vocab::SyncScheme::ReduceScatterAllGather: {
    int64_t shard = (elements + group.ranks - 1) / group.ranks;
    auto scatter = builder.create<ReduceScatterOp>(
        loc, RankedTensorType::get({shard}, elementType), ReductionKind::avg, value, groupAttr,
        CollectiveAlgorithmAttr(), bucket.chunks, schedule, IntegerAttr(), layout.afterBackward,
        sync);
    collective = builder.create<AllGatherOp>(
        loc, RankedTensorType::get({shard * group.ranks}, elementType), scatter.getResult(),
        true, groupAttr, CollectiveAlgorithmAttr(), 1,
        ScheduleAttr::get(context, bucket.gatherStream, bucket.gatherPriority, 0), IntegerAttr(),
        false, SyncSchemeAttr());
    break;
  }
  case vocab::SyncScheme::AllReduce:
    collective = builder.create<AllReduceOp>(loc, value.getType(), ReductionKind::avg, value,
                                             groupAttr, CollectiveAlgorithmAttr(), bucket.chunks,
                                             schedule, IntegerAttr(), layout.afterBackward, sync);
    break;
  }
  value = collective->getResult(0);
  if (compressed)
    value = builder.create<DecompressOp>(loc, dense, value, device, ScheduleAttr(), IntegerAttr())
                .getResult();
  SmallVector<Value> synced;
  if (layout.packed)
    llvm::append_range(synced, builder.create<UnpackOp>(loc, memberTypes, value, IntegerAttr()).getOutputs());
  else
    synced.push_back(value);
  for (size_t k = 0; k < synced.size(); ++k)
    members[k].replaceUsesWithIf(synced[k],
                                 [](OpOperand &use) { return isOptimizer(use.getOwner()); });
  return success();
}

LogicalResult eraseBucket(TrainingFunction &training, BucketOps &bucket) {
  for (int g = bucket.settings.begin; g < bucket.settings.end; ++g)
    bucket.synced[g - bucket.settings.begin].replaceAllUsesWith(training.gradients[g].getResult());
  for (Operation *op : llvm::reverse(bucket.ops)) {
    if (!op->use_empty())
      return op->emitError("synchronised gradient is used outside the optimizer step");
    op->erase();
  }
  bucket.ops.clear();
  bucket.synced.clear();
  return success();
}

LogicalResult fuseBuckets(TrainingFunction &training, MutableArrayRef<BucketOps> buckets,
                          const BucketChoice &fused, BucketLayout layout, cost::Group group) {
  for (size_t k = 1; k < buckets.size(); ++k)
    if (buckets[k].settings.begin != buckets[k - 1].settings.end)
      return training.func.emitError("only adjacent buckets can be fused");
  if (buckets.empty() || fused.begin != buckets.front().settings.begin ||
      fused.end != buckets.back().settings.end)
    return training.func.emitError("a fused bucket must cover exactly the buckets it replaces");
  for (BucketOps &bucket : buckets)
    if (failed(eraseBucket(training, bucket)))
      return failure();
  return emitBucket(training, fused, layout, group);
}

LogicalResult splitBucket(TrainingFunction &training, BucketOps &bucket, int at,
                          cost::Group group) {
  if (at <= bucket.settings.begin || at >= bucket.settings.end)
    return training.func.emitError("split point ")
           << at << " is not inside bucket [" << bucket.settings.begin << ", "
           << bucket.settings.end << ")";
  BucketChoice first = bucket.settings, second = bucket.settings;
  first.end = at;
  second.begin = at;
  BucketLayout layout{bucket.packed, bucket.afterBackward};
  auto layoutFor = [&](const BucketChoice &half) {
    return BucketLayout{layout.packed || half.size() > 1, layout.afterBackward};
  };
  if (failed(eraseBucket(training, bucket)) ||
      failed(emitBucket(training, first, layoutFor(first), group)))
    return failure();
  return emitBucket(training, second, layoutFor(second), group);
}

LogicalResult rewriteBucket(TrainingFunction &training, BucketOps &bucket,
                            const BucketChoice &settings, BucketLayout layout, cost::Group group) {
  const BucketChoice &current = bucket.settings;
  cost::Group currentGroup = groupOf(bucket);
  bool structural = !sameCompression(current.compression, settings.compression) ||
                    current.scheme != settings.scheme || bucket.packed != layout.packed ||
                    bucket.afterBackward != layout.afterBackward ||
                    currentGroup.ranks != group.ranks || currentGroup.nodes != group.nodes;
  if (structural)
    return failed(eraseBucket(training, bucket)) ? failure()
                                                 : emitBucket(training, settings, layout, group);
  // Same chain: retune its collectives in place.
  MLIRContext *context = training.func.getContext();
  SmallVector<CollectiveOpInterface> collectives = collectivesOf(bucket);
  collectives.front().setChunkCount(settings.chunks);
  collectives.front().setSchedule(ScheduleAttr::get(context, settings.stream, settings.priority, 0));
  if (settings.decomposed())
    collectives.back().setSchedule(
        ScheduleAttr::get(context, settings.gatherStream, settings.gatherPriority, 0));
  bucket.settings = settings;
  return success();
}

namespace {

/// Numbers buckets in ready order and every collective's global issue
/// position: ranked by priority, ties by bucket, a bucket's main collective
/// before its decoupled all-gather.
LogicalResult numberBuckets(TrainingFunction &training) {
  cost::Group group;
  FailureOr<std::vector<BucketOps>> buckets = readBuckets(training, group);
  if (failed(buckets))
    return failure();
  struct Issue {
    int64_t priority;
    size_t bucket;
    bool gather;
    CollectiveOpInterface op;
  };
  std::vector<Issue> issues;
  MLIRContext *context = training.func.getContext();
  for (size_t b = 0; b < buckets->size(); ++b) {
    BucketOps &bucket = (*buckets)[b];
    auto id = IntegerAttr::get(IntegerType::get(context, 64), static_cast<int64_t>(b));
    // Under pipeline parallelism buckets are numbered per stage; the stage
    // (the members' parameters') tells them apart.
    IntegerAttr stage = training.gradients[bucket.settings.begin].getStageAttr();
    for (Operation *op : bucket.ops) {
      op->setAttr("bucket", id);
      if (stage)
        op->setAttr("stage", stage);
    }
    SmallVector<CollectiveOpInterface> collectives = collectivesOf(bucket);
    issues.push_back({bucket.settings.priority, b, false, collectives.front()});
    if (bucket.settings.decomposed())
      issues.push_back({bucket.settings.gatherPriority, b, true, collectives.back()});
  }
  std::stable_sort(issues.begin(), issues.end(), [](const Issue &a, const Issue &b) {
    return std::tie(a.priority, a.bucket, a.gather) < std::tie(b.priority, b.bucket, b.gather);
  });
  for (size_t i = 0; i < issues.size(); ++i) {
    ScheduleAttr schedule = issues[i].op.getScheduleOrNull();
    issues[i].op.setSchedule(ScheduleAttr::get(context, schedule.getStream(),
                                               schedule.getPriority(), static_cast<int64_t>(i)));
  }
  return success();
}

} // namespace

LogicalResult applyPlan(TrainingFunction &training, const PlanChoice &choice, cost::Group group) {
  // zenopt verifies the imported module on another thread while the search reads it.
  if (!training.func->getContext()->getLoadedDialect<ZenDialect>()->awaitVerification())
    return failure();  // the verifier has reported why
  if (std::string problem = validateChoice(training.problem, choice); !problem.empty())
    return training.func.emitError("invalid plan: ") << problem;
  ensureOptimizerSteps(training);
  cost::Group existingGroup;
  FailureOr<std::vector<BucketOps>> buckets = readBuckets(training, existingGroup);
  if (failed(buckets))
    return failure();
  const bool synchronised = !buckets->empty();
  for (const BucketChoice &target : choice.buckets) {
    BucketLayout layout = layoutOf(choice, target);
    if (!synchronised) {
      if (failed(emitBucket(training, target, layout, group)))
        return failure();
      continue;
    }
    // Split the buckets that straddle the target's boundaries, then fuse or
    // rewrite the ones inside it; re-read after every structural edit.
    while (true) {
      buckets = readBuckets(training, existingGroup);
      if (failed(buckets))
        return failure();
      auto first = std::find_if(buckets->begin(), buckets->end(), [&](const BucketOps &bucket) {
        return bucket.settings.end > target.begin;
      });
      if (first->settings.begin < target.begin) {
        if (failed(splitBucket(training, *first, target.begin, groupOf(*first))))
          return failure();
        continue;
      }
      auto last = first;
      while (last->settings.end < target.end)
        ++last;
      if (last->settings.end > target.end) {
        if (failed(splitBucket(training, *last, target.end, groupOf(*last))))
          return failure();
        continue;
      }
      LogicalResult edited =
          first == last
              ? rewriteBucket(training, *first, target, layout, group)
              : fuseBuckets(training, MutableArrayRef<BucketOps>(&*first, last - first + 1),
                            target, layout, group);
      if (failed(edited))
        return failure();
      break;
    }
  }
  return numberBuckets(training);
}

} // namespace zen::plan

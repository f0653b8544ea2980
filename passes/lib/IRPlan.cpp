//===- IRPlan.cpp - problem extraction, plan reading and materialisation ---===//
#include "zen/Passes/IRPlan.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallPtrSet.h"

#include <algorithm>
#include <exception>

using namespace mlir;

namespace zen::plan {

namespace {

cost::DType dtypeOf(Type type) {
  Type element = type;
  if (auto shaped = dyn_cast<ShapedType>(type))
    element = shaped.getElementType();
  if (element.isF16())
    return cost::DType::F16;
  if (element.isBF16())
    return cost::DType::BF16;
  if (element.isInteger(8))
    return cost::DType::I8;
  return cost::DType::F32;
}

int64_t elementBytes(RankedTensorType type) {
  return std::max<int64_t>(1, (type.getElementTypeBitWidth() + 7) / 8);
}

/// The work of one compute op at the precision it runs at.
struct OpWork {
  cost::DType dtype = cost::DType::F32;
  int64_t flops = 0;
  int64_t bytes = 0;
};

/// Ops run at their own element type, except that fp32 forward and backward
/// ops run at the mixed-precision `computeDtype`; at fp16/bf16 they move half
/// the bytes (tf32 keeps fp32 storage). The optimizer step stays fp32.
OpWork workOf(ComputeOp op, cost::DType computeDtype) {
  Type typed = op->getNumResults() ? op->getResult(0).getType()
               : op.getInputs().empty() ? Type() : op.getInputs().front().getType();
  OpWork work{typed ? dtypeOf(typed) : cost::DType::F32, op.getFlopsAttr().getInt(),
              op.getBytesAttr().getInt()};
  if (work.dtype == cost::DType::F32 && op.getPhase() != Phase::optimizer) {
    work.dtype = computeDtype;
    if (computeDtype == cost::DType::F16 || computeDtype == cost::DType::BF16)
      work.bytes /= 2;
  }
  return work;
}

std::string segmentName(ComputeOp op) {
  if (auto node = op.getNode())
    return node->str();
  return op.getOpType().str();
}

bool isOptimizer(Operation *op) {
  auto compute = dyn_cast<ComputeOp>(op);
  return compute && compute.getPhase() == Phase::optimizer;
}

cost::CompressionMethod toCost(CompressionMethod method) {
  switch (method) {
  case CompressionMethod::none: return cost::CompressionMethod::None;
  case CompressionMethod::fp16: return cost::CompressionMethod::FP16;
  case CompressionMethod::bf16: return cost::CompressionMethod::BF16;
  case CompressionMethod::int8: return cost::CompressionMethod::Int8;
  case CompressionMethod::topk: return cost::CompressionMethod::TopK;
  case CompressionMethod::randomk: return cost::CompressionMethod::RandomK;
  case CompressionMethod::sign: return cost::CompressionMethod::Sign;
  case CompressionMethod::powersgd: return cost::CompressionMethod::PowerSGD;
  }
  return cost::CompressionMethod::None;
}

CompressionMethod toDialect(cost::CompressionMethod method) {
  switch (method) {
  case cost::CompressionMethod::None: return CompressionMethod::none;
  case cost::CompressionMethod::FP16: return CompressionMethod::fp16;
  case cost::CompressionMethod::BF16: return CompressionMethod::bf16;
  case cost::CompressionMethod::Int8: return CompressionMethod::int8;
  case cost::CompressionMethod::TopK: return CompressionMethod::topk;
  case cost::CompressionMethod::RandomK: return CompressionMethod::randomk;
  case cost::CompressionMethod::Sign: return CompressionMethod::sign;
  case cost::CompressionMethod::PowerSGD: return CompressionMethod::powersgd;
  }
  return CompressionMethod::none;
}

/// One materialised bucket: its settings, its ops (in IR order) and the
/// synchronised values that replace each member gradient.
struct Chain {
  BucketChoice bucket;
  SmallVector<Operation *> ops;
  SmallVector<Value> synced;
  bool packed = false;
  bool afterBackward = false;
};

/// The only user of `value`, or null.
Operation *soleUser(Value value) {
  return value.hasOneUse() ? *value.getUsers().begin() : nullptr;
}

template <typename CollectiveOp>
void readSchedule(CollectiveOp op, int &stream, int64_t &priority) {
  if (ScheduleAttr schedule = op.getScheduleAttr()) {
    stream = static_cast<int>(schedule.getStream());
    priority = schedule.getPriority();
  }
}

FailureOr<Chain> readChain(Operation *head, const DenseMap<Value, int> &gradientIndex,
                           cost::Group &group) {
  Chain chain;
  SmallVector<int> members;
  Value value;
  auto memberOf = [&](Value operand) -> LogicalResult {
    auto found = gradientIndex.find(operand);
    if (found == gradientIndex.end())
      return head->emitError("bucket input is not a zen.gradient result");
    members.push_back(found->second);
    return success();
  };
  Operation *op = head;
  if (auto pack = dyn_cast<PackOp>(head)) {
    for (Value input : pack.getInputs())
      if (failed(memberOf(input)))
        return failure();
    chain.packed = true;
    chain.ops.push_back(pack);
    value = pack.getBucket();
    op = soleUser(value);
  } else {
    if (failed(memberOf(head->getOperand(0))))
      return failure();
  }
  auto expect = [&](StringRef what) -> LogicalResult {
    return (op ? op : head)->emitError("malformed gradient synchronisation: expected ") << what;
  };
  if (auto compress = dyn_cast_or_null<CompressOp>(op)) {
    CompressionAttr method = compress.getResult().getType().getMethod();
    chain.bucket.compression.method = toCost(method.getMethod());
    chain.bucket.compression.ratio = method.getRatioValue();
    chain.bucket.compression.rank = method.getRank();
    chain.bucket.compression.device =
        compress.getDevice() == Device::cpu ? cost::Device::CPU : cost::Device::GPU;
    chain.bucket.compression.errorFeedback = compress.getErrorFeedback();
    chain.ops.push_back(compress);
    value = compress.getResult();
    op = soleUser(value);
  }
  auto noteGroup = [&](ProcessGroupAttr attr) {
    group.ranks = attr.getSize();
    group.nodes = attr.getNodes();
  };
  if (auto allReduce = dyn_cast_or_null<AllReduceOp>(op)) {
    chain.bucket.chunks = allReduce.getChunks();
    readSchedule(allReduce, chain.bucket.stream, chain.bucket.priority);
    chain.afterBackward = allReduce->hasAttr(kAfterBackwardAttr);
    noteGroup(allReduce.getGroup());
    value = allReduce.getResult();
  } else if (auto scatter = dyn_cast_or_null<ReduceScatterOp>(op)) {
    chain.bucket.decomposed = true;
    chain.bucket.chunks = scatter.getChunks();
    readSchedule(scatter, chain.bucket.stream, chain.bucket.priority);
    chain.afterBackward = scatter->hasAttr(kAfterBackwardAttr);
    noteGroup(scatter.getGroup());
    chain.ops.push_back(scatter);
    op = soleUser(scatter.getResult());
    auto gather = dyn_cast_or_null<AllGatherOp>(op);
    if (!gather)
      return expect("a zen.all_gather after the zen.reduce_scatter");
    readSchedule(gather, chain.bucket.gatherStream, chain.bucket.gatherPriority);
    value = gather.getResult();
  } else if (auto gather = dyn_cast_or_null<AllGatherOp>(op)) {
    if (chain.bucket.compression.method == cost::CompressionMethod::None)
      return expect("a compressed payload before a zen.all_gather");
    chain.bucket.chunks = gather.getChunks();
    readSchedule(gather, chain.bucket.stream, chain.bucket.priority);
    chain.afterBackward = gather->hasAttr(kAfterBackwardAttr);
    noteGroup(gather.getGroup());
    value = gather.getResult();
  } else {
    return expect("a collective");
  }
  chain.ops.push_back(op);
  if (chain.bucket.compression.method != cost::CompressionMethod::None) {
    op = soleUser(value);
    auto decompress = dyn_cast_or_null<DecompressOp>(op);
    if (!decompress)
      return expect("a zen.decompress after the compressed collective");
    chain.ops.push_back(decompress);
    value = decompress.getResult();
  }
  if (chain.packed) {
    op = soleUser(value);
    auto unpack = dyn_cast_or_null<UnpackOp>(op);
    if (!unpack)
      return expect("a zen.unpack closing the bucket");
    chain.ops.push_back(unpack);
    llvm::append_range(chain.synced, unpack.getOutputs());
  } else {
    chain.synced.push_back(value);
  }
  for (size_t k = 0; k < members.size(); ++k)
    if (members[k] != members.front() + static_cast<int>(k))
      return head->emitError("bucket gradients must be consecutive in ready order");
  chain.bucket.begin = members.front();
  chain.bucket.end = members.front() + static_cast<int>(members.size());
  return chain;
}

/// Every bucket chain in the function, ordered by first gradient.
FailureOr<std::vector<Chain>> readChains(const TrainingFunction &training, cost::Group &group) {
  DenseMap<Value, int> gradientIndex;
  for (size_t g = 0; g < training.gradients.size(); ++g) {
    GradientOp gradient = training.gradients[g];
    gradientIndex[gradient.getResult()] = static_cast<int>(g);
  }
  std::vector<Chain> chains;
  llvm::SmallPtrSet<Operation *, 16> heads;
  for (GradientOp gradient : training.gradients)
    for (Operation *user : gradient.getResult().getUsers()) {
      if (isOptimizer(user) || !heads.insert(user).second)
        continue;
      if (!isa<PackOp, CompressOp, AllReduceOp, ReduceScatterOp, AllGatherOp>(user))
        return user->emitError("gradient of '")
               << training.problem.gradients[gradientIndex[gradient.getResult()]].name
               << "' is used by an op the planner does not know";
      FailureOr<Chain> chain = readChain(user, gradientIndex, group);
      if (failed(chain))
        return failure();
      chains.push_back(std::move(*chain));
    }
  std::sort(chains.begin(), chains.end(),
            [](const Chain &a, const Chain &b) { return a.bucket.begin < b.bucket.begin; });
  int next = 0;
  for (const Chain &chain : chains) {
    if (chain.bucket.begin != next)
      return chain.ops.front()->emitError("gradient '")
             << training.problem.gradients[next].name
             << "' is not synchronised while others are (or is synchronised twice)";
    next = chain.bucket.end;
  }
  if (!chains.empty() && next != static_cast<int>(training.gradients.size()))
    return training.gradients[next]->emitError("gradient is not synchronised while others are");
  return chains;
}

} // namespace

FailureOr<TrainingFunction> extractTraining(ModuleOp module, const cost::CostModel &model) {
  SmallVector<func::FuncOp> candidates;
  module.walk([&](func::FuncOp func) {
    if (!func.getBody().empty() && !func.getBody().getOps<GradientOp>().empty())
      candidates.push_back(func);
  });
  if (candidates.size() != 1)
    return module.emitError("expected exactly one function with zen.gradient ops, found ")
           << candidates.size();

  TrainingFunction training;
  training.func = candidates.front();
  Problem &problem = training.problem;
  if (Attribute attr = module->getAttr(kComputeDtypeAttr)) {
    auto name = dyn_cast<StringAttr>(attr);
    std::optional<cost::DType> dtype = name ? parseComputeDtype(name.str()) : std::nullopt;
    if (!dtype)
      return module.emitError(kComputeDtypeAttr)
             << " must be \"fp32\", \"tf32\", \"bf16\" or \"fp16\", got " << attr;
    problem.computeDtype = *dtype;
  }
  auto addCost = [](ComputeSegment &segment, const OpWork &work, double us) {
    segment.durationUs += us;
    segment.flops += work.flops;
    segment.bytes += work.bytes;
  };
  DenseMap<Value, int> firstForwardUse;
  DenseMap<Value, double> optimizerUs;
  std::optional<ComputeSegment> forward, backward;
  std::vector<std::pair<GradientOp, int>> found;

  for (Operation &op : training.func.getBody().front()) {
    if (auto gradient = dyn_cast<GradientOp>(op)) {
      if (backward)
        problem.backward.push_back(*std::exchange(backward, std::nullopt));
      found.emplace_back(gradient, static_cast<int>(problem.backward.size()) - 1);
      continue;
    }
    auto compute = dyn_cast<ComputeOp>(op);
    if (!compute)
      continue;
    const OpWork work = workOf(compute, problem.computeDtype);
    const double us = model.computeUs(static_cast<double>(work.flops),
                                      static_cast<double>(work.bytes), work.dtype);
    switch (compute.getPhase()) {
    case Phase::forward: {
      bool readsNewParam = llvm::any_of(compute.getInputs(), [&](Value input) {
        return input.getDefiningOp<ParamOp>() && !firstForwardUse.count(input);
      });
      if (readsNewParam && forward)
        problem.forward.push_back(*std::exchange(forward, std::nullopt));
      if (!forward)
        forward = ComputeSegment{segmentName(compute), 0};
      addCost(*forward, work, us);
      for (Value input : compute.getInputs())
        if (input.getDefiningOp<ParamOp>())
          firstForwardUse.try_emplace(input, static_cast<int>(problem.forward.size()));
      break;
    }
    case Phase::backward:
      if (!backward)
        backward = ComputeSegment{segmentName(compute), 0};
      addCost(*backward, work, us);
      break;
    case Phase::optimizer: {
      SmallVector<Value> params;
      for (Value input : compute.getInputs())
        if (input.getDefiningOp<ParamOp>())
          params.push_back(input);
      for (Value param : params)
        optimizerUs[param] += us / static_cast<double>(params.size());
      break;
    }
    }
  }
  if (forward)
    problem.forward.push_back(*forward);
  if (backward)
    problem.backward.push_back(*backward);

  std::stable_sort(found.begin(), found.end(), [](auto a, auto b) {
    return a.first.getReadyOrder() < b.first.getReadyOrder();
  });
  llvm::SmallPtrSet<Operation *, 16> seenParams;
  for (auto [gradient, readyAfter] : found) {
    auto param = gradient.getParam().getDefiningOp<ParamOp>();
    if (!seenParams.insert(param).second)
      return gradient.emitError("parameter '") << param.getName() << "' has two gradients";
    auto type = cast<RankedTensorType>(gradient.getType());
    GradientTensor tensor;
    tensor.name = param.getName().str();
    tensor.elements = type.getNumElements();
    tensor.bytes = tensor.elements * elementBytes(type);
    tensor.readyAfterSegment = readyAfter;
    tensor.forwardSegment = firstForwardUse.lookup(gradient.getParam());
    auto optimizer = optimizerUs.find(gradient.getParam());
    tensor.optimizerUs =
        optimizer != optimizerUs.end()
            ? optimizer->second
            : model.computeUs(static_cast<double>(optimizerFlops(tensor.elements)),
                              static_cast<double>(optimizerBytes(tensor.elements,
                                                                 elementBytes(type))),
                              dtypeOf(type));
    problem.gradients.push_back(tensor);
    training.gradients.push_back(gradient);
  }
  return training;
}

FailureOr<std::optional<PlanChoice>> readPlan(const TrainingFunction &training,
                                              cost::Group &group) {
  FailureOr<std::vector<Chain>> chains = readChains(training, group);
  if (failed(chains))
    return failure();
  if (chains->empty())
    return std::optional<PlanChoice>();
  PlanChoice choice;
  choice.strategy = "ir";
  choice.fused = false;
  for (Chain &chain : *chains) {
    choice.fused |= chain.packed;
    choice.afterBackward |= chain.afterBackward;
    choice.buckets.push_back(chain.bucket);
  }
  return std::optional<PlanChoice>(std::move(choice));
}

LogicalResult materializePlan(TrainingFunction &training, const PlanChoice &choice,
                              cost::Group group) {
  func::FuncOp func = training.func;
  if (std::string problem = validateChoice(training.problem, choice); !problem.empty())
    return func.emitError("invalid plan: ") << problem;

  // Strip the current synchronisation: optimizer steps read raw gradients again.
  cost::Group existingGroup;
  FailureOr<std::vector<Chain>> chains = readChains(training, existingGroup);
  if (failed(chains))
    return failure();
  for (Chain &chain : *chains) {
    for (int g = chain.bucket.begin; g < chain.bucket.end; ++g)
      chain.synced[g - chain.bucket.begin].replaceAllUsesWith(training.gradients[g].getResult());
    for (Operation *op : llvm::reverse(chain.ops)) {
      if (!op->use_empty())
        return op->emitError("synchronised gradient is used outside the optimizer step");
      op->erase();
    }
  }

  MLIRContext *context = func.getContext();
  OpBuilder builder(context);
  Block &body = func.getBody().front();

  // Optimizer steps (SGD per parameter) for gradients that have none yet.
  llvm::SmallPtrSet<Operation *, 16> optimized;
  for (Operation &op : body)
    if (isOptimizer(&op))
      for (Value input : op.getOperands())
        if (auto param = input.getDefiningOp<ParamOp>())
          optimized.insert(param);
  builder.setInsertionPoint(body.getTerminator());
  for (size_t g = 0; g < training.gradients.size(); ++g) {
    GradientOp gradient = training.gradients[g];
    auto param = gradient.getParam().getDefiningOp<ParamOp>();
    if (optimized.contains(param))
      continue;
    auto type = cast<RankedTensorType>(gradient.getType());
    int64_t elements = type.getNumElements();
    builder.create<ComputeOp>(
        gradient.getLoc(), TypeRange{type}, "SGD", Phase::optimizer,
        ValueRange{gradient.getParam(), gradient.getResult()},
        static_cast<uint64_t>(optimizerFlops(elements)),
        static_cast<uint64_t>(optimizerBytes(elements, elementBytes(type))),
        builder.getStringAttr("sgd." + param.getName()));
  }

  // Issue order: every collective ranked by priority (ties by bucket).
  struct Issue {
    int64_t priority;
    size_t bucket;
    bool gather;
  };
  std::vector<Issue> issues;
  for (size_t b = 0; b < choice.buckets.size(); ++b) {
    issues.push_back({choice.buckets[b].priority, b, false});
    if (choice.buckets[b].decomposed)
      issues.push_back({choice.buckets[b].gatherPriority, b, true});
  }
  std::stable_sort(issues.begin(), issues.end(), [](const Issue &a, const Issue &b) {
    return std::tie(a.priority, a.bucket, a.gather) < std::tie(b.priority, b.bucket, b.gather);
  });
  std::vector<int64_t> mainOrder(choice.buckets.size()), gatherOrder(choice.buckets.size());
  for (size_t i = 0; i < issues.size(); ++i)
    (issues[i].gather ? gatherOrder : mainOrder)[issues[i].bucket] = static_cast<int64_t>(i);

  Operation *lastBackward = nullptr;
  for (Operation &op : body)
    if (isa<GradientOp>(op) ||
        (isa<ComputeOp>(op) && cast<ComputeOp>(op).getPhase() == Phase::backward))
      lastBackward = &op;

  auto groupAttr = ProcessGroupAttr::get(context, group.ranks, group.nodes);
  Operation *afterBackwardPoint = lastBackward;
  for (size_t b = 0; b < choice.buckets.size(); ++b) {
    const BucketChoice &bucket = choice.buckets[b];
    IntegerAttr bucketId = builder.getI64IntegerAttr(static_cast<int64_t>(b));
    Operation *after = training.gradients[bucket.begin];
    for (int g = bucket.begin; g < bucket.end; ++g)
      if (after->isBeforeInBlock(training.gradients[g]))
        after = training.gradients[g];
    if (choice.afterBackward)
      after = afterBackwardPoint;
    builder.setInsertionPointAfter(after);
    Location loc = training.gradients[bucket.end - 1].getLoc();

    SmallVector<Value> members;
    SmallVector<Type> memberTypes;
    int64_t elements = 0;
    Type elementType = cast<RankedTensorType>(training.gradients[bucket.begin].getType())
                           .getElementType();
    for (int g = bucket.begin; g < bucket.end; ++g) {
      auto type = cast<RankedTensorType>(training.gradients[g].getType());
      if (type.getElementType() != elementType)
        return training.gradients[g].emitError("cannot bucket gradients of element types ")
               << elementType << " and " << type.getElementType();
      members.push_back(training.gradients[g].getResult());
      memberTypes.push_back(type);
      elements += type.getNumElements();
    }

    const bool packed = choice.fused || bucket.decomposed;
    if (!packed && bucket.size() != 1)
      return func.emitError("an unfused plan needs one gradient per bucket");
    Value value = members.front();
    if (packed) {
      auto pack = builder.create<PackOp>(loc, RankedTensorType::get({elements}, elementType),
                                         members);
      pack->setAttr(kBucketAttr, bucketId);
      value = pack.getBucket();
    }
    auto dense = cast<RankedTensorType>(value.getType());
    const bool compressed = bucket.compression.method != cost::CompressionMethod::None;
    Device device =
        bucket.compression.device == cost::Device::CPU ? Device::cpu : Device::gpu;
    if (compressed) {
      auto method = CompressionAttr::get(context, toDialect(bucket.compression.method),
                                         bucket.compression.ratio, bucket.compression.rank);
      auto compress = builder.create<CompressOp>(loc, CompressedType::get(context, dense, method),
                                                 value, device, bucket.compression.errorFeedback,
                                                 ScheduleAttr());
      compress->setAttr(kBucketAttr, bucketId);
      value = compress.getResult();
    }
    auto schedule = ScheduleAttr::get(context, bucket.stream, bucket.priority, mainOrder[b]);
    Operation *collective = nullptr;
    switch (mainCollective(bucket)) {
    case cost::CollectiveKind::AllGather:
      collective = builder.create<AllGatherOp>(loc, value.getType(), value, false, groupAttr,
                                               CollectiveAlgorithmAttr(), bucket.chunks, schedule);
      break;
    case cost::CollectiveKind::ReduceScatter: {
      int64_t shard = (elements + group.ranks - 1) / group.ranks;
      auto scatter = builder.create<ReduceScatterOp>(
          loc, RankedTensorType::get({shard}, elementType), ReductionKind::avg, value, groupAttr,
          CollectiveAlgorithmAttr(), bucket.chunks, schedule);
      scatter->setAttr(kBucketAttr, bucketId);
      if (choice.afterBackward)
        scatter->setAttr(kAfterBackwardAttr, builder.getUnitAttr());
      collective = builder.create<AllGatherOp>(
          loc, RankedTensorType::get({shard * group.ranks}, elementType), scatter.getResult(),
          true, groupAttr, CollectiveAlgorithmAttr(), 1,
          ScheduleAttr::get(context, bucket.gatherStream, bucket.gatherPriority, gatherOrder[b]));
      break;
    }
    default:
      collective = builder.create<AllReduceOp>(loc, value.getType(), ReductionKind::avg, value,
                                               groupAttr, CollectiveAlgorithmAttr(),
                                               bucket.chunks, schedule);
      break;
    }
    collective->setAttr(kBucketAttr, bucketId);
    if (choice.afterBackward && !bucket.decomposed)
      collective->setAttr(kAfterBackwardAttr, builder.getUnitAttr());
    value = collective->getResult(0);
    if (compressed) {
      auto decompress = builder.create<DecompressOp>(loc, dense, value, device, ScheduleAttr());
      decompress->setAttr(kBucketAttr, bucketId);
      value = decompress.getResult();
    }
    SmallVector<Value> synced;
    if (packed) {
      auto unpack = builder.create<UnpackOp>(loc, memberTypes, value);
      unpack->setAttr(kBucketAttr, bucketId);
      llvm::append_range(synced, unpack.getOutputs());
      afterBackwardPoint = unpack;
    } else {
      synced.push_back(value);
      afterBackwardPoint = value.getDefiningOp();
    }
    for (size_t k = 0; k < synced.size(); ++k)
      members[k].replaceUsesWithIf(synced[k], [](OpOperand &use) {
        return isOptimizer(use.getOwner());
      });
  }
  return success();
}

std::optional<cost::Cluster> loadClusterOption(Operation *op, const std::string &cluster) {
  try {
    return cost::loadCluster(cluster);
  } catch (const cost::ClusterError &error) {
    op->emitError("cannot load cluster '") << cluster << "': " << error.what();
  } catch (const std::exception &error) {
    op->emitError("cannot load cluster '") << cluster << "': " << error.what();
  }
  return std::nullopt;
}

std::optional<cost::Group> groupForOption(Operation *op, const cost::CostModel &model,
                                          int64_t dp) {
  int64_t world = model.cluster().worldSize();
  if (dp == 0)
    return model.worldGroup();
  if (dp < 1 || dp > world) {
    op->emitError("dp = ") << dp << " does not fit cluster '" << model.cluster().name << "' of "
                           << world << " GPUs";
    return std::nullopt;
  }
  return model.groupOf(dp);
}

} // namespace zen::plan

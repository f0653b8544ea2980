//===- IRPlan.cpp - problem extraction and plan reading (never rewrites) ===//
#include "zen/Analysis/IRPlan.h"
#include "zen/Analysis/Transformer.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringMap.h"

#include <algorithm>
#include <exception>

using namespace mlir;

namespace zen::plan {

int64_t elementBytes(RankedTensorType type) {
  return std::max<int64_t>(1, (type.getElementTypeBitWidth() + 7) / 8);
}

bool isOptimizer(Operation *op) {
  auto compute = dyn_cast<ComputeOp>(op);
  return compute && compute.getPhase() == Phase::optimizer;
}

namespace {

cost::DType dtypeOf(Type type) {
  // Ranked tensors first: a cast to the ShapedType interface runs MLIR's
  // (assertion-enabled) interface checks, several hundred instructions per op.
  Type element = type;
  if (auto tensor = dyn_cast<RankedTensorType>(type))
    element = tensor.getElementType();
  else if (auto shaped = dyn_cast<ShapedType>(type))
    element = shaped.getElementType();
  if (element.isF16())
    return cost::DType::F16;
  if (element.isBF16())
    return cost::DType::BF16;
  if (element.isInteger(8))
    return cost::DType::I8;
  return cost::DType::F32;
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
OpWork workAt(Type typed, int64_t flops, int64_t bytes, bool optimizer, cost::DType computeDtype) {
  OpWork work{typed ? dtypeOf(typed) : cost::DType::F32, flops, bytes};
  if (work.dtype == cost::DType::F32 && !optimizer) {
    work.dtype = computeDtype;
    if (computeDtype == cost::DType::F16 || computeDtype == cost::DType::BF16)
      work.bytes /= 2;
  }
  return work;
}

OpWork workOf(ComputeOp op, cost::DType computeDtype) {
  Type typed = op->getNumResults()      ? op->getResult(0).getType()
               : op.getInputs().empty() ? Type()
                                        : op.getInputs().front().getType();
  return workAt(typed, op.getFlopsAttr().getInt(), op.getBytesAttr().getInt(),
                op.getPhase() == Phase::optimizer, computeDtype);
}

/// An op of an MoE layer: forward work.
OpWork workOf(MoeOpInterface op, cost::DType computeDtype) {
  return workAt(op->getResult(0).getType(), op.getWorkFlops(), op.getWorkBytes(),
                /*optimizer=*/false, computeDtype);
}

/// `op` as an MoE op, or null. Asks the op's registration: the interface's own lookup
/// falls back to the dialect, and spells out the interface's name, for every op without it.
MoeOpInterface asMoe(Operation *op) {
  return op->getName().hasInterface<MoeOpInterface>() ? cast<MoeOpInterface>(op)
                                                      : MoeOpInterface();
}

std::string segmentName(ComputeOp op) {
  if (auto node = op.getNode())
    return node->str();
  return op.getOpType().str();
}

/// The parameter a forward input reads: directly, or through the all-gather
/// that restores a ZeRO-3 shard (zen-shard-zero); null for an activation.
Value paramRead(Value input) {
  if (auto gather = input.getDefiningOp<AllGatherOp>();
      gather && gather->hasAttr(ZenDialect::RoleAttrHelper::getNameStr()))
    input = gather.getInput();
  return input.getDefiningOp<ParamOp>() ? input : Value();
}

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

FailureOr<BucketOps> readBucket(Operation *head, const DenseMap<Value, int> &gradientIndex,
                           cost::Group &group) {
  BucketOps chain;
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
    value = pack.getResult();
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
    chain.settings.compression.method = toVocabulary(method.getMethod());
    chain.settings.compression.ratio = method.getRatioValue();
    chain.settings.compression.rank = method.getRank();
    chain.settings.compression.device = toVocabulary(compress.getDevice());
    chain.settings.compression.errorFeedback = compress.getErrorFeedback();
    chain.ops.push_back(compress);
    value = compress.getResult();
    op = soleUser(value);
  }
  auto noteGroup = [&](ProcessGroupAttr attr) {
    group.ranks = attr.getSize();
    group.nodes = attr.getNodes();
  };
  // The chain's structure is its scheme; a planned one says so in `sync`.
  if (auto planned = op ? op->getAttrOfType<SyncSchemeAttr>("sync") : SyncSchemeAttr())
    chain.settings.scheme = toVocabulary(planned.getValue());
  const vocab::SyncScheme plannedScheme = chain.settings.scheme;
  const bool saysScheme = op && op->hasAttr("sync");
  // What a chain's first collective says, whichever op it is.
  auto readFirst = [&](auto collective, vocab::SyncScheme scheme) {
    chain.settings.scheme = scheme;
    chain.settings.chunks = collective.getChunks();
    readSchedule(collective, chain.settings.stream, chain.settings.priority);
    chain.afterBackward = collective.getAfterBackward();
    noteGroup(collective.getGroup());
  };
  if (auto allReduce = dyn_cast_or_null<AllReduceOp>(op)) {
    readFirst(allReduce, vocab::SyncScheme::AllReduce);
    value = allReduce.getResult();
  } else if (auto scatter = dyn_cast_or_null<ReduceScatterOp>(op)) {
    readFirst(scatter, vocab::SyncScheme::ReduceScatterAllGather);
    op = soleUser(scatter.getResult());
    if (isa_and_nonnull<UnpackOp>(op) && chain.packed) {
      // ZeRO (zen-shard-zero): the unpack yields each member's shard; the
      // parameters are all-gathered after the optimizer step instead.
      op = scatter;
      value = scatter.getResult();
    } else {
      chain.ops.push_back(scatter);
      auto gather = dyn_cast_or_null<AllGatherOp>(op);
      if (!gather)
        return expect("a zen.all_gather (or, sharded by ZeRO, a zen.unpack) after the "
                      "zen.reduce_scatter");
      readSchedule(gather, chain.settings.gatherStream, chain.settings.gatherPriority);
      value = gather.getResult();
    }
  } else if (auto gather = dyn_cast_or_null<AllGatherOp>(op)) {
    if (chain.settings.compression.method == cost::CompressionMethod::None)
      return expect("a compressed payload before a zen.all_gather");
    readFirst(gather, vocab::SyncScheme::AllGather);
    value = gather.getResult();
  } else {
    return expect("a collective");
  }
  if (saysScheme && plannedScheme != chain.settings.scheme)
    return head->emitError("bucket's sync scheme '")
           << vocab::toString(plannedScheme) << "' differs from its collectives ('"
           << vocab::toString(chain.settings.scheme) << "')";
  chain.ops.push_back(op);
  if (chain.settings.compression.method != cost::CompressionMethod::None) {
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
  chain.settings.begin = members.front();
  chain.settings.end = members.front() + static_cast<int>(members.size());
  return chain;
}

} // namespace

bool plansSparse(GradientOp gradient) {
  auto type = cast<RankedTensorType>(gradient.getType());
  return gradient.getRowLookups() && gradient.getParam().getType() == type &&
         type.getElementType().isF32() && type.hasStaticShape();
}

SparseAllReduceOp sparseSyncOf(GradientOp gradient) {
  for (Operation *user : gradient.getResult().getUsers())
    if (auto sparse = dyn_cast<SparseAllReduceOp>(user))
      return sparse;
  return {};
}

/// An array of f64 FloatAttr (#zen.sparsity verified it).
static std::vector<double> valuesOf(ArrayAttr array) {
  std::vector<double> values;
  for (Attribute value : array)
    values.push_back(cast<FloatAttr>(value).getValueAsDouble());
  return values;
}

cost::SparsityStatistics statisticsOf(SparsityAttr attr) {
  cost::SparsityStatistics stats;
  stats.density = attr.getDensity().getValueAsDouble();
  stats.gamma = valuesOf(attr.getGamma());
  stats.skew = attr.getSkew().getValueAsDouble();
  stats.hashSkew = attr.getHashSkew().getValueAsDouble();
  stats.blockDensity = attr.getBlockDensity().getValueAsDouble();
  stats.blockGamma = valuesOf(attr.getBlockGamma());
  stats.source = attr.getSource() == SparsitySource::measured ? cost::SparsitySource::Measured
                                                              : cost::SparsitySource::Model;
  return stats;
}

SparsityAttr sparsityAttr(MLIRContext *context, const cost::SparsityStatistics &stats) {
  Builder builder(context);
  return SparsityAttr::get(
      context, builder.getF64FloatAttr(stats.density), builder.getF64ArrayAttr(stats.gamma),
      builder.getF64FloatAttr(stats.skew), builder.getF64FloatAttr(stats.hashSkew),
      builder.getF64FloatAttr(stats.blockDensity), builder.getF64ArrayAttr(stats.blockGamma),
      stats.source == cost::SparsitySource::Measured ? SparsitySource::measured
                                                     : SparsitySource::model);
}

cost::SparseSync sparseSyncOf(SparseAllReduceOp op) {
  auto type = cast<RankedTensorType>(op.getInput().getType());
  const int64_t rows = type.getDimSize(0);
  return {toVocabulary(op.getScheme()), {rows, type.getNumElements() / std::max<int64_t>(rows, 1)},
          statisticsOf(op.getStatistics())};
}

void readFrameworkSettings(ModuleOp module, cost::TrainingSetup &setup) {
  if (auto dtype = module->getAttrOfType<StringAttr>(ZenDialect::GradAccumulationDtypeAttrHelper::getNameStr()))
    setup.gradientAccumulation = cost::parseDType(dtype.str());
  if (auto kernel = module->getAttrOfType<StringAttr>(ZenDialect::AttentionAttrHelper::getNameStr()))
    setup.attention = cost::parseAttentionKernel(kernel.str()).value_or(setup.attention);
  if (auto regather = module->getAttrOfType<StringAttr>(ZenDialect::Zero3RegatherAttrHelper::getNameStr()))
    setup.zero3Regather = cost::parseZero3Regather(regather.str()).value_or(setup.zero3Regather);
  if (auto depth = module->getAttrOfType<IntegerAttr>(ZenDialect::Zero3PrefetchDepthAttrHelper::getNameStr()))
    setup.zero3PrefetchDepth = depth.getInt();
}

double opComputeUs(Operation *op, cost::DType computeDtype, const cost::CostModel &model) {
  OpWork work;
  if (auto moe = asMoe(op))
    work = workOf(moe, computeDtype);
  else if (auto compute = dyn_cast<ComputeOp>(op))
    work = workOf(compute, computeDtype);
  return model.computeUs(static_cast<double>(work.flops), static_cast<double>(work.bytes),
                         work.dtype);
}

FailureOr<std::vector<BucketOps>> readBuckets(const TrainingFunction &training,
                                              cost::Group &group) {
  DenseMap<Value, int> gradientIndex;
  for (size_t g = 0; g < training.gradients.size(); ++g) {
    GradientOp gradient = training.gradients[g];
    gradientIndex[gradient.getResult()] = static_cast<int>(g);
  }
  std::vector<BucketOps> chains;
  llvm::SmallPtrSet<Operation *, 16> heads;
  for (GradientOp gradient : training.gradients)
    for (Operation *user : gradient.getResult().getUsers()) {
      if (isOptimizer(user) || !heads.insert(user).second)
        continue;
      if (!isa<PackOp, CompressOp, AllReduceOp, ReduceScatterOp, AllGatherOp>(user))
        return user->emitError("gradient of '")
               << training.problem.gradients[gradientIndex[gradient.getResult()]].name
               << "' is used by an op the planner does not know";
      FailureOr<BucketOps> chain = readBucket(user, gradientIndex, group);
      if (failed(chain))
        return failure();
      chains.push_back(std::move(*chain));
    }
  std::sort(chains.begin(), chains.end(),
            [](const BucketOps &a, const BucketOps &b) { return a.settings.begin < b.settings.begin; });
  int next = 0;
  for (const BucketOps &chain : chains) {
    if (chain.settings.begin != next)
      return chain.ops.front()->emitError("gradient '")
             << training.problem.gradients[next].name
             << "' is not synchronised while others are (or is synchronised twice)";
    next = chain.settings.end;
  }
  if (!chains.empty() && next != static_cast<int>(training.gradients.size()))
    return training.gradients[next]->emitError("gradient is not synchronised while others are");
  return chains;
}

void forEachFunction(ModuleOp module, function_ref<void(func::FuncOp)> visit) {
  module->walk<WalkOrder::PreOrder>([&](Operation *op) {
    if (auto func = dyn_cast<func::FuncOp>(op)) {
      visit(func);
      return WalkResult::skip();
    }
    return WalkResult::advance();
  });
}

namespace {

/// Scales `segments[first, last)` to take `targetUs` together, in proportion to their IR
/// prices (evenly when those are all zero).
void scaleSegments(std::vector<ComputeSegment> &segments, size_t first, size_t last,
                   double targetUs) {
  if (first >= last)
    return;
  double irUs = 0;
  for (size_t s = first; s < last; ++s)
    irUs += segments[s].durationUs;
  for (size_t s = first; s < last; ++s)
    segments[s].durationUs = irUs > 0 ? segments[s].durationUs * targetUs / irUs
                                      : targetUs / double(last - first);
}

/// Gives each gradient (and row-sparse table) its share of an optimizer step of `totalUs`,
/// by its elements.
void shareOptimizerStep(Problem &problem, double totalUs) {
  double elements = 0;
  for (const GradientTensor &gradient : problem.gradients)
    elements += double(gradient.elements);
  for (const SparseGradientTask &table : problem.sparse)
    elements += double(table.sync->table.rows * table.sync->table.rowElements);
  if (elements <= 0)
    return;
  for (GradientTensor &gradient : problem.gradients)
    gradient.optimizerUs = totalUs * double(gradient.elements) / elements;
  for (SparseGradientTask &table : problem.sparse)
    table.optimizerUs =
        totalUs * double(table.sync->table.rows * table.sync->table.rowElements) / elements;
}

/// One cost model (issue 40): a recognised dense transformer's data-parallel problem is the
/// tp = pp = 1 case of the large-model cost model. Its forward and backward take the
/// per-block times cost::stageCosts gives (GEMMs priced by shape, element-wise work as
/// Megatron's fused kernels move it), its optimizer step the large-model one (Adam, at the
/// precision's bytes per parameter); the IR keeps where in a block the time falls and when
/// each gradient is ready. So `zenopt MODEL` and `zenopt MODEL --tp 1 --pp 1 --zero 0`
/// price the same configuration alike. Modules the partitioning passes rewrote, pipeline
/// stages and MoE models keep their IR prices.
void priceAsTransformer(ModuleOp module, TrainingFunction &training, const cost::CostModel &model) {
  Problem &problem = training.problem;
  if (module->hasAttr(ZenDialect::ParallelAttrHelper::getNameStr()) || !training.moeSegments.empty() ||
      problem.backward.empty() || problem.forward.empty())
    return;
  std::optional<TransformerStructure> structure = analyzeTransformer(module, nullptr);
  if (!structure || structure->shape.moe)
    return;
  const cost::TransformerShape &shape = structure->shape;
  cost::ParallelConfig config;
  // One rank's compute: the data-parallel degree does not change it at ZeRO 0. The IR's
  // shapes keep the exported batch; its work is priced at the importer's (zen.batch).
  auto batch = module->getAttrOfType<IntegerAttr>("zen.batch");
  config.microBatch = batch && batch.getInt() > 0 ? batch.getInt() : shape.modelBatch;
  cost::TrainingSetup setup;
  readFrameworkSettings(module, setup);
  setup.globalBatch = config.microBatch;
  setup.computeDtype = problem.computeDtype;
  if (!cost::checkConfig(shape, config, setup, config.gpus()).empty())
    return;
  const cost::StageCost stage = cost::stageCosts(shape, config, setup, model).front();

  // Each parameter's unit of the stage: "head", "block.<i>", "embedding".
  DenseMap<Operation *, size_t> unitOf;
  llvm::StringMap<size_t> unitOfName;  // the same by parameter name (row-sparse tables)
  std::map<std::string, size_t> unitIndex;
  for (size_t u = 0; u < stage.units.size(); ++u)
    unitIndex[stage.units[u].name] = u;
  auto assign = [&](ArrayRef<ParamOp> params, const std::string &unit) {
    if (auto found = unitIndex.find(unit); found != unitIndex.end())
      for (ParamOp param : params) {
        unitOf[param.getOperation()] = found->second;
        unitOfName[param.getName()] = found->second;
      }
  };
  assign(structure->headParams, "head");
  assign(structure->embeddingParams, "embedding");
  for (size_t b = 0; b < structure->blocks.size(); ++b)
    assign(structure->blocks[b].params, "block." + std::to_string(b));

  // A unit ends at the last backward segment after which one of its gradients is ready;
  // the segments up to there (after the previous unit's) take its backward time.
  std::vector<int> unitEnd(stage.units.size(), -1);
  auto noteReady = [&](Value param, int segment) {
    auto found = unitOf.find(param.getDefiningOp());
    if (found != unitOf.end())
      unitEnd[found->second] = std::max(unitEnd[found->second], segment);
  };
  for (size_t g = 0; g < training.gradients.size(); ++g)
    noteReady(training.gradients[g].getParam(), problem.gradients[g].readyAfterSegment);
  for (const SparseGradientTask &table : problem.sparse)
    if (auto found = unitOfName.find(table.name); found != unitOfName.end())
      unitEnd[found->second] = std::max(unitEnd[found->second], table.readyAfterSegment);
  const int segments = int(problem.backward.size());
  int begin = 0;
  double pendingUs = 0;
  for (size_t u = 0; u < stage.units.size(); ++u) {
    pendingUs += stage.units[u].backwardUs;
    const bool last = u + 1 == stage.units.size();
    const int end = last ? segments - 1 : std::min(unitEnd[u], segments - 1);
    if (end < begin)
      continue;  // its segments are another unit's: its time goes with the next range
    scaleSegments(problem.backward, size_t(begin), size_t(end) + 1, pendingUs);
    begin = end + 1;
    pendingUs = 0;
  }
  if (pendingUs > 0)  // units whose gradients the IR makes ready after the last range
    scaleSegments(problem.backward, problem.backward.size() - 1, problem.backward.size(),
                  problem.backward.back().durationUs + pendingUs);
  scaleSegments(problem.forward, 0, problem.forward.size(), stage.forwardUs);

  shareOptimizerStep(problem, stage.optimizerUs);
}

/// Prices the compute from a timing of the job's own steps (zen.measured_compute): each run
/// of segments up to the point where a gradient is ready (backward) or a parameter is first
/// read (forward) takes the measured time between those points, split in proportion to the
/// IR's prices; the optimizer step is shared by elements. Parameters the timing does not
/// name set no point; points out of order are held at the latest before them.
void priceFromMeasurement(ModuleOp module, Problem &problem) {
  auto measured = module->getAttrOfType<MeasuredComputeAttr>(
      ZenDialect::MeasuredComputeAttrHelper::getNameStr());
  if (!measured || problem.forward.empty() || problem.backward.empty())
    return;
  auto pointOf = [](DictionaryAttr points, StringRef name) -> std::optional<double> {
    if (auto time = dyn_cast_or_null<FloatAttr>(points.get(name)))
      return time.getValueAsDouble();
    return std::nullopt;
  };
  // Backward: the latest gradient ready after each segment ends it.
  std::vector<std::optional<double>> segmentEnd(problem.backward.size());
  auto noteReady = [&](const std::string &name, int segment) {
    std::optional<double> ready = pointOf(measured.getReadyUs(), name);
    if (!ready || segment < 0)
      return;
    std::optional<double> &end = segmentEnd[std::min<size_t>(segment, segmentEnd.size() - 1)];
    end = std::max(end.value_or(0.0), *ready);
  };
  for (const GradientTensor &gradient : problem.gradients)
    noteReady(gradient.name, gradient.readyAfterSegment);
  for (const SparseGradientTask &table : problem.sparse)
    noteReady(table.name, table.readyAfterSegment);
  // Forward: the earliest first read in a segment starts it (ends the segments before).
  std::vector<std::optional<double>> forwardEnd(problem.forward.size());
  for (const GradientTensor &gradient : problem.gradients) {
    std::optional<double> read = pointOf(measured.getFirstReadUs(), gradient.name);
    if (!read || gradient.forwardSegment <= 0)
      continue;
    std::optional<double> &end =
        forwardEnd[std::min<size_t>(gradient.forwardSegment, forwardEnd.size()) - 1];
    end = std::min(end.value_or(*read), *read);
  }
  auto priceRuns = [](std::vector<ComputeSegment> &segments,
                      const std::vector<std::optional<double>> &ends, double passUs) {
    size_t begin = 0;
    double previousUs = 0;
    for (size_t s = 0; s < segments.size(); ++s) {
      if (!ends[s] || s + 1 == segments.size())
        continue;
      const double endUs = std::clamp(*ends[s], previousUs, passUs);
      scaleSegments(segments, begin, s + 1, endUs - previousUs);
      begin = s + 1;
      previousUs = endUs;
    }
    scaleSegments(segments, begin, segments.size(), passUs - previousUs);
  };
  priceRuns(problem.backward, segmentEnd, measured.getBackwardUs().getValueAsDouble());
  priceRuns(problem.forward, forwardEnd, measured.getForwardUs().getValueAsDouble());
  shareOptimizerStep(problem, measured.getOptimizerUs().getValueAsDouble());
}

} // namespace

FailureOr<TrainingFunction> extractTraining(ModuleOp module, const cost::CostModel &model,
                                            std::optional<int64_t> stage) {
  SmallVector<func::FuncOp> candidates;
  forEachFunction(module, [&](func::FuncOp func) {
    if (!func.getBody().empty() && !func.getBody().getOps<GradientOp>().empty())
      candidates.push_back(func);
  });
  if (candidates.size() != 1)
    return module.emitError("expected exactly one function with zen.gradient ops, found ")
           << candidates.size();

  TrainingFunction training;
  training.func = candidates.front();
  Problem &problem = training.problem;
  if (Attribute attr = module->getAttr(ZenDialect::ComputeDtypeAttrHelper::getNameStr())) {
    auto name = dyn_cast<StringAttr>(attr);
    std::optional<cost::DType> dtype = name ? parseComputeDtype(name.str()) : std::nullopt;
    if (!dtype)
      return module.emitError(ZenDialect::ComputeDtypeAttrHelper::getNameStr())
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
  struct FoundGradient {
    GradientOp op;
    uint64_t readyOrder; // read once: the sort compares it n log n times
    int readyAfterSegment;
  };
  std::vector<FoundGradient> found;

  auto onStage = [&](std::optional<uint64_t> opStage) {
    return !stage || (opStage && static_cast<int64_t>(*opStage) == *stage);
  };
  for (Operation &op : training.func.getBody().front()) {
    if (auto gradient = dyn_cast<GradientOp>(op)) {
      if (!onStage(gradient.getStage()))
        continue;
      if (backward)
        problem.backward.push_back(*std::exchange(backward, std::nullopt));
      found.push_back({gradient, gradient.getReadyOrder(),
                       static_cast<int>(problem.backward.size()) - 1});
      continue;
    }
    // A forward op starts a new segment when it reads a parameter for the first time.
    // Most forward ops join a segment: the name is made only for one that starts one.
    auto addForward = [&](ValueRange inputs, function_ref<std::string()> name,
                          const OpWork &work, double us) {
      bool readsNewParam = llvm::any_of(inputs, [&](Value input) {
        Value param = paramRead(input);
        return param && !firstForwardUse.count(param);
      });
      if (readsNewParam && forward)
        problem.forward.push_back(*std::exchange(forward, std::nullopt));
      if (!forward)
        forward = ComputeSegment{name(), 0};
      addCost(*forward, work, us);
      for (Value input : inputs)
        if (Value param = paramRead(input))
          firstForwardUse.try_emplace(param, static_cast<int>(problem.forward.size()));
    };
    // zen.compute first: most ops are, and none is an MoE op, whose interface
    // lookup costs far more than a compare of op names.
    auto compute = dyn_cast<ComputeOp>(op);
    if (!compute) {
      if (auto moe = asMoe(&op)) {
        const OpWork work = workOf(moe, problem.computeDtype);
        addForward(
            op.getOperands(),
            [&] { return moe.getNodeName().value_or(op.getName().getStringRef()).str(); }, work,
            model.computeUs(static_cast<double>(work.flops), static_cast<double>(work.bytes),
                            work.dtype));
        if (isa<MoeExpertsOp>(op))
          training.moeSegments.emplace_back(&op, static_cast<int>(problem.forward.size()));
      }
      continue;
    }
    if (!onStage(compute.getStage()))
      continue;
    const OpWork work = workOf(compute, problem.computeDtype);
    const double us = model.computeUs(static_cast<double>(work.flops),
                                      static_cast<double>(work.bytes), work.dtype);
    switch (compute.getPhase()) {
    case Phase::forward:
      addForward(compute.getInputs(), [&] { return segmentName(compute); }, work, us);
      break;
    case Phase::backward:
      if (!backward)
        backward = ComputeSegment{segmentName(compute), 0};
      addCost(*backward, work, us);
      if (compute.getOpType() == "MoEGrad")
        training.moeSegments.emplace_back(&op, static_cast<int>(problem.backward.size()));
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

  std::stable_sort(found.begin(), found.end(),
                   [](const FoundGradient &a, const FoundGradient &b) {
                     return a.readyOrder < b.readyOrder;
                   });
  llvm::SmallPtrSet<Operation *, 16> seenParams;
  for (const FoundGradient &entry : found) {
    GradientOp gradient = entry.op;
    auto param = gradient.getParam().getDefiningOp<ParamOp>();
    if (!seenParams.insert(param).second)
      return gradient.emitError("parameter '") << param.getName() << "' has two gradients";
    auto type = cast<RankedTensorType>(gradient.getType());
    auto optimizer = optimizerUs.find(gradient.getParam());
    auto optimizerStepUs = [&] {
      return optimizer != optimizerUs.end()
                 ? optimizer->second
                 : model.computeUs(static_cast<double>(optimizerFlops(type.getNumElements())),
                                   static_cast<double>(optimizerBytes(type.getNumElements(),
                                                                      elementBytes(type))),
                                   dtypeOf(type));
    };
    if (SparseAllReduceOp sparse = sparseSyncOf(gradient)) {
      SparseGradientTask table;
      table.name = param.getName().str();
      table.readyAfterSegment = entry.readyAfterSegment;
      table.optimizerUs = optimizerStepUs();
      table.sync = std::make_shared<const cost::SparseSync>(sparseSyncOf(sparse));
      problem.sparse.push_back(std::move(table));
      training.sparse.push_back(sparse);
      continue;
    }
    GradientTensor tensor;
    tensor.name = param.getName().str();
    tensor.elements = type.getNumElements();
    tensor.bytes = tensor.elements * elementBytes(type);
    tensor.readyAfterSegment = entry.readyAfterSegment;
    tensor.forwardSegment = firstForwardUse.lookup(gradient.getParam());
    tensor.optimizerUs = optimizerStepUs();
    problem.gradients.push_back(tensor);
    training.gradients.push_back(gradient);
  }
  if (!stage) {
    priceAsTransformer(module, training, model);
    priceFromMeasurement(module, problem);
  }
  return training;
}

FailureOr<std::optional<PlanChoice>> readPlan(const TrainingFunction &training,
                                              cost::Group &group) {
  FailureOr<std::vector<BucketOps>> chains = readBuckets(training, group);
  if (failed(chains))
    return failure();
  if (chains->empty())
    return std::optional<PlanChoice>();
  PlanChoice choice;
  choice.strategy = "ir";
  choice.fused = false;
  for (BucketOps &chain : *chains) {
    choice.fused |= chain.packed;
    choice.afterBackward |= chain.afterBackward;
    choice.buckets.push_back(chain.settings);
  }
  return std::optional<PlanChoice>(std::move(choice));
}

} // namespace zen::plan

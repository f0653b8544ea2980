//===- ZenDialect.cpp - zen dialect registration --------------------------===//
#include "zen/Dialect/ZenDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

#include <iterator>
#include <utility>

using namespace mlir;
using namespace zen;

#include "zen/Dialect/ZenDialect.cpp.inc"
#include "zen/Dialect/ZenEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "zen/Dialect/ZenAttrs.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "zen/Dialect/ZenTypes.cpp.inc"

// Same enumerators in the same order: a conversion is a cast, checked here once.
#define ZEN_SAME_ENUMERATOR(dialect, vocabulary)                                              \
  static_assert(static_cast<int>(dialect) == static_cast<int>(vocabulary),                   \
                #dialect " and " #vocabulary " differ")
ZEN_SAME_ENUMERATOR(CompressionMethod::none, vocab::CompressionMethod::None);
ZEN_SAME_ENUMERATOR(CompressionMethod::fp16, vocab::CompressionMethod::FP16);
ZEN_SAME_ENUMERATOR(CompressionMethod::bf16, vocab::CompressionMethod::BF16);
ZEN_SAME_ENUMERATOR(CompressionMethod::int8, vocab::CompressionMethod::Int8);
ZEN_SAME_ENUMERATOR(CompressionMethod::topk, vocab::CompressionMethod::TopK);
ZEN_SAME_ENUMERATOR(CompressionMethod::randomk, vocab::CompressionMethod::RandomK);
ZEN_SAME_ENUMERATOR(CompressionMethod::sign, vocab::CompressionMethod::Sign);
ZEN_SAME_ENUMERATOR(CompressionMethod::powersgd, vocab::CompressionMethod::PowerSGD);
ZEN_SAME_ENUMERATOR(Device::gpu, vocab::Device::GPU);
ZEN_SAME_ENUMERATOR(Device::cpu, vocab::Device::CPU);
ZEN_SAME_ENUMERATOR(SyncScheme::all_reduce, vocab::SyncScheme::AllReduce);
ZEN_SAME_ENUMERATOR(SyncScheme::reduce_scatter_all_gather, vocab::SyncScheme::ReduceScatterAllGather);
ZEN_SAME_ENUMERATOR(SyncScheme::all_gather, vocab::SyncScheme::AllGather);
ZEN_SAME_ENUMERATOR(CollectiveAlgorithm::ring, vocab::Algorithm::Ring);
ZEN_SAME_ENUMERATOR(CollectiveAlgorithm::tree, vocab::Algorithm::Tree);
ZEN_SAME_ENUMERATOR(CollectiveAlgorithm::hierarchical, vocab::Algorithm::Hierarchical);
ZEN_SAME_ENUMERATOR(CollectiveAlgorithm::direct, vocab::Algorithm::Direct);
ZEN_SAME_ENUMERATOR(Recompute::none, vocab::Recompute::None);
ZEN_SAME_ENUMERATOR(Recompute::selective, vocab::Recompute::Selective);
ZEN_SAME_ENUMERATOR(Recompute::full, vocab::Recompute::Full);
ZEN_SAME_ENUMERATOR(SparseScheme::dense, vocab::SparseScheme::Dense);
ZEN_SAME_ENUMERATOR(SparseScheme::agsparse, vocab::SparseScheme::AgSparse);
ZEN_SAME_ENUMERATOR(SparseScheme::sparcml, vocab::SparseScheme::SparCml);
ZEN_SAME_ENUMERATOR(SparseScheme::omnireduce, vocab::SparseScheme::OmniReduce);
ZEN_SAME_ENUMERATOR(SparseScheme::balanced, vocab::SparseScheme::Balanced);
ZEN_SAME_ENUMERATOR(SparseScheme::hierarchical, vocab::SparseScheme::Hierarchical);
#undef ZEN_SAME_ENUMERATOR
static_assert(std::size(vocab::kCompressionMethods) == 8 && std::size(vocab::kDevices) == 2 &&
                  std::size(vocab::kSyncSchemes) == 3 && std::size(vocab::kAlgorithms) == 4 &&
                  std::size(vocab::kRecomputes) == 3 && std::size(vocab::kSparseSchemes) == 6,
              "the vocabulary gained a case the dialect lacks");

vocab::CompressionMethod zen::toVocabulary(CompressionMethod method) {
  return static_cast<vocab::CompressionMethod>(method);
}
CompressionMethod zen::fromVocabulary(vocab::CompressionMethod method) {
  return static_cast<CompressionMethod>(method);
}
vocab::Device zen::toVocabulary(Device device) { return static_cast<vocab::Device>(device); }
Device zen::fromVocabulary(vocab::Device device) { return static_cast<Device>(device); }
vocab::SyncScheme zen::toVocabulary(SyncScheme scheme) {
  return static_cast<vocab::SyncScheme>(scheme);
}
SyncScheme zen::fromVocabulary(vocab::SyncScheme scheme) { return static_cast<SyncScheme>(scheme); }
vocab::SparseScheme zen::toVocabulary(SparseScheme scheme) {
  return static_cast<vocab::SparseScheme>(scheme);
}
SparseScheme zen::fromVocabulary(vocab::SparseScheme scheme) {
  return static_cast<SparseScheme>(scheme);
}
vocab::Algorithm zen::toVocabulary(CollectiveAlgorithm algorithm) {
  return static_cast<vocab::Algorithm>(algorithm);
}
CollectiveAlgorithm zen::fromVocabulary(vocab::Algorithm algorithm) {
  return static_cast<CollectiveAlgorithm>(algorithm);
}
vocab::Recompute zen::toVocabulary(Recompute recompute) {
  return static_cast<vocab::Recompute>(recompute);
}
Recompute zen::fromVocabulary(vocab::Recompute recompute) { return static_cast<Recompute>(recompute); }

std::optional<vocab::CollectiveKind> zen::collectiveKindOf(mlir::Operation *op) {
  using Kind = vocab::CollectiveKind;
  if (isa<AllReduceOp>(op))
    return Kind::AllReduce;
  if (isa<ReduceScatterOp>(op))
    return Kind::ReduceScatter;
  if (isa<AllGatherOp>(op))
    return Kind::AllGather;
  if (isa<AllToAllOp>(op))
    return Kind::AllToAll;
  if (isa<BroadcastOp>(op))
    return Kind::Broadcast;
  if (isa<SendOp, RecvOp>(op))
    return Kind::SendRecv;
  return std::nullopt;
}

void ZenDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "zen/Dialect/ZenAttrs.cpp.inc"
      >();
  addTypes<
#define GET_TYPEDEF_LIST
#include "zen/Dialect/ZenTypes.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "zen/Dialect/ZenOps.cpp.inc"
      >();
}

void ZenDialect::setPendingVerification(std::shared_future<bool> verified,
                                        std::function<void()> afterwards) {
  pendingVerification = std::move(verified);
  afterVerification = std::move(afterwards);
}

bool ZenDialect::awaitVerification() {
  if (!pendingVerification.valid())
    return true;
  const bool verified = pendingVerification.get();
  pendingVerification = {};
  if (afterVerification)
    std::exchange(afterVerification, nullptr)();
  return verified;
}

LogicalResult ZenDialect::verifyOperationAttribute(Operation *op, NamedAttribute attribute) {
  // Each declared module attribute must have its declared type.
  auto expect = [&](bool ok, StringRef what) -> LogicalResult {
    if (ok)
      return success();
    return op->emitError("'") << attribute.getName().getValue() << "' must be " << what
                              << ", got " << attribute.getValue();
  };
  StringRef name = attribute.getName().getValue();
  Attribute value = attribute.getValue();
  if (name == ClusterAttrHelper::getNameStr() || name == ComputeDtypeAttrHelper::getNameStr() ||
      name == StrategyAttrHelper::getNameStr() || name == CompressorAttrHelper::getNameStr())
    return expect(isa<StringAttr>(value), "a string");
  if (name == GradAccumulationDtypeAttrHelper::getNameStr()) {
    auto dtype = dyn_cast<StringAttr>(value);
    return expect(dtype && llvm::is_contained({"fp32", "bf16", "fp16"}, dtype.getValue()),
                  "\"fp32\", \"bf16\" or \"fp16\"");
  }
  if (name == AttentionAttrHelper::getNameStr()) {
    auto kernel = dyn_cast<StringAttr>(value);
    return expect(kernel && vocab::parseAttentionKernel(kernel.getValue()), "\"flash\" or \"unfused\"");
  }
  if (name == Zero3RegatherAttrHelper::getNameStr()) {
    auto regather = dyn_cast<StringAttr>(value);
    return expect(regather && vocab::parseZero3Regather(regather.getValue()),
                  "\"per-microbatch\" or \"per-step\"");
  }
  if (name == Zero3PrefetchDepthAttrHelper::getNameStr() ||
      name == WorldSizeAttrHelper::getNameStr() || name == NodesAttrHelper::getNameStr() ||
      name == HeadsAttrHelper::getNameStr() || name == KvHeadsAttrHelper::getNameStr())
    return expect(isa<IntegerAttr>(value) && cast<IntegerAttr>(value).getInt() >= 1,
                  "a positive integer");
  if (name == ParallelAttrHelper::getNameStr())
    return expect(isa<ParallelAttr>(value), "a #zen.parallel");
  if (name == TransformerAttrHelper::getNameStr())
    return expect(isa<TransformerAttr>(value), "a #zen.transformer");
  if (name == ParallelSearchAttrHelper::getNameStr())
    return expect(isa<ParallelSearchAttr>(value), "a #zen.parallel_search");
  if (name == MoeSearchAttrHelper::getNameStr())
    return expect(isa<MoeSearchAttr>(value), "a #zen.moe_search");
  if (name == MeasuredComputeAttrHelper::getNameStr())
    return expect(isa<MeasuredComputeAttr>(value), "a #zen.measured_compute");
  if (name == RoleAttrHelper::getNameStr())
    return expect(isa<CollectiveRoleAttr>(value) && isa<CollectiveOpInterface>(op),
                  "a #zen.role on a collective");
  if (name == PrefetchAttrHelper::getNameStr())
    return expect(isa<IntegerAttr>(value) && cast<IntegerAttr>(value).getInt() >= 0 &&
                      isa<AllGatherOp>(op),
                  "a non-negative integer on a zen.all_gather");
  if (name == TpChunksAttrHelper::getNameStr()) {
    auto chunks = dyn_cast<IntegerAttr>(value);
    auto compute = dyn_cast<ComputeOp>(op);
    if (failed(expect(chunks && chunks.getInt() >= 1 && compute && compute->getNumResults() >= 1,
                      "a positive integer on a zen.compute")))
      return failure();
    // The chunks split the tokens: every dimension of the (first) result but
    // the features; a fused backward GEMM's first result is its input gradient.
    auto type = dyn_cast<RankedTensorType>(compute->getResult(0).getType());
    if (!type || !type.hasStaticShape() || type.getRank() < 2)
      return op->emitError("'") << name << "' needs a static result of rank 2 or more";
    int64_t tokens = type.getNumElements() / type.getShape().back();
    if (tokens % chunks.getInt() != 0)
      return op->emitError("'") << name << "' = " << chunks.getInt() << " does not divide the " << tokens
                                << " tokens of the result";
    return success();
  }
  if (name == TpReplicatedAttrHelper::getNameStr()) {
    auto names = dyn_cast<ArrayAttr>(value);
    return expect(names && llvm::all_of(names, [](Attribute entry) {
                    return isa<StringAttr>(entry);
                  }),
                  "an array of node names");
  }
  if (name == PredictedAttrHelper::getNameStr())
    return expect(isa<PredictionAttr>(value), "a #zen.prediction");
  if (name == BaselinesAttrHelper::getNameStr()) {
    auto baselines = dyn_cast<ArrayAttr>(value);
    if (!baselines)
      return expect(false, "an array of #zen.baseline");
    return verifyBaselines([&] { return op->emitError(); }, baselines, "'zen.baselines'");
  }
  return success();
}

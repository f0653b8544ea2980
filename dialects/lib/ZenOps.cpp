//===- ZenOps.cpp - zen operation verifiers -------------------------------===//
#include "zen/Dialect/ZenDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace zen;

namespace {
/// Verifies the attributes every collective carries.
template <typename CollectiveOp>
LogicalResult verifyCollectiveCommon(CollectiveOp op) {
  // I64Attr getters return uint64_t; read the signed value so negatives are caught.
  int64_t chunks = op.getChunksAttr().getInt();
  if (chunks < 1)
    return op.emitOpError("chunk count must be at least 1, got ") << chunks;
  if (SyncSchemeAttr sync = op.getSyncAttr()) {
    const vocab::SyncSchemeTraits &scheme = vocab::traitsOf(toVocabulary(sync.getValue()));
    if (collectiveKindOf(op) != scheme.sequence[0])
      return op.emitOpError("sync scheme '")
             << scheme.spelling << "' starts with "
             << vocab::toString(scheme.sequence[0]) << ", not with this op";
    if (op->getNumOperands() == 0)
      return success();
    if (auto compressed = dyn_cast<CompressedType>(op->getOperand(0).getType()))
      if (!compressed.getMethod().supports(sync.getValue()))
        return op.emitOpError("compression method '")
               << stringifyCompressionMethod(compressed.getMethod().getMethod())
               << "' cannot be synchronised by '" << scheme.spelling << "'";
  }
  return success();
}

int64_t elementsOf(Type type) { return cast<RankedTensorType>(type).getNumElements(); }

LogicalResult verifyPeer(Operation *op, int64_t peer, ProcessGroupAttr group) {
  if (peer < 0 || peer >= group.getSize())
    return op->emitOpError("peer ") << peer << " is outside the group of " << group.getSize()
                                    << " ranks";
  return success();
}
} // namespace

/// The pipeline stage, when present, is a stage index.
static LogicalResult verifyStage(Operation *op, IntegerAttr stage) {
  if (stage && stage.getInt() < 0)
    return op->emitOpError("stage must be non-negative, got ") << stage.getInt();
  return success();
}

LogicalResult ParamOp::verify() {
  if (getName().empty())
    return emitOpError("parameter name must not be empty");
  if (!getType().hasStaticShape())
    return emitOpError("parameter must have a static shape");
  if (ShardAttr shard = getShardAttr(); shard && shard.getDim() >= getType().getRank())
    return emitOpError("shard dim ") << shard.getDim() << " is outside the parameter's "
                                     << getType().getRank() << " dimensions";
  return verifyStage(*this, getStageAttr());
}

LogicalResult ComputeOp::verify() {
  if (getOpType().empty())
    return emitOpError("op_type must not be empty");
  if (getFlopsAttr().getInt() < 0)
    return emitOpError("flops must be non-negative, got ") << getFlopsAttr().getInt();
  if (getBytesAttr().getInt() < 0)
    return emitOpError("bytes must be non-negative, got ") << getBytesAttr().getInt();
  return verifyStage(*this, getStageAttr());
}

LogicalResult GradientOp::verify() {
  if (!getParam().getDefiningOp<ParamOp>())
    return emitOpError("first operand must be a zen.param");
  auto param = cast<RankedTensorType>(getParam().getType());
  auto gradient = cast<RankedTensorType>(getValue().getType());
  if (param != gradient) {
    // A ZeRO-3 shard: the gradient's type with one dimension divided.
    int differing = 0;
    bool divides = param.getRank() == gradient.getRank() &&
                   param.getElementType() == gradient.getElementType();
    for (int64_t d = 0; divides && d < param.getRank(); ++d)
      if (param.getDimSize(d) != gradient.getDimSize(d)) {
        ++differing;
        divides = param.getDimSize(d) > 0 && gradient.getDimSize(d) % param.getDimSize(d) == 0;
      }
    if (!divides || differing != 1)
      return emitOpError("parameter type ")
             << param << " must be the gradient's " << gradient
             << " or a shard of it along one dimension (ZeRO-3)";
  }
  if (getReadyOrderAttr().getInt() < 0)
    return emitOpError("ready_order must be non-negative, got ")
           << getReadyOrderAttr().getInt();
  if (std::optional<uint64_t> lookups = getRowLookups()) {
    if (static_cast<int64_t>(*lookups) < 1)
      return emitOpError("row_lookups must be at least 1, got ")
             << static_cast<int64_t>(*lookups);
    if (gradient.getRank() < 2)
      return emitOpError("row_lookups needs a table of rank 2 or more, got ") << gradient;
  } else if (getSharedRows()) {
    return emitOpError("shared_rows needs row_lookups");
  }
  return verifyStage(*this, getStageAttr());
}

LogicalResult SparseAllReduceOp::verify() {
  auto gradient = getInput().getDefiningOp<GradientOp>();
  if (!gradient || !gradient.getRowLookups())
    return emitOpError("input must be a row-sparse zen.gradient (one with row_lookups)");
  auto table = cast<RankedTensorType>(getInput().getType());
  if (!table.getElementType().isF32() || !table.hasStaticShape())
    return emitOpError("row-sparse gradient must be a static f32 table, got ") << table;
  if (getScheme() == SparseScheme::hierarchical &&
      (getGroup().getNodes() < 2 || getGroup().getNodes() == getGroup().getSize()))
    return emitOpError("scheme 'hierarchical' needs more than one node with more than one rank "
                       "each, got ")
           << getGroup();
  return success();
}

/// Shared by pack and unpack: a 1-D bucket at least as long as the pieces, one element type.
static LogicalResult verifyBucket(Operation *op, RankedTensorType bucket, TypeRange pieces) {
  if (pieces.empty())
    return op->emitOpError("needs at least one tensor");
  if (bucket.getRank() != 1 || !bucket.hasStaticShape())
    return op->emitOpError("bucket must be a static 1-D tensor");
  int64_t total = 0;
  for (Type piece : pieces) {
    auto tensor = cast<RankedTensorType>(piece);
    if (!tensor.hasStaticShape())
      return op->emitOpError("packed tensors must have static shapes");
    if (tensor.getElementType() != bucket.getElementType())
      return op->emitOpError("element type ") << tensor.getElementType()
             << " differs from the bucket's " << bucket.getElementType();
    total += tensor.getNumElements();
  }
  if (total > bucket.getNumElements())
    return op->emitOpError("tensors hold ") << total << " elements but the bucket only "
                                            << bucket.getNumElements();
  return success();
}

LogicalResult PackOp::verify() {
  return verifyBucket(*this, getResult().getType(), getInputs().getTypes());
}

LogicalResult UnpackOp::verify() {
  return verifyBucket(*this, getInput().getType(), getOutputs().getTypes());
}

LogicalResult AllReduceOp::verify() {
  if (auto compressed = dyn_cast<CompressedType>(getInput().getType()))
    if (!compressed.getMethod().supports(SyncScheme::all_reduce))
      return emitOpError("compression method '")
             << stringifyCompressionMethod(compressed.getMethod().getMethod())
             << "' cannot be all-reduced; all-gather it instead";
  return verifyCollectiveCommon(*this);
}

/// An N-D collective over activations or parameter shards: `whole` is `part`
/// with exactly one dimension `size` times larger.
static LogicalResult verifyShardedDim(Operation *op, RankedTensorType whole,
                                      RankedTensorType part, int64_t size) {
  if (whole.getElementType() != part.getElementType())
    return op->emitOpError("result element type must match the input's");
  int differing = 0;
  for (int64_t d = 0; d < whole.getRank(); ++d)
    if (whole.getDimSize(d) != part.getDimSize(d)) {
      ++differing;
      if (whole.getDimSize(d) != part.getDimSize(d) * size)
        return op->emitOpError("dimension ") << d << " of " << whole << " must be " << size
                                             << " times that of " << part;
    }
  if (differing != 1 && size != 1)
    return op->emitOpError("an N-D collective must shard exactly one dimension, ")
           << differing << " differ";
  return success();
}

LogicalResult ReduceScatterOp::verify() {
  auto input = getInput().getType();
  auto result = getResult().getType();
  if (input.getRank() > 1 && input.getRank() == result.getRank()) {
    if (failed(verifyShardedDim(*this, input, result, getGroup().getSize())))
      return failure();
    return verifyCollectiveCommon(*this);
  }
  if (input.getRank() != 1 || result.getRank() != 1)
    return emitOpError("operates on 1-D buckets (or N-D tensors of one rank)");
  if (input.getElementType() != result.getElementType())
    return emitOpError("result element type must match the input's");
  int64_t size = getGroup().getSize();
  int64_t shard = (input.getNumElements() + size - 1) / size;
  if (result.getNumElements() != shard)
    return emitOpError("shard must hold ceil(") << input.getNumElements() << " / " << size
                                                << ") = " << shard << " elements, got "
                                                << result.getNumElements();
  return verifyCollectiveCommon(*this);
}

LogicalResult AllGatherOp::verify() {
  Type input = getInput().getType();
  Type result = getResult().getType();
  if (isa<CompressedType>(input) || isa<CompressedType>(result)) {
    if (input != result)
      return emitOpError("a compressed all-gather keeps its payload type");
    return verifyCollectiveCommon(*this);
  }
  auto inputTensor = cast<RankedTensorType>(input);
  auto resultTensor = cast<RankedTensorType>(result);
  if (inputTensor.getRank() > 1 && inputTensor.getRank() == resultTensor.getRank()) {
    if (failed(verifyShardedDim(*this, resultTensor, inputTensor, getGroup().getSize())))
      return failure();
    return verifyCollectiveCommon(*this);
  }
  if (inputTensor.getRank() != 1 || resultTensor.getRank() != 1)
    return emitOpError("operates on 1-D buckets (or N-D tensors of one rank)");
  if (inputTensor.getElementType() != resultTensor.getElementType())
    return emitOpError("result element type must match the input's");
  int64_t expected = inputTensor.getNumElements() * getGroup().getSize();
  if (resultTensor.getNumElements() != expected)
    return emitOpError("result must hold ") << expected << " elements (input times group size), got "
                                            << resultTensor.getNumElements();
  return verifyCollectiveCommon(*this);
}

LogicalResult AllToAllOp::verify() {
  if (auto tensor = dyn_cast<RankedTensorType>(getInput().getType()))
    if (elementsOf(tensor) % getGroup().getSize() != 0)
      return emitOpError("element count ") << elementsOf(tensor)
             << " does not divide by the group size " << getGroup().getSize();
  return verifyCollectiveCommon(*this);
}

LogicalResult BroadcastOp::verify() {
  int64_t root = getRootAttr().getInt();
  if (root < 0 || root >= getGroup().getSize())
    return emitOpError("root ") << root << " is outside the group of "
                                << getGroup().getSize() << " ranks";
  return verifyCollectiveCommon(*this);
}

LogicalResult SendOp::verify() {
  if (failed(verifyPeer(*this, getPeerAttr().getInt(), getGroup())) ||
      failed(verifyStage(*this, getStageAttr())))
    return failure();
  return verifyCollectiveCommon(*this);
}

LogicalResult RecvOp::verify() {
  if (failed(verifyPeer(*this, getPeerAttr().getInt(), getGroup())) ||
      failed(verifyStage(*this, getStageAttr())))
    return failure();
  return verifyCollectiveCommon(*this);
}

LogicalResult CompressOp::verify() {
  if (getResult().getType().getOriginal() != getInput().getType())
    return emitOpError("compressed type must wrap the input type ") << getInput().getType();
  return success();
}

LogicalResult DecompressOp::verify() {
  if (getInput().getType().getOriginal() != getResult().getType())
    return emitOpError("result type must be the compressed payload's original type ")
           << getInput().getType().getOriginal();
  return success();
}

/// zen.gradient's optional `shard TYPE`: the parameter's type when it is a
/// ZeRO-3 shard, omitted when it is the gradient's.
static ParseResult parseParamShardType(OpAsmParser &parser, Type &paramType, Type resultType) {
  paramType = resultType;
  if (succeeded(parser.parseOptionalKeyword("shard")))
    return parser.parseType(paramType);
  return success();
}

static void printParamShardType(OpAsmPrinter &printer, Operation *, Type paramType,
                                Type resultType) {
  if (paramType != resultType)
    printer << " shard " << paramType;
}

#define GET_OP_CLASSES
#include "zen/Dialect/ZenOps.cpp.inc"

int64_t zen::payloadBytes(Operation *op) {
  Type payload = op->getNumOperands() ? op->getOperand(0).getType() : op->getResult(0).getType();
  if (auto compressed = dyn_cast<CompressedType>(payload)) {
    RankedTensorType original = compressed.getOriginal();
    int64_t rows = original.getRank() ? original.getDimSize(0) : 1;
    return compressed.getMethod().compressedBytes(original.getNumElements(), rows);
  }
  auto dense = cast<RankedTensorType>(payload);
  return dense.getNumElements() * std::max<int64_t>(1, (dense.getElementTypeBitWidth() + 7) / 8);
}

#include "zen/Dialect/ZenInterfaces.cpp.inc"

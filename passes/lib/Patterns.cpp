//===- Patterns.cpp - local rewrites of collectives ------------------------===//
#include "zen/Passes/Patterns.h"

#include "mlir/IR/Builders.h"

using namespace mlir;

namespace zen {
namespace {

/// A bucket's first collective over a dense 1-D payload with the given scheme.
bool isDenseBucketHead(Operation *op, SyncScheme scheme) {
  auto sync = op->getAttrOfType<SyncSchemeAttr>("sync");
  auto type = dyn_cast<RankedTensorType>(op->getOperand(0).getType());
  return sync && sync.getValue() == scheme && type && type.getRank() == 1;
}

struct SplitAllReduce : OpRewritePattern<AllReduceOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AllReduceOp op, PatternRewriter &rewriter) const override {
    if (!isDenseBucketHead(op, SyncScheme::all_reduce))
      return rewriter.notifyMatchFailure(op, "not a dense bucket all-reduce");
    if (!llvm::all_of(op->getUsers(), [](Operation *user) { return isa<UnpackOp>(user); }))
      return rewriter.notifyMatchFailure(op, "a user other than zen.unpack needs the exact size");
    MLIRContext *context = op.getContext();
    auto type = cast<RankedTensorType>(op.getInput().getType());
    const int64_t ranks = op.getGroup().getSize();
    const int64_t shard = (type.getNumElements() + ranks - 1) / ranks;
    auto scatter = rewriter.create<ReduceScatterOp>(
        op.getLoc(), RankedTensorType::get({shard}, type.getElementType()), op.getReduction(),
        op.getInput(), op.getGroup(), op.getAlgorithmAttr(), op.getChunks(),
        op.getScheduleAttr(), op.getBucketAttr(), op.getAfterBackward(),
        SyncSchemeAttr::get(context, SyncScheme::reduce_scatter_all_gather));
    // The gather may finish during the next forward; it issues on the same stream.
    ScheduleAttr schedule = op.getScheduleAttr();
    auto gather = rewriter.create<AllGatherOp>(
        op.getLoc(), RankedTensorType::get({shard * ranks}, type.getElementType()),
        scatter.getResult(), /*decoupled=*/true, op.getGroup(), op.getAlgorithmAttr(), 1,
        schedule ? ScheduleAttr::get(context, schedule.getStream(), schedule.getPriority(), 0)
                 : ScheduleAttr(),
        op.getBucketAttr(), false, SyncSchemeAttr());
    // zen.unpack reads the padded bucket's leading elements.
    rewriter.replaceAllUsesWith(op.getResult(), gather.getResult());
    rewriter.eraseOp(op);
    return success();
  }
};

struct ChunkCollective : OpInterfaceRewritePattern<CollectiveOpInterface> {
  ChunkCollective(MLIRContext *context, int64_t chunks)
      : OpInterfaceRewritePattern(context), chunks(chunks) {}
  LogicalResult matchAndRewrite(CollectiveOpInterface op,
                                PatternRewriter &rewriter) const override {
    if (!op->hasAttr("sync") || op->getNumOperands() == 0 ||
        !isa<RankedTensorType>(op->getOperand(0).getType()))
      return rewriter.notifyMatchFailure(op, "not a dense bucket collective");
    if (op.getChunkCount() == chunks)
      return rewriter.notifyMatchFailure(op, "already chunked so");
    rewriter.modifyOpInPlace(op, [&] { op.setChunkCount(chunks); });
    return success();
  }
  int64_t chunks;
};

struct CompressAllReduce : OpRewritePattern<AllReduceOp> {
  CompressAllReduce(MLIRContext *context, CompressionAttr compression, Device device)
      : OpRewritePattern(context), compression(compression), device(device) {}
  LogicalResult matchAndRewrite(AllReduceOp op, PatternRewriter &rewriter) const override {
    if (!isDenseBucketHead(op, SyncScheme::all_reduce))
      return rewriter.notifyMatchFailure(op, "not a dense bucket all-reduce");
    MLIRContext *context = op.getContext();
    auto dense = cast<RankedTensorType>(op.getInput().getType());
    auto payload = CompressedType::get(context, dense, compression);
    const vocab::CompressionMethod method = toVocabulary(compression.getMethod());
    auto compressed = rewriter.create<CompressOp>(
        op.getLoc(), payload, op.getInput(), device, vocab::wantsErrorFeedback(method),
        ScheduleAttr(), op.getBucketAttr());
    const vocab::SyncScheme scheme = vocab::preferredScheme(method);
    auto sync = SyncSchemeAttr::get(context, fromVocabulary(scheme));
    // Compressed payloads are sent whole.
    Value synced;
    if (scheme == vocab::SyncScheme::AllGather)
      synced = rewriter.create<AllGatherOp>(op.getLoc(), payload, compressed.getResult(), false,
                                            op.getGroup(), op.getAlgorithmAttr(), 1,
                                            op.getScheduleAttr(), op.getBucketAttr(),
                                            op.getAfterBackward(), sync);
    else
      synced = rewriter.create<AllReduceOp>(op.getLoc(), payload, op.getReduction(),
                                            compressed.getResult(), op.getGroup(),
                                            op.getAlgorithmAttr(), 1, op.getScheduleAttr(),
                                            op.getBucketAttr(), op.getAfterBackward(), sync);
    rewriter.replaceOpWithNewOp<DecompressOp>(op, dense, synced, device, ScheduleAttr(),
                                              op.getBucketAttr());
    return success();
  }
  CompressionAttr compression;
  Device device;
};

struct ChunkTensorParallelPair : OpInterfaceRewritePattern<CollectiveOpInterface> {
  ChunkTensorParallelPair(
      MLIRContext *context,
      const llvm::DenseMap<Operation *, std::pair<Operation *, int64_t>> &chunksOf)
      : OpInterfaceRewritePattern(context), chunksOf(chunksOf) {}
  LogicalResult matchAndRewrite(CollectiveOpInterface op,
                                PatternRewriter &rewriter) const override {
    auto found = chunksOf.find(op);
    if (found == chunksOf.end())
      return rewriter.notifyMatchFailure(op, "not a planned tensor-parallel collective");
    auto [gemm, chunks] = found->second;
    StringRef tpChunks = ZenDialect::TpChunksAttrHelper::getNameStr();
    auto current = gemm->getAttrOfType<IntegerAttr>(tpChunks);
    if (op.getChunkCount() == chunks && current && current.getInt() == chunks)
      return rewriter.notifyMatchFailure(op, "already decomposed so");
    rewriter.modifyOpInPlace(op, [&] { op.setChunkCount(chunks); });
    rewriter.modifyOpInPlace(gemm, [&] { gemm->setAttr(tpChunks, rewriter.getI64IntegerAttr(chunks)); });
    return success();
  }
  const llvm::DenseMap<Operation *, std::pair<Operation *, int64_t>> &chunksOf;
};

} // namespace

void populateZenSyncPatterns(RewritePatternSet &patterns, const SyncPatternOptions &options) {
  MLIRContext *context = patterns.getContext();
  if (options.splitAllReduce)
    patterns.add<SplitAllReduce>(context);
  if (options.chunks >= 1)
    patterns.add<ChunkCollective>(context, options.chunks);
  if (options.compression && options.compression.getMethod() != CompressionMethod::none)
    patterns.add<CompressAllReduce>(context, options.compression, options.device);
}

void populateZenTensorParallelPatterns(
    RewritePatternSet &patterns,
    const llvm::DenseMap<Operation *, std::pair<Operation *, int64_t>> &chunksOf) {
  patterns.add<ChunkTensorParallelPair>(patterns.getContext(), chunksOf);
}

} // namespace zen

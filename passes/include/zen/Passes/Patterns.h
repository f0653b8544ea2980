//===- Patterns.h - local rewrites of collectives ----------------*- C++ -*-===//
//
// Rewrites whose change is local to one collective, as MLIR patterns. Each
// carries out a decision made elsewhere (the planner, a pass's options); none
// decides. test/Passes/patterns/ exercises each through zen-apply-sync-patterns.
//
//===----------------------------------------------------------------------===//
#ifndef ZEN_PASSES_PATTERNS_H
#define ZEN_PASSES_PATTERNS_H

#include "zen/Dialect/ZenDialect.h"

#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/DenseMap.h"

namespace zen {

/// What the gradient-synchronisation patterns do to a bucket's first
/// collective (one carrying `sync`) over a dense payload.
struct SyncPatternOptions {
  /// all_reduce -> reduce_scatter + decoupled all_gather (DeAR), when every
  /// user of the all-reduce is a zen.unpack (which accepts the padded bucket).
  bool splitAllReduce = false;
  /// At least 1: the collective runs in this many pipelined pieces.
  int64_t chunks = 0;
  /// Non-null: the all_reduce's payload is compressed with it and synchronised
  /// by the method's preferred scheme, then decompressed.
  CompressionAttr compression;
  Device device = Device::gpu;
};

/// all_reduce -> reduce_scatter + all_gather; chunking; compress/decompress
/// around the collective; as `options` asks.
void populateZenSyncPatterns(mlir::RewritePatternSet &patterns, const SyncPatternOptions &options);

/// Splits each tensor-parallel collective in `chunksOf` and the GEMM next to it
/// (its producer, or its first reader for a gather) into that many chunks: the
/// collective's `chunks`, the GEMM's `zen.tp_chunks`.
void populateZenTensorParallelPatterns(
    mlir::RewritePatternSet &patterns,
    const llvm::DenseMap<mlir::Operation *, std::pair<mlir::Operation *, int64_t>> &chunksOf);

} // namespace zen

#endif // ZEN_PASSES_PATTERNS_H

//===- BucketRewrites.h - local edits of gradient synchronisation -*- C++ -*-===//
//
// The planning passes change the IR one bucket at a time: emit a bucket's
// chain, fuse adjacent buckets, split one, rewrite one bucket's compression or
// decomposition, or retune a collective's chunks and schedule in place. Every
// other bucket's ops are left untouched. applyPlan reconciles the IR with a
// PlanChoice through exactly these edits, so a search that runs on the compact
// problem (zen-autotune) materialises its decision the same way the
// individual passes do. docs/design.md describes the flow.
//
//===----------------------------------------------------------------------===//
#ifndef ZEN_PASSES_BUCKETREWRITES_H
#define ZEN_PASSES_BUCKETREWRITES_H

#include "zen/Analysis/IRPlan.h"

namespace zen::plan {

/// How a bucket sits in the IR beyond its BucketChoice.
struct BucketLayout {
  bool packed = true;          // through zen.pack / zen.unpack (required for >1 gradient)
  bool afterBackward = false;  // the collective waits for the whole backward pass
};

/// The layout `choice` gives bucket `bucket`.
BucketLayout layoutOf(const PlanChoice &choice, const BucketChoice &bucket);

/// Creates an optimizer step (SGD) for every gradient that has none yet.
void ensureOptimizerSteps(TrainingFunction &training);

/// Emits the synchronisation of gradients [bucket.begin, bucket.end), which must
/// have none, and routes their optimizer steps through it.
mlir::LogicalResult emitBucket(TrainingFunction &training, const BucketChoice &bucket,
                               BucketLayout layout, cost::Group group);

/// Removes one bucket's ops; its optimizer steps read the raw gradients again.
mlir::LogicalResult eraseBucket(TrainingFunction &training, BucketOps &bucket);

/// Replaces adjacent buckets `buckets` (consecutive, in order) by one bucket
/// with `fused`'s settings covering them all.
mlir::LogicalResult fuseBuckets(TrainingFunction &training, llvm::MutableArrayRef<BucketOps> buckets,
                                const BucketChoice &fused, BucketLayout layout, cost::Group group);

/// Splits `bucket` before gradient `at` (begin < at < end) into two buckets
/// with its settings.
mlir::LogicalResult splitBucket(TrainingFunction &training, BucketOps &bucket, int at,
                                cost::Group group);

/// Gives one bucket new settings: compression, decomposition and layout
/// changes rewrite its chain; chunk and schedule changes edit its collectives
/// in place (CollectiveOpInterface).
mlir::LogicalResult rewriteBucket(TrainingFunction &training, BucketOps &bucket,
                                  const BucketChoice &settings, BucketLayout layout,
                                  cost::Group group);

/// Brings the function's synchronisation to `choice` with the edits above:
/// splits and fuses to its bucket boundaries, then rewrites each bucket whose
/// settings differ; finally numbers buckets and the global issue order.
/// Buckets already as planned are not touched. First waits for a verification of the
/// module still running (ZenDialect::awaitVerification); fails if it failed.
mlir::LogicalResult applyPlan(TrainingFunction &training, const PlanChoice &choice,
                              cost::Group group);

} // namespace zen::plan

#endif // ZEN_PASSES_BUCKETREWRITES_H

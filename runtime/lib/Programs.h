//===- Programs.h - Per-bucket compression + collective programs (internal) ===//
//
// A bucket program turns the fused gradient of one bucket into the average
// over ranks: compress, then one or more stages of non-blocking collectives
// (each stage belongs to one of the plan's collectives of the bucket; a stage
// runs its local step, e.g. summing all-to-all shards, right before it
// starts), then finish (decompress, average). Programs work through the
// backend's Compute: compress on the first collective's stream, a stage on its
// collective's, finish on the last collective's (device work is queued there).
//
//===----------------------------------------------------------------------===//
#ifndef ZENRT_LIB_PROGRAMS_H
#define ZENRT_LIB_PROGRAMS_H

#include "Backend.h"
#include "Compute.h"
#include "zenrt/Plan.h"

#include <memory>
#include <vector>

namespace zenrt {

/// The executor-owned buffers of one bucket, in the memory of the backend's Compute.
struct BucketBuffers {
  size_t index = 0;
  size_t elements = 0;
  bool errorFeedback = false;
  int64_t iteration = 0;
  Buffer<float> fusion;    // packed gradients (+ residual) in, average out
  Buffer<float> residual;  // error feedback, kept across iterations
  Buffer<float> sent;      // decoded local contribution (error feedback or debugging)
};

class BucketProgram {
public:
  virtual ~BucketProgram() = default;
  /// Encodes b.fusion. Fills b.sent (when allocated) and returns true, or
  /// returns false when the local contribution is known only at finish.
  virtual bool compress(BucketBuffers &b) = 0;
  virtual size_t stageCount() const = 0;
  /// The index of the plan collective a stage belongs to.
  virtual size_t stageCollective(size_t stage) const = 0;
  /// Runs the stage's local step and starts its collectives.
  virtual void issue(size_t stage, BucketBuffers &b, std::vector<Backend::Request> &requests) = 0;
  /// Writes the average over ranks into b.fusion; a late program (compress
  /// returned false) also fills b.sent and b.residual.
  virtual void finish(BucketBuffers &b) = 0;
};

/// The program for a validated plan bucket.
std::unique_ptr<BucketProgram> createProgram(const Bucket &bucket, Backend &backend);

/// The contiguous pieces a collective of `total` units is split into (empty
/// pieces are dropped: every rank drops the same ones).
struct Segment {
  size_t offset = 0;
  size_t length = 0;
};
std::vector<Segment> splitIntoChunks(size_t total, int64_t chunks);

}  // namespace zenrt

#endif  // ZENRT_LIB_PROGRAMS_H

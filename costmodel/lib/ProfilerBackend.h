//===- ProfilerBackend.h - what `zenopt profile` times ----------*- C++ -*-===//
#ifndef ZEN_COSTMODEL_PROFILERBACKEND_H
#define ZEN_COSTMODEL_PROFILERBACKEND_H

#include "zen/CostModel/Cluster.h"

#include <cstdint>
#include <memory>

namespace zen::cost {

/// Runs one collective over MPI_COMM_WORLD's ranks, blocking until it is
/// complete on this rank.
class CollectiveBackend {
public:
  virtual ~CollectiveBackend() = default;
  /// The bytes (nccl-tests convention) a request for `bytes` really moves:
  /// element types and per-rank splits round it.
  virtual int64_t actualBytes(CollectiveKind kind, int64_t bytes) const = 0;
  virtual void run(CollectiveKind kind, int64_t bytes) = 0;
};

/// Buffers hold collectives of up to `maxBytes`.
std::unique_ptr<CollectiveBackend> makeMpiBackend(int64_t maxBytes);
/// Defined only when built with CUDA and NCCL. Throws ProfileError.
std::unique_ptr<CollectiveBackend> makeNcclBackend(int64_t maxBytes);

/// Per-rank element counts shared by both backends.
struct CollectiveShape {
  int64_t ranks;
  int64_t floatsFor(int64_t bytes) const { return bytes / 4 > 0 ? bytes / 4 : 1; }
  /// reduce_scatter: floats each rank receives.
  int64_t blockFloats(int64_t bytes) const {
    int64_t floats = bytes / 4 / ranks;
    return floats > 0 ? floats : 1;
  }
  /// all_gather / all_to_all: bytes per rank block.
  int64_t blockBytes(int64_t bytes) const { return bytes / ranks > 0 ? bytes / ranks : 1; }

  int64_t actualBytes(CollectiveKind kind, int64_t bytes) const {
    switch (kind) {
    case CollectiveKind::AllReduce: return 4 * floatsFor(bytes);
    case CollectiveKind::ReduceScatter: return 4 * blockFloats(bytes) * ranks;
    case CollectiveKind::AllGather:
    case CollectiveKind::AllToAll: return blockBytes(bytes) * ranks;
    default: return bytes > 0 ? bytes : 1;
    }
  }
};

} // namespace zen::cost

#endif // ZEN_COSTMODEL_PROFILERBACKEND_H

//===- Profiler.h - measure a cluster and fit the cost model ----*- C++ -*-===//
//
// The engine of `zenopt profile`: sweeps every collective over message sizes
// under MPI (or NCCL where CUDA exists), fits alpha-beta terms per size range,
// measures the CPU compression kernels, and checks the fits on sizes they were
// not fitted on. Every function here is collective over MPI_COMM_WORLD: call it
// on all ranks, between MPI_Init and MPI_Finalize.
//
//===----------------------------------------------------------------------===//
#ifndef ZEN_COSTMODEL_PROFILER_H
#define ZEN_COSTMODEL_PROFILER_H

#include "zen/CostModel/Cluster.h"

#include <functional>
#include <stdexcept>
#include <string>

namespace zen::cost {

/// A profiling failure that every rank sees alike (e.g. no CUDA device).
struct ProfileError : Error {
  using Error::Error;
};

struct ProfileOptions {
  std::string backend = "mpi";  // "mpi" or "nccl"
  /// Sizes 4 B .. 1 MiB in steps of 4x and few repetitions: seconds, for tests.
  bool quick = false;
  /// Progress text for rank 0's stderr; `final` ends a line.
  std::function<void(const std::string &text, bool final)> progress;
};

/// True when this build has the NCCL backend.
bool haveNcclBackend();

/// Measures the machine set of this MPI job and returns `base` reshaped to it
/// (nodes = distinct hosts, gpus_per_node = ranks per host) with profiled
/// collectives, compression throughput and validation results filled in.
/// Identical on every rank.
Cluster profileCluster(const Cluster &base, const ProfileOptions &options);

} // namespace zen::cost

#endif // ZEN_COSTMODEL_PROFILER_H

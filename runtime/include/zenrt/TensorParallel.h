//===- zenrt/TensorParallel.h - decomposed tensor-parallel MLP (C++ API) ---===//
//
// Megatron's tensor-parallel MLP forward on CPU ranks over MPI (docs/design.md "Large
// models", decomposition): each rank holds a column shard of the first GEMM's weight and
// the matching row shard of the second's, computes its partial output, and the partials are
// summed over the ranks. Split into k chunks along the tokens, chunk i's reduction is in
// flight while chunk i + 1's GEMMs compute. The reduction gathers every rank's partial and
// adds them in rank order, so a row's result does not depend on k or on the rank that
// computes it: every k gives bit-identical output on every rank.
//
//===----------------------------------------------------------------------===//
#ifndef ZENRT_TENSORPARALLEL_H
#define ZENRT_TENSORPARALLEL_H

#include <cstdint>

namespace zenrt {
class WatchedWaits;
}

namespace zenrt::tp {

struct MlpShard {
  int64_t hidden = 0;
  int64_t ffnShard = 0; // this rank's share of the MLP's inner features
  /// Row-major: fc1 [ffnShard x hidden] (rows of the column-parallel weight), fc2
  /// [hidden x ffnShard] (columns of the row-parallel weight). The rank computes
  /// fc2 relu(fc1 x) per token row x.
  const float *fc1 = nullptr;
  const float *fc2 = nullptr;
};

struct Schedule {
  int64_t chunks = 1;          // k: pieces of the tokens, pipelined
  double timeoutSeconds = 300; // every wait fails after this (ZENRT_ERR_TIMEOUT)
  /// Over the same communicator: names the rank that stopped answering when a wait times
  /// out (zenrt/WatchedWaits.h). Null: mlpForward watches for the call's duration itself,
  /// which is collective and costs a thread; a caller running many keeps one.
  WatchedWaits *waits = nullptr;
};

/// Runs the MLP on `input` [tokens x hidden] (the same on every rank) into `output`
/// [tokens x hidden]. Collective over `comm` (an MPI_Comm*, null: MPI_COMM_WORLD; MPI must
/// be initialised). Throws zenrt::Error: ZENRT_ERR_INVALID_ARGUMENT for null buffers, sizes
/// below 1 or k not dividing the tokens, ZENRT_ERR_TIMEOUT naming the rank, the chunk and the
/// ranks that did not answer for a wait past the timeout, ZENRT_ERR_BACKEND for an MPI error.
void mlpForward(const MlpShard &shard, const Schedule &schedule, int64_t tokens, const float *input,
                float *output, const void *comm = nullptr);

} // namespace zenrt::tp

#endif // ZENRT_TENSORPARALLEL_H

//===- zenrt/Moe.h - pipelined Mixture-of-Experts layer (C++ API) ----------===//
//
// One MoE layer's forward on CPU ranks over MPI (docs/design.md "Mixture of Experts"):
// every rank's dispatch buffer goes to the ranks that hold the experts (all-to-all), each
// rank runs its experts' MLPs, and the results come back (all-to-all). Split into r chunks
// along the capacity, the chunks pipeline: the next chunk's dispatch is in flight while
// this one computes, and its combine returns while the next computes. A row's result does
// not depend on the chunk it travels in, so every r gives bit-identical output.
//
//===----------------------------------------------------------------------===//
#ifndef ZENRT_MOE_H
#define ZENRT_MOE_H

#include <cstdint>

namespace zenrt::moe {

enum class AllToAll {
  Flat,        // one all-to-all over every rank
  Hierarchical // Tutel's 2D: among the ranks of a node, then among those of one local index
};

struct Layer {
  int64_t experts = 0; // over all ranks; each of the n ranks holds experts / n of them
  int64_t hidden = 0;
  int64_t ffn = 0;
  int64_t capacity = 0; // rows per expert each rank sends
  /// The rank's experts, one after another, row-major: fc1 [ffn x hidden], fc1Bias [ffn],
  /// fc2 [hidden x ffn], fc2Bias [hidden]. Each expert computes
  /// fc2 relu(fc1 x + fc1Bias) + fc2Bias per row.
  const float *fc1 = nullptr;
  const float *fc1Bias = nullptr;
  const float *fc2 = nullptr;
  const float *fc2Bias = nullptr;
};

struct Schedule {
  int64_t chunks = 1; // r: pieces of the capacity, pipelined
  AllToAll algorithm = AllToAll::Flat;
  int64_t ranksPerNode = 1;    // Hierarchical: ranks fill nodes of this many in order
  double timeoutSeconds = 300; // every wait fails after this (ZENRT_ERR_TIMEOUT)
};

/// Runs the layer: `dispatched` and `combined` are [experts][capacity][hidden] (row e, c of
/// `combined` is expert e's output for row c of `dispatched`). Collective over `comm` (an
/// MPI_Comm*, null: MPI_COMM_WORLD; MPI must be initialised). Throws zenrt::Error:
/// ZENRT_ERR_INVALID_ARGUMENT for a shape or schedule that does not fit (null weights, the
/// ranks not dividing the experts, r not dividing the capacity, ranksPerNode not dividing the
/// ranks), ZENRT_ERR_TIMEOUT naming the rank, the exchange and the chunk for a wait that
/// exceeded the timeout, ZENRT_ERR_BACKEND for an MPI error.
void forward(const Layer &layer, const Schedule &schedule, const float *dispatched, float *combined,
             const void *comm = nullptr);

} // namespace zenrt::moe

#endif // ZENRT_MOE_H

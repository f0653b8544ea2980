//===- Mutation.h - Test-only broken kernels (internal) ---------------------===//
//
// The mutation test (test/Runtime/mutants.test) shows that zenopt-run's numerics check fails
// on a broken kernel. The library variant zenrt_mutant is built with ZENRT_MUTANTS and breaks
// the kernel that the environment variable ZENRT_MUTATE names; in every other build
// `mutated` is constantly false and the hooks compile away.
//
//===----------------------------------------------------------------------===//
#ifndef ZENRT_LIB_MUTATION_H
#define ZENRT_LIB_MUTATION_H

#ifdef ZENRT_MUTANTS
#include <cstdlib>
#include <cstring>
#endif

namespace zenrt {

enum class Mutation {
  TopKDropsOne,         // "topk": top-k sends k - 1 elements
  RandomKRepeatsIndex,  // "randomk": random-k draws one index twice
  SignFlipsOne,         // "sign": sign compression flips the first element's sign
  PowerSgdLosesRank,    // "powersgd-rank": PowerSGD factors of rank r - 1 (for r >= 2)
  PowerSgdZeros,        // "powersgd-zero": PowerSGD returns zeros
  ForgetsResidual,      // "error-feedback": the residual is kept but never added back
  TpDropsPartial,       // "tp-partial": tensor-parallel reductions leave out the last rank
  TpReordersChunk,      // "tp-chunk-order": chunk 1 of a decomposed reduction adds the ranks
                        // in reverse order
  PipelineDamages,      // "pipeline-message": a stage-to-stage tensor changes after hashing
  DataParallelSkips,    // "dp-sync": gradients are not synchronised over the dp group
  MoeMasksWrongChunk,   // "moe-backward-chunk": chunk 1 of an MoE backward applies chunk 0's
                        // ReLU mask
  MoeDropsGradientBlock, // "moe-weight-gradient": an MoE backward leaves the last block of
                         // rows out of the expert weights' gradients
  ExpertsOverWorld,     // "expert-replicas": expert tensors' buckets synchronise over every
                        // rank instead of the ranks holding the same experts
  SparseDropsIndex,     // "sparse-drop-index": the last rank's sparse all-reduce leaves out
                        // its last touched row
  SparseMergesCollision, // "sparse-hash-collision": the rank-ordered sum's hash table adds a
                         // row into the slot of another row it collides with
  SparseWrongPartition, // "sparse-partition": the last rank pushes each row to the rank after
                        // its balanced owner
};

#ifdef ZENRT_MUTANTS
inline bool mutated(Mutation mutation) {
  static const char *const kNames[] = {
      "topk",       "randomk",        "sign",             "powersgd-rank", "powersgd-zero",
      "error-feedback", "tp-partial", "tp-chunk-order", "pipeline-message", "dp-sync",
      "moe-backward-chunk", "moe-weight-gradient", "expert-replicas",
      "sparse-drop-index", "sparse-hash-collision", "sparse-partition"};
  static const char *const chosen = std::getenv("ZENRT_MUTATE");
  return chosen && std::strcmp(chosen, kNames[static_cast<int>(mutation)]) == 0;
}
#else
constexpr bool mutated(Mutation) { return false; }
#endif

}  // namespace zenrt

#endif  // ZENRT_LIB_MUTATION_H

//===- zen/SparseScheme.h - How a row-sparse gradient crosses the group -*- C++ -*-===//
//
// The one definition of the schemes that synchronise a row-sparse gradient (an
// embedding table's: only the rows a step looked up are non-zero). Each is
// priced by the cost model from the tensor's sparsity statistics, chosen per
// tensor by the planner, carried by the IR and the plan file's
// `sparse_tensors[*].scheme`, and executed by the runtime. The schemes follow
// the design space of Zen (Wang et al., OSDI 2025, arXiv 2309.13254).
//
// Header-only and free of LLVM and of exceptions (the runtime uses it).
//
//===----------------------------------------------------------------------===//
#ifndef ZEN_SPARSESCHEME_H
#define ZEN_SPARSESCHEME_H

#include "zen/Vocabulary.h"

namespace zen::vocab {

enum class SparseScheme {
  /// The whole table all-reduced as a dense tensor (DDP on NCCL).
  Dense,
  /// Every rank's (row index, row values) pairs all-gathered, then summed by
  /// each rank (Horovod, gloo's sparse all-reduce).
  AgSparse,
  /// Recursive doubling over sparse pairs, switching to a dense exchange once
  /// the merged density passes `dense_threshold` (SparCML).
  SparCml,
  /// Fixed blocks of `block_rows` rows; only non-zero blocks are sent,
  /// point-to-point to the block's owner, without balancing (OmniReduce).
  OmniReduce,
  /// Row indices hash-partitioned over all ranks: each rank pushes its pairs
  /// to their owners (COO), the owner sums its share, every rank pulls the
  /// reduced shards (Zen's balanced parallelism).
  Balanced,
  /// Dense reduce-scatter inside each node, a balanced sparse exchange between
  /// nodes, dense all-gather inside each node (Zen's implementation).
  Hierarchical,
};

struct SparseSchemeTraits {
  SparseScheme value;
  const char *spelling;
  /// The baseline that runs this scheme (`zenopt --baseline`), or nullptr.
  const char *baseline;
  /// Takes `block_rows` (OmniReduce's block size).
  bool takesBlockRows;
  /// Takes `dense_threshold` (SparCML's switch to dense).
  bool takesDenseThreshold;
};

inline constexpr SparseSchemeTraits kSparseSchemes[] = {
    {SparseScheme::Dense, "dense", "ddp-dense", false, false},
    {SparseScheme::AgSparse, "agsparse", "horovod-agsparse", false, false},
    {SparseScheme::SparCml, "sparcml", "sparcml", false, true},
    {SparseScheme::OmniReduce, "omnireduce", "omnireduce", true, false},
    {SparseScheme::Balanced, "balanced", nullptr, false, false},
    {SparseScheme::Hierarchical, "hierarchical", nullptr, false, false},
};
static_assert(detail::indexedByValue(kSparseSchemes), "kSparseSchemes out of order");

constexpr const SparseSchemeTraits &traitsOf(SparseScheme scheme) {
  return kSparseSchemes[static_cast<size_t>(scheme)];
}
constexpr const char *toString(SparseScheme scheme) { return traitsOf(scheme).spelling; }
inline std::optional<SparseScheme> parseSparseScheme(std::string_view text) {
  return detail::parse(kSparseSchemes, text);
}

} // namespace zen::vocab

#endif // ZEN_SPARSESCHEME_H

//===- zenrt/SparseSync.h - Row-sparse gradient synchronisation (C++ API) --===//
//
// An embedding table's gradient is row-sparse: only the rows a step looked up are non-zero.
// `allReduce` sums such a gradient over the ranks of an MPI communicator with one of the
// schemes of zen/SparseScheme.h (Zen's design space, issue 39; docs/design.md "Sparse
// synchronisation").
//
// Exact: every scheme's result is bit-identical to adding the ranks' dense gradients in rank
// order (rank 0 + rank 1 + rank 2 + ..., a row a rank did not touch adding +0.0f), so every
// scheme gives the same bits as every other on every rank. Float addition is not associative,
// so no scheme sums partial sums of several ranks: each rank's rows travel unsummed to the
// rank that adds them (the owner of the row or block), which adds them in rank order.
//
//===----------------------------------------------------------------------===//
#ifndef ZENRT_SPARSESYNC_H
#define ZENRT_SPARSESYNC_H

#include "zen/SparseScheme.h"

#include <cstdint>
#include <vector>

namespace zenrt {
class WatchedWaits;
}

namespace zenrt::sparse {

/// A table of `rows` x `rowElements` fp32 values.
struct Table {
  int64_t rows = 0;
  int64_t rowElements = 0;
};

/// A row-sparse gradient: sorted, unique row indices and their rows, row-major
/// (values.size() == indices.size() * rowElements).
struct RowSparse {
  std::vector<int64_t> indices;
  std::vector<float> values;
};

struct Options {
  zen::vocab::SparseScheme scheme = zen::vocab::SparseScheme::Balanced;
  /// OmniReduce's block size in rows (>= 1).
  int64_t blockRows = 256;
  /// SparCML's switch to the dense exchange: taken when the merged density can pass this
  /// (the sum of the ranks' touched rows over the table's rows), in (0, 1].
  double denseThreshold = 0.25;
  /// Hierarchical: ranks per node, nodes being consecutive ranks; it must divide the world
  /// size. 0: the ranks that share memory (MPI_COMM_TYPE_SHARED), which must be consecutive
  /// and as many on every node.
  int ranksPerNode = 0;
  /// Every wait fails with ZENRT_ERR_TIMEOUT after this, naming this rank and the phase.
  double timeoutSeconds = 300;
  /// The caller's watch over the ranks of the communicator (zenrt/WatchedWaits.h; not owned,
  /// null: none). With one, every wait is the watch's, bounded by the watch's timeout (this
  /// one is ignored), and a timeout also names the ranks that did not answer (dead or hung),
  /// by their rank in MPI_COMM_WORLD. Without, a timeout names this rank and the phase only:
  /// a watch is collective to build and needs MPI_THREAD_MULTIPLE, so the caller keeps one
  /// over its calls rather than the sum building one per call.
  WatchedWaits *waits = nullptr;
};

/// Sorts `count` rows given by `indices` (any order, each in [0, table.rows)) and sums
/// duplicates in their order of appearance, starting from +0.0f, as a scatter-add into a
/// zero dense gradient would. Throws zenrt::Error(ZENRT_ERR_INVALID_ARGUMENT) for an index
/// out of range or a null buffer with a non-zero count.
RowSparse coalesce(const Table &table, int64_t count, const int64_t *indices,
                   const float *values);

/// Sums `local` (coalesced) over the ranks of `comm` (an MPI_Comm*, null: MPI_COMM_WORLD;
/// MPI must be initialised with MPI_THREAD_MULTIPLE or be used from one thread) with
/// `options.scheme`. Collective: every rank passes the same table and options. Returns, on
/// every rank, the rows any rank touched (sorted) and their sums in rank order. No other
/// traffic may use `comm` meanwhile. Throws zenrt::Error: ZENRT_ERR_INVALID_ARGUMENT for a bad
/// table, options or input, ZENRT_ERR_TIMEOUT for a wait past the timeout (naming the rank
/// and the phase, and with options.waits the silent ranks), ZENRT_ERR_BACKEND for an MPI error.
RowSparse allReduce(const Table &table, const RowSparse &local, const Options &options,
                    const void *comm = nullptr);

/// Writes `reduced` into the dense table `out` [rows * rowElements]: its rows, and +0.0f
/// everywhere else.
void scatter(const Table &table, const RowSparse &reduced, float *out);

} // namespace zenrt::sparse

#endif // ZENRT_SPARSESYNC_H

//===- Sparse.h - statistics and prices of row-sparse gradients -*- C++ -*-===//
//
// A row-sparse gradient (an embedding table's: a step's gradient is non-zero only in the
// rows it looked up, zen/SparseScheme.h) is described by its sparsity statistics, as Zen
// (Wang et al., OSDI 2025, arXiv 2309.13254) measures them: the density one rank's gradient
// has, how the density grows as ranks' gradients are merged (gamma), and how the non-zero
// rows fall over index ranges (skew). Each SparseScheme is priced from them in one entry
// point, sparseSyncCost. costmodel/README.md "Sparse gradients" documents the model.
//
// All times in microseconds, sizes in bytes.
//
//===----------------------------------------------------------------------===//
#ifndef ZEN_COSTMODEL_SPARSE_H
#define ZEN_COSTMODEL_SPARSE_H

#include "zen/CostModel/CostModel.h"
#include "zen/Errors.h"
#include "zen/SparseScheme.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace zen::cost {

using vocab::SparseScheme;

/// The default popularity model: rows are looked up with Zipf probabilities, row i (1-based,
/// in index order) with probability proportional to i^-s. s = 1 is Zipf's law of word
/// frequencies (Zipf 1949; Piantadosi, "Zipf's word frequency law in natural language",
/// Psychon. Bull. Rev. 2014), and vocabularies are numbered by frequency, so index ranges are
/// skewed as Zen measured (over 60% of non-zeros in the first of 8 partitions).
inline constexpr double kZipfExponent = 1.0;
/// Index-range partitions the skew is measured over (Zen's Figure: 8).
inline constexpr int64_t kSkewPartitions = 8;
/// OmniReduce's block: 256 elements (its default), whole rows of a row-sparse tensor.
inline constexpr int64_t kOmniReduceBlockElements = 256;

/// The shape of one row-sparse gradient: `rows` x `rowElements` fp32 values.
struct SparseTable {
  int64_t rows = 0;
  int64_t rowElements = 0;
  double denseBytes() const { return 4.0 * double(rows) * double(rowElements); }
};

/// What the statistics were taken from.
enum class SparsitySource { Model, Measured };
const char *toString(SparsitySource source); // "model", "measured"

struct SparsityStatistics {
  /// Expected distinct non-zero rows / rows, of one rank's gradient in one step.
  double density = 0;
  /// gamma[k]: the density of 2^k ranks' gradients merged, over `density` (gamma[0] = 1),
  /// for 2^k up to the world size. Non-decreasing, at most 1 / density.
  std::vector<double> gamma;
  /// The share of one rank's non-zero rows in the fullest of 8 equal index-range partitions
  /// (1/8 when even, 1 when all fall in one).
  double skew = 1.0 / kSkewPartitions;
  /// The same over 8 hash partitions (row modulo 8), as hash partitioning spreads them.
  double hashSkew = 1.0 / kSkewPartitions;
  /// Expected share of OmniReduce's blocks (omniReduceBlockRows) holding a non-zero
  /// row in one rank's gradient, and its growth as `gamma` (same powers of two).
  double blockDensity = 0;
  std::vector<double> blockGamma;
  SparsitySource source = SparsitySource::Model;

  /// gamma at `ranks` merged: interpolated in log2(ranks) between the powers of two,
  /// the last value beyond them.
  double gammaAt(double ranks) const;
  /// Density of `ranks` merged gradients: density x gammaAt(ranks), at most 1.
  double mergedDensity(double ranks) const;
  /// The share of non-zero rows in the fullest of `parts` equal index ranges, from `skew`:
  /// the cumulative share of the first fraction x of the rows taken as x^a, the exponent a
  /// fitted to skew at x = 1/8 (a = 1: even). At least 1/parts.
  double rangeShare(int64_t parts) const;
};

/// The statistics of a table looked up `lookupsPerStep` times per rank and step under the
/// Zipf model (kZipfExponent), for gamma up to `worldSize` ranks; deterministic and
/// analytic: rows are grouped where their probabilities differ by less than 0.1%.
SparsityStatistics zipfStatistics(const SparseTable &table, int64_t lookupsPerStep,
                                  int64_t worldSize, double exponent = kZipfExponent);

/// The statistics of a table every sample looks up in the same `lookupsPerStep` rows, the
/// first ones (position ids: rows 0 .. L-1): exact, not modelled. One rank touches
/// min(L, rows) rows and every rank the same ones, so gamma is 1 at every power of two up
/// to `worldSize`; skew and hash skew are those of L consecutive rows.
SparsityStatistics sharedRowsStatistics(const SparseTable &table, int64_t lookupsPerStep,
                                        int64_t worldSize);
/// Statistics measured from an index stream (source `measured`): `samples` holds each
/// sample's row indices, in [0, rows); a rank's step takes `batch` consecutive samples (a
/// trailing part step is left out) and k ranks' steps merged are k consecutive steps. The
/// density, skew and hashSkew are means over the steps, gamma[j] the mean distinct rows of
/// 2^j consecutive steps (2^j up to `maxRanks`) over the density's. Block figures are left
/// for the planner. Throws std::invalid_argument when there are fewer steps than `maxRanks`.
SparsityStatistics measureStatistics(const std::vector<std::vector<int64_t>> &samples,
                                     int64_t rows, int64_t batch, int64_t maxRanks);

/// Mean distinct rows of groups of `ranks` consecutive steps, over `rows` (measureStatistics'
/// steps; any `ranks`, not only powers of two). Needs at least `ranks` steps.
double measuredMergedDensity(const std::vector<std::vector<int64_t>> &samples, int64_t rows,
                             int64_t batch, int64_t ranks);

/// A statistics file as `zenopt sparsity` writes it: its `statistics` object, {density,
/// gamma, skew, hash_skew (optional), source} (other top-level fields are ignored). Strict:
/// duplicate or unknown keys, a density outside (0, 1], gamma not starting at 1 or decreasing,
/// a skew outside [1/8, 1] are zen::Error BadInput naming `source` and the JSON path.
/// A statistics file is a few hundred bytes; this bounds a wrong file's read.
inline constexpr uint64_t kMaxStatisticsFileBytes = uint64_t(1) << 20;
SparsityStatistics parseSparsityStatistics(const std::string &text, const std::string &source);

/// zenopt's `--sparsity` entries, FILE (every row-sparse gradient) or PARAM=FILE, read by
/// parameter ("" for FILE) with parseSparsityStatistics. Throws zen::Error naming the file
/// (Unreadable when missing, BadInput when wrong) or the table given two files.
std::map<std::string, SparsityStatistics> readSparsityStatistics(const std::vector<std::string> &entries);

/// `table`'s statistics in what readSparsityStatistics read: its own file, else the file for
/// every table, else nullopt (the Zipf model prices it).
std::optional<SparsityStatistics> statisticsFor(const std::map<std::string, SparsityStatistics> &byParam,
                                                const std::string &table);

/// What one scheme costs for one tensor; +infinity when the scheme cannot run on the group
/// (hierarchical needs more than one node with more than one rank each).
struct SparseSyncCost {
  SparseScheme scheme = SparseScheme::Dense;
  double timeUs = 0;
  /// Parts of timeUs: the network (collectives, latency included) and the GPU kernels
  /// (compaction, hashing, merging, scatter-add into the dense result).
  double communicationUs = 0;
  double kernelUs = 0;
  /// Bytes one rank sends.
  double wireBytes = 0;
  /// OmniReduce: block rows; SparCML: the merged density it switches to dense past.
  int64_t blockRows = 0;
  double denseThreshold = 0;
};

/// OmniReduce's block in rows: 256 elements' worth, at least one row.
int64_t omniReduceBlockRows(const SparseTable &table);

/// Bytes of one row index on the wire: int32 up to 2^31 rows, int64 beyond.
double indexBytes(const SparseTable &table);

/// The one price of synchronising a row-sparse gradient under `scheme` over `group` (ranks
/// laid out node by node), from its statistics and the cluster's network and memory.
SparseSyncCost sparseSyncCost(const CostModel &model, SparseScheme scheme,
                              const SparseTable &table, const SparsityStatistics &stats,
                              Group group);

/// Every scheme's price, cheapest first (ties in SparseScheme order); infinite ones last.
std::vector<SparseSyncCost> rankSparseSchemes(const CostModel &model, const SparseTable &table,
                                              const SparsityStatistics &stats, Group group);

} // namespace zen::cost

#endif // ZEN_COSTMODEL_SPARSE_H

//===- SparseSyncTest.cpp - every sparse scheme against the rank-ordered dense sum ------===//
//
// Run under mpirun (np 2 and 4, test/unit/runtime/CMakeLists.txt). Every rank generates every
// rank's gradient from the same seeds, so each computes the reference itself: the ranks'
// dense gradients (scatter-adds of their raw rows, duplicates included) added in rank order.
// Every scheme must give that table bit for bit, and the rows any rank touched.
//
//===----------------------------------------------------------------------===//
#include "MpiTestMain.h"
#include "zenrt/Runtime.h"
#include "zenrt/SparseSync.h"
#include "zenrt/WatchedWaits.h"

#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace {

using zen::vocab::SparseScheme;
using zenrt::sparse::Table;

/// One rank's raw rows: indices in any order, duplicates allowed.
struct Raw {
  std::vector<int64_t> indices;
  std::vector<float> values;
};

struct Case {
  std::string name;
  Table table;
  /// Rows a rank draws (before duplicates merge); -1: every row, in reverse order.
  std::vector<int64_t> drawsPerRank;
  uint32_t seed = 1;
};

int worldRank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}
int worldSize() {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

/// Values over many magnitudes and both signs (and some -0.0f), so that adding in another
/// order changes bits.
Raw rawOf(const Case &c, int rank) {
  const int64_t draws = c.drawsPerRank[size_t(rank) % c.drawsPerRank.size()];
  std::mt19937_64 rng(c.seed * 1000003ULL + uint64_t(rank));
  std::uniform_int_distribution<int64_t> row(0, std::max<int64_t>(c.table.rows - 1, 0));
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-12, 12);
  Raw raw;
  const int64_t count = draws < 0 ? c.table.rows : draws;
  for (int64_t k = 0; k < count; ++k) {
    // Skewed: half the draws hit the first eighth of the table, as Zen measured.
    int64_t index = draws < 0 ? c.table.rows - 1 - k : row(rng);
    if (draws >= 0 && k % 2 == 0)
      index /= 8;
    raw.indices.push_back(index);
    for (int64_t e = 0; e < c.table.rowElements; ++e)
      raw.values.push_back(k % 7 == 3 && e == 0 ? -0.0f
                                                : std::ldexp(unit(rng), exponent(rng)));
  }
  return raw;
}

std::vector<float> denseOf(const Table &table, const Raw &raw) {
  std::vector<float> dense(size_t(table.rows * table.rowElements), 0.0f);
  for (size_t k = 0; k < raw.indices.size(); ++k)
    for (int64_t e = 0; e < table.rowElements; ++e)
      dense[size_t(raw.indices[k] * table.rowElements + e)] +=
          raw.values[k * size_t(table.rowElements) + size_t(e)];
  return dense;
}

/// The ranks' dense gradients added in `order`.
std::vector<float> summed(const Case &c, const std::vector<int> &order) {
  std::vector<float> sum = denseOf(c.table, rawOf(c, order[0]));
  for (size_t k = 1; k < order.size(); ++k) {
    const std::vector<float> next = denseOf(c.table, rawOf(c, order[k]));
    for (size_t i = 0; i < sum.size(); ++i)
      sum[i] += next[i];
  }
  return sum;
}

std::vector<int> rankOrder() {
  std::vector<int> order;
  for (int r = 0; r < worldSize(); ++r)
    order.push_back(r);
  return order;
}

std::set<int64_t> touched(const Case &c) {
  std::set<int64_t> rows;
  for (int r = 0; r < worldSize(); ++r)
    for (int64_t index : rawOf(c, r).indices)
      rows.insert(index);
  return rows;
}

std::vector<zenrt::sparse::Options> everyScheme() {
  std::vector<zenrt::sparse::Options> all;
  for (const auto &traits : zen::vocab::kSparseSchemes) {
    zenrt::sparse::Options options;
    options.scheme = traits.value;
    options.timeoutSeconds = 60;
    all.push_back(options);
  }
  // The variants: small and odd blocks, SparCML staying sparse and going dense, nodes of
  // one rank and of two.
  zenrt::sparse::Options variant;
  variant.timeoutSeconds = 60;
  variant.scheme = SparseScheme::OmniReduce;
  for (int64_t blockRows : {1, 7})
    variant.blockRows = blockRows, all.push_back(variant);
  variant.scheme = SparseScheme::SparCml;
  for (double threshold : {1.0, 0.001})
    variant.denseThreshold = threshold, all.push_back(variant);
  variant.scheme = SparseScheme::Hierarchical;
  for (int perNode : {1, 2})
    if (worldSize() % perNode == 0)
      variant.ranksPerNode = perNode, all.push_back(variant);
  return all;
}

std::string describe(const zenrt::sparse::Options &options) {
  return std::string(zen::vocab::toString(options.scheme)) + " (block_rows " +
         std::to_string(options.blockRows) + ", dense_threshold " +
         std::to_string(options.denseThreshold) + ", ranks per node " +
         std::to_string(options.ranksPerNode) + ")";
}

void expectExact(const Case &c) {
  const Raw raw = rawOf(c, worldRank());
  const zenrt::sparse::RowSparse local = zenrt::sparse::coalesce(
      c.table, int64_t(raw.indices.size()), raw.indices.data(), raw.values.data());
  const std::vector<float> reference = summed(c, rankOrder());
  const std::set<int64_t> rows = touched(c);
  for (const zenrt::sparse::Options &options : everyScheme()) {
    SCOPED_TRACE(c.name + ", " + describe(options));
    const zenrt::sparse::RowSparse reduced = zenrt::sparse::allReduce(c.table, local, options);
    EXPECT_EQ(std::vector<int64_t>(rows.begin(), rows.end()), reduced.indices);
    std::vector<float> out(reference.size(), 1.0f);
    zenrt::sparse::scatter(c.table, reduced, out.data());
    ASSERT_EQ(reference.size(), out.size());
    size_t differing = 0;
    for (size_t i = 0; i < out.size(); ++i)
      differing += std::memcmp(&out[i], &reference[i], sizeof(float)) != 0;
    EXPECT_EQ(differing, 0u) << "elements differing from the rank-ordered dense sum";
  }
}

TEST(SparseSync, SparseSkewedRowsWithDuplicates) {
  expectExact({"sparse", {1000, 8}, {60}, 1});
}

TEST(SparseSync, EmptyRank) {
  expectExact({"rank 1 empty", {500, 4}, {40, 0, 25, 0}, 2});
}

TEST(SparseSync, EveryRankEmpty) { expectExact({"all empty", {64, 2}, {0}, 3}); }

TEST(SparseSync, EveryRowTouched) {
  expectExact({"every row", {96, 5}, {-1}, 4});
}

TEST(SparseSync, RowsNotDividedByTheRanks) {
  expectExact({"37 rows", {37, 3}, {30, 11, 37, 5}, 5});
}

TEST(SparseSync, DenseDraws) {
  // More draws than rows: heavy duplicates, nearly every row touched.
  expectExact({"dense draws", {41, 6}, {200}, 6});
}

// The reference is sensitive to the order of the ranks: a scheme summing in another order
// would fail the checks above.
TEST(SparseSync, ReferenceDependsOnRankOrder) {
  if (worldSize() < 3)
    GTEST_SKIP() << "two ranks add commutatively";
  const Case c{"order", {200, 8}, {150}, 7};
  std::vector<int> reversed = rankOrder();
  std::reverse(reversed.begin(), reversed.end());
  const std::vector<float> forward = summed(c, rankOrder()), backward = summed(c, reversed);
  EXPECT_NE(0, std::memcmp(forward.data(), backward.data(), forward.size() * sizeof(float)));
}

TEST(SparseSync, CoalesceSumsDuplicatesInOrder) {
  const Table table{4, 1};
  const std::vector<int64_t> indices{3, 1, 3, 3};
  const std::vector<float> values{1e8f, 2.0f, 1.0f, -1e8f};
  const auto rows = zenrt::sparse::coalesce(table, 4, indices.data(), values.data());
  EXPECT_EQ(rows.indices, (std::vector<int64_t>{1, 3}));
  // ((0 + 1e8) + 1) - 1e8 = 0 in float: the order of appearance, not a sorted one.
  EXPECT_EQ(rows.values, (std::vector<float>{2.0f, 0.0f}));
}

TEST(SparseSync, RefusesBadInput) {
  const Table table{10, 2};
  const std::vector<int64_t> outside{10};
  const std::vector<float> values{1, 2};
  try {
    zenrt::sparse::coalesce(table, 1, outside.data(), values.data());
    FAIL() << "an index past the table was accepted";
  } catch (const zenrt::Error &error) {
    EXPECT_EQ(error.status, ZENRT_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(error.what()).find("row index 10 at 0 is outside [0, 10)"),
              std::string::npos)
        << error.what();
  }
  zenrt::sparse::RowSparse unsorted{{4, 2}, {1, 2, 3, 4}};
  zenrt::sparse::Options options;
  EXPECT_THROW(zenrt::sparse::allReduce(table, unsorted, options), zenrt::Error);
  options.blockRows = 0;
  EXPECT_THROW(zenrt::sparse::allReduce(table, {}, options), zenrt::Error);
}

// The C API on the world, with duplicates: the same bits as the C++ API's reference.
TEST(SparseSync, CApi) {
  int rank = -1, size = -1;
  ASSERT_EQ(zenrt_world_init(&rank, &size), ZENRT_OK) << zenrt_last_error();
  const Case c{"c api", {300, 4}, {50, 20}, 8};
  const Raw raw = rawOf(c, rank);
  const std::vector<float> reference = summed(c, rankOrder());
  std::vector<std::string> schemes{"omnireduce:7", "sparcml:0.001", "sparcml:1"};
  for (const auto &traits : zen::vocab::kSparseSchemes)
    schemes.push_back(traits.spelling);
  for (const std::string &scheme : schemes) {
    SCOPED_TRACE(scheme);
    std::vector<float> out(reference.size(), 1.0f);
    int64_t touchedRows = -1;
    ASSERT_EQ(zenrt_sparse_allreduce(scheme.c_str(), c.table.rows, c.table.rowElements,
                                     int64_t(raw.indices.size()), raw.indices.data(),
                                     raw.values.data(), out.data(), &touchedRows, 60),
              ZENRT_OK)
        << zenrt_last_error();
    EXPECT_EQ(touchedRows, int64_t(touched(c).size()));
    EXPECT_EQ(0, std::memcmp(out.data(), reference.data(), out.size() * sizeof(float)));
  }
  // A rank that refuses its arguments makes every rank fail, none waits.
  const bool refuse = rank == size - 1;
  std::vector<float> out(reference.size());
  const int status = zenrt_sparse_allreduce(refuse ? "bogus" : "balanced", c.table.rows,
                                            c.table.rowElements, 0, nullptr, nullptr,
                                            out.data(), nullptr, 60);
  EXPECT_EQ(status, refuse ? ZENRT_ERR_INVALID_ARGUMENT : ZENRT_ERR_MISMATCH);
  if (refuse)
    EXPECT_NE(std::string(zenrt_last_error()).find("unknown scheme 'bogus'"), std::string::npos)
        << zenrt_last_error();
  // A parameter the scheme does not take, or out of its range.
  for (const char *bad : {"balanced:3", "omnireduce:0", "omnireduce:2.5", "sparcml:1.5"}) {
    EXPECT_EQ(zenrt_sparse_allreduce(bad, c.table.rows, c.table.rowElements, 0, nullptr, nullptr,
                                     out.data(), nullptr, 60),
              ZENRT_ERR_INVALID_ARGUMENT)
        << bad;
    EXPECT_NE(std::string(zenrt_last_error()).find(std::string("scheme '") + bad + "': "),
              std::string::npos)
        << zenrt_last_error();
  }
}

// A rank that never joins: the others fail at the timeout naming themselves and the phase,
// and with a watch (Options::waits) the rank that stopped answering, by its rank in the job
// (last: the absent rank's messages stay unreceived, on communicators of this test's own).
TEST(SparseSync, TimeoutNamesRankAndPhase) {
  if (worldSize() < 2)
    GTEST_SKIP() << "needs a rank to be absent";
  const int absent = worldSize() - 1;
  MPI_Comm unwatched = MPI_COMM_NULL, watched = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &unwatched);
  MPI_Comm_dup(MPI_COMM_WORLD, &watched);
  const Table table{100, 2};
  zenrt::sparse::Options options;
  options.scheme = SparseScheme::Balanced;
  options.timeoutSeconds = 1;
  auto expectTimeout = [&](MPI_Comm *comm, const std::string &lost) {
    const zenrt::sparse::RowSparse local{{worldRank()}, {1.0f, 2.0f}};
    try {
      zenrt::sparse::allReduce(table, local, options, comm);
      ADD_FAILURE() << "no timeout";
    } catch (const zenrt::Error &error) {
      EXPECT_EQ(error.status, ZENRT_ERR_TIMEOUT);
      EXPECT_EQ(std::string(error.what()),
                "rank " + std::to_string(worldRank()) +
                    ": sparse all-reduce: balanced exchange push (sizes) timed out after 1 s" +
                    lost);
    }
  };
  if (worldRank() != absent)
    expectTimeout(&unwatched, "");
  MPI_Barrier(MPI_COMM_WORLD);
  // Every rank starts a watch (together: its start-up is bounded by the timeout too); the absent rank drops its own (it answers no more) and stays
  // away.
  auto waits = std::make_unique<zenrt::WatchedWaits>(&watched, 1.0);
  if (worldRank() == absent) {
    waits.reset();
  } else {
    options.waits = waits.get();
    expectTimeout(&watched, ": waiting for rank " + std::to_string(absent) +
                                " (no answer within 0.5 s: dead or hung)");
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

} // namespace

int main(int argc, char **argv) { return runMpiTests(argc, argv); }

//===- SparseSync.cpp - Row-sparse gradient synchronisation over MPI ------===//
//
// Every scheme moves each rank's rows, unsummed and tagged with the rank, to the rank that
// sums them (RankOrderedSum), which adds them in rank order; the schemes differ in the route
// (who owns a row or block, how many hops, dense or sparse encoding), which is what the cost
// model prices. All traffic is point-to-point (Group::exchange), every wait bounded.
//
//===----------------------------------------------------------------------===//
#include "zenrt/SparseSync.h"

#include "Deterministic.h"

#include "MpiSupport.h"
#include "Mutation.h"
#include "zenrt/Runtime.h"
#include "zenrt/WatchedWaits.h"

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <map>
#include <numeric>
#include <string>
#include <vector>

namespace zenrt::sparse {
namespace {

using zen::vocab::SparseScheme;

Error invalid(const std::string &message) {
  return Error(ZENRT_ERR_INVALID_ARGUMENT, "sparse all-reduce: " + message);
}
Error internal(const std::string &message) {
  return Error(ZENRT_ERR_INTERNAL, "sparse all-reduce: " + message);
}

/// SplitMix64 spreads consecutive row indices (skewed tables touch their first rows most)
/// evenly over owners and hash slots.
using detail::splitMix64;

/// The rank (of `parts`) that sums row `index` under Zen's balanced partition. The high
/// bits: the low ones pick hash-table slots.
int hashOwner(int64_t index, int parts) {
  return int((splitMix64(uint64_t(index)) >> 32) % uint64_t(parts));
}

/// First row of part `part` when `total` rows are cut into `parts` consecutive ranges.
int64_t rangeBegin(int64_t total, int parts, int part) { return total * part / parts; }

size_t bitmapWords(int64_t bits) { return size_t((bits + 63) / 64); }
bool testBit(const int64_t *words, int64_t bit) {
  return (uint64_t(words[bit / 64]) >> (bit % 64)) & 1;
}
void setBit(int64_t *words, int64_t bit) {
  words[bit / 64] = int64_t(uint64_t(words[bit / 64]) | (uint64_t(1) << (bit % 64)));
}

/// One rank's rows, unsummed, on their way to the rank that adds them.
struct Contribution {
  int source = 0;  // the rank of the communicator that touched them
  RowSparse rows;
};

/// What one rank sends another in one phase.
struct Message {
  std::vector<int64_t> ints;
  std::vector<float> floats;
};

void append(Message &message, const Contribution &contribution) {
  message.ints.push_back(contribution.source);
  message.ints.push_back(int64_t(contribution.rows.indices.size()));
  message.ints.insert(message.ints.end(), contribution.rows.indices.begin(),
                      contribution.rows.indices.end());
  message.floats.insert(message.floats.end(), contribution.rows.values.begin(),
                        contribution.rows.values.end());
}

/// The contributions `append` wrote into `message`, in order.
std::vector<Contribution> contributionsOf(const Message &message, int64_t rowElements) {
  std::vector<Contribution> out;
  size_t at = 0, valuesAt = 0;
  while (at < message.ints.size()) {
    if (at + 2 > message.ints.size())
      throw internal("a truncated message");
    Contribution contribution;
    contribution.source = int(message.ints[at]);
    const size_t count = size_t(message.ints[at + 1]);
    at += 2;
    const size_t floats = count * size_t(rowElements);
    if (at + count > message.ints.size() || valuesAt + floats > message.floats.size())
      throw internal("a truncated message");
    contribution.rows.indices.assign(message.ints.begin() + at, message.ints.begin() + at + count);
    contribution.rows.values.assign(message.floats.begin() + valuesAt,
                                    message.floats.begin() + valuesAt + floats);
    at += count;
    valuesAt += floats;
    out.push_back(std::move(contribution));
  }
  return out;
}

/// Sums rows given in rank order as the dense reference does: row = c_0 + c_1 + ... +
/// c_{n-1}, where c_r is rank r's row or +0.0f. Adding +0.0f changes only a -0.0f sum (to
/// +0.0f), so a rank that did not touch the row costs one addition per gap, not per rank.
/// Rows are found through an open-addressing hash table keyed by the row index.
class RankOrderedSum {
public:
  RankOrderedSum(int64_t rowElements, int worldSize, size_t maxRows)
      : rowElements(size_t(rowElements)), worldSize(worldSize) {
    size_t slots = 16;
    while (slots < 2 * maxRows)
      slots *= 2;
    keys.assign(slots, kEmpty);
    rowOfSlot.assign(slots, 0);
    this->maxRows = maxRows;
  }

  /// Adds rank `source`'s row `index`; sources come in non-decreasing order.
  void add(int source, int64_t index, const float *row) {
    const size_t slot = slotOf(index);
    float *sum;
    if (keys[slot] == kEmpty) {
      if (indices.size() == maxRows)
        throw internal("more rows than the exchange announced");
      keys[slot] = index;
      rowOfSlot[slot] = indices.size();
      indices.push_back(index);
      lastSource.push_back(source);
      sums.resize(sums.size() + rowElements);
      sum = &sums[sums.size() - rowElements];
      if (source == 0)
        std::copy(row, row + rowElements, sum);
      else
        for (size_t e = 0; e < rowElements; ++e)
          sum[e] = 0.0f + row[e];
      return;
    }
    const size_t at = rowOfSlot[slot];
    if (source < lastSource[at])
      throw internal("rows added out of rank order");
    sum = &sums[at * rowElements];
    if (source > lastSource[at] + 1)
      addZero(sum);
    for (size_t e = 0; e < rowElements; ++e)
      sum[e] += row[e];
    lastSource[at] = source;
  }

  void add(const Contribution &contribution) {
    for (size_t i = 0; i < contribution.rows.indices.size(); ++i)
      add(contribution.source, contribution.rows.indices[i],
          &contribution.rows.values[i * rowElements]);
  }

  /// The summed rows, sorted by index.
  RowSparse finish() {
    std::vector<size_t> order(indices.size());
    std::iota(order.begin(), order.end(), size_t(0));
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return indices[a] < indices[b]; });
    RowSparse out;
    out.indices.reserve(order.size());
    out.values.resize(order.size() * rowElements);
    for (size_t k = 0; k < order.size(); ++k) {
      float *sum = &sums[order[k] * rowElements];
      if (lastSource[order[k]] < worldSize - 1)
        addZero(sum);
      out.indices.push_back(indices[order[k]]);
      std::copy(sum, sum + rowElements, &out.values[k * rowElements]);
    }
    return out;
  }

private:
  static constexpr int64_t kEmpty = -1;

  size_t slotOf(int64_t index) const {
    const size_t mask = keys.size() - 1;
    size_t slot = size_t(splitMix64(uint64_t(index))) & mask;
    while (keys[slot] != kEmpty && keys[slot] != index) {
      if (mutated(Mutation::SparseMergesCollision))
        break;
      slot = (slot + 1) & mask;
    }
    return slot;
  }

  /// The +0.0f of ranks that did not touch the row.
  void addZero(float *sum) const {
    for (size_t e = 0; e < rowElements; ++e)
      sum[e] += 0.0f;
  }

  size_t rowElements;
  int worldSize;
  size_t maxRows = 0;
  std::vector<int64_t> keys;
  std::vector<size_t> rowOfSlot;
  std::vector<int64_t> indices;
  std::vector<int> lastSource;
  std::vector<float> sums;
};

/// The ranks of a communicator and point-to-point exchanges among some of them.
class Group {
public:
  Group(MPI_Comm comm, double timeoutSeconds, WatchedWaits *waits)
      : comm(comm), timeoutSeconds(timeoutSeconds), waits(waits) {
    detail::checkMpi(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
    detail::checkMpi(MPI_Comm_size(comm, &size), "MPI_Comm_size");
  }

  /// Sends sends[k] to peers[k] and returns what each of them sent this rank (collective
  /// among `peers`, which holds this rank at most once; each peer lists this one).
  std::vector<Message> exchange(const std::vector<int> &peers, std::vector<Message> sends,
                                const std::string &phase) {
    enum Tag { kSizes = 1, kInts, kFloats };
    const size_t count = peers.size();
    std::vector<Message> received(count);
    std::vector<int64_t> sizesOut(2 * count), sizesIn(2 * count, 0);
    std::vector<MPI_Request> requests;
    for (size_t k = 0; k < count; ++k) {
      sizesOut[2 * k] = int64_t(sends[k].ints.size());
      sizesOut[2 * k + 1] = int64_t(sends[k].floats.size());
      if (sends[k].ints.size() > size_t(INT_MAX) || sends[k].floats.size() > size_t(INT_MAX))
        throw invalid(phase + ": a message to rank " + std::to_string(peers[k]) +
                      " exceeds 2^31 elements");
      if (peers[k] == rank)
        continue;
      requests.emplace_back();
      detail::checkMpi(MPI_Irecv(&sizesIn[2 * k], 2, MPI_INT64_T, peers[k], kSizes, comm,
                                 &requests.back()),
                       "MPI_Irecv");
      requests.emplace_back();
      detail::checkMpi(MPI_Isend(&sizesOut[2 * k], 2, MPI_INT64_T, peers[k], kSizes, comm,
                                 &requests.back()),
                       "MPI_Isend");
    }
    waitAll(requests, phase + " (sizes)");
    requests.clear();
    for (size_t k = 0; k < count; ++k) {
      if (peers[k] == rank) {
        received[k] = std::move(sends[k]);
        continue;
      }
      received[k].ints.resize(size_t(sizesIn[2 * k]));
      received[k].floats.resize(size_t(sizesIn[2 * k + 1]));
      auto post = [&](auto start, void *data, size_t elements, MPI_Datatype type, int tag,
                      const char *what) {
        requests.emplace_back();
        detail::checkMpi(start(data, int(elements), type, peers[k], tag, comm, &requests.back()),
                         what);
      };
      post(MPI_Irecv, received[k].ints.data(), received[k].ints.size(), MPI_INT64_T, kInts,
           "MPI_Irecv");
      post(MPI_Irecv, received[k].floats.data(), received[k].floats.size(), MPI_FLOAT, kFloats,
           "MPI_Irecv");
      post([](void *data, int n, MPI_Datatype type, int to, int tag, MPI_Comm c,
              MPI_Request *request) { return MPI_Isend(data, n, type, to, tag, c, request); },
           sends[k].ints.data(), sends[k].ints.size(), MPI_INT64_T, kInts, "MPI_Isend");
      post([](void *data, int n, MPI_Datatype type, int to, int tag, MPI_Comm c,
              MPI_Request *request) { return MPI_Isend(data, n, type, to, tag, c, request); },
           sends[k].floats.data(), sends[k].floats.size(), MPI_FLOAT, kFloats, "MPI_Isend");
    }
    waitAll(requests, phase);
    return received;
  }

  /// Every rank's value of `value`.
  std::vector<int64_t> gather(int64_t value, const std::string &phase) {
    std::vector<int> everyone(size_t(size), 0);
    std::iota(everyone.begin(), everyone.end(), 0);
    std::vector<Message> sends(everyone.size(), Message{{value}, {}});
    std::vector<int64_t> values;
    for (const Message &message : exchange(everyone, std::move(sends), phase)) {
      if (message.ints.size() != 1)
        throw internal(phase + ": a malformed value");
      values.push_back(message.ints[0]);
    }
    return values;
  }

  MPI_Comm comm;
  double timeoutSeconds;
  WatchedWaits *waits;  // the caller's, or null
  int rank = 0, size = 1;

private:
  void waitAll(std::vector<MPI_Request> &requests, const std::string &phase) {
    auto done = [&] {
      int complete = 0;
      detail::checkMpi(
          MPI_Testall(int(requests.size()), requests.data(), &complete, MPI_STATUSES_IGNORE),
          "MPI_Testall");
      return complete != 0;
    };
    auto describe = [&] { return "sparse all-reduce: " + phase; };
    if (waits)
      waits->await(done, describe);
    else
      detail::waitWatched(done, timeoutSeconds, rank, describe, nullptr);
  }
};

/// Zen's balanced parallelism over `peers` (this rank is peers[self]) for the rows in
/// [begin, end): every contribution's rows are pushed (COO) to their hash owner among the
/// peers, which sums them in rank order, and every peer pulls every owner's reduced rows (a
/// bitmap over the rows the owner owns, then their values). `contributions` are in rank
/// order, and every contribution of peers[k] comes before every one of peers[k + 1].
RowSparse balanced(Group &group, const std::vector<int> &peers, int self,
                   const std::vector<Contribution> &contributions, int64_t begin, int64_t end,
                   int64_t rowElements, const std::string &phase) {
  const int parts = int(peers.size());
  const size_t width = size_t(rowElements);
  std::vector<Message> push(static_cast<size_t>(parts));
  for (const Contribution &contribution : contributions) {
    std::vector<Contribution> byOwner(static_cast<size_t>(parts));
    for (size_t i = 0; i < contribution.rows.indices.size(); ++i) {
      const int64_t index = contribution.rows.indices[i];
      int owner = hashOwner(index, parts);
      if (mutated(Mutation::SparseWrongPartition) && self == parts - 1)
        owner = (owner + 1) % parts;
      Contribution &to = byOwner[size_t(owner)];
      to.rows.indices.push_back(index);
      to.rows.values.insert(to.rows.values.end(), &contribution.rows.values[i * width],
                            &contribution.rows.values[(i + 1) * width]);
    }
    for (int owner = 0; owner < parts; ++owner) {
      byOwner[size_t(owner)].source = contribution.source;
      if (!byOwner[size_t(owner)].rows.indices.empty())
        append(push[size_t(owner)], byOwner[size_t(owner)]);
    }
  }
  std::vector<Message> pushed = group.exchange(peers, std::move(push), phase + " push");

  std::vector<std::vector<Contribution>> arrived;
  size_t maxRows = 0;
  for (const Message &message : pushed) {
    arrived.push_back(contributionsOf(message, rowElements));
    for (const Contribution &contribution : arrived.back())
      maxRows += contribution.rows.indices.size();
  }
  RankOrderedSum sum(rowElements, group.size, maxRows);
  for (const auto &fromPeer : arrived)
    for (const Contribution &contribution : fromPeer)
      sum.add(contribution);
  const RowSparse reduced = sum.finish();

  // The pull: a bit per row this rank owns, in index order, then the values of the set ones.
  Message shard;
  {
    int64_t owned = 0;
    for (int64_t index = begin; index < end; ++index)
      owned += hashOwner(index, parts) == self;
    shard.ints.assign(bitmapWords(owned), 0);
    int64_t position = 0;
    size_t next = 0;
    for (int64_t index = begin; index < end && next < reduced.indices.size(); ++index) {
      if (hashOwner(index, parts) != self)
        continue;
      while (next < reduced.indices.size() && reduced.indices[next] < index)
        ++next;  // a row pushed to the wrong owner (a mutant): left out
      if (next < reduced.indices.size() && reduced.indices[next] == index) {
        setBit(shard.ints.data(), position);
        shard.floats.insert(shard.floats.end(), &reduced.values[next * width],
                            &reduced.values[(next + 1) * width]);
        ++next;
      }
      ++position;
    }
  }
  std::vector<Message> shards =
      group.exchange(peers, std::vector<Message>(size_t(parts), shard), phase + " pull");

  std::vector<int64_t> owned(size_t(parts), 0);
  for (int64_t index = begin; index < end; ++index)
    ++owned[size_t(hashOwner(index, parts))];
  for (int owner = 0; owner < parts; ++owner)
    if (shards[size_t(owner)].ints.size() != bitmapWords(owned[size_t(owner)]))
      throw internal(phase + ": rank " + std::to_string(peers[size_t(owner)]) +
                     " sent a bitmap of another shard");
  RowSparse out;
  std::vector<int64_t> position(size_t(parts), 0);
  std::vector<size_t> valuesAt(size_t(parts), 0);
  for (int64_t index = begin; index < end; ++index) {
    const size_t owner = size_t(hashOwner(index, parts));
    if (!testBit(shards[owner].ints.data(), position[owner]++))
      continue;
    if (valuesAt[owner] + width > shards[owner].floats.size())
      throw internal(phase + ": rank " + std::to_string(peers[owner]) +
                     " sent fewer rows than its bitmap sets");
    out.indices.push_back(index);
    out.values.insert(out.values.end(), &shards[owner].floats[valuesAt[owner]],
                      &shards[owner].floats[valuesAt[owner] + width]);
    valuesAt[owner] += width;
  }
  return out;
}

/// Dense inside nodes of `ranksPerNode` consecutive ranks, balanced between them: each local
/// rank j receives every node peer's rows of row range j as a dense block (and a bitmap of
/// the rows touched), runs the balanced exchange of those rows with the local ranks j of the
/// other nodes, and sends the reduced range, dense, to every node peer. One node is the
/// dense all-reduce (a reduce-scatter then an all-gather, owner-computed).
RowSparse hierarchical(Group &group, const Table &table, const RowSparse &local,
                       int ranksPerNode) {
  const int nodes = group.size / ranksPerNode, node = group.rank / ranksPerNode,
            localRank = group.rank % ranksPerNode;
  const size_t width = size_t(table.rowElements);
  std::vector<int> nodePeers, crossPeers;
  for (int j = 0; j < ranksPerNode; ++j)
    nodePeers.push_back(node * ranksPerNode + j);
  for (int k = 0; k < nodes; ++k)
    crossPeers.push_back(k * ranksPerNode + localRank);

  // A dense block of the rows of range j with a bitmap of those in `rows`.
  auto denseBlock = [&](const RowSparse &rows, int j) {
    const int64_t begin = rangeBegin(table.rows, ranksPerNode, j),
                  end = rangeBegin(table.rows, ranksPerNode, j + 1);
    Message block;
    block.ints.assign(bitmapWords(end - begin), 0);
    block.floats.assign(size_t(end - begin) * width, 0.0f);
    auto first = std::lower_bound(rows.indices.begin(), rows.indices.end(), begin);
    for (auto at = first; at != rows.indices.end() && *at < end; ++at) {
      const size_t i = size_t(at - rows.indices.begin());
      setBit(block.ints.data(), *at - begin);
      std::copy(&rows.values[i * width], &rows.values[(i + 1) * width],
                &block.floats[size_t(*at - begin) * width]);
    }
    return block;
  };
  // The touched rows of a dense block of range j.
  auto rowsOf = [&](const Message &block, int j, int peer) {
    const int64_t begin = rangeBegin(table.rows, ranksPerNode, j),
                  end = rangeBegin(table.rows, ranksPerNode, j + 1);
    if (block.ints.size() != bitmapWords(end - begin) ||
        block.floats.size() != size_t(end - begin) * width)
      throw internal("rank " + std::to_string(peer) + " sent a block of another range");
    RowSparse rows;
    for (int64_t index = begin; index < end; ++index)
      if (testBit(block.ints.data(), index - begin)) {
        rows.indices.push_back(index);
        const float *row = &block.floats[size_t(index - begin) * width];
        rows.values.insert(rows.values.end(), row, row + width);
      }
    return rows;
  };

  std::vector<Message> scatter;
  for (int j = 0; j < ranksPerNode; ++j)
    scatter.push_back(denseBlock(local, j));
  std::vector<Message> blocks =
      group.exchange(nodePeers, std::move(scatter), "dense scatter inside the node");
  std::vector<Contribution> contributions;
  for (int j = 0; j < ranksPerNode; ++j)
    contributions.push_back({nodePeers[size_t(j)], rowsOf(blocks[size_t(j)], localRank,
                                                          nodePeers[size_t(j)])});

  const RowSparse reduced =
      balanced(group, crossPeers, node, contributions,
               rangeBegin(table.rows, ranksPerNode, localRank),
               rangeBegin(table.rows, ranksPerNode, localRank + 1), table.rowElements,
               "balanced exchange between nodes");

  std::vector<Message> gathered =
      group.exchange(nodePeers, std::vector<Message>(size_t(ranksPerNode),
                                                     denseBlock(reduced, localRank)),
                     "dense gather inside the node");
  RowSparse out;
  for (int j = 0; j < ranksPerNode; ++j) {
    RowSparse range = rowsOf(gathered[size_t(j)], j, nodePeers[size_t(j)]);
    out.indices.insert(out.indices.end(), range.indices.begin(), range.indices.end());
    out.values.insert(out.values.end(), range.values.begin(), range.values.end());
  }
  return out;
}

std::vector<int> everyRank(const Group &group) {
  std::vector<int> ranks(size_t(group.size), 0);
  std::iota(ranks.begin(), ranks.end(), 0);
  return ranks;
}

/// AllGather of every rank's pairs; each rank sums them all (Horovod, gloo).
RowSparse agSparse(Group &group, const Table &table, const RowSparse &local) {
  Message own;
  append(own, {group.rank, local});
  std::vector<Message> all = group.exchange(
      everyRank(group), std::vector<Message>(size_t(group.size), own), "all-gather of pairs");
  std::vector<std::vector<Contribution>> arrived;
  size_t maxRows = 0;
  for (const Message &message : all) {
    arrived.push_back(contributionsOf(message, table.rowElements));
    for (const Contribution &contribution : arrived.back())
      maxRows += contribution.rows.indices.size();
  }
  RankOrderedSum sum(table.rowElements, group.size, maxRows);
  for (const auto &fromRank : arrived)
    for (const Contribution &contribution : fromRank)
      sum.add(contribution);
  return sum.finish();
}

/// SparCML: recursive doubling over the pairs (log2 n rounds; the ranks past the largest
/// power of two hand theirs to a partner first and get the result from it last). Its switch
/// to dense is decided from every rank's count before the first round: when the merged
/// density can pass the threshold the exchange is dense from the start, since exactness keeps
/// each rank's rows apart until they are summed, so a switch after some rounds would send
/// them again.
RowSparse sparCml(Group &group, const Table &table, const RowSparse &local,
                  double denseThreshold) {
  const std::vector<int64_t> counts = group.gather(int64_t(local.indices.size()),
                                                   "exchange of row counts");
  const int64_t total = std::accumulate(counts.begin(), counts.end(), int64_t(0));
  if (table.rows > 0 && double(std::min(total, table.rows)) > denseThreshold * double(table.rows))
    return hierarchical(group, table, local, group.size);

  std::vector<Contribution> held{{group.rank, local}};
  auto trade = [&](int partner, bool send, const std::string &phase) {
    Message out;
    if (send)
      for (const Contribution &contribution : held)
        append(out, contribution);
    Message in = std::move(group.exchange({partner}, {std::move(out)}, phase)[0]);
    for (Contribution &contribution : contributionsOf(in, table.rowElements))
      held.push_back(std::move(contribution));
    std::sort(held.begin(), held.end(),
              [](const Contribution &a, const Contribution &b) { return a.source < b.source; });
  };
  int powerOfTwo = 1;
  while (powerOfTwo * 2 <= group.size)
    powerOfTwo *= 2;
  const int extra = group.size - powerOfTwo;
  if (group.rank < extra)
    trade(group.rank + powerOfTwo, false, "hand-over from rank " +
                                              std::to_string(group.rank + powerOfTwo));
  else if (group.rank >= powerOfTwo) {
    trade(group.rank - powerOfTwo, true, "hand-over to rank " +
                                             std::to_string(group.rank - powerOfTwo));
    held.clear();
  }
  if (group.rank < powerOfTwo)
    for (int distance = 1; distance < powerOfTwo; distance *= 2)
      trade(group.rank ^ distance, true,
            "recursive doubling with rank " + std::to_string(group.rank ^ distance));
  if (group.rank < extra)
    trade(group.rank + powerOfTwo, true, "result to rank " + std::to_string(group.rank + powerOfTwo));
  else if (group.rank >= powerOfTwo)
    trade(group.rank - powerOfTwo, false, "result from rank " +
                                              std::to_string(group.rank - powerOfTwo));

  size_t maxRows = 0;
  for (const Contribution &contribution : held)
    maxRows += contribution.rows.indices.size();
  RankOrderedSum sum(table.rowElements, group.size, maxRows);
  for (const Contribution &contribution : held)
    sum.add(contribution);
  return sum.finish();
}

/// OmniReduce: blocks of `blockRows` rows; a rank sends each block it touched, dense with a
/// bitmap of its touched rows, to the block's owner (consecutive ranges of blocks, not
/// balanced), which sums them in rank order; every rank pulls every owner's summed blocks.
RowSparse omniReduce(Group &group, const Table &table, const RowSparse &local,
                     int64_t blockRows) {
  const size_t width = size_t(table.rowElements), blockFloats = size_t(blockRows) * width,
               words = bitmapWords(blockRows);
  const int64_t blocks = (table.rows + blockRows - 1) / blockRows;
  auto ownerOf = [&](int64_t block) { return int(block * group.size / blocks); };

  std::vector<Message> push(size_t(group.size));
  for (size_t i = 0; i < local.indices.size();) {
    const int64_t block = local.indices[i] / blockRows;
    Message &to = push[size_t(ownerOf(block))];
    to.ints.push_back(block);
    const size_t bitmapAt = to.ints.size(), valuesAt = to.floats.size();
    to.ints.resize(bitmapAt + words, 0);
    to.floats.resize(valuesAt + blockFloats, 0.0f);
    for (; i < local.indices.size() && local.indices[i] / blockRows == block; ++i) {
      const int64_t row = local.indices[i] - block * blockRows;
      setBit(&to.ints[bitmapAt], row);
      std::copy(&local.values[i * width], &local.values[(i + 1) * width],
                &to.floats[valuesAt + size_t(row) * width]);
    }
  }
  std::vector<Message> pushed = group.exchange(everyRank(group), std::move(push), "block push");

  size_t maxBlocks = 0;
  for (const Message &message : pushed)
    maxBlocks += message.ints.size() / (1 + words);
  RankOrderedSum sum(int64_t(blockFloats), group.size, maxBlocks);
  std::map<int64_t, std::vector<int64_t>> touched;
  for (int source = 0; source < group.size; ++source) {
    const Message &message = pushed[size_t(source)];
    if (message.ints.size() % (1 + words) != 0 ||
        message.floats.size() != message.ints.size() / (1 + words) * blockFloats)
      throw internal("rank " + std::to_string(source) + " sent malformed blocks");
    for (size_t b = 0; b < message.ints.size() / (1 + words); ++b) {
      const int64_t block = message.ints[b * (1 + words)];
      sum.add(source, block, &message.floats[b * blockFloats]);
      std::vector<int64_t> &bits = touched[block];
      bits.resize(words, 0);
      for (size_t w = 0; w < words; ++w)
        bits[w] |= message.ints[b * (1 + words) + 1 + w];
    }
  }
  const RowSparse reduced = sum.finish();
  Message shard;
  shard.floats = reduced.values;
  for (int64_t block : reduced.indices) {
    shard.ints.push_back(block);
    shard.ints.insert(shard.ints.end(), touched[block].begin(), touched[block].end());
  }
  std::vector<Message> shards = group.exchange(
      everyRank(group), std::vector<Message>(size_t(group.size), shard), "block pull");

  RowSparse out;
  for (int owner = 0; owner < group.size; ++owner) {
    const Message &message = shards[size_t(owner)];
    if (message.ints.size() % (1 + words) != 0 ||
        message.floats.size() != message.ints.size() / (1 + words) * blockFloats)
      throw internal("rank " + std::to_string(owner) + " sent malformed blocks");
    for (size_t b = 0; b < message.ints.size() / (1 + words); ++b) {
      const int64_t block = message.ints[b * (1 + words)];
      for (int64_t row = 0; row < blockRows && block * blockRows + row < table.rows; ++row)
        if (testBit(&message.ints[b * (1 + words) + 1], row)) {
          out.indices.push_back(block * blockRows + row);
          const float *values = &message.floats[b * blockFloats + size_t(row) * width];
          out.values.insert(out.values.end(), values, values + width);
        }
    }
  }
  return out;
}

/// Options.ranksPerNode resolved: given, or the ranks sharing memory, checked on every rank.
int ranksPerNodeOf(Group &group, int given) {
  int perNode = given, localRank = group.rank % std::max(given, 1);
  if (given == 0) {
    MPI_Comm shared = MPI_COMM_NULL;
    detail::checkMpi(
        MPI_Comm_split_type(group.comm, MPI_COMM_TYPE_SHARED, group.rank, MPI_INFO_NULL, &shared),
        "MPI_Comm_split_type");
    detail::checkMpi(MPI_Comm_size(shared, &perNode), "MPI_Comm_size");
    detail::checkMpi(MPI_Comm_rank(shared, &localRank), "MPI_Comm_rank");
    MPI_Comm_free(&shared);
  }
  const bool consecutive = group.size % perNode == 0 && localRank == group.rank % perNode;
  for (int64_t seen : group.gather(consecutive ? perNode : -1, "exchange of node sizes"))
    if (seen != perNode)
      throw invalid(given ? std::to_string(given) + " ranks per node do not divide the " +
                                std::to_string(group.size) + " ranks"
                          : "nodes are not consecutive ranks of equal size: set ranks per "
                            "node (ZENRT_RANKS_PER_NODE)");
  return perNode;
}

void checkInput(const Table &table, const RowSparse &local, const Options &options) {
  if (table.rows < 0 || table.rowElements < 1)
    throw invalid("a table of " + std::to_string(table.rows) + " x " +
                  std::to_string(table.rowElements) + " (rows >= 0, row elements >= 1)");
  if (local.values.size() != local.indices.size() * size_t(table.rowElements))
    throw invalid(std::to_string(local.values.size()) + " values for " +
                  std::to_string(local.indices.size()) + " rows of " +
                  std::to_string(table.rowElements));
  for (size_t i = 0; i < local.indices.size(); ++i)
    if (local.indices[i] < 0 || local.indices[i] >= table.rows ||
        (i > 0 && local.indices[i] <= local.indices[i - 1]))
      throw invalid("row indices must be sorted, unique and in [0, " +
                    std::to_string(table.rows) + "): " + std::to_string(local.indices[i]) +
                    " at " + std::to_string(i));
  if (options.blockRows < 1)
    throw invalid("block_rows " + std::to_string(options.blockRows) + " (expected >= 1)");
  if (!(options.denseThreshold > 0 && options.denseThreshold <= 1))
    throw invalid("dense_threshold " + std::to_string(options.denseThreshold) +
                  " (expected in (0, 1])");
  if (options.ranksPerNode < 0)
    throw invalid("ranks per node " + std::to_string(options.ranksPerNode) + " (expected >= 0)");
  if (!(options.timeoutSeconds > 0))
    throw invalid("the timeout must be positive");
}

} // namespace

RowSparse coalesce(const Table &table, int64_t count, const int64_t *indices,
                   const float *values) {
  if (table.rows < 0 || table.rowElements < 1 || count < 0)
    throw invalid("coalesce: a table of " + std::to_string(table.rows) + " x " +
                  std::to_string(table.rowElements) + " with " + std::to_string(count) +
                  " rows");
  if (count > 0 && (!indices || !values))
    throw invalid("coalesce: null indices or values");
  const size_t width = size_t(table.rowElements);
  std::vector<size_t> order(static_cast<size_t>(count));
  std::iota(order.begin(), order.end(), size_t(0));
  for (size_t i = 0; i < order.size(); ++i)
    if (indices[i] < 0 || indices[i] >= table.rows)
      throw invalid("coalesce: row index " + std::to_string(indices[i]) + " at " +
                    std::to_string(i) + " is outside [0, " + std::to_string(table.rows) + ")");
  // Stable: duplicates keep their order of appearance.
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return indices[a] < indices[b]; });
  RowSparse out;
  for (size_t k = 0; k < order.size(); ++k) {
    const float *row = values + order[k] * width;
    if (out.indices.empty() || out.indices.back() != indices[order[k]]) {
      out.indices.push_back(indices[order[k]]);
      out.values.resize(out.values.size() + width, 0.0f);
    }
    float *sum = &out.values[out.values.size() - width];
    for (size_t e = 0; e < width; ++e)
      sum[e] += row[e];
  }
  return out;
}

RowSparse allReduce(const Table &table, const RowSparse &given, const Options &options,
                    const void *comm) {
  checkInput(table, given, options);
  Group group(comm ? *static_cast<const MPI_Comm *>(comm) : MPI_COMM_WORLD,
              options.timeoutSeconds, options.waits);
  const RowSparse *local = &given;
  RowSparse dropped;
  if (mutated(Mutation::SparseDropsIndex) && group.rank == group.size - 1 &&
      !given.indices.empty()) {
    dropped = given;
    dropped.indices.pop_back();
    dropped.values.resize(dropped.indices.size() * size_t(table.rowElements));
    local = &dropped;
  }
  switch (options.scheme) {
  case SparseScheme::Dense:
    return hierarchical(group, table, *local, group.size);
  case SparseScheme::AgSparse:
    return agSparse(group, table, *local);
  case SparseScheme::SparCml:
    return sparCml(group, table, *local, options.denseThreshold);
  case SparseScheme::OmniReduce:
    return omniReduce(group, table, *local, options.blockRows);
  case SparseScheme::Balanced:
    return balanced(group, everyRank(group), group.rank, {{group.rank, *local}}, 0, table.rows,
                    table.rowElements, "balanced exchange");
  case SparseScheme::Hierarchical:
    return hierarchical(group, table, *local, ranksPerNodeOf(group, options.ranksPerNode));
  }
  throw invalid("unknown scheme " + std::to_string(int(options.scheme)));
}

void scatter(const Table &table, const RowSparse &reduced, float *out) {
  const size_t width = size_t(table.rowElements);
  std::fill(out, out + size_t(table.rows) * width, 0.0f);
  for (size_t i = 0; i < reduced.indices.size(); ++i)
    std::copy(&reduced.values[i * width], &reduced.values[(i + 1) * width],
              out + size_t(reduced.indices[i]) * width);
}

} // namespace zenrt::sparse

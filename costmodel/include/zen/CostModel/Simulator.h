//===- Simulator.h - discrete-event timeline simulator ----------*- C++ -*-===//
//
// Simulates one steady-state iteration: one compute stream, a host (CPU)
// compression worker, one or more communication streams, explicit
// dependencies, concurrent collectives sharing the bandwidth of each link level
// (inside a node, the node's NICs) apart, and compute slowed while
// communication overlaps it.
// Every pass and `zenopt simulate` score schedules with it.
//
//===----------------------------------------------------------------------===//
#ifndef ZEN_COSTMODEL_SIMULATOR_H
#define ZEN_COSTMODEL_SIMULATOR_H

#include "zen/CostModel/CostModel.h"
#include "zen/CostModel/Sparse.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace zen::cost {

/// What a task does and when (zen/Vocabulary.h). The simulator schedules by kind alone
/// (compute stream, host compression worker, communication streams); the phase is for
/// those that lower or report a task graph (codegen). A task's phase is never NextForward:
/// nextIteration says that.
using vocab::Phase;
using vocab::TaskKind;

/// What prices a row-sparse gradient's synchronisation (sparseSyncCost).
struct SparseSync {
  SparseScheme scheme = SparseScheme::Dense;
  SparseTable table;
  SparsityStatistics statistics;
};

struct SimTask {
  std::string name;
  TaskKind kind = TaskKind::Compute;
  Phase phase = Phase::Forward;
  /// The gradient bucket a compression, collective or optimizer task serves; -1 for none.
  int64_t bucket = -1;
  /// An MoE layer's dispatch, experts and combine pieces: the layer's index (the
  /// plan's moe.layers order); -1 for every other task.
  int64_t moeLayer = -1;
  /// Compute tasks and GPU compression tasks run on the compute stream;
  /// collectives on communication stream `stream` (0-based).
  int stream = 0;
  /// Compression tasks only: Device::CPU offloads them (ByteComp/Espresso) to
  /// the host's compression worker, a resource of its own that runs one task at
  /// a time, never blocks the compute stream and is not slowed by overlapping
  /// collectives; durationUs then includes the PCIe copies
  /// (CostModel::compression with Device::CPU prices exactly that).
  Device device = Device::GPU;
  /// Duration for Compute/Compression tasks when run alone.
  double durationUs = 0;
  /// Collective tasks: what is sent; the simulator prices it with the cost model.
  CollectiveKind collective = CollectiveKind::AllReduce;
  double bytes = 0;
  Group group;
  int64_t chunks = 1;
  /// The algorithm that runs it (an MoE layer's all-to-all: flat or 2D);
  /// nullopt: the cheapest, as NCCL's tuner picks.
  std::optional<Algorithm> algorithm;
  /// Collective tasks of a compressed bucket: its compressor, scheme and fp32
  /// element count, for CostModel::syncCost (PowerSGD exchanges its payload in
  /// two dependent all-reduces); `collective` and `bytes` stay the totals.
  CompressionSpec compression;
  SyncScheme scheme = SyncScheme::AllReduce;
  int64_t elements = 0;
  /// Collective tasks of a row-sparse gradient: sparseSyncCost prices the whole
  /// synchronisation (its network part shared with concurrent collectives, its
  /// kernels not); null for every other task.
  std::shared_ptr<const SparseSync> sparse;
  /// A bucket's first collective: the runtime's own work for the bucket
  /// (CostModel::executorOverheadUs), added to the collective's latency part.
  double executorUs = 0;
  /// Lower issues first among ready tasks on the same stream.
  int64_t priority = 0;
  /// Indices of tasks that must finish first.
  std::vector<int> deps;
  /// Belongs to the next iteration's forward (decoupled all-gather overlap):
  /// counted in the timeline but shifted by one iteration when scoring.
  ///
  /// Precisely: the task list is one iteration. An iteration ends when all its
  /// tasks *without* this flag have finished; the next iteration's tasks are
  /// released then. Tasks with the flag may run past that boundary. A
  /// dependency of an unflagged task on a flagged one refers to the flagged
  /// task of the *previous* iteration (e.g. forward of layer l waits for the
  /// all-gather of layer l issued one iteration earlier); every other
  /// dependency stays within the iteration. The simulator unrolls iterations
  /// until the steady state and reports one of them.
  bool nextIteration = false;

  /// The phase a plan file gives the task (its schedule and MoE timeline).
  Phase planPhase() const { return nextIteration ? Phase::NextForward : phase; }
};

struct SimResult {
  /// Per task, relative to the start of the reported iteration (the end of
  /// the previous one). Flagged tasks may end after iterationUs.
  std::vector<double> startUs, endUs;
  double iterationUs = 0;               // steady-state iteration time
  double computeUs = 0;                 // compute stream busy time (with overlap slowdown)
  double exposedCommUs = 0;             // iterationUs - computeUs
  double computeAloneUs = 0;            // compute stream work without slowdown
  double hostCompressionUs = 0;         // busy time of the CPU compression worker
  /// Empty on success. Otherwise why the graph cannot be simulated (a bad
  /// dependency index, a cycle, a negative or non-finite duration) and the
  /// other fields are zero. simulate() never throws.
  std::string error;
};

/// What a collective task costs alone: CostModel::syncCost's reduction for a
/// compressed payload, CostModel::chunkedCollective otherwise.
CollectiveCost collectiveCost(const CostModel &model, const SimTask &task);

/// The cost model's collective times, remembered by their arguments in a
/// fixed-size direct-mapped table: a search that simulates variants of one
/// plan, or a model whose repeated layers give the same bucket sizes, prices
/// each collective once. Times are the cost model's, bit for bit.
class CollectiveCostCache {
public:
  struct Times {
    double timeUs = 0;
    double latencyUs = 0;
    double bandwidthUs = 0;
    double intraNodeUs = 0;
    double interNodeUs = 0;
  };
  /// `entries` is rounded up to a power of two (at least 2).
  explicit CollectiveCostCache(const CostModel &model, size_t entries = size_t(1) << 14);
  const Times &chunkedCollective(CollectiveKind kind, double bytes, Group group, int64_t chunks,
                                 std::optional<Algorithm> algorithm = std::nullopt);
  /// CostModel::syncCost's reduction of a compressed payload.
  const Times &compressedSync(const CompressionSpec &spec, SyncScheme scheme, int64_t elements,
                              Group group, int64_t chunks);
  /// collectiveCost(model, task)'s times.
  const Times &collective(const SimTask &task);

private:
  /// Everything the price depends on; an uncompressed key has method None and
  /// no elements, a compressed one no bytes (they follow from the rest) and
  /// its scheme's first collective as kind (which tells the schemes apart).
  struct Key {
    CollectiveKind kind = CollectiveKind::AllReduce;
    double bytes = -1;  // no collective has negative bytes: an empty entry
    Group group;
    int64_t chunks = 0;
    int algorithm = -1; // -1: the cheapest
    CompressionMethod method = CompressionMethod::None;
    double ratio = 0;
    int64_t rank = 0;
    Device device = Device::GPU;
    int64_t elements = 0;
    bool operator==(const Key &other) const;
  };
  struct Entry {
    Key key;
    Times times;
  };
  /// The entry for `key`, priced by `price()` (a CollectiveCost) when absent.
  template <typename Price> const Times &lookup(const Key &key, Price price);

  const CostModel &model_;
  int logEntries_ = 1;
  std::vector<Entry> entries_;
};

/// Simulates `tasks` (indices are task ids; deps must point to other tasks).
/// Deterministic: the same tasks give the same result.
/// Rules: each stream (compute, CPU compression worker, every communication
/// stream) runs one task at a time, choosing among its ready tasks the lowest
/// (iteration, priority, index); a collective's latency part runs at full
/// speed while the bandwidth parts of the collectives in flight share each
/// link level: a collective keeps the level inside nodes busy for
/// intraNodeUs / bandwidthUs of its transfer and the NICs for interNodeUs /
/// bandwidthUs (CollectiveCost), and the collectives progress at max-min fair
/// rates (all rise together; those on a full level stop there; none beyond
/// full speed). Collectives on the same bottleneck split it equally
/// (processor sharing); an all-to-all inside a node barely slows an
/// all-reduce limited by the NICs. Tasks on the compute stream run
/// `overlapSlowdown` times slower while any collective is in flight, and a
/// collective's bandwidth part `collectiveSlowdown` times slower while a compute
/// task runs (CostModel: measured interference, else 1); tasks on the CPU worker
/// always take their durationUs.
/// O(n log n + e s) for n tasks and e events with s collectives in flight
/// (at most one per communication stream).
/// `cache`, when given, prices the collectives.
SimResult simulate(const CostModel &model, const std::vector<SimTask> &tasks,
                   CollectiveCostCache *cache = nullptr);

} // namespace zen::cost

#endif // ZEN_COSTMODEL_SIMULATOR_H

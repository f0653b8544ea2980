//===- Simulator.cpp - discrete-event timeline simulator ------------------===//
//
// Events are task completions and collectives finishing their latency part.
// Between events every rate is constant: the running compute task progresses
// at 1 or 1/overlapSlowdown, the CPU compression worker's task at 1 (its end
// is known when it starts), and each collective in its bandwidth part at its
// max-min fair share of the two link levels, recomputed whenever one enters
// or leaves, divided by the measured collectiveSlowdown while compute runs. At most one collective per communication stream is in flight,
// so the sharing is a short list, scanned per event.
//
//===----------------------------------------------------------------------===//
#include "zen/CostModel/Simulator.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <queue>
#include <tuple>

namespace zen::cost {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();
/// A link level whose capacity left is below this is full; a transfer with
/// less than this many microseconds left is done (rounding slivers).
constexpr double kFullLevel = 1e-12;
constexpr double kDoneUs = 1e-9;

/// Iterations unrolled when tasks cross iterations: the reported one has a
/// predecessor whose decoupled tasks it waits on and a successor competing
/// with its own decoupled tasks, as in the steady state.
constexpr int kUnrolledIterations = 4;
constexpr int kReportedIteration = 2;

std::string validate(const std::vector<SimTask> &tasks) {
  int n = static_cast<int>(tasks.size());
  // The message is built only for the offending task: validation runs on every simulation.
  auto fail = [&](int i, const std::string &why) {
    return "task " + std::to_string(i) + " (" + tasks[i].name + "): " + why;
  };
  for (int i = 0; i < n; ++i) {
    const SimTask &task = tasks[i];
    for (int dep : task.deps)
      if (dep < 0 || dep >= n || dep == i)
        return fail(i, "dependency " + std::to_string(dep) + " is not another task");
    if (vocab::communicates(task.kind)) {
      if (task.stream < 0)
        return fail(i, "negative communication stream");
      if (!std::isfinite(task.bytes) || task.bytes < 0)
        return fail(i, "bytes must be finite and non-negative");
      if (task.chunks < 1)
        return fail(i, "chunks must be at least 1");
      if (task.elements < 0)
        return fail(i, "elements must be non-negative");
    } else if (!std::isfinite(task.durationUs) || task.durationUs < 0) {
      return fail(i, "duration must be finite and non-negative");
    }
    if (task.device == Device::CPU && !vocab::compresses(task.kind))
      return fail(i, "only compressions and decompressions can run on the CPU");
    // The kind says how a task is priced: a sparse one without its table would be a dense
    // all-reduce, a collective with one a sparse synchronisation.
    if ((task.kind == TaskKind::SparseSync) != (task.sparse != nullptr))
      return fail(i, "a sparse synchronisation, and only it, carries a sparse table");
  }
  return "";
}

class Simulation {
public:
  /// Prepares a run over `tasks`, reusing the buffers of earlier runs.
  void reset(const CostModel &model, const std::vector<SimTask> &tasks,
             CollectiveCostCache *cache) {
    tasks_ = &tasks;
    n_ = static_cast<int>(tasks.size());
    slowdown_ = model.overlapSlowdown();
    collectiveSlowdown_ = model.collectiveSlowdown();
    now_ = 0;
    computeTask_ = hostTask_ = -1;
    computeLeftUs_ = hostEndUs_ = 0;
    activeCollectives_ = 0;
    sharing_.clear();

    // One pass over the tasks copies what the event loop reads into arrays of their own:
    // a SimTask is 192 bytes, and the loop reads a few of them per event.
    int streams = kFirstCommStream;
    bool crossesIterations = false;
    int regular = 0;
    latencyUs_.assign(n_, 0);
    bandwidthUs_.assign(n_, 0);
    intraShare_.assign(n_, 0);
    interShare_.assign(n_, 0);
    streamOf_.assign(n_, kComputeStream);
    nextIteration_.resize(n_);
    priority_.resize(n_);
    durationUs_.resize(n_);
    for (int i = 0; i < n_; ++i) {
      const SimTask &task = tasks[i];
      nextIteration_[i] = task.nextIteration;
      crossesIterations |= task.nextIteration;
      regular += task.nextIteration ? 0 : 1;
      priority_[i] = task.priority;
      durationUs_[i] = task.durationUs;
      if (!vocab::communicates(task.kind)) {
        if (task.device == Device::CPU)
          streamOf_[i] = kHostStream;
        continue;
      }
      streamOf_[i] = kFirstCommStream + task.stream;
      streams = std::max(streams, kFirstCommStream + 1 + task.stream);
      CollectiveCostCache::Times times;
      if (cache && !task.sparse) {
        times = cache->collective(task);
      } else {
        const CollectiveCost cost = collectiveCost(model, task);
        times = {cost.timeUs, cost.latencyUs, cost.bandwidthUs, cost.intraNodeUs,
                 cost.interNodeUs};
      }
      latencyUs_[i] = times.latencyUs + task.executorUs;
      bandwidthUs_[i] = times.bandwidthUs;
      if (times.bandwidthUs > 0) {
        intraShare_[i] = std::min(1.0, times.intraNodeUs / times.bandwidthUs);
        interShare_[i] = std::min(1.0, times.interNodeUs / times.bandwidthUs);
      }
    }
    iterations_ = crossesIterations ? kUnrolledIterations : 1;
    reported_ = crossesIterations ? kReportedIteration : 0;
    ready_.resize(streams);
    for (ReadyQueue &queue : ready_)  // empty unless a cycle stopped the last run
      while (!queue.empty())
        queue.pop();
    busy_.assign(streams, false);
    dirty_.assign(streams, false);

    // Dependents in CSR form; `crosses` marks edges into the next iteration. A task waits
    // in the first iteration for its dependencies but those crossing (they come from an
    // iteration before it), in later ones for all of them and the boundary.
    int total = n_ * iterations_;
    pending_.resize(total);
    dependentsBegin_.assign(n_ + 1, 0);
    for (int i = 0; i < n_; ++i) {
      int crossing = 0;
      for (int dep : tasks[i].deps) {
        ++dependentsBegin_[dep + 1];
        crossing += !nextIteration_[i] && nextIteration_[dep];
      }
      const int waits = static_cast<int>(tasks[i].deps.size());
      pending_[i] = waits - crossing;
      for (int it = 1; it < iterations_; ++it)
        pending_[it * n_ + i] = waits + 1;
    }
    for (int i = 0; i < n_; ++i)
      dependentsBegin_[i + 1] += dependentsBegin_[i];
    dependents_.resize(dependentsBegin_[n_]);
    fill_.assign(dependentsBegin_.begin(), dependentsBegin_.end() - 1);
    for (int i = 0; i < n_; ++i)
      for (int dep : tasks[i].deps)
        dependents_[fill_[dep]++] = {i, !nextIteration_[i] && nextIteration_[dep]};

    startUs_.assign(total, -1);
    endUs_.assign(total, -1);
    regularLeft_.assign(iterations_, regular);
    boundaryUs_.assign(iterations_, -1);
  }

  SimResult run() {
    for (int i = 0; i < n_; ++i)
      if (pending_[i] == 0)
        makeReady(i);
    if (regularLeft_[0] == 0)
      closeIteration(0);
    while (true) {
      startReadyTasks();
      if (computeTask_ < 0 && hostTask_ < 0 && latencyHeap_.empty() && sharing_.empty())
        break;
      advanceToNextEvent();
    }
    return result();
  }

private:
  // Streams: compute, the CPU compression worker, then communication stream s
  // at kFirstCommStream + s.
  static constexpr int kComputeStream = 0;
  static constexpr int kHostStream = 1;
  static constexpr int kFirstCommStream = 2;

  struct Dependent {
    int task;
    bool crosses;
  };
  // (iteration, priority, task): smallest first.
  using ReadyKey = std::tuple<int, int64_t, int>;
  using ReadyQueue = std::priority_queue<ReadyKey, std::vector<ReadyKey>, std::greater<ReadyKey>>;
  using TimedInstance = std::pair<double, int>;
  using TimedHeap =
      std::priority_queue<TimedInstance, std::vector<TimedInstance>, std::greater<TimedInstance>>;
  /// A collective in its bandwidth part.
  struct Sharer {
    int instance;
    double leftUs;     // transfer time left at full speed
    double rate = 0;   // progress per microsecond, at most 1
    double endUs = 0;  // when it ends at this rate
  };

  int taskOf(int instance) const { return instance % n_; }
  int iterationOf(int instance) const { return instance / n_; }
  bool isCollective(int instance) const { return streamOf_[taskOf(instance)] >= kFirstCommStream; }

  void makeReady(int instance) {
    int task = taskOf(instance);
    int stream = streamOf_[task];
    ready_[stream].push({iterationOf(instance), priority_[task], task});
    markDirty(stream);
  }

  void markDirty(int stream) {
    if (!dirty_[stream]) {
      dirty_[stream] = true;
      dirtyStreams_.push_back(stream);
    }
  }

  void release(int instance) {
    if (--pending_[instance] == 0)
      makeReady(instance);
  }

  /// All regular tasks of `iteration` are done: the next one may start.
  void closeIteration(int iteration) {
    boundaryUs_[iteration] = now_;
    if (iteration + 1 >= iterations_)
      return;
    int next = iteration + 1;
    for (int i = 0; i < n_; ++i)
      release(next * n_ + i);
    if (regularLeft_[next] == 0)
      closeIteration(next);
  }

  void complete(int instance) {
    int task = taskOf(instance), iteration = iterationOf(instance);
    endUs_[instance] = now_;
    busy_[streamOf_[task]] = false;
    markDirty(streamOf_[task]);
    if (isCollective(instance))
      --activeCollectives_;
    for (int e = dependentsBegin_[task]; e < dependentsBegin_[task + 1]; ++e) {
      const Dependent &dependent = dependents_[e];
      int target = iteration + (dependent.crosses ? 1 : 0);
      if (target < iterations_)
        release(target * n_ + dependent.task);
    }
    if (!nextIteration_[task] && --regularLeft_[iteration] == 0)
      closeIteration(iteration);
  }

  void enterSharing(int instance) {
    double work = bandwidthUs_[taskOf(instance)];
    if (work <= 0) {
      complete(instance);
      return;
    }
    sharing_.push_back({instance, work});
    shareLinks();
  }

  /// Max-min fair rates: every sharer's rate rises from 0 together; those using
  /// a level that fills stop there, the rest go on, none past full speed. A
  /// sharer with no level share (a transfer without links) runs at full speed.
  void shareLinks() {
    double intraLeft = 1, interLeft = 1, level = 0;
    for (Sharer &sharer : sharing_)
      sharer.rate = -1; // still rising
    size_t rising = sharing_.size();
    while (rising > 0) {
      double intraDemand = 0, interDemand = 0;
      for (const Sharer &sharer : sharing_)
        if (sharer.rate < 0) {
          intraDemand += intraShare_[taskOf(sharer.instance)];
          interDemand += interShare_[taskOf(sharer.instance)];
        }
      double step = 1 - level;
      if (intraDemand > 0)
        step = std::min(step, intraLeft / intraDemand);
      if (interDemand > 0)
        step = std::min(step, interLeft / interDemand);
      level += step;
      intraLeft -= step * intraDemand;
      interLeft -= step * interDemand;
      const bool fullSpeed = level >= 1 - kFullLevel;
      const bool intraFull = intraDemand > 0 && intraLeft <= kFullLevel;
      const bool interFull = interDemand > 0 && interLeft <= kFullLevel;
      for (Sharer &sharer : sharing_) {
        const int task = taskOf(sharer.instance);
        if (sharer.rate < 0 && (fullSpeed || (intraFull && intraShare_[task] > 0) ||
                                (interFull && interShare_[task] > 0))) {
          sharer.rate = std::min(level, 1.0);
          --rising;
        }
      }
    }
  }

  void start(int instance) {
    int task = taskOf(instance);
    startUs_[instance] = now_;
    busy_[streamOf_[task]] = true;
    if (!isCollective(instance)) {
      if (durationUs_[task] <= 0) {
        complete(instance);
      } else if (streamOf_[task] == kHostStream) {
        hostTask_ = instance;
        hostEndUs_ = now_ + durationUs_[task];
      } else {
        computeTask_ = instance;
        computeLeftUs_ = durationUs_[task];
      }
      return;
    }
    ++activeCollectives_;
    if (latencyUs_[task] > 0)
      latencyHeap_.push({now_ + latencyUs_[task], instance});
    else
      enterSharing(instance);
  }

  /// Starts work on idle streams until nothing more can start at `now_`
  /// (zero-length tasks complete at once and may ready others).
  void startReadyTasks() {
    while (!dirtyStreams_.empty()) {
      int stream = dirtyStreams_.back();
      dirtyStreams_.pop_back();
      dirty_[stream] = false;
      if (busy_[stream] || ready_[stream].empty())
        continue;
      auto [iteration, priority, task] = ready_[stream].top();
      (void)priority;
      ready_[stream].pop();
      start(iteration * n_ + task);
    }
  }

  double computeRate() const { return activeCollectives_ > 0 ? 1.0 / slowdown_ : 1.0; }
  /// A transfer's progress beside running compute (measured interference; 1 otherwise).
  double transferRate() const { return computeTask_ >= 0 ? 1.0 / collectiveSlowdown_ : 1.0; }

  void advanceToNextEvent() {
    double computeEnd = computeTask_ >= 0 ? now_ + computeLeftUs_ / computeRate() : kInfinity;
    double hostEnd = hostTask_ >= 0 ? hostEndUs_ : kInfinity;
    double latencyEnd = latencyHeap_.empty() ? kInfinity : latencyHeap_.top().first;
    double sharingEnd = kInfinity;
    const double transfer = transferRate();
    for (Sharer &sharer : sharing_) {
      sharer.endUs = now_ + sharer.leftUs / (sharer.rate * transfer);
      sharingEnd = std::min(sharingEnd, sharer.endUs);
    }
    double next = std::min({computeEnd, hostEnd, latencyEnd, sharingEnd});
    double elapsed = std::max(0.0, next - now_);

    // Advance every rate-dependent quantity to `next`, snapping the events that
    // define `next` exactly so rounding cannot leave a sliver of work.
    if (computeTask_ >= 0)
      computeLeftUs_ = next == computeEnd ? 0 : computeLeftUs_ - elapsed * computeRate();
    for (Sharer &sharer : sharing_)
      sharer.leftUs = sharer.endUs == next ? 0 : sharer.leftUs - elapsed * sharer.rate * transfer;
    now_ = std::max(now_, next);

    if (computeTask_ >= 0 && computeLeftUs_ <= 0) {
      int finished = computeTask_;
      computeTask_ = -1;
      complete(finished);
    }
    if (hostTask_ >= 0 && hostEndUs_ <= now_) {
      int finished = hostTask_;
      hostTask_ = -1;
      complete(finished);
    }
    finishedLatency_.clear();
    while (!latencyHeap_.empty() && latencyHeap_.top().first <= now_) {
      finishedLatency_.push_back(latencyHeap_.top().second);
      latencyHeap_.pop();
    }
    // Finished transfers complete in task order, as the events they are.
    finishedSharing_.clear();
    auto done = [](const Sharer &sharer) { return sharer.leftUs <= kDoneUs; };
    for (const Sharer &sharer : sharing_)
      if (done(sharer))
        finishedSharing_.push_back(sharer.instance);
    if (!finishedSharing_.empty()) {
      sharing_.erase(std::remove_if(sharing_.begin(), sharing_.end(), done), sharing_.end());
      std::sort(finishedSharing_.begin(), finishedSharing_.end());
      for (int instance : finishedSharing_)
        complete(instance);
      shareLinks();
    }
    for (int instance : finishedLatency_)
      enterSharing(instance);
  }

  SimResult result() const {
    SimResult result;
    for (int instance = 0; instance < n_ * iterations_; ++instance)
      if (endUs_[instance] < 0) {
        const SimTask &task = (*tasks_)[taskOf(instance)];
        result.error = "task " + std::to_string(taskOf(instance)) + " (" + task.name +
                       ") never runs: its dependencies form a cycle";
        return result;
      }
    double origin = reported_ > 0 ? boundaryUs_[reported_ - 1] : 0.0;
    result.startUs.resize(n_);
    result.endUs.resize(n_);
    for (int i = 0; i < n_; ++i) {
      int instance = reported_ * n_ + i;
      result.startUs[i] = startUs_[instance] - origin;
      result.endUs[i] = endUs_[instance] - origin;
      if (streamOf_[i] == kHostStream) {
        result.hostCompressionUs += durationUs_[i];
      } else if (streamOf_[i] == kComputeStream) {
        result.computeUs += result.endUs[i] - result.startUs[i];
        result.computeAloneUs += durationUs_[i];
      }
    }
    result.iterationUs = boundaryUs_[reported_] - origin;
    result.exposedCommUs = std::max(0.0, result.iterationUs - result.computeUs);
    return result;
  }

  const std::vector<SimTask> *tasks_ = nullptr;
  int n_ = 0;
  double slowdown_ = 1;
  double collectiveSlowdown_ = 1;
  int iterations_ = 1;
  int reported_ = 0;

  std::vector<double> latencyUs_, bandwidthUs_;
  /// The fraction of a collective's transfer each link level is busy.
  std::vector<double> intraShare_, interShare_;
  std::vector<int> streamOf_;
  std::vector<char> nextIteration_;
  std::vector<int64_t> priority_;
  std::vector<double> durationUs_;
  std::vector<Dependent> dependents_;
  std::vector<int> dependentsBegin_, fill_;

  std::vector<int> pending_;
  std::vector<double> startUs_, endUs_;
  std::vector<int> regularLeft_;
  std::vector<double> boundaryUs_;

  std::vector<ReadyQueue> ready_;
  std::vector<bool> busy_, dirty_;
  std::vector<int> dirtyStreams_;

  double now_ = 0;
  int computeTask_ = -1;
  double computeLeftUs_ = 0;
  int hostTask_ = -1;
  double hostEndUs_ = 0;
  int activeCollectives_ = 0;
  TimedHeap latencyHeap_;
  std::vector<Sharer> sharing_;
  std::vector<int> finishedLatency_, finishedSharing_;  // scratch for advanceToNextEvent
};

} // namespace

CollectiveCost collectiveCost(const CostModel &model, const SimTask &task) {
  if (task.sparse) {
    const SparseSyncCost priced = sparseSyncCost(model, task.sparse->scheme, task.sparse->table,
                                                 task.sparse->statistics, task.group);
    CollectiveCost cost;
    cost.timeUs = priced.timeUs;
    cost.latencyUs = priced.kernelUs;
    cost.bandwidthUs = priced.communicationUs;
    // Its exchanges cross the node's NICs when the group spans nodes.
    (task.group.nodes > 1 ? cost.interNodeUs : cost.intraNodeUs) = priced.communicationUs;
    return cost;
  }
  if (task.compression.method != CompressionMethod::None)
    return model
        .syncCost(task.compression, task.scheme, task.elements, 0, task.group, task.chunks)
        .reduction;
  return model.chunkedCollective(task.collective, task.bytes, task.group, task.chunks,
                                 task.algorithm);
}

CollectiveCostCache::CollectiveCostCache(const CostModel &model, size_t entries)
    : model_(model) {
  while ((size_t(1) << logEntries_) < entries)
    ++logEntries_;
  entries_.resize(size_t(1) << logEntries_);
}

bool CollectiveCostCache::Key::operator==(const Key &other) const {
  return kind == other.kind && bytes == other.bytes && group.ranks == other.group.ranks &&
         group.nodes == other.group.nodes && group.perNode == other.group.perNode && chunks == other.chunks &&
         algorithm == other.algorithm && method == other.method &&
         ratio == other.ratio && rank == other.rank && device == other.device &&
         elements == other.elements;
}

template <typename Price>
const CollectiveCostCache::Times &CollectiveCostCache::lookup(const Key &key, Price price) {
  uint64_t hash, ratio;
  std::memcpy(&hash, &key.bytes, sizeof hash);
  std::memcpy(&ratio, &key.ratio, sizeof ratio);
  for (uint64_t part :
       {static_cast<uint64_t>(key.kind), static_cast<uint64_t>(key.group.ranks),
        static_cast<uint64_t>(key.group.nodes), static_cast<uint64_t>(key.chunks),
        static_cast<uint64_t>(key.algorithm),
        static_cast<uint64_t>(key.method), ratio, static_cast<uint64_t>(key.rank),
        static_cast<uint64_t>(key.device), static_cast<uint64_t>(key.elements)})
    hash = (hash ^ part) * 0x9E3779B97F4A7C15ull;
  Entry &entry = entries_[hash >> (64 - logEntries_)];
  if (!(entry.key == key)) {
    const CollectiveCost cost = price();
    entry = {key, {cost.timeUs, cost.latencyUs, cost.bandwidthUs, cost.intraNodeUs,
                   cost.interNodeUs}};
  }
  return entry.times;
}

const CollectiveCostCache::Times &
CollectiveCostCache::chunkedCollective(CollectiveKind kind, double bytes, Group group,
                                       int64_t chunks, std::optional<Algorithm> algorithm) {
  Key key;
  key.kind = kind;
  key.bytes = bytes;
  key.group = group;
  key.chunks = chunks;
  key.algorithm = algorithm ? static_cast<int>(*algorithm) : -1;
  return lookup(key,
                [&] { return model_.chunkedCollective(kind, bytes, group, chunks, algorithm); });
}

const CollectiveCostCache::Times &
CollectiveCostCache::compressedSync(const CompressionSpec &spec, SyncScheme scheme,
                                    int64_t elements, Group group, int64_t chunks) {
  Key key;
  key.kind = vocab::traitsOf(scheme).sequence[0];
  key.bytes = 0;
  key.group = group;
  key.chunks = chunks;
  key.method = spec.method;
  key.ratio = spec.ratio;
  key.rank = spec.rank;
  key.device = spec.device;
  key.elements = elements;
  return lookup(key, [&] {
    return model_.syncCost(spec, scheme, elements, 0, group, chunks).reduction;
  });
}

const CollectiveCostCache::Times &CollectiveCostCache::collective(const SimTask &task) {
  if (task.compression.method != CompressionMethod::None)
    return compressedSync(task.compression, task.scheme, task.elements, task.group, task.chunks);
  return chunkedCollective(task.collective, task.bytes, task.group, task.chunks, task.algorithm);
}

SimResult simulate(const CostModel &model, const std::vector<SimTask> &tasks,
                   CollectiveCostCache *cache) {
  SimResult invalid;
  invalid.error = validate(tasks);
  if (!invalid.error.empty())
    return invalid;
  if (tasks.empty())
    return {};
  // Reused, so the planner's many simulations do not reallocate every buffer.
  thread_local Simulation simulation;
  simulation.reset(model, tasks, cache);
  return simulation.run();
}

} // namespace zen::cost

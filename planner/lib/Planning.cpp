//===- Planning.cpp - problems, plan choices, simulator tasks, baselines ---===//
#include "zen/Planner/Planning.h"
#include "zen/CostModel/Sparse.h"

#include "zen/Strategy.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <sstream>

namespace zen::plan {

using cost::CollectiveKind;
using cost::CompressionMethod;
using cost::CompressionSpec;
using cost::SimTask;
using cost::TaskKind;
using cost::Phase;

double Problem::totalComputeUs() const {
  double total = 0;
  for (const ComputeSegment &segment : forward)
    total += segment.durationUs;
  for (const ComputeSegment &segment : backward)
    total += segment.durationUs;
  for (const GradientTensor &gradient : gradients)
    total += gradient.optimizerUs;
  for (const SparseGradientTask &table : sparse)
    total += table.optimizerUs;
  return total;
}

double Problem::totalGradientBytes() const {
  double total = 0;
  for (const GradientTensor &gradient : gradients)
    total += static_cast<double>(gradient.bytes);
  return total;
}

int64_t optimizerFlops(int64_t elements) { return 3 * elements; }
int64_t optimizerBytes(int64_t elements, int64_t elementBytes) {
  return 5 * elements * elementBytes;
}

std::string validateChoice(const Problem &problem, const PlanChoice &choice) {
  int next = 0;
  for (size_t b = 0; b < choice.buckets.size(); ++b) {
    const BucketChoice &bucket = choice.buckets[b];
    std::string where = "bucket " + std::to_string(b);
    if (bucket.begin != next || bucket.end <= bucket.begin)
      return where + " does not continue the gradients in ready order (starts at " +
             std::to_string(bucket.begin) + ", expected " + std::to_string(next) + ")";
    if (bucket.chunks < 1)
      return where + " has chunk count " + std::to_string(bucket.chunks);
    if (!vocab::supports(bucket.compression.method, bucket.scheme))
      return where + " synchronises " + vocab::toString(bucket.compression.method) +
             " payloads by " + vocab::toString(bucket.scheme) +
             ", which the executor does not implement";
    if (bucket.stream < 0 || bucket.gatherStream < 0)
      return where + " has a negative stream";
    next = bucket.end;
  }
  if (next != static_cast<int>(problem.gradients.size()))
    return "buckets cover " + std::to_string(next) + " of " +
           std::to_string(problem.gradients.size()) + " gradients";
  return "";
}

namespace {
/// The task graph of buildSimTasks without names, written over `tasks`: its
/// elements and their dependency lists are recycled. evaluate() runs it on
/// every candidate of the search, where building strings or allocating per
/// task would dominate.
void fillSimTasks(const Problem &problem, const PlanChoice &choice, const cost::CostModel &model,
                  std::vector<SimTask> &tasks) {
  // At most five tasks a bucket: sized once, a baseline of one bucket per tensor would
  // otherwise regrow the vector (and fault in fresh memory for it) a dozen times.
  tasks.reserve(problem.forward.size() + problem.backward.size() + 5 * choice.buckets.size() +
                2 * problem.sparse.size());
  size_t used = 0;
  // A task after up to two others (negative: none).
  auto add = [&](TaskKind kind, Phase phase, int64_t bucket, int dep, int otherDep = -1) {
    if (used == tasks.size())
      tasks.emplace_back();
    SimTask &task = tasks[used];
    std::vector<int> storage = std::move(task.deps);
    task = SimTask{};
    task.deps = std::move(storage);
    task.deps.clear();
    for (int d : {dep, otherDep})
      if (d >= 0)
        task.deps.push_back(d);
    task.kind = kind;
    task.phase = phase;
    task.bucket = bucket;
    return static_cast<int>(used++);
  };
  const int forwardCount = static_cast<int>(problem.forward.size());
  const int backwardCount = static_cast<int>(problem.backward.size());

  // Compute-stream priorities follow the intended serial order: forward, then
  // each backward segment followed by the encodes it enables, then the tail.
  auto addCompute = [&](TaskKind kind, Phase phase, int64_t bucket, double duration,
                        int64_t priority, int dep, int otherDep = -1) {
    int task = add(kind, phase, bucket, dep, otherDep);
    tasks[task].durationUs = duration;
    tasks[task].priority = priority;
    return task;
  };

  int previous = -1;
  std::vector<int> forwardTask(forwardCount, -1);
  for (int k = 0; k < forwardCount; ++k)
    forwardTask[k] = previous = addCompute(TaskKind::Compute, Phase::Forward, -1,
                                           problem.forward[k].durationUs, k, previous);
  const int forwardEnd = previous;
  std::vector<int> backwardTask(backwardCount, -1);
  for (int k = 0; k < backwardCount; ++k)
    backwardTask[k] = previous =
        addCompute(TaskKind::Compute, Phase::Backward, -1, problem.backward[k].durationUs,
                   forwardCount + 2 * k, previous);
  const int backwardEnd = previous;
  const int64_t tailPriority = forwardCount + 2 * backwardCount + 2;

  for (size_t b = 0; b < choice.buckets.size(); ++b) {
    const BucketChoice &bucket = choice.buckets[b];
    const int64_t bucketId = static_cast<int64_t>(b);
    int64_t elements = 0;
    double bytes = 0, optimizerUs = 0;
    int readySegment = -1;
    int firstForward = forwardCount;
    for (int g = bucket.begin; g < bucket.end; ++g) {
      const GradientTensor &gradient = problem.gradients[g];
      firstForward = std::min(firstForward, gradient.forwardSegment);
      elements += gradient.elements;
      bytes += static_cast<double>(gradient.bytes);
      optimizerUs += gradient.optimizerUs;
      readySegment = std::max(readySegment, gradient.readyAfterSegment);
    }
    const cost::Group group = bucket.expertReplicas ? problem.expertReplicas : problem.group;
    int ready = choice.afterBackward ? backwardEnd
                : readySegment >= 0  ? backwardTask[readySegment]
                                     : forwardEnd;

    const bool compressed = bucket.compression.method != CompressionMethod::None;
    const vocab::SyncSchemeTraits &scheme = vocab::traitsOf(bucket.scheme);
    cost::CompressionCost compression;
    double wireBytes = bytes;
    int before = ready;
    if (compressed) {
      compression = model.compression(bucket.compression, elements,
                                      vocab::gathersPayloads(bucket.scheme) ? group.ranks : 1);
      wireBytes = compression.wireBytes;
      int64_t encodePriority = readySegment >= 0 && !choice.afterBackward
                                   ? forwardCount + 2 * readySegment + 1
                                   : tailPriority - 1;
      before = addCompute(TaskKind::Compress, Phase::Backward, bucketId,
                          compression.encodeUs, encodePriority, ready);
      tasks[before].device = bucket.compression.device;
    }

    int done = add(TaskKind::Collective, Phase::Backward, bucketId, before);
    SimTask &collective = tasks[done];
    collective.collective = scheme.sequence[0];
    // Gathered payloads: every rank's payload lands everywhere.
    collective.bytes = vocab::gathersPayloads(bucket.scheme)
                           ? wireBytes * static_cast<double>(group.ranks)
                           : wireBytes;
    collective.scheme = bucket.scheme;
    collective.group = group;
    collective.chunks = bucket.chunks;
    if (compressed) {
      collective.compression = bucket.compression;
      collective.elements = elements;
    }
    collective.stream = bucket.stream;
    collective.priority = bucket.priority;
    collective.executorUs = model.executorOverheadUs(elements, group);

    bool nextIteration = false;
    if (scheme.steps == 2) {
      done = add(TaskKind::Collective, Phase::Backward, bucketId, done);
      SimTask &gather = tasks[done];
      gather.collective = scheme.sequence[1];
      gather.bytes = bytes;
      gather.group = group;
      // libzenrt runs a bucket's collectives in the same pieces.
      gather.chunks = bucket.chunks;
      gather.stream = bucket.gatherStream;
      gather.priority = bucket.gatherPriority;
      gather.nextIteration = true;
      nextIteration = true;
    }
    if (compressed) {
      done = addCompute(TaskKind::Decompress, Phase::Backward, bucketId,
                        compression.decodeUs, tailPriority + 2 * static_cast<int64_t>(b), done);
      tasks[done].device = bucket.compression.device;
    }
    // The optimizer step runs once backward is over, as frameworks call it.
    int optimizer = addCompute(TaskKind::Compute, Phase::Optimizer, bucketId, optimizerUs,
                               tailPriority + 2 * static_cast<int64_t>(b) + 1, done,
                               backwardEnd != done ? backwardEnd : -1);
    if (nextIteration) {
      // The update lands during the next iteration, before the first forward
      // segment that reads one of the bucket's parameters.
      tasks[optimizer].nextIteration = true;
      if (firstForward >= 0 && firstForward < forwardCount)
        tasks[forwardTask[firstForward]].deps.push_back(optimizer);
    }
  }
  // Row-sparse gradients: each its own synchronisation, issued after the buckets ready with it.
  const int64_t bucketCount = static_cast<int64_t>(choice.buckets.size());
  for (size_t s = 0; s < problem.sparse.size(); ++s) {
    const SparseGradientTask &table = problem.sparse[s];
    const int ready = choice.afterBackward           ? backwardEnd
                      : table.readyAfterSegment >= 0 ? backwardTask[table.readyAfterSegment]
                                                     : forwardEnd;
    const int sync = add(TaskKind::SparseSync, Phase::Backward, -1, ready);
    tasks[sync].sparse = table.sync;
    tasks[sync].group = problem.group;
    tasks[sync].bytes = table.sync->table.denseBytes();
    tasks[sync].priority = std::numeric_limits<int64_t>::max() / 2 + static_cast<int64_t>(s);
    addCompute(TaskKind::Compute, Phase::Optimizer, -1, table.optimizerUs,
               tailPriority + 2 * bucketCount + static_cast<int64_t>(s), sync,
               backwardEnd != sync ? backwardEnd : -1);
  }
  tasks.resize(used);
}
} // namespace

std::vector<SimTask> buildSimTasks(const Problem &problem, const PlanChoice &choice,
                                   const cost::CostModel &model) {
  std::vector<SimTask> tasks;
  fillSimTasks(problem, choice, model, tasks);
  // Forward and backward segments come first, in order; every other task names its bucket.
  size_t forward = 0, backward = 0, sparseSync = 0, sparseOptimizer = 0;
  for (SimTask &task : tasks) {
    auto ofBucket = [&](const std::string &what) { return what + ".b" + std::to_string(task.bucket); };
    switch (task.kind) {
    case TaskKind::Compute:
      task.name = task.phase == Phase::Forward    ? "fwd." + problem.forward[forward++].name
                  : task.phase == Phase::Backward ? "bwd." + problem.backward[backward++].name
                  : task.bucket < 0 ? "optimizer." + problem.sparse[sparseOptimizer++].name
                                    : ofBucket("optimizer");
      break;
    case TaskKind::Compress:
    case TaskKind::Decompress:
      task.name = ofBucket(vocab::toString(task.kind));
      break;
    case TaskKind::Collective:
      task.name = ofBucket(cost::toString(task.collective));
      break;
    case TaskKind::SparseSync:
      task.name = "sparse_all_reduce." + problem.sparse[sparseSync++].name;
      break;
    }
  }
  return tasks;
}

Evaluation evaluate(const Problem &problem, const PlanChoice &choice,
                    const cost::CostModel &model, cost::CollectiveCostCache *cache) {
  // Reused: the search evaluates many plans, each would otherwise allocate every task anew.
  thread_local std::vector<SimTask> tasks;
  fillSimTasks(problem, choice, model, tasks);
  return evaluateTasks(tasks, model, cache);
}

Evaluation evaluateTasks(const std::vector<SimTask> &tasks, const cost::CostModel &model,
                         cost::CollectiveCostCache *cache) {
  Evaluation evaluation;
  evaluation.sim = cost::simulate(model, tasks, cache);
  evaluation.iterationUs = evaluation.sim.error.empty()
                               ? evaluation.sim.iterationUs
                               : std::numeric_limits<double>::infinity();
  evaluation.computeUs = evaluation.sim.computeUs;
  evaluation.exposedCommUs = evaluation.sim.exposedCommUs;
  return evaluation;
}

double lowerBoundUs(const Problem &problem, const cost::CostModel &model,
                    const std::vector<cost::CompressionSpec> &compressors) {
  // Each row-sparse table is synchronised by its scheme whatever the buckets: its network
  // time adds to what they need.
  double sparseUs = 0;
  for (const SparseGradientTask &table : problem.sparse)
    sparseUs += cost::sparseSyncCost(model, table.sync->scheme, table.sync->table,
                                     table.sync->statistics, problem.group)
                    .communicationUs;
  return std::max(problem.totalComputeUs(),
                  model.communicationBoundUs(problem.totalGradientBytes(), problem.group,
                                             compressors) + sparseUs);
}

std::optional<cost::DType> parseComputeDtype(const std::string &name) {
  std::optional<cost::DType> dtype = cost::parseDType(name);
  if (!dtype || *dtype == cost::DType::I8 || name != cost::toString(*dtype))
    return std::nullopt;
  return dtype;
}

//===----------------------------------------------------------------------===//
// Compressor lists
//===----------------------------------------------------------------------===//

std::optional<std::vector<CompressionSpec>> parseCompressors(const std::string &text,
                                                              std::string &error) {
  std::vector<CompressionSpec> specs;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ',')) {
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (item.empty() || item == "none")
      continue;
    std::string reason;
    std::optional<CompressionSpec> spec = cost::parseCompressionSpec(item, &reason);
    if (!spec || spec->method == CompressionMethod::None) {
      error = reason.empty() ? "bad compressor '" + item + "'" : reason;
      return std::nullopt;
    }
    specs.push_back(*spec);
  }
  return specs;
}

std::string compressorName(const CompressionSpec &spec) {
  std::string name = cost::toString(spec.method);
  std::ostringstream parameter;
  if (vocab::takesRatio(spec.method))
    parameter << ":" << spec.ratio;
  else if (vocab::takesRank(spec.method))
    parameter << ":" << spec.rank;
  if (spec.deviceFixed)
    parameter << "@" << vocab::toString(spec.device);
  return name + parameter.str();
}

std::vector<CompressionSpec> placements(const CompressionSpec &allowed) {
  if (allowed.deviceFixed)
    return {allowed};
  std::vector<CompressionSpec> specs(2, allowed);
  specs[0].device = cost::Device::GPU;
  specs[1].device = cost::Device::CPU;
  return specs;
}

//===----------------------------------------------------------------------===//
// Baselines
//
// Each follows the system it is named after, on the same simulator as auto:
//  - nooverlap: one all-reduce per tensor after the whole backward pass (no
//    overlap; the textbook synchronous data parallelism).
//  - wfbp: wait-free backpropagation (Poseidon, Zhang et al., USENIX ATC 2017):
//    each tensor's all-reduce is issued as soon as its gradient is ready.
//  - ddp: PyTorch DistributedDataParallel's reducer (torch/nn/parallel/
//    distributed.py, `compute_bucket_assignment_by_size`): in ready order, a
//    bucket closes once it holds bucket_cap_mb (25 MiB); the first bucket's cap
//    is _DEFAULT_FIRST_BUCKET_BYTES (1 MiB).
//  - horovod: Horovod's tensor fusion (docs/tensor-fusion.rst): every cycle
//    (HOROVOD_CYCLE_TIME) the background thread takes the tensors ready so far
//    and fuses them, in order, into buffers of at most HOROVOD_FUSION_THRESHOLD
//    bytes (a larger tensor goes alone), repeating until none is left. Defaults
//    1 ms and 128 MiB since v0.21.0 (#2468), 5 ms and 64 MiB before. Cycles
//    start at multiples of the cycle time from the start of the iteration, with
//    gradients ready when compute alone would produce them. The simulator starts
//    each fused buffer when its last tensor is ready, not at the next cycle
//    boundary, which favours Horovod by up to one cycle per buffer.
//  - mgwfbp: MG-WFBP (Shi, Chu and Li, IEEE INFOCOM 2019): merge the next
//    gradient into the running bucket when waiting for it costs less than the
//    start-up time of a separate collective.
//  - threshold / manual: a fixed byte threshold, or bucket sizes given by hand.
//===----------------------------------------------------------------------===//

const std::vector<std::string> &baselineNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> baselines;
    for (const vocab::StrategyTraits &traits : vocab::kStrategies)
      if (traits.baseline)
        baselines.push_back(traits.spelling);
    return baselines;
  }();
  return names;
}

namespace {
/// Time at which each gradient is ready when compute runs alone.
std::vector<double> readyTimes(const Problem &problem) {
  double forwardUs = 0;
  for (const ComputeSegment &segment : problem.forward)
    forwardUs += segment.durationUs;
  std::vector<double> segmentEnd(problem.backward.size());
  double clock = forwardUs;
  for (size_t k = 0; k < problem.backward.size(); ++k)
    segmentEnd[k] = clock += problem.backward[k].durationUs;
  std::vector<double> ready;
  ready.reserve(problem.gradients.size());
  double latest = forwardUs;
  for (const GradientTensor &gradient : problem.gradients) {
    double time = gradient.readyAfterSegment >= 0 ? segmentEnd[gradient.readyAfterSegment]
                                                  : forwardUs;
    latest = std::max(latest, time);  // a bucket is ready when its last member is
    ready.push_back(latest);
  }
  return ready;
}

/// Splits the gradients into consecutive buckets; `closeBefore(begin, g, bytes)`
/// decides whether the bucket [begin, g) holding `bytes` ends before gradient g.
template <typename CloseRule>
std::vector<std::pair<int, int>> greedyBuckets(const Problem &problem, CloseRule closeBefore) {
  std::vector<std::pair<int, int>> ranges;
  int begin = 0;
  double bucketBytes = 0;
  for (int g = 0; g < static_cast<int>(problem.gradients.size()); ++g) {
    if (g > begin && closeBefore(begin, g, bucketBytes)) {
      ranges.emplace_back(begin, g);
      begin = g;
      bucketBytes = 0;
    }
    bucketBytes += static_cast<double>(problem.gradients[g].bytes);
  }
  if (!problem.gradients.empty())
    ranges.emplace_back(begin, static_cast<int>(problem.gradients.size()));
  return ranges;
}

/// Communication time of one bucket alone: encode + collective + decode.
double bucketCommUs(const Problem &problem, const cost::CostModel &model, double bytes,
                    int64_t elements, const std::optional<CompressionSpec> &compression) {
  const double executorUs = model.executorOverheadUs(elements, problem.group);
  if (!compression || compression->method == CompressionMethod::None)
    return executorUs + model.collective(CollectiveKind::AllReduce, bytes, problem.group).timeUs;
  cost::SyncCost cost = model.syncCost(*compression, vocab::preferredScheme(compression->method),
                                       elements, bytes, problem.group);
  return executorUs + cost.compression.encodeUs + cost.compression.decodeUs + cost.reduction.timeUs;
}
} // namespace

std::string checkBaselineOptions(const BaselineOptions &options) {
  if (!(options.horovodCycleUs > 0) || !std::isfinite(options.horovodCycleUs))
    return "the Horovod cycle time must be positive";
  if (options.horovodFusionBytes < 0)
    return "the Horovod fusion threshold must not be negative";
  if (options.thresholdBytes < 1)
    return "the fusion threshold must be at least one byte";
  return "";
}

std::optional<PlanChoice> baselineChoice(const std::string &name, const Problem &problem,
                                         const cost::CostModel &model,
                                         const BaselineOptions &options, std::string &error) {
  if (error = checkBaselineOptions(options); !error.empty())
    return std::nullopt;
  const int count = static_cast<int>(problem.gradients.size());
  std::vector<std::pair<int, int>> ranges;
  const std::optional<vocab::Strategy> strategy = vocab::parseStrategy(name);
  if (!strategy || !vocab::traitsOf(*strategy).rule) {
    std::string rules;
    for (const vocab::StrategyTraits &traits : vocab::kStrategies)
      if (traits.rule)
        rules += (rules.empty() ? "" : ", ") + std::string(traits.spelling);
    error = "unknown strategy '" + name + "' (expected " + rules + ")";
    return std::nullopt;
  }
  PlanChoice choice;
  choice.strategy = name;
  auto singletons = [&] {
    for (int g = 0; g < count; ++g)
      ranges.emplace_back(g, g + 1);
  };
  // DDP closes a bucket once it reaches the cap; its first bucket is capped at 1 MiB.
  auto reachesCap = [&](double firstCap, double cap) {
    return greedyBuckets(problem, [&, first = true](int, int, double bytes) mutable {
      bool close = bytes >= (first ? firstCap : cap);
      if (close)
        first = false;
      return close;
    });
  };
  switch (*strategy) {
  case vocab::Strategy::NoOverlap: {
    singletons();
    choice.afterBackward = true;
    break;
  }
  case vocab::Strategy::Wfbp: {
    singletons();
    break;
  }
  case vocab::Strategy::Ddp: {
    ranges = reachesCap(1 << 20, 25 << 20);
    break;
  }
  case vocab::Strategy::Threshold: {
    double cap = static_cast<double>(options.thresholdBytes);
    ranges = reachesCap(cap, cap);
    break;
  }
  case vocab::Strategy::Horovod: {
    std::vector<double> ready = readyTimes(problem);
    auto cycleOf = [&](int g) { return std::ceil(ready[g] / options.horovodCycleUs); };
    const double fusionBytes = static_cast<double>(options.horovodFusionBytes);
    ranges = greedyBuckets(problem, [&](int, int g, double bytes) {
      return cycleOf(g) != cycleOf(g - 1) ||
             bytes + static_cast<double>(problem.gradients[g].bytes) > fusionBytes;
    });
    break;
  }
  case vocab::Strategy::MgWfbp: {
    const double alpha = bucketCommUs(problem, model, 4, 1, options.compression);
    std::vector<double> ready = readyTimes(problem);
    int begin = 0;
    double bytes = 0, previousEnd = 0, start = 0;
    int64_t elements = 0;
    for (int g = 0; g < count; ++g) {
      if (g > begin && ready[g] - start >= alpha) {
        previousEnd = start + bucketCommUs(problem, model, bytes, elements, options.compression);
        ranges.emplace_back(begin, g);
        begin = g;
        bytes = 0;
        elements = 0;
      }
      bytes += static_cast<double>(problem.gradients[g].bytes);
      elements += problem.gradients[g].elements;
      start = std::max(ready[g], previousEnd);
    }
    if (count > 0)
      ranges.emplace_back(begin, count);
    break;
  }
  case vocab::Strategy::Manual: {
    int begin = 0;
    for (int64_t size : options.manualBuckets) {
      if (size < 1 || begin + size > count) {
        error = "manual buckets must be positive sizes summing to the " + std::to_string(count) +
                " gradient tensors";
        return std::nullopt;
      }
      ranges.emplace_back(begin, begin + static_cast<int>(size));
      begin += static_cast<int>(size);
    }
    if (begin != count) {
      error = "manual buckets cover " + std::to_string(begin) + " of the " +
              std::to_string(count) + " gradient tensors";
      return std::nullopt;
    }
    break;
  }
  case vocab::Strategy::Auto:
    break; // refused above: not a rule
  }
  for (auto [begin, end] : ranges) {
    BucketChoice bucket;
    bucket.begin = begin;
    bucket.end = end;
    if (options.compression) {
      bucket.compression = *options.compression;
      bucket.compression.errorFeedback = wantsErrorFeedback(bucket.compression.method);
      bucket.scheme = vocab::preferredScheme(bucket.compression.method);
    }
    choice.buckets.push_back(bucket);
  }
  assignSchedule(choice, 1);
  return choice;
}

std::optional<BaselineResult> bestBaseline(const std::string &name, const Problem &problem,
                                           const cost::CostModel &model,
                                           const BaselineOptions &options,
                                           const std::vector<CompressionSpec> &allowed,
                                           std::string &error,
                                           std::vector<BaselineResult> *candidates,
                                           cost::CollectiveCostCache *cache) {
  std::vector<std::optional<CompressionSpec>> compressions(allowed.begin(), allowed.end());
  if (compressions.empty())
    compressions.push_back(std::nullopt);
  std::optional<BaselineResult> best;
  for (const std::optional<CompressionSpec> &compression : compressions) {
    BaselineOptions applied = options;
    applied.compression = compression;
    std::optional<PlanChoice> choice = baselineChoice(name, problem, model, applied, error);
    if (!choice)
      return std::nullopt;
    Evaluation evaluation = evaluate(problem, *choice, model, cache);
    if (candidates)
      candidates->push_back(BaselineResult{*choice, evaluation});
    if (!best || evaluation.iterationUs < best->evaluation.iterationUs)
      best = BaselineResult{std::move(*choice), std::move(evaluation)};
  }
  return best;
}

void chooseChunks(const Problem &problem, PlanChoice &choice, const cost::CostModel &model,
                  cost::CollectiveCostCache *cache) {
  for (BucketChoice &bucket : choice.buckets) {
    if (bucket.compression.method != CompressionMethod::None) {
      bucket.chunks = 1;  // compressed payloads are sent whole
      continue;
    }
    double bytes = 0;
    for (int g = bucket.begin; g < bucket.end; ++g)
      bytes += static_cast<double>(problem.gradients[g].bytes);
    CollectiveKind kind = vocab::traitsOf(bucket.scheme).sequence[0];
    auto timeUs = [&](int64_t chunks) {
      return cache ? cache->chunkedCollective(kind, bytes, problem.group, chunks).timeUs
                   : model.chunkedCollective(kind, bytes, problem.group, chunks).timeUs;
    };
    double best = timeUs(1);
    bucket.chunks = 1;
    for (int64_t chunks = 2; chunks <= 16; chunks *= 2) {
      double time = timeUs(chunks);
      if (time < best * (1 - 1e-9)) {
        best = time;
        bucket.chunks = chunks;
      }
    }
  }
}

void assignSchedule(PlanChoice &choice, int streams) {
  const int64_t count = static_cast<int64_t>(choice.buckets.size());
  for (int64_t b = 0; b < count; ++b) {
    BucketChoice &bucket = choice.buckets[b];
    bucket.stream = 0;
    bucket.priority = b;
    // The next forward needs the last-ready gradients first.
    bucket.gatherStream = streams > 1 ? 1 : 0;
    bucket.gatherPriority = count + (count - 1 - b);
  }
}

//===----------------------------------------------------------------------===//
// Synthetic problems
//===----------------------------------------------------------------------===//

Problem syntheticProblem(int tensors, uint64_t seed, const cost::CostModel &model,
                         cost::Group group) {
  // splitmix64: portable, unlike the standard library's distributions.
  uint64_t state = seed;
  auto uniform = [&state] {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return static_cast<double>(z >> 11) * 0x1.0p-53;
  };
  Problem problem;
  problem.group = group;
  const double tokens = std::exp(std::log(64.0) + uniform() * std::log(4096.0 / 64.0));
  const int count = std::max(0, tensors);
  problem.forward.resize(count);
  for (int g = 0; g < count; ++g) {
    GradientTensor gradient;
    gradient.name = "p" + std::to_string(g);
    gradient.elements = static_cast<int64_t>(
        std::round(std::exp(std::log(256.0) + uniform() * std::log(4194304.0 / 256.0))));
    gradient.bytes = 4 * gradient.elements;
    double elements = static_cast<double>(gradient.elements);
    // Backward: two GEMMs per weight (2 FLOPs per MAC), reading and writing activations.
    problem.backward.push_back(
        {"b" + std::to_string(g), model.computeUs(4 * tokens * elements, 12 * elements)});
    gradient.readyAfterSegment = g;
    // Forward runs in the reverse order: the last-ready gradient's layer first.
    gradient.forwardSegment = count - 1 - g;
    problem.forward[count - 1 - g] = {"f" + std::to_string(count - 1 - g),
                                      model.computeUs(2 * tokens * elements, 8 * elements)};
    gradient.optimizerUs = model.computeUs(static_cast<double>(optimizerFlops(gradient.elements)),
                                           static_cast<double>(optimizerBytes(gradient.elements, 4)));
    problem.gradients.push_back(gradient);
  }
  return problem;
}

} // namespace zen::plan

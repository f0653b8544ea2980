//===- Autotune.cpp - joint search over the four planning decisions --------===//
//
// 1. Seeds: every baseline with each allowed compressor applied to every
//    bucket, and uncompressed.
// 2. Dynamic programming over bucket boundaries in ready order, with the
//    per-bucket choice of compression (method, device) or decomposition made
//    inside the recurrence. Its model is the communication stream as a FIFO:
//    a bucket starts when its last gradient is ready (plus its encode) and the
//    previous bucket is done. f(j) = min_i max(ready_j + encode, f(i)) + wire + decode
//    is exact for that model (over the starts i it considers) because
//    max(., f(i)) + c is monotone in f(i).
//    A CPU encode also waits for the host's compression worker, carried along
//    the chosen path. Three models: plain (that FIFO); kernel-aware, which
//    also charges GPU compression kernels to the compute stream (a GPU encode
//    delays every later gradient, encode + decode lengthen the compute stream;
//    a bucket is scored by max(its end, backward end + that extra compute):
//    it finds CPU offload worthwhile in compute-bound iterations); and
//    overlap-aware, which also charges the slowdown of compute while a
//    collective overlaps backward (it finds fewer, larger buckets where
//    communication hides under compute). Each seeds the local search.
//    A window bounds how far back a bucket reaches, and within it a run looks
//    at every start near the bucket's end but farther ones only at doubling
//    distances (and stops early: on an idle stream, unless overlap is
//    charged, or a tail that alone cannot win), so it is linear. Every run
//    shares one price table per bucket end: each (bucket, option) is priced
//    once for all families and modes, and collective costs are remembered by
//    their arguments.
// 3. Local search (hill climbing). Coarse climbs from the best seed of each
//    origin (baselines, each DP model); on small problems also the classic
//    fine climb (the search before this one, which converged there) from the
//    best seed of the classic origins; then kicks
//    (every bucket split in two, or neighbours merged pairwise) and climbs from
//    there while that ends higher (without the classic search, each kick
//    that gains followed by pattern moves along the shift it made to the
//    bucket ends). Moves: merge all neighbours pairwise on
//    plans with many buckets; per bucket merge/split neighbours, move a
//    boundary (coarse: in steps that double while they keep improving; fine:
//    one gradient at a time), flip compression (coarse: also for either half
//    of a bucket),
//    decomposition and chunks; the stream count. Candidates are scored by
//    the simulator on the condensed problem (one gradient per bucket, compute
//    segments merged between the points buckets depend on), which simulates
//    like the full problem up to rounding at a cost that grows with buckets,
//    not tensors. Coarse sweeps stop once one gains less than kSweepGain of
//    what separates the plan from the lower bound; fine ones once none gains.
//
// Allowing more compressors must never plan worse, but neither the DP's model
// nor hill climbing is monotone in the options it may use: the DP can prefer a
// compressor the simulator then finds worse, and a climb with more moves can
// end on a lower hill. So the search is organised by families of compression
// options: none; with several allowed, each compressor alone; and all of
// them. Every seed is credited to each family containing the compressors it
// was made from, and the DP runs once per family. Then, narrowest family
// first, the local search runs within each family from its seeds and, when a
// narrower family's result is better still, once more from that result;
// every result is credited like a seed. Each family's search has its own
// work bound, a function of the problem alone, so a run allowing a subset of
// the compressors makes exactly the searches of its own families; the answer
// is the best result of all families, so allowing more never plans worse, at
// any size. Every candidate is scored by the simulator and the answer is
// re-scored on the full problem, so the result is never worse than a seed.
//
//===----------------------------------------------------------------------===//
#include "zen/Planner/Planning.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <future>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>

namespace zen::plan {

using cost::CollectiveKind;
using cost::CompressionMethod;
using cost::CompressionSpec;
using cost::SyncScheme;

namespace {

constexpr int kWindow = 256;  // the most gradients a DP bucket may reach back over
constexpr double kInfinity = std::numeric_limits<double>::infinity();
/// The DP considers every bucket start within this many gradients of the
/// bucket's end, farther ones only at doubling distances.
constexpr int kNearReach = 8;
/// The local search stops after a sweep that gains less than this fraction of
/// the distance to the lower bound.
constexpr double kSweepGain = 1e-3;
/// The classic fine climbs run on problems with at most this many gradients,
/// from a seed with at most this many buckets.
constexpr size_t kClassicGradients = 2048;
constexpr size_t kClassicBuckets = 64;
/// Plans with more buckets than this first try merging all neighbours pairwise.
constexpr size_t kManyBuckets = 16;
/// Work bound of one local search, in simulated tasks: AutotuneOptions::
/// localSearchWork plus this per gradient tensor.
constexpr double kSearchWorkPerTensor = 100;

/// Range maxima (or minima) of a fixed array in O(1) per query.
class SparseTable {
public:
  SparseTable(const std::vector<int> &values, bool maximum) : maximum_(maximum) {
    levels_.push_back(values);
    for (size_t width = 2; width <= values.size(); width *= 2) {
      const std::vector<int> &below = levels_.back();
      std::vector<int> level(values.size() - width + 1);
      for (size_t i = 0; i < level.size(); ++i)
        level[i] = pick(below[i], below[i + width / 2]);
      levels_.push_back(std::move(level));
    }
  }
  /// Over [begin, end), begin < end.
  int query(int begin, int end) const {
    int level = 31 - __builtin_clz(static_cast<unsigned>(end - begin));
    return pick(levels_[level][begin], levels_[level][end - (1 << level)]);
  }

private:
  int pick(int a, int b) const { return maximum_ ? std::max(a, b) : std::min(a, b); }
  bool maximum_;
  std::vector<std::vector<int>> levels_;
};

std::vector<int> fieldOf(const Problem &problem, int GradientTensor::*field) {
  std::vector<int> values;
  values.reserve(problem.gradients.size());
  for (const GradientTensor &gradient : problem.gradients)
    values.push_back(gradient.*field);
  return values;
}

template <typename T, typename F> std::vector<T> prefixSums(size_t count, F &&term) {
  std::vector<T> sums(count + 1, T{});
  for (size_t i = 0; i < count; ++i)
    sums[i + 1] = sums[i] + term(i);
  return sums;
}

/// What a bucket of gradients [begin, end) holds, in O(1).
class GradientRanges {
public:
  explicit GradientRanges(const Problem &problem)
      : bytes_(prefixSums<int64_t>(problem.gradients.size(),
                                   [&](size_t g) { return problem.gradients[g].bytes; })),
        elements_(prefixSums<int64_t>(problem.gradients.size(),
                                      [&](size_t g) { return problem.gradients[g].elements; })),
        optimizerUs_(prefixSums<double>(problem.gradients.size(),
                                        [&](size_t g) { return problem.gradients[g].optimizerUs; })),
        readySegment_(fieldOf(problem, &GradientTensor::readyAfterSegment), true),
        firstForward_(fieldOf(problem, &GradientTensor::forwardSegment), false) {}

  int64_t bytes(int begin, int end) const { return bytes_[end] - bytes_[begin]; }
  int64_t elements(int begin, int end) const { return elements_[end] - elements_[begin]; }
  double optimizerUs(int begin, int end) const { return optimizerUs_[end] - optimizerUs_[begin]; }
  int readySegment(int begin, int end) const { return readySegment_.query(begin, end); }
  int firstForward(int begin, int end) const { return firstForward_.query(begin, end); }

private:
  std::vector<int64_t> bytes_, elements_;
  std::vector<double> optimizerUs_;
  SparseTable readySegment_, firstForward_;
};

/// One way to communicate a bucket, priced for the FIFO model.
struct Priced {
  double encodeUs = 0;  // before the collective: on the compute stream or the CPU worker
  double decodeUs = 0;  // after it, part of tailUs
  double tailUs = 0;    // collective (+ decode) on the communication path
};

/// The DP's state after a bucket ending at gradient j, along its best path.
struct Frontier {
  double finishUs = -kInfinity;  // the communication path is free
  double scoreUs = -kInfinity;   // what the DP minimises: finishUs (plain), or
                                 // max(finishUs, backward end + extraComputeUs)
  double gpuDelayUs = 0;         // GPU encodes so far: later gradients are ready this much later
  double extraComputeUs = 0;     // GPU encodes and decodes (and overlap slowdown) so far
  double hostFreeUs = -kInfinity;  // the CPU compression worker is free
};

/// Where a seed comes from: the baselines, or the DP under one of its models
/// (plain FIFO; also charging GPU compression kernels to the compute stream;
/// also charging overlap slowdown). Hill climbing from the best seed of each
/// origin ends on hills the best seed alone would miss.
enum Origin { kBaseline, kPlainProgram, kKernelAwareProgram, kOverlapAwareProgram, kOrigins };

/// One run of the dynamic program: the options it may choose from and its model.
struct ProgramRun {
  size_t family = 0;
  bool decompose = false;
  Origin model = kPlainProgram;
  std::vector<int> options;  // price slots, uncompressed first
  std::vector<Frontier> state;
  std::vector<int> from;     // the bucket ending at gradient j starts at gradient from[j]
  std::vector<int> chosen;   // and is communicated with option slot chosen[j]
};

/// A scored plan and the stream count its schedule uses. `exact`: scored on
/// the full problem; otherwise on the condensed one, simulating that many tasks
/// (its evaluation then carries the times, not the timeline).
struct Candidate {
  PlanChoice choice;
  Evaluation evaluation;
  int streams = 1;
  bool exact = true;
  size_t simulatedTasks = 0;
};

/// A condensed plan's times.
struct Scored {
  double iterationUs = 0;
  double computeUs = 0;
  double exposedCommUs = 0;
  size_t tasks = 0;
};

/// A set of allowed compressors and the search's best plans using only them.
struct Family {
  std::vector<int> compressors;  // ascending indices into AutotuneOptions::compressors
  std::vector<CompressionSpec> specs;  // none first, then each member's placements
  std::vector<int> slots;              // the compressed specs' price slots
  std::optional<Candidate> seeds[kOrigins];  // the best seed of each origin
  std::optional<Candidate> best;       // the best seed or local-search result
};

bool sameSpec(const CompressionSpec &a, const CompressionSpec &b) {
  return a.method == b.method && a.device == b.device && a.ratio == b.ratio && a.rank == b.rank;
}

/// Entries of a search's collective price cache, sized to the problem: a small model does not
/// pay for touching a large table.
size_t priceCacheEntries(const Problem &problem) {
  return std::clamp<size_t>(16 * problem.gradients.size(), 1024, 1 << 14);
}

bool better(const Evaluation &candidate, const Evaluation &incumbent) {
  return candidate.iterationUs < incumbent.iterationUs * (1 - 1e-9);
}

/// Price slots of the DP: the uncompressed all-reduce, its reduce-scatter when
/// decomposed, then every placement of every allowed compressor.
constexpr int kAllReduceSlot = 0;
constexpr int kReduceScatterSlot = 1;
constexpr int kFirstCompressedSlot = 2;

class Searcher {
public:
  Searcher(const Problem &problem, const cost::CostModel &model, const AutotuneOptions &options)
      : problem_(problem), model_(model), options_(options), ranges_(problem),
        prices_(model, priceCacheEntries(problem)) {
    const size_t segments = problem.backward.size();
    backwardPrefixUs_ = prefixSums<double>(
        segments, [&](size_t k) { return problem.backward[k].durationUs; });
    forwardPrefixUs_ = prefixSums<double>(problem.forward.size(),
                                          [&](size_t k) { return problem.forward[k].durationUs; });
    for (const CompressionSpec &allowed : options.compressors)
      for (const CompressionSpec &placed : placements(allowed))
        slotSpecs_.push_back(placed);
    // Narrowest first: none; each compressor alone (when there are several); all.
    const int allowed = static_cast<int>(options.compressors.size());
    if (allowed > 0)
      addFamily({});
    if (allowed > 1)
      for (int c = 0; c < allowed; ++c)
        addFamily({c});
    std::vector<int> all(allowed);
    for (int c = 0; c < allowed; ++c)
      all[c] = c;
    addFamily(std::move(all));
    searchWork_ = options.localSearchWork +
                  kSearchWorkPerTensor * static_cast<double>(problem.gradients.size());
  }

  AutotuneResult run();

private:
  void addFamily(std::vector<int> compressors);
  /// Credits `candidate` to every family containing the compressors it was
  /// made from: as a seed of `origin`, or (without one) as a local-search result.
  void offer(const Candidate &candidate, const std::vector<int> &madeFrom,
             std::optional<Origin> origin);
  /// A seed and where `offer` credits it.
  struct Seed {
    Candidate candidate;
    std::vector<int> madeFrom;
    Origin origin;
  };
  /// One baseline's evaluation: as reported (at its best over the allowed compressors), or
  /// uncompressed when compressors are allowed. Reads only the problem, the model and the
  /// options (with the prices of the thread that runs it), so jobs run beside the dynamic
  /// programs and each other.
  struct BaselineJob {
    std::string name;
    bool uncompressed = false;
    std::optional<double> iterationUs;  // unset: the baseline does not apply
    std::vector<Seed> seeds;
    int64_t evaluations = 0;
  };
  std::vector<BaselineJob> baselineJobs() const;
  void evaluateBaseline(BaselineJob &job, cost::CollectiveCostCache &prices) const;
  std::vector<Seed> dynamicProgramSeeds();
  /// `choice` scored by the simulator on the condensed problem.
  Candidate condensedCandidate(PlanChoice choice, int streams);
  Evaluation condensedEvaluation(const PlanChoice &choice);
  std::vector<double> readyTimesAlone(double &backwardEndUs) const;
  Priced price(int begin, int end, int slot);
  void runPrograms(std::vector<ProgramRun> &runs);
  PlanChoice choiceOf(const ProgramRun &run) const;
  /// Splits bucket b where the bytes are halved (both halves keep its settings);
  /// false for a single gradient.
  bool splitInHalves(std::vector<BucketChoice> &buckets, size_t b) const;
  /// Hill climbing from `current` within `family` until `work` (simulated
  /// tasks) reaches `limit`. Coarse: boundaries move in steps that double while they improve,
  /// and a compressor may also go to either half of a bucket. Fine: boundaries
  /// move one gradient at a time, compressors go to whole buckets
  /// (smaller steps, other hills).
  Candidate localSearch(const Family &family, Candidate current, double &work, double limit,
                        bool fine);
  /// The local searches of one family, within one work bound: a coarse climb
  /// from its best seed of each origin; on small problems the classic
  /// search (a fine climb from the best seed of the baselines, plain and
  /// kernel-aware DP, then from the family's best plan when a narrower
  /// family's search made that better);
  /// then kicks (every bucket split, or neighbours merged pairwise) and climbs
  /// from there for as long as that ends higher.
  Candidate searchFamily(const Family &family);
  /// Pattern moves after a kick took `from` to `to` by moving where buckets end and
  /// nothing else: every bucket end moved on by that shift times a step that doubles while
  /// the plan improves and halves when it does not. Kicks otherwise take such a drift a few
  /// gradients at a time: on a 100 000-tensor model, hundreds of kicks of a millionth of
  /// the iteration each.
  Candidate extrapolate(const PlanChoice &from, Candidate to, double &work);
  CompressionSpec slotSpec(int slot) const;
  void setOption(BucketChoice &bucket, const CompressionSpec &spec, bool decomposed) const;

  const Problem &problem_;
  const cost::CostModel &model_;
  const AutotuneOptions &options_;
  GradientRanges ranges_;
  cost::CollectiveCostCache prices_;  // every collective the search prices
  std::unordered_map<std::string, Scored> scored_;  // every condensed plan simulated, by its buckets
  std::vector<double> backwardPrefixUs_, forwardPrefixUs_;
  std::vector<double> ready_;           // per gradient, compute alone
  double backwardEndUs_ = 0;            // forward + backward, compute alone
  double lowerBoundUs_ = 0;
  std::vector<CompressionSpec> slotSpecs_;  // the compressed slots' specs, from kFirstCompressedSlot
  std::vector<Family> families_;  // narrowest first; the last allows every compressor
  double searchWork_ = 0;
  int64_t evaluations_ = 0;
};

void Searcher::addFamily(std::vector<int> compressors) {
  Family family;
  family.specs.push_back(CompressionSpec{});
  for (int c : compressors)
    for (const CompressionSpec &placed : placements(options_.compressors[c])) {
      family.specs.push_back(placed);
      for (size_t s = 0; s < slotSpecs_.size(); ++s)
        if (sameSpec(slotSpecs_[s], placed)) {
          family.slots.push_back(kFirstCompressedSlot + static_cast<int>(s));
          break;
        }
    }
  family.compressors = std::move(compressors);
  families_.push_back(std::move(family));
}

void Searcher::offer(const Candidate &candidate, const std::vector<int> &madeFrom,
                     std::optional<Origin> origin) {
  for (Family &family : families_) {
    if (!std::includes(family.compressors.begin(), family.compressors.end(), madeFrom.begin(),
                       madeFrom.end()))
      continue;
    if (origin) {
      std::optional<Candidate> &seed = family.seeds[*origin];
      if (!seed || better(candidate.evaluation, seed->evaluation))
        seed = candidate;
    }
    if (!family.best || better(candidate.evaluation, family.best->evaluation))
      family.best = candidate;
  }
}

Evaluation Searcher::condensedEvaluation(const PlanChoice &choice) {
  const int count = static_cast<int>(choice.buckets.size());
  Problem condensed;
  condensed.backward.reserve(count + 1);
  condensed.gradients.reserve(count);
  condensed.group = problem_.group;
  condensed.computeDtype = problem_.computeDtype;
  PlanChoice single = choice;

  // Backward segments merge up to each segment after which a bucket is ready.
  std::vector<int> ready(count), cuts;
  cuts.reserve(count);
  for (int b = 0; b < count; ++b) {
    const BucketChoice &bucket = choice.buckets[b];
    ready[b] = ranges_.readySegment(bucket.begin, bucket.end);
    if (ready[b] >= 0)
      cuts.push_back(ready[b]);
  }
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  const int segments = static_cast<int>(problem_.backward.size());
  int covered = 0;  // backward segments [0, covered) are merged into condensed ones
  for (int cut : cuts) {
    condensed.backward.push_back({"", backwardPrefixUs_[cut + 1] - backwardPrefixUs_[covered]});
    covered = cut + 1;
  }
  if (covered < segments)
    condensed.backward.push_back({"", backwardPrefixUs_[segments] - backwardPrefixUs_[covered]});

  // Forward segments merge up to each one a decoupled all-gather must precede.
  const int forwardCount = static_cast<int>(problem_.forward.size());
  std::vector<int> firstForward(count, -1), starts;
  starts.reserve(count + 1);
  if (forwardCount > 0)
    starts.push_back(0);
  for (int b = 0; b < count; ++b) {
    const BucketChoice &bucket = choice.buckets[b];
    if (!bucket.decomposed())
      continue;
    firstForward[b] = std::min(forwardCount, ranges_.firstForward(bucket.begin, bucket.end));
    if (firstForward[b] >= 0 && firstForward[b] < forwardCount)
      starts.push_back(firstForward[b]);
  }
  std::sort(starts.begin(), starts.end());
  starts.erase(std::unique(starts.begin(), starts.end()), starts.end());
  condensed.forward.reserve(starts.size());
  for (size_t t = 0; t < starts.size(); ++t) {
    int next = t + 1 < starts.size() ? starts[t + 1] : forwardCount;
    condensed.forward.push_back({"", forwardPrefixUs_[next] - forwardPrefixUs_[starts[t]]});
  }

  auto indexIn = [](const std::vector<int> &sorted, int value) {
    return static_cast<int>(std::lower_bound(sorted.begin(), sorted.end(), value) - sorted.begin());
  };
  for (int b = 0; b < count; ++b) {
    BucketChoice &bucket = single.buckets[b];
    GradientTensor gradient;
    gradient.elements = ranges_.elements(bucket.begin, bucket.end);
    gradient.bytes = ranges_.bytes(bucket.begin, bucket.end);
    gradient.optimizerUs = ranges_.optimizerUs(bucket.begin, bucket.end);
    gradient.readyAfterSegment = ready[b] >= 0 ? indexIn(cuts, ready[b]) : -1;
    gradient.forwardSegment = firstForward[b] < 0               ? firstForward[b]
                              : firstForward[b] < forwardCount ? indexIn(starts, firstForward[b])
                                                               : static_cast<int>(starts.size());
    condensed.gradients.push_back(gradient);
    bucket.begin = b;
    bucket.end = b + 1;
  }
  return evaluate(condensed, single, model_, &prices_);
}

Candidate Searcher::condensedCandidate(PlanChoice choice, int streams) {
  // Climbs from different starts, and sweeps that end without a gain, meet
  // the same plans again: each is simulated once.
  // One record per bucket, appended at once: appending field by field cost more than the
  // lookup.
  std::string key;
  key.reserve(choice.buckets.size() * 11 * sizeof(int64_t));
  for (const BucketChoice &bucket : choice.buckets) {
    int64_t ratioBits = 0;
    std::memcpy(&ratioBits, &bucket.compression.ratio, sizeof ratioBits);
    const int64_t record[] = {bucket.end,
                              bucket.chunks,
                              static_cast<int64_t>(bucket.scheme),
                              bucket.stream,
                              bucket.priority,
                              bucket.gatherStream,
                              bucket.gatherPriority,
                              int64_t(bucket.compression.method),
                              int64_t(bucket.compression.device),
                              bucket.compression.rank,
                              ratioBits};
    key.append(reinterpret_cast<const char *>(record), sizeof record);
  }
  auto [known, inserted] = scored_.try_emplace(std::move(key));
  if (inserted) {
    Evaluation evaluation = condensedEvaluation(choice);
    known->second = {evaluation.iterationUs, evaluation.computeUs, evaluation.exposedCommUs,
                     evaluation.sim.endUs.size()};
  }
  const Scored &score = known->second;
  Evaluation evaluation;
  evaluation.iterationUs = score.iterationUs;
  evaluation.computeUs = score.computeUs;
  evaluation.exposedCommUs = score.exposedCommUs;
  return Candidate{std::move(choice), std::move(evaluation), streams, false, score.tasks};
}

std::vector<double> Searcher::readyTimesAlone(double &backwardEndUs) const {
  const double forwardUs = forwardPrefixUs_.back();
  backwardEndUs = forwardUs + backwardPrefixUs_.back();
  std::vector<double> ready;
  ready.reserve(problem_.gradients.size());
  double latest = forwardUs;
  for (const GradientTensor &gradient : problem_.gradients) {
    if (gradient.readyAfterSegment >= 0)
      latest = std::max(latest, forwardUs + backwardPrefixUs_[gradient.readyAfterSegment + 1]);
    ready.push_back(latest);
  }
  return ready;
}

CompressionSpec Searcher::slotSpec(int slot) const {
  return slot < kFirstCompressedSlot ? CompressionSpec{} : slotSpecs_[slot - kFirstCompressedSlot];
}

Priced Searcher::price(int begin, int end, int slot) {
  Priced priced;
  if (slot < kFirstCompressedSlot) {
    // A decoupled all-gather overlaps the next forward; only the reduce-scatter is on the path.
    priced.tailUs = prices_
                        .chunkedCollective(slot == kReduceScatterSlot
                                               ? CollectiveKind::ReduceScatter
                                               : CollectiveKind::AllReduce,
                                           static_cast<double>(ranges_.bytes(begin, end)),
                                           problem_.group, 1)
                        .timeUs +
                    model_.executorOverheadUs(ranges_.elements(begin, end), problem_.group);
    return priced;
  }
  const CompressionSpec &spec = slotSpecs_[slot - kFirstCompressedSlot];
  const vocab::SyncScheme scheme = vocab::preferredScheme(spec.method);
  const int64_t elements = ranges_.elements(begin, end);
  cost::CompressionCost cost = model_.compression(
      spec, elements, vocab::gathersPayloads(scheme) ? problem_.group.ranks : 1);
  priced.encodeUs = cost.encodeUs;
  priced.decodeUs = cost.decodeUs;
  priced.tailUs = cost.decodeUs +
                  prices_.compressedSync(spec, scheme, elements, problem_.group, 1).timeUs +
                  model_.executorOverheadUs(elements, problem_.group);
  return priced;
}

void Searcher::setOption(BucketChoice &bucket, const CompressionSpec &spec,
                         bool decomposed) const {
  bucket.compression = spec;
  bucket.compression.errorFeedback = wantsErrorFeedback(spec.method);
  bucket.scheme = vocab::schemeFor(spec.method, decomposed);
  if (spec.method != CompressionMethod::None)
    bucket.chunks = 1;
}

void Searcher::runPrograms(std::vector<ProgramRun> &runs) {
  const int count = static_cast<int>(problem_.gradients.size());
  const int slots = kFirstCompressedSlot + static_cast<int>(slotSpecs_.size());
  // Prices of the buckets ending at the current gradient j, by reach (j - 1 - i) and slot.
  std::vector<Priced> prices(static_cast<size_t>(kWindow) * slots);
  std::vector<int> pricedFor(prices.size(), -1);
  const double slowdownShare = 1 - 1 / model_.overlapSlowdown();
  for (ProgramRun &run : runs) {
    run.state.assign(count + 1, Frontier{});
    run.from.assign(count + 1, 0);
    run.chosen.assign(count + 1, kAllReduceSlot);
  }
  for (int j = 1; j <= count; ++j) {
    const double readyAlone = ready_[j - 1];
    const int windowStart = std::max(0, j - kWindow);  // the farthest start
    for (ProgramRun &run : runs) {
      Frontier &best = run.state[j];
      best.scoreUs = best.finishUs = kInfinity;
      // Every start near j, then ever farther ones at doubling reach, and the farthest.
      auto nextStart = [&](int i) {
        int reach = j - 1 - i;
        if (reach < kNearReach)
          return i - 1;
        return i == windowStart ? -1 : std::max(windowStart, j - 2 - 2 * reach);
      };
      for (int i = j - 1; i >= windowStart; i = nextStart(i)) {
        const Frontier &previous = run.state[i];
        const double ready = readyAlone + previous.gpuDelayUs;
        double cheapestTail = kInfinity;
        for (int slot : run.options) {
          size_t at = static_cast<size_t>(j - 1 - i) * slots + slot;
          if (pricedFor[at] != j) {
            prices[at] = price(i, j, slot);
            pricedFor[at] = j;
          }
          const Priced &option = prices[at];
          const bool onCpu = slot >= kFirstCompressedSlot && slotSpec(slot).device == cost::Device::CPU;
          Frontier next = previous;
          double encoded = onCpu ? std::max(ready, previous.hostFreeUs) + option.encodeUs
                                 : ready + option.encodeUs;
          if (onCpu) {
            next.hostFreeUs = encoded;
          } else if (run.model != kPlainProgram) {
            next.gpuDelayUs += option.encodeUs;
            next.extraComputeUs += option.encodeUs + option.decodeUs;
          }
          next.finishUs = std::max(encoded, previous.finishUs) + option.tailUs;
          if (run.model == kOverlapAwareProgram) {
            // The part of the collective that overlaps backward slows compute down.
            double overlapUs = std::min(next.finishUs, backwardEndUs_) -
                               std::min(std::max(encoded, previous.finishUs), backwardEndUs_);
            next.extraComputeUs += slowdownShare * std::max(0.0, overlapUs);
          }
          next.scoreUs = run.model == kPlainProgram
                             ? next.finishUs
                             : std::max(next.finishUs, backwardEndUs_ + next.extraComputeUs);
          cheapestTail = std::min(cheapestTail, option.tailUs);
          if (next.scoreUs < best.scoreUs ||
              (next.scoreUs == best.scoreUs && next.finishUs < best.finishUs)) {
            best = next;
            run.from[j] = i;
            run.chosen[j] = slot;
          }
        }
        // Reaching further back only adds bytes: once the tail alone cannot
        // win, stop; also once the stream is idle when this bucket is ready,
        // unless overlap is charged (a larger bucket still saves start-ups).
        if ((run.model != kOverlapAwareProgram && previous.finishUs <= ready) ||
            readyAlone + cheapestTail >= best.scoreUs)
          break;
      }
    }
  }
}

PlanChoice Searcher::choiceOf(const ProgramRun &run) const {
  PlanChoice choice;
  choice.strategy = "auto";
  for (int j = static_cast<int>(problem_.gradients.size()); j > 0; j = run.from[j]) {
    BucketChoice bucket;
    bucket.begin = run.from[j];
    bucket.end = j;
    setOption(bucket, slotSpec(run.chosen[j]), run.chosen[j] == kReduceScatterSlot);
    choice.buckets.push_back(bucket);
  }
  std::reverse(choice.buckets.begin(), choice.buckets.end());
  assignSchedule(choice, 1);
  return choice;
}

std::vector<Searcher::BaselineJob> Searcher::baselineJobs() const {
  std::vector<std::string> names = baselineNames();
  if (!options_.baseline.manualBuckets.empty())
    names.push_back("manual");
  std::vector<BaselineJob> jobs;
  for (bool uncompressed : {false, true}) {
    if (uncompressed && options_.compressors.empty())
      break;
    for (const std::string &name : names)
      jobs.push_back(BaselineJob{name, uncompressed});
  }
  return jobs;
}

void Searcher::evaluateBaseline(BaselineJob &job, cost::CollectiveCostCache &prices) const {
  std::string error;
  if (job.uncompressed) {
    BaselineOptions uncompressed = options_.baseline;
    uncompressed.compression.reset();
    std::optional<PlanChoice> choice = baselineChoice(job.name, problem_, model_, uncompressed, error);
    if (!choice)
      return;
    Evaluation evaluation = evaluate(problem_, *choice, model_, &prices);
    job.evaluations = 1;
    job.iterationUs = evaluation.iterationUs;
    job.seeds.push_back(Seed{Candidate{std::move(*choice), std::move(evaluation), 1}, {}, kBaseline});
    return;
  }
  // As reported: each allowed compressor on every bucket, the best kept. With cached
  // prices: a baseline of one bucket per tensor prices a collective per tensor in every
  // evaluation, most of them of sizes seen before.
  std::vector<BaselineResult> candidates;
  std::optional<BaselineResult> reported =
      bestBaseline(job.name, problem_, model_, options_.baseline, options_.compressors, error,
                   &candidates, &prices);
  if (!reported)
    return;
  job.iterationUs = reported->evaluation.iterationUs;
  job.evaluations = static_cast<int64_t>(candidates.size());
  const bool compressed = !options_.compressors.empty();
  for (size_t c = 0; c < candidates.size(); ++c)
    job.seeds.push_back(
        Seed{Candidate{std::move(candidates[c].choice), std::move(candidates[c].evaluation), 1},
             compressed ? std::vector<int>{static_cast<int>(c)} : std::vector<int>{},
             kBaseline});
}

std::vector<Searcher::Seed> Searcher::dynamicProgramSeeds() {
  std::vector<Seed> seeds;
  std::vector<ProgramRun> runs;
  for (size_t f = 0; f < families_.size(); ++f)
    for (Origin model : {kPlainProgram, kKernelAwareProgram, kOverlapAwareProgram})
      for (bool decompose : {false, true}) {
      if (decompose && !options_.allowDecomposition)
        continue;
      if (model == kKernelAwareProgram && families_[f].compressors.empty())
        continue;  // without compression there is no GPU kernel to charge
      ProgramRun run;
      run.family = f;
      run.decompose = decompose;
      run.model = model;
      run.options.push_back(decompose ? kReduceScatterSlot : kAllReduceSlot);
      run.options.insert(run.options.end(), families_[f].slots.begin(), families_[f].slots.end());
      runs.push_back(std::move(run));
    }
  runPrograms(runs);
  for (const ProgramRun &run : runs) {
    PlanChoice planned = choiceOf(run);
    // With and without chosen chunks; decoupled all-gathers on one stream or their own.
    for (int streams : {1, 2}) {
      if (streams == 2 && !run.decompose)
        continue;
      assignSchedule(planned, streams);
      PlanChoice chunked = planned;
      chooseChunks(problem_, chunked, model_, &prices_);
      for (PlanChoice *choice : {&planned, &chunked}) {
        ++evaluations_;
        seeds.push_back(Seed{condensedCandidate(*choice, streams),
                             families_[run.family].compressors, run.model});
      }
    }
  }
  return seeds;
}

Candidate Searcher::localSearch(const Family &family, Candidate current, double &work,
                                double limit, bool fine) {
  auto consider = [&](PlanChoice choice, int streams) {
    if (work >= limit)
      return false;
    assignSchedule(choice, streams);
    Candidate candidate = condensedCandidate(std::move(choice), streams);
    ++evaluations_;
    work += static_cast<double>(candidate.simulatedTasks);
    if (!better(candidate.evaluation, current.evaluation))
      return false;
    current = std::move(candidate);
    return true;
  };
  const std::vector<CompressionSpec> &specs = family.specs;
  // A coarse sweep must gain kSweepGain of what separates the plan from the
  // lower bound (of the plan itself where compression beats the bound); the
  // classic search sweeps on while anything improves.
  auto enoughGain = [&](double sweepStartUs) {
    double gapUs = sweepStartUs > lowerBoundUs_ ? sweepStartUs - lowerBoundUs_ : sweepStartUs;
    return current.evaluation.iterationUs < sweepStartUs &&
           (fine || sweepStartUs - current.evaluation.iterationUs > kSweepGain * gapUs);
  };
  for (bool sweep = true; sweep && work < limit;) {
    const double sweepStartUs = current.evaluation.iterationUs;
    // Global move on plans with many buckets: merge neighbours pairwise, as
    // long as that improves (halves the bucket count at once where start-ups
    // or overlap slowdown dominate, so the per-bucket moves see few buckets).
    while (!fine && current.choice.buckets.size() > kManyBuckets) {
      PlanChoice halved = current.choice;
      std::vector<BucketChoice> &buckets = halved.buckets;
      for (size_t b = 0; b + 1 < buckets.size(); ++b) {
        buckets[b].end = buckets[b + 1].end;
        buckets.erase(buckets.begin() + b + 1);
      }
      if (!consider(std::move(halved), current.streams))
        break;
    }
    // Global move: a separate stream for the decoupled all-gathers.
    if (std::any_of(current.choice.buckets.begin(), current.choice.buckets.end(),
                    [](const BucketChoice &bucket) { return bucket.decomposed(); }))
      consider(current.choice, current.streams == 1 ? 2 : 1);
    for (size_t b = 0; b < current.choice.buckets.size() && work < limit; ++b) {
      auto tryMove = [&](auto &&edit) {
        if (b >= current.choice.buckets.size())
          return false;
        PlanChoice candidate = current.choice;
        return edit(candidate.buckets) && consider(std::move(candidate), current.streams);
      };
      // Merge with the next bucket (the merged bucket keeps this one's settings).
      tryMove([&](std::vector<BucketChoice> &buckets) {
        if (b + 1 >= buckets.size())
          return false;
        buckets[b].end = buckets[b + 1].end;
        buckets.erase(buckets.begin() + b + 1);
        return true;
      });
      // Split in two halves by bytes.
      tryMove([&](std::vector<BucketChoice> &buckets) { return splitInHalves(buckets, b); });
      // Move the boundary with the next bucket either way, halving the step
      // after a miss: coarse, from one gradient in steps that double while that
      // keeps improving; fine, by one gradient.
      for (int direction : {-1, 1})
        for (int step = 1; step > 0;) {
          bool moved = tryMove([&](std::vector<BucketChoice> &buckets) {
            if (b + 1 >= buckets.size())
              return false;
            int boundary = buckets[b].end + direction * step;
            if (boundary <= buckets[b].begin || boundary >= buckets[b + 1].end)
              return false;
            buckets[b].end = boundary;
            buckets[b + 1].begin = boundary;
            return true;
          });
          step = !moved ? step / 2 : fine ? 1 : 2 * step;
        }
      // Flip decomposition.
      if (options_.allowDecomposition)
        tryMove([&](std::vector<BucketChoice> &buckets) {
          BucketChoice &bucket = buckets[b];
          const CompressionMethod method = bucket.compression.method;
          if (!vocab::supports(method, SyncScheme::ReduceScatterAllGather))
            return false;
          bucket.scheme = vocab::schemeFor(method, !bucket.decomposed());
          return true;
        });
      // Every other compression option, for the bucket or for either half of
      // it (one climbing step to what would otherwise take a split that alone
      // does not pay).
      for (const CompressionSpec &spec : specs)
        for (int part : {0, 1, 2})
          tryMove([&](std::vector<BucketChoice> &buckets) {
            if (sameSpec(spec, buckets[b].compression) || (part > 0 && fine) ||
                (part > 0 && !splitInHalves(buckets, b)))
              return false;
            setOption(buckets[b + (part == 2 ? 1 : 0)], spec, false);
            return true;
          });
      // Chunk count up or down.
      for (int64_t factor : {2, -2})
        tryMove([&](std::vector<BucketChoice> &buckets) {
          BucketChoice &bucket = buckets[b];
          if (bucket.compression.method != CompressionMethod::None)
            return false;
          int64_t chunks = factor > 0 ? bucket.chunks * 2 : bucket.chunks / 2;
          if (chunks < 1 || chunks > 64)
            return false;
          bucket.chunks = chunks;
          return true;
        });
    }
    sweep = enoughGain(sweepStartUs);
  }
  return current;
}

Candidate Searcher::extrapolate(const PlanChoice &from, Candidate to, double &work) {
  const std::vector<BucketChoice> &before = from.buckets;
  if (before.size() != to.choice.buckets.size())
    return to;
  std::vector<int> shift(before.size(), 0);
  for (size_t b = 0; b < before.size(); ++b) {
    const BucketChoice &moved = to.choice.buckets[b];
    // The schedule (streams, priorities) follows from the rest.
    if (!sameSpec(moved.compression, before[b].compression) || moved.chunks != before[b].chunks ||
        moved.scheme != before[b].scheme ||
        moved.expertReplicas != before[b].expertReplicas)
      return to;  // the kick changed more than where buckets end
    shift[b] = moved.end - before[b].end;
  }
  if (std::all_of(shift.begin(), shift.end(), [](int moved) { return moved == 0; }))
    return to;  // the kick gained by its stream count alone: no shift to follow
  for (int step = 1; step > 0 && work < searchWork_;) {
    PlanChoice candidate = to.choice;
    std::vector<BucketChoice> &buckets = candidate.buckets;
    bool valid = true;
    for (size_t b = 0; b + 1 < buckets.size(); ++b) {
      buckets[b].end += step * shift[b];
      buckets[b + 1].begin = buckets[b].end;
      valid &= buckets[b].end > buckets[b].begin;
    }
    valid &= buckets.back().end > buckets.back().begin;
    bool moved = false;
    if (valid) {
      assignSchedule(candidate, to.streams);
      Candidate scored = condensedCandidate(std::move(candidate), to.streams);
      ++evaluations_;
      work += static_cast<double>(scored.simulatedTasks);
      if ((moved = better(scored.evaluation, to.evaluation)))
        to = std::move(scored);
    }
    step = moved ? 2 * step : step / 2;
  }
  return to;
}

bool Searcher::splitInHalves(std::vector<BucketChoice> &buckets, size_t b) const {
  BucketChoice &bucket = buckets[b];
  if (bucket.size() < 2)
    return false;
  const int64_t total = ranges_.bytes(bucket.begin, bucket.end);
  int cut = bucket.begin + 1;
  while (cut < bucket.end - 1 && 2 * ranges_.bytes(bucket.begin, cut) < total)
    ++cut;
  BucketChoice right = bucket;
  right.begin = cut;
  bucket.end = cut;
  buckets.insert(buckets.begin() + b + 1, right);
  return true;
}

Candidate Searcher::searchFamily(const Family &family) {
  // Most promising start first; each step may use its share of what is left
  // of the work bound, the kicks last.
  struct Climb {
    const Candidate *from;
    bool fine;
  };
  std::vector<Climb> climbs;
  const Candidate *classic = nullptr;
  for (int origin = 0; origin < kOrigins; ++origin) {
    const std::optional<Candidate> &seed = family.seeds[origin];
    if (!seed)
      continue;
    climbs.push_back({&*seed, false});
    if (origin != kOverlapAwareProgram &&
        (!classic || better(seed->evaluation, classic->evaluation)))
      classic = &*seed;
  }
  // Fine climbs take single steps: on large problems or plans with many
  // buckets they would crawl.
  const bool classicSearch = problem_.gradients.size() <= kClassicGradients &&
                             classic->choice.buckets.size() <= kClassicBuckets;
  if (classicSearch)
    climbs.push_back({classic, true});
  std::stable_sort(climbs.begin(), climbs.end(), [](const Climb &a, const Climb &b) {
    return a.from->evaluation.iterationUs < b.from->evaluation.iterationUs;
  });
  double work = 0;
  int stepsLeft = static_cast<int>(climbs.size()) + 2;
  auto share = [&] { return work + (searchWork_ - work) / stepsLeft--; };
  std::optional<Candidate> best, classicResult;
  auto keep = [&](Candidate candidate) {
    if (!best || better(candidate.evaluation, best->evaluation))
      best = std::move(candidate);
  };
  for (const Climb &climb : climbs) {
    Candidate climbed = localSearch(family, *climb.from, work, share(), climb.fine);
    if (climb.fine)
      classicResult = climbed;
    keep(std::move(climbed));
  }
  const double narrowerLimit = share();
  if (classicResult && better(family.best->evaluation, classicResult->evaluation))
    keep(localSearch(family, *family.best, work, narrowerLimit, true));
  // Kicks: every bucket split in two, or neighbours merged pairwise, and a
  // climb from there, for as long as that ends higher. Without the classic
  // search, a kick that gains is followed by pattern moves (extrapolate).
  for (bool kicked = true; kicked && work < searchWork_;) {
    kicked = false;
    for (bool split : {true, false}) {
      const PlanChoice previous = best->choice;
      PlanChoice kick = best->choice;
      std::vector<BucketChoice> &buckets = kick.buckets;
      for (size_t b = 0; b + (split ? 0 : 1) < buckets.size(); ++b) {
        if (split) {
          b += splitInHalves(buckets, b) ? 1 : 0;
        } else {
          buckets[b].end = buckets[b + 1].end;
          buckets.erase(buckets.begin() + b + 1);
        }
      }
      assignSchedule(kick, best->streams);
      const Candidate from = condensedCandidate(std::move(kick), best->streams);
      const double before = best->evaluation.iterationUs;
      for (bool fine : {false, true})
        if (!fine || classicSearch)
          keep(localSearch(family, from, work, searchWork_, fine));
      if (best->evaluation.iterationUs < before) {
        if (!classicSearch)
          best = extrapolate(previous, std::move(*best), work);
        kicked = true;
        break;
      }
    }
  }
  return *best;
}

AutotuneResult Searcher::run() {
  AutotuneResult result;
  result.lowerBoundUs = lowerBoundUs_ = lowerBoundUs(problem_, model_, options_.compressors);
  ready_ = readyTimesAlone(backwardEndUs_);
  // The baselines and the dynamic programs seed the search independently: a second thread
  // takes baseline jobs meanwhile, this one the jobs left once its programs are done (on a
  // large model the baselines take longer). All seeds are offered in one fixed order, so
  // the plan does not depend on which thread ran what, or finished first.
  std::vector<BaselineJob> jobs = baselineJobs();
  std::atomic<size_t> nextJob{0};
  auto runBaselineJobs = [&](cost::CollectiveCostCache &prices) {
    for (size_t j; (j = nextJob.fetch_add(1)) < jobs.size();)
      evaluateBaseline(jobs[j], prices);
  };
  std::future<void> helper = std::async(std::launch::async, [&] {
    cost::CollectiveCostCache prices(model_, priceCacheEntries(problem_));
    runBaselineJobs(prices);
  });
  std::vector<Seed> programs = dynamicProgramSeeds();
  runBaselineJobs(prices_);
  helper.get();
  for (BaselineJob &job : jobs) {
    evaluations_ += job.evaluations;
    if (!job.iterationUs)
      continue;
    if (!job.uncompressed) {
      result.baselineUs[job.name] = *job.iterationUs;
    } else {
      result.baselineUncompressedUs[job.name] = *job.iterationUs;
      // A baseline's user may always switch compression off: it is reported at its best.
      if (auto reported = result.baselineUs.find(job.name); reported != result.baselineUs.end())
        reported->second = std::min(reported->second, *job.iterationUs);
    }
    for (const Seed &seed : job.seeds)
      offer(seed.candidate, seed.madeFrom, seed.origin);
  }
  for (const Seed &seed : programs)
    offer(seed.candidate, seed.madeFrom, seed.origin);

  // Per family, narrowest first; the widest family holds every result: the answer.
  for (const Family &family : families_)
    offer(searchFamily(family), family.compressors, std::nullopt);

  const Candidate &best = *families_.back().best;
  result.best = best.choice;
  result.best.strategy = "auto";
  // The condensed problem simulates like the full one up to rounding; report the full one's score.
  result.bestEval =
      best.exact ? best.evaluation : evaluate(problem_, result.best, model_, &prices_);
  result.evaluations = evaluations_;
  return result;
}

} // namespace

AutotuneResult autotune(const Problem &problem, const cost::CostModel &model,
                        const AutotuneOptions &options) {
  return Searcher(problem, model, options).run();
}

} // namespace zen::plan

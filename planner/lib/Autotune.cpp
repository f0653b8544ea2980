//===- Autotune.cpp - joint search over the four planning decisions --------===//
//
// 1. Seeds: every baseline with each allowed compressor applied to every
//    bucket, and uncompressed.
// 2. Dynamic programming over bucket boundaries in ready order, with the
//    per-bucket choice of compression (method, device) or decomposition made
//    inside the recurrence. Its model is the communication stream as a FIFO:
//    a bucket starts when its last gradient is ready (plus its encode) and the
//    previous bucket is done. f(j) = min_i max(ready_j + encode, f(i)) + wire + decode
//    is exact for that model because max(., f(i)) + c is monotone in f(i).
//    A CPU encode also waits for the host's compression worker, carried along
//    the chosen path. When compression is allowed, a second, compute-aware
//    run also charges GPU kernels to the compute stream: a GPU encode delays
//    every later gradient and GPU encode + decode lengthen the compute
//    stream, and a bucket is scored by max(its end, backward end + GPU
//    compression work). That run is what finds CPU offload worthwhile
//    (compute-bound iterations); the plain one is better where the
//    communication path dominates, so both seed the local search.
//    A window bounds how far back a bucket reaches, which keeps it linear.
// 3. Local search with the full simulator: merge/split neighbours, move a
//    boundary (on along the same way while that keeps improving), flip
//    compression, decomposition and chunks, and the stream count.
//
// Allowing more compressors must never plan worse, but neither the DP's model
// nor hill climbing is monotone in the options it may use: the DP can prefer a
// compressor the simulator then finds worse, and a climb with more moves can
// end on a lower hill. So the search is organised by families of compression
// options: none; with several allowed, each compressor alone; and all of
// them. Every seed is credited to each family containing the compressors it
// was made from, and the DP runs once per family. Then, narrowest family
// first, the local search runs within each family from the family's best
// seed and, when a narrower family's result is better still, once more from
// that result; every result is credited like a seed. A run allowing a subset
// of the compressors makes exactly the searches of its own families, and the
// answer is the best result of all families, so allowing more never plans
// worse -- exactly so while the evaluation budget, which the families share,
// does not cut a search short (below a few thousand tensors). Every
// candidate is scored by the simulator, so the result is never worse than a
// seed.
//
//===----------------------------------------------------------------------===//
#include "zen/Planner/Planning.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace zen::plan {

using cost::CollectiveKind;
using cost::CompressionMethod;
using cost::CompressionSpec;

namespace {

constexpr int kWindow = 256;  // the most gradients a DP bucket may reach back over
constexpr double kInfinity = std::numeric_limits<double>::infinity();

/// One way to communicate a bucket, priced for the FIFO model.
struct Priced {
  CompressionSpec spec;
  bool decomposed = false;
  double encodeUs = 0;  // before the collective: on the compute stream or the CPU worker
  double decodeUs = 0;  // after it, part of tailUs
  double tailUs = 0;    // collective (+ decode) on the communication path
};

/// The DP's state after a bucket ending at gradient j, along its best path.
struct Frontier {
  double finishUs = -kInfinity;  // the communication path is free
  double scoreUs = -kInfinity;   // what the DP minimises: finishUs, or compute-aware
                                 // max(finishUs, backward end + gpuWorkUs)
  double gpuDelayUs = 0;         // GPU encodes so far: later gradients are ready this much later
  double gpuWorkUs = 0;          // GPU encodes and decodes so far
  double hostFreeUs = -kInfinity;  // the CPU compression worker is free
};

/// A scored plan and the stream count its schedule uses.
struct Candidate {
  PlanChoice choice;
  Evaluation evaluation;
  int streams = 1;
};

/// A set of allowed compressors and the search's best plans using only them.
struct Family {
  std::vector<int> compressors;       // ascending indices into AutotuneOptions::compressors
  std::vector<CompressionSpec> specs;  // none first, then each member's placements
  std::optional<Candidate> seed;       // the best seed (baseline or DP result)
  std::optional<Candidate> best;       // the best seed or local-search result
};

bool sameSpec(const CompressionSpec &a, const CompressionSpec &b) {
  return a.method == b.method && a.device == b.device && a.ratio == b.ratio && a.rank == b.rank;
}

bool sameChoice(const PlanChoice &a, const PlanChoice &b) {
  return a.afterBackward == b.afterBackward && a.fused == b.fused &&
         std::equal(a.buckets.begin(), a.buckets.end(), b.buckets.begin(), b.buckets.end(),
                    [](const BucketChoice &x, const BucketChoice &y) {
                      return x.begin == y.begin && x.end == y.end &&
                             x.decomposed == y.decomposed && x.chunks == y.chunks &&
                             x.stream == y.stream && x.priority == y.priority &&
                             x.gatherStream == y.gatherStream &&
                             x.gatherPriority == y.gatherPriority &&
                             sameSpec(x.compression, y.compression);
                    });
}

bool better(const Evaluation &candidate, const Evaluation &incumbent) {
  return candidate.iterationUs < incumbent.iterationUs * (1 - 1e-9);
}

class Searcher {
public:
  Searcher(const Problem &problem, const cost::CostModel &model, const AutotuneOptions &options)
      : problem_(problem), model_(model), options_(options) {
    const size_t count = problem.gradients.size();
    prefixBytes_.assign(count + 1, 0);
    prefixElements_.assign(count + 1, 0);
    for (size_t g = 0; g < count; ++g) {
      prefixBytes_[g + 1] = prefixBytes_[g] + static_cast<double>(problem.gradients[g].bytes);
      prefixElements_[g + 1] = prefixElements_[g] + problem.gradients[g].elements;
    }
    ready_ = readyTimesAlone(backwardEndUs_);
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
  }

  AutotuneResult run();

private:
  void addFamily(std::vector<int> compressors);
  /// Credits `candidate` to every family containing the compressors it was
  /// made from: as a seed, or as a local-search result.
  void offer(const Candidate &candidate, const std::vector<int> &madeFrom, bool isSeed);
  /// Scores `choice`, reusing the score of an identical DP result.
  Evaluation evaluateSeed(const PlanChoice &choice);
  void seedBaselines(AutotuneResult &result);
  void seedDynamicPrograms();
  std::vector<double> readyTimesAlone(double &backwardEndUs) const;
  void price(int begin, int end, bool decompose, const std::vector<CompressionSpec> &specs,
             std::vector<Priced> &out) const;
  PlanChoice dynamicProgram(const std::vector<CompressionSpec> &specs, bool decompose,
                            bool computeAware) const;
  Candidate localSearch(const Family &family, Candidate current, int64_t budget);
  void setOption(BucketChoice &bucket, const CompressionSpec &spec, bool decomposed) const;

  const Problem &problem_;
  const cost::CostModel &model_;
  const AutotuneOptions &options_;
  std::vector<double> prefixBytes_;
  std::vector<int64_t> prefixElements_;
  std::vector<double> ready_;
  double backwardEndUs_ = 0;  // forward + backward, compute alone
  std::vector<Family> families_;  // narrowest first; the last allows every compressor
  std::vector<Candidate> dynamicSeeds_;  // DP results scored so far
  int64_t evaluations_ = 0;
};

void Searcher::addFamily(std::vector<int> compressors) {
  Family family;
  family.specs.push_back(CompressionSpec{});
  for (int c : compressors)
    for (const CompressionSpec &placed : placements(options_.compressors[c]))
      family.specs.push_back(placed);
  family.compressors = std::move(compressors);
  families_.push_back(std::move(family));
}

void Searcher::offer(const Candidate &candidate, const std::vector<int> &madeFrom, bool isSeed) {
  for (Family &family : families_) {
    if (!std::includes(family.compressors.begin(), family.compressors.end(), madeFrom.begin(),
                       madeFrom.end()))
      continue;
    if (isSeed && (!family.seed || better(candidate.evaluation, family.seed->evaluation)))
      family.seed = candidate;
    if (!family.best || better(candidate.evaluation, family.best->evaluation))
      family.best = candidate;
  }
}

Evaluation Searcher::evaluateSeed(const PlanChoice &choice) {
  for (const Candidate &seen : dynamicSeeds_)
    if (sameChoice(seen.choice, choice))
      return seen.evaluation;
  ++evaluations_;
  return evaluate(problem_, choice, model_);
}

std::vector<double> Searcher::readyTimesAlone(double &backwardEndUs) const {
  double clock = 0;
  for (const ComputeSegment &segment : problem_.forward)
    clock += segment.durationUs;
  const double forwardUs = clock;
  std::vector<double> segmentEnd(problem_.backward.size());
  for (size_t k = 0; k < problem_.backward.size(); ++k)
    segmentEnd[k] = clock += problem_.backward[k].durationUs;
  backwardEndUs = clock;
  std::vector<double> ready;
  double latest = forwardUs;
  for (const GradientTensor &gradient : problem_.gradients) {
    if (gradient.readyAfterSegment >= 0)
      latest = std::max(latest, segmentEnd[gradient.readyAfterSegment]);
    ready.push_back(latest);
  }
  return ready;
}

void Searcher::price(int begin, int end, bool decompose,
                     const std::vector<CompressionSpec> &specs, std::vector<Priced> &out) const {
  out.clear();
  const double bytes = prefixBytes_[end] - prefixBytes_[begin];
  const int64_t elements = prefixElements_[end] - prefixElements_[begin];
  for (const CompressionSpec &spec : specs) {
    Priced priced;
    priced.spec = spec;
    if (spec.method == CompressionMethod::None) {
      priced.decomposed = decompose;
      // A decoupled all-gather overlaps the next forward; only the reduce-scatter is on the path.
      priced.tailUs = model_
                          .collective(decompose ? CollectiveKind::ReduceScatter
                                                : CollectiveKind::AllReduce,
                                      bytes, problem_.group)
                          .timeUs;
    } else {
      bool gathered = !isAllReducible(spec.method);
      cost::CompressionCost cost =
          model_.compression(spec, elements, gathered ? problem_.group.ranks : 1);
      priced.encodeUs = cost.encodeUs;
      priced.decodeUs = cost.decodeUs;
      priced.tailUs =
          cost.decodeUs + model_.compressedCollective(spec, elements, problem_.group).timeUs;
    }
    out.push_back(priced);
  }
}

void Searcher::setOption(BucketChoice &bucket, const CompressionSpec &spec,
                         bool decomposed) const {
  bucket.compression = spec;
  bucket.compression.errorFeedback = wantsErrorFeedback(spec.method);
  bucket.decomposed = decomposed && spec.method == CompressionMethod::None;
  if (spec.method != CompressionMethod::None)
    bucket.chunks = 1;
}

PlanChoice Searcher::dynamicProgram(const std::vector<CompressionSpec> &specs, bool decompose,
                                    bool computeAware) const {
  const int count = static_cast<int>(problem_.gradients.size());
  std::vector<Frontier> state(count + 1);
  std::vector<int> from(count + 1, 0);
  std::vector<Priced> chosen(count + 1);
  std::vector<Priced> options;
  for (int j = 1; j <= count; ++j) {
    const double readyAlone = ready_[j - 1];
    Frontier &best = state[j];
    best.scoreUs = best.finishUs = kInfinity;
    for (int i = j - 1; i >= std::max(0, j - kWindow); --i) {
      price(i, j, decompose, specs, options);
      const Frontier &previous = state[i];
      const double ready = readyAlone + previous.gpuDelayUs;
      double cheapestTail = kInfinity;
      for (const Priced &option : options) {
        const bool onCpu = option.spec.method != CompressionMethod::None &&
                           option.spec.device == cost::Device::CPU;
        Frontier next = previous;
        double encoded = onCpu ? std::max(ready, previous.hostFreeUs) + option.encodeUs
                               : ready + option.encodeUs;
        if (onCpu) {
          next.hostFreeUs = encoded;
        } else if (computeAware) {
          next.gpuDelayUs += option.encodeUs;
          next.gpuWorkUs += option.encodeUs + option.decodeUs;
        }
        next.finishUs = std::max(encoded, previous.finishUs) + option.tailUs;
        next.scoreUs = computeAware ? std::max(next.finishUs, backwardEndUs_ + next.gpuWorkUs)
                                    : next.finishUs;
        cheapestTail = std::min(cheapestTail, option.tailUs);
        if (next.scoreUs < best.scoreUs ||
            (next.scoreUs == best.scoreUs && next.finishUs < best.finishUs)) {
          best = next;
          from[j] = i;
          chosen[j] = option;
        }
      }
      // Reaching further back only adds bytes: once the stream is idle when
      // this bucket is ready, or the tail alone cannot win, stop.
      if (previous.finishUs <= ready || readyAlone + cheapestTail >= best.scoreUs)
        break;
    }
  }
  PlanChoice choice;
  choice.strategy = "auto";
  for (int j = count; j > 0; j = from[j]) {
    BucketChoice bucket;
    bucket.begin = from[j];
    bucket.end = j;
    setOption(bucket, chosen[j].spec, chosen[j].decomposed);
    choice.buckets.push_back(bucket);
  }
  std::reverse(choice.buckets.begin(), choice.buckets.end());
  assignSchedule(choice, 1);
  return choice;
}

void Searcher::seedBaselines(AutotuneResult &result) {
  std::vector<std::string> names = baselineNames();
  if (!options_.baseline.manualBuckets.empty())
    names.push_back("manual");
  const bool compressed = !options_.compressors.empty();
  for (const std::string &name : names) {
    // As reported: each allowed compressor on every bucket, the best kept.
    std::string error;
    std::vector<BaselineResult> candidates;
    std::optional<BaselineResult> reported = bestBaseline(
        name, problem_, model_, options_.baseline, options_.compressors, error, &candidates);
    if (!reported)
      continue;
    result.baselineUs[name] = reported->evaluation.iterationUs;
    evaluations_ += static_cast<int64_t>(candidates.size());
    for (size_t c = 0; c < candidates.size(); ++c)
      offer(Candidate{std::move(candidates[c].choice), std::move(candidates[c].evaluation), 1},
            compressed ? std::vector<int>{static_cast<int>(c)} : std::vector<int>{}, true);
  }
  if (!compressed)
    return;
  for (const std::string &name : names) {
    BaselineOptions uncompressed = options_.baseline;
    uncompressed.compression.reset();
    std::string error;
    std::optional<PlanChoice> choice = baselineChoice(name, problem_, model_, uncompressed, error);
    if (!choice)
      continue;
    Evaluation evaluation = evaluate(problem_, *choice, model_);
    ++evaluations_;
    result.baselineUncompressedUs[name] = evaluation.iterationUs;
    // A baseline's user may always switch compression off: it is reported at its best.
    if (auto reported = result.baselineUs.find(name); reported != result.baselineUs.end())
      reported->second = std::min(reported->second, evaluation.iterationUs);
    offer(Candidate{std::move(*choice), std::move(evaluation), 1}, {}, true);
  }
}

void Searcher::seedDynamicPrograms() {
  for (size_t f = 0; f < families_.size(); ++f)
    for (auto [decompose, computeAware] :
         {std::pair{false, false}, std::pair{true, false}, std::pair{false, true},
          std::pair{true, true}}) {
      if (decompose && !options_.allowDecomposition)
        continue;
      if (computeAware && families_[f].compressors.empty())
        continue;  // without compression there is no GPU kernel to charge
      PlanChoice planned = dynamicProgram(families_[f].specs, decompose, computeAware);
      // With and without chosen chunks; decoupled all-gathers on one stream or their own.
      for (int streams : {1, 2}) {
        if (streams == 2 && !decompose)
          continue;
        assignSchedule(planned, streams);
        PlanChoice chunked = planned;
        chooseChunks(problem_, chunked, model_);
        for (PlanChoice *choice : {&planned, &chunked}) {
          Candidate candidate{*choice, evaluateSeed(*choice), streams};
          offer(candidate, families_[f].compressors, true);
          dynamicSeeds_.push_back(std::move(candidate));
        }
      }
    }
}

Candidate Searcher::localSearch(const Family &family, Candidate current, int64_t budget) {
  auto consider = [&](PlanChoice choice, int streams) {
    assignSchedule(choice, streams);
    Evaluation evaluation = evaluate(problem_, choice, model_);
    ++evaluations_;
    if (!better(evaluation, current.evaluation))
      return false;
    current = Candidate{std::move(choice), std::move(evaluation), streams};
    return true;
  };
  const std::vector<CompressionSpec> &specs = family.specs;
  bool improved = true;
  while (improved && evaluations_ < budget) {
    improved = false;
    // Global move: a separate stream for the decoupled all-gathers.
    if (std::any_of(current.choice.buckets.begin(), current.choice.buckets.end(),
                    [](const BucketChoice &bucket) { return bucket.decomposed; }) &&
        consider(current.choice, current.streams == 1 ? 2 : 1))
      improved = true;
    for (size_t b = 0; b < current.choice.buckets.size() && evaluations_ < budget; ++b) {
      auto tryMove = [&](auto &&edit) {
        if (evaluations_ >= budget || b >= current.choice.buckets.size())
          return false;
        PlanChoice candidate = current.choice;
        if (!edit(candidate.buckets))
          return false;
        if (consider(std::move(candidate), current.streams)) {
          improved = true;
          return true;
        }
        return false;
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
      tryMove([&](std::vector<BucketChoice> &buckets) {
        BucketChoice &bucket = buckets[b];
        if (bucket.size() < 2)
          return false;
        double half = (prefixBytes_[bucket.begin] + prefixBytes_[bucket.end]) / 2;
        int cut = bucket.begin + 1;
        while (cut < bucket.end - 1 && prefixBytes_[cut] < half)
          ++cut;
        BucketChoice right = bucket;
        right.begin = cut;
        bucket.end = cut;
        buckets.insert(buckets.begin() + b + 1, right);
        return true;
      });
      // Move the boundary with the next bucket by one gradient either way,
      // and on along the same way while that keeps improving.
      for (int delta : {-1, 1})
        while (tryMove([&](std::vector<BucketChoice> &buckets) {
          if (b + 1 >= buckets.size())
            return false;
          int boundary = buckets[b].end + delta;
          if (boundary <= buckets[b].begin || boundary >= buckets[b + 1].end)
            return false;
          buckets[b].end = boundary;
          buckets[b + 1].begin = boundary;
          return true;
        })) {
        }
      // Flip decomposition.
      if (options_.allowDecomposition)
        tryMove([&](std::vector<BucketChoice> &buckets) {
          BucketChoice &bucket = buckets[b];
          if (bucket.compression.method != CompressionMethod::None)
            return false;
          bucket.decomposed = !bucket.decomposed;
          return true;
        });
      // Every other compression option.
      for (size_t s = 0; s < specs.size(); ++s)
        tryMove([&](std::vector<BucketChoice> &buckets) {
          BucketChoice &bucket = buckets[b];
          const CompressionSpec &spec = specs[s];
          if (sameSpec(spec, bucket.compression))
            return false;
          setOption(bucket, spec, false);
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
  }
  return current;
}

AutotuneResult Searcher::run() {
  AutotuneResult result;
  result.lowerBoundUs = lowerBoundUs(problem_, model_, options_.compressors);
  seedBaselines(result);
  seedDynamicPrograms();

  // Per family, narrowest first: a search from its best seed, then, when a
  // narrower family's search ended better, one more from there. Families
  // share the budget evenly; what one leaves unused passes on. The widest
  // family holds every result: the answer.
  const Candidate &seed = *families_.back().seed;
  const double tasks = static_cast<double>(problem_.forward.size() + problem_.backward.size() +
                                           4 * seed.choice.buckets.size() + 1);
  const int64_t end =
      evaluations_ + std::max<int64_t>(64, static_cast<int64_t>(options_.localSearchWork / tasks));
  for (size_t f = 0; f < families_.size(); ++f) {
    const int64_t budget =
        evaluations_ + (end - evaluations_) / static_cast<int64_t>(families_.size() - f);
    const Family &family = families_[f];
    Candidate searched = localSearch(family, *family.seed, budget);
    offer(searched, family.compressors, false);
    if (better(family.best->evaluation, searched.evaluation))
      offer(localSearch(family, *family.best, budget), family.compressors, false);
  }

  const Candidate &best = *families_.back().best;
  result.best = best.choice;
  result.best.strategy = "auto";
  result.bestEval = best.evaluation;
  result.evaluations = evaluations_;
  return result;
}

} // namespace

AutotuneResult autotune(const Problem &problem, const cost::CostModel &model,
                        const AutotuneOptions &options) {
  return Searcher(problem, model, options).run();
}

} // namespace zen::plan

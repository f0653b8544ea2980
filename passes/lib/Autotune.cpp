//===- Autotune.cpp - joint search over the four planning decisions --------===//
//
// 1. Seeds: every baseline as reported (with compression allowed: the best of
//    the allowed compressors applied to every bucket) and uncompressed.
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
//    boundary, flip compression, decomposition and chunks, and the stream count.
// Every candidate is scored by the simulator and the best is kept, so the
// result is never worse than a seed.
//
//===----------------------------------------------------------------------===//
#include "zen/Passes/Planning.h"

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
    specs_.push_back(CompressionSpec{});
    for (const CompressionSpec &allowed : options.compressors)
      for (const CompressionSpec &placed : placements(allowed))
        specs_.push_back(placed);
  }

  AutotuneResult run();

private:
  std::vector<double> readyTimesAlone(double &backwardEndUs) const;
  void price(int begin, int end, bool decompose, std::vector<Priced> &out) const;
  PlanChoice dynamicProgram(bool decompose, bool computeAware) const;
  bool consider(PlanChoice candidate);
  void localSearch();
  void setOption(BucketChoice &bucket, const CompressionSpec &spec, bool decomposed) const;

  const Problem &problem_;
  const cost::CostModel &model_;
  const AutotuneOptions &options_;
  std::vector<double> prefixBytes_;
  std::vector<int64_t> prefixElements_;
  std::vector<double> ready_;
  double backwardEndUs_ = 0;  // forward + backward, compute alone
  std::vector<CompressionSpec> specs_;  // [0] = none; then each allowed method's placements

  PlanChoice best_;
  Evaluation bestEval_;
  double bestUs_ = kInfinity;
  int streams_ = 1;
  int64_t evaluations_ = 0;
};

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

void Searcher::price(int begin, int end, bool decompose, std::vector<Priced> &out) const {
  out.clear();
  const double bytes = prefixBytes_[end] - prefixBytes_[begin];
  const int64_t elements = prefixElements_[end] - prefixElements_[begin];
  for (const CompressionSpec &spec : specs_) {
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
      double wire = gathered ? cost.wireBytes * static_cast<double>(problem_.group.ranks)
                             : cost.wireBytes;
      priced.encodeUs = cost.encodeUs;
      priced.decodeUs = cost.decodeUs;
      priced.tailUs = cost.decodeUs +
                      model_
                          .collective(gathered ? CollectiveKind::AllGather
                                               : CollectiveKind::AllReduce,
                                      wire, problem_.group)
                          .timeUs;
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

PlanChoice Searcher::dynamicProgram(bool decompose, bool computeAware) const {
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
      price(i, j, decompose, options);
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

/// Keeps `candidate` when the simulator scores it strictly better than the best so far.
bool Searcher::consider(PlanChoice candidate) {
  Evaluation evaluation = evaluate(problem_, candidate, model_);
  ++evaluations_;
  if (!(evaluation.iterationUs < bestUs_ * (1 - 1e-9)))
    return false;
  bestUs_ = evaluation.iterationUs;
  bestEval_ = std::move(evaluation);
  best_ = std::move(candidate);
  best_.strategy = "auto";
  return true;
}

void Searcher::localSearch() {
  const double tasks = static_cast<double>(
      problem_.forward.size() + problem_.backward.size() + 4 * best_.buckets.size() + 1);
  const int64_t budget =
      evaluations_ + std::max<int64_t>(64, static_cast<int64_t>(options_.localSearchWork / tasks));
  auto withSchedule = [&](PlanChoice choice) {
    assignSchedule(choice, streams_);
    return choice;
  };
  bool improved = true;
  while (improved && evaluations_ < budget) {
    improved = false;
    // Global move: a separate stream for the decoupled all-gathers.
    if (std::any_of(best_.buckets.begin(), best_.buckets.end(),
                    [](const BucketChoice &bucket) { return bucket.decomposed; })) {
      int previous = streams_;
      streams_ = streams_ == 1 ? 2 : 1;
      if (consider(withSchedule(best_)))
        improved = true;
      else
        streams_ = previous;
    }
    for (size_t b = 0; b < best_.buckets.size() && evaluations_ < budget; ++b) {
      auto tryMove = [&](auto &&edit) {
        if (evaluations_ >= budget || b >= best_.buckets.size())
          return false;
        PlanChoice candidate = best_;
        if (!edit(candidate.buckets))
          return false;
        if (consider(withSchedule(std::move(candidate)))) {
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
      // Move the boundary with the next bucket by one gradient either way.
      for (int delta : {-1, 1})
        tryMove([&](std::vector<BucketChoice> &buckets) {
          if (b + 1 >= buckets.size())
            return false;
          int boundary = buckets[b].end + delta;
          if (boundary <= buckets[b].begin || boundary >= buckets[b + 1].end)
            return false;
          buckets[b].end = boundary;
          buckets[b + 1].begin = boundary;
          return true;
        });
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
      for (size_t s = 0; s < specs_.size(); ++s)
        tryMove([&](std::vector<BucketChoice> &buckets) {
          BucketChoice &bucket = buckets[b];
          const CompressionSpec &spec = specs_[s];
          if (spec.method == bucket.compression.method &&
              spec.device == bucket.compression.device && spec.ratio == bucket.compression.ratio &&
              spec.rank == bucket.compression.rank)
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
}

AutotuneResult Searcher::run() {
  AutotuneResult result;
  result.lowerBoundUs = lowerBoundUs(problem_, model_);

  // Seeds: the baselines as reported (each allowed compressor applied to every
  // bucket, the best kept) and, with compression allowed, their uncompressed
  // versions as well.
  std::vector<std::string> seeds = baselineNames();
  if (!options_.baseline.manualBuckets.empty())
    seeds.push_back("manual");
  auto seed = [&](PlanChoice choice, Evaluation evaluation) {
    if (evaluation.iterationUs < bestUs_) {
      bestUs_ = evaluation.iterationUs;
      bestEval_ = std::move(evaluation);
      best_ = std::move(choice);
    }
  };
  for (const std::string &name : seeds) {
    std::string error;
    std::optional<BaselineResult> reported =
        bestBaseline(name, problem_, model_, options_.baseline, options_.compressors, error);
    if (!reported)
      continue;
    evaluations_ += std::max<int64_t>(1, static_cast<int64_t>(options_.compressors.size()));
    result.baselineUs[name] = reported->evaluation.iterationUs;
    seed(std::move(reported->choice), std::move(reported->evaluation));
  }
  if (!options_.compressors.empty())
    for (const std::string &name : seeds) {
      BaselineOptions uncompressed = options_.baseline;
      uncompressed.compression.reset();
      std::string error;
      std::optional<PlanChoice> choice = baselineChoice(name, problem_, model_, uncompressed, error);
      if (!choice)
        continue;
      Evaluation evaluation = evaluate(problem_, *choice, model_);
      ++evaluations_;
      seed(std::move(*choice), std::move(evaluation));
    }

  // Dynamic programming, with and without decomposition, plain and compute-aware,
  // with chosen chunks and without.
  for (auto [decompose, computeAware] :
       {std::pair{false, false}, std::pair{true, false}, std::pair{false, true},
        std::pair{true, true}}) {
    if (decompose && !options_.allowDecomposition)
      continue;
    if (computeAware && options_.compressors.empty())
      continue;  // without compression there is no GPU kernel to charge
    PlanChoice planned = dynamicProgram(decompose, computeAware);
    for (int streams : {1, 2}) {
      if (streams == 2 && !decompose)
        continue;
      assignSchedule(planned, streams);
      if (consider(planned))
        streams_ = streams;
      PlanChoice chunked = planned;
      chooseChunks(problem_, chunked, model_);
      if (consider(std::move(chunked)))
        streams_ = streams;
    }
  }
  best_.strategy = "auto";
  localSearch();

  result.best = best_;
  result.best.strategy = "auto";
  result.bestEval = bestEval_;
  result.evaluations = evaluations_;
  return result;
}

} // namespace

AutotuneResult autotune(const Problem &problem, const cost::CostModel &model,
                        const AutotuneOptions &options) {
  return Searcher(problem, model, options).run();
}

} // namespace zen::plan

//===- PlanningTest.cpp - baselines, simulator tasks and the autotuner ----===//
#include "zen/Planner/Planning.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <tuple>

using namespace zen;
using namespace zen::plan;

namespace {

cost::CostModel modelOf(const std::string &preset) {
  return cost::CostModel(cost::loadCluster(preset));
}

PlanChoice bucketsOf(const std::vector<std::pair<int, int>> &ranges) {
  PlanChoice choice;
  for (auto [begin, end] : ranges) {
    BucketChoice bucket;
    bucket.begin = begin;
    bucket.end = end;
    choice.buckets.push_back(bucket);
  }
  assignSchedule(choice, 1);
  return choice;
}

PlanChoice baseline(const std::string &name, const Problem &problem,
                    const cost::CostModel &model, BaselineOptions options = {}) {
  std::string error;
  std::optional<PlanChoice> choice = baselineChoice(name, problem, model, options, error);
  EXPECT_TRUE(choice) << error;
  return choice.value_or(PlanChoice{});
}

cost::CompressionSpec spec(const std::string &text) {
  std::string error;
  auto specs = parseCompressors(text, error);
  EXPECT_TRUE(specs && specs->size() == 1) << error;
  return specs && !specs->empty() ? specs->front() : cost::CompressionSpec{};
}

TEST(Planning, ParsesCompressorLists) {
  std::string error;
  auto specs = parseCompressors("fp16, topk:0.01,powersgd:4", error);
  ASSERT_TRUE(specs) << error;
  ASSERT_EQ(specs->size(), 3u);
  EXPECT_EQ((*specs)[0].method, cost::CompressionMethod::FP16);
  EXPECT_EQ((*specs)[1].method, cost::CompressionMethod::TopK);
  EXPECT_DOUBLE_EQ((*specs)[1].ratio, 0.01);
  EXPECT_EQ((*specs)[2].rank, 4);
  EXPECT_EQ(compressorName((*specs)[1]), "topk:0.01");
  // Without a device suffix a planner may place a compressor on either device.
  std::vector<cost::CompressionSpec> anywhere = placements((*specs)[0]);
  ASSERT_EQ(anywhere.size(), 2u);
  EXPECT_EQ(anywhere[0].device, cost::Device::GPU);
  EXPECT_EQ(anywhere[1].device, cost::Device::CPU);
  EXPECT_EQ(anywhere[1].method, cost::CompressionMethod::FP16);
  auto pinned = parseCompressors("int8@cpu,powersgd:2@gpu", error);
  ASSERT_TRUE(pinned) << error;
  for (const cost::CompressionSpec &allowed : *pinned) {
    std::vector<cost::CompressionSpec> only = placements(allowed);
    ASSERT_EQ(only.size(), 1u);
    EXPECT_EQ(only[0].device, allowed.device);
  }
  EXPECT_EQ((*pinned)[0].device, cost::Device::CPU);
  EXPECT_EQ(compressorName((*pinned)[0]), "int8@cpu");
  EXPECT_EQ(compressorName((*pinned)[1]), "powersgd:2@gpu");
  EXPECT_TRUE(parseCompressors("", error)->empty());
  EXPECT_TRUE(parseCompressors("none", error)->empty());
  for (const char *bad : {"zip", "topk", "topk:0", "topk:1.5", "powersgd:0", "fp16:3"}) {
    error.clear();
    EXPECT_FALSE(parseCompressors(bad, error)) << bad;
    EXPECT_FALSE(error.empty()) << bad;
  }
}

TEST(Planning, BaselinesFollowTheirRules) {
  cost::CostModel model = modelOf("a100x64");
  Problem problem = syntheticProblem(200, 7, model, model.worldGroup());
  const int count = static_cast<int>(problem.gradients.size());
  auto bytesOf = [&](const BucketChoice &bucket) {
    double bytes = 0;
    for (int g = bucket.begin; g < bucket.end; ++g)
      bytes += static_cast<double>(problem.gradients[g].bytes);
    return bytes;
  };
  for (const std::string &name : {"nooverlap", "wfbp", "ddp", "horovod", "mgwfbp"}) {
    PlanChoice choice = baseline(name, problem, model);
    EXPECT_EQ(validateChoice(problem, choice), "") << name;
  }
  EXPECT_EQ(baseline("wfbp", problem, model).buckets.size(), size_t(count));
  EXPECT_TRUE(baseline("nooverlap", problem, model).afterBackward);

  // DDP: the first bucket closes once it holds 1 MiB, later ones at 25 MiB;
  // removing a bucket's last tensor always leaves it under its cap.
  PlanChoice ddp = baseline("ddp", problem, model);
  for (size_t b = 0; b < ddp.buckets.size(); ++b) {
    double cap = b == 0 ? double(1 << 20) : double(25 << 20);
    const BucketChoice &bucket = ddp.buckets[b];
    double withoutLast = bytesOf(bucket) - double(problem.gradients[bucket.end - 1].bytes);
    EXPECT_LT(withoutLast, cap) << "bucket " << b;
    if (b + 1 < ddp.buckets.size())
      EXPECT_GE(bytesOf(bucket), cap) << "bucket " << b;
  }

  BaselineOptions manual;
  manual.manualBuckets = {3, 5, 2};
  Problem ten = syntheticProblem(10, 3, model, model.worldGroup());
  PlanChoice chosen = baseline("manual", ten, model, manual);
  ASSERT_EQ(chosen.buckets.size(), 3u);
  EXPECT_EQ(chosen.buckets[1].begin, 3);
  EXPECT_EQ(chosen.buckets[1].end, 8);

  std::string error;
  manual.manualBuckets = {3, 5};
  EXPECT_FALSE(baselineChoice("manual", ten, model, manual, error));
  EXPECT_NE(error.find("cover 8 of the 10"), std::string::npos) << error;
  EXPECT_FALSE(baselineChoice("fastest", ten, model, {}, error));
  EXPECT_NE(error.find("unknown strategy"), std::string::npos) << error;

  BaselineOptions compressed;
  compressed.compression = spec("topk:0.01");
  for (const BucketChoice &bucket : baseline("ddp", problem, model, compressed).buckets) {
    EXPECT_EQ(bucket.compression.method, cost::CompressionMethod::TopK);
    EXPECT_TRUE(bucket.compression.errorFeedback);
    EXPECT_EQ(bucket.scheme, vocab::SyncScheme::AllGather);
  }
}

/// When each gradient is ready with compute alone, computed here from the
/// problem's segments independently of the planner: a bucket is ready when its
/// last member is, so ready times never decrease.
std::vector<double> readyTimesOf(const Problem &problem) {
  double forward = 0;
  for (const ComputeSegment &segment : problem.forward)
    forward += segment.durationUs;
  std::vector<double> ready;
  double latest = forward;
  for (const GradientTensor &gradient : problem.gradients) {
    double time = forward;
    for (int s = 0; s <= gradient.readyAfterSegment; ++s)
      time += problem.backward[s].durationUs;
    ready.push_back(latest = std::max(latest, time));
  }
  return ready;
}

// Horovod's tensor fusion: every cycle, the tensors ready so far are fused in order into
// buffers of at most the threshold (a larger tensor alone), until none is left.
TEST(Planning, HorovodFusesWhatEachCycleHasReady) {
  cost::CostModel model = modelOf("a100x64");
  Problem problem = syntheticProblem(200, 7, model, model.worldGroup());
  std::vector<double> ready = readyTimesOf(problem);
  auto bytesOf = [&](int begin, int end) {
    double bytes = 0;
    for (int g = begin; g < end; ++g)
      bytes += static_cast<double>(problem.gradients[g].bytes);
    return bytes;
  };
  auto checkRules = [&](const BaselineOptions &options) {
    PlanChoice horovod = baseline("horovod", problem, model, options);
    EXPECT_EQ(validateChoice(problem, horovod), "");
    const double cycle = options.horovodCycleUs, threshold = double(options.horovodFusionBytes);
    auto cycleOf = [&](int g) { return std::ceil(ready[g] / cycle); };
    for (size_t b = 0; b < horovod.buckets.size(); ++b) {
      const BucketChoice &bucket = horovod.buckets[b];
      SCOPED_TRACE("bucket " + std::to_string(b));
      // One cycle's tensors, within the threshold unless a single tensor exceeds it.
      EXPECT_EQ(cycleOf(bucket.begin), cycleOf(bucket.end - 1));
      if (bucket.size() > 1)
        EXPECT_LE(bytesOf(bucket.begin, bucket.end), threshold);
      // A bucket ends only at a cycle boundary or where the next tensor would not fit.
      if (b + 1 < horovod.buckets.size() && cycleOf(bucket.end) == cycleOf(bucket.end - 1))
        EXPECT_GT(bytesOf(bucket.begin, bucket.end + 1), threshold);
    }
    return horovod.buckets.size();
  };
  BaselineOptions current;  // Horovod >= 0.21: 1 ms, 128 MiB
  checkRules(current);
  BaselineOptions old;
  old.horovodCycleUs = 5000;
  old.horovodFusionBytes = 64ll << 20;
  checkRules(old);
  // A model under the threshold whose backward pass spans many cycles: Horovod sends
  // during backward, not in one buffer after the last gradient.
  Problem small = syntheticProblem(30, 7, model, model.worldGroup());
  std::vector<double> smallReady = readyTimesOf(small);
  EXPECT_LT(small.totalGradientBytes(), double(128 << 20));
  std::set<double> cyclesWithGradients;
  for (double time : smallReady)
    cyclesWithGradients.insert(std::ceil(time / current.horovodCycleUs));
  EXPECT_GE(cyclesWithGradients.size(), 3u);
  EXPECT_EQ(baseline("horovod", small, model, current).buckets.size(),
            cyclesWithGradients.size());
  // One cycle as long as the whole iteration and no threshold: one buffer.
  BaselineOptions oneCycle;
  oneCycle.horovodCycleUs = 2 * ready.back();
  oneCycle.horovodFusionBytes = int64_t(1) << 50;
  EXPECT_EQ(baseline("horovod", problem, model, oneCycle).buckets.size(), 1u);
  // A zero threshold disables fusion, as HOROVOD_FUSION_THRESHOLD=0 does.
  BaselineOptions unfused;
  unfused.horovodFusionBytes = 0;
  EXPECT_EQ(baseline("horovod", problem, model, unfused).buckets.size(),
            problem.gradients.size());

  std::string error;
  BaselineOptions bad;
  bad.horovodCycleUs = 0;
  EXPECT_FALSE(baselineChoice("horovod", problem, model, bad, error));
  EXPECT_EQ(error, "the Horovod cycle time must be positive");
  bad = {};
  bad.horovodFusionBytes = -1;
  EXPECT_FALSE(baselineChoice("horovod", problem, model, bad, error));
  EXPECT_EQ(error, "the Horovod fusion threshold must not be negative");
  EXPECT_EQ(checkBaselineOptions(bad), error);
}

TEST(Planning, SimTasksModelDecoupledAllGathers) {
  cost::CostModel model = modelOf("a100x64");
  Problem problem = syntheticProblem(4, 11, model, model.worldGroup());
  PlanChoice choice = bucketsOf({{0, 2}, {2, 4}});
  choice.buckets[1].scheme = vocab::SyncScheme::ReduceScatterAllGather;
  choice.buckets[1].chunks = 4;
  std::vector<cost::SimTask> tasks = buildSimTasks(problem, choice, model);
  auto find = [&](const std::string &name) {
    auto it = std::find_if(tasks.begin(), tasks.end(),
                           [&](const cost::SimTask &task) { return task.name == name; });
    EXPECT_NE(it, tasks.end()) << name;
    return static_cast<int>(it - tasks.begin());
  };
  int scatter = find("reduce_scatter.b1");
  int gather = find("all_gather.b1");
  int optimizer = find("optimizer.b1");
  EXPECT_EQ(tasks[scatter].collective, cost::CollectiveKind::ReduceScatter);
  EXPECT_TRUE(tasks[gather].nextIteration);
  EXPECT_TRUE(tasks[optimizer].nextIteration);
  EXPECT_EQ(tasks[gather].deps, std::vector<int>{scatter});
  // libzenrt runs both halves in the bucket's pieces (the plan file requires it).
  EXPECT_EQ(tasks[scatter].chunks, 4);
  EXPECT_EQ(tasks[gather].chunks, 4);
  // Gradients 2 and 3 are read first by forward segments 1 and 0: segment 0 waits.
  const std::vector<int> &forwardDeps = tasks[find("fwd.f0")].deps;
  EXPECT_NE(std::find(forwardDeps.begin(), forwardDeps.end(), optimizer), forwardDeps.end());
  EXPECT_FALSE(tasks[find("optimizer.b0")].nextIteration);
  Evaluation evaluation = evaluate(problem, choice, model);
  EXPECT_TRUE(evaluation.sim.error.empty()) << evaluation.sim.error;
  EXPECT_GT(evaluation.iterationUs, 0);
}

TEST(Planning, LowerBoundBelowEveryPlan) {
  cost::CostModel model = modelOf("a100x64");
  Problem problem = syntheticProblem(40, 5, model, model.worldGroup());
  double bound = lowerBoundUs(problem, model);
  EXPECT_GE(bound, problem.totalComputeUs() - 1e-9);
  for (const std::string &name : baselineNames())
    EXPECT_GE(evaluate(problem, baseline(name, problem, model), model).iterationUs, bound);
}

/// --dp 8 on a100x64: one node, so the bound's communication term is NVLink's, not the network's.
TEST(Planning, LowerBoundUsesTheDataParallelGroup) {
  cost::CostModel model = modelOf("a100x64");
  Problem problem = syntheticProblem(40, 5, model, model.groupOf(8));
  // Only the communication term: no compute.
  for (ComputeSegment &segment : problem.backward)
    segment.durationUs = 0;
  for (ComputeSegment &segment : problem.forward)
    segment.durationUs = 0;
  for (GradientTensor &gradient : problem.gradients)
    gradient.optimizerUs = 0;
  const double bytes = problem.totalGradientBytes();
  double bound = lowerBoundUs(problem, model);
  EXPECT_DOUBLE_EQ(bound, model.communicationBoundUs(bytes, model.groupOf(8)));
  EXPECT_NEAR(bound, 2.0 * 7 / 8 * bytes / (300 * 0.7833 * 1e3), 1e-6);
  EXPECT_LT(bound, 0.75 * model.communicationBoundUs(bytes, model.worldGroup()));  // over IB
  for (const std::string &name : baselineNames())
    EXPECT_GE(evaluate(problem, baseline(name, problem, model), model).iterationUs, bound) << name;
}

struct Scenario {
  std::string cluster;
  int tensors;
  uint64_t seed;
  std::string compressors;
};

/// auto <= every baseline, uncompressed and compressed, on many synthetic problems.
TEST(Autotune, NeverWorseThanAnyBaseline) {
  std::vector<Scenario> scenarios;
  for (const char *cluster : {"a100x64", "a100x8", "v100x16-10gbe", "h100x256"})
    for (int tensors : {1, 3, 12, 50, 161})
      for (const char *compressors : {"", "fp16,topk:0.01"})
        scenarios.push_back({cluster, tensors, uint64_t(tensors) * 31 + 7, compressors});
  for (const Scenario &scenario : scenarios) {
    SCOPED_TRACE(scenario.cluster + " n=" + std::to_string(scenario.tensors) + " compressors=" +
                 scenario.compressors);
    cost::CostModel model = modelOf(scenario.cluster);
    Problem problem = syntheticProblem(scenario.tensors, scenario.seed, model, model.worldGroup());
    AutotuneOptions options;
    std::string error;
    options.compressors = *parseCompressors(scenario.compressors, error);
    if (!options.compressors.empty())
      options.baseline.compression = options.compressors.front();
    AutotuneResult result = autotune(problem, model, options);
    EXPECT_EQ(validateChoice(problem, result.best), "");
    EXPECT_EQ(result.best.strategy, "auto");
    // The recorded evaluation is the plan's (deterministic simulator).
    EXPECT_DOUBLE_EQ(evaluate(problem, result.best, model).iterationUs,
                     result.bestEval.iterationUs);
    ASSERT_EQ(result.baselineUs.size(), baselineNames().size());
    for (const auto &[name, us] : result.baselineUs)
      EXPECT_LE(result.bestEval.iterationUs, us) << name;
    // The bound covers the allowed compressors.
    EXPECT_GE(result.bestEval.iterationUs, result.lowerBoundUs * (1 - 1e-9));
  }
}

/// With several compressors allowed, each baseline is reported with the best of
/// them applied to every bucket, not the first; auto still beats every baseline.
TEST(Autotune, BaselinesUseTheBestAllowedCompressor) {
  cost::CostModel model = modelOf("v100x16-10gbe");
  Problem problem = syntheticProblem(60, 9, model, model.worldGroup());
  std::string error;
  // fp16 first: on 10 GbE PowerSGD's far smaller payload wins by a wide margin.
  std::vector<cost::CompressionSpec> allowed = *parseCompressors("fp16,powersgd:4", error);
  std::vector<cost::CompressionSpec> reversed(allowed.rbegin(), allowed.rend());
  AutotuneOptions options;
  options.compressors = allowed;
  AutotuneResult result = autotune(problem, model, options);
  ASSERT_EQ(result.baselineUs.size(), baselineNames().size());
  for (const std::string &name : baselineNames()) {
    SCOPED_TRACE(name);
    double best = std::numeric_limits<double>::infinity();
    cost::CompressionMethod bestMethod = cost::CompressionMethod::None;
    for (const cost::CompressionSpec &spec : allowed) {
      BaselineOptions applied;
      applied.compression = spec;
      double us = evaluate(problem, baseline(name, problem, model, applied), model).iterationUs;
      if (us < best) {
        best = us;
        bestMethod = spec.method;
      }
    }
    EXPECT_EQ(bestMethod, cost::CompressionMethod::PowerSGD);
    EXPECT_DOUBLE_EQ(result.baselineUs.at(name), best);
    EXPECT_LE(result.bestEval.iterationUs, best);
    std::optional<BaselineResult> reported =
        bestBaseline(name, problem, model, BaselineOptions{}, reversed, error);
    ASSERT_TRUE(reported) << error;
    EXPECT_DOUBLE_EQ(reported->evaluation.iterationUs, best);  // order does not matter
    for (const BucketChoice &bucket : reported->choice.buckets) {
      EXPECT_EQ(bucket.compression.method, cost::CompressionMethod::PowerSGD);
      EXPECT_EQ(bucket.compression.device, cost::Device::GPU);  // as DDP's hooks run
    }
  }
  // Reported at their best: compressed when that is faster, with the uncompressed
  // times alongside.
  ASSERT_EQ(result.baselineUncompressedUs.size(), baselineNames().size());
  for (const std::string &name : baselineNames())
    EXPECT_DOUBLE_EQ(result.baselineUncompressedUs.at(name),
                     evaluate(problem, baseline(name, problem, model), model).iterationUs);
  // Without compressors a baseline is the uncompressed plan.
  std::optional<BaselineResult> dense = bestBaseline("ddp", problem, model, {}, {}, error);
  ASSERT_TRUE(dense) << error;
  EXPECT_DOUBLE_EQ(dense->evaluation.iterationUs,
                   evaluate(problem, baseline("ddp", problem, model), model).iterationUs);
  EXPECT_FALSE(bestBaseline("fastest", problem, model, {}, allowed, error));
  EXPECT_NE(error.find("unknown strategy"), std::string::npos) << error;
}

// A baseline's user can always switch compression off: where every allowed compressor
// slows a baseline down, it is reported uncompressed.
TEST(Autotune, BaselinesAreReportedAtTheirBest) {
  cost::CostModel model = modelOf("h100x256");
  Problem problem = syntheticProblem(60, 9, model, model.worldGroup());
  std::string error;
  AutotuneOptions options;
  options.compressors = *parseCompressors("fp16@gpu", error);
  AutotuneResult result = autotune(problem, model, options);
  int compressionLoses = 0;
  for (const std::string &name : baselineNames()) {
    SCOPED_TRACE(name);
    BaselineOptions fp16;
    fp16.compression = options.compressors.front();
    double compressed = evaluate(problem, baseline(name, problem, model, fp16), model).iterationUs;
    double plain = evaluate(problem, baseline(name, problem, model), model).iterationUs;
    EXPECT_DOUBLE_EQ(result.baselineUncompressedUs.at(name), plain);
    EXPECT_DOUBLE_EQ(result.baselineUs.at(name), std::min(compressed, plain));
    compressionLoses += compressed > plain;
  }
  EXPECT_GT(compressionLoses, 0);  // the case this test is about occurs
  // Without compressors there is nothing to report uncompressed.
  EXPECT_TRUE(autotune(problem, model, {}).baselineUncompressedUs.empty());
}

/// One way to communicate a bucket in the exhaustive search below.
struct BucketOption {
  std::string compression;  // "" for none
  bool decomposed = false;
  int64_t chunks = 1;
};

/// The fastest plan over every bucketing of the gradients and every assignment
/// of `options` to its buckets (K(K+1)^(n-1) plans for K options), one stream.
double exhaustiveBestUs(const Problem &problem, const cost::CostModel &model,
                        const std::vector<BucketOption> &options) {
  const int tensors = static_cast<int>(problem.gradients.size());
  std::vector<BucketChoice> settings;
  for (const BucketOption &option : options) {
    BucketChoice setting;
    if (!option.compression.empty()) {
      setting.compression = spec(option.compression);
      setting.compression.errorFeedback = wantsErrorFeedback(setting.compression.method);
    }
    setting.scheme = vocab::schemeFor(setting.compression.method, option.decomposed);
    setting.chunks = option.chunks;
    settings.push_back(setting);
  }
  double best = std::numeric_limits<double>::infinity();
  for (uint32_t cuts = 0; cuts < (1u << (tensors - 1)); ++cuts) {
    std::vector<std::pair<int, int>> ranges;
    int begin = 0;
    for (int g = 1; g < tensors; ++g)
      if (cuts & (1u << (g - 1))) {
        ranges.emplace_back(begin, g);
        begin = g;
      }
    ranges.emplace_back(begin, tensors);
    PlanChoice choice = bucketsOf(ranges);
    // Every assignment of the options to the buckets, as a number in base K.
    std::vector<size_t> digits(ranges.size(), 0);
    while (true) {
      for (size_t b = 0; b < ranges.size(); ++b) {
        BucketChoice &bucket = choice.buckets[b];
        const BucketChoice &setting = settings[digits[b]];
        bucket.compression = setting.compression;
        bucket.scheme = setting.scheme;
        bucket.chunks = setting.chunks;
      }
      best = std::min(best, evaluate(problem, choice, model).iterationUs);
      size_t b = 0;
      while (b < digits.size() && ++digits[b] == settings.size())
        digits[b++] = 0;
      if (b == digits.size())
        break;
    }
  }
  return best;
}

/// On small problems, auto is within 1% of the best plan found by enumerating
/// every bucketing, and with it chunking, decomposition and compression choices
/// per bucket, on every preset cluster.
TEST(Autotune, WithinOnePercentOfExhaustiveSearch) {
  struct Space {
    std::string compressors;  // allowed to auto; the options' compressors are among them
    std::vector<BucketOption> options;
    std::vector<int> tensors;
  };
  // The joint spaces grow as K(K+1)^(n-1): two options up to n = 10, three up to n = 7.
  const std::vector<Space> spaces = {
      {"", {{}}, {2, 5, 8, 12}},
      {"", {{}, {"", true, 1}}, {4, 10}},
      {"", {{}, {"", false, 4}}, {4, 10}},
      {"", {{}, {"", true, 1}, {"", false, 4}}, {7}},
      {"fp16@gpu", {{}, {"fp16@gpu"}}, {4, 10}},
      {"topk:0.01@cpu,powersgd:4@gpu", {{}, {"topk:0.01@cpu"}, {"powersgd:4@gpu"}}, {7}},
      {"int8@cpu,fp16@gpu", {{}, {"int8@cpu"}, {"", true, 1}}, {6}},
  };
  for (const char *cluster : {"a100x64", "a100x8", "h100x256", "v100x16-10gbe", "cpu-local"}) {
    cost::CostModel model = modelOf(cluster);
    for (size_t s = 0; s < spaces.size(); ++s)
      for (int tensors : spaces[s].tensors) {
        const uint64_t seed = 97 * s + tensors;
        SCOPED_TRACE(std::string(cluster) + " space " + std::to_string(s) +
                     " n=" + std::to_string(tensors) + " seed=" + std::to_string(seed));
        Problem problem = syntheticProblem(tensors, seed, model, model.worldGroup());
        const double best = exhaustiveBestUs(problem, model, spaces[s].options);
        AutotuneOptions options;
        std::string error;
        options.compressors = *parseCompressors(spaces[s].compressors, error);
        AutotuneResult result = autotune(problem, model, options);
        EXPECT_LE(result.bestEval.iterationUs, best * 1.01)
            << "auto " << result.bestEval.iterationUs << " exhaustive " << best;
      }
  }
}

/// The search's price cache gives chooseChunks the cost model's numbers: the same chunk counts,
/// from the same price of every chunk count it weighs (a small cache, so entries are evicted).
TEST(Planning, ChooseChunksFromTheCacheAsFromTheModel) {
  for (const char *cluster : {"a100x64", "v100x16-10gbe", "h100x256"}) {
    SCOPED_TRACE(cluster);
    cost::CostModel model = modelOf(cluster);
    Problem problem = syntheticProblem(200, 7, model, model.worldGroup());
    std::vector<std::pair<int, int>> ranges;
    for (int begin = 0, width = 1; begin < 200; begin += width, width = width % 40 + 3)
      ranges.emplace_back(begin, std::min(200, begin + width));
    PlanChoice direct = bucketsOf(ranges);
    PlanChoice cached = direct;
    chooseChunks(problem, direct, model);
    cost::CollectiveCostCache cache(model, 64);
    chooseChunks(problem, cached, model, &cache);
    for (size_t b = 0; b < direct.buckets.size(); ++b) {
      EXPECT_EQ(cached.buckets[b].chunks, direct.buckets[b].chunks) << "bucket " << b;
      double bytes = 0;
      for (int g = direct.buckets[b].begin; g < direct.buckets[b].end; ++g)
        bytes += static_cast<double>(problem.gradients[g].bytes);
      const cost::CollectiveKind kind = cost::CollectiveKind::AllReduce;
      for (int64_t chunks = 1; chunks <= 16; chunks *= 2)
        EXPECT_EQ(cache.chunkedCollective(kind, bytes, problem.group, chunks).timeUs,
                  model.chunkedCollective(kind, bytes, problem.group, chunks).timeUs)
            << "bucket " << b << ", " << chunks << " chunks";
    }
  }
}

TEST(Autotune, Deterministic) {
  cost::CostModel model = modelOf("a100x64");
  Problem problem = syntheticProblem(120, 42, model, model.worldGroup());
  AutotuneOptions options;
  std::string error;
  options.compressors = *parseCompressors("fp16,powersgd:4", error);
  AutotuneResult first = autotune(problem, model, options);
  AutotuneResult second = autotune(problem, model, options);
  ASSERT_EQ(first.best.buckets.size(), second.best.buckets.size());
  for (size_t b = 0; b < first.best.buckets.size(); ++b) {
    EXPECT_EQ(first.best.buckets[b].end, second.best.buckets[b].end);
    EXPECT_EQ(first.best.buckets[b].compression.method, second.best.buckets[b].compression.method);
    EXPECT_EQ(first.best.buckets[b].scheme, second.best.buckets[b].scheme);
    EXPECT_EQ(first.best.buckets[b].chunks, second.best.buckets[b].chunks);
  }
  EXPECT_EQ(first.bestEval.iterationUs, second.bestEval.iterationUs);
  // The baselines are evaluated on a second thread: reported and counted the same each time.
  EXPECT_EQ(first.baselineUs, second.baselineUs);
  EXPECT_EQ(first.baselineUncompressedUs, second.baselineUncompressedUs);
  EXPECT_EQ(first.evaluations, second.evaluations);
}

/// A GPU-compute-bound model on a slow network: a 100 MB gradient is ready
/// early in backward, 120 ms of backward remain. Uncompressed, its allreduce
/// (~170 ms on 10 GbE) is exposed; int8 shrinks it under the remaining
/// backward, and offloading int8 to the CPU also keeps encode and decode off
/// the compute stream, so the iteration is the compute alone.
Problem offloadFriendlyProblem(const cost::CostModel &model) {
  Problem problem;
  problem.group = model.worldGroup();
  problem.forward = {{"fwd", 40e3}};
  problem.backward = {{"head", 5e3}, {"body", 120e3}};
  for (auto [name, elements, segment] : {std::tuple{"big", int64_t(25) << 20, 0},
                                         std::tuple{"small", int64_t(1) << 20, 1}}) {
    GradientTensor gradient;
    gradient.name = name;
    gradient.elements = elements;
    gradient.bytes = 4 * elements;
    gradient.readyAfterSegment = segment;
    gradient.forwardSegment = 0;
    gradient.optimizerUs = model.computeUs(double(optimizerFlops(elements)),
                                           double(optimizerBytes(elements, 4)));
    problem.gradients.push_back(gradient);
  }
  return problem;
}

TEST(Autotune, OffloadsCompressionToTheCpuWhenComputeBound) {
  cost::CostModel model = modelOf("v100x16-10gbe");
  Problem problem = offloadFriendlyProblem(model);
  std::string error;
  AutotuneOptions anywhere, gpuOnly;
  anywhere.compressors = *parseCompressors("int8", error);
  gpuOnly.compressors = *parseCompressors("int8@gpu", error);
  AutotuneResult offloaded = autotune(problem, model, anywhere);
  AutotuneResult onGpu = autotune(problem, model, gpuOnly);

  // On the GPU, int8's kernels lengthen the compute-bound iteration.
  ASSERT_FALSE(onGpu.best.buckets.empty());
  for (const BucketChoice &bucket : onGpu.best.buckets)
    EXPECT_EQ(bucket.compression.device, cost::Device::GPU);
  // Offloaded, the big gradient is compressed on the CPU, and the plan is faster.
  const BucketChoice &big = offloaded.best.buckets.front();
  EXPECT_EQ(big.begin, 0);
  EXPECT_EQ(big.compression.method, cost::CompressionMethod::Int8);
  EXPECT_EQ(big.compression.device, cost::Device::CPU);
  EXPECT_LT(offloaded.bestEval.iterationUs, onGpu.bestEval.iterationUs * 0.999)
      << "cpu " << offloaded.bestEval.iterationUs << " gpu " << onGpu.bestEval.iterationUs;
  // Its encode and decode ran on the CPU worker, not on the compute stream.
  EXPECT_GT(offloaded.bestEval.sim.hostCompressionUs, 0);
  std::vector<cost::SimTask> tasks = buildSimTasks(problem, offloaded.best, model);
  for (const cost::SimTask &task : tasks)
    if (task.name == "compress.b0" || task.name == "decompress.b0")
      EXPECT_EQ(task.device, cost::Device::CPU) << task.name;
}

/// Allowing more compressors never plans worse: auto with every compressor
/// allowed is at least as fast as auto with any one of them, or none. (The
/// DP's FIFO model can prefer a compressor the simulator finds worse, and a
/// local search with more moves can end on a lower hill.) At every size: also
/// where the local search's work bound cuts it short, and on a large problem.
TEST(Autotune, MoreCompressorsNeverPlanWorse) {
  struct Case {
    const char *cluster;
    int tensors;
    uint64_t seed;
    double localSearchWork;
  };
  std::vector<Case> cases;
  for (const char *cluster : {"a100x64", "h100x256", "v100x16-10gbe"}) {
    for (int tensors : {6, 20})
      for (uint64_t seed : {1, 2, 3, 4, 5})
        cases.push_back({cluster, tensors, seed, AutotuneOptions{}.localSearchWork});
    // A bound of 100 simulated tasks per tensor stops every search early.
    for (int tensors : {20, 300})
      cases.push_back({cluster, tensors, 1, 0});
  }
  cases.push_back({"v100x16-10gbe", 3000, 1, AutotuneOptions{}.localSearchWork});
  const std::string all = "fp16,int8,topk:0.01,powersgd:4";
  for (const Case &c : cases) {
    SCOPED_TRACE(std::string(c.cluster) + " n=" + std::to_string(c.tensors) +
                 " seed=" + std::to_string(c.seed) + " work=" + std::to_string(c.localSearchWork));
    cost::CostModel model = modelOf(c.cluster);
    Problem problem =
        syntheticProblem(c.tensors, c.seed * 1000 + c.tensors, model, model.worldGroup());
    auto autoUs = [&](const std::string &compressors) {
      AutotuneOptions options;
      options.localSearchWork = c.localSearchWork;
      std::string error;
      options.compressors = *parseCompressors(compressors, error);
      return autotune(problem, model, options).bestEval.iterationUs;
    };
    const double withAll = autoUs(all);
    for (const char *subset : {"", "fp16", "int8", "topk:0.01", "powersgd:4"})
      EXPECT_LE(withAll, autoUs(subset) * (1 + 1e-9)) << "{" << subset << "}";
  }
}

TEST(Autotune, EmptyProblem) {
  cost::CostModel model = modelOf("a100x8");
  Problem problem = syntheticProblem(0, 1, model, model.worldGroup());
  AutotuneResult result = autotune(problem, model, AutotuneOptions{});
  EXPECT_TRUE(result.best.buckets.empty());
  EXPECT_EQ(validateChoice(problem, result.best), "");
}

} // namespace

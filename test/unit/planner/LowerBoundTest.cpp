//===- LowerBoundTest.cpp - no plan is predicted below the lower bound ----===//
//
// The lower bound (CostModel::lowerBoundUs) must hold for every valid cluster
// file, every problem and every plan: this property test draws random clusters
// (nodes, GPUs per node, NICs, link kinds, bandwidths, latencies, efficiencies,
// with and without profiled fits), random problems and random allowed
// compressors, plans them with every strategy and checks each prediction.
//
//===----------------------------------------------------------------------===//
#include "zen/Planner/Planning.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

using namespace zen;
using namespace zen::plan;

namespace {

/// splitmix64: a portable random sequence (the standard distributions are not).
class Random {
public:
  explicit Random(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  double logUniform(double low, double high) {
    return std::exp(std::log(low) + uniform() * std::log(high / low));
  }
  int64_t between(int64_t low, int64_t high) {
    return low + static_cast<int64_t>(next() % static_cast<uint64_t>(high - low + 1));
  }
  template <typename T> const T &pick(const std::vector<T> &items) {
    return items[next() % items.size()];
  }

private:
  uint64_t state_;
};

/// A random cluster that the cluster-file parser accepts (it is written and read back).
cost::Cluster randomCluster(Random &random) {
  cost::Cluster cluster;
  cluster.name = "random";
  cluster.nodes = random.pick<int64_t>({1, 1, 2, 2, 3, 4, 8});
  cluster.gpusPerNode = random.pick<int64_t>({1, 2, 4, 8});
  if (cluster.nodes * cluster.gpusPerNode < 2)
    cluster.nodes = 2;
  cluster.gpu.name = "gpu";
  cluster.gpu.peakTflops[cost::DType::F32] = random.logUniform(1, 100);
  cluster.gpu.peakTflops[cost::DType::BF16] = random.logUniform(10, 1000);
  cluster.gpu.hbmBandwidthGBps = random.logUniform(100, 4000);
  cluster.gpu.computeEfficiency = random.logUniform(0.2, 1);
  cluster.gpu.memoryEfficiency = random.logUniform(0.2, 1);
  cluster.gpu.pcieBandwidthGBps = random.logUniform(4, 64);
  cluster.gpu.cpuCompressGBps = random.logUniform(0.2, 20);
  cluster.intraNode.kind = random.pick<std::string>({"nvlink", "pcie", "shm"});
  cluster.intraNode.bandwidthGBps = random.logUniform(0.5, 900);
  cluster.intraNode.latencyUs = random.logUniform(0.1, 20);
  cluster.intraNode.efficiency = random.logUniform(0.3, 1);
  cluster.interNode.kind = random.pick<std::string>({"infiniband", "ethernet"});
  cluster.nicsPerNode = random.between(1, 8);
  cluster.interNode.bandwidthGBps = random.logUniform(0.5, 100);
  cluster.interNode.latencyUs = random.logUniform(0.5, 50);
  cluster.interNode.efficiency = random.logUniform(0.3, 1);
  cluster.overlapSlowdown = 1 + random.uniform() * 0.5;
  return cluster;
}

/// Profiled alpha-beta fits over `ranks` for some kinds: 1-3 size ranges each,
/// some latency-only (beta 0), as `zenopt profile` may write them.
void addProfiles(cost::Cluster &cluster, int64_t ranks, Random &random) {
  for (cost::CollectiveKind kind : {cost::CollectiveKind::AllReduce,
                                    cost::CollectiveKind::ReduceScatter,
                                    cost::CollectiveKind::AllGather}) {
    if (random.uniform() < 0.4)
      continue;
    double low = 4;
    for (int64_t range = random.between(1, 3); range > 0; --range) {
      cost::ProfiledCollective fit{kind, ranks, low, low * random.logUniform(16, 1 << 20)};
      fit.alphaUs = random.logUniform(1, 500);
      fit.betaUsPerByte = random.uniform() < 0.15 ? 0 : random.logUniform(1e-7, 1e-2);
      fit.rSquared = 0.99;
      cluster.profiled.push_back(fit);
      low = fit.maxBytes;
    }
  }
  cluster.profiledBackend = "mpi";
}

const std::vector<std::string> kCompressorLists = {
    "", "fp16", "int8", "topk:0.01", "randomk:0.05", "sign", "powersgd:1", "powersgd:8",
    "fp16,powersgd:4", "bf16,topk:0.001,sign@cpu", "int8@cpu,powersgd:2@gpu"};

/// Every strategy's plan (each baseline with the best allowed compressor, uncompressed
/// baselines, auto), plus a one-bucket, sixteen-chunk, decomposed plan on two streams.
std::vector<std::pair<std::string, Evaluation>> everyPlan(const Problem &problem,
                                                           const cost::CostModel &model,
                                                           const std::vector<cost::CompressionSpec> &allowed) {
  std::vector<std::pair<std::string, Evaluation>> plans;
  std::string error;
  for (const std::string &name : baselineNames()) {
    std::vector<BaselineResult> candidates;
    std::optional<BaselineResult> best =
        bestBaseline(name, problem, model, BaselineOptions{}, allowed, error, &candidates);
    EXPECT_TRUE(best) << error;
    for (const BaselineResult &candidate : candidates)
      plans.emplace_back(name, candidate.evaluation);
    std::optional<PlanChoice> dense = baselineChoice(name, problem, model, {}, error);
    EXPECT_TRUE(dense) << error;
    if (dense)
      plans.emplace_back(name + " uncompressed", evaluate(problem, *dense, model));
  }
  AutotuneOptions options;
  options.compressors = allowed;
  options.localSearchWork = 2e5;
  plans.emplace_back("auto", autotune(problem, model, options).bestEval);

  PlanChoice whole;
  BucketChoice bucket;
  bucket.begin = 0;
  bucket.end = static_cast<int>(problem.gradients.size());
  bucket.chunks = 16;
  bucket.scheme = vocab::SyncScheme::ReduceScatterAllGather;
  whole.buckets.push_back(bucket);
  assignSchedule(whole, 2);
  plans.emplace_back("one decomposed bucket", evaluate(problem, whole, model));
  PlanChoice each = *baselineChoice("wfbp", problem, model, {}, error);
  for (BucketChoice &single : each.buckets) {
    single.scheme = vocab::SyncScheme::ReduceScatterAllGather;
    single.chunks = 4;
  }
  assignSchedule(each, 2);
  plans.emplace_back("decomposed per tensor", evaluate(problem, each, model));
  return plans;
}

void expectNoPlanBelowTheBound(const Problem &problem, const cost::CostModel &model,
                               const std::vector<cost::CompressionSpec> &allowed) {
  const double bound = lowerBoundUs(problem, model, allowed);
  EXPECT_GE(bound, problem.totalComputeUs() * (1 - 1e-12));
  for (const auto &[name, evaluation] : everyPlan(problem, model, allowed)) {
    ASSERT_TRUE(evaluation.sim.error.empty()) << name << ": " << evaluation.sim.error;
    EXPECT_GE(evaluation.iterationUs, bound * (1 - 1e-9))
        << name << ": " << evaluation.iterationUs << " us < bound " << bound << " us";
  }
}

} // namespace

TEST(LowerBound, NoPlanBelowItOnRandomClustersAndProblems) {
  Random random(20240611);
  for (int trial = 0; trial < 60; ++trial) {
    cost::Cluster drawn = randomCluster(random);
    const int64_t world = drawn.nodes * drawn.gpusPerNode;
    const int64_t ranks = random.uniform() < 0.7 ? world : random.between(2, world);
    if (random.uniform() < 0.35)
      addProfiles(drawn, ranks, random);
    // Only valid cluster files: what the parser accepts, as it reads it.
    cost::Cluster cluster = cost::parseCluster(cost::writeCluster(drawn), "random.json");
    cost::CostModel model(cluster);
    Problem problem = syntheticProblem(static_cast<int>(random.between(1, 40)), random.next(),
                                       model, model.groupOf(ranks));
    // From communication-bound to compute-bound.
    const double computeScale = random.logUniform(1e-3, 1e2);
    for (ComputeSegment &segment : problem.forward)
      segment.durationUs *= computeScale;
    for (ComputeSegment &segment : problem.backward)
      segment.durationUs *= computeScale;
    const std::string &compressors = random.pick(kCompressorLists);
    std::string error;
    std::vector<cost::CompressionSpec> allowed = *parseCompressors(compressors, error);
    SCOPED_TRACE("trial " + std::to_string(trial) + ": " + std::to_string(cluster.nodes) +
                 " nodes x " + std::to_string(cluster.gpusPerNode) + " " +
                 cluster.intraNode.kind + ", " + std::to_string(cluster.nicsPerNode) +
                 " NICs, " + std::to_string(cluster.profiled.size()) + " fits, ranks " +
                 std::to_string(ranks) + ", " + std::to_string(problem.gradients.size()) +
                 " tensors, compressors [" + compressors + "]");
    expectNoPlanBelowTheBound(problem, model, allowed);
  }
}

// The counterexample to the old bound: two nodes with one NIC each, where the
// model's own hierarchical all-reduce beats 2(n-1)/n * S / min(B_intra, B_node).
TEST(LowerBound, TwoNodesWithOneNicEach) {
  cost::Cluster cluster = cost::loadCluster("a100x64");
  cluster.nodes = 2;
  cluster.nicsPerNode = 1;
  cost::CostModel model(cluster);
  Problem problem = syntheticProblem(30, 11, model, model.worldGroup());
  for (ComputeSegment &segment : problem.backward)
    segment.durationUs *= 1e-3;  // communication-bound
  const double bytes = problem.totalGradientBytes();
  const double oldBound = 2.0 * 15 / 16 * bytes / (25 * 0.96 * 1e3);
  const double bound = lowerBoundUs(problem, model);
  EXPECT_LT(bound, oldBound);
  std::vector<std::pair<std::string, Evaluation>> plans = everyPlan(problem, model, {});
  bool someBelowOldBound = false;
  for (const auto &[name, evaluation] : plans) {
    EXPECT_GE(evaluation.iterationUs, bound * (1 - 1e-9)) << name;
    someBelowOldBound |= evaluation.iterationUs < oldBound;
  }
  EXPECT_TRUE(someBelowOldBound);  // the old bound was not one
  for (const char *compressors : {"fp16", "powersgd:4", "topk:0.01"}) {
    std::string error;
    expectNoPlanBelowTheBound(problem, model, *parseCompressors(compressors, error));
  }
}

//===- SimulatorTest.cpp - timeline simulator on hand-computed graphs -----===//
#include "zen/CostModel/Simulator.h"

#include <gtest/gtest.h>

#include <random>

using namespace zen::cost;

namespace {

/// A cluster whose 2-rank allreduce costs exactly alpha + beta * bytes, so
/// every timeline below can be computed by hand: alpha = 10 us, 1 us per kB.
CostModel exactModel(double slowdown) {
  Cluster cluster = loadCluster("a100x8");
  cluster.profiled.push_back({CollectiveKind::AllReduce, 2, 1, 1e12, 10, 1e-3, 1, 0});
  cluster.profiled.push_back({CollectiveKind::AllGather, 2, 1, 1e12, 0, 1e-3, 1, 0});
  cluster.overlapSlowdown = slowdown;
  return CostModel(cluster);
}

SimTask compute(const std::string &name, double us, std::vector<int> deps = {}) {
  SimTask task;
  task.name = name;
  task.kind = TaskKind::Compute;
  task.durationUs = us;
  task.deps = std::move(deps);
  return task;
}

/// An allreduce of 10 + `bandwidthUs` microseconds alone.
SimTask allReduce(const std::string &name, double bandwidthUs, int stream, std::vector<int> deps = {},
                  int64_t priority = 0) {
  SimTask task;
  task.name = name;
  task.kind = TaskKind::Collective;
  task.collective = CollectiveKind::AllReduce;
  task.bytes = bandwidthUs * 1e3;
  task.group = Group{2, 1};
  task.stream = stream;
  task.deps = std::move(deps);
  task.priority = priority;
  return task;
}

/// An all-gather of exactly `us` microseconds alone (no latency part).
SimTask allGather(const std::string &name, double us, int stream, std::vector<int> deps) {
  SimTask task = allReduce(name, 0, stream, std::move(deps));
  task.collective = CollectiveKind::AllGather;
  task.bytes = us * 1e3;
  return task;
}

} // namespace

TEST(Simulator, SerialComputeChain) {
  SimResult result = simulate(exactModel(1.2), {compute("a", 100), compute("b", 50, {0}), compute("c", 25, {1})});
  ASSERT_EQ(result.error, "");
  EXPECT_DOUBLE_EQ(result.iterationUs, 175);
  EXPECT_DOUBLE_EQ(result.computeUs, 175);
  EXPECT_DOUBLE_EQ(result.exposedCommUs, 0);
  EXPECT_DOUBLE_EQ(result.startUs[2], 150);
}

TEST(Simulator, CollectiveAfterComputeIsExposed) {
  SimResult result = simulate(exactModel(1.2), {compute("b", 100), allReduce("ar", 40, 0, {0})});
  ASSERT_EQ(result.error, "");
  EXPECT_DOUBLE_EQ(result.startUs[1], 100);
  EXPECT_DOUBLE_EQ(result.endUs[1], 150);  // 10 latency + 40 transfer
  EXPECT_DOUBLE_EQ(result.iterationUs, 150);
  EXPECT_DOUBLE_EQ(result.exposedCommUs, 50);
}

TEST(Simulator, OverlapSlowsCompute) {
  // The allreduce (50 us) runs alongside a 100 us compute task: the first
  // 50 us of compute progress at 1/1.25, the rest at full speed:
  // 50 + (100 - 50 / 1.25) = 110.
  SimResult result = simulate(exactModel(1.25), {compute("a", 0), allReduce("ar", 40, 0, {0}), compute("b", 100, {0})});
  ASSERT_EQ(result.error, "");
  EXPECT_DOUBLE_EQ(result.endUs[2], 110);
  EXPECT_DOUBLE_EQ(result.iterationUs, 110);
  EXPECT_DOUBLE_EQ(result.computeUs, 110);
  EXPECT_DOUBLE_EQ(result.computeAloneUs, 100);
}

TEST(Simulator, MeasuredInterferenceSlowsTheCollectiveBesideCompute) {
  // Profiled: compute 1.25x slower beside a collective, a transfer 2x slower beside compute.
  Cluster cluster = loadCluster("a100x8");
  cluster.profiled.push_back({CollectiveKind::AllReduce, 2, 1, 1e12, 10, 1e-3, 1, 0});
  cluster.profiledInterference = ProfiledInterference{1.25, 2.0, 4 << 20, "test"};
  CostModel model(cluster);
  EXPECT_DOUBLE_EQ(model.overlapSlowdown(), 1.25);
  EXPECT_DOUBLE_EQ(model.collectiveSlowdown(), 2.0);
  // The all-reduce (10 latency + 40 transfer) starts with a 100 us compute task. Latency
  // 0-10 (compute at 1/1.25: 8 done); the transfer at 1/2 beside compute ends at 90
  // (compute: 8 + 80 / 1.25 = 72 done); the compute's last 28 alone: ends at 118.
  SimResult result =
      simulate(model, {compute("a", 0), allReduce("ar", 40, 0, {0}), compute("b", 100, {0})});
  ASSERT_EQ(result.error, "");
  EXPECT_DOUBLE_EQ(result.endUs[1], 90);
  EXPECT_DOUBLE_EQ(result.endUs[2], 118);
  // Without the measured interference the transfer keeps its speed: done at 50.
  SimResult unslowed =
      simulate(exactModel(1.25), {compute("a", 0), allReduce("ar", 40, 0, {0}), compute("b", 100, {0})});
  EXPECT_DOUBLE_EQ(unslowed.endUs[1], 50);
}

TEST(Simulator, ExecutorWorkAddsToTheCollectivesLatency) {
  SimTask bucket = allReduce("ar", 40, 0);
  bucket.executorUs = 25;
  SimResult result = simulate(exactModel(1.2), {bucket});
  ASSERT_EQ(result.error, "");
  EXPECT_DOUBLE_EQ(result.endUs[0], 75);  // 10 latency + 25 executor + 40 transfer
  CollectiveCostCache cache(exactModel(1.2));
  EXPECT_DOUBLE_EQ(simulate(exactModel(1.2), {bucket}, &cache).endUs[0], 75);
}

TEST(Simulator, ConcurrentCollectivesShareBandwidth) {
  // Both latency parts run in parallel (10 us); then the transfers (100 and
  // 50 us of work) share the link: after 100 us the short one is done (50
  // each), the long one finishes its last 50 alone.
  SimResult result = simulate(exactModel(1.0), {allReduce("long", 100, 0), allReduce("short", 50, 1)});
  ASSERT_EQ(result.error, "");
  EXPECT_DOUBLE_EQ(result.endUs[1], 110);
  EXPECT_DOUBLE_EQ(result.endUs[0], 160);
  // The same pair on one stream runs back to back: 110 + 60.
  SimResult serial = simulate(exactModel(1.0), {allReduce("long", 100, 0), allReduce("short", 50, 0)});
  EXPECT_DOUBLE_EQ(serial.iterationUs, 170);
}

/// Collectives over 8 ranks of exactly 1 us per kB alone, without latency:
/// an all-to-all inside one node uses only the node's links, an all-reduce
/// over 8 nodes (a rank each) only their NICs, one over 2 nodes both levels
/// (a profile does not say which limits it, so it holds both).
CostModel twoLevelModel() {
  Cluster cluster = loadCluster("a100x64");
  cluster.profiled.push_back({CollectiveKind::AllToAll, 8, 1, 1e12, 0, 1e-3, 1, 0});
  cluster.profiled.push_back({CollectiveKind::AllReduce, 8, 1, 1e12, 0, 1e-3, 1, 0});
  cluster.overlapSlowdown = 1.0;
  return CostModel(cluster);
}

SimTask twoLevel(CollectiveKind kind, Group group, double us, int stream) {
  SimTask task = allReduce("t", 0, stream);
  task.collective = kind;
  task.group = group;
  task.bytes = us * 1e3;
  return task;
}

TEST(Simulator, LinkLevelsAreSharedApart) {
  const CostModel model = twoLevelModel();
  const SimTask insideNode = twoLevel(CollectiveKind::AllToAll, Group{8, 1}, 100, 0);
  const SimTask onNics = twoLevel(CollectiveKind::AllReduce, Group{8, 8}, 100, 1);
  const SimTask both = twoLevel(CollectiveKind::AllReduce, Group{8, 2}, 100, 1);
  CollectiveCost cost = collectiveCost(model, insideNode);
  EXPECT_DOUBLE_EQ(cost.intraNodeUs, 100);
  EXPECT_DOUBLE_EQ(cost.interNodeUs, 0);
  cost = collectiveCost(model, onNics);
  EXPECT_DOUBLE_EQ(cost.intraNodeUs, 0);
  EXPECT_DOUBLE_EQ(cost.interNodeUs, 100);

  // Different levels: neither slows the other.
  SimResult apart = simulate(model, {insideNode, onNics});
  ASSERT_EQ(apart.error, "");
  EXPECT_DOUBLE_EQ(apart.endUs[0], 100);
  EXPECT_DOUBLE_EQ(apart.endUs[1], 100);
  // One level in common: it is split equally.
  SimResult shared = simulate(model, {insideNode, both});
  EXPECT_DOUBLE_EQ(shared.endUs[0], 200);
  EXPECT_DOUBLE_EQ(shared.endUs[1], 200);

  // Max-min fair: all three at 1/2 (each level holds two) until the two short
  // ones end at 200; the NIC-only one then runs its last 200 us alone. (One
  // network shared three ways would end them at 300 and 500.)
  SimTask longOnNics = onNics;
  longOnNics.bytes = 300e3;
  longOnNics.stream = 2;
  SimResult three = simulate(model, {insideNode, both, longOnNics});
  EXPECT_DOUBLE_EQ(three.endUs[0], 200);
  EXPECT_DOUBLE_EQ(three.endUs[1], 200);
  EXPECT_DOUBLE_EQ(three.endUs[2], 400);
}

/// A transfer that keeps a level busy only part of the time leaves the rest to
/// others: a ring all-reduce over 8 nodes of a100x64 is limited by the NICs
/// (8 x 25 GB/s x 0.96 per node) and keeps NVLink (300 x 0.7833 per rank)
/// busy for their ratio, so an all-to-all inside a node beside it gets the
/// rest of NVLink and the all-reduce keeps the NICs' full speed.
TEST(Simulator, PartialLinkShares) {
  const CostModel model(loadCluster("a100x64"));
  SimTask ring = twoLevel(CollectiveKind::AllReduce, Group{64, 8}, 0, 0);
  ring.bytes = 1e9;
  ring.algorithm = Algorithm::Ring;
  SimTask local = twoLevel(CollectiveKind::AllToAll, Group{8, 1}, 0, 1);
  local.bytes = 1e9;
  const CollectiveCost ringCost = collectiveCost(model, ring);
  const CollectiveCost localCost = collectiveCost(model, local);
  const double share = (8 * 25 * 0.96) / (300 * 0.7833);
  EXPECT_NEAR(ringCost.intraNodeUs / ringCost.bandwidthUs, share, 1e-9);
  EXPECT_DOUBLE_EQ(ringCost.interNodeUs, ringCost.bandwidthUs);
  SimResult result = simulate(model, {ring, local});
  ASSERT_EQ(result.error, "");
  // The all-to-all's latency is the shorter: it moves alone until the ring's
  // ends, then both rise to 1 / (1 + share) of full speed, where NVLink fills.
  // When the all-to-all ends the ring has moved as much as its rest, so the
  // ring is delayed by that rest x share (one shared network: x 1).
  ASSERT_GT(ringCost.latencyUs, localCost.latencyUs);
  const double rest = localCost.bandwidthUs - (ringCost.latencyUs - localCost.latencyUs);
  ASSERT_GT(rest, 0);
  ASSERT_LT(rest, ringCost.bandwidthUs);
  EXPECT_NEAR(result.endUs[1], ringCost.latencyUs + rest * (1 + share), 1e-6 * rest);
  EXPECT_NEAR(result.endUs[0], ringCost.timeUs + rest * share, 1e-6 * rest);
}

TEST(Simulator, PriorityOrdersReadyTasksOnAStream) {
  std::vector<SimTask> tasks = {compute("grad", 10), allReduce("late", 20, 0, {0}, /*priority=*/5),
                                allReduce("urgent", 20, 0, {0}, /*priority=*/1)};
  SimResult result = simulate(exactModel(1.0), tasks);
  ASSERT_EQ(result.error, "");
  EXPECT_DOUBLE_EQ(result.startUs[2], 10);
  EXPECT_DOUBLE_EQ(result.startUs[1], 40);
  // Equal priorities: lower index first.
  tasks[2].priority = 5;
  result = simulate(exactModel(1.0), tasks);
  EXPECT_DOUBLE_EQ(result.startUs[1], 10);
}

TEST(Simulator, DecoupledAllGatherOverlapsTheNextForward) {
  // fa -> fb -> b -> rs; ag (next iteration) after rs; fb of the next
  // iteration waits for ag. Steady state with slowdown 1.5: ag (50 us) runs
  // during fa: fa = 50 + (100 - 50 / 1.5); then fb, b (100 each), rs (10 + 40).
  std::vector<SimTask> tasks = {compute("fa", 100), compute("fb", 100, {0, 4}), compute("b", 100, {1}),
                                allReduce("rs", 40, 0, {2}), allGather("ag", 50, 1, {3})};
  tasks[4].nextIteration = true;
  SimResult result = simulate(exactModel(1.5), tasks);
  ASSERT_EQ(result.error, "");
  double fa = 50 + (100 - 50 / 1.5);
  EXPECT_NEAR(result.iterationUs, fa + 200 + 50, 1e-9);
  EXPECT_NEAR(result.startUs[4], fa + 250, 1e-9);  // issued after this iteration's rs
  EXPECT_NEAR(result.endUs[4], fa + 300, 1e-9);    // beyond the iteration's end
  EXPECT_NEAR(result.computeUs, fa + 200, 1e-9);
  EXPECT_NEAR(result.exposedCommUs, 50, 1e-9);

  // A 200 us all-gather outlasts fa: fb waits for it (slowdown 1 here).
  tasks[4].bytes = 200e3;
  result = simulate(exactModel(1.0), tasks);
  EXPECT_NEAR(result.iterationUs, 200 + 100 + 100 + 50, 1e-9);
  EXPECT_NEAR(result.startUs[1], 200, 1e-9);
  EXPECT_NEAR(result.exposedCommUs, 150, 1e-9);
}

TEST(Simulator, CpuCompressionRunsOnItsOwnWorkerUnslowed) {
  // b (100 us) then, in parallel: the allreduce (10 + 90 us), b2 (60 us on the
  // compute stream, slowed 1.5x by the allreduce) and two CPU encodes of 40 us
  // each, which share the one CPU worker but neither wait for compute nor slow down.
  auto compress = [](const std::string &name, double us, std::vector<int> deps, Device device) {
    SimTask task = compute(name, us, std::move(deps));
    task.kind = TaskKind::Compress;
    task.device = device;
    return task;
  };
  std::vector<SimTask> tasks = {compute("b", 100),
                                allReduce("ar", 90, 0, {0}),
                                compute("b2", 60, {0}),
                                compress("enc1", 40, {0}, Device::CPU),
                                compress("enc2", 40, {0}, Device::CPU)};
  SimResult result = simulate(exactModel(1.5), tasks);
  ASSERT_EQ(result.error, "");
  EXPECT_DOUBLE_EQ(result.endUs[2], 100 + 60 * 1.5);
  EXPECT_DOUBLE_EQ(result.startUs[3], 100);
  EXPECT_DOUBLE_EQ(result.endUs[3], 140);
  EXPECT_DOUBLE_EQ(result.startUs[4], 140);
  EXPECT_DOUBLE_EQ(result.endUs[4], 180);
  EXPECT_DOUBLE_EQ(result.iterationUs, 200);
  // The CPU worker's time is not compute-stream time.
  EXPECT_DOUBLE_EQ(result.computeAloneUs, 160);
  EXPECT_DOUBLE_EQ(result.computeUs, 190);
  EXPECT_DOUBLE_EQ(result.hostCompressionUs, 80);

  // The same encodes on the GPU queue behind b2 on the compute stream, slowed
  // while the allreduce runs (until 200), then at full speed.
  tasks[3].device = tasks[4].device = Device::GPU;
  result = simulate(exactModel(1.5), tasks);
  ASSERT_EQ(result.error, "");
  EXPECT_DOUBLE_EQ(result.startUs[3], 190);
  EXPECT_DOUBLE_EQ(result.endUs[3], 200 + (40 - 10 / 1.5));
  EXPECT_DOUBLE_EQ(result.endUs[4], result.endUs[3] + 40);
  EXPECT_DOUBLE_EQ(result.hostCompressionUs, 0);

  // Only compression can be offloaded.
  tasks[2].device = Device::CPU;
  EXPECT_NE(simulate(exactModel(1), tasks).error.find("only compressions and decompressions can run on the CPU"),
            std::string::npos);
}

TEST(Simulator, RejectsBadGraphsWithoutThrowing) {
  EXPECT_NE(simulate(exactModel(1), {compute("a", 1, {3})}).error.find("dependency 3"), std::string::npos);
  EXPECT_NE(simulate(exactModel(1), {compute("a", 1, {0})}).error.find("not another task"), std::string::npos);
  EXPECT_NE(simulate(exactModel(1), {compute("a", -1)}).error.find("duration"), std::string::npos);
  SimResult cycle = simulate(exactModel(1), {compute("a", 1, {1}), compute("b", 1, {0})});
  EXPECT_NE(cycle.error.find("cycle"), std::string::npos);
  EXPECT_EQ(simulate(exactModel(1), {}).error, "");
  // A sparse synchronisation is priced from its table: without one it is refused, and so is
  // a plain collective that carries one.
  SimTask sparse = allReduce("sparse", 10, 0);
  sparse.kind = TaskKind::SparseSync;
  EXPECT_NE(simulate(exactModel(1), {sparse}).error.find("carries a sparse table"), std::string::npos);
  SimTask dense = allReduce("dense", 10, 0);
  dense.sparse = std::make_shared<const SparseSync>();
  EXPECT_NE(simulate(exactModel(1), {dense}).error.find("carries a sparse table"), std::string::npos);
}

namespace {
/// A backward pass of `layers` layers with one allreduce per gradient spread
/// over `streams` streams, and a decoupled all-gather per layer.
std::vector<SimTask> syntheticIteration(int layers, int streams, bool decoupled, uint32_t seed) {
  std::mt19937 random(seed);
  std::uniform_real_distribution<double> duration(5, 200);
  std::vector<SimTask> tasks;
  std::vector<int> gathers;
  for (int l = 0; l < layers; ++l)
    tasks.push_back(compute("f" + std::to_string(l), duration(random), l ? std::vector<int>{l - 1} : std::vector<int>{}));
  for (int l = layers - 1; l >= 0; --l) {
    int backward = static_cast<int>(tasks.size());
    tasks.push_back(compute("b" + std::to_string(l), duration(random), {backward - 1}));
    tasks.push_back(allReduce("ar" + std::to_string(l), duration(random), l % streams, {backward}, layers - l));
    if (decoupled) {
      tasks.push_back(allGather("ag" + std::to_string(l), duration(random), (l + 1) % streams, {backward + 1}));
      tasks.back().nextIteration = true;
      tasks[l].deps.push_back(static_cast<int>(tasks.size()) - 1);
    }
  }
  return tasks;
}
} // namespace

// Speed is measured in bench/costmodel (zen-costmodel-bench), not here.
TEST(Simulator, DeterministicOnLargeGraphs) {
  CostModel model = exactModel(1.15);
  for (bool decoupled : {false, true}) {
    std::vector<SimTask> tasks = syntheticIteration(decoupled ? 3334 : 5000, 3, decoupled, 7);
    ASSERT_GE(tasks.size(), 10000u);
    SimResult first = simulate(model, tasks);
    SimResult second = simulate(model, tasks);
    ASSERT_EQ(first.error, "");
    EXPECT_EQ(first.startUs, second.startUs);
    EXPECT_EQ(first.endUs, second.endUs);
    EXPECT_EQ(first.iterationUs, second.iterationUs);
    // Sanity: every task respects its dependencies and its stream runs one task at a time.
    for (size_t i = 0; i < tasks.size(); ++i)
      for (int dep : tasks[i].deps) {
        bool crosses = !tasks[i].nextIteration && tasks[dep].nextIteration;
        if (!crosses)
          EXPECT_GE(first.startUs[i], first.endUs[dep] - 1e-6);
      }
    EXPECT_GE(first.iterationUs, first.computeAloneUs);
  }
}

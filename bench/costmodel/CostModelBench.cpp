//===- CostModelBench.cpp - cost model and simulator speed ----------------===//
//
// The autotuner prices thousands of candidates: a collective must cost well
// under a microsecond and a whole iteration's simulation a few milliseconds
// at 10 000 tasks, growing as n log n.
//
//===----------------------------------------------------------------------===//
#include "zen/CostModel/Simulator.h"

#include <benchmark/benchmark.h>

#include <random>

using namespace zen::cost;

static void BM_CollectiveCost(benchmark::State &state) {
  CostModel model(loadCluster("a100x64"));
  double bytes = 1;
  for (auto _ : state) {
    bytes = bytes < 1e10 ? bytes * 1.37 : 1;
    benchmark::DoNotOptimize(model.collective(CollectiveKind::AllReduce, bytes, model.worldGroup()));
  }
}
BENCHMARK(BM_CollectiveCost);

/// Forward, backward, one allreduce per gradient over 2 streams; with
/// `decoupled`, a reduce-scatter in backward and an all-gather awaited by the
/// next forward (DeAR), which makes the simulator unroll iterations.
static std::vector<SimTask> trainingIteration(int layers, bool decoupled) {
  std::mt19937 random(42);
  std::uniform_real_distribution<double> compute(10, 500), bytes(1e4, 1e8);
  std::vector<SimTask> tasks;
  for (int l = 0; l < layers; ++l) {
    SimTask forward;
    forward.name = "fwd";
    forward.durationUs = compute(random);
    if (l)
      forward.deps = {l - 1};
    tasks.push_back(forward);
  }
  Group world{64, 8};
  for (int l = layers - 1; l >= 0; --l) {
    SimTask backward;
    backward.name = "bwd";
    backward.durationUs = 2 * tasks[l].durationUs;
    backward.deps = {static_cast<int>(tasks.size()) - 1};
    tasks.push_back(backward);
    SimTask sync;
    sync.name = "sync";
    sync.kind = TaskKind::Collective;
    sync.collective = decoupled ? CollectiveKind::ReduceScatter : CollectiveKind::AllReduce;
    sync.bytes = bytes(random);
    sync.group = world;
    sync.stream = l % 2;
    sync.priority = l;
    sync.deps = {static_cast<int>(tasks.size()) - 1};
    tasks.push_back(sync);
    if (decoupled) {
      SimTask gather = sync;
      gather.collective = CollectiveKind::AllGather;
      gather.deps = {static_cast<int>(tasks.size()) - 1};
      gather.nextIteration = true;
      tasks.push_back(gather);
      tasks[l].deps.push_back(static_cast<int>(tasks.size()) - 1);
    }
  }
  return tasks;
}

static void simulateIteration(benchmark::State &state, bool decoupled) {
  CostModel model(loadCluster("a100x64"));
  std::vector<SimTask> tasks = trainingIteration(static_cast<int>(state.range(0)), decoupled);
  for (auto _ : state)
    benchmark::DoNotOptimize(simulate(model, tasks));
  state.SetComplexityN(static_cast<int64_t>(tasks.size()));
  state.counters["tasks"] = static_cast<double>(tasks.size());
}

static void BM_Simulate(benchmark::State &state) { simulateIteration(state, false); }
static void BM_SimulateDecoupled(benchmark::State &state) { simulateIteration(state, true); }
BENCHMARK(BM_Simulate)->RangeMultiplier(10)->Range(100, 10000)->Arg(3334)
    ->Unit(benchmark::kMillisecond)->Complexity(benchmark::oNLogN);
BENCHMARK(BM_SimulateDecoupled)->RangeMultiplier(10)->Range(100, 10000)->Arg(2500)
    ->Unit(benchmark::kMillisecond)->Complexity(benchmark::oNLogN);

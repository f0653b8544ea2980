//===- PlanningBench.cpp - planning time versus tensor count ---------------===//
//
// Run: build-*/bin/zen-passes-bench [--benchmark_filter=...]
// Reports, per problem size, the wall time of one autotune and (as the label)
// the plan it finds (predicted iteration, best baseline, lower bound, number
// of full simulations). Sizes 100 / 1000 / 10000 give the growth curve; 149 is
// gpt2_small's tensor count.
//
//===----------------------------------------------------------------------===//
#include "zen/Planner/Planning.h"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>

using namespace zen;
using namespace zen::plan;

namespace {

const cost::CostModel &model() {
  static const cost::CostModel instance(cost::loadCluster("a100x64"));
  return instance;
}

void runAutotune(benchmark::State &state, const std::string &compressors) {
  const int tensors = static_cast<int>(state.range(0));
  Problem problem = syntheticProblem(tensors, 2024, model(), model().worldGroup());
  AutotuneOptions options;
  std::string error;
  options.compressors = *parseCompressors(compressors, error);
  if (!options.compressors.empty())
    options.baseline.compression = options.compressors.front();
  double autoUs = 0, bestBaseline = 0;
  size_t buckets = 0;
  long long simulations = 0;
  for (auto _ : state) {
    AutotuneResult result = autotune(problem, model(), options);
    autoUs = result.bestEval.iterationUs;
    bestBaseline = 1e300;
    for (const auto &[name, us] : result.baselineUs)
      bestBaseline = std::min(bestBaseline, us);
    buckets = result.best.buckets.size();
    simulations = static_cast<long long>(result.evaluations);
    benchmark::DoNotOptimize(autoUs);
  }
  const double lowerBound = lowerBoundUs(problem, model());
  char label[256];
  std::snprintf(label, sizeof label,
                "auto_us=%.1f best_baseline_us=%.1f lower_bound_us=%.1f buckets=%zu sims=%lld",
                autoUs, bestBaseline, lowerBound, buckets, simulations);
  state.SetLabel(label);
}

void BM_Autotune(benchmark::State &state) { runAutotune(state, ""); }
void BM_AutotuneCompressed(benchmark::State &state) { runAutotune(state, "fp16,topk:0.01"); }

/// One full simulation of the DDP plan: the unit the local search pays per move.
void BM_EvaluateDdp(benchmark::State &state) {
  Problem problem =
      syntheticProblem(static_cast<int>(state.range(0)), 2024, model(), model().worldGroup());
  std::string error;
  PlanChoice choice = *baselineChoice("ddp", problem, model(), BaselineOptions{}, error);
  for (auto _ : state)
    benchmark::DoNotOptimize(evaluate(problem, choice, model()).iterationUs);
}

} // namespace

BENCHMARK(BM_Autotune)->Arg(100)->Arg(149)->Arg(1000)->Arg(10000)->Arg(100000)
    ->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime()->UseRealTime();
BENCHMARK(BM_AutotuneCompressed)->Arg(149)->Arg(1000)->Arg(10000)
    ->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime()->UseRealTime();
BENCHMARK(BM_EvaluateDdp)->Arg(100)->Arg(1000)->Arg(10000)->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();

//===- Pipeline.cpp - pipeline schedules and their simulation -------------===//
#include "zen/CostModel/Pipeline.h"

#include <algorithm>
#include <deque>
#include <stdexcept>

namespace zen::cost {

std::string PipelineStep::name(int64_t virtualStages) const {
  std::string text = (backward ? "B" : "F") + std::to_string(microBatch);
  return virtualStages > 1 ? text + "." + std::to_string(chunk) : text;
}

std::vector<PipelineStep> stageProgram(int64_t stage, int64_t pp,
                                       int64_t microBatches,
                                       int64_t virtualStages) {
  const int64_t p = pp, v = virtualStages, steps = microBatches * v;
  // Megatron-LM: forward step k runs chunk (k / p) mod V of micro-batch
  // (k / (p V)) p + k mod p; backward steps visit the chunks in reverse.
  auto step = [&](bool backward, int64_t k) {
    PipelineStep s;
    s.backward = backward;
    s.chunk = v > 1 ? (k / p) % v : 0;
    s.microBatch = v > 1 ? k / (p * v) * p + k % p : k;
    if (backward)
      s.chunk = v - 1 - s.chunk;
    return s;
  };
  int64_t warmup = v > 1 ? (p - stage - 1) * 2 + (v - 1) * p : p - stage - 1;
  warmup = std::min(warmup, steps);
  std::vector<PipelineStep> program;
  program.reserve(2 * steps);
  int64_t forward = 0, backward = 0;
  for (; forward < warmup; ++forward)
    program.push_back(step(false, forward));
  while (forward < steps) {
    program.push_back(step(false, forward++));
    program.push_back(step(true, backward++));
  }
  while (backward < steps)
    program.push_back(step(true, backward++));
  return program;
}

PipelineSchedule simulatePipeline(const std::vector<StageCost> &stages,
                                  int64_t microBatches, int64_t virtualStages) {
  PipelineSchedule schedule;
  const int64_t p = int64_t(stages.size()), v = virtualStages, m = microBatches;
  if (p == 0 || m <= 0)
    return schedule;
  // Step durations per stage and chunk.
  std::vector<double> forwardUs(p), backwardUs(p);
  double slowest = 0;
  for (int64_t s = 0; s < p; ++s) {
    const StageCost &cost = stages[s];
    double compute = cost.forwardUs + cost.backwardUs;
    double forwardShare = compute > 0 ? cost.forwardUs / compute : 0.5;
    double comm = cost.tensorCommUs + cost.zeroCommUs;
    forwardUs[s] =
        (cost.forwardUs + forwardShare * comm + cost.pipelineCommUs / 2) /
        double(v);
    backwardUs[s] = (cost.backwardUs + (1 - forwardShare) * comm +
                     cost.pipelineCommUs / 2) /
                    double(v);
    slowest = std::max(slowest, cost.perMicroBatchUs());
  }
  const int64_t virtualDepth = p * v;
  // End time of each (virtual stage, micro-batch) forward and backward; < 0:
  // not run yet.
  std::vector<double> forwardEnd(virtualDepth * m, -1),
      backwardEnd(virtualDepth * m, -1);
  auto at = [&](int64_t virtualStage, int64_t micro) {
    return virtualStage * m + micro;
  };

  std::vector<std::vector<PipelineStep>> programs(p);
  schedule.stages.resize(p);
  for (int64_t s = 0; s < p; ++s) {
    programs[s] = stageProgram(s, p, m, v);
    schedule.stages[s].reserve(programs[s].size());
  }
  std::vector<size_t> next(p, 0);
  std::vector<double> freeAt(p, 0);
  std::vector<bool> queued(p, true);
  std::deque<int64_t> work;
  for (int64_t s = 0; s < p; ++s)
    work.push_back(s);
  // A stage runs steps until one waits on a neighbour; finishing a step wakes
  // the stages that may wait on it (neighbours, and the wrap-around between
  // the last and the first stage's chunks when interleaved).
  while (!work.empty()) {
    const int64_t s = work.front();
    work.pop_front();
    queued[s] = false;
    bool ran = false;
    while (next[s] < programs[s].size()) {
      const PipelineStep &step = programs[s][next[s]];
      const int64_t here = step.chunk * p + s;
      double ready = 0;
      if (!step.backward && here > 0)
        ready = forwardEnd[at(here - 1, step.microBatch)];
      else if (step.backward)
        ready = here + 1 < virtualDepth
                    ? backwardEnd[at(here + 1, step.microBatch)]
                    : forwardEnd[at(here, step.microBatch)];
      if (ready < 0)
        break;
      double start = std::max(ready, freeAt[s]);
      double duration = step.backward ? backwardUs[s] : forwardUs[s];
      freeAt[s] = start + duration;
      (step.backward ? backwardEnd : forwardEnd)[at(here, step.microBatch)] =
          freeAt[s];
      schedule.stages[s].push_back({step, start, duration});
      ++next[s];
      ran = true;
    }
    if (!ran)
      continue;
    for (int64_t neighbour : {s - 1, s + 1, (s + p - 1) % p, (s + 1) % p})
      if (neighbour >= 0 && neighbour < p && !queued[neighbour]) {
        queued[neighbour] = true;
        work.push_back(neighbour);
      }
  }
  for (int64_t s = 0; s < p; ++s)
    if (next[s] != programs[s].size())
      throw std::logic_error("pipeline schedule deadlocks at stage " +
                             std::to_string(s));
  schedule.totalUs = *std::max_element(freeAt.begin(), freeAt.end());
  schedule.bubbleUs = std::max(0.0, schedule.totalUs - double(m) * slowest);
  return schedule;
}

} // namespace zen::cost

//===- Pipeline.h - pipeline schedules and their simulation ------*- C++
//-*-===//
//
// The order in which each pipeline stage runs its micro-batches under
// Megatron-LM's 1F1B and interleaved schedules, and an event simulation of
// those orders over the stages' per-micro-batch costs: when every forward and
// backward step starts once the step it depends on has finished on the
// neighbouring stage. Pure C++: no IR.
//
//===----------------------------------------------------------------------===//
#ifndef ZEN_COSTMODEL_PIPELINE_H
#define ZEN_COSTMODEL_PIPELINE_H

#include "zen/CostModel/Transformer.h"

#include <cstdint>
#include <string>
#include <vector>

namespace zen::cost {

/// One forward or backward pass of one micro-batch through one virtual chunk
/// of a stage (chunk 0 without interleaving).
struct PipelineStep {
  bool backward = false;
  int64_t microBatch = 0;
  int64_t chunk = 0;
  /// "F<micro-batch>" / "B<micro-batch>", interleaved "F<micro-batch>.<chunk>".
  std::string name(int64_t virtualStages) const;
};

/// Stage `stage`'s steps in order under Megatron's schedules (SC21 section
/// 2.2): warm-up forwards, alternating forward/backward, cool-down backwards;
/// with V > 1 virtual stages, micro-batches go in groups of pp per chunk.
std::vector<PipelineStep> stageProgram(int64_t stage, int64_t pp,
                                       int64_t microBatches,
                                       int64_t virtualStages);

struct TimedStep {
  PipelineStep step;
  double startUs = 0, durationUs = 0;
};

/// Every stage's steps with their start times, from 0 (the first forward) to
/// `totalUs` (the last backward's end).
struct PipelineSchedule {
  std::vector<std::vector<TimedStep>> stages;
  double totalUs = 0;
  /// Idle time of the slowest stage: total − micro-batches × its
  /// per-micro-batch time.
  double bubbleUs = 0;
};

/// Runs the stages' programs against each other: a forward step waits for the
/// same micro-batch's forward on the previous virtual stage, a backward step
/// for its backward on the next one (the last virtual stage's for its own
/// forward), and each stage runs one step at a time in program order. A step
/// lasts its stage's forward (or backward) compute per chunk plus its share of
/// the stage's TP and ZeRO communication (split like the compute) and half of
/// its p2p time.
PipelineSchedule simulatePipeline(const std::vector<StageCost> &stages,
                                  int64_t microBatches, int64_t virtualStages);

} // namespace zen::cost

#endif // ZEN_COSTMODEL_PIPELINE_H

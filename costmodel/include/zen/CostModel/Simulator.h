//===- Simulator.h - discrete-event timeline simulator ----------*- C++ -*-===//
//
// Simulates one steady-state iteration: one compute stream, one or more
// communication streams, explicit dependencies, concurrent collectives sharing
// link bandwidth, and compute slowed while communication overlaps it.
// Every pass and `zenopt simulate` score schedules with it.
//
//===----------------------------------------------------------------------===//
#ifndef ZEN_COSTMODEL_SIMULATOR_H
#define ZEN_COSTMODEL_SIMULATOR_H

#include "zen/CostModel/CostModel.h"

#include <string>
#include <vector>

namespace zen::cost {

enum class TaskKind { Compute, Collective, Compression };

struct SimTask {
  std::string name;
  TaskKind kind = TaskKind::Compute;
  /// Compute and compression tasks run on the compute stream (stream 0 of
  /// compute); collectives on communication stream `stream` (0-based).
  int stream = 0;
  /// Duration for Compute/Compression tasks when run alone.
  double durationUs = 0;
  /// Collective tasks: what is sent; the simulator prices it with the cost model.
  CollectiveKind collective = CollectiveKind::AllReduce;
  double bytes = 0;
  Group group;
  int64_t chunks = 1;
  /// Lower issues first among ready tasks on the same stream.
  int64_t priority = 0;
  /// Indices of tasks that must finish first.
  std::vector<int> deps;
  /// Belongs to the next iteration's forward (decoupled all-gather overlap):
  /// counted in the timeline but shifted by one iteration when scoring.
  bool nextIteration = false;
};

struct SimResult {
  std::vector<double> startUs, endUs;   // per task
  double iterationUs = 0;               // steady-state iteration time
  double computeUs = 0;                 // compute stream busy time
  double exposedCommUs = 0;             // iterationUs - computeUs
};

/// Simulates `tasks` (indices are task ids; deps must point to other tasks).
/// Deterministic: the same tasks give the same result.
SimResult simulate(const CostModel &model, const std::vector<SimTask> &tasks);

} // namespace zen::cost

#endif // ZEN_COSTMODEL_SIMULATOR_H

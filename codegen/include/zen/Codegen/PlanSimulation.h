//===- PlanSimulation.h - score a plan file with the simulator --*- C++ -*-===//
//
// The plan's schedule is the simulator's task graph, one task for one task, so
// `zenopt simulate` re-scores a plan exactly as codegen scored it when it was
// written, on the plan's cluster or on another one.
//
//===----------------------------------------------------------------------===//
#ifndef ZEN_CODEGEN_PLANSIMULATION_H
#define ZEN_CODEGEN_PLANSIMULATION_H

#include "zen/CostModel/Simulator.h"
#include "zen/CostModel/Transformer.h"
#include "zenrt/Plan.h"

#include <vector>

namespace zen::codegen {

/// The group a plan's gradient collectives run over: the whole world for a
/// data-parallel plan, the placed data-parallel group of a large-model plan.
cost::Group dataParallelGroup(const zenrt::Plan &plan, const cost::CostModel &model);
/// The group `bucket`'s collectives run over: the data-parallel group, or for
/// an expert_replicas bucket the ranks holding the same experts
/// (cost::expertReplicaGroup at the plan's expert_parallel).
cost::Group bucketGroup(const zenrt::Plan &plan, const zenrt::Bucket &bucket,
                        const cost::CostModel &model);
/// The configuration a large-model plan's `parallel` section decides, as
/// zenrt::readParallelSection reads it (stage layers and the MoE layers' choices are not
/// in it).
cost::ParallelConfig parallelConfigOf(const zenrt::Plan &plan);

/// A row-sparse gradient's statistics as the plan file carries them, and back; a plan
/// without hash_skew prices hash partitions as even (1/8).
zenrt::SparseStatistics sparseStatisticsOf(const cost::SparsityStatistics &statistics);
cost::SparsityStatistics sparsityStatisticsOf(const zenrt::SparseStatistics &statistics);

/// One SimTask per schedule task, in schedule order (ids are positions); a
/// sparse_sync task is its sparse tensor's collective, priced by cost::sparseSyncCost.
/// Compute tasks keep their recorded duration on the plan's own cluster and are
/// re-costed from their FLOPs and bytes on another one: forward and backward
/// tasks at the plan's compute_dtype, optimizer steps at fp32.
std::vector<cost::SimTask> planToSimTasks(const zenrt::Plan &plan, const cost::CostModel &model);

/// Simulates `plan` on `model`, writes every task's start and duration and the
/// predictions (iteration, compute, exposed communication, lower bound:
/// CostModel::lowerBoundUs of the model's compute alone with the compressors
/// the plan's buckets run) back into the plan,
/// and returns the raw result.
cost::SimResult simulatePlan(zenrt::Plan &plan, const cost::CostModel &model);

} // namespace zen::codegen

#endif // ZEN_CODEGEN_PLANSIMULATION_H

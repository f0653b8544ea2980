//===- PlanSimulation.cpp - score a plan file with the simulator ----------===//
#include "zen/Codegen/PlanSimulation.h"

#include "zen/CostModel/Moe.h"
#include "zen/CostModel/Sparse.h"
#include "zen/CostModel/Transformer.h"

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace zen::codegen {
namespace {
/// The compressor a plan bucket runs (method None when uncompressed).
cost::CompressionSpec compressionOf(const zenrt::Bucket &bucket) {
  cost::CompressionSpec spec;
  spec.method = bucket.compression.method;
  spec.ratio = bucket.compression.ratio;
  spec.rank = bucket.compression.rank;
  spec.device = bucket.compression.device;
  spec.errorFeedback = bucket.compression.errorFeedback;
  return spec;
}
} // namespace

zenrt::SparseStatistics sparseStatisticsOf(const cost::SparsityStatistics &statistics) {
  zenrt::SparseStatistics out;
  out.density = statistics.density;
  out.gamma = statistics.gamma;
  out.skew = statistics.skew;
  out.source = cost::toString(statistics.source);
  out.hashSkew = statistics.hashSkew;
  out.blockDensity = statistics.blockDensity;
  out.blockGamma = statistics.blockGamma;
  return out;
}

cost::SparsityStatistics sparsityStatisticsOf(const zenrt::SparseStatistics &statistics) {
  cost::SparsityStatistics out;
  out.density = statistics.density;
  out.gamma = statistics.gamma;
  out.skew = statistics.skew;
  out.source = statistics.source == "measured" ? cost::SparsitySource::Measured
                                               : cost::SparsitySource::Model;
  if (statistics.hashSkew > 0)
    out.hashSkew = statistics.hashSkew;
  out.blockDensity = statistics.blockDensity;
  out.blockGamma = statistics.blockGamma;
  return out;
}

cost::ParallelConfig parallelConfigOf(const zenrt::Plan &plan) {
  // Plans reach here validated (read, or about to be written): a violation is ours.
  const zenrt::ParallelConfiguration read =
      zenrt::readParallelSection(plan.parallel, plan.model.name, zen::ErrorKind::Internal);
  cost::ParallelConfig config;
  config.tp = read.tp;
  config.pp = read.pp;
  config.dp = read.dp;
  config.zero = read.zero;
  config.sequenceParallel = read.sequenceParallel;
  config.recompute = read.recompute;
  config.microBatch = read.microBatch;
  config.microBatches = read.microBatches;
  config.virtualStages = read.virtualStages;
  config.decomposition = {read.chunks.attentionForward, read.chunks.attentionBackward,
                          read.chunks.mlpForward, read.chunks.mlpBackward};
  config.ep = std::max<int64_t>(read.ep, 1);
  return config;
}

cost::Group dataParallelGroup(const zenrt::Plan &plan, const cost::CostModel &model) {
  if (plan.parallel.empty())
    return model.groupOf(plan.cluster.worldSize);
  return cost::parallelGroups(parallelConfigOf(plan), model.cluster()).data;
}

cost::Group bucketGroup(const zenrt::Plan &plan, const zenrt::Bucket &bucket,
                        const cost::CostModel &model) {
  const cost::Group dp = dataParallelGroup(plan, model);
  return bucket.group == zenrt::BucketGroup::DataParallel
             ? dp
             : cost::expertReplicaGroup(zenrt::expertParallelOf(plan), dp);
}

std::vector<cost::SimTask> planToSimTasks(const zenrt::Plan &plan, const cost::CostModel &model) {
  if (plan.cluster.worldSize > model.cluster().worldSize())
    throw zenrt::PlanError(
        zen::ErrorKind::BadInput, fmt::format("/cluster/world_size: the plan needs {} ranks but cluster '{}' has {}",
                        plan.cluster.worldSize, model.cluster().name,
                        model.cluster().worldSize()));
  // On the plan's own cluster the recorded work is exact; elsewhere it is re-costed,
  // forward and backward at the plan's compute precision, optimizer steps at fp32.
  const bool sameCluster = model.cluster().name == plan.cluster.name;
  const cost::DType computeDtype = cost::parseDType(plan.computeDtype).value_or(cost::DType::F32);
  std::vector<size_t> collectivesSeen(plan.buckets.size(), 0);

  std::vector<cost::SimTask> tasks;
  tasks.reserve(plan.schedule.size());
  for (const zenrt::Task &task : plan.schedule) {
    cost::SimTask sim;
    sim.name = task.name;
    sim.stream = static_cast<int>(task.stream);
    sim.kind = task.kind;
    sim.nextIteration = task.phase == zenrt::Phase::NextForward;
    sim.priority = task.priority;
    for (int64_t dep : task.deps)
      sim.deps.push_back(static_cast<int>(dep));
    switch (task.kind) {
    case zenrt::TaskKind::Compute:
      sim.durationUs =
          sameCluster ? task.workUs
                      : model.computeUs(static_cast<double>(task.flops),
                                        static_cast<double>(task.bytes),
                                        task.phase == zenrt::Phase::Forward ||
                                                task.phase == zenrt::Phase::Backward
                                            ? computeDtype
                                            : cost::DType::F32);
      break;
    case zenrt::TaskKind::Compress:
    case zenrt::TaskKind::Decompress: {
      const zenrt::Bucket &bucket = plan.buckets.at(task.bucket);
      // CPU offload runs on the simulator's host compression worker, as planned.
      sim.device = bucket.compression.device;
      if (sameCluster) {
        sim.durationUs = task.workUs;
        break;
      }
      cost::CompressionSpec spec = compressionOf(bucket);
      // Gathered payloads: one decode consumes every rank's.
      const bool gathered = zenrt::syncSchemeOf(bucket) == zenrt::SyncScheme::AllGather;
      cost::CompressionCost cost = model.compression(
          spec, bucket.elements, gathered ? bucketGroup(plan, bucket, model).ranks : 1);
      sim.durationUs = task.kind == zenrt::TaskKind::Compress ? cost.encodeUs : cost.decodeUs;
      break;
    }
    case zenrt::TaskKind::SparseSync: {
      const zenrt::SparseTensor &table = plan.sparseTensors.at(task.sparseTensor);
      sim.sparse = std::make_shared<const cost::SparseSync>(
          cost::SparseSync{table.scheme, {table.rows, table.rowElements},
                           sparsityStatisticsOf(table.statistics)});
      sim.group = dataParallelGroup(plan, model);
      sim.bytes = sim.sparse->table.denseBytes();
      break;
    }
    case zenrt::TaskKind::Collective: {
      const zenrt::Bucket &bucket = plan.buckets.at(task.bucket);
      const bool first = collectivesSeen[task.bucket] == 0;
      const zenrt::Collective &collective = bucket.collectives.at(collectivesSeen[task.bucket]++);
      sim.collective = collective.op;
      sim.bytes = static_cast<double>(collective.bytes);
      sim.group = bucketGroup(plan, bucket, model);
      sim.chunks = collective.chunks;
      sim.stream = static_cast<int>(collective.stream);
      if (first)
        sim.executorUs = model.executorOverheadUs(bucket.elements, sim.group);
      if (bucket.compression.method != cost::CompressionMethod::None) {
        sim.compression = compressionOf(bucket);
        sim.scheme = zenrt::syncSchemeOf(bucket).value_or(zenrt::SyncScheme::AllReduce);
        sim.elements = bucket.elements;
      }
      break;
    }
    }
    tasks.push_back(std::move(sim));
  }
  return tasks;
}

namespace {
/// The gradient bytes one rank synchronises over the data-parallel group
/// (`experts` false) or over the expert replicas (true).
double gradientBytes(const zenrt::Plan &plan, bool experts) {
  double bytes = 0;
  for (const zenrt::TensorInfo &tensor : plan.tensors)
    if ((tensor.expertParallel > 1) == experts)
      bytes += static_cast<double>(tensor.elements * zenrt::dtypeBytes(tensor.dtype));
  return bytes;
}

/// The compressors the plan's buckets run, each once.
std::vector<cost::CompressionSpec> compressorsOf(const zenrt::Plan &plan) {
  std::vector<cost::CompressionSpec> compressors;
  for (const zenrt::Bucket &bucket : plan.buckets)
    if (bucket.compression.method != cost::CompressionMethod::None)
      compressors.push_back(compressionOf(bucket));
  return compressors;
}
} // namespace

cost::SimResult simulatePlan(zenrt::Plan &plan, const cost::CostModel &model) {
  std::vector<cost::SimTask> tasks = planToSimTasks(plan, model);
  cost::SimResult result = cost::simulate(model, tasks);
  if (!result.error.empty())
    throw zenrt::PlanError(zen::ErrorKind::BadInput, "/schedule: cannot be simulated: " + result.error);
  for (size_t i = 0; i < plan.schedule.size(); ++i) {
    zenrt::Task &task = plan.schedule[i];
    const cost::SimTask &sim = tasks[i];
    task.startUs = result.startUs[i];
    task.durationUs = result.endUs[i] - result.startUs[i];
    // Work is the task's time alone: what the simulator was given, or the
    // collective's uncontended time.
    task.workUs = vocab::communicates(sim.kind)
                      ? cost::collectiveCost(model, sim).timeUs + sim.executorUs
                      : sim.durationUs;
  }
  // The bound takes the model's compute alone: neither the slowdown overlap causes nor
  // compression kernels, which are costs of the plan, not of the model.
  double modelComputeUs = 0;
  for (const cost::SimTask &sim : tasks)
    if (sim.kind == cost::TaskKind::Compute)
      modelComputeUs += sim.durationUs;
  plan.cluster.name = model.cluster().name;
  plan.predictions.iterationUs = result.iterationUs;
  plan.predictions.computeUs = result.computeUs;
  plan.predictions.exposedCommUs = result.exposedCommUs;
  // The least any plan with the same compressors spends synchronising every
  // gradient byte over the plan's data-parallel group; with expert parallelism
  // the larger of that for the other gradients and for the experts' over
  // their replicas (each alone needs at least its own).
  const cost::Group group = dataParallelGroup(plan, model);
  const std::vector<cost::CompressionSpec> compressors = compressorsOf(plan);
  double commBoundUs = model.communicationBoundUs(gradientBytes(plan, false), group, compressors);
  if (const int64_t ep = zenrt::expertParallelOf(plan); ep > 1)
    commBoundUs = std::max(commBoundUs, model.communicationBoundUs(
                                            gradientBytes(plan, true),
                                            cost::expertReplicaGroup(ep, group), compressors));
  // Each row-sparse table is synchronised by its scheme whatever the buckets: its network
  // time adds to what they need.
  for (const zenrt::SparseTensor &table : plan.sparseTensors)
    commBoundUs += cost::sparseSyncCost(model, table.scheme, {table.rows, table.rowElements},
                                        sparsityStatisticsOf(table.statistics), group)
                       .communicationUs;
  plan.predictions.commBoundUs = commBoundUs;
  plan.predictions.lowerBoundUs = std::max(modelComputeUs, commBoundUs);
  return result;
}

} // namespace zen::codegen

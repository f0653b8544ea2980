//===- PlanEmitter.cpp - scheduled zen IR to a plan file ------------------===//
#include "zen/Codegen/PlanEmitter.h"

#include "zen/Codegen/ParallelPlan.h"
#include "zen/Codegen/PlanSimulation.h"
#include "zen/Codegen/SparsePlan.h"
#include "zen/Passes/LargeModel.h"
#include "zen/Passes/Moe.h"
#include "zen/Codegen/MoePlan.h"
#include "zen/Errors.h"
#include "zen/Analysis/IRPlan.h"

#include "mlir/IR/BuiltinAttributes.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <future>

namespace zen::codegen {
namespace {

std::string stringAttr(mlir::ModuleOp module, llvm::StringRef name, llvm::StringRef fallback) {
  if (auto attr = module->getAttrOfType<mlir::StringAttr>(name))
    return attr.str();
  return fallback.str();
}

/// The plan's sparse_tensors: each of the problem's row-sparse gradients with its scheme's
/// parameter, the statistics it was priced from and its price alone.
std::vector<zenrt::SparseTensor> sparseTensorsOf(const plan::Problem &problem,
                                                 const cost::CostModel &model) {
  std::vector<zenrt::SparseTensor> tensors;
  for (const plan::SparseGradientTask &table : problem.sparse) {
    const cost::SparseSync &sync = *table.sync;
    tensors.push_back(sparseTensorOf(
        table.name, sync.table, sync.statistics,
        cost::sparseSyncCost(model, sync.scheme, sync.table, sync.statistics, problem.group)));
  }
  return tensors;
}

} // namespace

std::optional<zenrt::Plan> lowerChoice(const plan::Problem &problem, const plan::PlanChoice &choice,
                                       const cost::CostModel &model, const PlanHeader &header,
                                       std::string &error) {
  const cost::Group group = problem.group;
  zenrt::Plan out;
  out.generator = {"zenopt", "0.1.0"};
  out.model = {header.modelName, header.modelHash};
  out.cluster.name = model.cluster().name;
  out.parallel = header.parallel;
  out.cluster.worldSize = header.parallel.empty() ? group.ranks : parallelConfigOf(out).gpus();
  out.cluster.spec = nlohmann::json::parse(cost::writeCluster(model.cluster())).dump();
  out.strategy = header.strategy;
  out.compressor = header.compressor.empty() ? "none" : header.compressor;
  out.computeDtype = cost::toString(problem.computeDtype);

  out.tensors.reserve(problem.gradients.size());
  out.buckets.reserve(choice.buckets.size());
  for (size_t i = 0; i < problem.gradients.size(); ++i) {
    const plan::GradientTensor &g = problem.gradients[i];
    out.tensors.push_back(
        {g.name, g.elements, "f32", g.readyOrder >= 0 ? g.readyOrder : int64_t(i), g.expertParallel});
  }
  for (size_t b = 0; b < choice.buckets.size(); ++b) {
    const plan::BucketChoice &choiceBucket = choice.buckets[b];
    zenrt::Bucket bucket;
    bucket.id = static_cast<int64_t>(b);
    bucket.tensors.reserve(choiceBucket.size());
    for (int g = choiceBucket.begin; g < choiceBucket.end; ++g) {
      const plan::GradientTensor &gradient = problem.gradients[g];
      bucket.tensors.push_back({gradient.name, bucket.elements, gradient.elements});
      bucket.elements += gradient.elements;
    }
    bucket.bytes = 4 * bucket.elements;
    bucket.group = choiceBucket.expertReplicas ? zenrt::BucketGroup::ExpertReplicas
                                               : zenrt::BucketGroup::DataParallel;
    const cost::CompressionSpec &spec = choiceBucket.compression;
    bucket.compression.method = spec.method;
    bucket.compression.ratio = vocab::takesRatio(spec.method) ? spec.ratio : 1.0;
    bucket.compression.rank = vocab::takesRank(spec.method) ? spec.rank : 0;
    bucket.compression.errorFeedback = vocab::wantsErrorFeedback(spec.method);
    bucket.compression.device = spec.device;
    out.buckets.push_back(std::move(bucket));
  }

  out.sparseTensors = sparseTensorsOf(problem, model);

  // The gradients each backward segment completes, in ready order.
  std::vector<std::vector<const plan::GradientTensor *>> completes(problem.backward.size());
  for (const plan::GradientTensor &g : problem.gradients)
    if (g.readyAfterSegment >= 0 && g.readyAfterSegment < static_cast<int>(completes.size()))
      completes[g.readyAfterSegment].push_back(&g);

  // The schedule is the simulator's task graph for this choice, task for task.
  std::vector<cost::SimTask> tasks = plan::buildSimTasks(problem, choice, model);
  // The planner's score of its task graph, for the check below: on a second thread while
  // this one writes the plan and rescores it.
  std::future<plan::Evaluation> planned =
      std::async(std::launch::async, [&] { return plan::evaluateTasks(tasks, model); });
  int forwardSegment = 0, backwardSegment = 0, sparseSync = 0, sparseOptimizer = 0;
  out.schedule.reserve(tasks.size());
  for (size_t i = 0; i < tasks.size(); ++i) {
    const cost::SimTask &sim = tasks[i];
    zenrt::Task task;
    task.id = static_cast<int64_t>(i);
    task.name = sim.name;
    task.bucket = sim.bucket;
    task.workUs = sim.durationUs;
    task.priority = sim.priority;
    for (int dep : sim.deps)
      task.deps.push_back(dep);
    task.kind = sim.kind;
    task.phase = sim.planPhase();
    switch (sim.kind) {
    case cost::TaskKind::Compute:
      if (sim.phase == cost::Phase::Backward) {
        task.flops = problem.backward.at(backwardSegment).flops;
        task.bytes = problem.backward.at(backwardSegment).bytes;
        for (const plan::GradientTensor *g : completes.at(backwardSegment))
          task.produces.push_back(g->name);
        ++backwardSegment;
      } else if (sim.phase == cost::Phase::Optimizer) {
        if (sim.bucket < 0) {  // a sparse gradient's step, after its synchronisation
          const zenrt::SparseTensor &table = out.sparseTensors.at(sparseOptimizer++);
          task.flops = plan::optimizerFlops(table.rows * table.rowElements);
          task.bytes = plan::optimizerBytes(table.rows * table.rowElements, 4);
          break;
        }
        const plan::BucketChoice &bucket = choice.buckets.at(sim.bucket);
        for (int g = bucket.begin; g < bucket.end; ++g) {
          task.flops += plan::optimizerFlops(problem.gradients[g].elements);
          task.bytes += plan::optimizerBytes(problem.gradients[g].elements, 4);
        }
      } else {
        task.flops = problem.forward.at(forwardSegment).flops;
        task.bytes = problem.forward.at(forwardSegment).bytes;
        ++forwardSegment;
      }
      task.bucket = -1; // compute tasks belong to no bucket, optimizer steps included
      break;
    case cost::TaskKind::Compress:
    case cost::TaskKind::Decompress:
      break;
    case cost::TaskKind::SparseSync:
      task.stream = sim.stream;
      task.sparseTensor = sparseSync++;
      break;
    case cost::TaskKind::Collective: {
      task.stream = sim.stream;
      if (task.bucket < 0 || task.bucket >= static_cast<int64_t>(out.buckets.size())) {
        error = "planner produced collective task '" + sim.name + "' without a valid bucket";
        return std::nullopt;
      }
      zenrt::Collective collective;
      collective.op = sim.collective;
      collective.algorithm = cost::toString(cost::collectiveCost(model, sim).algorithm);
      collective.chunks = sim.chunks;
      collective.stream = sim.stream;
      collective.priority = sim.priority;
      collective.decoupled = sim.nextIteration;
      collective.bytes = static_cast<int64_t>(sim.bytes);
      out.buckets[task.bucket].collectives.push_back(collective);
      break;
    }
    }
    out.schedule.push_back(std::move(task));
  }

  // The plan must score exactly as the planner scored its choice: the plan file
  // is what `zenopt simulate` and the runtime see.
  cost::SimResult rescored = simulatePlan(out, model);
  const double plannedUs = planned.get().iterationUs;
  if (rescored.iterationUs != plannedUs) {
    error = fmt::format("internal error: the plan scores {} us but the planner's choice {} us",
                        rescored.iterationUs, plannedUs);
    return std::nullopt;
  }
  return out;
}

void syncExpertsOverReplicas(zenrt::Plan &plan, const plan::GradientSync &sync, int64_t ep,
                             cost::Group dp, const cost::CostModel &model) {
  const plan::ExpertParallelSync split = plan::expertParallelSync(sync, ep, dp);
  std::string error;
  std::optional<zenrt::Plan> lowered = lowerChoice(
      split.problem, split.plan, model,
      {plan.model.name, plan.model.hash, plan.strategy, plan.compressor, plan.parallel}, error);
  if (!lowered)
    throw std::logic_error("the expert-parallel gradient sync cannot be lowered: " + error);
  plan.tensors = std::move(lowered->tensors);
  plan.buckets = std::move(lowered->buckets);
  plan.schedule = std::move(lowered->schedule);
  plan.predictions = lowered->predictions;
}

namespace {

/// emitPlan, and the data-parallel group the IR's collectives run over.
mlir::FailureOr<zenrt::Plan> emitDataParallelPlan(mlir::ModuleOp module, const cost::CostModel &model,
                                                  const std::string &compressor, cost::Group &group) {
  mlir::FailureOr<plan::TrainingFunction> training = plan::extractTraining(module, model);
  if (mlir::failed(training))
    return mlir::failure();
  mlir::FailureOr<std::optional<plan::PlanChoice>> read = plan::readPlan(*training, group);
  if (mlir::failed(read))
    return mlir::failure();
  if (!*read)
    return module.emitError("gradients are not synchronised: run zen-autotune (or the "
                            "planning passes) before emitting a plan");
  // The data-parallel group is the one the collectives in the IR run over.
  plan::Problem &problem = training->problem;
  problem.group = group;
  const plan::PlanChoice &choice = **read;

  std::string error;
  std::optional<zenrt::Plan> lowered =
      lowerChoice(problem, choice, model,
                  {stringAttr(module, "zen.model", "model"), stringAttr(module, "zen.model_hash", ""),
                   stringAttr(module, "zen.strategy", choice.strategy), compressor},
                  error);
  if (!lowered)
    return module.emitError(error);
  zenrt::Plan &out = *lowered;
  BaselineTable baselines = baselineTableOf(
      module->getAttrOfType<mlir::ArrayAttr>(ZenDialect::BaselinesAttrHelper::getNameStr()));
  out.baselines = std::move(baselines.iterationUs);
  out.baselinesUncompressed = std::move(baselines.uncompressedUs);

  // `out` refers into `lowered`: moved, a plan of 10 000 tensors is not copied.
  return std::move(out);
}

/// Adds the `moe` section of a module whose MoE layers zen-plan-moe planned in
/// data parallelism: the layers and their ep from the IR (#zen.moe_schedule),
/// what else the search found from zen.moe_search, the layers re-evaluated at
/// that ep over `group` (plan::evaluateMoe, as zen-plan-moe evaluated them).
mlir::LogicalResult attachMoeFromModule(mlir::ModuleOp module, zenrt::Plan &plan,
                                        const std::vector<MoeLayerOps> &layers, cost::Group group,
                                        const cost::CostModel &model, const std::string &compressor,
                                        std::optional<cost::MemoryBreakdown> *moeMemory) {
  auto search = module->getAttrOfType<MoeSearchAttr>(ZenDialect::MoeSearchAttrHelper::getNameStr());
  if (!search)
    return module.emitError("MoE layers without zen-plan-moe's zen.moe_search: run zen-plan-moe "
                            "before emitting a plan");
  std::vector<plan::MoeLayer> shapes;
  std::optional<MoeScheduleAttr> schedule;
  for (const MoeLayerOps &ops : layers) {
    shapes.push_back(ops.layer);
    auto recorded = ops.dispatch->getAttrOfType<MoeScheduleAttr>("schedule");
    if (!recorded || (schedule && recorded.getEp() != schedule->getEp()))
      return ops.dispatch->emitError("every MoE layer needs zen-plan-moe's schedule, with one ep");
    schedule = recorded;
  }
  std::string error;
  std::optional<std::vector<cost::CompressionSpec>> compressors = plan::parseCompressors(compressor, error);
  if (!compressors)
    return module.emitError("zen.compressor: ") << error;
  const double imbalance = search.getImbalance().getValueAsDouble();
  mlir::FailureOr<plan::MoeRequest> request =
      moeRequestOf(module, shapes, model, group, schedule->getEp(), imbalance, *compressors);
  if (mlir::failed(request))
    return mlir::failure();
  plan::MoePlan planned;
  try {
    planned.chosen = plan::evaluateMoe(shapes, schedule->getEp(), model, *request);
  } catch (const zen::Error &problem) {
    return module.emitError(problem.what());
  }
  for (size_t l = 0; l < layers.size(); ++l) {
    auto recorded = layers[l].dispatch->getAttrOfType<MoeScheduleAttr>("schedule");
    if (recorded != moeScheduleAttr(module.getContext(), planned.chosen.ep,
                                    planned.chosen.best.layers[l].choice))
      return layers[l].dispatch->emitError("the MoE schedule is not the one zen-plan-moe chooses at ep ")
             << planned.chosen.ep << "; plan the module again";
  }
  auto byEp = [](mlir::DictionaryAttr entries, std::map<int64_t, double> &out) {
    for (mlir::NamedAttribute entry : entries) {
      int64_t ep = 0;
      entry.getName().getValue().getAsInteger(10, ep);  // verified
      out[ep] = mlir::cast<mlir::FloatAttr>(entry.getValue()).getValueAsDouble();
    }
  };
  byEp(search.getSearched(), planned.searched);
  byEp(search.getNotFitting(), planned.notFitting);
  try {
    attachMoe(plan, shapes, planned, *request, model);
    // The runtime runs the sync the MoE section's iteration was simulated with.
    if (planned.chosen.ep > 1 && request->sync)
      syncExpertsOverReplicas(plan, *request->sync, planned.chosen.ep, request->dp, model);
  } catch (const std::logic_error &problem) {
    return module.emitError(problem.what());
  }
  // Baselines zenopt compared like with like (zen.moe_search) are reported as compared.
  if (mlir::ArrayAttr recorded = search.getBaselines()) {
    BaselineTable compared = baselineTableOf(recorded);
    for (const auto &[name, us] : compared.iterationUs)
      plan.baselines[name] = us;
    plan.baselinesUncompressed = std::move(compared.uncompressedUs);
  }
  if (moeMemory)
    *moeMemory = plan::moeModelMemory(planned.chosen, *request);
  return mlir::success();
}

} // namespace

mlir::FailureOr<zenrt::Plan> emitPlan(mlir::ModuleOp module, const cost::CostModel &model,
                                      const std::string &compressor) {
  cost::Group group;
  return emitDataParallelPlan(module, model, compressor, group);
}

mlir::FailureOr<zenrt::Plan> emitModulePlan(mlir::ModuleOp module, const cost::CostModel &model,
                                            std::optional<cost::MemoryBreakdown> *moeMemory) {
  if (hasParallelDecision(module))
    return emitParallelPlan(module, model);
  std::string compressor;
  if (auto recorded = module->getAttrOfType<mlir::StringAttr>(ZenDialect::CompressorAttrHelper::getNameStr()))
    compressor = recorded.str();
  cost::Group group;
  mlir::FailureOr<zenrt::Plan> plan = emitDataParallelPlan(module, model, compressor, group);
  if (mlir::failed(plan))
    return mlir::failure();
  std::string error;
  std::optional<std::vector<MoeLayerOps>> layers = collectMoeLayers(module, error);
  if (!layers)
    return module.emitError(error);
  if (!layers->empty() &&
      mlir::failed(attachMoeFromModule(module, *plan, *layers, group, model, compressor, moeMemory)))
    return mlir::failure();
  return plan;
}

mlir::FailureOr<zenrt::Plan> emitParallelPlan(mlir::ModuleOp module, const cost::CostModel &model) {
  mlir::FailureOr<ParallelDecision> decision = readParallelDecision(module);
  if (mlir::failed(decision))
    return mlir::failure();
  std::string error;
  std::optional<std::vector<cost::CompressionSpec>> compressors =
      plan::parseCompressors(decision->compressor, error);
  if (!compressors)
    return module.emitError("zen.parallel_search compressor: ") << error;
  plan::AutotuneOptions sync;
  sync.compressors = std::move(*compressors);
  // The search scored its finalists the same way: the chosen one re-scores exactly.
  const plan::ParallelEvaluation chosen =
      plan::scoreWithSync(decision->shape, decision->config, decision->setup, model, sync);
  plan::ExpertParallelSync stageSync;
  try {
    stageSync = plan::stageSyncSchedule(chosen, decision->setup, model);
  } catch (const std::logic_error &problem) {
    return module.emitError(problem.what());
  }
  plan::PlanChoice &choice = stageSync.plan;
  choice.strategy = decision->forced ? "manual" : "auto";
  std::optional<zenrt::Plan> plan = lowerChoice(
      stageSync.problem, choice, model,
      {stringAttr(module, "zen.model", "model"), stringAttr(module, "zen.model_hash", ""),
       choice.strategy, decision->compressor,
       nlohmann::json(parallelSection(decision->shape, decision->setup, chosen,
                                      decision->configurationsScored, decision->baselines.iterationUs,
                                      decision->baselines.notFitting,
                                      decision->baselines.configurations))
           .dump()},
      error);
  if (!plan)
    return module.emitError(error);
  plan->baselines = decision->baselines.iterationUs;
  return std::move(*plan);
}

} // namespace zen::codegen

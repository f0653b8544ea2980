//===- Moe.cpp - expert parallelism and MoE pipelining decisions ----------===//
#include "zen/Planner/Moe.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>
#include <future>
#include <limits>
#include <numeric>
#include <utility>
#include <stdexcept>

namespace zen::plan {
namespace {

using cost::AllToAllAlgorithm;
using cost::MoeLayerChoice;

constexpr AllToAllAlgorithm kAlgorithms[] = {AllToAllAlgorithm::Flat,
                                             AllToAllAlgorithm::Hierarchical};

/// Prices layers under one ep.
struct LayerPricer {
  const cost::CostModel &model;
  const MoeRequest &request;
  int64_t ep;

  double phaseUs(const MoeLayer &layer, int64_t chunks, AllToAllAlgorithm algorithm,
                 cost::CompressionMethod tokens, bool backward) const {
    return cost::moePhaseUs(model, layer.shape, ep, request.dp, chunks, algorithm, backward,
                            request.imbalance, request.setup.computeDtype, tokens);
  }
  MoeLayerTime time(const MoeLayer &layer, const MoeLayerChoice &choice) const {
    return {choice, phaseUs(layer, choice.forward, choice.algorithm, choice.tokens, false),
            phaseUs(layer, choice.backward, choice.algorithm, choice.tokens, true)};
  }
  /// auto: each phase's fastest degree under each algorithm and allowed token
  /// compression, the fastest pair (cost::fastestMoePhases).
  MoeLayerTime best(const MoeLayer &layer) const {
    const cost::MoePhasesChoice best =
        cost::fastestMoePhases(model, layer.shape, ep, request.dp, request.imbalance,
                               request.setup.computeDtype, request.compressors);
    return {best.choice, best.forwardUs, best.backwardUs};
  }
  /// PipeMoE's rule: the time of each stage linear in its size, fitted through
  /// the whole and an eighth of the buffer (flat all-to-all, forward), no
  /// overlap slowdown; the degree minimising that model's pipeline.
  int64_t linearModelDegree(const MoeLayer &layer) const {
    const cost::MoeShape &shape = layer.shape;
    const cost::DType dtype = request.setup.computeDtype;
    const double rows = double(ep) * cost::busiestExpertRows(shape, request.imbalance);
    const double bytes = cost::dispatchBytes(shape, dtype);
    auto line = [](const std::function<double(double)> &f, double whole) {
      const double small = f(whole / 8), large = f(whole);
      const double slope = (large - small) / (whole - whole / 8);
      return [=](double x) { return small + slope * (x - whole / 8); };
    };
    auto compute = line(
        [&](double x) {
          return cost::expertForwardUs(model, shape, x, shape.experts / ep, dtype);
        },
        rows);
    auto comm = line(
        [&](double x) {
          return cost::allToAllCost(model, x, cost::expertGroup(ep, request.dp),
                                    AllToAllAlgorithm::Flat)
              .timeUs;
        },
        bytes);
    std::pair<int64_t, double> best{1, 0};
    for (int64_t r : moeDegrees(shape)) {
      const double us = cost::chunkPipelineUs(compute(rows / double(r)),
                                              2 * comm(bytes / double(r)), r, 1.0);
      if (r == 1 || us < best.second)
        best = {r, us};
    }
    return best.first;
  }
};

MoeStrategy strategyOf(const std::vector<MoeLayer> &layers,
                       const std::function<MoeLayerTime(const MoeLayer &)> &rule) {
  MoeStrategy strategy;
  for (const MoeLayer &layer : layers) {
    strategy.layers.push_back(rule(layer));
    strategy.moeUs += strategy.layers.back().forwardUs + strategy.layers.back().backwardUs;
  }
  return strategy;
}

/// The expert gradients' all-reduce over their replicas, every layer in turn.
double expertSyncUs(const std::vector<MoeLayer> &layers, int64_t ep,
                    const cost::CostModel &model, cost::Group dp) {
  double us = 0;
  for (const MoeLayer &layer : layers) {
    // Gradients stay fp32 on the wire (zenrt's buckets).
    const double bytes = double(layer.shape.experts / ep) * layer.shape.expertParams() * 4.0;
    const cost::Group replicas = cost::expertReplicaGroup(ep, dp);
    if (replicas.ranks > 1)
      us += model.collective(cost::CollectiveKind::AllReduce, bytes, replicas).timeUs;
  }
  return us;
}

/// expertParallelSyncUs' tasks: buildSimTasks' of expertParallelSync. The
/// compute segments stay tasks 0 .. forward + backward - 1.
std::vector<cost::SimTask> expertSyncTasks(const GradientSync &sync, int64_t ep, cost::Group dp,
                                           const cost::CostModel &model) {
  const ExpertParallelSync split = expertParallelSync(sync, ep, dp);
  return buildSimTasks(split.problem, split.plan, model);
}

double simulatedUs(const std::vector<cost::SimTask> &tasks, const cost::CostModel &model) {
  const cost::SimResult result = cost::simulate(model, tasks);
  if (!result.error.empty())
    throw std::logic_error("the gradient schedule cannot be simulated: " + result.error);
  return result.iterationUs;
}

/// A priority ahead of every gradient collective's (theirs are not negative).
constexpr int64_t kAheadOfGradients = std::numeric_limits<int64_t>::min() / 2;

/// moeScheduleTasks on `tasks`, expertSyncTasks' schedule at `ep`: the layers'
/// pieces put in it, named when `named` (the co-scheduling's trials only simulate them: a
/// name is a string built per piece per trial).
std::vector<cost::SimTask> withMoePieces(std::vector<cost::SimTask> tasks,
                                         const GradientSync &sync,
                                         const std::vector<MoeLayer> &layers,
                                         const std::vector<MoeLayerTime> &choices, int64_t ep,
                                         const MoeRequest &request, const cost::CostModel &model,
                                         bool named = true) {
  if (sync.sites.size() != layers.size() || choices.size() != layers.size())
    throw std::logic_error("the MoE layers' sites and choices must parallel the layers");
  const int forwardCount = int(sync.problem.forward.size());
  const int segments = forwardCount + int(sync.problem.backward.size());
  int ownStream = 0;
  for (const cost::SimTask &task : tasks)
    if (vocab::communicates(task.kind))
      ownStream = std::max(ownStream, task.stream + 1);

  for (size_t l = 0; l < layers.size(); ++l) {
    const MoeLayerSite &site = sync.sites[l];
    const cost::MoeLayerChoice &choice = choices[l].choice;
    for (bool backward : {false, true}) {
      const int segment = backward ? forwardCount + site.backwardSegment : site.forwardSegment;
      if ((backward ? site.backwardSegment : site.forwardSegment) < 0 || segment >= segments)
        throw std::logic_error(layers[l].name + ": the experts sit in no compute segment");
      const cost::MoePieces pieces = cost::moePhasePieces(
          model, layers[l].shape, ep, request.dp, backward ? choice.backward : choice.forward,
          choice.algorithm, backward, request.imbalance, request.setup.computeDtype,
          choice.tokens);
      cost::SimTask &host = tasks[size_t(segment)];
      host.durationUs = std::max(0.0, host.durationUs - (backward ? site.backwardUs : site.forwardUs));
      const int64_t computePriority = host.priority;

      // Forward pieces take over what the segment waited for and it waits for
      // them; backward pieces wait for the segment and what waited for it
      // waits for them.
      std::vector<int> pieceDeps;
      if (backward)
        pieceDeps = {segment};
      else
        pieceDeps = std::exchange(host.deps, {});
      const int first = int(tasks.size());
      const std::string prefix =
          named ? "moe." + layers[l].name + (backward ? ".bwd." : ".fwd.") : std::string();
      const bool serial = choice.sync == cost::GradientSyncMode::Serial;
      auto allToAll = [&](const char *what, int64_t i, int64_t order, std::vector<int> deps) {
        cost::SimTask task;
        if (named)
          task.name = prefix + what + std::to_string(i);
        task.kind = cost::TaskKind::Collective;
        task.phase = backward ? cost::Phase::Backward : cost::Phase::Forward;
        task.moeLayer = int64_t(l);
        task.collective = cost::CollectiveKind::AllToAll;
        task.bytes = pieces.bytes;
        task.group = pieces.group;
        task.algorithm = pieces.algorithm;
        task.stream = serial ? 0 : ownStream;
        task.priority = (serial ? kAheadOfGradients : 0) + order;
        task.deps = std::move(deps);
        tasks.push_back(std::move(task));
        return int(tasks.size()) - 1;
      };
      std::vector<int> combines;
      for (int64_t i = 0; i < pieces.chunks; ++i) {
        const int dispatch = allToAll("dispatch", i, 2 * i, pieceDeps);
        cost::SimTask experts;
        if (named)
          experts.name = prefix + "experts" + std::to_string(i);
        experts.phase = backward ? cost::Phase::Backward : cost::Phase::Forward;
        experts.moeLayer = int64_t(l);
        experts.durationUs = pieces.computeUs;
        experts.priority = computePriority;
        experts.deps = {dispatch};
        tasks.push_back(std::move(experts));
        combines.push_back(allToAll("combine", i, 2 * i + 1, {int(tasks.size()) - 1}));
      }
      if (!backward) {
        tasks[size_t(segment)].deps = combines;
        continue;
      }
      for (int t = 0; t < first; ++t) {
        std::vector<int> &deps = tasks[size_t(t)].deps;
        auto found = std::find(deps.begin(), deps.end(), segment);
        if (found == deps.end())
          continue;
        deps.erase(found);
        deps.insert(deps.end(), combines.begin(), combines.end());
      }
    }
  }
  return tasks;
}

/// The least relative gain for which co-scheduling changes a layer's choice.
constexpr double kCoScheduleGain = 1e-4;

/// Places `eval`'s strategies in the request's schedule (request.sync, whose
/// expertSyncTasks at eval.ep are `expertSync`, built once for every trial): each
/// baseline's iteration as it is; auto becomes the fastest of its own choices
/// and every baseline's (its own on ties), then each layer in turn tries, one
/// change at a time, every forward and backward degree, the other all-to-all
/// algorithm and taking turns with the gradient sync, keeping a change where
/// the co-scheduled iteration is faster by more than kCoScheduleGain (the
/// phases alone cannot see the gradient sync competing for the links; smaller
/// differences are below what the model resolves and would only churn the
/// decisions).
void coSchedule(MoeEvaluation &eval, const std::vector<MoeLayer> &layers,
                const MoeRequest &request, const LayerPricer &pricer,
                const std::vector<cost::SimTask> &expertSync, const cost::CostModel &model) {
  // The trials copy the schedule's tasks: without their names, no string is copied.
  std::vector<cost::SimTask> unnamed = expertSync;
  for (cost::SimTask &task : unnamed)
    task.name = std::string();
  auto iterationUs = [&](const MoeStrategy &strategy) {
    return simulatedUs(withMoePieces(unnamed, *request.sync, layers, strategy.layers, eval.ep,
                                     request, model, /*named=*/false),
                       model);
  };
  eval.best.iterationUs = iterationUs(eval.best);
  for (const std::string &name : moeBaselineNames()) {
    MoeStrategy &baseline = eval.baselines.at(name);
    baseline.iterationUs = iterationUs(baseline);
    if (baseline.iterationUs < eval.best.iterationUs)
      eval.best = baseline;
  }
  // Without all-to-alls there is nothing to co-schedule.
  if (eval.ep == 1)
    return;
  MoeStrategy &best = eval.best;
  for (size_t l = 0; l < layers.size(); ++l) {
    auto tryChoice = [&](MoeLayerChoice choice) {
      const MoeLayerTime kept = best.layers[l];
      best.layers[l] = pricer.time(layers[l], choice);
      const double us = iterationUs(best);
      if (us < best.iterationUs * (1 - kCoScheduleGain)) {
        best.moeUs += best.layers[l].forwardUs + best.layers[l].backwardUs - kept.forwardUs -
                      kept.backwardUs;
        best.iterationUs = us;
      } else {
        best.layers[l] = kept;
      }
    };
    for (int64_t r : moeDegrees(layers[l].shape)) {
      MoeLayerChoice choice = best.layers[l].choice;
      if (choice.forward != r) {
        choice.forward = r;
        tryChoice(choice);
      }
      choice = best.layers[l].choice;
      if (choice.backward != r) {
        choice.backward = r;
        tryChoice(choice);
      }
    }
    MoeLayerChoice other = best.layers[l].choice;
    other.algorithm = other.algorithm == AllToAllAlgorithm::Flat ? AllToAllAlgorithm::Hierarchical
                                                                  : AllToAllAlgorithm::Flat;
    if (cost::collectiveAlgorithm(other.algorithm, cost::expertGroup(eval.ep, request.dp)) !=
        cost::collectiveAlgorithm(best.layers[l].choice.algorithm,
                                  cost::expertGroup(eval.ep, request.dp)))
      tryChoice(other);
    MoeLayerChoice turns = best.layers[l].choice;
    turns.sync = turns.sync == cost::GradientSyncMode::Concurrent
                     ? cost::GradientSyncMode::Serial
                     : cost::GradientSyncMode::Concurrent;
    tryChoice(turns);
  }
}

} // namespace

ExpertParallelSync expertParallelSync(const GradientSync &sync, int64_t ep, cost::Group dp) {
  const Problem &problem = sync.problem;
  if (sync.expert.size() != problem.gradients.size())
    throw std::logic_error("the expert flags must parallel the gradients");
  ExpertParallelSync split{problem, sync.plan};
  if (ep <= 1)
    return split;
  split.problem.expertReplicas = cost::expertReplicaGroup(ep, dp);
  split.problem.gradients.clear();
  split.plan.buckets.clear();
  // Each bucket's gradients in ready order, its other gradients first; a
  // bucket of both kinds becomes two with its settings, issued one after
  // the other where it was.
  for (const BucketChoice &bucket : sync.plan.buckets)
    for (bool experts : {false, true}) {
      BucketChoice part = bucket;
      part.begin = int(split.problem.gradients.size());
      part.expertReplicas = experts;
      for (int g = bucket.begin; g < bucket.end; ++g) {
        if (sync.expert[size_t(g)] != experts)
          continue;
        GradientTensor gradient = problem.gradients[size_t(g)];
        gradient.readyOrder = g;
        if (experts) {
          // One rank holds experts / ep of every expert tensor [experts, ...].
          if (gradient.elements % ep != 0)
            throw std::logic_error("expert gradient '" + gradient.name + "' of " +
                                   std::to_string(gradient.elements) +
                                   " elements does not divide by ep " + std::to_string(ep));
          gradient.expertParallel = ep;
          gradient.elements /= ep;
          gradient.bytes /= ep;
          gradient.optimizerUs /= double(ep);
        }
        split.problem.gradients.push_back(std::move(gradient));
      }
      part.end = int(split.problem.gradients.size());
      if (part.end > part.begin)
        split.plan.buckets.push_back(part);
    }
  return split;
}

double expertParallelSyncUs(const GradientSync &sync, int64_t ep, cost::Group dp,
                            const cost::CostModel &model) {
  return simulatedUs(expertSyncTasks(sync, ep, dp, model), model);
}

std::vector<cost::SimTask> moeScheduleTasks(const GradientSync &sync,
                                            const std::vector<MoeLayer> &layers,
                                            const std::vector<MoeLayerTime> &choices, int64_t ep,
                                            const MoeRequest &request,
                                            const cost::CostModel &model) {
  return withMoePieces(expertSyncTasks(sync, ep, request.dp, model), sync, layers, choices, ep,
                       request, model);
}

double moeScheduleUs(const GradientSync &sync, const std::vector<MoeLayer> &layers,
                     const std::vector<MoeLayerTime> &choices, int64_t ep,
                     const MoeRequest &request, const cost::CostModel &model) {
  return simulatedUs(moeScheduleTasks(sync, layers, choices, ep, request, model), model);
}

const std::vector<std::string> &moeBaselineNames() {
  static const std::vector<std::string> names = {"moe-nopipe", "tutel", "pipemoe"};
  return names;
}

std::string checkMoeParallel(const std::vector<MoeLayer> &layers, int64_t ep,
                             const MoeRequest &request) {
  for (const MoeLayer &layer : layers)
    if (std::string problem = cost::checkExpertParallel(layer.shape, ep, request.dp.ranks);
        !problem.empty())
      return layer.name + ": " + problem;
  return cost::checkExpertPlacement(ep, request.dp);
}

namespace {

/// `ep` evaluated for its memory alone (one rank's experts of every layer), which does not
/// depend on the schedule: what decides whether the ep is scheduled at all.
MoeEvaluation memoryAt(const std::vector<MoeLayer> &layers, int64_t ep,
                       const MoeRequest &request) {
  MoeEvaluation eval;
  eval.ep = ep;
  cost::MoeMemory &memory = eval.memory;
  for (const MoeLayer &layer : layers) {
    cost::MoeMemory one = cost::moeMemoryPerGpu(layer.shape, 1, ep, request.dp.ranks, 0, 1.0,
                                                request.setup);
    memory.weightsBytes += one.weightsBytes;
    memory.gradientsBytes += one.gradientsBytes;
    memory.optimizerBytes += one.optimizerBytes;
    memory.activationsBytes += one.activationsBytes;
    // The layers run one at a time and reuse one pair of buffers.
    memory.buffersBytes = std::max(memory.buffersBytes, one.buffersBytes);
  }
  return eval;
}

} // namespace

MoeEvaluation evaluateMoe(const std::vector<MoeLayer> &layers, int64_t ep,
                          const cost::CostModel &model, const MoeRequest &request) {
  const LayerPricer pricer{model, request, ep};
  MoeEvaluation eval;
  eval.ep = ep;
  eval.best = strategyOf(layers, [&](const MoeLayer &layer) { return pricer.best(layer); });
  eval.baselines["moe-nopipe"] = strategyOf(layers, [&](const MoeLayer &layer) {
    return pricer.time(layer, MoeLayerChoice{});
  });
  std::optional<MoeStrategy> tutel;
  for (int64_t r : {1, 2, 4, 8}) {
    if (std::any_of(layers.begin(), layers.end(),
                    [&](const MoeLayer &layer) { return layer.shape.capacity() % r != 0; }))
      continue;
    for (AllToAllAlgorithm algorithm : kAlgorithms) {
      MoeStrategy candidate = strategyOf(layers, [&](const MoeLayer &layer) {
        return pricer.time(layer, MoeLayerChoice{r, r, algorithm});
      });
      if (!tutel || candidate.moeUs < tutel->moeUs)
        tutel = std::move(candidate);
    }
  }
  eval.baselines["tutel"] = *tutel;
  eval.baselines["pipemoe"] = strategyOf(layers, [&](const MoeLayer &layer) {
    const int64_t r = pricer.linearModelDegree(layer);
    return pricer.time(layer, MoeLayerChoice{r, r, AllToAllAlgorithm::Flat});
  });

  eval.expertSyncUs = expertSyncUs(layers, ep, model, request.dp);
  if (request.sync) {
    const GradientSync &sync = *request.sync;
    if (sync.sites.size() != layers.size())
      throw std::logic_error("the schedule's MoE sites must parallel the layers");
    for (const MoeLayerSite &site : sync.sites)
      eval.localUs += site.forwardUs + site.backwardUs;
    eval.scheduled = true;
    eval.scheduleUs = expertParallelSyncUs(sync, 1, request.dp, model);
    const std::vector<cost::SimTask> expertSync = expertSyncTasks(sync, ep, request.dp, model);
    if (ep > 1)
      eval.syncSavingUs = eval.scheduleUs - simulatedUs(expertSync, model);
    coSchedule(eval, layers, request, pricer, expertSync, model);
  } else {
    const LayerPricer local{model, request, 1};
    eval.localUs = strategyOf(layers, [&](const MoeLayer &layer) {
                     return local.time(layer, MoeLayerChoice{});
                   }).moeUs;
  }

  eval.memory = memoryAt(layers, ep, request).memory;
  return eval;
}

cost::MemoryBreakdown moeModelMemory(const MoeEvaluation &eval, const MoeRequest &request) {
  return cost::withMoeMemory(request.dense, eval.memory);
}

namespace {

/// Why `eval`'s ep does not fit, with where the bytes go.
std::string memoryText(const MoeEvaluation &eval, const MoeRequest &request) {
  const cost::MemoryBreakdown total = moeModelMemory(eval, request);
  const cost::MoeMemory &experts = eval.memory;
  const cost::MemoryBreakdown &dense = request.dense;
  return fmt::format(
      "ep {} needs {:.1f} GB per GPU of {:.1f} GB: experts {:.1f} (weights, gradients and "
      "optimizer state {:.1f}, activations {:.1f}, dispatch buffers {:.1f}), the other "
      "parameters {:.1f}, the other activations {:.1f}, reserve {:.1f}",
      eval.ep, total.perGpuBytes() / 1e9, total.capacityBytes / 1e9,
      (experts.weightsBytes + experts.gradientsBytes + experts.optimizerBytes +
       experts.activationsBytes + experts.buffersBytes) / 1e9,
      (experts.weightsBytes + experts.gradientsBytes + experts.optimizerBytes) / 1e9,
      experts.activationsBytes / 1e9, experts.buffersBytes / 1e9,
      (dense.weightsBytes + dense.gradientsBytes + dense.optimizerBytes) / 1e9,
      dense.activationsBytes / 1e9, total.reserveBytes / 1e9);
}

} // namespace

MoePlan planMoe(const std::vector<MoeLayer> &layers, const cost::CostModel &model,
                const MoeRequest &request) {
  if (layers.empty())
    throw zen::Error(zen::ErrorKind::BadInput, "the model has no MoE layers");
  if (!std::isfinite(request.imbalance) || request.imbalance < 1)
    throw zen::Error(zen::ErrorKind::BadUsage, "the MoE imbalance factor must be finite and at least 1");
  if (request.ep) {
    if (std::string problem = checkMoeParallel(layers, *request.ep, request); !problem.empty())
      throw zen::Error(zen::ErrorKind::BadInput, problem);
    const MoeEvaluation memoryOnly = memoryAt(layers, *request.ep, request);
    if (!moeModelMemory(memoryOnly, request).fits())
      throw zen::Error(zen::ErrorKind::BadInput, memoryText(memoryOnly, request));
    MoePlan plan{evaluateMoe(layers, *request.ep, model, request), {}, {}};
    plan.searched[*request.ep] = plan.chosen.extraUs(plan.chosen.best);
    return plan;
  }
  int64_t experts = 0;
  for (const MoeLayer &layer : layers)
    experts = std::gcd(experts, layer.shape.experts);
  // An ep whose memory does not fit is not scheduled.
  std::vector<int64_t> fitting;
  std::optional<MoeEvaluation> leastMemory;
  std::map<int64_t, double> searched, notFitting;
  for (int64_t ep = 1; ep <= experts; ++ep) {
    if (experts % ep != 0 || !checkMoeParallel(layers, ep, request).empty())
      continue;
    MoeEvaluation memoryOnly = memoryAt(layers, ep, request);
    const cost::MemoryBreakdown memory = moeModelMemory(memoryOnly, request);
    if (memory.fits()) {
      fitting.push_back(ep);
      continue;
    }
    notFitting[ep] = memory.perGpuBytes();
    if (!leastMemory || memory.perGpuBytes() < notFitting[leastMemory->ep])
      leastMemory = std::move(memoryOnly);
  }
  // Each ep is evaluated on its own (the co-scheduling simulates the whole iteration for
  // every trial): a second thread takes every other one. The choice below reads them in
  // ep order, whichever thread evaluated which.
  std::vector<std::optional<MoeEvaluation>> evaluations(fitting.size());
  std::atomic<size_t> next{0};
  auto evaluateFitting = [&] {
    for (size_t i; (i = next.fetch_add(1)) < fitting.size();)
      evaluations[i] = evaluateMoe(layers, fitting[i], model, request);
  };
  std::future<void> helper = std::async(std::launch::async, evaluateFitting);
  evaluateFitting();
  helper.get();

  std::optional<MoePlan> plan;
  for (size_t i = 0; i < fitting.size(); ++i) {
    const int64_t ep = fitting[i];
    MoeEvaluation eval = std::move(*evaluations[i]);
    searched[ep] = eval.extraUs(eval.best);
    if (!plan || searched[ep] < plan->chosen.extraUs(plan->chosen.best))
      plan = MoePlan{std::move(eval), {}, {}};
  }
  if (!plan && leastMemory)
    throw zen::Error(zen::ErrorKind::BadInput, "no expert-parallel degree fits in memory; the smallest: " +
                                memoryText(*leastMemory, request));
  if (!plan) // ep 1 fits every dp group: only a malformed layer gets here
    throw zen::Error(zen::ErrorKind::BadInput, checkMoeParallel(layers, 1, request));
  plan->searched = std::move(searched);
  plan->notFitting = std::move(notFitting);
  return *plan;
}

} // namespace zen::plan

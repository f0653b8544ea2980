//===- MoePlan.cpp - the plan file's MoE section --------------------------===//
#include "zen/Codegen/MoePlan.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <set>
#include <stdexcept>
#include <string>

namespace zen::codegen {

using nlohmann::ordered_json;

namespace {

ordered_json choiceJson(const plan::MoeLayerTime &time) {
  return {{"forward", time.choice.forward},
          {"backward", time.choice.backward},
          {"all_to_all", cost::toString(time.choice.algorithm)},
          {"token_compression", cost::toString(time.choice.tokens)},
          {"gradient_sync", cost::toString(time.choice.sync)},
          {"forward_us", time.forwardUs},
          {"backward_us", time.backwardUs}};
}

/// auto's co-scheduled iteration as the simulator runs it: per task its name
/// (shown, never read), kind, phase, track ("compute", "host cpu", "comm stream K",
/// or "moe all-to-all" for a stream only MoE layers use), a compression's device, a
/// collective's stream, an MoE piece's layer or another task's index in the
/// schedule, start and duration (docs/plan-format.md "moe").
ordered_json coScheduledTimeline(const std::vector<plan::MoeLayer> &layers,
                                 const plan::MoeEvaluation &eval,
                                 const plan::MoeRequest &request, const cost::CostModel &model) {
  const std::vector<cost::SimTask> tasks = plan::moeScheduleTasks(
      *request.sync, layers, eval.best.layers, eval.ep, request, model);
  const cost::SimResult result = cost::simulate(model, tasks);
  if (!result.error.empty())
    throw std::logic_error("the co-scheduled iteration cannot be simulated: " + result.error);
  std::set<int> gradientStreams;
  for (const cost::SimTask &task : tasks)
    if (vocab::communicates(task.kind) && task.bucket >= 0)
      gradientStreams.insert(task.stream);
  ordered_json timeline = ordered_json::array();
  for (size_t t = 0; t < tasks.size(); ++t) {
    const cost::SimTask &task = tasks[t];
    std::string track = "compute";
    if (vocab::communicates(task.kind))
      track = gradientStreams.count(task.stream) ? fmt::format("comm stream {}", task.stream)
                                                 : "moe all-to-all";
    else if (vocab::compresses(task.kind) && task.device == cost::Device::CPU)
      track = "host cpu";
    // Spelled as the schedule spells its tasks.
    ordered_json entry = {
        {"name", task.name},
        {"kind", vocab::toString(task.kind)},
        {"phase", vocab::toString(task.planPhase())},
        {"track", track}};
    // The MoE pieces follow the plan's schedule, whose tasks come first, in its order.
    if (task.moeLayer >= 0)
      entry["moe_layer"] = task.moeLayer;
    else
      entry["schedule_task"] = int64_t(t);
    if (vocab::communicates(task.kind))
      entry["stream"] = task.stream;
    if (vocab::compresses(task.kind))
      entry["device"] = cost::toString(task.device);
    entry["start_us"] = result.startUs[t];
    entry["duration_us"] = result.endUs[t] - result.startUs[t];
    timeline.push_back(std::move(entry));
  }
  return timeline;
}

} // namespace

void attachMoe(zenrt::Plan &plan, const std::vector<plan::MoeLayer> &layers,
               const plan::MoePlan &planned, const plan::MoeRequest &request,
               const cost::CostModel &model) {
  const plan::MoeEvaluation &eval = planned.chosen;
  const double dataParallelUs = plan.predictions.iterationUs;
  ordered_json section;
  section["ep"] = eval.ep;
  section["imbalance"] = request.imbalance;
  section["iteration_us"] = dataParallelUs + eval.extraUs(eval.best);
  section["moe_us"] = eval.best.moeUs;
  section["local_us"] = eval.localUs;
  if (eval.scheduled)
    section["schedule_us"] = eval.scheduleUs;
  section["expert_sync_us"] = eval.expertSyncUs;
  section["sync_saving_us"] = eval.syncSavingUs;
  ordered_json chosen = ordered_json::array();
  for (size_t l = 0; l < layers.size(); ++l) {
    ordered_json layer = {{"name", layers[l].name},
                          {"parameters", layers[l].parameters},
                          {"experts", layers[l].shape.experts},
                          {"capacity", layers[l].shape.capacity()},
                          {"hidden", layers[l].shape.hidden},
                          {"ffn", layers[l].shape.ffn}};
    layer.update(choiceJson(eval.best.layers[l]));
    if (request.sync) {
      // The schedule's compute tasks are its segments, forward then backward, in order.
      const plan::MoeLayerSite &site = request.sync->sites.at(l);
      const int64_t forwardTasks = int64_t(request.sync->problem.forward.size());
      layer["forward_task"] = site.forwardSegment;
      layer["backward_task"] = forwardTasks + site.backwardSegment;
      layer["forward_flops"] = site.forwardFlops;
      layer["backward_flops"] = site.backwardFlops;
    }
    chosen.push_back(layer);
  }
  section["layers"] = chosen;
  ordered_json baselines = ordered_json::object();
  for (const std::string &name : plan::moeBaselineNames()) {
    const plan::MoeStrategy &strategy = eval.baselines.at(name);
    ordered_json baseline = {{"iteration_us", dataParallelUs + eval.extraUs(strategy)},
                             {"moe_us", strategy.moeUs},
                             {"layers", ordered_json::array()}};
    for (const plan::MoeLayerTime &time : strategy.layers)
      baseline["layers"].push_back(choiceJson(time));
    baselines[name] = baseline;
  }
  section["baselines"] = baselines;
  ordered_json searched = ordered_json::object();
  for (const auto &[ep, extraUs] : planned.searched)
    searched[std::to_string(ep)] = dataParallelUs + extraUs;
  section["searched"] = searched;
  ordered_json notFitting = ordered_json::object();
  for (const auto &[ep, bytes] : planned.notFitting)
    notFitting[std::to_string(ep)] = bytes;
  section["not_fitting"] = notFitting;
  const cost::MemoryBreakdown whole = plan::moeModelMemory(eval, request);
  const cost::MemoryBreakdown &dense = request.dense;
  section["memory"] = {
      {"weights_bytes", eval.memory.weightsBytes},
      {"gradients_bytes", eval.memory.gradientsBytes},
      {"optimizer_bytes", eval.memory.optimizerBytes},
      {"activations_bytes", eval.memory.activationsBytes},
      {"buffers_bytes", eval.memory.buffersBytes},
      {"other_parameters_bytes",
       dense.weightsBytes + dense.gradientsBytes + dense.optimizerBytes},
      {"other_activations_bytes", dense.activationsBytes},
      {"reserve_bytes", whole.reserveBytes},
      {"per_gpu_bytes", whole.perGpuBytes()},
      {"capacity_bytes", whole.capacityBytes}};
  if (eval.scheduled)
    section["timeline"] = coScheduledTimeline(layers, eval, request, model);
  plan.moe = section.dump();

  const double autoExtraUs = eval.extraUs(eval.best);
  for (auto &[name, us] : plan.baselines)
    us += autoExtraUs;
  for (auto &[name, us] : plan.baselinesUncompressed)
    us += autoExtraUs;
  for (const std::string &name : plan::moeBaselineNames())
    plan.baselines[name] = baselines[name]["iteration_us"].get<double>();
}

} // namespace zen::codegen

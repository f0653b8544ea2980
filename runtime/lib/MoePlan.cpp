//===- MoePlan.cpp - a plan's MoE section as the runtime executes it ------===//
#include "zenrt/Moe.h"

#include "CpuMemory.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>

namespace zenrt::moe {

using json = nlohmann::json;

PlannedMoe plannedMoe(const Plan &plan, const std::string &source) {
  auto fail = [&](const std::string &at, const std::string &message) {
    return PlanError(zen::ErrorKind::BadInput, source + ": " + at + ": " + message);
  };
  if (plan.moe.empty())
    throw fail("/moe", "is missing: not a Mixture-of-Experts plan");
  // validatePlan checked every field read below but the tensors' sizes and the nodes.
  const json moe = json::parse(plan.moe);
  PlannedMoe planned;
  planned.ep = moe.at("ep").get<int64_t>();

  const int64_t world = plan.cluster.worldSize;
  int64_t perNode = world;
  if (!plan.cluster.spec.empty()) {
    const json spec = json::parse(plan.cluster.spec);
    if (spec.contains("gpus_per_node")) {
      const json &gpus = spec["gpus_per_node"];
      if (!gpus.is_number_integer() || gpus.get<int64_t>() < 1)
        throw fail("/cluster/spec/gpus_per_node", "must be an integer >= 1");
      perNode = std::min(world, gpus.get<int64_t>());
    }
  }
  if (world % perNode != 0)
    throw fail("/cluster/spec/gpus_per_node", std::to_string(perNode) +
                                                  " ranks per node do not divide the " +
                                                  std::to_string(world) + " ranks");
  // Ranks fill nodes in order: an ep group of consecutive ranks lies inside one node or
  // spans whole nodes (cost::checkExpertPlacement).
  const int64_t ep = planned.ep;
  if (world % ep != 0 || (ep <= perNode ? perNode % ep != 0 : ep % perNode != 0))
    throw fail("/moe/ep", "ep " + std::to_string(ep) +
                              " neither divides nor is a multiple of the " +
                              std::to_string(perNode) + " ranks per node of the " +
                              std::to_string(world) + " ranks");
  planned.ranksPerNode = std::min(ep, perNode);

  // A layer's shape is its parameters' whole tensors: an expert tensor of the plan holds
  // one rank's experts / ep of it.
  std::map<std::string, int64_t> elements;
  for (const TensorInfo &tensor : plan.tensors)
    elements[tensor.name] = tensor.elements * tensor.expertParallel;
  const json &layers = moe.at("layers");
  double allLayersFloats = 0;
  for (size_t l = 0; l < layers.size(); ++l) {
    const std::string at = "/moe/layers/" + std::to_string(l);
    const json &layer = layers[l];
    PlannedLayer out;
    out.name = layer.at("name").get<std::string>();
    out.shape.experts = layer.at("experts").get<int64_t>();
    out.shape.capacity = layer.at("capacity").get<int64_t>();
    out.forwardChunks = layer.at("forward").get<int64_t>();
    out.backwardChunks = layer.at("backward").get<int64_t>();
    out.algorithm = layer.at("all_to_all") == "2d" ? AllToAll::Hierarchical : AllToAll::Flat;
    const std::string tokens = layer.value("token_compression", "none");
    out.tokens = tokens == "fp16"   ? TokenFormat::Fp16
                 : tokens == "bf16" ? TokenFormat::Bf16
                 : tokens == "int8" ? TokenFormat::Int8
                                    : TokenFormat::None;
    out.serial = layer.value("gradient_sync", "concurrent") == "serial";
    out.forwardUs = layer.at("forward_us").get<double>();
    out.backwardUs = layer.at("backward_us").get<double>();
    out.forwardTask = layer.value("forward_task", int64_t{-1});
    out.backwardTask = layer.value("backward_task", int64_t{-1});
    out.forwardFlops = layer.value("forward_flops", int64_t{0});
    out.backwardFlops = layer.value("backward_flops", int64_t{0});

    // fc1 [E, rows, hidden], optional fc1 bias [E, rows], fc2 [E, hidden, ffn], optional fc2
    // bias [E, hidden], with rows = ffn (2 x ffn for fused SwiGLU; the runtime's experts are
    // ReLU MLPs).
    const json &parameters = layer.at("parameters");
    const std::string sizes = at + "/parameters";
    std::vector<int64_t> count;
    for (size_t p = 0; p < parameters.size(); ++p) {
      const std::string name = parameters[p].get<std::string>();
      auto found = elements.find(name);
      if (found == elements.end())
        throw fail(sizes + "/" + std::to_string(p), "'" + name + "' is not a tensor of the plan");
      count.push_back(found->second);
    }
    const int64_t experts = out.shape.experts;
    int64_t hidden = 0, ffn = 0;
    if (layer.contains("hidden")) {
      hidden = layer.at("hidden").get<int64_t>();
      ffn = layer.at("ffn").get<int64_t>();
    } else if (count.size() == 4 && count[3] % experts == 0 && count[3] > 0) {
      // Plans before `hidden` and `ffn`: the four tensors give them.
      hidden = count[3] / experts;
      ffn = count[2] / (experts * hidden);
    }
    // Which tensors are there, by their sizes, in operand order.
    size_t next = 0;
    auto take = [&](int64_t elements) {
      if (next < count.size() && count[next] == elements) {
        ++next;
        return true;
      }
      return false;
    };
    const bool fc1 = hidden > 0 && ffn > 0 &&
                     (take(experts * ffn * hidden) || take(experts * 2 * ffn * hidden));
    const int64_t rows = fc1 && count[0] == experts * 2 * ffn * hidden ? 2 * ffn : ffn;
    out.fc1Bias = fc1 && take(experts * rows);
    const bool fc2 = fc1 && take(experts * hidden * ffn);
    out.fc2Bias = fc2 && take(experts * hidden);
    // Mixtral-style gated experts carry a third weight (fc3, the "up" half of
    // SwiGLU): planned, but the runtime's experts are two-GEMM MLPs.
    if (fc2 && take(experts * ffn * hidden))
      throw fail(sizes, "gated experts (a third weight, fc3, of " + std::to_string(experts * ffn * hidden) +
                            " elements) are not executed by zenopt-run yet: its experts are two-GEMM MLPs");
    if (!fc2 || next != count.size()) {
      std::string list;
      for (int64_t c : count)
        list += (list.empty() ? "" : ", ") + std::to_string(c);
      throw fail(sizes, "the tensors' sizes (" + list + ") are not fc1, an optional fc1 bias, "
                        "fc2 and an optional fc2 bias of " + std::to_string(experts) +
                        " experts" + (hidden > 0 ? " of hidden " + std::to_string(hidden) +
                                                       " and ffn " + std::to_string(ffn)
                                                 : ""));
    }
    out.shape.hidden = hidden;
    out.shape.ffn = ffn;
    // What zenopt-run holds for the layer on one rank, checked before anything is allocated:
    // every rank of its group's inputs and output gradients, [experts][capacity][hidden]
    // each, and as many again for the reference; about 16 more such buffers (staged inputs,
    // outputs and gradients of the planned and the flat run, the reference's outputs); the
    // activations kept for backward, [experts][capacity][ffn] twice; every expert's weights
    // with their gradients and the reference's sums in double.
    const double buffer = double(experts) * double(out.shape.capacity) * double(hidden);
    const double floats = (4 * double(ep) + 16) * buffer +
                          2 * double(experts) * double(out.shape.capacity) * double(ffn) +
                          6 * double(experts) * double(ffn) * double(hidden);
    const std::string excess = detail::cpuMemoryExcess(floats);
    if (!excess.empty())
      throw fail(at + "/capacity",
                 "capacity " + std::to_string(out.shape.capacity) + " of " +
                     std::to_string(experts) + " experts of hidden " + std::to_string(hidden) +
                     " and ffn " + std::to_string(ffn) + " " + excess +
                     ": execute a plan for a smaller model");
    allLayersFloats += floats;
    if (const std::string all = detail::cpuMemoryExcess(allLayersFloats); !all.empty())
      throw fail("/moe/layers", "the first " + std::to_string(l + 1) + " MoE layers together " +
                                    all + ": execute a plan for a smaller model");
    for (const json &parameter : parameters)
      out.parameters.push_back(parameter.get<std::string>());
    planned.layers.push_back(out);
  }
  return planned;
}

} // namespace zenrt::moe

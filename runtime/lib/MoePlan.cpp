//===- MoePlan.cpp - a plan's MoE section as the runtime executes it ------===//
#include "zenrt/Moe.h"

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

  std::map<std::string, int64_t> elements;
  for (const TensorInfo &tensor : plan.tensors)
    elements[tensor.name] = tensor.elements;
  const json &layers = moe.at("layers");
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
    out.forwardUs = layer.at("forward_us").get<double>();
    out.backwardUs = layer.at("backward_us").get<double>();

    // fc1 [E, rows, hidden], fc1 bias [E, rows], fc2 [E, hidden, ffn], fc2 bias [E, hidden],
    // with rows = ffn (2 x ffn for fused SwiGLU; the runtime's experts are ReLU MLPs).
    const json &parameters = layer.at("parameters");
    const std::string sizes = at + "/parameters";
    if (parameters.size() != 4)
      throw fail(sizes, "the runtime reads the hidden and inter sizes from the experts' fc1, "
                        "fc1 bias, fc2 and fc2 bias; the layer has " +
                            std::to_string(parameters.size()) + " parameters");
    int64_t count[4];
    for (size_t p = 0; p < 4; ++p) {
      const std::string name = parameters[p].get<std::string>();
      auto found = elements.find(name);
      if (found == elements.end())
        throw fail(sizes + "/" + std::to_string(p), "'" + name + "' is not a tensor of the plan");
      count[p] = found->second;
    }
    const int64_t experts = out.shape.experts;
    const int64_t rows = count[1] / experts, hidden = count[3] / experts;
    const int64_t ffn = hidden > 0 ? count[2] / (experts * hidden) : 0;
    if (rows < 1 || hidden < 1 || ffn < 1 || count[1] != experts * rows ||
        count[3] != experts * hidden || count[2] != experts * hidden * ffn ||
        count[0] != experts * rows * hidden || (rows != ffn && rows != 2 * ffn))
      throw fail(sizes, "the tensors' sizes (" + std::to_string(count[0]) + ", " +
                            std::to_string(count[1]) + ", " + std::to_string(count[2]) + ", " +
                            std::to_string(count[3]) +
                            ") are not fc1, fc1 bias, fc2, fc2 bias of " + std::to_string(experts) +
                            " experts");
    out.shape.hidden = hidden;
    out.shape.ffn = ffn;
    planned.layers.push_back(out);
  }
  return planned;
}

} // namespace zenrt::moe

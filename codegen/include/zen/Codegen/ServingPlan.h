//===- ServingPlan.h - serving plans and their summary ---------*- C++ -*-===//
//
// A `zenopt --serve` decision (zen/Planner/Serving.h) as the plan file's `inference`
// section and as the summary (docs/plan-format.md "inference").
//
//===----------------------------------------------------------------------===//
#ifndef ZEN_CODEGEN_SERVINGPLAN_H
#define ZEN_CODEGEN_SERVINGPLAN_H

#include "zen/Planner/Serving.h"
#include "zenrt/Plan.h"

#include <nlohmann/json.hpp>

#include <string>

namespace zen::codegen {

struct ServingSettings {
  std::string precision;  // --precision: the weights' and activations' type
  std::string kvDtype;    // --kv-dtype
};

/// The `inference` object: the model, the workload and targets, the decision (prefill and
/// decode tp/pp, batch, KV cache), its predictions, all-reduces and memory, and the baselines.
nlohmann::ordered_json inferenceJson(const plan::ServingDecision &decision,
                                     const cost::TransformerShape &shape,
                                     const cost::ServingWorkload &workload,
                                     const ServingSettings &settings);

/// A serving plan file: strategy "serve", no gradient tensors, buckets or schedule, the
/// world one instance (colocated) or both (disaggregated), `predictions` one decode step
/// (iteration_us the TPOT), and `inference`.
zenrt::Plan servingPlan(const plan::ServingDecision &decision, const nlohmann::ordered_json &inference,
                        const cost::CostModel &model, const std::string &modelName,
                        const std::string &modelHash);

/// The --json summary of a serving plan and its text form.
nlohmann::ordered_json servingSummaryJson(const zenrt::Plan &plan, const nlohmann::ordered_json &inference);
std::string servingSummaryText(const zenrt::Plan &plan, const nlohmann::ordered_json &inference);

} // namespace zen::codegen

#endif // ZEN_CODEGEN_SERVINGPLAN_H

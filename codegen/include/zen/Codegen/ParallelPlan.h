//===- ParallelPlan.h - the plan file's large-model section -----*- C++ -*-===//
//
// Lowers a chosen tp/pp/dp/ZeRO configuration to the plan file's `parallel`
// section (docs/plan-format.md): the configuration, the memory breakdown, the
// predicted throughput, the baselines and every pipeline stage's program.
//
//===----------------------------------------------------------------------===//
#ifndef ZEN_CODEGEN_PARALLELPLAN_H
#define ZEN_CODEGEN_PARALLELPLAN_H

#include "zen/Planner/ParallelSearch.h"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace zen::codegen {

/// Stage `stage`'s order of forward ("F<micro-batch>" or, interleaved,
/// "F<micro-batch>.<chunk>") and backward ("B...") steps under Megatron's 1F1B:
/// warm-up forwards, alternating forward/backward, cool-down backwards.
std::vector<std::string> stageProgram(int64_t stage, const cost::ParallelConfig &config);

/// The `parallel` section of a plan file for `chosen`.
nlohmann::ordered_json parallelSection(const cost::TransformerShape &shape,
                                       const cost::TrainingSetup &setup,
                                       const plan::ParallelEvaluation &chosen,
                                       const plan::ParallelResult &result);

} // namespace zen::codegen

#endif // ZEN_CODEGEN_PARALLELPLAN_H

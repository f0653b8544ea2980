//===- ParallelPlan.h - the plan file's large-model section -----*- C++ -*-===//
//
// Lowers a chosen tp/pp/dp/ZeRO configuration to the plan file's `parallel`
// section (docs/plan-format.md): the configuration, the memory breakdown, the
// predicted throughput, the baselines and every pipeline stage's program.
//
//===----------------------------------------------------------------------===//
#ifndef ZEN_CODEGEN_PARALLELPLAN_H
#define ZEN_CODEGEN_PARALLELPLAN_H

#include "zen/CostModel/Pipeline.h"
#include "zen/Planner/ParallelSearch.h"
#include "zenrt/Plan.h"

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

namespace zen::codegen {

/// The `transformer` object of `inspect --json` and the plan's `--json`
/// summary (docs/design.md "Partitioning passes"): blocks, hidden, heads,
/// kv_heads, ffn, vocab, seq, mlp, norm, tied_embeddings, positions, moe_blocks.
nlohmann::ordered_json transformerJson(const cost::TransformerShape &shape);

/// One GPU's memory as the plan file's `parallel` section and the `--json`
/// summary give it: per_gpu_bytes, capacity_bytes, weights_bytes,
/// gradients_bytes, optimizer_bytes, activations_bytes, buffers_bytes, reserve_bytes.
nlohmann::ordered_json memoryJson(const cost::MemoryBreakdown &memory);

/// The `parallel` section of a plan file for `chosen`, with how the search's
/// alternatives scored (name to predicted iteration in us, or why not) and what each ran
/// (name to its configuration in words; with plan::parallelBaselineRule's rule).
nlohmann::ordered_json parallelSection(const cost::TransformerShape &shape,
                                       const cost::TrainingSetup &setup,
                                       const plan::ParallelEvaluation &chosen,
                                       int64_t configurationsScored,
                                       const std::map<std::string, double> &baselines,
                                       const std::map<std::string, std::string> &baselinesWhyNot,
                                       const std::map<std::string, std::string> &baselineConfigurations);

/// The simulated schedule of a large-model plan's `parallel` section: its stages'
/// per-micro-batch costs run under its schedule (cost::simulatePipeline), for
/// the trace and the timeline. The plan must have passed zenrt's checks.
cost::PipelineSchedule pipelineScheduleOf(const zenrt::Plan &plan);

} // namespace zen::codegen

#endif // ZEN_CODEGEN_PARALLELPLAN_H

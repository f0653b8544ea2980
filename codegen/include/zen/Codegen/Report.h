//===- Report.h - summary, Chrome trace and SVG timeline of a plan -*- C++ -*-===//
#ifndef ZEN_CODEGEN_REPORT_H
#define ZEN_CODEGEN_REPORT_H

#include "zen/Codegen/SparsePlan.h"
#include "zenrt/Plan.h"

#include <nlohmann/json.hpp>
#include <string>

namespace zen::codegen {

/// What planning knew besides the plan file; a re-scored plan file has neither.
struct SummaryContext {
  /// codegen::transformerJson of the recognised transformer; null when none was.
  nlohmann::ordered_json transformer;
  /// A data-parallel plan's memory per GPU (codegen::memoryJson); null for a
  /// large-model plan, whose `parallel` section carries its own.
  nlohmann::ordered_json memory;
  /// The plan's row-sparse gradients as decided (codegen::sparseDecisionsOf): the summary's
  /// `sparse` section; empty when the plan has none.
  plan::SparsePlan sparse;
  /// The row-sparse gradients the plan synchronises dense, and why: the summary's
  /// `sparse_synchronised_dense`; empty when there are none.
  DenseSyncedTables denseSynced;
  /// How the compute was priced: "cost model", or "measured: <method>" when the planner
  /// took the job's own timing (zenopt --measured-compute). The summary's `compute_source`.
  std::string computeSource = "cost model";
};

/// The summary as one JSON object: strategy, iteration_us, compute_us,
/// exposed_comm_us, lower_bound_us, buckets, compression, baselines, ...;
/// baselines_uncompressed with compressors allowed; `transformer` and `memory`
/// where known.
nlohmann::ordered_json summaryJson(const zenrt::Plan &plan, const SummaryContext &context = {});

/// The same summary as a readable table, with auto's speedup over every baseline.
std::string summaryText(const zenrt::Plan &plan, const SummaryContext &context = {});

/// A `transformer` object (codegen::transformerJson) in words: "12 gpt blocks,
/// hidden 768, 12 heads, ffn 3072 gelu, layernorm, learned positions, ...".
std::string transformerText(const nlohmann::ordered_json &transformer);

/// Chrome trace event format (Perfetto, chrome://tracing): compute and each
/// communication stream on their own track, every task a complete event.
std::string chromeTrace(const zenrt::Plan &plan);

/// A Gantt picture of one iteration: compute and every stream's collectives,
/// with the exposed communication marked.
std::string timelineSvg(const zenrt::Plan &plan);

} // namespace zen::codegen

#endif // ZEN_CODEGEN_REPORT_H

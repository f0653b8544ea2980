//===- Report.h - summary, Chrome trace and SVG timeline of a plan -*- C++ -*-===//
#ifndef ZEN_CODEGEN_REPORT_H
#define ZEN_CODEGEN_REPORT_H

#include "zenrt/Plan.h"

#include <nlohmann/json.hpp>
#include <string>

namespace zen::codegen {

/// The summary as one JSON object: strategy, iteration_us, compute_us,
/// exposed_comm_us, lower_bound_us, buckets, compression, baselines, ...;
/// baselines_uncompressed with compressors allowed
nlohmann::ordered_json summaryJson(const zenrt::Plan &plan);

/// The same summary as a readable table, with auto's speedup over every baseline.
std::string summaryText(const zenrt::Plan &plan);

/// Chrome trace event format (Perfetto, chrome://tracing): compute and each
/// communication stream on their own track, every task a complete event.
std::string chromeTrace(const zenrt::Plan &plan);

/// A Gantt picture of one iteration: compute and every stream's collectives,
/// with the exposed communication marked.
std::string timelineSvg(const zenrt::Plan &plan);

} // namespace zen::codegen

#endif // ZEN_CODEGEN_REPORT_H

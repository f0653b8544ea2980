//===- MeasuredCompute.h - zenopt --measured-compute FILE ------*- C++ -*-===//
//
// The step's compute as the job timed it (zenopt.torch writes the file): read, checked
// against the model's parameters, and turned into the module's #zen.measured_compute.
//
//===----------------------------------------------------------------------===//
#ifndef ZEN_TOOLS_ZENOPT_MEASUREDCOMPUTE_H
#define ZEN_TOOLS_ZENOPT_MEASUREDCOMPUTE_H

#include "zen/Dialect/ZenDialect.h"
#include "zen/Importer/ModelGraph.h"

#include <string>

namespace zen::cli {

/// Reads FILE (docs/plan-format.md "Measured compute"): exit 66 when it cannot be read, 65
/// naming the file and the JSON pointer of a bad field or a name that is no trainable
/// parameter of `graph`.
MeasuredComputeAttr readMeasuredCompute(mlir::MLIRContext &context, const std::string &path,
                                        const importer::ModelGraph &graph);

} // namespace zen::cli

#endif // ZEN_TOOLS_ZENOPT_MEASUREDCOMPUTE_H

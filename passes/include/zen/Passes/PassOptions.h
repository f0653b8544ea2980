//===- PassOptions.h - typed options of the zen planning passes -*- C++ -*-===//
//
// The enums behind the passes' options and the one list of their spellings
// (the `cl::values` that Passes.td and the zen-plan-pipeline share).
//
//===----------------------------------------------------------------------===//
#ifndef ZEN_PASSES_PASSOPTIONS_H
#define ZEN_PASSES_PASSOPTIONS_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/CommandLine.h"

#include <optional>

namespace zen {

/// zen-fuse-gradients: the bucketing rule.
enum class FusionStrategy { wfbp, ddp, horovod, mgwfbp, threshold, manual, nooverlap };
/// zen-autotune and zen-plan-pipeline: the joint search or a baseline.
enum class PlanStrategy { automatic, nooverlap, wfbp, ddp, horovod, mgwfbp, threshold, manual };
/// zen-place-compression: where compression goes.
enum class CompressionMode { automatic, all };
/// zen-decompose: which all-reduces are split.
enum class SplitMode { none, all, automatic };

/// The planner's name of a strategy (planner/include/zen/Planner/Planning.h).
llvm::StringRef strategyName(FusionStrategy strategy);
llvm::StringRef strategyName(PlanStrategy strategy);
/// The strategy spelled `name` ("auto", "ddp", ...), or nullopt.
std::optional<PlanStrategy> parsePlanStrategy(llvm::StringRef name);

/// Spellings for llvm::cl options of type PlanStrategy.
inline auto planStrategyValues() {
  return llvm::cl::values(
      clEnumValN(PlanStrategy::automatic, "auto", "joint search"),
      clEnumValN(PlanStrategy::nooverlap, "nooverlap", "no-overlap baseline"),
      clEnumValN(PlanStrategy::wfbp, "wfbp", "WFBP baseline"),
      clEnumValN(PlanStrategy::ddp, "ddp", "PyTorch DDP baseline"),
      clEnumValN(PlanStrategy::horovod, "horovod", "Horovod baseline"),
      clEnumValN(PlanStrategy::mgwfbp, "mgwfbp", "MG-WFBP baseline"),
      clEnumValN(PlanStrategy::threshold, "threshold", "fixed-threshold fusion"),
      clEnumValN(PlanStrategy::manual, "manual", "bucket sizes from `buckets`"));
}

} // namespace zen

#endif // ZEN_PASSES_PASSOPTIONS_H

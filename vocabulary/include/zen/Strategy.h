//===- zen/Strategy.h - How the gradient buckets are decided ----*- C++ -*-===//
//
// The one table of data-parallel planning strategies: zenopt's joint search and the
// bucketing rules of the baselines it is compared with (planner/lib/Planning.cpp documents
// each rule and its source). The spellings are the command line's (`--strategy`), the passes'
// options, the plan file's `strategy` and the baselines' names.
//
// Header-only and free of LLVM and of exceptions.
//
//===----------------------------------------------------------------------===//
#ifndef ZEN_STRATEGY_H
#define ZEN_STRATEGY_H

#include "zen/Vocabulary.h"

namespace zen::vocab {

enum class Strategy { Auto, NoOverlap, Wfbp, Ddp, Horovod, MgWfbp, Threshold, Manual };

struct StrategyTraits {
  Strategy value;
  const char *spelling;
  const char *description;
  /// A bucketing rule (zen-fuse-gradients): every strategy but the joint search.
  bool rule;
  /// Reported next to every plan, in this order (planner: baselineNames()).
  bool baseline;
  /// Offered by `zenopt --strategy` (threshold is a pass option only).
  bool onCommandLine;
};

inline constexpr StrategyTraits kStrategies[] = {
    {Strategy::Auto, "auto", "joint search", false, false, true},
    {Strategy::NoOverlap, "nooverlap", "no-overlap baseline: per tensor, after backward", true, true, true},
    {Strategy::Wfbp, "wfbp", "WFBP baseline: one bucket per tensor", true, true, true},
    {Strategy::Ddp, "ddp", "PyTorch DDP baseline: 25 MiB buckets, the first 1 MiB", true, true, true},
    {Strategy::Horovod, "horovod", "Horovod baseline: every cycle, the ready tensors up to the fusion threshold", true, true, true},
    {Strategy::MgWfbp, "mgwfbp", "MG-WFBP baseline: merge while the wait is shorter than the start-up time", true, true, true},
    {Strategy::Threshold, "threshold", "buckets closed at threshold-bytes", true, false, false},
    {Strategy::Manual, "manual", "bucket sizes from `buckets`", true, false, true},
};
static_assert(detail::indexedByValue(kStrategies), "kStrategies out of order");

constexpr const StrategyTraits &traitsOf(Strategy strategy) {
  return kStrategies[static_cast<size_t>(strategy)];
}
constexpr const char *toString(Strategy strategy) { return traitsOf(strategy).spelling; }
inline std::optional<Strategy> parseStrategy(std::string_view text) {
  return detail::parse(kStrategies, text);
}

} // namespace zen::vocab

#endif // ZEN_STRATEGY_H

//===- PassOptions.h - typed options of the zen planning passes -*- C++ -*-===//
//
// The enums behind the passes' options and their spellings for llvm::cl: the strategies
// come from the vocabulary's one table (zen/Strategy.h).
//
//===----------------------------------------------------------------------===//
#ifndef ZEN_PASSES_PASSOPTIONS_H
#define ZEN_PASSES_PASSOPTIONS_H

#include "zen/Strategy.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/CommandLine.h"

#include <optional>

namespace zen {

using vocab::Strategy;
/// zen-place-compression: where compression goes.
enum class CompressionMode { automatic, all };
/// zen-decompose: which all-reduces are split.
enum class SplitMode { none, all, automatic };

/// The llvm::cl values of an option of type Strategy: every strategy of zen/Strategy.h, or
/// only the bucketing rules (zen-fuse-gradients), with their spellings and descriptions.
struct StrategyValues {
  bool rulesOnly = false;
  template <class Opt> void apply(Opt &option) const {
    for (const vocab::StrategyTraits &traits : vocab::kStrategies)
      if (traits.rule || !rulesOnly)
        option.getParser().addLiteralOption(traits.spelling, traits.value, traits.description);
  }
};
inline StrategyValues strategyValues() { return {false}; }
inline StrategyValues bucketingRuleValues() { return {true}; }

} // namespace zen

#endif // ZEN_PASSES_PASSOPTIONS_H

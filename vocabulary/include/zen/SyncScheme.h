//===- zen/SyncScheme.h - How a bucket's payload crosses the group -*- C++ -*-===//
//
// The one definition of the synchronisation schemes: which collective, or
// sequence of collectives, moves a gradient bucket, and which compression
// methods each scheme can carry. The planner chooses a scheme per bucket, the
// cost model prices it (CostModel::syncCost), the IR carries it as the typed
// `sync` attribute of the bucket's first collective, the plan file spells it as
// the bucket's `collectives` sequence, and the runtime dispatches on it. Nobody
// else derives a collective from a compression method.
//
// Header-only and free of LLVM and of exceptions (the runtime uses it).
//
//===----------------------------------------------------------------------===//
#ifndef ZEN_SYNCSCHEME_H
#define ZEN_SYNCSCHEME_H

#include "zen/Vocabulary.h"

#include <cstdint>

namespace zen::vocab {

enum class SyncScheme {
  /// One all-reduce of the payload: dense, cast or int8 values, random-k's
  /// values at indices every rank draws alike, PowerSGD's factors.
  AllReduce,
  /// A reduce-scatter during backward, then an all-gather that may complete
  /// during the next iteration's forward (DeAR's decomposition).
  ReduceScatterAllGather,
  /// Every rank's payload lands everywhere and is decoded per rank: payloads
  /// that do not sum (top-k's own indices, sign bits).
  AllGather,
};

struct SyncSchemeTraits {
  SyncScheme value;
  const char *spelling;
  /// The collectives the scheme runs, in order; `steps` of them are used.
  CollectiveKind sequence[2];
  int steps;
  /// The last collective is an all-gather the next forward may wait for
  /// instead of this backward (it carries the reduced shards back).
  bool gatherAfterReduction;
};

inline constexpr SyncSchemeTraits kSyncSchemes[] = {
    {SyncScheme::AllReduce, "all_reduce", {CollectiveKind::AllReduce}, 1, false},
    {SyncScheme::ReduceScatterAllGather,
     "reduce_scatter_all_gather",
     {CollectiveKind::ReduceScatter, CollectiveKind::AllGather},
     2,
     true},
    {SyncScheme::AllGather, "all_gather", {CollectiveKind::AllGather}, 1, false},
};
static_assert(detail::indexedByValue(kSyncSchemes), "kSyncSchemes out of order");

/// A set of schemes, one bit per SyncScheme value.
using SyncSchemeSet = uint8_t;
constexpr SyncSchemeSet bitOf(SyncScheme scheme) {
  return static_cast<SyncSchemeSet>(1u << static_cast<unsigned>(scheme));
}

struct MethodSchemes {
  CompressionMethod method;
  /// What the planner uses unless it finds another supported scheme cheaper.
  SyncScheme preferred;
  /// Every scheme the executor implements for the method.
  SyncSchemeSet supported;
};

/// Indexed by CompressionMethod. Dense and cast payloads sum; only dense ones
/// decompose (the IR has no compressed reduce-scatter); int8 is all-reduced
/// with a shared scale or gathered with each rank's own; random-k's indices
/// come from a seed shared by the ranks, so its values sum; top-k's and sign's
/// payloads do not.
inline constexpr MethodSchemes kMethodSchemes[] = {
    {CompressionMethod::None, SyncScheme::AllReduce,
     bitOf(SyncScheme::AllReduce) | bitOf(SyncScheme::ReduceScatterAllGather)},
    {CompressionMethod::FP16, SyncScheme::AllReduce, bitOf(SyncScheme::AllReduce)},
    {CompressionMethod::BF16, SyncScheme::AllReduce, bitOf(SyncScheme::AllReduce)},
    {CompressionMethod::Int8, SyncScheme::AllReduce,
     bitOf(SyncScheme::AllReduce) | bitOf(SyncScheme::AllGather)},
    {CompressionMethod::TopK, SyncScheme::AllGather, bitOf(SyncScheme::AllGather)},
    {CompressionMethod::RandomK, SyncScheme::AllReduce,
     bitOf(SyncScheme::AllReduce) | bitOf(SyncScheme::AllGather)},
    {CompressionMethod::Sign, SyncScheme::AllGather, bitOf(SyncScheme::AllGather)},
    {CompressionMethod::PowerSGD, SyncScheme::AllReduce, bitOf(SyncScheme::AllReduce)},
};
static_assert(sizeof(kMethodSchemes) / sizeof(kMethodSchemes[0]) ==
                  sizeof(kCompressionMethods) / sizeof(kCompressionMethods[0]),
              "kMethodSchemes must list every compression method");

namespace detail {
constexpr bool methodSchemesIndexed() {
  for (size_t i = 0; i < sizeof(kMethodSchemes) / sizeof(kMethodSchemes[0]); ++i)
    if (static_cast<size_t>(kMethodSchemes[i].method) != i ||
        !(kMethodSchemes[i].supported & bitOf(kMethodSchemes[i].preferred)))
      return false;
  return true;
}
} // namespace detail
static_assert(detail::methodSchemesIndexed(),
              "kMethodSchemes out of order, or a preferred scheme it does not support");

constexpr const SyncSchemeTraits &traitsOf(SyncScheme scheme) {
  return kSyncSchemes[static_cast<size_t>(scheme)];
}
constexpr const char *toString(SyncScheme scheme) { return traitsOf(scheme).spelling; }
inline std::optional<SyncScheme> parseSyncScheme(std::string_view text) {
  return detail::parse(kSyncSchemes, text);
}

constexpr SyncScheme preferredScheme(CompressionMethod method) {
  return kMethodSchemes[static_cast<size_t>(method)].preferred;
}
constexpr bool supports(CompressionMethod method, SyncScheme scheme) {
  return (kMethodSchemes[static_cast<size_t>(method)].supported & bitOf(scheme)) != 0;
}
/// The scheme for `method`: DeAR's decomposition when asked for and supported,
/// else the preferred one. Planners and passes choose through this.
constexpr SyncScheme schemeFor(CompressionMethod method, bool decompose) {
  return decompose && supports(method, SyncScheme::ReduceScatterAllGather)
             ? SyncScheme::ReduceScatterAllGather
             : preferredScheme(method);
}
/// Every rank's payload reaches every rank undecoded: decoding works on all of them.
constexpr bool gathersPayloads(SyncScheme scheme) { return scheme == SyncScheme::AllGather; }
/// The scheme whose collective sequence is `kinds` (the plan file's spelling).
inline std::optional<SyncScheme> schemeOfSequence(const CollectiveKind *kinds, size_t count) {
  for (const SyncSchemeTraits &entry : kSyncSchemes) {
    if (static_cast<size_t>(entry.steps) != count)
      continue;
    bool same = true;
    for (size_t i = 0; i < count; ++i)
      same &= entry.sequence[i] == kinds[i];
    if (same)
      return entry.value;
  }
  return std::nullopt;
}

} // namespace zen::vocab

#endif // ZEN_SYNCSCHEME_H

//===- NoExceptions.cpp - the vocabulary in a -fno-exceptions translation unit ===//
#include "zen/SyncScheme.h"

namespace zen::vocab {

// The traits and spellings are usable in constant expressions.
static_assert(supports(CompressionMethod::PowerSGD, SyncScheme::AllReduce) &&
              !supports(CompressionMethod::Sign, SyncScheme::AllReduce));
static_assert(schemeFor(CompressionMethod::None, true) == SyncScheme::ReduceScatterAllGather &&
              schemeFor(CompressionMethod::FP16, true) == SyncScheme::AllReduce);
static_assert(std::string_view(toString(CollectiveKind::SendRecv)) == "send_recv");

/// Used by VocabularyTest.cpp, so the parsers are compiled here without exceptions too.
std::optional<Device> parseDeviceWithoutExceptions(std::string_view text) {
  return parseDevice(text);
}

} // namespace zen::vocab

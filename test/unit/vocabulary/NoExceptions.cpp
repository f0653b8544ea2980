//===- NoExceptions.cpp - the vocabulary in a -fno-exceptions translation unit ===//
#include "zen/Vocabulary.h"

namespace zen::vocab {

// The traits and spellings are usable in constant expressions.
static_assert(isAllReducible(CompressionMethod::PowerSGD) && !isAllReducible(CompressionMethod::Sign));
static_assert(std::string_view(toString(CollectiveKind::SendRecv)) == "send_recv");

/// Used by VocabularyTest.cpp, so the parsers are compiled here without exceptions too.
std::optional<Device> parseDeviceWithoutExceptions(std::string_view text) {
  return parseDevice(text);
}

} // namespace zen::vocab

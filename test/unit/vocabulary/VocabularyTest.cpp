//===- VocabularyTest.cpp - spellings and traits of the shared enums -------===//
#include "zen/SyncScheme.h"

#include <gtest/gtest.h>

#include <string>

namespace zen::vocab {
std::optional<Device> parseDeviceWithoutExceptions(std::string_view text);
namespace {

TEST(Vocabulary, SpellingsRoundTrip) {
  for (const CompressionTraits &entry : kCompressionMethods)
    EXPECT_EQ(parseCompressionMethod(toString(entry.value)), entry.value) << entry.spelling;
  for (const DeviceTraits &entry : kDevices)
    EXPECT_EQ(parseDevice(toString(entry.value)), entry.value) << entry.spelling;
  for (const CollectiveTraits &entry : kCollectiveKinds)
    EXPECT_EQ(parseCollectiveKind(toString(entry.value)), entry.value) << entry.spelling;
  for (const TaskKindTraits &entry : kTaskKinds)
    EXPECT_EQ(parseTaskKind(toString(entry.value)), entry.value) << entry.spelling;
  for (const PhaseTraits &entry : kPhases)
    EXPECT_EQ(parsePhase(toString(entry.value)), entry.value) << entry.spelling;
  EXPECT_EQ(parseTaskKind("compression"), std::nullopt);
  EXPECT_EQ(parsePhase("communicate"), std::nullopt);
  for (const AlgorithmTraits &entry : kAlgorithms)
    EXPECT_EQ(parseAlgorithm(toString(entry.value)), entry.value) << entry.spelling;
  for (const RecomputeTraits &entry : kRecomputes)
    EXPECT_EQ(parseRecompute(toString(entry.value)), entry.value) << entry.spelling;
  EXPECT_EQ(parseAlgorithm("nvls"), std::nullopt);
  EXPECT_EQ(parseRecompute("partial"), std::nullopt);
  EXPECT_EQ(parseCompressionMethod("FP16"), std::nullopt);
  EXPECT_EQ(parseCollectiveKind("allreduce"), std::nullopt);
  EXPECT_EQ(parseDeviceWithoutExceptions("cpu"), Device::CPU);
  EXPECT_EQ(parseDeviceWithoutExceptions("tpu"), std::nullopt);
}

TEST(Vocabulary, PlanFileSpellings) {
  // What plan files, cluster files and the command line spell (docs/plan-format.md).
  std::string methods, collectives, kinds, phases;
  for (const CompressionTraits &entry : kCompressionMethods)
    methods += std::string(entry.spelling) + " ";
  for (const CollectiveTraits &entry : kCollectiveKinds)
    collectives += std::string(entry.spelling) + " ";
  for (const TaskKindTraits &entry : kTaskKinds)
    kinds += std::string(entry.spelling) + " ";
  for (const PhaseTraits &entry : kPhases)
    phases += std::string(entry.spelling) + " ";
  EXPECT_EQ(methods, "none fp16 bf16 int8 topk randomk sign powersgd ");
  EXPECT_EQ(collectives, "all_reduce reduce_scatter all_gather all_to_all broadcast send_recv ");
  EXPECT_EQ(kinds, "compute compress collective decompress sparse_sync ");
  EXPECT_EQ(phases, "forward backward optimizer next_forward ");
  std::string algorithms, recomputes;
  for (const AlgorithmTraits &entry : kAlgorithms)
    algorithms += std::string(entry.spelling) + " ";
  for (const RecomputeTraits &entry : kRecomputes)
    recomputes += std::string(entry.spelling) + " ";
  EXPECT_EQ(algorithms, "ring tree hierarchical direct ");
  EXPECT_EQ(recomputes, "none selective full ");
  EXPECT_STREQ(toString(Device::GPU), "gpu");
  EXPECT_STREQ(toString(Device::CPU), "cpu");
}

TEST(Vocabulary, TaskKindTraits) {
  // Communication streams carry collectives and sparse synchronisations; the host's
  // compression worker runs encodes and decodes, nothing else.
  using K = TaskKind;
  std::string communicating, compressing;
  for (K kind : {K::Compute, K::Compress, K::Collective, K::Decompress, K::SparseSync}) {
    if (communicates(kind))
      communicating += std::string(toString(kind)) + " ";
    if (compresses(kind))
      compressing += std::string(toString(kind)) + " ";
  }
  EXPECT_EQ(communicating, "collective sparse_sync ");
  EXPECT_EQ(compressing, "compress decompress ");
}

TEST(Vocabulary, CompressionTraits) {
  using M = CompressionMethod;
  for (M method : {M::None, M::FP16, M::BF16, M::Int8, M::RandomK, M::PowerSGD})
    EXPECT_TRUE(supports(method, SyncScheme::AllReduce)) << toString(method);
  for (M method : {M::TopK, M::Sign})
    EXPECT_FALSE(supports(method, SyncScheme::AllReduce)) << toString(method);
  for (const CompressionTraits &entry : kCompressionMethods)
    EXPECT_EQ(supports(entry.value, SyncScheme::ReduceScatterAllGather), entry.value == M::None)
        << entry.spelling;
  for (const CompressionTraits &entry : kCompressionMethods) {
    EXPECT_EQ(isLossy(entry.value), entry.value != M::None) << entry.spelling;
    EXPECT_EQ(wantsErrorFeedback(entry.value),
              entry.value != M::None && entry.value != M::FP16 && entry.value != M::BF16)
        << entry.spelling;
    EXPECT_EQ(takesRatio(entry.value), entry.value == M::TopK || entry.value == M::RandomK)
        << entry.spelling;
    EXPECT_EQ(takesRank(entry.value), entry.value == M::PowerSGD) << entry.spelling;
  }
}

} // namespace
} // namespace zen::vocab

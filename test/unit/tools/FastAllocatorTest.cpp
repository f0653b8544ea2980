//===- FastAllocatorTest.cpp - the planning tools' heap preparation -------===//
#include "FastAllocator.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <memory>
#include <thread>
#include <vector>

namespace {

/// Resident memory of this process, from /proc/self/statm.
std::size_t residentBytes() {
  std::ifstream statm("/proc/self/statm");
  std::size_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * 4096;
}

// One test: prefaultHeap acts once per process. Where mimalloc is linked, the pages come
// in on their own thread while the program allocates and writes beside it, and what it
// wrote stays as written.
TEST(FastAllocator, PrefaultsOnceWhileAllocationsKeepTheirContent) {
  const std::size_t before = residentBytes();
  zen::tools::prefaultHeap(std::size_t(64) << 20);  // below the threshold: nothing
  EXPECT_LT(residentBytes(), before + (std::size_t(48) << 20));

  constexpr std::size_t kPrefault = std::size_t(512) << 20;
  zen::tools::prefaultHeap(kPrefault);
  // Allocations racing the background faults, as the import's do.
  std::vector<std::unique_ptr<uint64_t[]>> blocks;
  constexpr std::size_t kWords = 512;
  for (uint64_t b = 0; b < 40000; ++b) {
    blocks.emplace_back(new uint64_t[kWords]);
    for (std::size_t w = 0; w < kWords; ++w)
      blocks.back()[w] = b * kWords + w;
  }
  for (uint64_t b = 0; b < blocks.size(); ++b)
    for (std::size_t w = 0; w < kWords; ++w)
      ASSERT_EQ(blocks[b][w], b * kWords + w) << "block " << b;

#ifdef ZEN_HAVE_MIMALLOC
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (residentBytes() < before + kPrefault * 3 / 4 &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_GE(residentBytes(), before + kPrefault * 3 / 4);
#endif
  // Once per process: a second, larger request adds nothing.
  const std::size_t prepared = residentBytes();
  zen::tools::prefaultHeap(std::size_t(2) << 30);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_LT(residentBytes(), prepared + (std::size_t(256) << 20));
}

} // namespace

//===- FastAllocator.cpp - mimalloc settings of the planning tools --------===//
//
// Linked by zen_use_fast_allocator (cmake/ZenUtils.cmake) into the tools that allocate with
// mimalloc. A planning run is one short process whose phases free what the next allocates
// again (ONNX protos, IR, the simulator's task graphs); mimalloc returns freed memory to the
// operating system after 25 ms by default, and the next phase then faults it back in page by
// page. Planning a 100 000-tensor MLP took ~270 000 page faults (a fifth of its CPU time in the
// kernel), ~210 000 with the memory kept. MIMALLOC_ALLOW_DECOMMIT in the environment still
// decides.
//
//===----------------------------------------------------------------------===//
#include "FastAllocator.h"

#ifdef ZEN_HAVE_MIMALLOC
#include <mimalloc.h>

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <thread>
#endif

namespace zen::tools {

#ifdef ZEN_HAVE_MIMALLOC
namespace {

const bool kKeepsFreedMemory = [] {
  if (std::getenv("MIMALLOC_ALLOW_DECOMMIT"))
    return false;
  mi_option_disable(mi_option_allow_decommit);
  return true;
}();

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 // Linux 5.14
#endif

/// mimalloc's arenas start on a segment boundary and hold whole 32 MiB blocks.
constexpr std::size_t kArenaAlignment = std::size_t(64) << 20;
/// Below this the import is over before the pages are in: planning a 10 000-tensor MLP
/// (70 MB) or GPT-3's shapes (28 MB) measured no faster, a 100 000-tensor MLP (755 MB) 9-14%.
/// mimalloc refuses arenas much smaller anyway.
constexpr std::size_t kMinPrefaultBytes = std::size_t(256) << 20;
/// Faulted in this much at a time: the allocator may take a page in the meantime (the kernel
/// keeps its content), and one call then holds the address space's lock briefly.
constexpr std::size_t kPopulateStep = std::size_t(4) << 20;

} // namespace

void prefaultHeap(std::size_t bytes) {
  // Never more than a quarter of the machine's memory.
  const std::size_t physical = static_cast<std::size_t>(sysconf(_SC_PHYS_PAGES)) *
                               static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  const std::size_t populate = std::min(bytes, physical / 4) / kPopulateStep * kPopulateStep;
  static std::atomic<bool> started{false};
  if (populate < kMinPrefaultBytes || started.exchange(true))
    return;
  const std::size_t arenaBytes =
      (populate + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
  // Address space only (MAP_NORESERVE): pages exist once touched.
  void *mapped = mmap(nullptr, arenaBytes + kArenaAlignment, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mapped == MAP_FAILED)
    return;
  auto *arena = reinterpret_cast<char *>(
      (reinterpret_cast<std::uintptr_t>(mapped) + kArenaAlignment - 1) & ~(kArenaAlignment - 1));
  // Fresh anonymous memory reads as zeros: mimalloc need not clear what it hands out.
  if (!mi_manage_os_memory(arena, arenaBytes, /*is_committed=*/true, /*is_large=*/false,
                           /*is_zero=*/true, /*numa_node=*/-1)) {
    munmap(mapped, arenaBytes + kArenaAlignment);
    return;
  }
  // mimalloc takes arena blocks from the start on: the pages are faulted in that order.
  // MADV_POPULATE_WRITE allocates what is absent and leaves what is there untouched, so it
  // may race the allocator's own use. Where the kernel lacks it, the pages fault as before.
  std::thread([arena, populate] {
    for (std::size_t offset = 0; offset < populate; offset += kPopulateStep)
      if (madvise(arena + offset, kPopulateStep, MADV_POPULATE_WRITE) != 0)
        return;
  }).detach();
}

#else

void prefaultHeap(std::size_t) {}

#endif

} // namespace zen::tools

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
#include <mimalloc.h>

#include <cstdlib>

namespace {

const bool kKeepsFreedMemory = [] {
  if (std::getenv("MIMALLOC_ALLOW_DECOMMIT"))
    return false;
  mi_option_disable(mi_option_allow_decommit);
  return true;
}();

} // namespace

//===- FastAllocator.h - preparing the planning tools' heap -----*- C++ -*-===//
#ifndef ZEN_TOOLS_FASTALLOCATOR_H
#define ZEN_TOOLS_FASTALLOCATOR_H

#include <cstddef>

namespace zen::tools {

/// Hands the allocator `bytes` of memory and faults its pages in on a thread of its own, in
/// the order the allocator will use them. Planning is single-threaded while it imports, and
/// the kernel's first touch of each page (a fault, a fresh page zeroed) was an eighth of
/// planning a 100 000-tensor model; the second core does it meanwhile instead. Once per
/// process: the first request of 256 MiB or more (smaller ones gained nothing measurable);
/// without mimalloc (whose arenas take the memory) it does nothing.
void prefaultHeap(std::size_t bytes);

} // namespace zen::tools

#endif // ZEN_TOOLS_FASTALLOCATOR_H

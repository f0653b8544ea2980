# zen_add_unittest(NAME SOURCES... LIBS ...): a GoogleTest binary whose tests ctest discovers.
include(GoogleTest)
function(zen_add_unittest name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest GTest::gtest_main)
  target_compile_definitions(${name} PRIVATE
    ZEN_SOURCE_DIR="${ZEN_SOURCE_DIR}" ZEN_BINARY_DIR="${ZEN_BINARY_DIR}")
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES LABELS unit)
endfunction()

# zen_mlir_tablegen_target(...) wrappers live next to their .td files; this file stays generic.

# zen_use_fast_allocator(TARGET): the executable allocates with mimalloc where it was found.
# Linked without --as-needed (nothing calls it by name) and ahead of the C library, so
# its malloc and free replace glibc's for the whole process, shared libraries included.
# A link feature, not raw --push-state/--pop-state flags: CMake de-duplicates raw flags
# across the link line, and another library's own pop (abseil's) would then unbalance ours.
set(CMAKE_LINK_LIBRARY_USING_ZEN_NO_AS_NEEDED
    "LINKER:--push-state,--no-as-needed" "<LINK_ITEM>" "LINKER:--pop-state")
set(CMAKE_LINK_LIBRARY_USING_ZEN_NO_AS_NEEDED_SUPPORTED TRUE)
# tools/FastAllocator.cpp sets mimalloc's options for a short planning process.
# Without mimalloc, FastAllocator.cpp's prefaultHeap does nothing.
function(zen_use_fast_allocator target)
  target_sources(${target} PRIVATE ${PROJECT_SOURCE_DIR}/tools/FastAllocator.cpp)
  if(TARGET mimalloc)
    target_link_libraries(${target} PRIVATE "$<LINK_LIBRARY:ZEN_NO_AS_NEEDED,mimalloc>")
    target_compile_definitions(${target} PRIVATE ZEN_HAVE_MIMALLOC)
  endif()
endfunction()

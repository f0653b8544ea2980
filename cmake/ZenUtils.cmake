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
function(zen_use_fast_allocator target)
  if(TARGET mimalloc)
    target_link_libraries(${target} PRIVATE "-Wl,--push-state,--no-as-needed" mimalloc "-Wl,--pop-state")
  endif()
endfunction()

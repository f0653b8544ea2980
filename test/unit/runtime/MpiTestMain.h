//===- MpiTestMain.h - main() for GoogleTest binaries that use MPI ---------===//
//
// ctest runs many of these processes at once, and Open MPI 4 races when two
// processes create its shared session directory (/tmp/ompi.<host>.<uid>) at
// the same moment ("mkdir ... File exists"). Each process therefore gets a
// private TMPDIR, which Open MPI uses as the session directory's base.
//
//===----------------------------------------------------------------------===//
#ifndef ZEN_TEST_UNIT_RUNTIME_MPITESTMAIN_H
#define ZEN_TEST_UNIT_RUNTIME_MPITESTMAIN_H

#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdlib>
#include <filesystem>
#include <string>

inline int runMpiTests(int argc, char **argv) {
  std::string tmpdir = (std::filesystem::temp_directory_path() / "zenrt-test.XXXXXX").string();
  bool isolated = ::mkdtemp(tmpdir.data()) != nullptr;
  if (isolated)
    ::setenv("TMPDIR", tmpdir.c_str(), 1);
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  testing::InitGoogleTest(&argc, argv);
  int result = RUN_ALL_TESTS();
  MPI_Finalize();
  if (isolated) {
    std::error_code ignored;
    std::filesystem::remove_all(tmpdir, ignored);
  }
  return result;
}

#endif // ZEN_TEST_UNIT_RUNTIME_MPITESTMAIN_H

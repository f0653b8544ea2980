//===- MpiCheck.h - the frame of the runtime's numerics checks -*- C++ -*-===//
//
// What zenrt-moe-check and zenrt-tp-check share: command-line parsing, MPI set-up and
// tear-down, errors mapped to exit codes, and the verdict agreed over every rank.
//
//===----------------------------------------------------------------------===//
#ifndef ZEN_TOOLS_MPICHECK_H
#define ZEN_TOOLS_MPICHECK_H

#include "ExitCodes.h"
#include "zenrt/Runtime.h"

#include <CLI/CLI.hpp>
#include <mpi.h>

#include <cstdio>

namespace zen::cli {

/// Parses `app` (usage errors exit 2 before MPI starts), then runs `check(rank, size)`, which
/// returns the exit status, between MPI_Init and MPI_Finalize. A zenrt::Error is printed as
/// "<tool>: error: ..." and exits 2 for an invalid argument, 70 otherwise; after a timeout
/// the job ends with MPI_Abort.
template <typename Check>
int runMpiCheck(CLI::App &app, const char *tool, int argc, char **argv, Check check) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp &) {
    std::printf("%s", app.help().c_str());
    return 0;
  } catch (const CLI::ParseError &error) {
    std::fprintf(stderr, "%s: error: %s\n", tool, error.what());
    return ExitUsage;
  }
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int status = 0;
  try {
    status = check(rank, size);
  } catch (const zenrt::Error &error) {
    std::fprintf(stderr, "%s: error: %s\n", tool, error.what());
    status = error.status == ZENRT_ERR_INVALID_ARGUMENT ? ExitUsage : ExitSoftware;
    if (error.status == ZENRT_ERR_TIMEOUT) {
      // A peer is dead or hung: MPI_Finalize would wait for it.
      std::fprintf(stderr, "%s: rank %d: ending the job (MPI_Abort, exit status %d)\n", tool,
                   rank, status);
      std::fflush(stderr);
      MPI_Abort(MPI_COMM_WORLD, status);
    }
  }
  MPI_Finalize();
  return status;
}

/// True when `ok` holds on every rank; rank 0 prints "<what> numerics: OK" or "FAILED".
inline bool agreeOnEveryRank(bool ok, int rank, const char *what) {
  int local = ok ? 1 : 0, all = 0;
  MPI_Allreduce(&local, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (rank == 0)
    std::printf("%s numerics: %s\n", what, all ? "OK" : "FAILED");
  return all != 0;
}

} // namespace zen::cli

#endif // ZEN_TOOLS_MPICHECK_H

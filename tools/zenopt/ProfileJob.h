//===- ProfileJob.h - one profiling job, shared by zenopt profile and libzenprofile ===//
//
// Loads the base cluster, measures it (cost::profileCluster) and has rank 0 write the
// cluster file. Collective over MPI_COMM_WORLD, which must be initialised with
// MPI_THREAD_MULTIPLE; every failure is decided alike on every rank, so no rank is left
// waiting in a collective for one that gave up.
//
//===----------------------------------------------------------------------===//
#ifndef ZEN_TOOLS_ZENOPT_PROFILEJOB_H
#define ZEN_TOOLS_ZENOPT_PROFILEJOB_H

#include "zen/CostModel/Profiler.h"

#include <string>

namespace zen::cli {

struct ProfileJob {
  std::string baseCluster = "cpu-local";  // preset name or cluster file
  std::string output;                     // the cluster file rank 0 writes
  cost::ProfileOptions profile;
  /// Rank 0 reports the start and the file written (to `profile.progress`).
  bool announce = false;
};

/// The exit code (ExitCodes.h), the same on every rank; `error` says why on rank 0.
int runProfileJob(const ProfileJob &job, std::string &error);

} // namespace zen::cli

#endif // ZEN_TOOLS_ZENOPT_PROFILEJOB_H

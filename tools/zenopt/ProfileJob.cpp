//===- ProfileJob.cpp - one profiling job ---------------------------------===//
#include "ProfileJob.h"

#include "ExitCodes.h"
#include "zen/Support/FileIO.h"

#include <mpi.h>

namespace zen::cli {
namespace {

/// Rank 0's code, on every rank.
int agree(int code) {
  MPI_Bcast(&code, 1, MPI_INT, 0, MPI_COMM_WORLD);
  return code;
}

/// Fails early, before seconds of measuring, when the output cannot be created: the
/// output is written aside and discarded, as the real write will do and then commit.
std::string checkWritable(const std::string &path) {
  try {
    zen::io::OutputFiles probe;
    probe.add(path, "");
  } catch (const zen::io::FileError &error) {
    return error.what();
  }
  return "";
}

} // namespace

int runProfileJob(const ProfileJob &job, std::string &error) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const bool leader = rank == 0;
  auto say = [&](const std::string &text) {
    if (leader && job.announce && job.profile.progress)
      job.profile.progress(text, /*final=*/true);
  };

  cost::Cluster base;
  try {
    base = cost::loadCluster(job.baseCluster);  // the same outcome on every rank
  } catch (const cost::ClusterError &failure) {
    error = failure.what();
    return exitCodeOf(failure.kind);
  }
  error = leader ? checkWritable(job.output) : "";
  if (agree(error.empty() ? ExitSuccess : ExitCantCreate) != ExitSuccess)
    return ExitCantCreate;

  say("zenopt profile: " + std::to_string(size) + " ranks, backend " + job.profile.backend +
      (job.profile.quick ? ", quick sweep" : "") + ", base cluster " + base.name);
  cost::Cluster profiled;
  try {
    profiled = cost::profileCluster(base, job.profile);
  } catch (const cost::ProfileError &failure) {
    error = failure.what();
    return exitCodeOf(failure.kind);
  }

  int written = ExitSuccess;
  if (leader) {
    try {
      cost::writeClusterFile(profiled, job.output);
    } catch (const cost::ClusterError &failure) {
      written = exitCodeOf(failure.kind);
      error = failure.what();
    }
  }
  if (agree(written) != ExitSuccess)
    return written;
  say("zenopt profile: wrote " + job.output + " (" + std::to_string(profiled.profiled.size()) +
      " fitted size ranges)");
  return ExitSuccess;
}

} // namespace zen::cli

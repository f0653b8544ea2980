//===- ProfileCommand.cpp - `zenopt profile`: calibrate the cost model ----===//
//
//   mpirun -np 4 zenopt profile [--backend mpi|nccl] -o cluster.json [--cluster BASE] [--quick]
//
// Every rank measures; rank 0 alone reports progress and writes the file.
// Each failure is decided collectively (the same on every rank) so no rank is
// left waiting in a collective for one that gave up.
//
//===----------------------------------------------------------------------===//
#include "Command.h"
#include "ExitCodes.h"
#include "ProfileJob.h"

#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>

namespace zen::cli {
namespace {

struct ProfileCommandOptions {
  std::string backend = "mpi";
  std::string output;
  std::string cluster = "cpu-local";
  bool quick = false;
};

/// MPI for the duration of the command (zenopt may also run without mpirun:
/// then it is a job of one rank).
class MpiSession {
public:
  MpiSession() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      // As the runtime initialises it (its progress thread calls MPI): the profile measures
      // MPI as plans run on it, and times the runtime itself beside compute.
      int provided = 0;
      MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
      owned_ = true;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  ~MpiSession() {
    if (owned_)
      MPI_Finalize();
  }
  int rank() const { return rank_; }
  int size() const { return size_; }

  void barrier() const { MPI_Barrier(MPI_COMM_WORLD); }

private:
  bool owned_ = false;
  int rank_ = 0, size_ = 1;
};

int runProfile(const ProfileCommandOptions &options) {
  MpiSession mpi;
  bool tty = isatty(STDERR_FILENO);
  ProfileJob job;
  job.baseCluster = options.cluster;
  job.output = options.output;
  job.announce = true;
  job.profile.backend = options.backend;
  job.profile.quick = options.quick;
  job.profile.progress = [tty](const std::string &text, bool final) {
    // A terminal gets one self-overwriting status line; logs get final lines only.
    if (tty)
      std::cerr << "\r\033[K" << text << (final ? "\n" : "") << std::flush;
    else if (final)
      std::cerr << text << "\n";
  };
  std::string error;
  const int code = runProfileJob(job, error);
  // Only rank 0 prints an error; the others exit with the same code quietly, once it has
  // (mpirun ends the whole job when a rank exits with an error, the printing one too).
  if (code != ExitSuccess) {
    if (mpi.rank() == 0) {
      reportError(error, code);
      std::cerr.flush();
    }
    mpi.barrier();
  }
  return code;
}

CommandRegistration registration(
    "profile", "Measure collectives under mpirun and write a calibrated cluster file",
    [](CLI::App &app) -> std::function<int()> {
      auto options = std::make_shared<ProfileCommandOptions>();
      app.add_option("--backend", options->backend, "Communication backend to measure")
          ->check(CLI::IsMember({"mpi", "nccl"}));
      app.add_option("-o,--output", options->output, "Cluster JSON file to write")->required();
      app.add_option("--cluster", options->cluster,
                     "Base cluster (preset or file) the measurements refine (default: cpu-local)");
      app.add_flag("--quick", options->quick,
                   "Small sweep (4 B .. 1 MiB, few repetitions) for tests: seconds instead of minutes");
      return [options]() -> int {
        if (options->backend == "nccl" && !cost::haveNcclBackend())
          throw CommandError(ExitUsage, "--backend nccl: this zenopt was built without CUDA and NCCL");
        return runProfile(*options);
      };
    });

} // namespace
} // namespace zen::cli

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

#include "zen/CostModel/Profiler.h"
#include "zen/Support/FileIO.h"

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

  /// Rank 0's exit code, on every rank.
  int agree(int code) const {
    MPI_Bcast(&code, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return code;
  }
  void barrier() const { MPI_Barrier(MPI_COMM_WORLD); }

private:
  bool owned_ = false;
  int rank_ = 0, size_ = 1;
};

/// Fails early, before minutes of measuring, when the output cannot be created: the
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

int runProfile(const ProfileCommandOptions &options) {
  MpiSession mpi;
  bool leader = mpi.rank() == 0;
  // Only rank 0 prints an error; the others exit with the same code quietly, once it has
  // (mpirun ends the whole job when a rank exits with an error, the printing one too).
  auto fail = [&](int code, const std::string &message) -> int {
    if (leader) {
      reportError(message, code);
      std::cerr.flush();
    }
    mpi.barrier();
    return code;
  };

  cost::Cluster base;
  try {
    base = cost::loadCluster(options.cluster);  // the same outcome on every rank
  } catch (const cost::ClusterError &error) {
    return fail(exitCodeOf(error.kind), error.what());
  }
  std::string unwritable = leader ? checkWritable(options.output) : "";
  if (mpi.agree(unwritable.empty() ? ExitSuccess : ExitCantCreate) != ExitSuccess)
    return fail(ExitCantCreate, unwritable);

  bool tty = isatty(STDERR_FILENO);
  cost::ProfileOptions profile;
  profile.backend = options.backend;
  profile.quick = options.quick;
  profile.progress = [tty](const std::string &text, bool final) {
    // A terminal gets one self-overwriting status line; logs get final lines only.
    if (tty)
      std::cerr << "\r\033[K" << text << (final ? "\n" : "") << std::flush;
    else if (final)
      std::cerr << text << "\n";
  };
  if (leader)
    std::cerr << "zenopt profile: " << mpi.size() << " ranks, backend " << options.backend
              << (options.quick ? ", quick sweep" : "") << ", base cluster " << base.name << "\n";

  cost::Cluster profiled;
  try {
    profiled = cost::profileCluster(base, profile);
  } catch (const cost::ProfileError &error) {
    return fail(exitCodeOf(error.kind), error.what());
  }

  std::string writeError;
  int written = ExitSuccess;
  if (leader) {
    try {
      cost::writeClusterFile(profiled, options.output);
    } catch (const cost::ClusterError &error) {
      written = exitCodeOf(error.kind);
      writeError = error.what();
    }
  }
  if (mpi.agree(written) != ExitSuccess)
    return fail(written, writeError);
  if (leader)
    std::cerr << "zenopt profile: wrote " << options.output << " (" << profiled.profiled.size()
              << " fitted size ranges)\n";
  return ExitSuccess;
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

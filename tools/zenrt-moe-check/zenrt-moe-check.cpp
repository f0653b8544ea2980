//===- zenrt-moe-check.cpp - numerics of libzenrt's pipelined MoE layer ----===//
//
// Under mpirun: runs zenrt::moe::forward and backward on deterministic random inputs and
// output gradients for every chunk count r and all-to-all algorithm asked for, and checks
// that the output, the input gradient and the experts' weight gradients equal (1) the
// unpipelined flat run (r = 1) bit for bit and (2) a reference computed here, with no
// communication (MoeCheck.h), within fp32 rounding (the runtime's GEMMs add in blocked order)
// — so a row delivered to the wrong rank, expert or slot, or a chunk mixed up, fails. The
// reference shares no code with the runtime.
//
// With --device the layer runs in CUDA device memory with NCCL (scripts/gpu-checks.sh); the
// reference and the checks stay on the host.
//
// With --time N it then times N forwards per r and algorithm (the slowest rank's, median),
// and with --predict-on CLUSTER prints the cost model's forward time of the same layer
// (cost::moePhaseUs, flat) next to it: issue 15's measured-against-predicted degree
// (bench/moe/degree.py).
//
//===----------------------------------------------------------------------===//
#include "CliChecks.h"
#include "ExitCodes.h"
#include "MoeCheck.h"
#include "MpiCheck.h"
#include "zen/CostModel/Cluster.h"
#include "zen/CostModel/Moe.h"
#include "zenrt/Moe.h"
#include "zenrt/Runtime.h"

#include <CLI/CLI.hpp>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using Values = zen::cli::DeterministicValues;
using zen::cli::MoeResult;

struct Options {
  int64_t experts = 8, hidden = 16, ffn = 32, capacity = 8, ranksPerNode = 2;
  std::vector<int64_t> chunks{1, 2, 4, 8};
  std::vector<std::string> algorithms{"flat", "2d"};
  std::string tokens = "none"; // how rows travel (zenrt::moe::TokenFormat)
  uint64_t seed = 1;
  double timeout = 60;
  int64_t timed = 0;     // forwards timed per r and algorithm (0: none)
  std::string predictOn; // cluster whose cost model predicts each r (flat)
  bool device = false;   // the layer in CUDA device memory, NCCL
};

/// The cost model's forward of this layer on `size` ranks of `cluster`, flat
/// all-to-all, every capacity row computed (as the runtime does).
double predictedUs(const Options &o, int size, int64_t chunks) {
  const zen::cost::CostModel model(zen::cost::loadCluster(o.predictOn));
  zen::cost::MoeShape shape;
  shape.experts = o.experts;
  shape.hidden = o.hidden;
  shape.ffn = o.ffn;
  shape.capacityRows = o.capacity;
  shape.topK = 1;
  shape.tokens = o.capacity * o.experts; // the mean load fills the capacity
  const zen::cost::Group ranks{size, 1};
  return zen::cost::moePhaseUs(model, shape, size, ranks, chunks,
                               zen::cost::AllToAllAlgorithm::Flat, false, 1.0,
                               zen::cost::DType::F32);
}

int run(const Options &o, int rank, int size) {
  zenrt::moe::Communicator ranks(
      nullptr, o.device ? zenrt::moe::Memory::Device : zenrt::moe::Memory::Host, o.timeout);
  const int64_t local = o.experts / std::max(size, 1);
  const size_t layerFloats = size_t(o.experts * o.capacity * o.hidden);
  zenrt::moe::Layer layer;
  layer.experts = o.experts;
  layer.hidden = o.hidden;
  layer.ffn = o.ffn;
  layer.capacity = o.capacity;
  const zen::cli::MoeWeights weights(layer, o.seed);
  weights.lend(layer, rank * local);
  // Every rank's inputs, for the reference's weight gradients over all of them.
  std::vector<std::vector<float>> dispatched, combinedGradient;
  for (int s = 0; s < size; ++s) {
    dispatched.push_back(Values(o.seed + 1000 + uint64_t(s)).take(layerFloats));
    combinedGradient.push_back(Values(o.seed + 2000 + uint64_t(s)).take(layerFloats));
  }

  auto scheduleOf = [&](int64_t chunks, const std::string &algorithm) {
    zenrt::moe::Schedule schedule;
    schedule.chunks = chunks;
    schedule.algorithm =
        algorithm == "2d" ? zenrt::moe::AllToAll::Hierarchical : zenrt::moe::AllToAll::Flat;
    schedule.ranksPerNode = o.ranksPerNode;
    schedule.timeoutSeconds = o.timeout;
    schedule.tokens = o.tokens == "fp16"   ? zenrt::moe::TokenFormat::Fp16
                      : o.tokens == "bf16" ? zenrt::moe::TokenFormat::Bf16
                      : o.tokens == "int8" ? zenrt::moe::TokenFormat::Int8
                                           : zenrt::moe::TokenFormat::None;
    return schedule;
  };
  auto forwardAndBackward = [&](int64_t chunks, const std::string &algorithm) {
    return zen::cli::runLayer(layer, scheduleOf(chunks, algorithm), chunks, chunks,
                              dispatched[size_t(rank)], combinedGradient[size_t(rank)], ranks,
                              [] {});
  };
  const zenrt::moe::TokenFormat tokens = scheduleOf(1, "flat").tokens;
  const zen::cli::MoeReference expected =
      zen::cli::referenceRun(layer, weights, dispatched, combinedGradient, rank, tokens);
  const MoeResult unpipelined = forwardAndBackward(1, "flat");
  const double tolerance = zen::cli::referenceTolerance(tokens);

  bool ok = true;
  std::ostringstream report;
  auto check = [&](const std::string &what, const MoeResult &got) {
    const double error = zen::cli::maxRelativeError(got, expected);
    const std::string difference = zen::cli::firstDifference(got, unpipelined);
    if (error > tolerance || !difference.empty()) {
      ok = false;
      report << "rank " << rank << ": " << what << ": "
             << (!difference.empty()
                     ? difference + " differs from the unpipelined run's"
                     : "max error " + std::to_string(error) + " against the reference")
             << "\n";
    }
  };
  check("flat r=1", unpipelined);
  for (const std::string &name : o.algorithms)
    for (int64_t chunks : o.chunks) {
      check(name + " r=" + std::to_string(chunks), forwardAndBackward(chunks, name));
      if (rank == 0)
        std::printf("%s r=%lld: forward and backward checked\n", name.c_str(),
                    static_cast<long long>(chunks));
    }
  if (!ok)
    std::fprintf(stderr, "%s", report.str().c_str());
  if (!zen::cli::agreeOnEveryRank(ok, rank, "moe"))
    return 1;
  for (const std::string &name : o.algorithms)
    for (int64_t chunks : o.chunks) {
      if (o.timed < 1)
        break;
      const zenrt::moe::Schedule schedule = scheduleOf(chunks, name);
      zen::cli::StagedLayer staged(layer, ranks, dispatched[size_t(rank)],
                                   combinedGradient[size_t(rank)]);
      auto forward = [&] {
        zenrt::moe::forward(staged.layer, schedule, staged.dispatched(), staged.combined(),
                            ranks);
      };
      forward(); // warm-up
      std::vector<double> slowest;
      for (int64_t i = 0; i < o.timed; ++i) {
        MPI_Barrier(MPI_COMM_WORLD);
        const double start = MPI_Wtime();
        forward();
        double seconds = MPI_Wtime() - start, most = 0;
        MPI_Allreduce(&seconds, &most, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        slowest.push_back(most);
      }
      std::sort(slowest.begin(), slowest.end());
      if (rank == 0)
        std::printf("time %s r=%lld: measured %.1f us\n", name.c_str(),
                    static_cast<long long>(chunks), 1e6 * slowest[slowest.size() / 2]);
    }
  if (rank == 0 && !o.predictOn.empty())
    for (int64_t chunks : o.chunks) {
      try {
        std::printf("predicted flat r=%lld on %s: %.1f us\n", static_cast<long long>(chunks),
                    o.predictOn.c_str(), predictedUs(o, size, chunks));
      } catch (const zen::Error &error) {
        std::fprintf(stderr, "zenrt-moe-check: error: --predict-on: %s\n", error.what());
        return zen::cli::ExitUsage; // the layer comes from this tool's flags
      }
    }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  CLI::App app{"zenrt-moe-check: under mpirun, checks that libzenrt's pipelined MoE layer "
               "gives the unpipelined result bit for bit"};
  Options o;
  app.add_option("--experts", o.experts, "Experts (the ranks must divide them)")
      ->check(zen::cli::wholeNumber(1, 1 << 16));
  app.add_option("--hidden", o.hidden, "Hidden size")->check(zen::cli::wholeNumber(1, 1 << 16));
  app.add_option("--ffn", o.ffn, "Inter size of an expert")
      ->check(zen::cli::wholeNumber(1, 1 << 16));
  app.add_option("--capacity", o.capacity, "Rows per expert each rank sends")
      ->check(zen::cli::wholeNumber(1, 1 << 16));
  app.add_option("--chunks", o.chunks, "Pipelining degrees r to check")
      ->delimiter(',')
      ->check(zen::cli::wholeNumber(1, 1 << 16));
  app.add_option("--algorithms", o.algorithms, "All-to-all algorithms: flat, 2d")
      ->delimiter(',')
      ->check(CLI::IsMember({"flat", "2d"}));
  app.add_option("--tokens", o.tokens,
                 "How rows travel in the all-to-alls: none (fp32), fp16, bf16, int8")
      ->check(CLI::IsMember({"none", "fp16", "bf16", "int8"}));
  app.add_option("--ranks-per-node", o.ranksPerNode, "Ranks per node of the 2D all-to-all")
      ->check(zen::cli::wholeNumber(1, 1 << 16));
  app.add_option("--seed", o.seed, "Seed of the inputs and weights");
  app.add_option("--timeout", o.timeout, "Seconds any wait may take")
      ->check(CLI::Range(0.1, 3600.0));
  app.add_flag("--device", o.device,
               "Run the layer in CUDA device memory with NCCL (rank r on device r % devices)");
  app.add_option("--time", o.timed, "After the checks, time this many forwards per r")
      ->check(zen::cli::wholeNumber(0, 1 << 20));
  app.add_option("--predict-on", o.predictOn,
                 "Print the cost model's forward time per r on this cluster preset or file")
      ->check([](const std::string &cluster) -> std::string {
        try {
          zen::cost::loadCluster(cluster);
          return "";
        } catch (const zen::cost::ClusterError &error) {
          return error.what();
        }
      });
  return zen::cli::runMpiCheck(app, "zenrt-moe-check", argc, argv,
                               [&](int rank, int size) { return run(o, rank, size); });
}

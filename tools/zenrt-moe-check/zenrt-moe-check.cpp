//===- zenrt-moe-check.cpp - numerics of libzenrt's pipelined MoE layer ----===//
//
// Under mpirun: runs zenrt::moe::forward on deterministic random inputs for every chunk
// count r and all-to-all algorithm asked for, and checks that each output equals (1) the
// unpipelined flat run (r = 1) bit for bit and (2) a reference computed here, with no
// communication, by applying each expert's MLP to the rows this rank dispatched to it, within
// fp32 rounding (the runtime's GEMMs add in blocked order) — so a row delivered to the wrong
// rank, expert or slot, or a chunk mixed up, fails. The reference shares no code with the
// runtime.
//
// With --time N it then times N forwards per r and algorithm (the slowest rank's, median),
// and with --predict-on CLUSTER prints the cost model's forward time of the same layer
// (cost::moePhaseUs, flat) next to it: issue 15's measured-against-predicted degree
// (bench/moe/degree.py).
//
//===----------------------------------------------------------------------===//
#include "CliChecks.h"
#include "MpiCheck.h"
#include "DeterministicValues.h"
#include "ExitCodes.h"
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
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using Values = zen::cli::DeterministicValues;

struct Options {
  int64_t experts = 8, hidden = 16, ffn = 32, capacity = 8, ranksPerNode = 2;
  std::vector<int64_t> chunks{1, 2, 4, 8};
  std::vector<std::string> algorithms{"flat", "2d"};
  uint64_t seed = 1;
  double timeout = 60;
  int64_t timed = 0;     // forwards timed per r and algorithm (0: none)
  std::string predictOn; // cluster whose cost model predicts each r (flat)
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

/// Expert e on one row: fc2 relu(fc1 x + b1) + b2.
void reference(const Options &o, const std::vector<float> &fc1, const std::vector<float> &b1,
               const std::vector<float> &fc2, const std::vector<float> &b2, int64_t e,
               const float *x, float *y) {
  std::vector<float> units(size_t(o.ffn));
  for (int64_t u = 0; u < o.ffn; ++u) {
    float sum = b1[size_t(e * o.ffn + u)];
    for (int64_t k = 0; k < o.hidden; ++k)
      sum += fc1[size_t((e * o.ffn + u) * o.hidden + k)] * x[k];
    units[size_t(u)] = sum > 0 ? sum : 0.0f;
  }
  for (int64_t out = 0; out < o.hidden; ++out) {
    float sum = b2[size_t(e * o.hidden + out)];
    for (int64_t u = 0; u < o.ffn; ++u)
      sum += fc2[size_t((e * o.hidden + out) * o.ffn + u)] * units[size_t(u)];
    y[out] = sum;
  }
}

/// The first row where `a` and `b` differ (bit for bit, or beyond fp32 rounding of sums of
/// a few hundred terms when `rounding`), or -1.
int64_t firstDifference(const std::vector<float> &a, const std::vector<float> &b, int64_t hidden,
                        bool rounding = false) {
  for (size_t i = 0; i < a.size(); ++i)
    if (rounding ? !(std::abs(a[i] - b[i]) <= 1e-4f * std::max(1.0f, std::abs(b[i])))
                 : std::memcmp(&a[i], &b[i], sizeof(float)) != 0)
      return int64_t(i) / hidden;
  return -1;
}

int run(const Options &o, int rank, int size) {
  const int64_t local = o.experts / std::max(size, 1);
  const size_t layerFloats = size_t(o.experts * o.capacity * o.hidden);
  // Every rank draws every expert's weights from the seed and keeps its own.
  Values weights(o.seed);
  const std::vector<float> fc1 = weights.take(size_t(o.experts * o.ffn * o.hidden));
  const std::vector<float> b1 = weights.take(size_t(o.experts * o.ffn));
  const std::vector<float> fc2 = weights.take(size_t(o.experts * o.hidden * o.ffn));
  const std::vector<float> b2 = weights.take(size_t(o.experts * o.hidden));
  const std::vector<float> dispatched = Values(o.seed + 1000 + uint64_t(rank)).take(layerFloats);

  zenrt::moe::Layer layer;
  layer.experts = o.experts;
  layer.hidden = o.hidden;
  layer.ffn = o.ffn;
  layer.capacity = o.capacity;
  const int64_t first = rank * local;
  layer.fc1 = fc1.data() + first * o.ffn * o.hidden;
  layer.fc1Bias = b1.data() + first * o.ffn;
  layer.fc2 = fc2.data() + first * o.hidden * o.ffn;
  layer.fc2Bias = b2.data() + first * o.hidden;

  std::vector<float> expected(layerFloats);
  for (int64_t e = 0; e < o.experts; ++e)
    for (int64_t c = 0; c < o.capacity; ++c) {
      const size_t row = size_t((e * o.capacity + c) * o.hidden);
      reference(o, fc1, b1, fc2, b2, e, &dispatched[row], &expected[row]);
    }

  auto forward = [&](int64_t chunks, zenrt::moe::AllToAll algorithm) {
    zenrt::moe::Schedule schedule;
    schedule.chunks = chunks;
    schedule.algorithm = algorithm;
    schedule.ranksPerNode = o.ranksPerNode;
    schedule.timeoutSeconds = o.timeout;
    std::vector<float> combined(layerFloats, std::nanf(""));
    zenrt::moe::forward(layer, schedule, dispatched.data(), combined.data());
    return combined;
  };
  const std::vector<float> unpipelined = forward(1, zenrt::moe::AllToAll::Flat);

  bool ok = true;
  std::ostringstream report;
  auto check = [&](const std::string &what, const std::vector<float> &got) {
    int64_t vsReference = firstDifference(got, expected, o.hidden, /*rounding=*/true);
    int64_t vsUnpipelined = firstDifference(got, unpipelined, o.hidden);
    if (vsReference >= 0 || vsUnpipelined >= 0) {
      ok = false;
      report << "rank " << rank << ": " << what << ": row "
             << (vsReference >= 0 ? vsReference : vsUnpipelined) << " differs from the "
             << (vsReference >= 0 ? "reference" : "unpipelined run") << "\n";
    }
  };
  check("flat r=1", unpipelined);
  for (const std::string &name : o.algorithms)
    for (int64_t chunks : o.chunks) {
      auto algorithm =
          name == "2d" ? zenrt::moe::AllToAll::Hierarchical : zenrt::moe::AllToAll::Flat;
      check(name + " r=" + std::to_string(chunks), forward(chunks, algorithm));
      if (rank == 0)
        std::printf("%s r=%lld: checked\n", name.c_str(), static_cast<long long>(chunks));
    }
  if (!ok)
    std::fprintf(stderr, "%s", report.str().c_str());
  if (!zen::cli::agreeOnEveryRank(ok, rank, "moe"))
    return 1;
  for (const std::string &name : o.algorithms)
    for (int64_t chunks : o.chunks) {
      if (o.timed < 1)
        break;
      auto algorithm =
          name == "2d" ? zenrt::moe::AllToAll::Hierarchical : zenrt::moe::AllToAll::Flat;
      forward(chunks, algorithm); // warm-up
      std::vector<double> slowest;
      for (int64_t i = 0; i < o.timed; ++i) {
        MPI_Barrier(MPI_COMM_WORLD);
        const double start = MPI_Wtime();
        forward(chunks, algorithm);
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
      } catch (const std::invalid_argument &error) {
        std::fprintf(stderr, "zenrt-moe-check: error: --predict-on: %s\n", error.what());
        return zen::cli::ExitUsage;
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
  app.add_option("--ranks-per-node", o.ranksPerNode, "Ranks per node of the 2D all-to-all")
      ->check(zen::cli::wholeNumber(1, 1 << 16));
  app.add_option("--seed", o.seed, "Seed of the inputs and weights");
  app.add_option("--timeout", o.timeout, "Seconds any wait may take")
      ->check(CLI::Range(0.1, 3600.0));
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

//===- zenrt-tp-check.cpp - numerics of libzenrt's tensor-parallel MLP ----===//
//
// Under mpirun: every rank draws the whole MLP (fc1 [ffn x hidden], fc2 [hidden x ffn]) and
// the input from the seed, keeps its column shard of fc1 and row shard of fc2 (ffn / ranks
// inner features), and runs zenrt::tp::mlpForward for every chunk count k asked for. Checks
// that (1) every k gives the k = 1 output bit for bit, (2) every rank holds the same output,
// and (3) the output equals the unpartitioned MLP computed here without communication
// within fp32 rounding (the partial sums add in another order). The ranks keep one watch
// (zenrt/WatchedWaits.h) for every run: a wait that times out names the rank that stopped
// answering (test/Runtime/killed-rank.test kills one with the hidden --fault-kill-rank).
//
//===----------------------------------------------------------------------===//
#include "CliChecks.h"
#include "MpiCheck.h"
#include "DeterministicValues.h"
#include "ExitCodes.h"
#include "zenrt/Runtime.h"
#include "zenrt/TensorParallel.h"
#include "zenrt/WatchedWaits.h"

#include <CLI/CLI.hpp>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <csignal>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct Options {
  int64_t tokens = 64, hidden = 32, ffn = 128;
  std::vector<int64_t> chunks{1, 2, 4, 8};
  uint64_t seed = 1;
  double timeout = 60;
  int killRank = -1;  // test hook: this rank dies (SIGKILL) before its first run
};

/// The unpartitioned MLP in double: fc2 relu(fc1 x) per row.
std::vector<double> reference(const Options &o, const std::vector<float> &fc1,
                              const std::vector<float> &fc2, const std::vector<float> &input) {
  std::vector<double> out(size_t(o.tokens * o.hidden)), units(size_t(o.ffn));
  for (int64_t t = 0; t < o.tokens; ++t) {
    for (int64_t u = 0; u < o.ffn; ++u) {
      double sum = 0;
      for (int64_t k = 0; k < o.hidden; ++k)
        sum += double(fc1[size_t(u * o.hidden + k)]) * input[size_t(t * o.hidden + k)];
      units[size_t(u)] = std::max(sum, 0.0);
    }
    for (int64_t j = 0; j < o.hidden; ++j) {
      double sum = 0;
      for (int64_t u = 0; u < o.ffn; ++u)
        sum += double(fc2[size_t(j * o.ffn + u)]) * units[size_t(u)];
      out[size_t(t * o.hidden + j)] = sum;
    }
  }
  return out;
}

int run(const Options &o, int rank, int size) {
  if (o.ffn % size != 0)
    throw zenrt::Error(ZENRT_ERR_INVALID_ARGUMENT, "the " + std::to_string(size) +
                                                       " ranks do not divide the " +
                                                       std::to_string(o.ffn) + " inner features");
  const int64_t shardWidth = o.ffn / size, first = rank * shardWidth;
  zen::cli::DeterministicValues values(o.seed);
  const std::vector<float> fc1 = values.take(size_t(o.ffn * o.hidden));
  const std::vector<float> fc2 = values.take(size_t(o.hidden * o.ffn));
  const std::vector<float> input = values.take(size_t(o.tokens * o.hidden));
  // This rank's shards: rows [first, first + shardWidth) of fc1, those columns of fc2.
  std::vector<float> fc1Shard(fc1.begin() + first * o.hidden,
                              fc1.begin() + (first + shardWidth) * o.hidden);
  std::vector<float> fc2Shard(size_t(o.hidden * shardWidth));
  for (int64_t j = 0; j < o.hidden; ++j)
    std::copy_n(&fc2[size_t(j * o.ffn + first)], shardWidth, &fc2Shard[size_t(j * shardWidth)]);
  zenrt::tp::MlpShard shard;
  shard.hidden = o.hidden;
  shard.ffnShard = shardWidth;
  shard.fc1 = fc1Shard.data();
  shard.fc2 = fc2Shard.data();

  zenrt::WatchedWaits waits(nullptr, o.timeout);
  if (rank == o.killRank) {
    std::fprintf(stderr, "zenrt-tp-check: rank %d: fault injection: killed\n", rank);
    std::fflush(stderr);
    std::raise(SIGKILL);
  }
  auto forward = [&](int64_t chunks) {
    zenrt::tp::Schedule schedule;
    schedule.chunks = chunks;
    schedule.timeoutSeconds = o.timeout;
    schedule.waits = &waits;
    std::vector<float> output(size_t(o.tokens * o.hidden), std::nanf(""));
    zenrt::tp::mlpForward(shard, schedule, o.tokens, input.data(), output.data());
    return output;
  };
  const std::vector<float> whole = forward(1);
  const std::vector<double> expected = reference(o, fc1, fc2, input);
  double scale = 0;
  for (double v : expected)
    scale = std::max(scale, std::abs(v));

  bool ok = true;
  auto check = [&](int64_t chunks, const std::vector<float> &got) {
    if (std::memcmp(got.data(), whole.data(), got.size() * sizeof(float)) != 0) {
      ok = false;
      std::fprintf(stderr, "rank %d: k=%lld differs from k=1\n", rank, static_cast<long long>(chunks));
    }
    double error = 0;
    for (size_t i = 0; i < got.size(); ++i)
      error = std::max(error, std::abs(double(got[i]) - expected[i]));
    // fp32 sums of ffn products: a few ulps of the largest magnitude per term.
    if (!(error <= 1e-5 * scale * double(o.ffn))) {
      ok = false;
      std::fprintf(stderr, "rank %d: k=%lld is %g from the unpartitioned MLP (scale %g)\n", rank,
                   static_cast<long long>(chunks), error, scale);
    }
  };
  for (int64_t chunks : o.chunks) {
    check(chunks, forward(chunks));
    if (rank == 0)
      std::printf("tp k=%lld: checked\n", static_cast<long long>(chunks));
  }
  // Every rank must hold rank 0's output.
  std::vector<float> fromRoot = whole;
  MPI_Bcast(fromRoot.data(), int(fromRoot.size()), MPI_FLOAT, 0, MPI_COMM_WORLD);
  if (std::memcmp(fromRoot.data(), whole.data(), whole.size() * sizeof(float)) != 0) {
    ok = false;
    std::fprintf(stderr, "rank %d: output differs from rank 0's\n", rank);
  }
  return zen::cli::agreeOnEveryRank(ok, rank, "tp") ? 0 : 1;
}

} // namespace

int main(int argc, char **argv) {
  CLI::App app{"zenrt-tp-check: under mpirun, checks libzenrt's decomposed tensor-parallel MLP "
               "against the unpartitioned one and across chunk counts"};
  Options o;
  app.add_option("--tokens", o.tokens, "Token rows")->check(zen::cli::wholeNumber(1, 1 << 16));
  app.add_option("--hidden", o.hidden, "Hidden size")->check(zen::cli::wholeNumber(1, 1 << 16));
  app.add_option("--ffn", o.ffn, "Inner features (the ranks must divide them)")
      ->check(zen::cli::wholeNumber(1, 1 << 16));
  app.add_option("--chunks", o.chunks, "Decomposition degrees k to check")
      ->delimiter(',')
      ->check(zen::cli::wholeNumber(1, 1 << 16));
  app.add_option("--seed", o.seed, "Seed of the inputs and weights");
  app.add_option("--timeout", o.timeout, "Seconds any wait may take")
      ->check(CLI::Range(0.1, 3600.0));
  app.add_option("--fault-kill-rank", o.killRank)->group("");  // test hook, hidden from --help
  return zen::cli::runMpiCheck(app, "zenrt-tp-check", argc, argv,
                               [&](int rank, int size) { return run(o, rank, size); });
}

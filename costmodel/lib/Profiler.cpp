//===- Profiler.cpp - measure collectives, fit, validate ------------------===//
//
// Timing follows the OSU/nccl-tests discipline: warm-up runs, then many
// repetitions each started after a barrier; a repetition's time is the slowest
// rank's, and the sample is the median repetition (robust to the scheduler
// noise of an oversubscribed machine). Large messages get fewer repetitions so
// a full sweep stays within a couple of minutes.
//
//===----------------------------------------------------------------------===//
#include "zen/CostModel/Profiler.h"

#include "ProfilerBackend.h"
#include "zen/CostModel/CostModel.h"
#include "zen/CostModel/Fit.h"
#include "zenrt/Kernels.h"

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <set>
#include <vector>

namespace zen::cost {
namespace {

constexpr CollectiveKind kProfiledKinds[] = {CollectiveKind::AllReduce, CollectiveKind::ReduceScatter,
                                             CollectiveKind::AllGather, CollectiveKind::AllToAll,
                                             CollectiveKind::Broadcast};

struct SweepPlan {
  std::vector<int64_t> fitSizes;
  std::vector<int64_t> validationSizes;
  double secondsPerSize;  // repetition budget per size
  int minRepetitions, maxRepetitions, warmups;
  int maxSegments, minPointsPerSegment;
  int64_t compressionElements;
  int compressionRepetitions;
};

SweepPlan planSweep(bool quick) {
  SweepPlan plan;
  if (quick) {
    for (int64_t bytes = 4; bytes <= (1 << 20); bytes *= 4)
      plan.fitSizes.push_back(bytes);
    plan.validationSizes = {24, 1536, 98304};
    plan.secondsPerSize = 0.01;
    plan.minRepetitions = 3;
    plan.maxRepetitions = 20;
    plan.warmups = 1;
    plan.maxSegments = 2;
    plan.minPointsPerSegment = 3;
    plan.compressionElements = 1 << 18;
    plan.compressionRepetitions = 3;
    return plan;
  }
  // Powers of two from 4 B to 64 MiB to fit; 3 * 2^k (between two fitted
  // sizes, never one of them) from 6 B to 24 MiB to validate.
  for (int64_t bytes = 4; bytes <= (int64_t(64) << 20); bytes *= 2)
    plan.fitSizes.push_back(bytes);
  for (int k = 1; k <= 23; k += 2)
    plan.validationSizes.push_back(int64_t(3) << k);
  plan.secondsPerSize = 0.15;
  plan.minRepetitions = 7;
  plan.maxRepetitions = 1000;
  plan.warmups = 2;
  // Open MPI's tuned collectives switch algorithm at several sizes.
  plan.maxSegments = 4;
  plan.minPointsPerSegment = 4;
  plan.compressionElements = 1 << 22;
  plan.compressionRepetitions = 7;
  return plan;
}

/// The kept fraction the sparse encoders are timed at.
constexpr double kProfiledRatio = 0.01;

/// Output buffers of the encoders, sized on first use and reused.
struct EncodeBuffers {
  std::vector<uint8_t> payload;
  std::vector<uint16_t> halves;
  std::vector<uint32_t> indices, topKScratch;
  std::vector<float> values;
  std::vector<uint64_t> bitmap;
};

/// The methods whose CPU encode step the profile times. PowerSGD's is a GEMM, not a
/// streaming kernel: the cost model keeps the cluster's cpu_compress_gbps for it.
constexpr CompressionMethod kProfiledMethods[] = {
    CompressionMethod::FP16, CompressionMethod::BF16,    CompressionMethod::Int8,
    CompressionMethod::TopK, CompressionMethod::RandomK, CompressionMethod::Sign};

/// The encode step the runtime's executor runs for `method` on host memory
/// (the compress() of runtime/lib/Programs.cpp), with the runtime's own kernels.
void encodeOnHost(CompressionMethod method, const std::vector<float> &gradient,
                  EncodeBuffers &buffers) {
  namespace kernels = zenrt::kernels;
  const size_t n = gradient.size();
  const size_t kept = kernels::keptCount(n, kProfiledRatio);
  switch (method) {
  case CompressionMethod::FP16:
    buffers.halves.resize(n);
    kernels::floatToHalf(gradient.data(), buffers.halves.data(), n);
    return;
  case CompressionMethod::BF16:
    buffers.halves.resize(n);
    kernels::floatToBF16(gradient.data(), buffers.halves.data(), n);
    return;
  case CompressionMethod::Int8:
    buffers.payload.resize(kernels::int8PayloadBytes(n));
    kernels::quantizeInt8(gradient.data(), n, buffers.payload.data());
    return;
  case CompressionMethod::TopK:
    buffers.indices.resize(kept);
    buffers.values.resize(kept);
    kernels::selectTopK(gradient.data(), n, kept, buffers.indices.data(), buffers.values.data(),
                        buffers.topKScratch);
    return;
  case CompressionMethod::RandomK:
    buffers.indices.resize(kept);
    buffers.values.resize(kept);
    // Any seed costs the same; the executor's differs per bucket and iteration.
    kernels::randomKIndices(/*seed=*/1, n, kept, buffers.indices.data(), buffers.bitmap);
    kernels::gather(gradient.data(), buffers.indices.data(), kept, buffers.values.data());
    return;
  case CompressionMethod::Sign:
    buffers.payload.resize(kernels::signPayloadBytes(n));
    kernels::compressSign(gradient.data(), n, buffers.payload.data());
    return;
  case CompressionMethod::None:
  case CompressionMethod::PowerSGD:
    return;
  }
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  size_t middle = values.size() / 2;
  return values.size() % 2 ? values[middle] : 0.5 * (values[middle - 1] + values[middle]);
}

/// Times `work` on every rank: warm-ups, a probe to size the repetitions,
/// then barrier-started repetitions. Returns the median of the per-repetition
/// maximum over ranks, in microseconds (the same value on every rank).
template <typename Work>
double timeCollectively(const SweepPlan &plan, int minRepetitions, Work &&work) {
  for (int i = 0; i < plan.warmups; ++i)
    work();
  MPI_Barrier(MPI_COMM_WORLD);
  double begin = MPI_Wtime();
  work();
  double probe = MPI_Wtime() - begin;
  MPI_Allreduce(MPI_IN_PLACE, &probe, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  int repetitions = static_cast<int>(
      std::clamp(plan.secondsPerSize / std::max(probe, 1e-9), double(minRepetitions),
                 double(std::max(minRepetitions, plan.maxRepetitions))));
  std::vector<double> seconds(static_cast<size_t>(repetitions));
  for (double &elapsed : seconds) {
    MPI_Barrier(MPI_COMM_WORLD);
    double start = MPI_Wtime();
    work();
    elapsed = MPI_Wtime() - start;
  }
  MPI_Allreduce(MPI_IN_PLACE, seconds.data(), repetitions, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return median(seconds) * 1e6;
}

/// Distinct hosts of this job, from processor names (identical on every rank).
int64_t countHosts(int rank, int size) {
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int length = 0;
  MPI_Get_processor_name(name, &length);
  std::vector<char> all(static_cast<size_t>(size) * MPI_MAX_PROCESSOR_NAME);
  MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(), MPI_MAX_PROCESSOR_NAME,
                MPI_CHAR, MPI_COMM_WORLD);
  std::set<std::string> hosts;
  for (int r = 0; r < size; ++r)
    hosts.insert(std::string(&all[static_cast<size_t>(r) * MPI_MAX_PROCESSOR_NAME]));
  (void)rank;
  return static_cast<int64_t>(hosts.size());
}

std::string formatBytes(double bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 3) {
    bytes /= 1024;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, unit ? "%.1f %s" : "%.0f %s", bytes, units[unit]);
  return text;
}

} // namespace

bool haveNcclBackend() {
#ifdef ZEN_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

Cluster profileCluster(const Cluster &base, const ProfileOptions &options) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  auto progress = [&](const std::string &text, bool final) {
    if (rank == 0 && options.progress)
      options.progress(text, final);
  };
  SweepPlan plan = planSweep(options.quick);
  int64_t maxBytes = std::max(plan.fitSizes.back(), plan.validationSizes.back());

  std::unique_ptr<CollectiveBackend> backend;
  if (options.backend == "nccl") {
#ifdef ZEN_HAVE_CUDA
    backend = makeNcclBackend(maxBytes);
#else
    throw ProfileError(ErrorKind::BadUsage, "--backend nccl: this zenopt was built without CUDA and NCCL");
#endif
  } else {
    backend = makeMpiBackend(maxBytes);
  }

  Cluster cluster = base;
  cluster.name = base.name + "-profiled";
  cluster.profiledBackend = options.backend;
  cluster.profiled.clear();
  cluster.validation.clear();
  cluster.profiledCompressionGBps.clear();
  int64_t hosts = countHosts(rank, size);
  if (size % hosts == 0) {
    cluster.nodes = hosts;
    cluster.gpusPerNode = size / hosts;
  }

  auto measure = [&](CollectiveKind kind, int64_t bytes) {
    return timeCollectively(plan, plan.minRepetitions, [&] { backend->run(kind, bytes); });
  };

  // One sweep per collective over fit and held-out sizes interleaved in size
  // order, so both see the same machine conditions (load drifts over minutes).
  struct Point {
    int64_t requested;
    bool heldOut;
  };
  std::vector<Point> points;
  for (int64_t bytes : plan.fitSizes)
    points.push_back({bytes, false});
  for (int64_t bytes : plan.validationSizes)
    points.push_back({bytes, true});
  std::sort(points.begin(), points.end(),
            [](const Point &a, const Point &b) { return a.requested < b.requested; });
  std::vector<std::vector<Sample>> heldOutSamples;
  for (CollectiveKind kind : kProfiledKinds) {
    std::vector<Sample> samples, heldOut;
    std::set<int64_t> fitted;
    for (int64_t bytes : plan.fitSizes)
      fitted.insert(backend->actualBytes(kind, bytes));
    std::set<int64_t> seen;
    for (const Point &point : points) {
      int64_t bytes = backend->actualBytes(kind, point.requested);
      // Skip sizes the per-rank split rounded onto one already measured, and
      // held-out sizes rounded onto a fitted one (no longer held out).
      if ((point.heldOut && fitted.count(bytes)) || !seen.insert(bytes).second)
        continue;
      double timeUs = measure(kind, point.requested);
      (point.heldOut ? heldOut : samples).push_back({static_cast<double>(bytes), timeUs});
      progress("zenopt profile: " + std::string(toString(kind)) + " " + formatBytes(double(bytes)) +
                   " on " + std::to_string(size) + " ranks: " + std::to_string(timeUs) + " us",
               false);
    }
    for (const LinearFit &fit : fitPiecewise(samples, plan.maxSegments, plan.minPointsPerSegment))
      cluster.profiled.push_back({kind, size, fit.minBytes, fit.maxBytes, fit.alphaUs,
                                  fit.betaUsPerByte, fit.rSquared, fit.worstRelativeError});
    heldOutSamples.push_back(std::move(heldOut));
  }

  // CPU compression kernels, all ranks at once as the MPI runtime runs them.
  {
    std::vector<float> gradient(static_cast<size_t>(plan.compressionElements));
    for (size_t i = 0; i < gradient.size(); ++i)
      gradient[i] = std::sin(0.001f * static_cast<float>(i + static_cast<size_t>(rank)));
    EncodeBuffers buffers;
    for (CompressionMethod method : kProfiledMethods) {
      SweepPlan kernelPlan = plan;
      kernelPlan.secondsPerSize = 0;  // a fixed number of repetitions
      double us = timeCollectively(kernelPlan, plan.compressionRepetitions,
                                   [&] { encodeOnHost(method, gradient, buffers); });
      double gbps = 4.0 * static_cast<double>(gradient.size()) / (us * 1e3);
      cluster.profiledCompressionGBps[method] = gbps;
      progress("zenopt profile: " + std::string(toString(method)) + " CPU encode: " +
                   std::to_string(gbps) + " GB/s",
               false);
    }
  }

  // Validation: the fitted model against the held-out measurements.
  CostModel model(cluster);
  std::vector<double> everyError;
  for (size_t k = 0; k < std::size(kProfiledKinds); ++k) {
    std::vector<double> errors;
    for (const Sample &sample : heldOutSamples[k]) {
      double predicted =
          model.collective(kProfiledKinds[k], sample.bytes, Group{size, cluster.nodes}).timeUs;
      errors.push_back(std::abs(predicted - sample.timeUs) / sample.timeUs);
    }
    if (errors.empty())
      continue;
    everyError.insert(everyError.end(), errors.begin(), errors.end());
    cluster.validation.push_back({kProfiledKinds[k], size, static_cast<int64_t>(errors.size()),
                                  median(errors), *std::max_element(errors.begin(), errors.end())});
  }
  if (!everyError.empty()) {
    char line[160];
    std::snprintf(line, sizeof line,
                  "zenopt profile: validation on %zu held-out sizes: median relative error %.1f%%, worst %.1f%%",
                  everyError.size(), 100 * median(everyError),
                  100 * *std::max_element(everyError.begin(), everyError.end()));
    progress(line, true);
  }
  return cluster;
}

} // namespace zen::cost

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
#include "zenrt/Plan.h"
#include "zenrt/Runtime.h"

#include <Eigen/Core>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
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
  std::vector<ProfiledGemm> gemmShapes;  // gflops left 0: to measure
  int64_t copyBytes;                     // each of the copy's two buffers
  int64_t interferenceBytes;             // the all-reduce run beside compute
  int interferenceRepetitions;
  std::vector<int64_t> executorSizes;    // buckets timed through the runtime and bare
};

/// Square GEMMs from small to large, and skinny ones (a batch of rows through a layer,
/// a layer's weight gradient over a batch).
std::vector<ProfiledGemm> gemmShapes(bool quick) {
  std::vector<ProfiledGemm> shapes;
  for (int64_t side : quick ? std::vector<int64_t>{16, 64, 256}
                            : std::vector<int64_t>{16, 32, 64, 128, 256, 512})
    shapes.push_back({side, side, side, 0});
  shapes.push_back({32, 1024, 1024, 0});
  shapes.push_back({1024, 1024, 32, 0});
  return shapes;
}

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
    plan.gemmShapes = gemmShapes(true);
    plan.copyBytes = int64_t(32) << 20;
    plan.interferenceBytes = int64_t(4) << 20;
    plan.interferenceRepetitions = 15;
    plan.executorSizes = {4, 4096, 65536, 1 << 20};
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
  plan.gemmShapes = gemmShapes(false);
  plan.copyBytes = int64_t(64) << 20;  // twice a 32 MiB last-level cache
  plan.interferenceBytes = int64_t(4) << 20;
  plan.interferenceRepetitions = 25;
  for (int64_t bytes = 4; bytes <= (int64_t(16) << 20); bytes *= 16)
    plan.executorSizes.push_back(bytes);
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

/// fp32 GEMMs of one shape with Eigen (the host compute the runtime and zenopt-run use).
class GemmKernel {
public:
  explicit GemmKernel(const ProfiledGemm &shape)
      : a(Eigen::MatrixXf::Constant(shape.m, shape.k, 0.5f)),
        b(Eigen::MatrixXf::Constant(shape.k, shape.n, 0.25f)), c(shape.m, shape.n) {}
  void operator()() { c.noalias() = a * b; }

private:
  Eigen::MatrixXf a, b, c;
};

/// The microseconds of one call of `work`, every rank calling it at once: repeated so that a
/// timed repetition lasts about `secondsPerRepetition`, the median of the slowest rank's.
template <typename Work>
double timeKernel(const SweepPlan &plan, double secondsPerRepetition, Work &&work) {
  work();
  double begin = MPI_Wtime();
  work();
  double once = MPI_Wtime() - begin;
  MPI_Allreduce(MPI_IN_PLACE, &once, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  int calls = int(std::clamp(secondsPerRepetition / std::max(once, 1e-9), 1.0, 1e6));
  SweepPlan fixed = plan;
  fixed.secondsPerSize = 0;  // minimum repetitions
  return timeCollectively(fixed, plan.compressionRepetitions, [&] {
           for (int i = 0; i < calls; ++i)
             work();
         }) /
         calls;
}

/// GEMM throughput by shape, copy bandwidth and a kernel's fixed cost, all ranks at once.
ProfiledCompute profileCompute(const SweepPlan &plan, int ranks) {
  constexpr double kSecondsPerRepetition = 0.002;
  ProfiledCompute compute;
  for (ProfiledGemm shape : plan.gemmShapes) {
    GemmKernel gemm(shape);
    shape.gflops = shape.flops() / (timeKernel(plan, kSecondsPerRepetition, gemm) * 1e3);
    compute.gemms.push_back(shape);
  }
  GemmKernel tiny(ProfiledGemm{1, 1, 1, 0});
  compute.kernelOverheadUs = timeKernel(plan, kSecondsPerRepetition, tiny);
  std::vector<char> source(size_t(plan.copyBytes), 1), target(size_t(plan.copyBytes), 0);
  double copyUs = timeKernel(plan, 0, [&] { std::memcpy(target.data(), source.data(), source.size()); });
  compute.memoryGBps = 2.0 * double(plan.copyBytes) / (copyUs * 1e3);
  char method[256];
  std::snprintf(method, sizeof method,
                "zenopt profile: %d ranks at once; fp32 Eigen GEMM per shape, a copy of %s "
                "(read + write), a 1x1x1 GEMM as the fixed cost; median of the slowest rank",
                ranks, formatBytes(double(plan.copyBytes)).c_str());
  compute.method = method;
  return compute;
}

/// What the runtime's executor adds to a bucket beyond its collective: the fusion copy in,
/// handing the bucket to its progress thread or the waiter, the average and the copy out.
/// A one-bucket all-reduce plan through the runtime and the bare non-blocking all-reduce of
/// the same bytes are timed side by side at each size; the differences are fitted
/// alpha + beta x bytes (least squares on relative error, both at least 0).
ProfiledExecutor profileExecutor(const SweepPlan &plan, CollectiveBackend &bare, int ranks) {
  std::vector<Sample> overheads;
  for (int64_t bytes : plan.executorSizes) {
    const int64_t elements = CollectiveShape{ranks}.floatsFor(bytes);
    std::vector<float> gradient(size_t(elements), 1.0f);
    zenrt::Runtime runtime = zenrt::Runtime::fromText(
        zenrt::writePlan(zenrt::oneBucketPlan(elements, ranks, "zenopt profile")),
        "profile-executor");
    runtime.registerGradient("g", gradient.data(), elements);
    double runtimeUs = timeCollectively(plan, plan.minRepetitions, [&] {
      runtime.markReady("g");
      runtime.waitAll();
    });
    double bareUs = timeCollectively(plan, plan.minRepetitions,
                                     [&] { bare.run(CollectiveKind::AllReduce, bytes); });
    // Never below a hundredth of the bare call: the relative-error fit needs positive times.
    overheads.push_back({double(elements) * 4, std::max(runtimeUs - bareUs, 0.01 * bareUs)});
  }
  LinearFit fit = fitAlphaBeta(overheads);
  ProfiledExecutor executor;
  executor.alphaUs = fit.alphaUs;
  executor.betaUsPerByte = fit.betaUsPerByte;
  char method[256];
  std::snprintf(method, sizeof method,
                "zenopt profile: %d ranks; a one-bucket all-reduce plan through the runtime minus "
                "the bare non-blocking all-reduce, %s to %s, fitted alpha + beta x bytes",
                ranks, formatBytes(double(plan.executorSizes.front())).c_str(),
                formatBytes(double(plan.executorSizes.back())).c_str());
  executor.method = method;
  return executor;
}

/// Compute and a collective at once, through the runtime plans run on: its progress thread
/// drives an all-reduce bucket while this thread runs GEMMs. Alone, the all-reduce takes Tm
/// (from mark-ready's return to wait-all's) and GEMMs sized to about Tm / 2 take Tc. Together,
/// the GEMMs end first, after C; the all-reduce ends a tail T later. The GEMMs were slowed
/// C / Tc; the all-reduce did Tm - T of its work in C: slowed C / (Tm - T).
ProfiledInterference profileInterference(const SweepPlan &plan, int ranks) {
  constexpr double kMaxSlowdown = 10;  // the cluster file's range
  const int64_t elements = plan.interferenceBytes / 4;
  std::vector<float> gradient(size_t(elements), 1.0f);
  zenrt::Runtime runtime = zenrt::Runtime::fromText(
      zenrt::writePlan(zenrt::oneBucketPlan(elements, ranks, "zenopt profile")), "interference");
  runtime.registerGradient("g", gradient.data(), elements);
  // Streams 4 MiB of weights per call, as training's GEMMs at a data-parallel rank's small
  // batch do: they compete with the all-reduce's copies for memory bandwidth as well as for
  // the cores (an L1-resident 64x64x64 GEMM was slowed 1.04-1.3x here where the model's own
  // backward was slowed 1.3-1.5x). Small enough (~0.5 ms here) to size the compute to half
  // the all-reduce.
  constexpr ProfiledGemm kInterferenceGemm{8, 1024, 1024, 0};
  GemmKernel gemm(kInterferenceGemm);

  struct Times {
    double computeUs = 0, tailUs = 0;
  };
  auto slowest = [](double us) {
    MPI_Allreduce(MPI_IN_PLACE, &us, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return us;
  };
  auto elapsedUs = [](double since) { return (MPI_Wtime() - since) * 1e6; };
  // One repetition: the all-reduce started, `calls` GEMMs (none: the all-reduce alone), waited.
  auto repetition = [&](int calls) {
    MPI_Barrier(MPI_COMM_WORLD);
    runtime.markReady("g");
    double started = MPI_Wtime();
    for (int i = 0; i < calls; ++i)
      gemm();
    Times times;
    times.computeUs = elapsedUs(started);
    double computed = MPI_Wtime();
    runtime.waitAll();
    times.tailUs = elapsedUs(computed);
    return Times{slowest(times.computeUs), slowest(times.tailUs)};
  };
  repetition(0);  // warm-up
  std::vector<double> alone;
  for (int r = 0; r < plan.interferenceRepetitions; ++r)
    alone.push_back(repetition(0).tailUs);
  const double collectiveUs = median(alone);

  SweepPlan fixed = plan;
  fixed.secondsPerSize = 0;
  const double gemmUs = timeCollectively(fixed, plan.interferenceRepetitions, gemm);
  const int calls = std::max(1, int(std::lround(collectiveUs / 2 / gemmUs)));
  const double computeAloneUs =
      timeCollectively(fixed, plan.interferenceRepetitions, [&] {
        for (int i = 0; i < calls; ++i)
          gemm();
      });
  std::vector<double> computeSlowdowns, collectiveSlowdowns;
  for (int r = 0; r < plan.interferenceRepetitions; ++r) {
    Times together = repetition(calls);
    computeSlowdowns.push_back(together.computeUs / computeAloneUs);
    const double doneBeside = collectiveUs - together.tailUs;
    if (together.tailUs < 0.01 * collectiveUs)  // it finished beside the GEMMs: at most C / Tm
      collectiveSlowdowns.push_back(together.computeUs / collectiveUs);
    else if (doneBeside < 0.01 * collectiveUs)  // it did not progress beside them at all
      collectiveSlowdowns.push_back(kMaxSlowdown);
    else
      collectiveSlowdowns.push_back(together.computeUs / doneBeside);
  }
  ProfiledInterference interference;
  interference.computeSlowdown = std::clamp(median(computeSlowdowns), 1.0, kMaxSlowdown);
  interference.collectiveSlowdown = std::clamp(median(collectiveSlowdowns), 1.0, kMaxSlowdown);
  interference.collectiveBytes = double(plan.interferenceBytes);
  char method[320];
  std::snprintf(method, sizeof method,
                "zenopt profile: %d ranks; the runtime's all-reduce of %s alone (%.0f us) and "
                "beside %d fp32 %lldx%lldx%lld GEMMs (%.0f us alone) started with it; median of "
                "%d, slowest rank",
                ranks, formatBytes(double(plan.interferenceBytes)).c_str(), collectiveUs, calls,
                static_cast<long long>(kInterferenceGemm.m), static_cast<long long>(kInterferenceGemm.n),
                static_cast<long long>(kInterferenceGemm.k), computeAloneUs,
                plan.interferenceRepetitions);
  interference.method = method;
  return interference;
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

  // Host compute and its interference with the runtime's collectives. GPUs (cuBLAS, NCCL
  // beside kernels) are not measured yet: a GPU profile keeps the cluster's peak, efficiencies
  // and overlap_slowdown.
  cluster.profiledCompute = ProfiledCompute{};
  cluster.profiledInterference.reset();
  cluster.profiledExecutor.reset();
  if (options.backend == "mpi") {
    cluster.profiledCompute = profileCompute(plan, size);
    progress("zenopt profile: compute: " + std::to_string(cluster.profiledCompute.gemms.back().gflops) +
                 " GFLOP/s (skinny GEMM), copy " + std::to_string(cluster.profiledCompute.memoryGBps) +
                 " GB/s per rank",
             false);
    if (size > 1) {
      cluster.profiledExecutor = profileExecutor(plan, *backend, size);
      char overhead[160];
      std::snprintf(overhead, sizeof overhead,
                    "zenopt profile: the runtime adds %.1f us + %.3f ns/byte to a bucket",
                    cluster.profiledExecutor->alphaUs, cluster.profiledExecutor->betaUsPerByte * 1e3);
      progress(overhead, true);
      cluster.profiledInterference = profileInterference(plan, size);
      char line[160];
      std::snprintf(line, sizeof line,
                    "zenopt profile: interference: compute %.2fx slower beside an all-reduce, "
                    "the all-reduce %.2fx slower beside compute",
                    cluster.profiledInterference->computeSlowdown,
                    cluster.profiledInterference->collectiveSlowdown);
      progress(line, true);
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

//===- zenopt-run - execute a plan under mpirun, check numerics, measure -===//
//
//   mpirun -np N zenopt-run PLAN.json [--iters N] [--json] [--time-scale X] [--timeout S]
//                                     [--device]
//
// Every rank registers random gradients (seeded per rank and iteration), walks
// the plan's schedule emulating compute tasks by sleeping their predicted
// durations (times --time-scale), marks gradients ready as their producing
// tasks finish, waits, and checks every bucket's result against a plain
// MPI_Allreduce of the uncompressed inputs (see checkBucket). With --device the
// gradients live in CUDA device memory (CUDA kernels, NCCL); they are copied
// in before and out after each iteration for the check. Every wait, the
// iteration barrier and the check's own collectives included, is bounded by the
// timeout: a rank that times out names the ranks it waited for and ends the job.
// Exit codes: 0 ok, 1 numerics check failed, 2 bad command line, 65 bad plan /
// ranks disagree, 66 plan unreadable, 70 timeout or internal error.
//
//===----------------------------------------------------------------------===//
#include "CliChecks.h"
#include "ExitCodes.h"
#include "zenrt/Plan.h"
#include "zenrt/Runtime.h"

#include <CLI/CLI.hpp>
#include <mpi.h>
#include <nlohmann/json.hpp>
#ifdef ZENRT_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <signal.h>
#include <stdexcept>
#include <thread>
#include <unistd.h>

namespace {

struct Options {
  std::string planPath;
  int iterations = 5;
  bool json = false;
  double timeScale = 1.0;
  double timeoutSeconds = 0;
  uint64_t seed = 1;
  // Fault injection for the tests: this rank stalls (sleeps) or is killed (SIGKILL, as by
  // kill -9) in the given phase of the first iteration.
  int stallRank = -1;
  int killRank = -1;
  std::string faultPhase = "collectives";
  bool device = false;
};

/// The gradients the runtime sees: host vectors, or (device) CUDA buffers mirrored by the
/// host vectors, copied in before and out after an iteration.
class GradientStore {
public:
  GradientStore(const zenrt::Plan &plan, bool device, int rank) : device(device) {
    for (const zenrt::TensorInfo &tensor : plan.tensors) {
      try {
        host.emplace_back(size_t(tensor.elements));
      } catch (const std::bad_alloc &) {
        throw std::runtime_error("rank " + std::to_string(rank) + ": gradient '" + tensor.name +
                                 "': out of memory allocating " +
                                 std::to_string(tensor.elements * 4) + " bytes");
      }
    }
#ifdef ZENRT_HAVE_CUDA
    for (size_t t = 0; device && t < host.size(); ++t) {
      float *buffer = nullptr;
      check(cudaMalloc(reinterpret_cast<void **>(&buffer), host[t].size() * sizeof(float) + 1),
            "cudaMalloc");
      onDevice.push_back(buffer);
    }
#else
    if (device)  // the runtime refused already; keep this path honest
      throw std::runtime_error("zenopt-run was built without CUDA: no --device");
#endif
  }
  ~GradientStore() {
#ifdef ZENRT_HAVE_CUDA
    for (float *buffer : onDevice)
      cudaFree(buffer);
#endif
  }
  GradientStore(const GradientStore &) = delete;
  GradientStore &operator=(const GradientStore &) = delete;

  std::vector<float> &values(size_t t) { return host[t]; }
  float *registered(size_t t) { return device ? onDevice[t] : host[t].data(); }
  void copyIn() {
    for (size_t t = 0; device && t < host.size(); ++t)
      transfer(onDevice[t], host[t].data(), host[t].size(), true);
  }
  void copyOut() {
    for (size_t t = 0; device && t < host.size(); ++t)
      transfer(host[t].data(), onDevice[t], host[t].size(), false);
  }
  /// `count` floats of runtime memory (a debug view) as host values.
  std::vector<float> fetch(const float *data, int64_t count) const {
    std::vector<float> out(static_cast<size_t>(count));
    if (device)
      transfer(out.data(), data, out.size(), false);
    else
      std::copy(data, data + count, out.begin());
    return out;
  }

private:
  static void transfer(float *to, const float *from, size_t count, bool toDevice) {
#ifdef ZENRT_HAVE_CUDA
    check(cudaMemcpy(to, from, count * sizeof(float),
                     toDevice ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost),
          "cudaMemcpy");
#else
    (void)to, (void)from, (void)count, (void)toDevice;
#endif
  }
#ifdef ZENRT_HAVE_CUDA
  static void check(cudaError_t code, const char *what) {
    if (code != cudaSuccess)
      throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(code));
  }
#endif

  bool device;
  std::vector<std::vector<float>> host;
  std::vector<float *> onDevice;
};

struct BucketCheck {
  std::string check;
  double maxError = 0;  // max over elements and ranks of |result - reference|
  double bound = 0;     // the bound at the element of maxError's worst ratio
  bool ok = true;
  std::string detail;
};

int exitCodeFor(int status) {
  switch (status) {
  case ZENRT_ERR_PLAN:
  case ZENRT_ERR_MISMATCH:
    return 65;
  case ZENRT_ERR_IO:
    return 66;
  case ZENRT_ERR_INVALID_ARGUMENT:
    return 2;
  default:
    return 70;
  }
}

/// The tool's own collectives (iteration barrier, numerics check, aggregates): non-blocking
/// MPI calls polled through the runtime, so they are bounded by its timeout like its own.
class BoundedCollectives {
public:
  explicit BoundedCollectives(zenrt::Runtime &runtime) : runtime(runtime) {}

  void barrier(const std::string &what) {
    MPI_Request request;
    MPI_Ibarrier(MPI_COMM_WORLD, &request);
    await(request, what + " (MPI_Ibarrier)");
  }
  std::vector<double> allreduceSum(const std::vector<double> &local, const std::string &what) {
    std::vector<double> out(local.size());
    MPI_Request request;
    MPI_Iallreduce(local.data(), out.data(), int(local.size()), MPI_DOUBLE, MPI_SUM,
                   MPI_COMM_WORLD, &request);
    await(request, what + " (MPI_Iallreduce)");
    return out;
  }
  double allreduceScalar(double value, MPI_Op op, const std::string &what) {
    double out = 0;
    MPI_Request request;
    MPI_Iallreduce(&value, &out, 1, MPI_DOUBLE, op, MPI_COMM_WORLD, &request);
    await(request, what + " (MPI_Iallreduce)");
    return out;
  }
  void broadcast(std::vector<double> &values, const std::string &what) {
    MPI_Request request;
    MPI_Ibcast(values.data(), int(values.size()), MPI_DOUBLE, 0, MPI_COMM_WORLD, &request);
    await(request, what + " (MPI_Ibcast)");
  }

private:
  void await(MPI_Request &request, const std::string &what) {
    runtime.await(
        [&] {
          int done = 0;
          MPI_Test(&request, &done, MPI_STATUS_IGNORE);
          return done != 0;
        },
        what);
  }
  zenrt::Runtime &runtime;
};

/// The per-iteration data of one bucket, packed like its fusion buffer.
struct BucketData {
  std::vector<double> input;      // gradient + old residual (what compression saw)
  std::vector<double> result;     // what the runtime wrote back
  std::vector<double> sent;       // decoded local contribution
  std::vector<double> residual;   // new residual (error feedback)
  bool errorFeedback = false;
};

/// Compares |result - reference| against tolerance(i) elementwise.
void compareElementwise(BucketCheck &check, const std::vector<double> &result,
                        const std::vector<double> &reference,
                        const std::function<double(size_t)> &tolerance) {
  for (size_t i = 0; i < result.size(); ++i) {
    double error = std::fabs(result[i] - reference[i]), bound = tolerance(i);
    if (error > check.maxError) {
      check.maxError = error;
      check.bound = bound;
    }
    if (!(error <= bound) && check.ok) {
      check.ok = false;
      check.detail = "element " + std::to_string(i) + ": result " + std::to_string(result[i]) +
                     " reference " + std::to_string(reference[i]) + " error " +
                     std::to_string(error) + " > bound " + std::to_string(bound);
    }
  }
}

/// Checks one bucket (collective over all ranks: every rank calls it for every bucket).
///  - none: the MPI_Allreduce average within float rounding (W+2)*2^-24*sum|v|;
///    broadcast: rank 0's values exactly.
///  - fp16/bf16: within (W+2)*u*sum|v| + W*2^-24 (u = 2^-11 resp. 2^-8).
///  - int8: within 2*sum_r max|v_r|/(254 W) + float rounding (quantisation, and
///    re-quantisation of the two-phase all-reduce).
///  - topk/randomk/sign: error feedback invariant sent + new residual == input
///    + old residual, and result == average of the ranks' sent; top-k keeps the
///    largest magnitudes.
///  - powersgd: the invariant, and result = P P^T avg(v) is an orthogonal
///    projection: |result|^2 + |result - avg|^2 <= |avg|^2 (relative 1e-3; equal
///    but for the dropped zero padding of the bucket's matrix).
BucketCheck checkBucket(const zenrt::Bucket &bucket, size_t index, const BucketData &data,
                        int ranks, BoundedCollectives &mpi) {
  using zenrt::CompressionMethod;
  BucketCheck check;
  const std::string what = "the numerics check of bucket " + std::to_string(index);
  size_t n = data.input.size();
  double W = ranks;
  const double u32 = std::ldexp(1.0, -24);
  std::vector<double> reference = mpi.allreduceSum(data.input, what);
  std::vector<double> absolute(n);
  for (size_t i = 0; i < n; ++i)
    absolute[i] = std::fabs(data.input[i]);
  std::vector<double> absSum = mpi.allreduceSum(absolute, what);
  for (double &value : reference)
    value /= W;
  auto floatRounding = [&](size_t i) { return (W + 2) * u32 * absSum[i] + 1e-30; };
  CompressionMethod method = bucket.compression.method;

  auto checkInvariant = [&] {
    if (!data.errorFeedback)
      return;
    for (size_t i = 0; i < n && check.ok; ++i) {
      double lhs = data.sent[i] + data.residual[i];
      double bound = 2 * u32 * (std::fabs(data.input[i]) + std::fabs(data.sent[i])) + 1e-30;
      if (std::fabs(lhs - data.input[i]) > bound) {
        check.ok = false;
        check.detail = "error feedback invariant broken at element " + std::to_string(i) +
                       ": sent + residual = " + std::to_string(lhs) + ", input + old residual = " +
                       std::to_string(data.input[i]);
      }
    }
  };

  switch (method) {
  case CompressionMethod::None:
    if (bucket.collectives[0].op == zenrt::CollectiveKind::Broadcast) {
      check.check = "broadcast of rank 0";
      std::vector<double> rootValues = data.input;
      mpi.broadcast(rootValues, what);
      compareElementwise(check, data.result, rootValues, [](size_t) { return 0.0; });
    } else {
      check.check = "exact to float rounding";
      compareElementwise(check, data.result, reference, floatRounding);
    }
    break;
  case CompressionMethod::FP16:
  case CompressionMethod::BF16: {
    double u = std::ldexp(1.0, method == CompressionMethod::FP16 ? -11 : -8);
    check.check = std::string(zenrt::toString(method)) + " bound (W+2)*u*sum|v|";
    compareElementwise(check, data.result, reference, [&](size_t i) {
      return (W + 2) * u * absSum[i] + W * u32 + 1e-30;
    });
    break;
  }
  case CompressionMethod::Int8: {
    double localMax = 0;
    for (double v : data.input)
      localMax = std::max(localMax, std::fabs(v));
    double sumOfMax = mpi.allreduceScalar(localMax, MPI_SUM, what);
    check.check = "int8 bound 2*sum(max|v|)/(254W)";
    compareElementwise(check, data.result, reference, [&](size_t i) {
      return 1.01 * 2 * sumOfMax / (254 * W) + floatRounding(i);
    });
    break;
  }
  case CompressionMethod::TopK:
  case CompressionMethod::RandomK:
  case CompressionMethod::Sign: {
    check.check = "error feedback invariant + average of sent";
    checkInvariant();
    std::vector<double> sentAverage = mpi.allreduceSum(data.sent, what), sentAbs(n);
    for (size_t i = 0; i < n; ++i)
      sentAbs[i] = std::fabs(data.sent[i]);
    std::vector<double> sentAbsSum = mpi.allreduceSum(sentAbs, what);
    for (double &value : sentAverage)
      value /= W;
    compareElementwise(check, data.result, sentAverage,
                       [&](size_t i) { return (W + 2) * u32 * sentAbsSum[i] + 1e-30; });
    if (method == CompressionMethod::TopK && check.ok) {
      double minKept = INFINITY, maxDropped = 0;
      for (size_t i = 0; i < n; ++i)
        if (data.sent[i] != 0)
          minKept = std::min(minKept, std::fabs(data.input[i]));
        else
          maxDropped = std::max(maxDropped, std::fabs(data.input[i]));
      if (minKept < maxDropped) {
        check.ok = false;
        check.detail = "top-k kept |v| = " + std::to_string(minKept) + " but dropped " +
                       std::to_string(maxDropped);
      }
    }
    break;
  }
  case CompressionMethod::PowerSGD: {
    check.check = "error feedback invariant + orthogonal projection";
    checkInvariant();
    double resultNorm = 0, errorNorm = 0, referenceNorm = 0;
    for (size_t i = 0; i < n; ++i) {
      resultNorm += data.result[i] * data.result[i];
      errorNorm += (data.result[i] - reference[i]) * (data.result[i] - reference[i]);
      referenceNorm += reference[i] * reference[i];
      check.maxError = std::max(check.maxError, std::fabs(data.result[i] - reference[i]));
    }
    check.bound = 1e-3 * referenceNorm;
    // Equality for the padded matrix; dropping the zero padding's approximation
    // only lowers the left side.
    double excess = resultNorm + errorNorm - referenceNorm;
    if (check.ok && !(excess <= 1e-3 * referenceNorm + 1e-20)) {
      check.ok = false;
      check.detail = "not a projection: |r|^2 + |r - avg|^2 = " +
                     std::to_string(resultNorm + errorNorm) + " but |avg|^2 = " +
                     std::to_string(referenceNorm);
    }
    break;
  }
  }
  return check;
}

/// The test hooks: a stalled rank sleeps past every timeout (its runtime still answers the
/// others' queries); a killed rank dies at once, as by kill -9.
void injectFault(const Options &options, int rank) {
  if (rank != options.killRank && rank != options.stallRank)
    return;
  std::fprintf(stderr, "zenopt-run: rank %d: fault injection: %s in the %s phase\n", rank,
               rank == options.killRank ? "killed" : "stalled", options.faultPhase.c_str());
  std::fflush(stderr);
  if (rank == options.killRank)
    ::kill(::getpid(), SIGKILL);
  std::this_thread::sleep_for(std::chrono::duration<double>(
      std::max(60.0, 3 * (options.timeoutSeconds > 0 ? options.timeoutSeconds : 300))));
}

int run(const Options &options, int rank, int ranks) {
  if (options.faultPhase == "startup")
    injectFault(options, rank);
  // The runtime loads the plan first: it makes every rank fail together when one cannot.
  zenrt::Runtime::Options runtimeOptions;
  runtimeOptions.timeoutSeconds = options.timeoutSeconds;
  runtimeOptions.keepSent = true;
  runtimeOptions.deviceMemory = options.device;
  zenrt::Runtime runtime = zenrt::Runtime::fromFile(options.planPath, runtimeOptions);
  zenrt::Plan plan = zenrt::loadPlanFile(options.planPath);
  BoundedCollectives mpi(runtime);

  std::map<std::string, size_t> tensorIndex;
  GradientStore gradients(plan, options.device, rank);
  std::vector<std::vector<float>> inputs(plan.tensors.size());
  for (size_t t = 0; t < plan.tensors.size(); ++t) {
    tensorIndex[plan.tensors[t].name] = t;
    runtime.registerGradient(plan.tensors[t].name, gradients.registered(t),
                             plan.tensors[t].elements);
  }
  // Gradients no task produces become ready at the end of backward, in ready order.
  std::vector<bool> produced(plan.tensors.size(), false);
  for (const zenrt::Task &task : plan.schedule)
    for (const std::string &name : task.produces)
      produced[tensorIndex.at(name)] = true;
  std::vector<size_t> unproduced;
  for (size_t t = 0; t < plan.tensors.size(); ++t)
    if (!produced[t])
      unproduced.push_back(t);
  std::sort(unproduced.begin(), unproduced.end(), [&](size_t a, size_t b) {
    return plan.tensors[a].readyOrder < plan.tensors[b].readyOrder;
  });
  std::vector<std::string> decoupledTensors;
  for (const zenrt::Bucket &bucket : plan.buckets)
    if (bucket.collectives.back().decoupled)
      for (const zenrt::BucketTensor &entry : bucket.tensors)
        decoupledTensors.push_back(entry.name);

  std::vector<double> iterationUs;
  std::vector<BucketCheck> worst(plan.buckets.size());
  bool numericsOk = true;
  for (int iteration = 0; iteration < options.iterations; ++iteration) {
    std::mt19937_64 generator(options.seed * 1000003ull + uint64_t(rank) * 7919ull +
                              uint64_t(iteration));
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (size_t t = 0; t < plan.tensors.size(); ++t) {
      for (float &value : gradients.values(t))
        value = normal(generator);
      inputs[t] = gradients.values(t);
    }
    gradients.copyIn();
    std::vector<std::vector<float>> oldResiduals(plan.buckets.size());
    for (size_t b = 0; b < plan.buckets.size(); ++b) {
      auto view = runtime.debugBucket(int(b));
      if (view.residual)
        oldResiduals[b] = gradients.fetch(view.residual, view.elements);
    }

    mpi.barrier("the barrier before iteration " + std::to_string(iteration));
    if (iteration == 0 && options.faultPhase == "collectives")
      injectFault(options, rank);
    auto start = std::chrono::steady_clock::now();
    bool waited = false;
    auto finishBackward = [&] {
      for (size_t t : unproduced)
        runtime.markReady(plan.tensors[t].name);
      runtime.waitAll();
      waited = true;
    };
    for (const zenrt::Task &task : plan.schedule) {
      if (task.kind != zenrt::TaskKind::Compute)
        continue;  // the runtime performs communication tasks itself
      if (task.phase == zenrt::Phase::Optimizer && !waited)
        finishBackward();
      std::this_thread::sleep_for(
          std::chrono::duration<double, std::micro>(task.durationUs * options.timeScale));
      for (const std::string &name : task.produces)
        runtime.markReady(name);
    }
    if (!waited)
      finishBackward();
    for (const std::string &name : decoupledTensors)
      runtime.wait(name);  // before the next forward
    iterationUs.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
    gradients.copyOut();
    if (iteration == 0 && options.faultPhase == "check")
      injectFault(options, rank);

    for (size_t b = 0; b < plan.buckets.size(); ++b) {
      const zenrt::Bucket &bucket = plan.buckets[b];
      auto view = runtime.debugBucket(int(b));
      BucketData data;
      data.errorFeedback = bucket.compression.errorFeedback;
      for (const zenrt::BucketTensor &entry : bucket.tensors) {
        size_t t = tensorIndex.at(entry.name);
        for (int64_t i = 0; i < entry.elements; ++i) {
          double old = oldResiduals[b].empty() ? 0.0 : oldResiduals[b][size_t(entry.offset + i)];
          data.input.push_back(double(inputs[t][size_t(i)]) + old);
          data.result.push_back(gradients.values(t)[size_t(i)]);
        }
      }
      std::vector<float> sent = gradients.fetch(view.sent, view.elements);
      data.sent.assign(sent.begin(), sent.end());
      if (view.residual) {
        std::vector<float> residual = gradients.fetch(view.residual, view.elements);
        data.residual.assign(residual.begin(), residual.end());
      }
      BucketCheck check = checkBucket(bucket, b, data, ranks, mpi);
      if (!check.ok)
        std::fprintf(stderr, "zenopt-run: rank %d: iteration %d: bucket %zu (%s): %s\n", rank,
                     iteration, b, zenrt::toString(bucket.compression.method),
                     check.detail.c_str());
      numericsOk &= check.ok;
      if (!check.ok || check.maxError >= worst[b].maxError || iteration == 0)
        worst[b] = check.ok && !worst[b].ok ? worst[b] : check;
    }
  }

  // Aggregate over ranks: numerics ok everywhere, slowest rank's mean iteration time.
  double mean = 0, best = iterationUs.empty() ? 0 : iterationUs[0];
  size_t skip = iterationUs.size() > 1 ? 1 : 0;  // the first iteration warms up
  for (size_t i = skip; i < iterationUs.size(); ++i) {
    mean += iterationUs[i];
    best = std::min(best, iterationUs[i]);
  }
  mean /= double(std::max<size_t>(1, iterationUs.size() - skip));
  const std::string summary = "the summary over ranks";
  bool allOk = mpi.allreduceScalar(numericsOk ? 0 : 1, MPI_MAX, summary) == 0;
  double measured = mpi.allreduceScalar(mean, MPI_MAX, summary);
  double measuredBest = mpi.allreduceScalar(best, MPI_MAX, summary);
  std::vector<double> errors(plan.buckets.size());
  for (size_t b = 0; b < errors.size(); ++b)
    errors[b] = mpi.allreduceScalar(worst[b].maxError, MPI_MAX, summary);
  double computeUs = 0;
  for (const zenrt::Task &task : plan.schedule)
    if (task.kind == zenrt::TaskKind::Compute)
      computeUs += task.durationUs * options.timeScale;

  if (rank == 0) {
    if (options.json) {
      nlohmann::ordered_json out;
      out["plan"] = options.planPath;
      out["ranks"] = ranks;
      out["iterations"] = options.iterations;
      out["time_scale"] = options.timeScale;
      out["predicted_iteration_us"] = plan.predictions.iterationUs;
      out["emulated_compute_us"] = computeUs;
      out["measured_iteration_us"] = measured;
      out["measured_best_iteration_us"] = measuredBest;
      out["numerics"] = allOk ? "ok" : "failed";
      out["buckets"] = nlohmann::ordered_json::array();
      for (size_t b = 0; b < plan.buckets.size(); ++b)
        out["buckets"].push_back({{"id", b},
                                  {"method", zenrt::toString(plan.buckets[b].compression.method)},
                                  {"check", worst[b].check},
                                  {"max_error", errors[b]}});
      std::printf("%s\n", out.dump(2).c_str());
    } else {
      std::printf("plan %s: %d ranks, %d iterations, time scale %g\n", options.planPath.c_str(),
                  ranks, options.iterations, options.timeScale);
      std::printf("  predicted iteration  %12.1f us (on %s)\n", plan.predictions.iterationUs,
                  plan.cluster.name.c_str());
      std::printf("  emulated compute     %12.1f us\n", computeUs);
      std::printf("  measured iteration   %12.1f us (mean, slowest rank; best %.1f us)\n",
                  measured, measuredBest);
      for (size_t b = 0; b < plan.buckets.size(); ++b)
        std::printf("  bucket %zu %-8s %-48s max error %.3g\n", b,
                    zenrt::toString(plan.buckets[b].compression.method), worst[b].check.c_str(),
                    errors[b]);
      std::printf("numerics: %s\n", allOk ? "ok" : "FAILED");
    }
    std::fflush(stdout);
  }
  return allOk ? 0 : 1;
}

}  // namespace

int main(int argc, char **argv) {
  Options options;
  CLI::App app{"Execute a zenopt plan under mpirun: random gradients, numerics check against "
               "MPI_Allreduce, measured vs predicted iteration time.\nExit codes: 0 ok, 1 "
               "numerics check failed, 2 bad command line, 65 bad plan or ranks disagree, "
               "66 plan unreadable, 70 timeout or internal error."};
  app.add_option("plan", options.planPath, "Plan file (plan.json)")->required();
  app.add_option("--iters", options.iterations, "Iterations to run")
      ->check(zen::cli::wholeNumber(1, 1000000));
  app.add_flag("--json", options.json, "Print one JSON object (times in microseconds)");
  app.add_option("--time-scale", options.timeScale,
                 "Factor on the plan's compute durations when emulating compute (0 = none)")
      ->check(zen::cli::realNumber(0, 1e6));
  app.add_option("--timeout", options.timeoutSeconds,
                 "Seconds any wait may take (default: ZENRT_TIMEOUT_S or 300)")
      ->check(zen::cli::realNumber(0, 1e6, /*exclusiveLow=*/true));
  app.add_option("--seed", options.seed, "Base seed of the random gradients");
  // Test hooks (hidden from --help).
  app.add_option("--fault-stall-rank", options.stallRank)->group("");
  app.add_option("--fault-kill-rank", options.killRank)->group("");
  app.add_option("--fault-phase", options.faultPhase)
      ->check(CLI::IsMember({"startup", "collectives", "check"}))
      ->group("");
  app.add_flag("--device", options.device,
               "Gradients in CUDA device memory: CUDA kernels and NCCL (needs libzenrt built "
               "with CUDA and a GPU per rank)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    return app.exit(e);
  }

  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  int code = 0;
  try {
    code = run(options, rank, ranks);
  } catch (const zenrt::PlanError &e) {
    // Every rank reads the same file, so every rank reports and exits alike.
    std::fprintf(stderr, "zenopt-run: rank %d: %s\n", rank, e.what());
    code = zen::cli::exitCodeOf(e.kind);
  } catch (const zenrt::Error &e) {
    std::fprintf(stderr, "zenopt-run: %s\n", e.what());
    std::fflush(stderr);
    code = exitCodeFor(e.status);
    // A bad plan or disagreeing ranks fail every rank alike at start-up; anything else
    // leaves the other ranks waiting for this one: give them a moment to report their own
    // timeouts, then end the job (MPI cannot cancel a started collective).
    if (e.status != ZENRT_ERR_PLAN && e.status != ZENRT_ERR_IO &&
        e.status != ZENRT_ERR_MISMATCH && e.status != ZENRT_ERR_INVALID_ARGUMENT) {
      std::fprintf(stderr, "zenopt-run: rank %d: ending the job (MPI_Abort, exit status %d)\n",
                   rank, code);
      std::fflush(stderr);
      std::this_thread::sleep_for(std::chrono::seconds(1));
      MPI_Abort(MPI_COMM_WORLD, code);
    }
  } catch (const std::exception &e) {
    std::fprintf(stderr, "zenopt-run: rank %d: internal error: %s\n", rank, e.what());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 70);
  }
  MPI_Finalize();
  return code;
}

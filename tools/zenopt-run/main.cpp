//===- zenopt-run - execute a plan under mpirun, check numerics, measure -===//
//
//   mpirun -np N zenopt-run PLAN.json [--iters N] [--json] [--time-scale X] [--timeout S]
//                                     [--compute gemm|sleep] [--gradients MODE] [--device]
//
// Every rank registers random gradients (seeded per rank and iteration; --gradients shapes
// them for the lossy methods' checks), walks the plan's schedule performing compute tasks
// (--compute gemm: real CPU work of each task's FLOPs and bytes, see ComputeWork.h; sleep:
// the task's predicted duration; both times --time-scale), marks gradients ready as their
// producing tasks finish, waits, and checks every bucket's result and what each rank sent
// against reference code of the compression method (Numerics.h). With --device the
// gradients live in CUDA device memory (CUDA kernels, NCCL); they are copied in before and
// out after each iteration for the check, and an MoE plan's layers run there too. Every wait, the iteration barrier and the
// check's own collectives included, is bounded by the timeout: a rank that times out names
// the ranks it waited for and ends the job. A plan with `parallel` runs its stage programs
// instead (HybridRun.h), a plan with `moe` its MoE layers (MoeRun.h); a plan's
// `sparse_tensors` are summed with their schemes each iteration and checked bit for bit
// against the rank-ordered dense sum (SparseRun.h).
// Exit codes: 0 ok, 1 numerics check failed, 2 bad command line, 65 bad plan /
// ranks disagree, 66 plan unreadable, 70 timeout or internal error.
//
//===----------------------------------------------------------------------===//
#include "CliChecks.h"
#include "Collectives.h"
#include "ComputeWork.h"
#include "ExitCodes.h"
#include "HybridRun.h"
#include "MoeRun.h"
#include "Numerics.h"
#include "SparseRun.h"
#include "zenrt/Moe.h"
#include "zenrt/Plan.h"
#include "zenrt/Runtime.h"
#include "zenrt/Timeout.h"

#include <CLI/CLI.hpp>
#include <mpi.h>
#include <nlohmann/json.hpp>
#ifdef ZENRT_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <map>
#include <optional>
#include <signal.h>
#include <stdexcept>
#include <thread>
#include <unistd.h>

namespace {

using zen::run::BoundedCollectives;
using zen::run::BucketCheck;
using zen::run::GradientMode;

enum class ComputeMode { Gemm, Sleep };

struct Options {
  std::string planPath;
  int iterations = 5;
  bool json = false;
  double timeScale = 1.0;
  std::string compute;  // "gemm", "sleep", or "" for the plan's default (defaultCompute)
  GradientMode gradients = GradientMode::Normal;
  double timeoutSeconds = 0;
  uint64_t seed = 1;
  // Fault injection for the tests: this rank stalls (sleeps) or is killed (SIGKILL, as by
  // kill -9) in the given phase of the first iteration (summary: before the large-model or
  // MoE runner's summary over ranks).
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
    if (device) {
      // libzenrt runs this rank's device work on device (world rank % devices).
      int devices = 0;
      check(cudaGetDeviceCount(&devices), "cudaGetDeviceCount");
      check(cudaSetDevice(rank % std::max(devices, 1)), "cudaSetDevice");
    }
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
      copyIn(t);
  }
  void copyIn(size_t t) {
    if (device)
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

/// gemm for plans made for the cpu-local cluster (this machine's ranks compute on the CPU,
/// as the preset assumes) unless the gradients live on a GPU; sleep otherwise.
ComputeMode defaultCompute(const zenrt::Plan &plan, bool device) {
  return plan.cluster.name == "cpu-local" && !device ? ComputeMode::Gemm : ComputeMode::Sleep;
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
      std::max(60.0, 3 * (options.timeoutSeconds > 0 ? options.timeoutSeconds
                                                   : zenrt::kDefaultTimeoutSeconds))));
}

/// Seconds every wait may take: --timeout, else ZENRT_TIMEOUT_S, else 300.
double timeoutOf(const Options &options) {
  std::string error;
  const double seconds = zenrt::resolveTimeoutSeconds(options.timeoutSeconds, error);
  if (!error.empty())
    throw zenrt::Error(ZENRT_ERR_INVALID_ARGUMENT, error);
  return seconds;
}

zen::run::RunnerOptions runnerOptions(const Options &options, int rank) {
  zen::run::RunnerOptions runner;
  runner.planPath = options.planPath;
  runner.iterations = options.iterations;
  runner.json = options.json;
  runner.timeoutSeconds = timeoutOf(options);
  runner.seed = options.seed;
  runner.device = options.device;
  runner.fault = [options, rank](const std::string &phase) {
    if (phase == options.faultPhase)
      injectFault(options, rank);
  };
  return runner;
}

/// Large-model plans execute every rank's stage program (HybridRun.h); the options that
/// shape the data-parallel runner's simulated compute and gradients do not apply, nor a
/// fault in its numerics check (the stage programs' check has no collectives of its own).
int runLargeModel(const Options &options, const zenrt::Plan &plan, int rank, int ranks,
                  const std::vector<std::string> &explicitOptions) {
  if (!explicitOptions.empty())
    throw zenrt::Error(ZENRT_ERR_INVALID_ARGUMENT,
                       explicitOptions.front() + " does not apply to " + options.planPath +
                           ": a large-model plan runs its model's real compute and data");
  if ((options.killRank >= 0 || options.stallRank >= 0) &&
      (options.faultPhase == "check" || options.faultPhase == "sparse"))
    throw zenrt::Error(ZENRT_ERR_INVALID_ARGUMENT,
                       "--fault-phase " + options.faultPhase + " does not apply to " +
                           options.planPath +
                           ": a large-model plan's faults are injected in its collectives");
  return zen::run::runHybrid(runnerOptions(options, rank), plan, rank, ranks);
}

int run(const Options &options, int rank, int ranks,
        const std::vector<std::string> &dataParallelOnly) {
  if (options.faultPhase == "startup")
    injectFault(options, rank);
  // A plan this rank cannot read goes to the runtime's start-up, which fails every rank
  // alike naming it.
  std::optional<zenrt::Plan> readable;
  try {
    readable = zenrt::loadPlanFile(options.planPath);
  } catch (const zenrt::PlanError &) {
  }
  if (readable && !readable->inference.empty())
    throw zenrt::Error(ZENRT_ERR_INVALID_ARGUMENT,
                       options.planPath + ": /inference: a serving plan: zenopt-serve runs it, "
                                          "zenopt-run runs training plans");
  if (readable && !readable->parallel.empty())
    return runLargeModel(options, *readable, rank, ranks, dataParallelOnly);
  // An MoE plan's layers run after its gradient sync: what the runtime cannot run of them
  // fails before anything runs.
  if (readable && !readable->moe.empty())
    zenrt::moe::plannedMoe(*readable, options.planPath);
  if ((options.killRank >= 0 || options.stallRank >= 0) && options.faultPhase == "summary" &&
      readable && readable->moe.empty())
    throw zenrt::Error(ZENRT_ERR_INVALID_ARGUMENT,
                       "--fault-phase summary does not apply to " + options.planPath +
                           ": it is the large-model and MoE runners' summary over ranks");
  if ((options.killRank >= 0 || options.stallRank >= 0) && options.faultPhase == "sparse" &&
      readable && readable->sparseTensors.empty())
    throw zenrt::Error(ZENRT_ERR_INVALID_ARGUMENT,
                       "--fault-phase sparse does not apply to " + options.planPath +
                           ": it has no sparse_tensors");
  // The sparse schemes run on MPI and host memory only (docs/sparse-sync.md).
  if (options.device && readable && !readable->sparseTensors.empty())
    throw zenrt::Error(ZENRT_ERR_INVALID_ARGUMENT,
                       "--device: " + options.planPath +
                           " has sparse_tensors, and the sparse schemes are not supported on "
                           "the device yet (NCCL): run it without --device");
  // The runtime loads the plan first: it makes every rank fail together when one cannot.
  zenrt::Runtime::Options runtimeOptions;
  runtimeOptions.timeoutSeconds = options.timeoutSeconds;
  runtimeOptions.keepSent = true;
  runtimeOptions.deviceMemory = options.device;
  zenrt::Runtime runtime = zenrt::Runtime::fromFile(options.planPath, runtimeOptions);
  zenrt::Plan plan = zenrt::loadPlanFile(options.planPath);
  BoundedCollectives mpi(runtime);
  // Expert tensors' buckets average over the ranks holding the same experts (rank % ep).
  const int64_t ep = zenrt::expertParallelOf(plan);
  std::optional<zen::run::GroupComm> replicas;
  std::optional<BoundedCollectives> replicaMpi;
  if (ep > 1) {
    replicas.emplace(int(rank % ep), rank);
    replicaMpi.emplace(runtime, replicas->comm);
  }

  std::map<std::string, size_t> tensorIndex;
  GradientStore gradients(plan, options.device, rank);
  std::vector<std::vector<float>> inputs(plan.tensors.size());
  for (size_t t = 0; t < plan.tensors.size(); ++t) {
    tensorIndex[plan.tensors[t].name] = t;
    inputs[t].resize(gradients.values(t).size());
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

  ComputeMode compute = options.compute.empty() ? defaultCompute(plan, options.device)
                        : options.compute == "gemm" ? ComputeMode::Gemm
                                                    : ComputeMode::Sleep;
  double largestTaskBytes = 0;
  bool anyWork = false, anyDuration = false;
  for (const zenrt::Task &task : plan.schedule)
    if (task.kind == zenrt::TaskKind::Compute) {
      largestTaskBytes = std::max(largestTaskBytes, double(task.bytes) * options.timeScale);
      anyWork |= task.flops > 0 || task.bytes > 0;
      anyDuration |= task.durationUs > 0;
    }
  // Plans that predate flops and bytes per task (or hand-written ones) have nothing to run.
  if (compute == ComputeMode::Gemm && options.timeScale > 0 && anyDuration && !anyWork)
    throw zenrt::PlanError(zen::ErrorKind::BadInput,
                           options.planPath + ": /schedule: no compute task gives its flops or "
                                              "bytes: nothing to run for --compute gemm (use "
                                              "--compute sleep)");
  std::optional<zen::run::ComputeWork> work;
  if (compute == ComputeMode::Gemm)
    work.emplace(largestTaskBytes);

  // An MoE plan's layers run inside the step, at the compute tasks their experts run in.
  const bool moe = !plan.moe.empty();
  std::optional<zen::run::MoeStep> moeStep;
  if (moe)
    moeStep.emplace(runnerOptions(options, rank), plan, rank,
                    [&](bool hold) { runtime.holdCollectives(hold); });
  std::string moeInStep = moe ? "not run (a plan without the layers' tasks)" : "";
  auto deliverExpertGradient = [&](const std::string &name, const std::vector<float> &values) {
    const size_t t = tensorIndex.at(name);
    // The runtime's ReLU experts: a fused SwiGLU layer's fc1 has another size; it keeps
    // the random gradient.
    if (values.size() != inputs[t].size())
      return;
    inputs[t] = values;
    gradients.values(t) = values;
    gradients.copyIn(t);
  };

  std::vector<double> iterationUs, computeUs;
  std::vector<BucketCheck> worst(plan.buckets.size());
  bool numericsOk = true;
  for (int iteration = 0; iteration < options.iterations; ++iteration) {
    zen::run::fillGradients(plan, options.gradients, options.seed, rank, iteration, inputs);
    for (size_t t = 0; t < plan.tensors.size(); ++t)
      gradients.values(t) = inputs[t];
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
    std::chrono::duration<double, std::micro> computing{0};
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
      auto taskStart = std::chrono::steady_clock::now();
      // The MoE layers' experts start their forward task and end their backward task; the
      // rest of the task's work runs as for any plan.
      const int64_t layerFlops = moeStep ? moeStep->layerFlops(task.id) : 0;
      if (moeStep && task.phase == zenrt::Phase::Forward)
        moeStep->forward(task.id);
      const double rest =
          task.flops > 0 ? double(task.flops - layerFlops) / double(task.flops) : 1.0;
      if (work)
        work->run(double(task.flops - layerFlops) * options.timeScale,
                  double(task.bytes) * rest * options.timeScale);
      else
        std::this_thread::sleep_for(
            std::chrono::duration<double, std::micro>(task.durationUs * rest * options.timeScale));
      if (moeStep && task.phase == zenrt::Phase::Backward)
        moeStep->backward(task.id, deliverExpertGradient);
      computing += std::chrono::steady_clock::now() - taskStart;
      for (const std::string &name : task.produces)
        runtime.markReady(name);
    }
    if (!waited)
      finishBackward();
    for (const std::string &name : decoupledTensors)
      runtime.wait(name);  // before the next forward
    iterationUs.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
    computeUs.push_back(computing.count());
    gradients.copyOut();
    if (iteration == 0 && options.faultPhase == "check")
      injectFault(options, rank);
    if (iteration == 0 && moeStep && moeStep->layerCount() > 0) {
      const std::string difference = moeStep->checkAgainstAlone();
      const bool same =
          mpi.allreduceScalar(difference.empty() ? 0 : 1, MPI_MAX, "the MoE step check") == 0;
      if (!difference.empty())
        std::fprintf(stderr, "zenopt-run: rank %d: %s\n", rank, difference.c_str());
      moeInStep = std::to_string(moeStep->layerCount()) + " layers (" +
                  std::to_string(moeStep->serialCount()) + " taking turns with the sync), " +
                  (same ? "identical to their runs alone" : "differ from their runs alone");
      numericsOk &= same;
    }

    for (size_t b = 0; b < plan.buckets.size(); ++b) {
      const zenrt::Bucket &bucket = plan.buckets[b];
      auto view = runtime.debugBucket(int(b));
      zen::run::BucketData data;
      for (const zenrt::BucketTensor &entry : bucket.tensors) {
        size_t t = tensorIndex.at(entry.name);
        for (int64_t i = 0; i < entry.elements; ++i) {
          float old = oldResiduals[b].empty() ? 0.0f : oldResiduals[b][size_t(entry.offset + i)];
          data.input.push_back(inputs[t][size_t(i)] + old);  // a float sum, as the runtime's
          data.result.push_back(gradients.values(t)[size_t(i)]);
        }
      }
      data.sent = gradients.fetch(view.sent, view.elements);
      if (view.residual)
        data.residual = gradients.fetch(view.residual, view.elements);
      const bool replicas = bucket.group == zenrt::BucketGroup::ExpertReplicas;
      BucketCheck check =
          zen::run::checkBucket(bucket, b, data, options.gradients,
                                replicas ? int(ranks / ep) : ranks, replicas ? *replicaMpi : mpi);
      if (!check.ok)
        std::fprintf(stderr, "zenopt-run: rank %d: iteration %d: bucket %zu (%s): %s\n", rank,
                     iteration, b, zenrt::toString(bucket.compression.method),
                     check.detail.c_str());
      numericsOk &= check.ok;
      if (!check.ok || check.maxError >= worst[b].maxError || iteration == 0)
        worst[b] = check.ok && !worst[b].ok ? worst[b] : check;
    }
  }

  // The plan's row-sparse tensors, each with its scheme (SparseRun.h).
  const std::vector<zen::run::SparseResult> sparse = zen::run::runSparseTensors(
      plan, rank, ranks, options.iterations, options.seed, timeoutOf(options),
      [&options, rank](const std::string &phase) {
        if (phase == options.faultPhase)
          injectFault(options, rank);
      });
  for (const zen::run::SparseResult &result : sparse)
    if (!result.ok) {
      std::fprintf(stderr, "zenopt-run: rank %d: sparse tensor %s (%s): %s\n", rank,
                   result.name.c_str(), result.scheme.c_str(), result.detail.c_str());
      numericsOk = false;
    }

  // Aggregate over ranks: numerics ok everywhere, slowest rank's mean iteration time.
  size_t skip = iterationUs.size() > 1 ? 1 : 0;  // the first iteration warms up
  auto meanAfterWarmUp = [skip](const std::vector<double> &values) {
    double sum = 0;
    for (size_t i = skip; i < values.size(); ++i)
      sum += values[i];
    return sum / double(values.size() - skip);
  };
  double best = *std::min_element(iterationUs.begin() + std::ptrdiff_t(skip), iterationUs.end());
  const std::string summary = "the summary over ranks";
  bool allOk = mpi.allreduceScalar(numericsOk ? 0 : 1, MPI_MAX, summary) == 0;
  double measured = mpi.allreduceScalar(meanAfterWarmUp(iterationUs), MPI_MAX, summary);
  double measuredBest = mpi.allreduceScalar(best, MPI_MAX, summary);
  double measuredCompute = mpi.allreduceScalar(meanAfterWarmUp(computeUs), MPI_MAX, summary);
  std::vector<double> errors(plan.buckets.size());
  for (size_t b = 0; b < errors.size(); ++b)
    errors[b] = mpi.allreduceScalar(worst[b].maxError, MPI_MAX, summary);
  std::vector<double> sparseUs, sparseDiffering;
  for (const zen::run::SparseResult &result : sparse) {
    sparseUs.push_back(mpi.allreduceScalar(meanAfterWarmUp(result.callUs), MPI_MAX, summary));
    sparseDiffering.push_back(
        mpi.allreduceScalar(double(result.differingElements), MPI_SUM, summary));
  }
  double predictedCompute = 0;
  for (const zenrt::Task &task : plan.schedule)
    if (task.kind == zenrt::TaskKind::Compute)
      predictedCompute += task.durationUs * options.timeScale;
  const char *computeName = compute == ComputeMode::Gemm ? "gemm" : "sleep";

  // A Mixture-of-Experts plan then runs its MoE layers alone (MoeRun.h), whose report
  // carries this one's in JSON.
  nlohmann::ordered_json syncJson;
  const double coScheduledUs =
      moe ? nlohmann::json::parse(plan.moe).at("iteration_us").get<double>() : 0.0;
  if (rank == 0) {
    if (options.json) {
      nlohmann::ordered_json &out = syncJson;
      out["plan"] = options.planPath;
      out["ranks"] = ranks;
      out["iterations"] = options.iterations;
      out["time_scale"] = options.timeScale;
      out["predicted_iteration_us"] = plan.predictions.iterationUs;
      if (moe) {
        out["predicted_moe_iteration_us"] = coScheduledUs;
        out["moe_layers_in_step"] = moeInStep;
      }
      out["compute"] = computeName;
      out["predicted_compute_us"] = predictedCompute;
      out["measured_compute_us"] = measuredCompute;
      out["measured_iteration_us"] = measured;
      out["measured_best_iteration_us"] = measuredBest;
      out["numerics"] = allOk ? "ok" : "failed";
      out["buckets"] = nlohmann::ordered_json::array();
      for (size_t b = 0; b < plan.buckets.size(); ++b)
        out["buckets"].push_back({{"id", b},
                                  {"method", zenrt::toString(plan.buckets[b].compression.method)},
                                  {"group", zenrt::toString(plan.buckets[b].group)},
                                  {"check", worst[b].check},
                                  {"max_error", errors[b]}});
      if (!sparse.empty()) {
        out["sparse_tensors"] = nlohmann::ordered_json::array();
        for (size_t t = 0; t < sparse.size(); ++t)
          out["sparse_tensors"].push_back(
              {{"name", sparse[t].name},
               {"scheme", sparse[t].scheme},
               {"touched_rows", sparse[t].touchedRows},
               {"predicted_us", plan.sparseTensors[t].predictedUs},
               {"measured_us", sparseUs[t]},
               {"differing_elements", int64_t(sparseDiffering[t])}});
      }
      if (!moe)
        std::printf("%s\n", out.dump(2).c_str());
    } else {
      std::printf("plan %s: %d ranks, %d iterations, time scale %g%s\n", options.planPath.c_str(),
                  ranks, options.iterations, options.timeScale,
                  moe ? " (its training step; the MoE layers alone follow)" : "");
      std::printf("  predicted iteration  %12.1f us (on %s)\n", plan.predictions.iterationUs,
                  plan.cluster.name.c_str());
      if (moe) {
        std::printf("  predicted with MoE   %12.1f us (the layers pipelined beside the sync)\n",
                    coScheduledUs);
        std::printf("  MoE layers in step   %s\n", moeInStep.c_str());
      }
      std::printf("  predicted compute    %12.1f us (scaled)\n", predictedCompute);
      std::printf("  measured compute     %12.1f us (--compute %s: %s; mean, slowest rank)\n",
                  measuredCompute, computeName,
                  compute == ComputeMode::Gemm ? "a GEMM and a memory pass per task"
                                               : "each task sleeps its prediction");
      std::printf("  measured iteration   %12.1f us (mean, slowest rank; best %.1f us)\n",
                  measured, measuredBest);
      for (size_t b = 0; b < plan.buckets.size(); ++b)
        std::printf("  bucket %zu %-8s %-56s max error %.3g%s\n", b,
                    zenrt::toString(plan.buckets[b].compression.method), worst[b].check.c_str(),
                    errors[b],
                    plan.buckets[b].group == zenrt::BucketGroup::ExpertReplicas
                        ? " (over the expert replicas)"
                        : "");
      for (size_t t = 0; t < sparse.size(); ++t)
        std::printf("  sparse %s %s: %lld rows touched, measured %.1f us (mean, slowest rank; "
                    "predicted %.1f us), %s\n",
                    sparse[t].name.c_str(), sparse[t].scheme.c_str(),
                    static_cast<long long>(sparse[t].touchedRows), sparseUs[t],
                    plan.sparseTensors[t].predictedUs,
                    sparseDiffering[t] == 0
                        ? "exact (the rank-ordered dense sum, bit for bit)"
                        : (std::to_string(int64_t(sparseDiffering[t])) +
                           " elements differ from the rank-ordered dense sum")
                              .c_str());
      std::printf("numerics: %s\n", allOk ? "ok" : "FAILED");
    }
    std::fflush(stdout);
  }
  const int syncStatus = allOk ? 0 : 1;
  if (!moe)
    return syncStatus;
  zen::run::RunnerOptions runner = runnerOptions(options, rank);
  runner.gradientSync = std::move(syncJson);
  return std::max(syncStatus, zen::run::runMoe(runner, plan, rank, ranks));
}

}  // namespace

int main(int argc, char **argv) {
  Options options;
  CLI::App app{"Execute a zenopt plan under mpirun: random gradients, numerics checked against "
               "reference code of each compression method, measured vs predicted iteration "
               "time. A large-model plan (`parallel`) runs every rank's stage program on a GPT "
               "of its shape. A Mixture-of-Experts plan (`moe`) runs each MoE layer's forward "
               "and backward with the plan's ep, degrees and all-to-all, checked against the "
               "layer unpipelined (bit for bit) and a reference without communication, timed "
               "next to the plan's forward_us and backward_us, after its gradient sync (the "
               "expert tensors' buckets over the ranks holding the same experts).\nExit codes: 0 ok, 1 "
               "numerics check failed, 2 bad command line, 65 bad plan or ranks disagree, "
               "66 plan unreadable, 70 timeout or internal error."};
  app.add_option("plan", options.planPath, "Plan file (plan.json)")->required();
  app.add_option("--iters", options.iterations, "Iterations to run")
      ->check(zen::cli::wholeNumber(1, 1000000));
  app.add_flag("--json", options.json, "Print one JSON object (times in microseconds)");
  app.add_option("--time-scale", options.timeScale,
                 "Factor on the compute tasks' work: durations (--compute sleep), FLOPs and "
                 "bytes (--compute gemm); 0 = no compute")
      ->check(zen::cli::realNumber(0, 1e6));
  app.add_option("--compute", options.compute,
                 "How compute tasks run: gemm (a single-precision GEMM of the task's FLOPs and "
                 "a memory pass of its bytes, on the CPU) or sleep (the predicted duration). "
                 "Default: gemm for a cpu-local plan on host buffers, sleep otherwise")
      ->check(CLI::IsMember({"gemm", "sleep"}));
  std::string gradients = "normal";
  app.add_option("--gradients", gradients,
                 "Gradients fed to the check: normal (default), tied (top-k buckets on a grid "
                 "of 1/8: ties at the threshold), low-rank (PowerSGD buckets of the planned "
                 "rank: reconstructed exactly)")
      ->check(CLI::IsMember({"normal", "tied", "low-rank"}));
  app.add_option("--timeout", options.timeoutSeconds,
                 "Seconds any wait may take (default: ZENRT_TIMEOUT_S or 300)")
      ->check(zen::cli::realNumber(0, 1e6, /*exclusiveLow=*/true));
  app.add_option("--seed", options.seed, "Base seed of the random gradients");
  // Test hooks (hidden from --help).
  app.add_option("--fault-stall-rank", options.stallRank)->group("");
  app.add_option("--fault-kill-rank", options.killRank)->group("");
  app.add_option("--fault-phase", options.faultPhase)
      ->check(CLI::IsMember({"startup", "collectives", "check", "summary", "sparse"}))
      ->group("");
  app.add_flag("--device", options.device,
               "Gradients and MoE layers in CUDA device memory: CUDA kernels and NCCL (needs "
               "libzenrt built with CUDA and a GPU per rank)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    if (e.get_exit_code() == 0)  // --help
      return app.exit(e);
    std::fprintf(stderr, "zenopt-run: error: %s\nRun with --help for more information.\n",
                 e.what());
    return zen::cli::ExitUsage;
  }
  std::vector<std::string> dataParallelOnly;
  for (const char *flag : {"--time-scale", "--compute", "--gradients", "--device"})
    if (app.count(flag) > 0)
      dataParallelOnly.push_back(flag);
  options.gradients = gradients == "tied"       ? GradientMode::Tied
                      : gradients == "low-rank" ? GradientMode::LowRank
                                                : GradientMode::Normal;

  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  int code = 0;
  try {
    code = run(options, rank, ranks, dataParallelOnly);
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

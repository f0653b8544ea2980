//===- CApi.cpp - libzenrt C API ---------------------------------------------===//
#include "zenrt/zenrt.h"

#include "Executor.h"
#include "MpiSupport.h"
#include "zenrt/Plan.h"
#include "zenrt/Runtime.h"
#include "zenrt/Serve.h"
#include "zenrt/SparseSync.h"
#include "zenrt/Timeout.h"
#ifdef ZENRT_HAVE_CUDA
#include "zenrt/CudaKernels.h"
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <new>
#include <thread>

namespace {
/// Handles alive: MPI must outlive them, so zenrt_world_finalize refuses while any is open.
std::atomic<int> openHandles{0};
}  // namespace

struct zenrt_s {
  zenrt_s() { ++openHandles; }
  ~zenrt_s() { --openHandles; }
  zenrt_s(const zenrt_s &) = delete;
  zenrt_s &operator=(const zenrt_s &) = delete;
  std::unique_ptr<zenrt::Executor> executor;
};

/// A serving engine and the C API's requests not yet waited for.
struct zenrt_serve_s {
  zenrt_serve_s() { ++openHandles; }
  ~zenrt_serve_s() { --openHandles; }
  zenrt_serve_s(const zenrt_serve_s &) = delete;
  zenrt_serve_s &operator=(const zenrt_serve_s &) = delete;
  std::unique_ptr<zenrt::serve::Engine> engine;
  std::mutex mutex;
  int64_t nextId = 1;
  std::map<int64_t, std::shared_future<zenrt::serve::Result>> pending;
};

namespace {
zenrt::serve::Engine &engineOf(zenrt_serve_t engine) {
  if (!engine || !engine->engine)
    throw zenrt::RuntimeError(ZENRT_ERR_INVALID_ARGUMENT, "null serving engine");
  return *engine->engine;
}
}  // namespace

namespace {

thread_local std::string lastError;

/// Runs `body`, turning exceptions into a status and the thread's last error.
template <typename Body> int guarded(Body body) {
  try {
    body();
    lastError.clear();
    return ZENRT_OK;
  } catch (const zenrt::RuntimeError &e) {
    lastError = e.what();
    return e.status;
  } catch (const zenrt::PlanError &e) {
    lastError = e.what();
    return e.kind == zen::ErrorKind::Unreadable ? ZENRT_ERR_IO : ZENRT_ERR_PLAN;
  } catch (const zenrt::Error &e) {  // the C++ layers over MPI (SparseSync, TensorParallel)
    lastError = e.what();
    return e.status;
  } catch (const std::bad_alloc &) {
    lastError = "out of memory";
    return ZENRT_ERR_INTERNAL;
  } catch (const std::exception &e) {
    lastError = e.what();
    return ZENRT_ERR_INTERNAL;
  }
}

zenrt::Executor &executorOf(zenrt_t rt) {
  if (!rt || !rt->executor)
    throw zenrt::RuntimeError(ZENRT_ERR_INVALID_ARGUMENT, "null zenrt handle");
  return *rt->executor;
}

double resolveTimeout(const zenrt_options &options) {
  std::string error;
  const double seconds = zenrt::resolveTimeoutSeconds(options.timeout_s, error);
  if (!error.empty())
    throw zenrt::RuntimeError(ZENRT_ERR_INVALID_ARGUMENT, error);
  return seconds;
}

/// Throws unless this rank can run buffers of `memory` (checked before the ranks
/// agree to start, so that no rank enters NCCL's collective set-up alone).
void checkMemory(int memory, const std::string &prefix) {
  if (memory == ZENRT_MEMORY_HOST)
    return;
  if (memory != ZENRT_MEMORY_DEVICE)
    throw zenrt::RuntimeError(ZENRT_ERR_INVALID_ARGUMENT,
                              prefix + "options.memory is " + std::to_string(memory) +
                                  " (expected ZENRT_MEMORY_HOST or ZENRT_MEMORY_DEVICE)");
#ifdef ZENRT_HAVE_CUDA
  if (zenrt::cuda::deviceCount() == 0)
    throw zenrt::RuntimeError(ZENRT_ERR_BACKEND,
                              prefix + "ZENRT_MEMORY_DEVICE but no CUDA device is visible");
#else
  throw zenrt::RuntimeError(ZENRT_ERR_INVALID_ARGUMENT,
                            prefix + "ZENRT_MEMORY_DEVICE but libzenrt was built without CUDA");
#endif
}

/// Loads the plan on every rank; a rank that fails makes every rank fail
/// (otherwise the others would wait for it in the agreement forever).
int initialise(zenrt_t *out, const zenrt_options *given,
               const std::function<zenrt::Plan()> &loadPlan) {
  return guarded([&] {
    if (!out)
      throw zenrt::RuntimeError(ZENRT_ERR_INVALID_ARGUMENT, "null output handle");
    *out = nullptr;
    zenrt_options options;
    zenrt_options_init(&options);
    if (given)
      options = *given;
    std::unique_ptr<zenrt::Backend> backend = zenrt::createMpiBackend(options.mpi_comm);
    int status = ZENRT_OK;
    std::string message;
    zenrt::Plan plan;
    zenrt::ExecutorOptions executorOptions;
    status = guarded([&] {
      std::string prefix = "rank " + std::to_string(backend->rank()) + ": ";
      if (options.rank >= 0 && options.rank != backend->rank())
        throw zenrt::RuntimeError(ZENRT_ERR_INVALID_ARGUMENT,
                                  prefix + "options.rank is " + std::to_string(options.rank) +
                                      " but the communicator says " +
                                      std::to_string(backend->rank()));
      if (options.world_size >= 0 && options.world_size != backend->size())
        throw zenrt::RuntimeError(ZENRT_ERR_INVALID_ARGUMENT,
                                  prefix + "options.world_size is " +
                                      std::to_string(options.world_size) +
                                      " but the communicator has " +
                                      std::to_string(backend->size()) + " ranks");
      checkMemory(options.memory, prefix);
      executorOptions.timeoutSeconds = resolveTimeout(options);
      executorOptions.keepSent = options.keep_sent != 0;
      try {
        plan = loadPlan();
      } catch (const zenrt::PlanError &e) {
        throw zenrt::PlanError(e.kind, prefix + e.what());
      }
    });
    message = lastError;
    backend->setTimeout(executorOptions.timeoutSeconds);
    std::vector<uint64_t> statuses = backend->exchange(uint64_t(status));
    if (status != ZENRT_OK)
      throw zenrt::RuntimeError(status, message);
    for (size_t r = 0; r < statuses.size(); ++r)
      if (statuses[r] != ZENRT_OK)
        throw zenrt::RuntimeError(ZENRT_ERR_MISMATCH,
                                  "rank " + std::to_string(backend->rank()) + ": rank " +
                                      std::to_string(r) + " failed to start (" +
                                      zenrt_error_string(int(statuses[r])) +
                                      "; see its message)");
#ifdef ZENRT_HAVE_CUDA
    if (options.memory == ZENRT_MEMORY_DEVICE)
      backend = zenrt::createNcclBackend(options.mpi_comm, std::move(backend));
#endif
    auto handle = std::make_unique<zenrt_s>();
    handle->executor =
        std::make_unique<zenrt::Executor>(std::move(plan), std::move(backend), executorOptions);
    *out = handle.release();
  });
}

/// The job of the zenrt_world_* calls: an MPI backend on MPI_COMM_WORLD, which initialised
/// MPI unless someone else had (and then finalises it when destroyed).
struct World {
  std::mutex mutex;
  std::unique_ptr<zenrt::Backend> backend;
  /// A duplicate of MPI_COMM_WORLD for zenrt_sparse_allreduce's point-to-point traffic, made
  /// at its first call.
  MPI_Comm sparseComm = MPI_COMM_NULL;
  bool finalized = false;
};

/// Never destroyed at exit: finalising MPI from a static destructor would wait for ranks that
/// are still running (or failed); only zenrt_world_finalize ends it.
World &world() {
  static World *instance = new World;
  return *instance;
}

/// The world's backend (with its mutex held by the caller); throws unless initialised.
zenrt::Backend &worldBackend(World &job, const char *call) {
  if (!job.backend)
    throw zenrt::RuntimeError(ZENRT_ERR_STATE,
                              std::string(call) + ": call zenrt_world_init first" +
                                  (job.finalized ? " (the world was finalised)" : ""));
  return *job.backend;
}

/// Broadcasts travel in pieces MPI's int counts can hold.
constexpr size_t kBroadcastPieceBytes = size_t(1) << 30;

}  // namespace

extern "C" {

void zenrt_options_init(zenrt_options *options) {
  if (!options)
    return;
  options->rank = -1;
  options->world_size = -1;
  options->timeout_s = 0;
  options->mpi_comm = nullptr;
  options->keep_sent = 0;
  options->memory = ZENRT_MEMORY_HOST;
}

int zenrt_init_file(zenrt_t *out, const char *plan_path, const zenrt_options *options) {
  if (!plan_path) {
    lastError = "null plan path";
    return ZENRT_ERR_INVALID_ARGUMENT;
  }
  std::string path = plan_path;
  return initialise(out, options, [&] { return zenrt::loadPlanFile(path); });
}

int zenrt_init_text(zenrt_t *out, const char *plan_text, size_t length, const char *source_name,
                    const zenrt_options *options) {
  if (!plan_text) {
    lastError = "null plan text";
    return ZENRT_ERR_INVALID_ARGUMENT;
  }
  std::string text(plan_text, length), source = source_name ? source_name : "<plan text>";
  return initialise(out, options, [&] { return zenrt::parsePlan(text, source); });
}

int zenrt_register(zenrt_t rt, const char *tensor, float *data, int64_t elements) {
  return guarded([&] {
    if (!tensor)
      throw zenrt::RuntimeError(ZENRT_ERR_INVALID_ARGUMENT, "null tensor name");
    executorOf(rt).registerGradient(tensor, data, elements);
  });
}

int zenrt_mark_ready(zenrt_t rt, const char *tensor) {
  return guarded([&] {
    if (!tensor)
      throw zenrt::RuntimeError(ZENRT_ERR_INVALID_ARGUMENT, "null tensor name");
    executorOf(rt).markReady(tensor);
  });
}

int zenrt_wait(zenrt_t rt, const char *tensor) {
  return guarded([&] {
    if (!tensor)
      throw zenrt::RuntimeError(ZENRT_ERR_INVALID_ARGUMENT, "null tensor name");
    executorOf(rt).wait(tensor);
  });
}

int zenrt_wait_all(zenrt_t rt) {
  return guarded([&] { executorOf(rt).waitAll(); });
}

int zenrt_test(zenrt_t rt, const char *tensor, int *done) {
  return guarded([&] {
    if (!done)
      throw zenrt::RuntimeError(ZENRT_ERR_INVALID_ARGUMENT, "null done pointer");
    const auto name = tensor ? std::optional<std::string_view>(tensor) : std::nullopt;
    *done = executorOf(rt).test(name) ? 1 : 0;
  });
}

int zenrt_hold_collectives(zenrt_t rt, int hold) {
  return guarded([&] { executorOf(rt).holdCollectives(hold != 0); });
}

int zenrt_abort(zenrt_t rt, int exit_code) {
  return guarded([&] { executorOf(rt).abort(exit_code); });
}

int zenrt_await(zenrt_t rt, int (*done)(void *context), void *context, const char *what) {
  return guarded([&] {
    if (!done)
      throw zenrt::RuntimeError(ZENRT_ERR_INVALID_ARGUMENT, "null done function");
    executorOf(rt).await([&] { return done(context) != 0; }, what ? what : "zenrt_await");
  });
}

int zenrt_finalize(zenrt_t rt) {
  return guarded([&] { delete rt; });
}

int zenrt_bucket_count(zenrt_t rt, int *count) {
  return guarded([&] {
    if (!count)
      throw zenrt::RuntimeError(ZENRT_ERR_INVALID_ARGUMENT, "null count pointer");
    *count = int(executorOf(rt).bucketCount());
  });
}

int zenrt_debug_bucket(zenrt_t rt, int bucket, const float **sent, const float **residual,
                       int64_t *elements) {
  return guarded([&] {
    zenrt::Executor &executor = executorOf(rt);
    if (bucket < 0 || size_t(bucket) >= executor.bucketCount())
      throw zenrt::RuntimeError(ZENRT_ERR_INVALID_ARGUMENT,
                                "bucket " + std::to_string(bucket) + " out of range");
    const zenrt::BucketBuffers &buffers = executor.bucketBuffers(size_t(bucket));
    if (sent)
      *sent = buffers.sent.empty() ? nullptr : buffers.sent.data();
    if (residual)
      *residual = buffers.residual.empty() ? nullptr : buffers.residual.data();
    if (elements)
      *elements = int64_t(buffers.elements);
  });
}

int zenrt_plan_hash(zenrt_t rt, uint64_t *hash) {
  return guarded([&] {
    if (!hash)
      throw zenrt::RuntimeError(ZENRT_ERR_INVALID_ARGUMENT, "null hash pointer");
    *hash = executorOf(rt).hash();
  });
}

int zenrt_world_init(int *rank, int *world_size) {
  return guarded([&] {
    World &job = world();
    std::lock_guard<std::mutex> lock(job.mutex);
    if (job.finalized)
      throw zenrt::RuntimeError(ZENRT_ERR_STATE,
                                "zenrt_world_init: the world was finalised and MPI cannot be "
                                "initialised again in this process");
    if (!job.backend) {
      job.backend = zenrt::createMpiBackend(nullptr);
      job.backend->openStreams({0});
    }
    if (rank)
      *rank = job.backend->rank();
    if (world_size)
      *world_size = job.backend->size();
  });
}

int zenrt_world_broadcast(void *data, size_t bytes, int root) {
  return guarded([&] {
    World &job = world();
    std::lock_guard<std::mutex> lock(job.mutex);
    zenrt::Backend &backend = worldBackend(job, "zenrt_world_broadcast");
    std::string prefix = "rank " + std::to_string(backend.rank()) + ": zenrt_world_broadcast: ";
    if (!data && bytes > 0)
      throw zenrt::RuntimeError(ZENRT_ERR_INVALID_ARGUMENT, prefix + "null data");
    if (root < 0 || root >= backend.size())
      throw zenrt::RuntimeError(ZENRT_ERR_INVALID_ARGUMENT,
                                prefix + "root " + std::to_string(root) + " is not a rank of " +
                                    std::to_string(backend.size()));
    zenrt_options defaults;
    zenrt_options_init(&defaults);
    double timeoutSeconds = resolveTimeout(defaults);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeoutSeconds);
    auto *base = static_cast<char *>(data);
    for (size_t offset = 0; offset < bytes; offset += kBroadcastPieceBytes) {
      size_t piece = std::min(kBroadcastPieceBytes, bytes - offset);
      zenrt::Backend::Request request =
          backend.broadcast(base + offset, piece, zenrt::Element::Byte, root, 0);
      // Polls with short sleeps rather than blocking in MPI: ranks waiting for a root that is
      // still busy (planning, say) then leave it the CPU, and the wait can time out.
      while (!backend.test(request)) {
        if (std::chrono::steady_clock::now() > deadline)
          throw zenrt::RuntimeError(ZENRT_ERR_TIMEOUT,
                                    prefix + std::to_string(bytes) + " bytes from rank " +
                                        std::to_string(root) + " not done after " +
                                        std::to_string(timeoutSeconds) + " s");
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    }
  });
}

int zenrt_world_exchange(uint64_t value, uint64_t *all) {
  return guarded([&] {
    World &job = world();
    std::lock_guard<std::mutex> lock(job.mutex);
    zenrt::Backend &backend = worldBackend(job, "zenrt_world_exchange");
    if (!all)
      throw zenrt::RuntimeError(ZENRT_ERR_INVALID_ARGUMENT, "zenrt_world_exchange: null output");
    std::vector<uint64_t> values = backend.exchange(value);
    std::copy(values.begin(), values.end(), all);
  });
}

int zenrt_sparse_allreduce(const char *scheme, int64_t rows, int64_t row_elements,
                           int64_t nnz_rows, const int64_t *indices, const float *values,
                           float *out, int64_t *out_rows, double timeout_s) {
  return guarded([&] {
    World &job = world();
    std::lock_guard<std::mutex> lock(job.mutex);
    zenrt::Backend &backend = worldBackend(job, "zenrt_sparse_allreduce");
    const std::string prefix =
        "rank " + std::to_string(backend.rank()) + ": zenrt_sparse_allreduce: ";
    zenrt::sparse::Table table{rows, row_elements};
    zenrt::sparse::Options options;
    zenrt::sparse::RowSparse local;
    // Each rank checks its arguments, then the ranks agree on them (the status and a digest
    // of the scheme and shape) before any exchange: a rank that refused would leave the
    // others waiting until the timeout.
    zenrt_options defaults;
    zenrt_options_init(&defaults);
    defaults.timeout_s = timeout_s;
    options.timeoutSeconds = resolveTimeout(defaults);
    const int status = guarded([&] {
      if (!scheme)
        throw zenrt::RuntimeError(ZENRT_ERR_INVALID_ARGUMENT, prefix + "null scheme");
      // "omnireduce:<block_rows>", "sparcml:<dense_threshold>": the plan's parameter.
      const std::string text = scheme;
      const size_t colon = text.find(':');
      const auto parsed = zen::vocab::parseSparseScheme(text.substr(0, colon));
      if (!parsed)
        throw zenrt::RuntimeError(ZENRT_ERR_INVALID_ARGUMENT,
                                  prefix + "unknown scheme '" + text + "'");
      options.scheme = *parsed;
      if (colon != std::string::npos) {
        const auto &traits = zen::vocab::traitsOf(*parsed);
        const std::string parameter = text.substr(colon + 1);
        char *end = nullptr;
        const double value = std::strtod(parameter.c_str(), &end);
        const bool number = !parameter.empty() && *end == '\0' && std::isfinite(value);
        if (traits.takesBlockRows && number && value >= 1 && value == std::floor(value) &&
            value <= double(INT64_MAX / 2))
          options.blockRows = int64_t(value);
        else if (traits.takesDenseThreshold && number && value > 0 && value <= 1)
          options.denseThreshold = value;
        else
          throw zenrt::RuntimeError(
              ZENRT_ERR_INVALID_ARGUMENT,
              prefix + "scheme '" + text + "': " +
                  (traits.takesBlockRows ? "block_rows must be an integer >= 1"
                   : traits.takesDenseThreshold
                       ? "dense_threshold must be in (0, 1]"
                       : std::string(traits.spelling) + " takes no parameter"));
      }
      if (rows < 0 || row_elements < 1 || nnz_rows < 0)
        throw zenrt::RuntimeError(ZENRT_ERR_INVALID_ARGUMENT,
                                  prefix + "rows " + std::to_string(rows) + ", row_elements " +
                                      std::to_string(row_elements) + ", nnz_rows " +
                                      std::to_string(nnz_rows) +
                                      " (expected >= 0, >= 1, >= 0)");
      if (!out && rows > 0)
        throw zenrt::RuntimeError(ZENRT_ERR_INVALID_ARGUMENT, prefix + "null output");
      if (*parsed == zen::vocab::SparseScheme::Hierarchical)
        if (const char *perNode = std::getenv("ZENRT_RANKS_PER_NODE")) {
          char *end = nullptr;
          const long value = std::strtol(perNode, &end, 10);
          if (end == perNode || *end != '\0' || value < 1 || value > backend.size())
            throw zenrt::RuntimeError(ZENRT_ERR_INVALID_ARGUMENT,
                                      prefix + "ZENRT_RANKS_PER_NODE='" + perNode +
                                          "' is not a number of ranks in [1, " +
                                          std::to_string(backend.size()) + "]");
          options.ranksPerNode = int(value);
        }
      try {
        local = zenrt::sparse::coalesce(table, nnz_rows, indices, values);
      } catch (const zenrt::Error &e) {
        throw zenrt::RuntimeError(e.status, prefix + e.what());
      }
    });
    const std::string message = lastError;
    // FNV-1a over what every rank must pass alike; 0 stands for a refusal.
    uint64_t digest = 1469598103934665603ULL;
    uint64_t threshold = 0;
    std::memcpy(&threshold, &options.denseThreshold, sizeof(threshold));
    for (uint64_t part : {uint64_t(options.scheme), uint64_t(rows), uint64_t(row_elements),
                          uint64_t(options.ranksPerNode), uint64_t(options.blockRows), threshold})
      digest = (digest ^ part) * 1099511628211ULL;
    digest = status == ZENRT_OK ? (digest | 1) : 0;
    backend.setTimeout(options.timeoutSeconds);
    const std::vector<uint64_t> digests = backend.exchange(digest);
    if (status != ZENRT_OK)
      throw zenrt::RuntimeError(status, message);
    for (size_t r = 0; r < digests.size(); ++r)
      if (digests[r] != digest)
        throw zenrt::RuntimeError(
            ZENRT_ERR_MISMATCH,
            prefix + "rank " + std::to_string(r) +
                (digests[r] == 0 ? " refused its arguments (see its message)"
                                 : " passes another scheme, shape or ranks per node"));
    if (job.sparseComm == MPI_COMM_NULL) {
      MPI_Request request = MPI_REQUEST_NULL;
      zenrt::detail::checkMpi(MPI_Comm_idup(MPI_COMM_WORLD, &job.sparseComm, &request),
                              "MPI_Comm_idup");
      zenrt::detail::waitBounded(request, options.timeoutSeconds, backend.rank(),
                                 [] { return std::string("zenrt_sparse_allreduce: set-up"); });
    }
    const zenrt::sparse::RowSparse reduced =
        zenrt::sparse::allReduce(table, local, options, &job.sparseComm);
    if (rows > 0)
      zenrt::sparse::scatter(table, reduced, out);
    if (out_rows)
      *out_rows = int64_t(reduced.indices.size());
  });
}

int zenrt_world_abort(int exit_code) {
  return guarded([&] {
    // No lock: an abort must not wait for a call that is stuck in a collective.
    World &job = world();
    worldBackend(job, "zenrt_world_abort").abortJob(exit_code);
  });
}

int zenrt_world_finalize(void) {
  return guarded([&] {
    World &job = world();
    std::lock_guard<std::mutex> lock(job.mutex);
    if (!job.backend)
      return;
    if (int open = openHandles.load(); open > 0)
      throw zenrt::RuntimeError(ZENRT_ERR_STATE,
                                "zenrt_world_finalize: " + std::to_string(open) +
                                    " handle(s) still open: zenrt_finalize them first");
    if (job.sparseComm != MPI_COMM_NULL)
      MPI_Comm_free(&job.sparseComm);
    job.backend.reset();
    job.finalized = true;
  });
}

int zenrt_serve_create(zenrt_serve_t *out, const char *plan_path, uint64_t seed,
                       const zenrt_options *options) {
  if (out)
    *out = nullptr;
  return guarded([&] {
    if (!out || !plan_path)
      throw zenrt::RuntimeError(ZENRT_ERR_INVALID_ARGUMENT, "null handle or plan path");
    zenrt_options resolved;
    zenrt_options_init(&resolved);
    if (options)
      resolved = *options;
    const zenrt::Plan plan = zenrt::loadPlanFile(plan_path);
    zenrt::serve::Options engineOptions;
    engineOptions.seed = seed;
    engineOptions.timeoutSeconds = resolveTimeout(resolved);
    auto handle = std::make_unique<zenrt_serve_s>();
    handle->engine = std::make_unique<zenrt::serve::Engine>(
        zenrt::serve::configOf(plan, plan_path), engineOptions, resolved.mpi_comm);
    *out = handle.release();
  });
}

int zenrt_serve_submit(zenrt_serve_t engine, const int32_t *prompt, size_t prompt_tokens,
                       int64_t max_new_tokens, zenrt_token_fn on_token, void *user_data,
                       int64_t *request_id) {
  return guarded([&] {
    zenrt::serve::Engine &e = engineOf(engine);
    if (!request_id || (!prompt && prompt_tokens))
      throw zenrt::RuntimeError(ZENRT_ERR_INVALID_ARGUMENT, "null prompt or request id pointer");
    std::lock_guard<std::mutex> lock(engine->mutex);
    const int64_t id = engine->nextId;
    std::function<void(int32_t)> callback;
    if (on_token)
      callback = [on_token, user_data, id](int32_t token) { on_token(user_data, id, token); };
    auto future = e.submit(std::vector<int32_t>(prompt, prompt + prompt_tokens), max_new_tokens,
                           std::move(callback));
    ++engine->nextId;
    engine->pending.emplace(id, future.share());
    *request_id = id;
  });
}

int zenrt_serve_wait(zenrt_serve_t engine, int64_t request_id, int32_t *tokens, size_t capacity,
                     size_t *count, double *ttft_us, double *tpot_us) {
  return guarded([&] {
    engineOf(engine);
    if (!count || (!tokens && capacity))
      throw zenrt::RuntimeError(ZENRT_ERR_INVALID_ARGUMENT, "null tokens or count pointer");
    std::shared_future<zenrt::serve::Result> future;
    {
      std::lock_guard<std::mutex> lock(engine->mutex);
      auto it = engine->pending.find(request_id);
      if (it == engine->pending.end())
        throw zenrt::RuntimeError(ZENRT_ERR_INVALID_ARGUMENT,
                                  "zenrt_serve_wait: no request " + std::to_string(request_id));
      future = it->second;
    }
    const zenrt::serve::Result &result = future.get();
    *count = result.tokens.size();
    if (capacity < result.tokens.size())
      throw zenrt::RuntimeError(ZENRT_ERR_INVALID_ARGUMENT,
                                "zenrt_serve_wait: " + std::to_string(result.tokens.size()) +
                                    " tokens do not fit a capacity of " + std::to_string(capacity));
    std::copy(result.tokens.begin(), result.tokens.end(), tokens);
    if (ttft_us)
      *ttft_us = result.ttftUs;
    if (tpot_us)
      *tpot_us = result.tpotUs;
    std::lock_guard<std::mutex> lock(engine->mutex);
    engine->pending.erase(request_id);
  });
}

int zenrt_serve_run(zenrt_serve_t engine) {
  return guarded([&] { engineOf(engine).run(); });
}

int zenrt_serve_shutdown(zenrt_serve_t engine) {
  return guarded([&] { engineOf(engine).shutdown(); });
}

int zenrt_serve_destroy(zenrt_serve_t engine) {
  return guarded([&] { delete engine; });
}

const char *zenrt_error_string(int status) {
  switch (status) {
  case ZENRT_OK:
    return "ok";
  case ZENRT_ERR_INVALID_ARGUMENT:
    return "invalid argument";
  case ZENRT_ERR_PLAN:
    return "invalid plan";
  case ZENRT_ERR_IO:
    return "plan file unreadable";
  case ZENRT_ERR_MISMATCH:
    return "ranks disagree";
  case ZENRT_ERR_STATE:
    return "call out of order";
  case ZENRT_ERR_TIMEOUT:
    return "timeout";
  case ZENRT_ERR_BACKEND:
    return "backend error";
  case ZENRT_ERR_ABORTED:
    return "aborted";
  case ZENRT_ERR_INTERNAL:
    return "internal error";
  }
  return "unknown status";
}

const char *zenrt_last_error(void) { return lastError.c_str(); }

const char *zenrt_version(void) { return "0.3.0"; }

}  // extern "C"

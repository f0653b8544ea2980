//===- CApi.cpp - libzenrt C API ---------------------------------------------===//
#include "zenrt/zenrt.h"

#include "Executor.h"
#include "zenrt/Plan.h"
#ifdef ZENRT_HAVE_CUDA
#include "zenrt/CudaKernels.h"
#endif

#include <cmath>
#include <cstdlib>
#include <functional>
#include <new>

struct zenrt_s {
  std::unique_ptr<zenrt::Executor> executor;
};

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
    return e.exitCode == 66 ? ZENRT_ERR_IO : ZENRT_ERR_PLAN;
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
  if (options.timeout_s > 0 && std::isfinite(options.timeout_s))
    return options.timeout_s;
  if (const char *env = std::getenv("ZENRT_TIMEOUT_S")) {
    char *end = nullptr;
    double seconds = std::strtod(env, &end);
    if (end == env || *end != '\0' || !std::isfinite(seconds) || seconds <= 0)
      throw zenrt::RuntimeError(ZENRT_ERR_INVALID_ARGUMENT,
                                std::string("ZENRT_TIMEOUT_S='") + env +
                                    "' is not a positive number of seconds");
    return seconds;
  }
  return 300;
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
        throw zenrt::PlanError(e.exitCode, prefix + e.what());
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
    std::string name = tensor ? tensor : "";
    *done = executorOf(rt).test(tensor ? &name : nullptr) ? 1 : 0;
  });
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

const char *zenrt_version(void) { return "0.2.0"; }

}  // extern "C"

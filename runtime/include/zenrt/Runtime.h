//===- zenrt/Runtime.h - libzenrt C++ API ------------------------------------===//
//
// A thin RAII layer over the C API (zenrt.h): errors become zenrt::Error with
// the status code and the message.
//
//===----------------------------------------------------------------------===//
#ifndef ZENRT_RUNTIME_H
#define ZENRT_RUNTIME_H

#include "zenrt/zenrt.h"

#include <cstdint>
#include <stdexcept>
#include <string>

namespace zenrt {

class Error : public std::runtime_error {
public:
  Error(int status, const std::string &message) : std::runtime_error(message), status(status) {}
  int status;  // a zenrt_status
};

/// Throws zenrt::Error for a status other than ZENRT_OK.
inline void check(int status) {
  if (status != ZENRT_OK)
    throw Error(status, zenrt_last_error());
}

struct RuntimeOptions {
  int rank = -1, worldSize = -1;  // -1: from the communicator
  double timeoutSeconds = 0;      // <= 0: ZENRT_TIMEOUT_S or 300
  const void *mpiComm = nullptr;  // MPI_Comm*, null: MPI_COMM_WORLD
  bool keepSent = false;          // keep each bucket's decoded local contribution
  bool deviceMemory = false;      // gradients are CUDA device buffers (ZENRT_MEMORY_DEVICE)
};

class Runtime {
public:
  using Options = RuntimeOptions;

  static Runtime fromFile(const std::string &path, const Options &options = Options()) {
    zenrt_t handle = nullptr;
    zenrt_options raw = toRaw(options);
    check(zenrt_init_file(&handle, path.c_str(), &raw));
    return Runtime(handle);
  }
  static Runtime fromText(const std::string &text, const std::string &sourceName,
                          const Options &options = Options()) {
    zenrt_t handle = nullptr;
    zenrt_options raw = toRaw(options);
    check(zenrt_init_text(&handle, text.data(), text.size(), sourceName.c_str(), &raw));
    return Runtime(handle);
  }

  Runtime(Runtime &&other) noexcept : handle(other.handle) { other.handle = nullptr; }
  Runtime &operator=(Runtime &&other) noexcept {
    std::swap(handle, other.handle);
    return *this;
  }
  Runtime(const Runtime &) = delete;
  Runtime &operator=(const Runtime &) = delete;
  ~Runtime() { zenrt_finalize(handle); }

  void registerGradient(const std::string &tensor, float *data, int64_t elements) {
    check(zenrt_register(handle, tensor.c_str(), data, elements));
  }
  void markReady(const std::string &tensor) { check(zenrt_mark_ready(handle, tensor.c_str())); }
  void wait(const std::string &tensor) { check(zenrt_wait(handle, tensor.c_str())); }
  void waitAll() { check(zenrt_wait_all(handle)); }
  /// zenrt_hold_collectives: no further collective starts while held.
  void holdCollectives(bool hold) { check(zenrt_hold_collectives(handle, hold ? 1 : 0)); }
  bool test(const std::string &tensor) {
    int done = 0;
    check(zenrt_test(handle, tensor.c_str(), &done));
    return done != 0;
  }
  bool testAll() {
    int done = 0;
    check(zenrt_test(handle, nullptr, &done));
    return done != 0;
  }
  /// zenrt_await: polls `done` until it returns true, bounded by the timeout.
  template <typename Done> void await(Done done, const std::string &what) {
    check(zenrt_await(
        handle, [](void *context) { return (*static_cast<Done *>(context))() ? 1 : 0; }, &done,
        what.c_str()));
  }
  [[noreturn]] void abort(int exitCode) {
    zenrt_abort(handle, exitCode);
    throw Error(ZENRT_ERR_ABORTED, "aborted");
  }
  int bucketCount() const {
    int count = 0;
    check(zenrt_bucket_count(handle, &count));
    return count;
  }
  struct BucketView {
    const float *sent = nullptr;      // null unless Options::keepSent
    const float *residual = nullptr;  // null without error feedback
    int64_t elements = 0;
  };
  BucketView debugBucket(int bucket) const {
    BucketView view;
    check(zenrt_debug_bucket(handle, bucket, &view.sent, &view.residual, &view.elements));
    return view;
  }
  uint64_t planHash() const {
    uint64_t hash = 0;
    check(zenrt_plan_hash(handle, &hash));
    return hash;
  }
  zenrt_t get() const { return handle; }

private:
  explicit Runtime(zenrt_t handle) : handle(handle) {}
  static zenrt_options toRaw(const Options &options) {
    zenrt_options raw;
    zenrt_options_init(&raw);
    raw.rank = options.rank;
    raw.world_size = options.worldSize;
    raw.timeout_s = options.timeoutSeconds;
    raw.mpi_comm = options.mpiComm;
    raw.keep_sent = options.keepSent ? 1 : 0;
    raw.memory = options.deviceMemory ? ZENRT_MEMORY_DEVICE : ZENRT_MEMORY_HOST;
    return raw;
  }
  zenrt_t handle = nullptr;
};

}  // namespace zenrt

#endif  // ZENRT_RUNTIME_H

//===- Executor.h - Plan executor (internal) --------------------------------===//
//
// Owns the fusion buffers, error-feedback residuals and bucket programs of a
// plan, and a progress thread that compresses complete buckets, starts their
// collectives in plan order per stream and finishes them. A waiter drives
// progress itself for a short while before it blocks (no thread hand-off on
// the fast path); meanwhile the progress thread stands by. Public calls
// (register, markReady, wait, test) are thread-safe; every wait has a timeout.
//
//===----------------------------------------------------------------------===//
#ifndef ZENRT_LIB_EXECUTOR_H
#define ZENRT_LIB_EXECUTOR_H

#include "Backend.h"
#include "Programs.h"
#include "zenrt/Plan.h"

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>

namespace zenrt {

struct ExecutorOptions {
  double timeoutSeconds = 300;
  bool keepSent = false;
};

class Executor {
public:
  /// Agrees on the plan with every rank (throws RuntimeError(ZENRT_ERR_MISMATCH)
  /// on every rank when they differ), opens the streams, starts the progress thread.
  Executor(Plan plan, std::unique_ptr<Backend> backend, ExecutorOptions options);
  ~Executor();
  Executor(const Executor &) = delete;
  Executor &operator=(const Executor &) = delete;

  void registerGradient(std::string_view tensor, float *data, int64_t elements);
  void markReady(std::string_view tensor);
  void wait(std::string_view tensor);
  void waitAll();
  /// `tensor`'s bucket done, or with none every bucket's main collectives.
  bool test(std::optional<std::string_view> tensor);
  /// While held, no further collective stage starts; those in flight complete.
  void holdCollectives(bool hold);
  [[noreturn]] void abort(int exitCode);
  /// Polls `done` (an application's own collective, e.g. a barrier) until it returns true,
  /// bounded by the timeout; on timeout fails the handle naming the ranks waited for.
  void await(const std::function<bool()> &done, const std::string &what);

  const Plan &plan() const { return thePlan; }
  uint64_t hash() const { return planHashValue; }
  int rank() const { return backend->rank(); }
  size_t bucketCount() const { return buckets.size(); }
  const BucketBuffers &bucketBuffers(size_t bucket) const { return buckets.at(bucket).buffers; }

private:
  enum class BucketState { Idle, Filling, Complete, Communicating, Done };
  struct BucketRun {
    BucketBuffers buffers;
    std::unique_ptr<BucketProgram> program;
    Backend *comm = nullptr;  // its group's: the executor's, or the expert replicas'
    Compute *first = nullptr, *last = nullptr;  // of its first and last collective's streams
    std::vector<size_t> tensorIds;  // plan tensor index of each entry
    BucketState state = BucketState::Idle;
    size_t marked = 0;
    size_t nextStage = 0;        // the stage to start next, or in flight
    bool stageInFlight = false;
    size_t decoupledStage = SIZE_MAX;  // first stage of a decoupled all-gather
    std::vector<Backend::Request> requests;
    uint64_t sequence = 0;  // stream sequence number of the stage in flight
  };
  struct StreamQueue {
    int stream;
    std::vector<std::pair<size_t, size_t>> ops;  // (bucket, collective) in schedule order
    size_t cursor = 0;
    int64_t iteration = 0;
    uint64_t issued = 0;  // sequence numbers
    /// The (bucket, collective) whose stage this stream issued last (bucket SIZE_MAX: none
    /// yet): the next waits until that stage completes. A bucket's later stage on another
    /// stream (a gather after its reduce-scatter) does not hold this one.
    std::pair<size_t, size_t> lastIssued{SIZE_MAX, 0};
  };
  struct TensorRun {
    size_t bucket = 0, entry = 0;
    float *data = nullptr;
    int64_t markedIteration = -1;
  };

  void agreeOnPlan();
  void setUpBucket(size_t bucket);
  void buildQueues();
  void progressLoop();
  bool progressOnce();  // with the mutex held; true when something happened
  bool compressComplete();  // complete buckets -> communicating
  bool issueReady();        // starts every stage whose turn it is on its stream
  /// The stage this stream issued last is still in flight.
  bool issuedStillInFlight(const StreamQueue &queue) const;
  bool testInFlight();      // true when a stage completed
  /// progressOnce, turning its errors into the handle's failure (rethrown).
  bool driveProgress();
  void finishBucket(BucketRun &run);
  bool mainDone(const BucketRun &run) const;
  bool allDone(const BucketRun &run) const;
  bool workPending() const;  // a bucket to compress or a stage in flight
  size_t tensorIndex(std::string_view tensor) const;
  /// Waits (mutex held via `lock`) until ready(b) for every listed bucket; on
  /// timeout fails the handle with a message describing the first bucket not ready.
  template <typename Ready>
  void waitFor(std::unique_lock<std::mutex> &lock, const char *call,
               const std::vector<size_t> &bucketList, Ready ready);
  std::string describe(size_t bucket) const;
  /// The other ranks' positions (empty entries: no answer within the grace), asked with
  /// the mutex released so that the progress thread keeps going (held via `lock` on entry
  /// and on return).
  using PeerAnswers = std::vector<std::optional<Backend::Position>>;
  PeerAnswers askPeers(std::unique_lock<std::mutex> &lock);
  /// What this rank waits for in bucket b's collective in flight, from the positions
  /// `answers`: the ranks behind it or silent (mutex held).
  std::string waitedFor(size_t bucket, const PeerAnswers &answers) const;
  /// This rank's position for the other ranks: the iteration, then the sequence number
  /// last issued on each stream queue (mutex held).
  Backend::Position position() const;
  [[noreturn]] void failWith(int status, const std::string &message);
  void throwIfFailed() const;
  void throwIfHeld(const char *call) const;

  Plan thePlan;
  uint64_t planHashValue = 0;
  std::unique_ptr<Backend> backend;
  /// The ranks holding the same experts as this one (every ep-th rank): the group of the
  /// plan's expert_replicas buckets; null without any. Destroyed before `backend`.
  std::unique_ptr<Backend> expertBackend;
  ExecutorOptions options;
  std::vector<BucketRun> buckets;
  std::vector<TensorRun> tensors;
  std::map<std::string, size_t, std::less<>> tensorByName;  // looked up by string_view
  std::vector<StreamQueue> streams;
  std::vector<size_t> everyBucket;  // 0 .. buckets - 1, what waitAll waits for
  int64_t iteration = 0;
  size_t registered = 0;           // tensors with a buffer
  size_t markedThisIteration = 0;  // tensors marked ready since the last waitAll
  bool held = false;  // holdCollectives

  mutable std::mutex mutex;
  std::condition_variable workReady, progressMade;
  bool stopping = false;
  int drivers = 0;  // waiters driving progress themselves; the progress thread stands by
  int failedStatus = 0;
  std::string failure;
  std::thread progressThread;
};

}  // namespace zenrt

#endif  // ZENRT_LIB_EXECUTOR_H

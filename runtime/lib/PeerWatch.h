//===- PeerWatch.h - naming the lost rank without a progress thread -*- C++ -*-===//
//
// The data-parallel executor's progress thread answers the other ranks' position queries
// whatever its rank is doing, so that a rank whose wait times out names the ranks that did
// not answer: dead or hung (Executor::waitedFor). The hybrid and MoE executors wait on the
// caller's thread. A PeerWatch gives them the same: a thread that answers for this rank as
// long as the watch lives (while it computes, waits or reports), and waitWatched, a bounded
// wait that asks the others in its last grace and names the silent ones when it times out.
//
//===----------------------------------------------------------------------===//
#ifndef ZENRT_LIB_PEERWATCH_H
#define ZENRT_LIB_PEERWATCH_H

#include "Backend.h"
#include "zenrt/Runtime.h"

#include <mpi.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace zenrt::detail {

class PeerWatch {
public:
  /// Over `comm` (an MPI_Comm*, null: MPI_COMM_WORLD): collective, bounded by the timeout.
  /// Ranks are named by their rank in MPI_COMM_WORLD (the job's, as mpirun numbers them).
  PeerWatch(const void *comm, double timeoutSeconds) : timeoutSeconds(timeoutSeconds) {
    const MPI_Comm over = comm ? *static_cast<const MPI_Comm *>(comm) : MPI_COMM_WORLD;
    MPI_Group group = MPI_GROUP_NULL, world = MPI_GROUP_NULL;
    MPI_Comm_group(over, &group);
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    int size = 0;
    MPI_Group_size(group, &size);
    std::vector<int> ranks(size_t(size), 0);
    for (int r = 0; r < size; ++r)
      ranks[size_t(r)] = r;
    worldRanks.resize(size_t(size));
    MPI_Group_translate_ranks(group, size, ranks.data(), world, worldRanks.data());
    MPI_Group_free(&group);
    MPI_Group_free(&world);
    try {
      backend = createMpiBackend(comm);
      backend->setTimeout(timeoutSeconds);
      backend->exchange(0);  // opens the channel the queries travel on
    } catch (const RuntimeError &error) {
      throw Error(error.status, error.what());
    }
    answering = std::thread([this] { answer(); });
  }
  ~PeerWatch() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stopping = true;
    }
    stop.notify_all();
    answering.join();
  }
  PeerWatch(const PeerWatch &) = delete;
  PeerWatch &operator=(const PeerWatch &) = delete;

  /// This rank in MPI_COMM_WORLD.
  int worldRank() const { return worldRanks[size_t(backend->rank())]; }
  double timeout() const { return timeoutSeconds; }

  /// Asks every other rank, for one grace: the silent ones worded ("rank 1 (no answer
  /// within 0.5 s: dead or hung)"), "" when every one answered.
  std::string silentRanks() {
    const auto grace = peerQueryGrace(timeoutSeconds);
    const auto answers = backend->askPeers(kAlive, std::chrono::steady_clock::now() + grace);
    return silentRanksText(answers, backend->rank(), grace, worldRanks);
  }

private:
  /// What this rank answers: that it is alive (these executors have no position to tell).
  inline static const Backend::Position kAlive{1};

  void answer() {
    std::unique_lock<std::mutex> lock(mutex);
    while (!stopping) {
      backend->answerPeers(kAlive);
      // Often enough for the shortest grace (0.5 s), rarely enough for busy cores.
      stop.wait_for(lock, std::chrono::milliseconds(10));
    }
  }

  double timeoutSeconds;
  std::vector<int> worldRanks;
  std::unique_ptr<Backend> backend;
  std::mutex mutex;
  std::condition_variable stop;
  bool stopping = false;
  std::thread answering;
};

/// "1" for 1 s, "0.25" for a quarter.
inline std::string secondsText(double seconds) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", seconds);
  return text;
}

/// Polls `done` until it returns true. After `timeoutSeconds` fails with ZENRT_ERR_TIMEOUT:
/// "rank R: <describe()> timed out after T s", and with a watch the ranks that did not
/// answer the query it sent in the wait's last grace (peerQueryStart), so that the report
/// names the lost rank at the timeout. `rank` names this rank without a watch.
template <typename Done, typename Describe>
void waitWatched(Done done, double timeoutSeconds, int rank, Describe describe,
                 PeerWatch *watch) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(timeoutSeconds));
  const auto askAt = start + peerQueryStart(timeoutSeconds);
  bool asked = false;
  std::string silent;
  for (;;) {
    if (done())
      return;
    const auto now = Clock::now();
    if (watch && !asked && now >= askAt) {
      silent = watch->silentRanks();
      asked = true;
      continue;
    }
    if (now > deadline && (asked || !watch)) {
      std::string message = "rank " + std::to_string(watch ? watch->worldRank() : rank) + ": " +
                            describe() + " timed out after " + secondsText(timeoutSeconds) + " s";
      if (watch)
        message += silent.empty() ? " (every rank answered: none is dead)" : ": waiting for " + silent;
      throw Error(ZENRT_ERR_TIMEOUT, message);
    }
    std::this_thread::yield();
  }
}

} // namespace zenrt::detail

#endif // ZENRT_LIB_PEERWATCH_H

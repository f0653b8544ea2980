//===- Backend.h - Collective backends (internal) ---------------------------===//
//
// The five collectives the executor needs, non-blocking, on numbered streams.
// Counts are per rank and equal on every rank (the executor pads shards), so
// NCCL and MPI implement the same interface. Reductions are sums.
//
//===----------------------------------------------------------------------===//
#ifndef ZENRT_LIB_BACKEND_H
#define ZENRT_LIB_BACKEND_H

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace zenrt {

class Compute;

/// Element kinds on the wire. F16/BF16 sums round in 16 bits; Byte is not reducible.
enum class Element { F32, F16, BF16, Byte };
size_t elementBytes(Element element);

/// An error with a status code of zenrt.h.
struct RuntimeError : std::runtime_error {
  RuntimeError(int status, const std::string &message)
      : std::runtime_error(message), status(status) {}
  int status;
};

class Backend {
public:
  using Request = uint64_t;
  virtual ~Backend() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  /// In place: data[count] = sum over ranks.
  virtual Request allReduce(void *data, size_t count, Element element, int stream) = 0;
  /// send[size * count] -> recv[count]: this rank's block of the sum.
  virtual Request reduceScatter(const void *send, void *recv, size_t count, Element element,
                                int stream) = 0;
  /// send[count] -> recv[size * count], rank r's block at r * count.
  virtual Request allGather(const void *send, void *recv, size_t count, Element element,
                            int stream) = 0;
  /// send[size * count] -> recv[size * count]: block r goes to rank r.
  virtual Request allToAll(const void *send, void *recv, size_t count, Element element,
                           int stream) = 0;
  /// In place from `root`.
  virtual Request broadcast(void *data, size_t count, Element element, int root,
                            int stream) = 0;
  /// True once the request completed (the request is then released).
  virtual bool test(Request request) = 0;
  /// Exchange of one value per rank (start-up agreement), bounded by the timeout: a
  /// RuntimeError(ZENRT_ERR_TIMEOUT) names the ranks that sent nothing.
  virtual std::vector<uint64_t> exchange(uint64_t value) = 0;
  /// Creates the communication streams (collective, bounded by the timeout; call after the
  /// ranks agreed on the plan).
  virtual void openStreams(const std::vector<int> &streams) = 0;
  /// Seconds the start-up calls (exchange, openStreams) may wait for the other ranks.
  virtual void setTimeout(double seconds) = 0;
  /// A backend over the ranks that pass the same `color`, in this one's rank order (a
  /// collective call of every rank, bounded by the timeout): rank() and size() within
  /// the group, its own streams (openStreams) and requests; it keeps this one's timeout.
  virtual std::unique_ptr<Backend> split(int color) = 0;

  /// Where a rank's executor is (opaque here; equal plans give equal lengths).
  using Position = std::vector<uint64_t>;
  /// Answers the position queries other ranks sent since the last call (non-blocking;
  /// the executor calls it often, whatever its state, so that a live rank always answers).
  virtual void answerPeers(const Position &own) = 0;
  /// Asks every other rank for its position, answering theirs with `own` meanwhile; an
  /// entry stays empty for this rank and for a rank that did not answer before `until`.
  virtual std::vector<std::optional<Position>>
  askPeers(const Position &own, std::chrono::steady_clock::time_point until) = 0;
  /// The memory the collectives work on, with kernels ordered with `stream`'s collectives.
  virtual Compute &compute(int stream) = 0;
  /// Terminates the job (started collectives cannot be cancelled).
  [[noreturn]] virtual void abortJob(int exitCode) = 0;
};

/// How long a rank whose wait is running out waits for the other ranks' answers to its
/// position query: long enough for a loaded machine, short enough that it still exits
/// within timeout + 5 s.
inline std::chrono::steady_clock::duration peerQueryGrace(double timeoutSeconds) {
  double seconds = std::min(2.0, std::max(0.5, timeoutSeconds / 4));
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(seconds));
}

/// How far into a wait of `timeoutSeconds` that has not completed the rank asks the others
/// where they are: one grace before the timeout (not before half of it), so that the query
/// runs inside the wait and the report comes at the timeout, not a grace after it (under
/// a second's timeout, at most half a second after it).
inline std::chrono::steady_clock::duration peerQueryStart(double timeoutSeconds) {
  const double grace = std::chrono::duration<double>(peerQueryGrace(timeoutSeconds)).count();
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(std::max(timeoutSeconds / 2, timeoutSeconds - grace)));
}

/// The ranks of `answers` but `self` that did not answer a query allowed `grace`, as a
/// timed-out rank reports them: "rank 1 (no answer within 0.5 s: dead or hung)"; "" when
/// every one answered. `names[r]` is how rank r is called (its rank in MPI_COMM_WORLD
/// where the query ran in a group of it); empty: r itself.
std::string silentRanksText(const std::vector<std::optional<Backend::Position>> &answers, int self,
                            std::chrono::steady_clock::duration grace,
                            const std::vector<int> &names = {});

/// MPI backend on `comm` (an MPI_Comm*, NULL = MPI_COMM_WORLD); streams are
/// duplicated communicators. Initialises MPI (THREAD_MULTIPLE) if needed.
std::unique_ptr<Backend> createMpiBackend(const void *comm);

#ifdef ZENRT_HAVE_CUDA
/// The CUDA device this process's device work runs on: its MPI_COMM_WORLD rank % the
/// devices it sees (one device per process, whatever communicator a backend is made over).
/// Throws RuntimeError(ZENRT_ERR_BACKEND) when it sees none or MPI is not initialised.
int processDevice();

/// NCCL backend on device buffers (on processDevice()), bootstrapped over `comm` with MPI,
/// which `host` (the MPI backend on `comm`) keeps initialised; start-up exchanges go through
/// `host`. Streams are CUDA streams.
std::unique_ptr<Backend> createNcclBackend(const void *comm, std::unique_ptr<Backend> host);
#endif

}  // namespace zenrt

#endif  // ZENRT_LIB_BACKEND_H

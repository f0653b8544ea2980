//===- zenrt/WatchedWaits.h - bounded waits that name the lost rank (C++ API) ===//
//
// The runtime's executors name the ranks that stopped answering when one of their waits
// times out (runtime/lib/PeerWatch.h). Code that makes its own MPI calls beside them (the
// tensor-parallel MLP's callers, zenopt-run's summaries over ranks) gets the same from a
// WatchedWaits: while it lives, a thread answers the other ranks' liveness queries for this
// one, and await() asks them in its last grace before the timeout, so that the report names
// the dead or hung rank when the wait fails.
//
//===----------------------------------------------------------------------===//
#ifndef ZENRT_WATCHEDWAITS_H
#define ZENRT_WATCHEDWAITS_H

#include <functional>
#include <memory>
#include <string>

namespace zenrt {
namespace detail {
class PeerWatch;
}

class WatchedWaits {
public:
  /// Collective over `comm` (an MPI_Comm*, null: MPI_COMM_WORLD; MPI must be initialised),
  /// bounded by the timeout. Throws zenrt::Error.
  WatchedWaits(const void *comm, double timeoutSeconds);
  ~WatchedWaits();
  WatchedWaits(const WatchedWaits &) = delete;
  WatchedWaits &operator=(const WatchedWaits &) = delete;

  /// Polls `done` until it returns true. After the timeout throws zenrt::Error
  /// (ZENRT_ERR_TIMEOUT): "rank R: <describe()> timed out after T s: waiting for rank N
  /// (no answer within G s: dead or hung)", ranks named by their rank in MPI_COMM_WORLD.
  void await(const std::function<bool()> &done, const std::function<std::string()> &describe);

  double timeoutSeconds() const;

private:
  std::unique_ptr<detail::PeerWatch> watch;
};

} // namespace zenrt

#endif // ZENRT_WATCHEDWAITS_H

//===- Collectives.h - zenopt-run's own MPI collectives, bounded -*- C++ -*-===//
//
// The tool's collectives (iteration barrier, numerics check, aggregates): non-blocking MPI
// calls polled through the runtime, so that they are bounded by its timeout like its own.
//
//===----------------------------------------------------------------------===//
#ifndef ZEN_TOOLS_ZENOPT_RUN_COLLECTIVES_H
#define ZEN_TOOLS_ZENOPT_RUN_COLLECTIVES_H

#include "zenrt/Runtime.h"

#include <mpi.h>

#include <string>
#include <vector>

namespace zen::run {

/// MPI_Comm_split of MPI_COMM_WORLD, freed when done.
class GroupComm {
public:
  GroupComm(int color, int key) {
    if (MPI_Comm_split(MPI_COMM_WORLD, color, key, &comm) != MPI_SUCCESS)
      throw zenrt::Error(ZENRT_ERR_BACKEND, "MPI_Comm_split of MPI_COMM_WORLD failed");
  }
  ~GroupComm() { MPI_Comm_free(&comm); }
  GroupComm(const GroupComm &) = delete;
  GroupComm &operator=(const GroupComm &) = delete;
  MPI_Comm comm = MPI_COMM_NULL;
};

class BoundedCollectives {
public:
  /// Over `comm`: the world, or a group of its ranks.
  explicit BoundedCollectives(zenrt::Runtime &runtime, MPI_Comm comm = MPI_COMM_WORLD)
      : runtime(runtime), comm(comm) {}

  void barrier(const std::string &what) {
    MPI_Request request;
    MPI_Ibarrier(comm, &request);
    await(request, what + " (MPI_Ibarrier)");
  }
  std::vector<double> allreduceSum(const std::vector<double> &local, const std::string &what) {
    std::vector<double> out(local.size());
    MPI_Request request;
    MPI_Iallreduce(local.data(), out.data(), int(local.size()), MPI_DOUBLE, MPI_SUM,
                   comm, &request);
    await(request, what + " (MPI_Iallreduce)");
    return out;
  }
  double allreduceScalar(double value, MPI_Op op, const std::string &what) {
    double out = 0;
    MPI_Request request;
    MPI_Iallreduce(&value, &out, 1, MPI_DOUBLE, op, comm, &request);
    await(request, what + " (MPI_Iallreduce)");
    return out;
  }
  void broadcast(std::vector<double> &values, const std::string &what) {
    MPI_Request request;
    MPI_Ibcast(values.data(), int(values.size()), MPI_DOUBLE, 0, comm, &request);
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
  MPI_Comm comm;
};

}  // namespace zen::run

#endif  // ZEN_TOOLS_ZENOPT_RUN_COLLECTIVES_H

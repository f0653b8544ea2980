//===- MpiSupport.h - MPI error checks and bounded waits -----------*- C++ -*-===//
//
// Shared by the runtime's MPI layers (the MoE layer, the tensor-parallel MLP): an MPI error
// becomes a zenrt::Error, and no wait blocks longer than its timeout (PeerWatch.h).
//
//===----------------------------------------------------------------------===//
#ifndef ZENRT_LIB_MPISUPPORT_H
#define ZENRT_LIB_MPISUPPORT_H

#include "PeerWatch.h"
#include "zenrt/Runtime.h"

#include <mpi.h>

#include <string>

namespace zenrt::detail {

inline void checkMpi(int code, const char *what) {
  if (code == MPI_SUCCESS)
    return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw Error(ZENRT_ERR_BACKEND, std::string(what) + " failed: " + std::string(text, length));
}

/// MPI_Wait that fails with ZENRT_ERR_TIMEOUT ("rank R: <what> timed out after T s", and
/// with a watch the ranks that do not answer) once `timeoutSeconds` have passed;
/// `describe()` is called only then.
template <typename Describe>
void waitBounded(MPI_Request &request, double timeoutSeconds, int rank, Describe describe,
                 PeerWatch *watch = nullptr) {
  waitWatched(
      [&] {
        int done = 0;
        checkMpi(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test");
        return done != 0;
      },
      timeoutSeconds, rank, describe, watch);
}

} // namespace zenrt::detail

#endif // ZENRT_LIB_MPISUPPORT_H

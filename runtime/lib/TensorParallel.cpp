//===- TensorParallel.cpp - decomposed tensor-parallel MLP over MPI -------===//
//
// Also the watched waits (zenrt/WatchedWaits.h) that the MLP and the tools' own MPI calls
// use to name a lost rank: the public face of PeerWatch.h.
//
//===----------------------------------------------------------------------===//
#include "zenrt/TensorParallel.h"

#include "MpiSupport.h"
#include "zenrt/Runtime.h"
#include "zenrt/WatchedWaits.h"

#include <Eigen/Core>
#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

namespace zenrt {

WatchedWaits::WatchedWaits(const void *comm, double timeoutSeconds)
    : watch(std::make_unique<detail::PeerWatch>(comm, timeoutSeconds)) {}

WatchedWaits::~WatchedWaits() = default;

void WatchedWaits::await(const std::function<bool()> &done,
                         const std::function<std::string()> &describe) {
  detail::waitWatched(done, watch->timeout(), watch->worldRank(), describe, watch.get());
}

double WatchedWaits::timeoutSeconds() const { return watch->timeout(); }

} // namespace zenrt

namespace zenrt::tp {
namespace {

using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMap = Eigen::Map<const RowMajor>;
using Map = Eigen::Map<RowMajor>;

} // namespace

void mlpForward(const MlpShard &shard, const Schedule &schedule, int64_t tokens, const float *input,
                float *output, const void *comm) {
  auto invalid = [](const std::string &message) {
    return Error(ZENRT_ERR_INVALID_ARGUMENT, "tensor-parallel MLP: " + message);
  };
  if (!input || !output || !shard.fc1 || !shard.fc2)
    throw invalid("a buffer or weight is null");
  if (tokens < 1 || shard.hidden < 1 || shard.ffnShard < 1)
    throw invalid("tokens, hidden and the inner shard must be at least 1");
  if (schedule.chunks < 1 || tokens % schedule.chunks != 0)
    throw invalid(std::to_string(schedule.chunks) + " chunks do not divide the " +
                  std::to_string(tokens) + " tokens");
  if (!(schedule.timeoutSeconds > 0))
    throw invalid("the timeout must be positive");
  const MPI_Comm base = comm ? *static_cast<const MPI_Comm *>(comm) : MPI_COMM_WORLD;
  int rank = 0, size = 1;
  detail::checkMpi(MPI_Comm_rank(base, &rank), "MPI_Comm_rank");
  detail::checkMpi(MPI_Comm_size(base, &size), "MPI_Comm_size");

  const int64_t rows = tokens / schedule.chunks, h = shard.hidden;
  if (rows * h > (int64_t{1} << 31) - 1)
    throw invalid("a chunk exceeds 2^31 elements");
  const size_t chunkFloats = size_t(rows * h), chunks = size_t(schedule.chunks);
  const ConstMap fc1(shard.fc1, shard.ffnShard, h), fc2(shard.fc2, h, shard.ffnShard);
  std::vector<float> partial(chunkFloats * chunks), gathered(chunkFloats * chunks * size_t(size));
  std::vector<MPI_Request> requests(chunks, MPI_REQUEST_NULL);
  std::unique_ptr<WatchedWaits> ownWaits;
  if (!schedule.waits && size > 1)
    ownWaits = std::make_unique<WatchedWaits>(comm, schedule.timeoutSeconds);
  WatchedWaits *waits = schedule.waits ? schedule.waits : ownWaits.get();
  // Each chunk's partial leaves as soon as it is computed; the next chunk computes meanwhile.
  for (size_t c = 0; c < chunks; ++c) {
    const ConstMap x(input + c * chunkFloats, rows, h);
    Map y(&partial[c * chunkFloats], rows, h);
    y.noalias() = (x * fc1.transpose()).cwiseMax(0.0f) * fc2.transpose();
    detail::checkMpi(MPI_Iallgather(&partial[c * chunkFloats], int(chunkFloats), MPI_FLOAT,
                                    &gathered[c * chunkFloats * size_t(size)], int(chunkFloats),
                                    MPI_FLOAT, base, &requests[c]),
                     "MPI_Iallgather");
  }
  for (size_t c = 0; c < chunks; ++c) {
    auto sent = [&] {
      int done = 0;
      detail::checkMpi(MPI_Test(&requests[c], &done, MPI_STATUS_IGNORE), "MPI_Test");
      return done != 0;
    };
    auto describe = [&] { return "tensor-parallel reduction of chunk " + std::to_string(c); };
    if (waits)
      waits->await(sent, describe);
    else  // one rank: nobody to wait for
      detail::waitWatched(sent, schedule.timeoutSeconds, rank, describe, nullptr);
    float *out = output + c * chunkFloats;
    const float *parts = &gathered[c * chunkFloats * size_t(size)];
    for (size_t i = 0; i < chunkFloats; ++i) {
      float sum = parts[i];
      for (int s = 1; s < size; ++s)
        sum += parts[size_t(s) * chunkFloats + i];
      out[i] = sum;
    }
  }
}

} // namespace zenrt::tp

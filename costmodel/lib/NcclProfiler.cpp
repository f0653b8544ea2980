//===- NcclProfiler.cpp - NCCL collectives for `zenopt profile` -----------===//
//
// One GPU per rank (the node-local rank picks the device), the NCCL unique id
// shared over MPI, every operation on one stream and timed to its completion.
//
//===----------------------------------------------------------------------===//
#include "ProfilerBackend.h"

#include "zen/CostModel/Profiler.h"

#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <string>

namespace zen::cost {
namespace {


void checkCuda(cudaError_t status, const char *what) {
  if (status != cudaSuccess)
    throw ProfileError(ErrorKind::Internal, std::string("--backend nccl: ") + what + ": " + cudaGetErrorString(status));
}

void checkNccl(ncclResult_t status, const char *what) {
  if (status != ncclSuccess)
    throw ProfileError(ErrorKind::Internal, std::string("--backend nccl: ") + what + ": " + ncclGetErrorString(status));
}

class NcclBackend : public CollectiveBackend {
public:
  explicit NcclBackend(int64_t maxBytes) {
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    shape_.ranks = size;
    rank_ = rank;

    // Every rank learns whether every rank has a device before any NCCL call,
    // so a GPU-less job fails everywhere instead of hanging.
    MPI_Comm local;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local);
    int localRank = 0;
    MPI_Comm_rank(local, &localRank);
    MPI_Comm_free(&local);
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess)
      devices = 0;
    int fewest = devices;
    MPI_Allreduce(MPI_IN_PLACE, &fewest, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (fewest == 0)
      throw ProfileError(ErrorKind::Internal, "--backend nccl: no CUDA device visible to every rank "
                                        "(use --backend mpi on CPU-only machines)");
    checkCuda(cudaSetDevice(localRank % devices), "cudaSetDevice");

    ncclUniqueId id;
    if (rank == 0)
      checkNccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    checkNccl(ncclCommInitRank(&comm_, size, id, rank), "ncclCommInitRank");
    checkCuda(cudaStreamCreate(&stream_), "cudaStreamCreate");
    size_t bytes = static_cast<size_t>(maxBytes + 16 * size);
    checkCuda(cudaMalloc(&send_, bytes), "cudaMalloc");
    checkCuda(cudaMalloc(&receive_, bytes), "cudaMalloc");
    checkCuda(cudaMemset(send_, 0, bytes), "cudaMemset");
  }

  ~NcclBackend() override {
    cudaFree(send_);
    cudaFree(receive_);
    if (stream_)
      cudaStreamDestroy(stream_);
    if (comm_)
      ncclCommDestroy(comm_);
  }

  int64_t actualBytes(CollectiveKind kind, int64_t bytes) const override {
    return shape_.actualBytes(kind, bytes);
  }

  void run(CollectiveKind kind, int64_t bytes) override {
    int ranks = static_cast<int>(shape_.ranks);
    switch (kind) {
    case CollectiveKind::AllReduce:
      checkNccl(ncclAllReduce(send_, receive_, static_cast<size_t>(shape_.floatsFor(bytes)), ncclFloat,
                              ncclSum, comm_, stream_),
                "ncclAllReduce");
      break;
    case CollectiveKind::ReduceScatter:
      checkNccl(ncclReduceScatter(send_, receive_, static_cast<size_t>(shape_.blockFloats(bytes)),
                                  ncclFloat, ncclSum, comm_, stream_),
                "ncclReduceScatter");
      break;
    case CollectiveKind::AllGather:
      checkNccl(ncclAllGather(send_, receive_, static_cast<size_t>(shape_.blockBytes(bytes)), ncclChar,
                              comm_, stream_),
                "ncclAllGather");
      break;
    case CollectiveKind::AllToAll: {
      // NCCL has no all-to-all call: grouped point-to-point, as nccl-tests does.
      size_t block = static_cast<size_t>(shape_.blockBytes(bytes));
      checkNccl(ncclGroupStart(), "ncclGroupStart");
      for (int peer = 0; peer < ranks; ++peer) {
        checkNccl(ncclSend(static_cast<char *>(send_) + peer * block, block, ncclChar, peer, comm_, stream_),
                  "ncclSend");
        checkNccl(ncclRecv(static_cast<char *>(receive_) + peer * block, block, ncclChar, peer, comm_,
                           stream_),
                  "ncclRecv");
      }
      checkNccl(ncclGroupEnd(), "ncclGroupEnd");
      break;
    }
    case CollectiveKind::Broadcast:
      checkNccl(ncclBroadcast(send_, receive_, static_cast<size_t>(shape_.actualBytes(kind, bytes)),
                              ncclChar, 0, comm_, stream_),
                "ncclBroadcast");
      break;
    case CollectiveKind::SendRecv: {
      size_t count = static_cast<size_t>(shape_.actualBytes(kind, bytes));
      checkNccl(ncclGroupStart(), "ncclGroupStart");
      checkNccl(ncclSend(send_, count, ncclChar, (rank_ + 1) % ranks, comm_, stream_), "ncclSend");
      checkNccl(ncclRecv(receive_, count, ncclChar, (rank_ + ranks - 1) % ranks, comm_, stream_), "ncclRecv");
      checkNccl(ncclGroupEnd(), "ncclGroupEnd");
      break;
    }
    }
    checkCuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }

private:
  CollectiveShape shape_{1};
  int rank_ = 0;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  void *send_ = nullptr;
  void *receive_ = nullptr;
};

} // namespace

std::unique_ptr<CollectiveBackend> makeNcclBackend(int64_t maxBytes) {
  return std::make_unique<NcclBackend>(maxBytes);
}

} // namespace zen::cost

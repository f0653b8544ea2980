//===- NcclBackend.cpp - Collectives with NCCL on CUDA streams ---------------===//
//
// Device buffers; one CUDA stream per plan stream (the plan's priority is the
// stream priority), each with a device Compute whose kernels queue on it; a
// request is a CUDA event recorded after the NCCL call. MPI bootstraps the
// communicator (rank 0's ncclUniqueId is broadcast); the MPI backend it is
// given keeps MPI alive and carries the start-up exchanges.
//
//===----------------------------------------------------------------------===//
#include "../lib/Backend.h"
#include "../lib/Compute.h"
#include "DeviceScope.h"

#include "zenrt/zenrt.h"

#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <unordered_map>

namespace zenrt {
namespace {

void checkCuda(cudaError_t code, const char *what) {
  if (code != cudaSuccess)
    throw RuntimeError(ZENRT_ERR_BACKEND, std::string(what) + ": " + cudaGetErrorString(code));
}
void checkNccl(ncclResult_t code, const char *what) {
  if (code != ncclSuccess)
    throw RuntimeError(ZENRT_ERR_BACKEND, std::string(what) + ": " + ncclGetErrorString(code));
}

ncclDataType_t ncclType(Element element) {
  switch (element) {
  case Element::F32:
    return ncclFloat32;
  case Element::F16:
    return ncclFloat16;
  case Element::BF16:
    return ncclBfloat16;
  case Element::Byte:
    return ncclUint8;
  }
  return ncclUint8;
}

class NcclBackend final : public Backend {
public:
  NcclBackend(const void *comm, std::unique_ptr<Backend> hostBackend)
      : host(std::move(hostBackend)) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized)
      throw RuntimeError(ZENRT_ERR_BACKEND, "the NCCL backend needs MPI initialised (bootstrap)");
    base = comm ? *static_cast<const MPI_Comm *>(comm) : MPI_COMM_WORLD;
    MPI_Comm_rank(base, &myRank);
    MPI_Comm_size(base, &mySize);
    device = processDevice();
    DeviceScope scope(device);
    ncclUniqueId id;
    if (myRank == 0)
      checkNccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
    MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, base);
    checkNccl(ncclCommInitRank(&nccl, mySize, id, myRank), "ncclCommInitRank");
  }
  /// A group of another NCCL backend's ranks (split).
  NcclBackend(ncclComm_t group, int deviceOfRank, std::unique_ptr<Backend> hostBackend)
      : host(std::move(hostBackend)), device(deviceOfRank), nccl(group) {
    checkNccl(ncclCommUserRank(nccl, &myRank), "ncclCommUserRank");
    checkNccl(ncclCommCount(nccl, &mySize), "ncclCommCount");
  }
  ~NcclBackend() override {
    int previous = device;
    cudaGetDevice(&previous);
    cudaSetDevice(device);
    // A collective still pending (after a timeout) never completes: abort the communicator
    // instead of waiting for it in ncclCommDestroy.
    bool stuck = !pending.empty();
    if (nccl)
      stuck ? ncclCommAbort(nccl) : ncclCommDestroy(nccl);
    for (auto &[id, event] : pending)
      cudaEventDestroy(event);
    computes.clear();
    for (auto &[number, stream] : streams)
      cudaStreamDestroy(stream);
    cudaSetDevice(previous);
  }

  int rank() const override { return myRank; }
  int size() const override { return mySize; }

  void openStreams(const std::vector<int> &numbers) override {
    DeviceScope scope(device);
    int least = 0, greatest = 0;
    checkCuda(cudaDeviceGetStreamPriorityRange(&least, &greatest), "stream priority range");
    for (int number : numbers) {
      cudaStream_t stream;
      // Lower plan stream numbers get higher CUDA priority (greatest is numerically lowest).
      int priority = std::max(greatest, least - number);
      checkCuda(cudaStreamCreateWithPriority(&stream, cudaStreamNonBlocking, priority),
                "cudaStreamCreateWithPriority");
      streams[number] = stream;
      computes[number] = createDeviceCompute(device, stream);
    }
  }
  Compute &compute(int number) override {
    auto it = computes.find(number);
    if (it == computes.end())
      throw RuntimeError(ZENRT_ERR_INTERNAL, "no CUDA stream for plan stream " +
                                                 std::to_string(number));
    return *it->second;
  }

  Request allReduce(void *data, size_t count, Element element, int stream) override {
    return launch(stream, [&](cudaStream_t s) {
      checkNccl(ncclAllReduce(data, data, count, ncclType(element), ncclSum, nccl, s),
                "ncclAllReduce");
    });
  }
  Request reduceScatter(const void *send, void *recv, size_t count, Element element,
                        int stream) override {
    return launch(stream, [&](cudaStream_t s) {
      checkNccl(ncclReduceScatter(send, recv, count, ncclType(element), ncclSum, nccl, s),
                "ncclReduceScatter");
    });
  }
  Request allGather(const void *send, void *recv, size_t count, Element element,
                    int stream) override {
    return launch(stream, [&](cudaStream_t s) {
      checkNccl(ncclAllGather(send, recv, count, ncclType(element), nccl, s), "ncclAllGather");
    });
  }
  Request allToAll(const void *send, void *recv, size_t count, Element element,
                   int stream) override {
    return launch(stream, [&](cudaStream_t s) {
      size_t bytes = count * elementBytes(element);
      checkNccl(ncclGroupStart(), "ncclGroupStart");
      for (int peer = 0; peer < mySize; ++peer) {
        checkNccl(ncclSend(static_cast<const char *>(send) + size_t(peer) * bytes, count,
                           ncclType(element), peer, nccl, s),
                  "ncclSend");
        checkNccl(ncclRecv(static_cast<char *>(recv) + size_t(peer) * bytes, count,
                           ncclType(element), peer, nccl, s),
                  "ncclRecv");
      }
      checkNccl(ncclGroupEnd(), "ncclGroupEnd");
    });
  }
  Request broadcast(void *data, size_t count, Element element, int root, int stream) override {
    return launch(stream, [&](cudaStream_t s) {
      checkNccl(ncclBroadcast(data, data, count, ncclType(element), root, nccl, s),
                "ncclBroadcast");
    });
  }
  bool test(Request request) override {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = pending.find(request);
    if (it == pending.end())
      return true;
    cudaError_t state = cudaEventQuery(it->second);
    if (state == cudaErrorNotReady) {
      ncclResult_t asyncError = ncclSuccess;
      checkNccl(ncclCommGetAsyncError(nccl, &asyncError), "ncclCommGetAsyncError");
      checkNccl(asyncError, "NCCL asynchronous error");
      return false;
    }
    checkCuda(state, "cudaEventQuery");
    cudaEventDestroy(it->second);
    pending.erase(it);
    return true;
  }
  std::unique_ptr<Backend> split(int color) override {
    // The host group first: it bounds the wait for every rank by the timeout.
    std::unique_ptr<Backend> hostGroup = host->split(color);
    DeviceScope scope(device);
    ncclComm_t group = nullptr;
    checkNccl(ncclCommSplit(nccl, color, myRank, &group, nullptr), "ncclCommSplit");
    return std::make_unique<NcclBackend>(group, device, std::move(hostGroup));
  }
  std::vector<uint64_t> exchange(uint64_t value) override { return host->exchange(value); }
  void setTimeout(double seconds) override { host->setTimeout(seconds); }
  void answerPeers(const Position &own) override { host->answerPeers(own); }
  std::vector<std::optional<Position>>
  askPeers(const Position &own, std::chrono::steady_clock::time_point until) override {
    return host->askPeers(own, until);
  }
  [[noreturn]] void abortJob(int exitCode) override {
    ncclCommAbort(nccl);
    nccl = nullptr;
    host->abortJob(exitCode);
    std::abort();  // abortJob does not return
  }

private:
  template <typename Launch> Request launch(int number, Launch body) {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = streams.find(number);
    if (it == streams.end())
      throw RuntimeError(ZENRT_ERR_INTERNAL, "no CUDA stream for plan stream " +
                                                 std::to_string(number));
    DeviceScope scope(device);
    body(it->second);
    cudaEvent_t done;
    checkCuda(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "cudaEventCreate");
    checkCuda(cudaEventRecord(done, it->second), "cudaEventRecord");
    Request id = nextRequest++;
    pending.emplace(id, done);
    return id;
  }

  std::unique_ptr<Backend> host;  // destroyed last: it may finalise MPI
  MPI_Comm base = MPI_COMM_NULL;
  int myRank = 0, mySize = 1, device = 0;
  ncclComm_t nccl = nullptr;
  std::map<int, cudaStream_t> streams;
  std::map<int, std::unique_ptr<Compute>> computes;  // per plan stream
  std::mutex mutex;
  std::unordered_map<Request, cudaEvent_t> pending;
  Request nextRequest = 1;
};

}  // namespace

int processDevice() {
  int initialized = 0, worldRank = 0, devices = 0;
  MPI_Initialized(&initialized);
  if (!initialized)
    throw RuntimeError(ZENRT_ERR_BACKEND, "choosing this rank's CUDA device needs MPI initialised");
  MPI_Comm_rank(MPI_COMM_WORLD, &worldRank);
  cudaError_t code = cudaGetDeviceCount(&devices);
  if (code != cudaSuccess || devices == 0) {
    cudaGetLastError();  // clear the error the failed query recorded
    throw RuntimeError(ZENRT_ERR_BACKEND, "rank " + std::to_string(worldRank) +
                                              " sees no CUDA device" +
                                              (code != cudaSuccess
                                                   ? std::string(" (") + cudaGetErrorString(code) + ")"
                                                   : std::string()));
  }
  return worldRank % devices;
}

std::unique_ptr<Backend> createNcclBackend(const void *comm, std::unique_ptr<Backend> host) {
  return std::make_unique<NcclBackend>(comm, std::move(host));
}

}  // namespace zenrt

//===- MpiBackend.cpp - Non-blocking MPI collectives -------------------------===//
#include "Backend.h"

#include "Compute.h"
#include "zenrt/Kernels.h"
#include "zenrt/zenrt.h"

#include <mpi.h>

#include <climits>
#include <map>
#include <mutex>
#include <unordered_map>

namespace zenrt {

size_t elementBytes(Element element) {
  switch (element) {
  case Element::F32:
    return 4;
  case Element::F16:
  case Element::BF16:
    return 2;
  case Element::Byte:
    return 1;
  }
  return 1;
}

namespace {

void halfSumOp(void *in, void *inout, int *count, MPI_Datatype *) {
  kernels::halfSum(static_cast<const uint16_t *>(in), static_cast<uint16_t *>(inout),
                   size_t(*count));
}
void bf16SumOp(void *in, void *inout, int *count, MPI_Datatype *) {
  kernels::bf16Sum(static_cast<const uint16_t *>(in), static_cast<uint16_t *>(inout),
                   size_t(*count));
}

class MpiBackend final : public Backend {
public:
  explicit MpiBackend(const void *comm) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      int provided = 0;
      check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
      ownsMpi = true;
    }
    int provided = 0;
    MPI_Query_thread(&provided);
    if (provided < MPI_THREAD_MULTIPLE)
      throw RuntimeError(ZENRT_ERR_BACKEND,
                         "MPI was initialised without MPI_THREAD_MULTIPLE (the runtime's "
                         "progress thread needs it): use MPI_Init_thread");
    base = comm ? *static_cast<const MPI_Comm *>(comm) : MPI_COMM_WORLD;
    MPI_Comm_rank(base, &myRank);
    MPI_Comm_size(base, &mySize);
    check(MPI_Op_create(&halfSumOp, 1, &halfSum), "MPI_Op_create");
    check(MPI_Op_create(&bf16SumOp, 1, &bf16Sum), "MPI_Op_create");
  }
  void openStreams(const std::vector<int> &streams) override {
    for (int stream : streams) {
      MPI_Comm duplicate;
      check(MPI_Comm_dup(base, &duplicate), "MPI_Comm_dup");
      comms[stream] = duplicate;
    }
  }
  ~MpiBackend() override {
    // Requests still pending (after a timeout) cannot be cancelled; leave their
    // communicators alone and let MPI_Finalize / process exit reclaim them.
    if (pending.empty())
      for (auto &[stream, comm] : comms)
        MPI_Comm_free(&comm);
    MPI_Op_free(&halfSum);
    MPI_Op_free(&bf16Sum);
    if (ownsMpi && pending.empty())
      MPI_Finalize();
  }

  int rank() const override { return myRank; }
  int size() const override { return mySize; }
  Compute &compute(int) override { return *host; }

  Request allReduce(void *data, size_t count, Element element, int stream) override {
    return start("MPI_Iallreduce", [&](MPI_Request *r) {
      return MPI_Iallreduce(MPI_IN_PLACE, data, toInt(count), type(element), op(element),
                            comm(stream), r);
    });
  }
  Request reduceScatter(const void *send, void *recv, size_t count, Element element,
                        int stream) override {
    return start("MPI_Ireduce_scatter_block", [&](MPI_Request *r) {
      return MPI_Ireduce_scatter_block(send, recv, toInt(count), type(element), op(element),
                                       comm(stream), r);
    });
  }
  Request allGather(const void *send, void *recv, size_t count, Element element,
                    int stream) override {
    return start("MPI_Iallgather", [&](MPI_Request *r) {
      return MPI_Iallgather(send, toInt(count), type(element), recv, toInt(count), type(element),
                            comm(stream), r);
    });
  }
  Request allToAll(const void *send, void *recv, size_t count, Element element,
                   int stream) override {
    return start("MPI_Ialltoall", [&](MPI_Request *r) {
      return MPI_Ialltoall(send, toInt(count), type(element), recv, toInt(count), type(element),
                           comm(stream), r);
    });
  }
  Request broadcast(void *data, size_t count, Element element, int root, int stream) override {
    return start("MPI_Ibcast", [&](MPI_Request *r) {
      return MPI_Ibcast(data, toInt(count), type(element), root, comm(stream), r);
    });
  }
  bool test(Request request) override {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = pending.find(request);
    if (it == pending.end())
      return true;
    int done = 0;
    check(MPI_Test(&it->second, &done, MPI_STATUS_IGNORE), "MPI_Test");
    if (done)
      pending.erase(it);
    return done != 0;
  }
  std::vector<uint64_t> exchange(uint64_t value) override {
    std::vector<uint64_t> all(static_cast<size_t>(mySize));
    check(MPI_Allgather(&value, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, base),
          "MPI_Allgather");
    return all;
  }
  [[noreturn]] void abortJob(int exitCode) override {
    MPI_Abort(base, exitCode);
    std::abort();  // MPI_Abort does not return; never continue if it did
  }

private:
  template <typename Start> Request start(const char *what, Start startCall) {
    std::lock_guard<std::mutex> lock(mutex);
    MPI_Request request;
    check(startCall(&request), what);
    Request id = nextRequest++;
    pending.emplace(id, request);
    return id;
  }
  static int toInt(size_t count) {
    if (count > size_t(INT_MAX))
      throw RuntimeError(ZENRT_ERR_BACKEND, "collective of " + std::to_string(count) +
                                                " elements exceeds MPI's int count");
    return int(count);
  }
  static MPI_Datatype type(Element element) {
    switch (element) {
    case Element::F32:
      return MPI_FLOAT;
    case Element::F16:
    case Element::BF16:
      return MPI_UINT16_T;
    case Element::Byte:
      return MPI_BYTE;
    }
    return MPI_BYTE;
  }
  MPI_Op op(Element element) const {
    switch (element) {
    case Element::F16:
      return halfSum;
    case Element::BF16:
      return bf16Sum;
    default:
      return MPI_SUM;
    }
  }
  MPI_Comm comm(int stream) const {
    auto it = comms.find(stream);
    if (it == comms.end())
      throw RuntimeError(ZENRT_ERR_INTERNAL, "no communicator for stream " +
                                                 std::to_string(stream));
    return it->second;
  }
  void check(int code, const char *what) const {
    if (code == MPI_SUCCESS)
      return;
    char text[MPI_MAX_ERROR_STRING];
    int length = 0;
    MPI_Error_string(code, text, &length);
    throw RuntimeError(ZENRT_ERR_BACKEND, std::string(what) + " failed: " +
                                              std::string(text, size_t(length)));
  }

  std::unique_ptr<Compute> host = createHostCompute();
  bool ownsMpi = false;
  MPI_Comm base = MPI_COMM_NULL;
  int myRank = 0, mySize = 1;
  MPI_Op halfSum = MPI_OP_NULL, bf16Sum = MPI_OP_NULL;
  std::map<int, MPI_Comm> comms;
  std::mutex mutex;
  std::unordered_map<Request, MPI_Request> pending;
  Request nextRequest = 1;
};

}  // namespace

std::unique_ptr<Backend> createMpiBackend(const void *comm) {
  return std::make_unique<MpiBackend>(comm);
}

}  // namespace zenrt

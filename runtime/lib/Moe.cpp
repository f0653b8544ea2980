//===- Moe.cpp - pipelined Mixture-of-Experts layer over MPI ---------------===//
// Built for the host CPU like Hybrid.cpp (runtime/CMakeLists.txt): Eigen instantiated with
// its own index type so that the linker never mixes its kernels with the other files'.
#define EIGEN_DEFAULT_DENSE_INDEX_TYPE int

#include "zenrt/Moe.h"

#include "zenrt/Runtime.h"

#include "MpiSupport.h"
#include "RowProduct.h"

#include <Eigen/Core>
#include <mpi.h>

#include <cstring>
#include <string>
#include <vector>

namespace zenrt::moe {
namespace {

using detail::checkMpi;

/// An all-to-all of equal blocks: block p of the send buffer goes to rank p, block s of the
/// receive buffer comes from rank s. Flat on a duplicate of the base communicator; 2D
/// (Tutel's 2DH) as an all-to-all among the node's g ranks that gathers, for each local
/// index j, every block bound for a rank with index j, then one among the N ranks with the
/// same local index, whose result is already in source-rank order.
class Exchange {
public:
  struct Pending {
    MPI_Request request = MPI_REQUEST_NULL;
    float *recv = nullptr;
    std::vector<float> staged, gathered, regrouped; // the 2D algorithm's buffers
  };

  Exchange(MPI_Comm base, const Schedule &schedule, double timeoutSeconds)
      : timeout(timeoutSeconds) {
    checkMpi(MPI_Comm_rank(base, &rank), "MPI_Comm_rank");
    checkMpi(MPI_Comm_size(base, &size), "MPI_Comm_size");
    hierarchical = schedule.algorithm == AllToAll::Hierarchical;
    if (!hierarchical) {
      checkMpi(MPI_Comm_dup(base, &flat), "MPI_Comm_dup");
      return;
    }
    perNode = static_cast<int>(schedule.ranksPerNode);
    nodes = size / perNode;
    // Ranks fill nodes in order: rank = node x perNode + local index.
    checkMpi(MPI_Comm_split(base, rank / perNode, rank % perNode, &node), "MPI_Comm_split");
    checkMpi(MPI_Comm_split(base, rank % perNode, rank / perNode, &peers), "MPI_Comm_split");
  }
  ~Exchange() {
    for (MPI_Comm *comm : {&flat, &node, &peers})
      if (*comm != MPI_COMM_NULL)
        MPI_Comm_free(comm);
  }
  Exchange(const Exchange &) = delete;
  Exchange &operator=(const Exchange &) = delete;

  void start(const float *send, float *recv, size_t block, Pending &pending) {
    pending.recv = recv;
    if (!hierarchical) {
      checkMpi(MPI_Ialltoall(send, count(block), MPI_FLOAT, recv, count(block), MPI_FLOAT, flat,
                             &pending.request),
               "MPI_Ialltoall");
      return;
    }
    // To local peer j: the blocks for ranks (m, j), m over the nodes.
    pending.staged.resize(size_t(size) * block);
    for (int j = 0; j < perNode; ++j)
      for (int m = 0; m < nodes; ++m)
        std::memcpy(&pending.staged[(size_t(j) * nodes + m) * block],
                    send + size_t(m * perNode + j) * block, block * sizeof(float));
    pending.gathered.resize(size_t(size) * block);
    checkMpi(MPI_Ialltoall(pending.staged.data(), count(size_t(nodes) * block), MPI_FLOAT,
                           pending.gathered.data(), count(size_t(nodes) * block), MPI_FLOAT, node,
                           &pending.request),
             "MPI_Ialltoall (intra-node)");
  }

  void finish(Pending &pending, size_t block, const char *what, int64_t chunk) {
    wait(pending.request, what, chunk);
    if (!hierarchical)
      return;
    // gathered[i][m]: from local peer i, bound for node m. Node m gets [i] in local order.
    pending.regrouped.resize(size_t(size) * block);
    for (int m = 0; m < nodes; ++m)
      for (int i = 0; i < perNode; ++i)
        std::memcpy(&pending.regrouped[(size_t(m) * perNode + i) * block],
                    &pending.gathered[(size_t(i) * nodes + m) * block], block * sizeof(float));
    checkMpi(MPI_Ialltoall(pending.regrouped.data(), count(size_t(perNode) * block), MPI_FLOAT,
                           pending.recv, count(size_t(perNode) * block), MPI_FLOAT, peers,
                           &pending.request),
             "MPI_Ialltoall (inter-node)");
    wait(pending.request, what, chunk);
  }

private:
  static int count(size_t elements) {
    if (elements > size_t(INT32_MAX))
      throw Error(ZENRT_ERR_INVALID_ARGUMENT, "an MoE all-to-all block exceeds 2^31 elements");
    return static_cast<int>(elements);
  }

  /// MPI_Wait bounded by the timeout, so that no exchange hangs forever.
  void wait(MPI_Request &request, const char *what, int64_t chunk) {
    detail::waitBounded(request, timeout, rank, [&] {
      return std::string("MoE ") + what + " all-to-all of chunk " + std::to_string(chunk);
    });
  }

  double timeout;
  int rank = 0, size = 1;
  bool hierarchical = false;
  int perNode = 1, nodes = 1;
  MPI_Comm flat = MPI_COMM_NULL, node = MPI_COMM_NULL, peers = MPI_COMM_NULL;
};

using RowMajor = detail::RowMajorMatrix;
using ConstMap = Eigen::Map<const RowMajor>;
using ConstVector = Eigen::Map<const Eigen::RowVectorXf>;

/// Expert `expert` of the rank on `count` consecutive rows, as GEMMs whose rows do not depend on
/// each other: a row's result is the same in whatever chunk it travels.
void runExpert(const Layer &layer, int64_t expert, const float *x, int64_t count, float *y) {
  const int64_t h = layer.hidden, f = layer.ffn;
  const ConstMap fc1(layer.fc1 + expert * f * h, f, h), fc2(layer.fc2 + expert * h * f, h, f);
  const ConstVector fc1Bias(layer.fc1Bias + expert * f, f), fc2Bias(layer.fc2Bias + expert * h, h);
  RowMajor units = detail::rowProduct(ConstMap(x, count, h), fc1.transpose());
  units = (units.rowwise() + fc1Bias).cwiseMax(0.0f);
  Eigen::Map<RowMajor> out(y, count, h);
  out = detail::rowProduct(units, fc2.transpose());
  out.rowwise() += fc2Bias;
}

} // namespace

void forward(const Layer &layer, const Schedule &schedule, const float *dispatched, float *combined,
             const void *comm) {
  MPI_Comm base = comm ? *static_cast<const MPI_Comm *>(comm) : MPI_COMM_WORLD;
  int size = 1;
  checkMpi(MPI_Comm_size(base, &size), "MPI_Comm_size");
  auto invalid = [](const std::string &message) {
    return Error(ZENRT_ERR_INVALID_ARGUMENT, "MoE layer: " + message);
  };
  if (!dispatched || !combined || !layer.fc1 || !layer.fc1Bias || !layer.fc2 || !layer.fc2Bias)
    throw invalid("a buffer or weight is null");
  if (layer.experts < 1 || layer.hidden < 1 || layer.ffn < 1 || layer.capacity < 1)
    throw invalid("experts, hidden, ffn and capacity must be at least 1");
  if (layer.experts % size != 0)
    throw invalid("the " + std::to_string(size) + " ranks do not divide the " +
                  std::to_string(layer.experts) + " experts");
  if (schedule.chunks < 1 || layer.capacity % schedule.chunks != 0)
    throw invalid(std::to_string(schedule.chunks) + " chunks do not divide the capacity " +
                  std::to_string(layer.capacity));
  if (schedule.algorithm == AllToAll::Hierarchical &&
      (schedule.ranksPerNode < 1 || size % schedule.ranksPerNode != 0))
    throw invalid(std::to_string(schedule.ranksPerNode) + " ranks per node do not divide the " +
                  std::to_string(size) + " ranks");
  if (!(schedule.timeoutSeconds > 0))
    throw invalid("the timeout must be positive");

  Exchange exchange(base, schedule, schedule.timeoutSeconds);
  const int64_t local = layer.experts / size, h = layer.hidden;
  const int64_t rows = layer.capacity / schedule.chunks;
  const size_t block = size_t(local * rows * h); // floats per peer per chunk
  const size_t chunkFloats = block * size_t(size);
  const size_t chunks = size_t(schedule.chunks);
  std::vector<float> send(chunkFloats * chunks), recv(chunkFloats * chunks),
      out(chunkFloats * chunks), back(chunkFloats * chunks);
  std::vector<Exchange::Pending> dispatches(chunks), combines(chunks);
  // Row i of chunk c of local expert l of rank d, in a [rank][expert][row] chunk buffer,
  // and in the [expert][capacity] layer buffer.
  auto chunkRow = [&](size_t c, int64_t d, int64_t l, int64_t i) {
    return c * chunkFloats + size_t((d * local + l) * rows + i) * size_t(h);
  };
  auto layerRow = [&](size_t c, int64_t d, int64_t l, int64_t i) {
    return size_t(((d * local + l) * layer.capacity) + int64_t(c) * rows + i) * size_t(h);
  };
  auto startDispatch = [&](size_t c) {
    for (int64_t d = 0; d < size; ++d)
      for (int64_t l = 0; l < local; ++l)
        for (int64_t i = 0; i < rows; ++i)
          std::memcpy(&send[chunkRow(c, d, l, i)], dispatched + layerRow(c, d, l, i),
                      size_t(h) * sizeof(float));
    exchange.start(&send[c * chunkFloats], &recv[c * chunkFloats], block, dispatches[c]);
  };

  startDispatch(0);
  for (size_t c = 0; c < chunks; ++c) {
    exchange.finish(dispatches[c], block, "dispatch", int64_t(c));
    if (c + 1 < chunks)
      startDispatch(c + 1); // in flight while this chunk computes
    for (int64_t s = 0; s < size; ++s)
      for (int64_t l = 0; l < local; ++l)
        runExpert(layer, l, &recv[chunkRow(c, s, l, 0)], rows, &out[chunkRow(c, s, l, 0)]);
    exchange.start(&out[c * chunkFloats], &back[c * chunkFloats], block, combines[c]);
  }
  for (size_t c = 0; c < chunks; ++c) {
    exchange.finish(combines[c], block, "combine", int64_t(c));
    for (int64_t d = 0; d < size; ++d)
      for (int64_t l = 0; l < local; ++l)
        for (int64_t i = 0; i < rows; ++i)
          std::memcpy(combined + layerRow(c, d, l, i), &back[chunkRow(c, d, l, i)],
                      size_t(h) * sizeof(float));
  }
}

} // namespace zenrt::moe

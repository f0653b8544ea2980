//===- Moe.cpp - pipelined Mixture-of-Experts layer over MPI ---------------===//
// Built for the host CPU like Hybrid.cpp (runtime/CMakeLists.txt): Eigen instantiated with
// its own index type so that the linker never mixes its kernels with the other files'.
#define EIGEN_DEFAULT_DENSE_INDEX_TYPE int

#include "zenrt/Moe.h"

#include "zenrt/Kernels.h"
#include "zenrt/Runtime.h"

#include "MpiSupport.h"
#include "Mutation.h"
#include "RowProduct.h"

#include <Eigen/Core>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

namespace zenrt::moe {
namespace {

using detail::checkMpi;

/// Rows as they travel (TokenFormat), each row encoded on its own so that its bits do not
/// depend on the chunk it travels in.
class RowCodec {
public:
  RowCodec(TokenFormat format, int64_t width) : format(format), width(size_t(width)) {}

  bool converts() const { return format != TokenFormat::None; }
  size_t rowBytes() const {
    switch (format) {
    case TokenFormat::Fp16:
    case TokenFormat::Bf16:
      return 2 * width;
    case TokenFormat::Int8:
      return sizeof(float) + width;
    case TokenFormat::None:
      break;
    }
    return sizeof(float) * width;
  }
  void encode(const float *rows, size_t count, uint8_t *out) const {
    auto *halves = reinterpret_cast<uint16_t *>(out);
    if (format == TokenFormat::Fp16)
      kernels::floatToHalf(rows, halves, count * width);
    else if (format == TokenFormat::Bf16)
      kernels::floatToBF16(rows, halves, count * width);
    else
      for (size_t r = 0; r < count; ++r)
        quantize(rows + r * width, out + r * rowBytes());
  }
  void decode(const uint8_t *in, size_t count, float *rows) const {
    const auto *halves = reinterpret_cast<const uint16_t *>(in);
    if (format == TokenFormat::Fp16)
      kernels::halfToFloat(halves, rows, count * width);
    else if (format == TokenFormat::Bf16)
      kernels::bf16ToFloat(halves, rows, count * width);
    else
      for (size_t r = 0; r < count; ++r) {
        float scale;
        std::memcpy(&scale, in + r * rowBytes(), sizeof scale);
        const auto *values = reinterpret_cast<const int8_t *>(in + r * rowBytes() + sizeof scale);
        for (size_t i = 0; i < width; ++i)
          rows[r * width + i] = float(values[i]) * scale;
      }
  }

private:
  /// Symmetric int8 of one row: its scale, then round(x / scale) to nearest even.
  void quantize(const float *row, uint8_t *out) const {
    float largest = 0;
    for (size_t i = 0; i < width; ++i)
      largest = std::max(largest, std::abs(row[i]));
    const float scale = largest / 127.0f;
    std::memcpy(out, &scale, sizeof scale);
    auto *values = reinterpret_cast<int8_t *>(out + sizeof scale);
    for (size_t i = 0; i < width; ++i)
      values[i] = scale > 0 ? int8_t(std::clamp(std::nearbyint(row[i] / scale), -127.0f, 127.0f))
                            : int8_t(0);
  }

  TokenFormat format;
  size_t width;
};

/// An all-to-all of equal blocks of rows: block p of the send buffer goes to rank p, block s
/// of the receive buffer comes from rank s, the rows in the schedule's TokenFormat on the wire.
/// Flat on a duplicate of the base communicator; 2D (Tutel's 2DH) as an all-to-all among the
/// node's g ranks that gathers, for each local index j, every block bound for a rank with
/// index j, then one among the N ranks with the same local index, whose result is already in
/// source-rank order.
class Exchange {
public:
  struct Pending {
    MPI_Request request = MPI_REQUEST_NULL;
    float *recv = nullptr;
    uint8_t *landing = nullptr; // where the bytes arrive: recv, or `received` to decode
    std::vector<uint8_t> encoded, received;         // converted rows
    std::vector<uint8_t> staged, gathered, regrouped; // the 2D algorithm's buffers
  };

  Exchange(MPI_Comm base, const Schedule &schedule, int64_t width, size_t blockRows)
      : timeout(schedule.timeoutSeconds), codec(schedule.tokens, width), blockRows(blockRows),
        block(blockRows * codec.rowBytes()) {
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

  void start(const float *send, float *recv, Pending &pending) {
    const size_t all = size_t(size) * block;
    const uint8_t *bytes = reinterpret_cast<const uint8_t *>(send);
    pending.recv = recv;
    pending.landing = reinterpret_cast<uint8_t *>(recv);
    if (codec.converts()) {
      pending.encoded.resize(all);
      codec.encode(send, size_t(size) * blockRows, pending.encoded.data());
      bytes = pending.encoded.data();
      pending.received.resize(all);
      pending.landing = pending.received.data();
    }
    if (!hierarchical) {
      checkMpi(MPI_Ialltoall(bytes, count(block), MPI_BYTE, pending.landing, count(block),
                             MPI_BYTE, flat, &pending.request),
               "MPI_Ialltoall");
      return;
    }
    // To local peer j: the blocks for ranks (m, j), m over the nodes.
    pending.staged.resize(all);
    for (int j = 0; j < perNode; ++j)
      for (int m = 0; m < nodes; ++m)
        std::memcpy(&pending.staged[(size_t(j) * nodes + m) * block],
                    bytes + size_t(m * perNode + j) * block, block);
    pending.gathered.resize(all);
    checkMpi(MPI_Ialltoall(pending.staged.data(), count(size_t(nodes) * block), MPI_BYTE,
                           pending.gathered.data(), count(size_t(nodes) * block), MPI_BYTE, node,
                           &pending.request),
             "MPI_Ialltoall (intra-node)");
  }

  void finish(Pending &pending, const char *what, int64_t chunk) {
    wait(pending.request, what, chunk);
    if (hierarchical) {
      // gathered[i][m]: from local peer i, bound for node m. Node m gets [i] in local order.
      pending.regrouped.resize(size_t(size) * block);
      for (int m = 0; m < nodes; ++m)
        for (int i = 0; i < perNode; ++i)
          std::memcpy(&pending.regrouped[(size_t(m) * perNode + i) * block],
                      &pending.gathered[(size_t(i) * nodes + m) * block], block);
      checkMpi(MPI_Ialltoall(pending.regrouped.data(), count(size_t(perNode) * block), MPI_BYTE,
                             pending.landing, count(size_t(perNode) * block), MPI_BYTE, peers,
                             &pending.request),
               "MPI_Ialltoall (inter-node)");
      wait(pending.request, what, chunk);
    }
    if (codec.converts())
      codec.decode(pending.received.data(), size_t(size) * blockRows, pending.recv);
  }

private:
  static int count(size_t bytes) {
    if (bytes > size_t(INT32_MAX))
      throw Error(ZENRT_ERR_INVALID_ARGUMENT, "an MoE all-to-all block exceeds 2^31 bytes");
    return static_cast<int>(bytes);
  }

  /// MPI_Wait bounded by the timeout, so that no exchange hangs forever.
  void wait(MPI_Request &request, const char *what, int64_t chunk) {
    detail::waitBounded(request, timeout, rank, [&] {
      return std::string("MoE ") + what + " all-to-all of chunk " + std::to_string(chunk);
    });
  }

  double timeout;
  RowCodec codec;
  size_t blockRows, block; // rows and bytes per peer
  int rank = 0, size = 1;
  bool hierarchical = false;
  int perNode = 1, nodes = 1;
  MPI_Comm flat = MPI_COMM_NULL, node = MPI_COMM_NULL, peers = MPI_COMM_NULL;
};

using RowMajor = detail::RowMajorMatrix;
using Map = Eigen::Map<RowMajor>;
using ConstMap = Eigen::Map<const RowMajor>;
using Vector = Eigen::Map<Eigen::RowVectorXf>;
using ConstVector = Eigen::Map<const Eigen::RowVectorXf>;

/// Capacity rows per block of the weight gradients' sums: about this many rows over all
/// source ranks, enough for a GEMM to run near its peak.
constexpr int64_t kGradientBlockRows = 64;

/// Where a row sits: in the caller's [expert][capacity] buffers, in a chunk's exchange buffer
/// ([rank][local expert][row of the chunk]), and on the expert's rank ([local expert][row]
/// [source rank], over the whole capacity or one chunk's rows).
struct Geometry {
  int64_t ranks = 1, local = 1, capacity = 1, chunks = 1, rowsPerChunk = 1, hidden = 1, ffn = 1;

  size_t exchangeBlockRows() const { return size_t(local * rowsPerChunk); } // per peer
  size_t chunkFloats() const { return exchangeBlockRows() * size_t(ranks * hidden); }
  size_t chunkExpertRows() const { return size_t(rowsPerChunk * ranks); } // one expert's
  size_t expertRows() const { return size_t(local * capacity * ranks); }
  size_t layerRow(int64_t c, int64_t d, int64_t l, int64_t i) const {
    return size_t((d * local + l) * capacity + c * rowsPerChunk + i);
  }
  size_t chunkRow(int64_t d, int64_t l, int64_t i) const {
    return size_t((d * local + l) * rowsPerChunk + i);
  }
  size_t expertRow(int64_t l, int64_t row, int64_t s, int64_t rowsPerExpert) const {
    return size_t((l * rowsPerExpert + row) * ranks + s);
  }
  /// Chunk c's first row of local expert l among all the capacity rows.
  size_t expertChunk(int64_t l, int64_t c) const {
    return expertRow(l, c * rowsPerChunk, 0, capacity);
  }

  /// Calls copy(row in the chunk buffer, row in the other buffer) for every row of a chunk.
  template <typename RowOf, typename Copy> void forChunkRows(RowOf rowOf, Copy copy) const {
    for (int64_t d = 0; d < ranks; ++d)
      for (int64_t l = 0; l < local; ++l)
        for (int64_t i = 0; i < rowsPerChunk; ++i)
          copy(chunkRow(d, l, i), rowOf(d, l, i));
  }
};

MPI_Comm communicatorOf(const void *comm) {
  return comm ? *static_cast<const MPI_Comm *>(comm) : MPI_COMM_WORLD;
}

/// The layer's geometry on the communicator's ranks, or ZENRT_ERR_INVALID_ARGUMENT.
Geometry geometryOf(const Layer &layer, const Schedule &schedule, MPI_Comm base, const void *input,
                    const void *output) {
  int size = 1;
  checkMpi(MPI_Comm_size(base, &size), "MPI_Comm_size");
  auto invalid = [](const std::string &message) {
    return Error(ZENRT_ERR_INVALID_ARGUMENT, "MoE layer: " + message);
  };
  if (!input || !output || !layer.fc1 || !layer.fc2)
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
  Geometry g;
  g.ranks = size;
  g.local = layer.experts / size;
  g.capacity = layer.capacity;
  g.chunks = schedule.chunks;
  g.rowsPerChunk = layer.capacity / schedule.chunks;
  g.hidden = layer.hidden;
  g.ffn = layer.ffn;
  return g;
}

/// Chunk by chunk: sends chunk c of `input` (this rank's [expert][capacity][hidden] rows) to
/// the ranks that hold the experts, has compute(c, arrived, results) turn the rows that
/// arrived into the rows to return (both in chunk layout), returns those into `output`, and
/// calls whileReturning(c) as they travel. Chunk c + 1 travels out while chunk c computes.
template <typename Compute, typename WhileReturning>
void pipeline(Exchange &exchange, const Geometry &g, const float *input, float *output,
              const char *outward, const char *inward, Compute compute,
              WhileReturning whileReturning) {
  const size_t chunkFloats = g.chunkFloats(), rowBytes = size_t(g.hidden) * sizeof(float),
               chunks = size_t(g.chunks);
  std::vector<float> send(chunkFloats * chunks), arrived(chunkFloats * chunks),
      results(chunkFloats * chunks), returned(chunkFloats * chunks);
  std::vector<Exchange::Pending> outgoing(chunks), incoming(chunks);
  auto startOutward = [&](size_t c) {
    g.forChunkRows([&](int64_t d, int64_t l, int64_t i) { return g.layerRow(c, d, l, i); },
                   [&](size_t chunkRow, size_t layerRow) {
                     std::memcpy(&send[c * chunkFloats + chunkRow * size_t(g.hidden)],
                                 input + layerRow * size_t(g.hidden), rowBytes);
                   });
    exchange.start(&send[c * chunkFloats], &arrived[c * chunkFloats], outgoing[c]);
  };

  startOutward(0);
  for (size_t c = 0; c < chunks; ++c) {
    exchange.finish(outgoing[c], outward, int64_t(c));
    if (c + 1 < chunks)
      startOutward(c + 1); // in flight while this chunk computes
    compute(int64_t(c), &arrived[c * chunkFloats], &results[c * chunkFloats]);
    exchange.start(&results[c * chunkFloats], &returned[c * chunkFloats], incoming[c]);
    whileReturning(int64_t(c));
  }
  for (size_t c = 0; c < chunks; ++c) {
    exchange.finish(incoming[c], inward, int64_t(c));
    g.forChunkRows([&](int64_t d, int64_t l, int64_t i) { return g.layerRow(c, d, l, i); },
                   [&](size_t chunkRow, size_t layerRow) {
                     std::memcpy(output + layerRow * size_t(g.hidden),
                                 &returned[c * chunkFloats + chunkRow * size_t(g.hidden)],
                                 rowBytes);
                   });
  }
}

/// The rows of chunk c that arrived (chunk layout) into `expertSide` ([local expert][capacity]
/// [source rank]).
void keepArrived(const Geometry &g, int64_t c, const float *arrived, float *expertSide) {
  const size_t width = size_t(g.hidden);
  g.forChunkRows([&](int64_t d, int64_t l,
                     int64_t i) { return g.expertRow(l, c * g.rowsPerChunk + i, d, g.capacity); },
                 [&](size_t chunkRow, size_t expertRow) {
                   std::memcpy(expertSide + expertRow * width, arrived + chunkRow * width,
                               width * sizeof(float));
                 });
}

/// One chunk's results on the expert's side ([local expert][row of the chunk][source rank])
/// into chunk layout, to return.
void toChunkLayout(const Geometry &g, const float *expertSide, float *results) {
  const size_t width = size_t(g.hidden);
  g.forChunkRows(
      [&](int64_t d, int64_t l, int64_t i) { return g.expertRow(l, i, d, g.rowsPerChunk); },
      [&](size_t chunkRow, size_t expertRow) {
        std::memcpy(results + chunkRow * width, expertSide + expertRow * width,
                    width * sizeof(float));
      });
}

/// Local expert l's weights; a bias the layer does not have is empty.
struct ExpertWeights {
  ExpertWeights(const Layer &layer, int64_t l)
      : fc1(layer.fc1 + l * layer.ffn * layer.hidden, layer.ffn, layer.hidden),
        fc2(layer.fc2 + l * layer.hidden * layer.ffn, layer.hidden, layer.ffn),
        fc1Bias(layer.fc1Bias ? layer.fc1Bias + l * layer.ffn : nullptr,
                layer.fc1Bias ? layer.ffn : 0),
        fc2Bias(layer.fc2Bias ? layer.fc2Bias + l * layer.hidden : nullptr,
                layer.fc2Bias ? layer.hidden : 0) {}
  ConstMap fc1, fc2;
  ConstVector fc1Bias, fc2Bias;
};

} // namespace

void forward(const Layer &layer, const Schedule &schedule, const float *dispatched, float *combined,
             const void *comm, Activations *kept) {
  const MPI_Comm base = communicatorOf(comm);
  const Geometry g = geometryOf(layer, schedule, base, dispatched, combined);
  Activations own;
  Activations &activations = kept ? *kept : own;
  activations.rows.assign(g.expertRows() * size_t(g.hidden), 0.0f);
  activations.units.assign(g.expertRows() * size_t(g.ffn), 0.0f);
  std::vector<float> outputs(size_t(g.local) * g.chunkExpertRows() * size_t(g.hidden));
  const int64_t n = int64_t(g.chunkExpertRows());

  Exchange exchange(base, schedule, g.hidden, g.exchangeBlockRows());
  pipeline(
      exchange, g, dispatched, combined, "dispatch", "combine",
      [&](int64_t c, const float *arrived, float *results) {
        keepArrived(g, c, arrived, activations.rows.data());
        for (int64_t l = 0; l < g.local; ++l) {
          // Each row's result is the same in whatever chunk it travels (RowProduct.h).
          const ExpertWeights w(layer, l);
          const size_t first = g.expertChunk(l, c);
          const ConstMap x(&activations.rows[first * size_t(g.hidden)], n, g.hidden);
          Map units(&activations.units[first * size_t(g.ffn)], n, g.ffn);
          units = detail::rowProduct(x, w.fc1.transpose());
          if (w.fc1Bias.size() > 0)
            units.rowwise() += w.fc1Bias;
          units = units.cwiseMax(0.0f);
          Map y(&outputs[size_t(l * n * g.hidden)], n, g.hidden);
          y = detail::rowProduct(units, w.fc2.transpose());
          if (w.fc2Bias.size() > 0)
            y.rowwise() += w.fc2Bias;
        }
        toChunkLayout(g, outputs.data(), results);
      },
      [](int64_t) {});
}

Gradients backward(const Layer &layer, const Schedule &schedule, const Activations &kept,
                   const float *combinedGradient, float *dispatchedGradient, const void *comm) {
  const MPI_Comm base = communicatorOf(comm);
  const Geometry g = geometryOf(layer, schedule, base, combinedGradient, dispatchedGradient);
  if (kept.rows.size() != g.expertRows() * size_t(g.hidden) ||
      kept.units.size() != g.expertRows() * size_t(g.ffn))
    throw Error(ZENRT_ERR_INVALID_ARGUMENT,
                "MoE layer: the activations were kept by a forward of another shape");
  const int64_t h = g.hidden, f = g.ffn, n = int64_t(g.chunkExpertRows());
  Gradients gradients;
  gradients.fc1.assign(size_t(g.local * f * h), 0.0f);
  gradients.fc1Bias.assign(layer.fc1Bias ? size_t(g.local * f) : 0, 0.0f);
  gradients.fc2.assign(size_t(g.local * h * f), 0.0f);
  gradients.fc2Bias.assign(layer.fc2Bias ? size_t(g.local * h) : 0, 0.0f);
  // The output gradients that arrived and the gradients before the ReLU, on the experts'
  // side: the weight gradients read them a block at a time.
  std::vector<float> outputGradients(g.expertRows() * size_t(h)),
      unitGradients(g.expertRows() * size_t(f)),
      inputGradients(size_t(g.local) * g.chunkExpertRows() * size_t(h));

  // Sums in fixed blocks of capacity rows, in capacity order, each once its rows arrived:
  // the same additions in the same order for every r.
  const int64_t blockRows =
      std::min(g.capacity, std::max<int64_t>(1, kGradientBlockRows / g.ranks));
  int64_t summed = 0; // capacity rows whose gradients are in
  auto sumArrived = [&](int64_t arrivedRows) {
    while (summed < arrivedRows &&
           (summed + blockRows <= arrivedRows || arrivedRows == g.capacity)) {
      const int64_t rows = std::min(blockRows, g.capacity - summed);
      if (mutated(Mutation::MoeDropsGradientBlock) && summed + rows == g.capacity)
        break;
      for (int64_t l = 0; l < g.local; ++l) {
        const size_t first = g.expertRow(l, summed, 0, g.capacity);
        const int64_t count = rows * g.ranks;
        const ConstMap dy(&outputGradients[first * size_t(h)], count, h),
            x(&kept.rows[first * size_t(h)], count, h),
            units(&kept.units[first * size_t(f)], count, f),
            dz(&unitGradients[first * size_t(f)], count, f);
        Map fc2(&gradients.fc2[size_t(l * h * f)], h, f),
            fc1(&gradients.fc1[size_t(l * f * h)], f, h);
        fc2.noalias() += dy.transpose() * units;
        fc1.noalias() += dz.transpose() * x;
        // Row by row: Eigen's column sums add in an order that depends on the data's alignment.
        if (layer.fc2Bias) {
          Vector fc2Bias(&gradients.fc2Bias[size_t(l * h)], h);
          for (int64_t row = 0; row < count; ++row)
            fc2Bias += dy.row(row);
        }
        if (layer.fc1Bias) {
          Vector fc1Bias(&gradients.fc1Bias[size_t(l * f)], f);
          for (int64_t row = 0; row < count; ++row)
            fc1Bias += dz.row(row);
        }
      }
      summed += rows;
    }
  };

  Exchange exchange(base, schedule, g.hidden, g.exchangeBlockRows());
  pipeline(
      exchange, g, combinedGradient, dispatchedGradient, "gradient dispatch", "gradient combine",
      [&](int64_t c, const float *arrived, float *results) {
        keepArrived(g, c, arrived, outputGradients.data());
        // The mutant applies chunk 0's ReLU mask to chunk 1.
        const int64_t maskChunk = mutated(Mutation::MoeMasksWrongChunk) && c == 1 ? 0 : c;
        for (int64_t l = 0; l < g.local; ++l) {
          const ExpertWeights w(layer, l);
          const size_t first = g.expertChunk(l, c);
          const ConstMap dy(&outputGradients[first * size_t(h)], n, h),
              units(&kept.units[g.expertChunk(l, maskChunk) * size_t(f)], n, f);
          Map dz(&unitGradients[first * size_t(f)], n, f);
          dz = (units.array() > 0.0f).select(detail::rowProduct(dy, w.fc2).array(), 0.0f);
          Map dx(&inputGradients[size_t(l * n * h)], n, h);
          dx = detail::rowProduct(dz, w.fc1);
        }
        toChunkLayout(g, inputGradients.data(), results);
      },
      [&](int64_t c) { sumArrived((c + 1) * g.rowsPerChunk); });
  return gradients;
}

} // namespace zenrt::moe

//===- Moe.cpp - pipelined Mixture-of-Experts layer over a collective backend ===//
//
// One algorithm for both memories: the all-to-alls go through the runtime's Backend (MPI on
// host buffers, NCCL on device buffers) and the buffers and expert kernels through MoeMath
// (Eigen here, CUDA kernels in cuda/DeviceMoeMath.cpp). Built for the host CPU like Hybrid.cpp
// (runtime/CMakeLists.txt): Eigen instantiated with its own index type so that the linker never
// mixes its kernels with the other files'.
#define EIGEN_DEFAULT_DENSE_INDEX_TYPE int

#include "zenrt/Moe.h"

#include "zenrt/Kernels.h"
#include "zenrt/Runtime.h"

#include "Backend.h"
#include "MoeMath.h"
#include "Mutation.h"
#include "PeerWatch.h"
#include "RowProduct.h"

#include <Eigen/Core>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace zenrt {
namespace {

using RowMajor = detail::RowMajorMatrix;
using Map = Eigen::Map<RowMajor>;
using ConstMap = Eigen::Map<const RowMajor>;
using Vector = Eigen::Map<Eigen::RowVectorXf>;
using ConstVector = Eigen::Map<const Eigen::RowVectorXf>;

int eigenIndex(size_t value) {
  if (value > size_t(INT32_MAX))
    throw Error(ZENRT_ERR_INVALID_ARGUMENT, "MoE layer: a dimension exceeds 2^31 - 1");
  return static_cast<int>(value);
}

/// Host memory, Eigen's GEMMs with rows padded as RowProduct.h explains.
class HostMoeMath final : public MoeMath {
public:
  bool onDevice() const override { return false; }
  std::string rejectBuffer(const void *) const override { return ""; }
  std::shared_ptr<void> allocate(size_t bytes) override {
    void *data = std::calloc(std::max<size_t>(bytes, 1), 1);
    if (!data)
      throw RuntimeError(ZENRT_ERR_BACKEND, "MoE layer: cannot allocate " +
                                                std::to_string(bytes) + " bytes of host memory");
    return std::shared_ptr<void>(data, std::free);
  }
  void synchronize() override {}
  void download(void *host, const void *from, size_t bytes) override {
    if (bytes)
      std::memcpy(host, from, bytes);
  }
  void copyRows(void *to, size_t toPitch, const void *from, size_t fromPitch, size_t rowBytes,
                size_t rows) override {
    for (size_t i = 0; i < rows; ++i)
      std::memcpy(static_cast<uint8_t *>(to) + i * toPitch,
                  static_cast<const uint8_t *>(from) + i * fromPitch, rowBytes);
  }
  void encodeRows(moe::TokenFormat format, const float *rows, size_t count, size_t width,
                  uint8_t *out) override {
    auto *halves = reinterpret_cast<uint16_t *>(out);
    if (format == moe::TokenFormat::Fp16)
      kernels::floatToHalf(rows, halves, count * width);
    else if (format == moe::TokenFormat::Bf16)
      kernels::floatToBF16(rows, halves, count * width);
    else
      for (size_t r = 0; r < count; ++r)
        quantizeRow(rows + r * width, width, out + r * (sizeof(float) + width));
  }
  void decodeRows(moe::TokenFormat format, const uint8_t *in, size_t count, size_t width,
                  float *rows) override {
    const auto *halves = reinterpret_cast<const uint16_t *>(in);
    if (format == moe::TokenFormat::Fp16)
      kernels::halfToFloat(halves, rows, count * width);
    else if (format == moe::TokenFormat::Bf16)
      kernels::bf16ToFloat(halves, rows, count * width);
    else
      for (size_t r = 0; r < count; ++r) {
        const uint8_t *row = in + r * (sizeof(float) + width);
        float scale;
        std::memcpy(&scale, row, sizeof scale);
        const auto *values = reinterpret_cast<const int8_t *>(row + sizeof scale);
        for (size_t i = 0; i < width; ++i)
          rows[r * width + i] = float(values[i]) * scale;
      }
  }

  void rowProduct(const float *x, size_t n, size_t k, const float *w, size_t m, bool transposed,
                  float *out) override {
    const ConstMap rows(x, eigenIndex(n), eigenIndex(k));
    Map product(out, eigenIndex(n), eigenIndex(m));
    if (transposed)
      product = detail::rowProduct(rows, ConstMap(w, eigenIndex(m), eigenIndex(k)).transpose());
    else
      product = detail::rowProduct(rows, ConstMap(w, eigenIndex(k), eigenIndex(m)));
  }
  void addBias(float *rows, size_t n, size_t m, const float *bias) override {
    Map(rows, eigenIndex(n), eigenIndex(m)).rowwise() += ConstVector(bias, eigenIndex(m));
  }
  void relu(float *data, size_t count) override {
    Vector values(data, eigenIndex(count));
    values = values.cwiseMax(0.0f);
  }
  void reluGradient(const float *units, float *gradient, size_t count) override {
    Vector values(gradient, eigenIndex(count));
    values = (ConstVector(units, eigenIndex(count)).array() > 0.0f).select(values.array(), 0.0f);
  }
  void accumulateTransposedProduct(const float *a, size_t n, size_t ka, const float *b,
                                   size_t kb, float *out) override {
    Map(out, eigenIndex(ka), eigenIndex(kb)).noalias() +=
        ConstMap(a, eigenIndex(n), eigenIndex(ka)).transpose() *
        ConstMap(b, eigenIndex(n), eigenIndex(kb));
  }
  void accumulateRows(const float *rows, size_t n, size_t width, float *out) override {
    // Row by row: Eigen's column sums add in an order that depends on the data's alignment.
    Vector sum(out, eigenIndex(width));
    const ConstMap each(rows, eigenIndex(n), eigenIndex(width));
    for (int row = 0; row < each.rows(); ++row)
      sum += each.row(row);
  }

private:
  /// Symmetric int8 of one row: its scale max |x| / 127, then round(x / scale) to nearest even.
  static void quantizeRow(const float *row, size_t width, uint8_t *out) {
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
};

} // namespace

std::unique_ptr<MoeMath> createHostMoeMath() { return std::make_unique<HostMoeMath>(); }

namespace moe {

/// The communicator's backends (stream 0 carries the all-to-alls), its memory and kernels.
struct Communicator::State {
  Memory memory = Memory::Host;
  double timeoutSeconds = 300;
  int device = -1;
  std::unique_ptr<Backend> flat;
  /// The 2D all-to-all's groups, per ranks per node: the node's ranks, and the ranks of one
  /// local index (split on first use: every rank runs the same layers).
  std::map<int64_t, std::pair<std::unique_ptr<Backend>, std::unique_ptr<Backend>>> levels;
  std::unique_ptr<MoeMath> math;
  /// Answers the other ranks for this one and names those lost when an exchange times out.
  std::unique_ptr<detail::PeerWatch> watch;
};

namespace {

/// Runs `body`, reporting the backends' errors as zenrt::Error.
template <typename Body> auto reported(Body body) {
  try {
    return body();
  } catch (const RuntimeError &error) {
    throw Error(error.status, error.what());
  }
}

} // namespace

Communicator::Communicator(const void *comm, Memory memory, double timeoutSeconds)
    : state_(std::make_unique<State>()) {
  if (!(timeoutSeconds > 0))
    throw Error(ZENRT_ERR_INVALID_ARGUMENT, "MoE communicator: the timeout must be positive");
  state_->memory = memory;
  state_->timeoutSeconds = timeoutSeconds;
  reported([&] {
    std::unique_ptr<Backend> host = createMpiBackend(comm);
    host->setTimeout(timeoutSeconds);
    if (memory == Memory::Host) {
      state_->flat = std::move(host);
      state_->math = createHostMoeMath();
    } else {
#ifdef ZENRT_HAVE_CUDA
      try {
        state_->device = processDevice(); // the NCCL backend's
      } catch (const RuntimeError &error) {
        throw Error(error.status, std::string("MoE communicator: ") + error.what());
      }
      state_->flat = createNcclBackend(comm, std::move(host));
      state_->math = createDeviceMoeMath(state_->device);
#else
      throw Error(ZENRT_ERR_BACKEND,
                  "MoE communicator: device memory needs libzenrt built with CUDA and NCCL");
#endif
    }
    state_->flat->openStreams({0});
  });
  if (state_->flat->size() > 1)
    state_->watch = std::make_unique<detail::PeerWatch>(comm, timeoutSeconds);
}

Communicator::~Communicator() = default;
Memory Communicator::memory() const { return state_->memory; }
int Communicator::rank() const { return state_->flat->rank(); }
int Communicator::size() const { return state_->flat->size(); }
int Communicator::device() const { return state_->device; }

namespace {

/// An all-to-all of equal blocks of rows: block p of the send buffer goes to rank p, block s
/// of the receive buffer comes from rank s, the rows in the schedule's TokenFormat on the wire.
/// Flat over the communicator; 2D (Tutel's 2DH) as an all-to-all among the node's g ranks that
/// gathers, for each local index j, every block bound for a rank with index j, then one among
/// the N ranks with the same local index, whose result is already in source-rank order. Each
/// exchange in flight (a slot) has its own scratch buffers.
class Exchange {
public:
  struct Pending {
    Backend *backend = nullptr;
    Backend::Request request = 0;
    float *recv = nullptr;
    uint8_t *landing = nullptr; // where the bytes arrive: recv, or `received` to decode
    uint8_t *encoded = nullptr, *received = nullptr;                 // converted rows
    uint8_t *staged = nullptr, *gathered = nullptr, *regrouped = nullptr; // 2D buffers
  };

  Exchange(Communicator::State &ranks, const Schedule &schedule, int64_t width, size_t blockRows,
           size_t slots)
      : math(*ranks.math), timeout(schedule.timeoutSeconds), format(schedule.tokens),
        width(size_t(width)), blockRows(blockRows), flat(*ranks.flat), watch(ranks.watch.get()) {
    rank = flat.rank();
    size = flat.size();
    block = blockRows * rowBytes();
    hierarchical = schedule.algorithm == AllToAll::Hierarchical;
    const size_t all = size_t(size) * block;
    const size_t buffers = (converts() ? 2 : 0) + (hierarchical ? 3 : 0);
    slotBytes = buffers * all;
    scratch = math.allocateArray<uint8_t>(slotBytes * slots);
    if (!hierarchical)
      return;
    perNode = static_cast<int>(schedule.ranksPerNode);
    nodes = size / perNode;
    auto &levels = ranks.levels[perNode];
    if (!levels.first) {
      // Ranks fill nodes in order: rank = node x perNode + local index; a split keeps the
      // rank order, so node members come in local order and peers in node order.
      levels.first = flat.split(rank / perNode);
      levels.first->openStreams({0});
      levels.second = flat.split(rank % perNode);
      levels.second->openStreams({0});
    }
    node = levels.first.get();
    peers = levels.second.get();
  }

  /// Starts sending `send` ([size][blockRows][width] floats) into `recv`, with slot `slot`'s
  /// scratch.
  void start(const float *send, float *recv, size_t slot, Pending &pending) {
    const size_t all = size_t(size) * block;
    uint8_t *scratchOf = scratch.get() + slot * slotBytes;
    auto next = [&] {
      uint8_t *buffer = scratchOf;
      scratchOf += all;
      return buffer;
    };
    const uint8_t *bytes = reinterpret_cast<const uint8_t *>(send);
    pending.recv = recv;
    pending.landing = reinterpret_cast<uint8_t *>(recv);
    if (converts()) {
      pending.encoded = next();
      pending.received = next();
      math.encodeRows(format, send, size_t(size) * blockRows, width, pending.encoded);
      bytes = pending.encoded;
      pending.landing = pending.received;
    }
    if (!hierarchical) {
      math.synchronize(); // the rows (encoded) are written before the backend reads them
      pending.backend = &flat;
      pending.request = flat.allToAll(bytes, pending.landing, block, Element::Byte, 0);
      return;
    }
    pending.staged = next();
    pending.gathered = next();
    pending.regrouped = next();
    // To local peer j: the blocks for ranks (m, j), m over the nodes.
    for (int j = 0; j < perNode; ++j)
      math.copyRows(pending.staged + size_t(j) * nodes * block, block,
                    bytes + size_t(j) * block, size_t(perNode) * block, block, size_t(nodes));
    math.synchronize();
    pending.backend = node;
    pending.request = node->allToAll(pending.staged, pending.gathered, size_t(nodes) * block,
                                     Element::Byte, 0);
  }

  void finish(Pending &pending, const char *what, int64_t chunk) {
    wait(pending, what, chunk);
    if (hierarchical) {
      // gathered[i][m]: from local peer i, bound for node m. Node m gets [i] in local order.
      for (int m = 0; m < nodes; ++m)
        math.copyRows(pending.regrouped + size_t(m) * perNode * block, block,
                      pending.gathered + size_t(m) * block, size_t(nodes) * block, block,
                      size_t(perNode));
      math.synchronize();
      pending.backend = peers;
      pending.request = peers->allToAll(pending.regrouped, pending.landing,
                                        size_t(perNode) * block, Element::Byte, 0);
      wait(pending, what, chunk);
    }
    if (converts())
      math.decodeRows(format, pending.received, size_t(size) * blockRows, width, pending.recv);
  }

private:
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

  /// Waits for the pending all-to-all, failing with ZENRT_ERR_TIMEOUT once the schedule's
  /// timeout has passed, so that no exchange hangs forever; the report names the lost ranks.
  void wait(Pending &pending, const char *what, int64_t chunk) {
    detail::waitWatched([&] { return pending.backend->test(pending.request); }, timeout, rank,
                        [&] {
                          return std::string("MoE ") + what + " all-to-all of chunk " +
                                 std::to_string(chunk);
                        },
                        watch);
  }

  MoeMath &math;
  double timeout;
  TokenFormat format;
  size_t width, blockRows, block = 0; // floats per row; rows and bytes per peer
  Backend &flat;
  detail::PeerWatch *watch;
  Backend *node = nullptr, *peers = nullptr;
  int rank = 0, size = 1;
  bool hierarchical = false;
  int perNode = 1, nodes = 1;
  size_t slotBytes = 0;
  std::shared_ptr<uint8_t> scratch;
};

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
  size_t expertRow(int64_t l, int64_t row, int64_t s, int64_t rowsPerExpert) const {
    return size_t((l * rowsPerExpert + row) * ranks + s);
  }
  /// Chunk c's first row of local expert l among all the capacity rows.
  size_t expertChunk(int64_t l, int64_t c) const {
    return expertRow(l, c * rowsPerChunk, 0, capacity);
  }
  size_t rowBytes() const { return size_t(hidden) * sizeof(float); }
};

/// The layer's geometry on the communicator's ranks, or ZENRT_ERR_INVALID_ARGUMENT.
Geometry geometryOf(const Layer &layer, const Schedule &schedule, Communicator &ranks,
                    const void *input, const void *output) {
  const int size = ranks.size();
  auto invalid = [](const std::string &message) {
    return Error(ZENRT_ERR_INVALID_ARGUMENT, "MoE layer: " + message);
  };
  if (!input || !output || !layer.fc1 || !layer.fc2)
    throw invalid("a buffer or weight is null");
  const std::pair<const char *, const void *> pointers[] = {
      {"the input", input},   {"the output", output},        {"fc1", layer.fc1},
      {"fc2", layer.fc2},     {"fc1's bias", layer.fc1Bias}, {"fc2's bias", layer.fc2Bias}};
  for (const auto &[what, data] : pointers)
    if (data)
      if (std::string problem = ranks.state().math->rejectBuffer(data); !problem.empty())
        throw invalid(std::string(what) + ": " + problem);
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
void pipeline(Communicator::State &ranks, const Schedule &schedule, const Geometry &g,
              const float *input, float *output, const char *outward, const char *inward,
              Compute compute, WhileReturning whileReturning) {
  MoeMath &math = *ranks.math;
  const size_t chunkFloats = g.chunkFloats(), chunks = size_t(g.chunks);
  const size_t chunkBlock = size_t(g.rowsPerChunk) * g.rowBytes(),
               layerBlock = size_t(g.capacity) * g.rowBytes();
  // Each exchange in flight has a slot: chunk c's outward one 2c, its return 2c + 1.
  Exchange exchange(ranks, schedule, g.hidden, g.exchangeBlockRows(), 2 * chunks);
  std::shared_ptr<float> buffers = math.allocateArray<float>(4 * chunkFloats * chunks);
  float *send = buffers.get(), *arrived = send + chunkFloats * chunks,
        *results = arrived + chunkFloats * chunks, *returned = results + chunkFloats * chunks;
  std::vector<Exchange::Pending> outgoing(chunks), incoming(chunks);
  // (rank d, local expert l) blocks of a chunk's rows, in chunk layout, from and to the
  // caller's layout, where the blocks of one (d, l) follow the capacity.
  const size_t blocks = size_t(g.ranks * g.local);
  auto startOutward = [&](size_t c) {
    math.copyRows(send + c * chunkFloats, chunkBlock,
                  reinterpret_cast<const uint8_t *>(input) + c * chunkBlock, layerBlock,
                  chunkBlock, blocks);
    exchange.start(send + c * chunkFloats, arrived + c * chunkFloats, 2 * c, outgoing[c]);
  };

  startOutward(0);
  for (size_t c = 0; c < chunks; ++c) {
    exchange.finish(outgoing[c], outward, int64_t(c));
    if (c + 1 < chunks)
      startOutward(c + 1); // in flight while this chunk computes
    compute(int64_t(c), arrived + c * chunkFloats, results + c * chunkFloats);
    exchange.start(results + c * chunkFloats, returned + c * chunkFloats, 2 * c + 1,
                   incoming[c]);
    whileReturning(int64_t(c));
  }
  for (size_t c = 0; c < chunks; ++c) {
    exchange.finish(incoming[c], inward, int64_t(c));
    math.copyRows(reinterpret_cast<uint8_t *>(output) + c * chunkBlock, layerBlock,
                  returned + c * chunkFloats, chunkBlock, chunkBlock, blocks);
  }
  math.synchronize(); // the output is the caller's on return
}

/// The rows of chunk c that arrived (chunk layout) into `expertSide` ([local expert][capacity]
/// [source rank]).
void keepArrived(MoeMath &math, const Geometry &g, int64_t c, const float *arrived,
                 float *expertSide) {
  const size_t width = size_t(g.hidden), rowBytes = g.rowBytes();
  for (int64_t d = 0; d < g.ranks; ++d)
    for (int64_t l = 0; l < g.local; ++l)
      math.copyRows(expertSide + g.expertRow(l, c * g.rowsPerChunk, d, g.capacity) * width,
                    size_t(g.ranks) * rowBytes,
                    arrived + size_t((d * g.local + l) * g.rowsPerChunk) * width, rowBytes,
                    rowBytes, size_t(g.rowsPerChunk));
}

/// One chunk's results on the expert's side ([local expert][row of the chunk][source rank])
/// into chunk layout, to return.
void toChunkLayout(MoeMath &math, const Geometry &g, const float *expertSide, float *results) {
  const size_t width = size_t(g.hidden), rowBytes = g.rowBytes();
  for (int64_t d = 0; d < g.ranks; ++d)
    for (int64_t l = 0; l < g.local; ++l)
      math.copyRows(results + size_t((d * g.local + l) * g.rowsPerChunk) * width, rowBytes,
                    expertSide + g.expertRow(l, 0, d, g.rowsPerChunk) * width,
                    size_t(g.ranks) * rowBytes, rowBytes, size_t(g.rowsPerChunk));
}

/// Local expert l's weights; a bias the layer does not have is null.
struct ExpertWeights {
  ExpertWeights(const Layer &layer, int64_t l)
      : fc1(layer.fc1 + l * layer.ffn * layer.hidden),
        fc2(layer.fc2 + l * layer.hidden * layer.ffn),
        fc1Bias(layer.fc1Bias ? layer.fc1Bias + l * layer.ffn : nullptr),
        fc2Bias(layer.fc2Bias ? layer.fc2Bias + l * layer.hidden : nullptr) {}
  const float *fc1, *fc2, *fc1Bias, *fc2Bias;
};

void forwardOn(Communicator::State &ranks, const Layer &layer, const Schedule &schedule,
               const Geometry &g, const float *dispatched, float *combined,
               Activations &activations) {
  MoeMath &math = *ranks.math;
  activations.memory = ranks.memory;
  activations.rowFloats = g.expertRows() * size_t(g.hidden);
  activations.unitFloats = g.expertRows() * size_t(g.ffn);
  activations.rows = math.allocateArray<float>(activations.rowFloats);
  activations.units = math.allocateArray<float>(activations.unitFloats);
  const size_t h = size_t(g.hidden), f = size_t(g.ffn), n = g.chunkExpertRows();
  std::shared_ptr<float> outputs = math.allocateArray<float>(size_t(g.local) * n * h);

  pipeline(
      ranks, schedule, g, dispatched, combined, "dispatch", "combine",
      [&](int64_t c, const float *arrived, float *results) {
        keepArrived(math, g, c, arrived, activations.rows.get());
        for (int64_t l = 0; l < g.local; ++l) {
          // Each row's result is the same in whatever chunk it travels (MoeMath.h).
          const ExpertWeights w(layer, l);
          const size_t first = g.expertChunk(l, c);
          const float *x = activations.rows.get() + first * h;
          float *units = activations.units.get() + first * f;
          math.rowProduct(x, n, h, w.fc1, f, true, units);
          if (w.fc1Bias)
            math.addBias(units, n, f, w.fc1Bias);
          math.relu(units, n * f);
          float *y = outputs.get() + size_t(l) * n * h;
          math.rowProduct(units, n, f, w.fc2, h, true, y);
          if (w.fc2Bias)
            math.addBias(y, n, h, w.fc2Bias);
        }
        toChunkLayout(math, g, outputs.get(), results);
      },
      [](int64_t) {});
}

Gradients backwardOn(Communicator::State &ranks, const Layer &layer, const Schedule &schedule,
                     const Geometry &g, const Activations &kept, const float *combinedGradient,
                     float *dispatchedGradient) {
  MoeMath &math = *ranks.math;
  if (kept.memory != ranks.memory || !kept.rows || !kept.units ||
      kept.rowFloats != g.expertRows() * size_t(g.hidden) ||
      kept.unitFloats != g.expertRows() * size_t(g.ffn))
    throw Error(ZENRT_ERR_INVALID_ARGUMENT,
                "MoE layer: the activations were kept by a forward of another shape or memory");
  const size_t h = size_t(g.hidden), f = size_t(g.ffn), n = g.chunkExpertRows(),
               local = size_t(g.local);
  // The gradients of the rank's experts, laid out as Gradients, in the layer's memory.
  const size_t fc1Floats = local * f * h, fc1BiasFloats = layer.fc1Bias ? local * f : 0,
               fc2Floats = local * h * f, fc2BiasFloats = layer.fc2Bias ? local * h : 0;
  std::shared_ptr<float> sums =
      math.allocateArray<float>(fc1Floats + fc1BiasFloats + fc2Floats + fc2BiasFloats);
  float *fc1Sum = sums.get(), *fc1BiasSum = fc1Sum + fc1Floats,
        *fc2Sum = fc1BiasSum + fc1BiasFloats, *fc2BiasSum = fc2Sum + fc2Floats;
  // The output gradients that arrived and the gradients before the ReLU, on the experts'
  // side: the weight gradients read them a block at a time.
  std::shared_ptr<float> outputGradients = math.allocateArray<float>(g.expertRows() * h),
                         unitGradients = math.allocateArray<float>(g.expertRows() * f),
                         inputGradients = math.allocateArray<float>(local * n * h);

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
      for (size_t l = 0; l < local; ++l) {
        const size_t first = g.expertRow(int64_t(l), summed, 0, g.capacity);
        const size_t count = size_t(rows * g.ranks);
        const float *dy = outputGradients.get() + first * h, *x = kept.rows.get() + first * h,
                    *units = kept.units.get() + first * f,
                    *dz = unitGradients.get() + first * f;
        math.accumulateTransposedProduct(dy, count, h, units, f, fc2Sum + l * h * f);
        math.accumulateTransposedProduct(dz, count, f, x, h, fc1Sum + l * f * h);
        if (layer.fc2Bias)
          math.accumulateRows(dy, count, h, fc2BiasSum + l * h);
        if (layer.fc1Bias)
          math.accumulateRows(dz, count, f, fc1BiasSum + l * f);
      }
      summed += rows;
    }
  };

  pipeline(
      ranks, schedule, g, combinedGradient, dispatchedGradient, "gradient dispatch",
      "gradient combine",
      [&](int64_t c, const float *arrived, float *results) {
        keepArrived(math, g, c, arrived, outputGradients.get());
        // The mutant applies chunk 0's ReLU mask to chunk 1.
        const int64_t maskChunk = mutated(Mutation::MoeMasksWrongChunk) && c == 1 ? 0 : c;
        for (int64_t l = 0; l < g.local; ++l) {
          const ExpertWeights w(layer, l);
          const size_t first = g.expertChunk(l, c);
          const float *dy = outputGradients.get() + first * h;
          float *dz = unitGradients.get() + first * f;
          math.rowProduct(dy, n, h, w.fc2, f, false, dz);
          math.reluGradient(kept.units.get() + g.expertChunk(l, maskChunk) * f, dz, n * f);
          math.rowProduct(dz, n, f, w.fc1, h, false, inputGradients.get() + size_t(l) * n * h);
        }
        toChunkLayout(math, g, inputGradients.get(), results);
      },
      [&](int64_t c) { sumArrived((c + 1) * g.rowsPerChunk); });

  Gradients gradients;
  gradients.fc1.resize(fc1Floats);
  gradients.fc1Bias.resize(fc1BiasFloats);
  gradients.fc2.resize(fc2Floats);
  gradients.fc2Bias.resize(fc2BiasFloats);
  math.download(gradients.fc1.data(), fc1Sum, fc1Floats * sizeof(float));
  math.download(gradients.fc1Bias.data(), fc1BiasSum, fc1BiasFloats * sizeof(float));
  math.download(gradients.fc2.data(), fc2Sum, fc2Floats * sizeof(float));
  math.download(gradients.fc2Bias.data(), fc2BiasSum, fc2BiasFloats * sizeof(float));
  return gradients;
}

} // namespace

void forward(const Layer &layer, const Schedule &schedule, const float *dispatched, float *combined,
             Communicator &ranks, Activations *kept) {
  const Geometry g = geometryOf(layer, schedule, ranks, dispatched, combined);
  Activations own;
  reported([&] {
    forwardOn(ranks.state(), layer, schedule, g, dispatched, combined, kept ? *kept : own);
  });
}

Gradients backward(const Layer &layer, const Schedule &schedule, const Activations &kept,
                   const float *combinedGradient, float *dispatchedGradient, Communicator &ranks) {
  const Geometry g = geometryOf(layer, schedule, ranks, combinedGradient, dispatchedGradient);
  return reported([&] {
    return backwardOn(ranks.state(), layer, schedule, g, kept, combinedGradient,
                      dispatchedGradient);
  });
}

void forward(const Layer &layer, const Schedule &schedule, const float *dispatched, float *combined,
             const void *comm, Activations *kept) {
  Communicator ranks(comm, Memory::Host, schedule.timeoutSeconds);
  forward(layer, schedule, dispatched, combined, ranks, kept);
}

Gradients backward(const Layer &layer, const Schedule &schedule, const Activations &kept,
                   const float *combinedGradient, float *dispatchedGradient, const void *comm) {
  Communicator ranks(comm, Memory::Host, schedule.timeoutSeconds);
  return backward(layer, schedule, kept, combinedGradient, dispatchedGradient, ranks);
}

} // namespace moe
} // namespace zenrt

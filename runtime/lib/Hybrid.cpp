//===- Hybrid.cpp - executing tp x pp x dp plans on CPU ranks over MPI ----===//
// This file is built for the host CPU (runtime/CMakeLists.txt) while the rest of libzenrt is
// not: a distinct index type gives its Eigen instantiations their own names, so that the
// linker never swaps its kernels for another file's (allocation alignment is the same
// everywhere, CMakeLists.txt).
#define EIGEN_DEFAULT_DENSE_INDEX_TYPE int

#include "zenrt/Hybrid.h"

#include "Deterministic.h"

#include "CpuMemory.h"
#include "MpiSupport.h"
#include "Mutation.h"
#include "RowProduct.h"
#include "zenrt/Runtime.h"

#include <Eigen/Core>
#include <mpi.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>
#include <map>
#include <set>
#include <utility>

namespace zenrt::hybrid {
namespace {

using json = nlohmann::json;
using Mat = detail::RowMajorMatrix;
using ConstMap = Eigen::Map<const Mat>;
using Map = Eigen::Map<Mat>;
/// Row ranges (first row, count) of a [tokens x width] matrix that one chunk covers.
using Segments = std::vector<std::pair<int64_t, int64_t>>;

using detail::splitMix64;
using detail::streamOf;
using detail::uniformAt;

uint64_t fnv1a(const void *data, size_t bytes, uint64_t hash = 0xCBF29CE484222325ull) {
  const auto *p = static_cast<const unsigned char *>(data);
  for (size_t i = 0; i < bytes; ++i)
    hash = (hash ^ p[i]) * 0x100000001B3ull;
  return hash;
}

float gelu(float x) {
  const float c = 0.7978845608f;  // sqrt(2 / pi)
  return 0.5f * x * (1.0f + std::tanh(c * (x + 0.044715f * x * x * x)));
}

float geluDerivative(float x) {
  const float c = 0.7978845608f, inner = c * (x + 0.044715f * x * x * x), t = std::tanh(inner);
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * c * (1.0f + 3.0f * 0.044715f * x * x);
}

Mat rowsOf(const Mat &matrix, const Segments &segments) {
  int64_t rows = 0;
  for (const auto &segment : segments)
    rows += segment.second;
  Mat out(rows, matrix.cols());
  int64_t at = 0;
  for (const auto &[first, count] : segments) {
    out.middleRows(at, count) = matrix.middleRows(first, count);
    at += count;
  }
  return out;
}

void scatterRows(const Mat &rows, const Segments &segments, Mat &into) {
  int64_t at = 0;
  for (const auto &[first, count] : segments) {
    into.middleRows(first, count) = rows.middleRows(at, count);
    at += count;
  }
}

// ---------------------------------------------------------------- configuration --

class ConfigReader {
public:
  explicit ConfigReader(std::string source) : source(std::move(source)) {}

  [[noreturn]] void fail(const std::string &at, const std::string &message) const {
    throw PlanError(zen::ErrorKind::BadInput, source + ": " + at + ": " + message);
  }
  const json &field(const json &object, const std::string &at, const char *key) const {
    if (!object.is_object() || !object.contains(key))
      fail(at + "/" + key, "is missing");
    return object[key];
  }
  int64_t integer(const json &object, const std::string &at, const char *key, int64_t least,
                  int64_t most) const {
    const json &value = field(object, at, key);
    if (!value.is_number_integer() || value.get<int64_t>() < least || value.get<int64_t>() > most)
      fail(at + "/" + key,
           "must be an integer from " + std::to_string(least) + " to " + std::to_string(most));
    return value.get<int64_t>();
  }
  bool boolean(const json &object, const std::string &at, const char *key) const {
    const json &value = field(object, at, key);
    if (!value.is_boolean())
      fail(at + "/" + key, "must be true or false");
    return value.get<bool>();
  }

  /// "F<m>" / "B<m>" (1F1B) or "F<m>.<c>" / "B<m>.<c>" (interleaved).
  Step step(const json &text, const std::string &at, int64_t virtualStages) const {
    if (!text.is_string())
      fail(at, "must be a step such as F0 or B3.1");
    const std::string s = text.get<std::string>();
    auto number = [&](size_t from, size_t to) {
      if (from >= to || to - from > 9)
        fail(at, "'" + s + "' is not a step such as F0 or B3.1");
      int64_t value = 0;
      for (size_t i = from; i < to; ++i) {
        if (s[i] < '0' || s[i] > '9')
          fail(at, "'" + s + "' is not a step such as F0 or B3.1");
        value = value * 10 + (s[i] - '0');
      }
      return value;
    };
    if (s.empty() || (s[0] != 'F' && s[0] != 'B'))
      fail(at, "'" + s + "' is not a step such as F0 or B3.1");
    Step step;
    step.forward = s[0] == 'F';
    const size_t dot = s.find('.');
    step.microBatch = number(1, dot == std::string::npos ? s.size() : dot);
    if (dot != std::string::npos)
      step.chunk = number(dot + 1, s.size());
    if ((dot != std::string::npos) != (virtualStages > 1))
      fail(at, "'" + s + "' does not name a " +
                   (virtualStages > 1 ? "model chunk (interleaved: F<m>.<c>)"
                                      : "plain micro-batch (1f1b: F<m>)"));
    if (step.chunk >= virtualStages)
      fail(at, "'" + s + "': chunk " + std::to_string(step.chunk) + " of only " +
                   std::to_string(virtualStages));
    return step;
  }

  std::string source;
};

} // namespace

Config configOf(const Plan &plan, const std::string &source) {
  ConfigReader r(source);
  if (plan.parallel.empty())
    r.fail("/parallel", "is missing: not a large-model plan");
  // The configuration as every reader of the plan reads it; what only this executor needs
  // (the model, the optimizer, each stage's layers and program) is checked below.
  const ParallelConfiguration parallel = readParallelSection(plan.parallel, source);
  const json p = json::parse(plan.parallel);
  // The executor builds dense GPT blocks; an MoE block's experts have no executor here yet.
  if (p.contains("moe"))
    r.fail("/parallel/moe", "MoE blocks in a large-model plan do not execute yet (the MoE layers "
                            "run in data-parallel plans)");
  constexpr int64_t kMost = int64_t{1} << 30;
  Config c;
  static_cast<ParallelConfiguration &>(c) = parallel;
  const json &optimizer = r.field(p, "/parallel", "optimizer");
  if (optimizer != "adam" && optimizer != "sgd")
    r.fail("/parallel/optimizer", "must be adam or sgd");
  c.adam = optimizer == "adam";

  const json &model = r.field(p, "/parallel", "model");
  const std::string m = "/parallel/model";
  c.model.layers = r.integer(model, m, "layers", 1, kMost);
  c.model.hidden = r.integer(model, m, "hidden", 1, kMost);
  c.model.heads = r.integer(model, m, "heads", 1, kMost);
  c.model.ffn = r.integer(model, m, "ffn", 1, kMost);
  c.model.seq = r.integer(model, m, "seq", 1, kMost);
  c.model.vocab = r.integer(model, m, "vocab", 1, kMost);
  // The executed block is multi-head attention and a two-GEMM MLP (a decoder's
  // or encoder's): a plan for another block would run a model it was not made for.
  if (model.contains("kv_heads") && r.integer(model, m, "kv_heads", 1, kMost) != c.model.heads)
    r.fail(m + "/kv_heads", "grouped-query attention (" + std::to_string(model["kv_heads"].get<int64_t>()) +
                                " key/value heads for " + std::to_string(c.model.heads) +
                                ") is not executed by zenopt-run yet: its blocks are multi-head attention");
  if (model.contains("mlp") && (!model["mlp"].is_string() || (model["mlp"] != "gelu" && model["mlp"] != "relu")))
    r.fail(m + "/mlp", model["mlp"].dump() + " MLPs are not executed by zenopt-run yet: its blocks' MLPs are "
                                             "two GEMMs (gelu or relu)");
  if (model.contains("cross_attention_blocks") &&
      r.integer(model, m, "cross_attention_blocks", 0, kMost) != 0)
    r.fail(m + "/cross_attention_blocks", "encoder-decoder blocks with a cross-attention are not executed by "
                                          "zenopt-run yet");
  if (c.model.hidden % c.model.heads)
    r.fail(m + "/heads", std::to_string(c.model.heads) + " heads do not divide the hidden size " +
                             std::to_string(c.model.hidden));
  if (c.model.heads % c.tp || c.model.ffn % c.tp)
    r.fail("/parallel/tp", "tp " + std::to_string(c.tp) + " does not divide the " +
                               std::to_string(c.model.heads) + " heads and the " +
                               std::to_string(c.model.ffn) + " MLP features");
  const int64_t tokens = c.microBatch * c.model.seq;
  if (c.sequenceParallel && tokens % c.tp)
    r.fail("/parallel/sequence_parallel", "tp " + std::to_string(c.tp) +
                                              " does not divide a micro-batch's " +
                                              std::to_string(tokens) + " tokens");

  const int64_t split = c.sequenceParallel ? tokens / c.tp : tokens;
  auto divides = [&](const char *at, int64_t k) {
    if (split % k)
      r.fail(std::string("/parallel/decomposition/") + at,
             std::to_string(k) + " chunks do not divide the " + std::to_string(split) + " tokens " +
                 (c.sequenceParallel ? "of a sequence-parallel shard" : "of a micro-batch"));
    return k;
  };
  c.chunks = {divides("attention/forward", parallel.chunks.attentionForward),
              divides("attention/backward", parallel.chunks.attentionBackward),
              divides("mlp/forward", parallel.chunks.mlpForward),
              divides("mlp/backward", parallel.chunks.mlpBackward)};

  const json &stages = r.field(p, "/parallel", "stages");
  if (!stages.is_array() || int64_t(stages.size()) != c.pp)
    r.fail("/parallel/stages", "must hold one object per pipeline stage (" +
                                   std::to_string(c.pp) + ")");
  const int64_t chunkLayers = c.model.layers / (c.pp * c.virtualStages);
  if (c.virtualStages > 1 && c.model.layers % (c.pp * c.virtualStages))
    r.fail("/parallel/schedule", "the " + std::to_string(c.model.layers) +
                                     " layers do not split into pp x V equal chunks");
  int64_t nextLayer = 0;
  for (int64_t s = 0; s < c.pp; ++s) {
    const std::string at = "/parallel/stages/" + std::to_string(s);
    const json &object = stages[size_t(s)];
    StageLayout stage;
    stage.firstLayer = r.integer(object, at, "first_layer", 0, c.model.layers - 1);
    stage.layers = r.integer(object, at, "layers", 1, c.model.layers);
    stage.embedding = r.boolean(object, at, "embedding");
    stage.head = r.boolean(object, at, "head");
    if (stage.embedding != (s == 0) || stage.head != (s == c.pp - 1))
      r.fail(at, "the embedding must be on the first stage and the head on the last");
    if (c.virtualStages == 1 && stage.firstLayer != nextLayer)
      r.fail(at + "/first_layer", "must be " + std::to_string(nextLayer) +
                                      " (the stages hold consecutive layers)");
    if (c.virtualStages > 1 && stage.layers != chunkLayers * c.virtualStages)
      r.fail(at + "/layers", "must be " + std::to_string(chunkLayers * c.virtualStages) +
                                 " (interleaved stages hold V equal chunks)");
    nextLayer += stage.layers;
    const json &program = r.field(object, at, "program");
    if (!program.is_array())
      r.fail(at + "/program", "must be an array of steps");
    // Every (micro-batch, chunk) runs forward once, then backward once.
    std::set<std::pair<int64_t, int64_t>> forwarded, done;
    for (size_t i = 0; i < program.size(); ++i) {
      const std::string stepAt = at + "/program/" + std::to_string(i);
      Step step = r.step(program[i], stepAt, c.virtualStages);
      if (step.microBatch >= c.microBatches)
        r.fail(stepAt, "micro-batch " + std::to_string(step.microBatch) + " of only " +
                           std::to_string(c.microBatches));
      const std::pair<int64_t, int64_t> key{step.microBatch, step.chunk};
      if (step.forward ? !forwarded.insert(key).second
                       : (!forwarded.count(key) || !done.insert(key).second))
        r.fail(stepAt, std::string(step.forward ? "forward repeated"
                                                : "backward before its forward, or repeated"));
      stage.program.push_back(step);
    }
    if (int64_t(done.size()) != c.microBatches * c.virtualStages)
      r.fail(at + "/program", "must run forward and backward of every micro-batch and chunk");
    c.stages.push_back(std::move(stage));
  }
  if (c.virtualStages == 1 && nextLayer != c.model.layers)
    r.fail("/parallel/stages", "the stages hold " + std::to_string(nextLayer) + " of the " +
                                   std::to_string(c.model.layers) + " layers");
  return c;
}

Config unpartitioned(const Config &config) {
  Config one = config;
  one.tp = one.pp = one.dp = 1;
  one.zero = 0;
  one.sequenceParallel = false;
  one.microBatches = config.microBatches * config.dp;
  one.virtualStages = 1;
  one.chunks = Chunks{};
  StageLayout stage;
  stage.layers = config.model.layers;
  stage.embedding = stage.head = true;
  for (int64_t m = 0; m < one.microBatches; ++m) {
    stage.program.push_back({true, m, 0});
    stage.program.push_back({false, m, 0});
  }
  one.stages = {stage};
  return one;
}

// ------------------------------------------------------------------- execution --

namespace {

/// A weight tensor's slice held by this rank: rows x cols of the unpartitioned tensor
/// [., globalCols] from (rowOffset, colOffset), at `offset` in its unit.
struct Slice {
  std::string name;
  int64_t rows = 0, cols = 0, globalCols = 0, rowOffset = 0, colOffset = 0, offset = 0;
};

/// What is synchronised and (ZeRO-3) gathered as one: a layer, the embeddings, the head.
struct Unit {
  std::vector<Slice> slices;
  int64_t elements = 0, padded = 0;  // padded to a multiple of dp for ZeRO's shards
  std::vector<float> weights;        // every element; ZeRO-3: only while gathered
  std::vector<float> shard;          // ZeRO-3: the held weights
  std::vector<float> gradients;      // accumulated over the micro-batches
  std::vector<float> gradientShard;  // ZeRO >= 1: the held synchronised gradients
  std::vector<float> momentum, variance;
};

/// A block's activations kept from forward for backward.
struct Saved {
  Mat attentionInput, qkv, context, mlpInput, preActivation, activation;
  std::vector<Mat> probabilities;  // per sample and local head
};

struct HeadSaved {
  Mat output, logitGradient;
};

} // namespace

struct Executor::Impl {
  Config config;
  Options options;
  MPI_Comm world = MPI_COMM_NULL, tpComm = MPI_COMM_NULL, dpComm = MPI_COMM_NULL;
  int rank = 0;
  int64_t tpRank = 0, dpRank = 0, stage = 0;
  int64_t tokens = 0, localTokens = 0, hiddenShard = 0, ffnShard = 0, headsShard = 0;
  std::vector<Unit> units;
  std::map<int64_t, size_t> layerUnit;
  int64_t embeddingUnit = -1, headUnit = -1;
  std::map<std::pair<int64_t, int64_t>, Saved> saved;  // (micro-batch, layer)
  std::map<int64_t, HeadSaved> headSaved;               // micro-batch
  std::deque<std::pair<std::vector<float>, MPI_Request>> sends;
  /// Answers the other ranks for this one and names those lost when a wait times out.
  std::unique_ptr<detail::PeerWatch> watch;
  double loss = 0;
  int64_t steps = 0, messagesChecked = 0;

  Impl(const Config &c, const Options &o, const void *comm) : config(c), options(o) {
    const MPI_Comm base = comm ? *static_cast<const MPI_Comm *>(comm) : MPI_COMM_WORLD;
    int size = 1;
    detail::checkMpi(MPI_Comm_rank(base, &rank), "MPI_Comm_rank");
    detail::checkMpi(MPI_Comm_size(base, &size), "MPI_Comm_size");
    if (size != c.tp * c.pp * c.dp)
      throw Error(ZENRT_ERR_MISMATCH, "hybrid plan: tp x pp x dp = " + std::to_string(c.tp) +
                                          " x " + std::to_string(c.pp) + " x " +
                                          std::to_string(c.dp) + " ranks, but the run has " +
                                          std::to_string(size));
    if (size > 1)
      watch = std::make_unique<detail::PeerWatch>(&base, o.timeoutSeconds);
    int *tagUpperBound = nullptr, found = 0;
    MPI_Comm_get_attr(base, MPI_TAG_UB, &tagUpperBound, &found);
    if (found && 2 * c.pp * c.virtualStages + 1 > int64_t(*tagUpperBound))
      throw Error(ZENRT_ERR_INVALID_ARGUMENT, "hybrid plan: pp x V exceeds MPI's message tags");
    tpRank = rank % c.tp;
    dpRank = (rank / c.tp) % c.dp;
    stage = rank / (c.tp * c.dp);
    detail::checkMpi(MPI_Comm_dup(base, &world), "MPI_Comm_dup");
    detail::checkMpi(MPI_Comm_split(base, int(stage * c.dp + dpRank), int(tpRank), &tpComm),
                     "MPI_Comm_split");
    detail::checkMpi(MPI_Comm_split(base, int(stage * c.tp + tpRank), int(dpRank), &dpComm),
                     "MPI_Comm_split");
    const ModelShape &m = c.model;
    tokens = c.microBatch * m.seq;
    localTokens = c.sequenceParallel ? tokens / c.tp : tokens;
    hiddenShard = m.hidden / c.tp;
    ffnShard = m.ffn / c.tp;
    headsShard = m.heads / c.tp;
    checkMemory();
    buildUnits();
  }

  ~Impl() {
    for (auto &[buffer, request] : sends)
      if (request != MPI_REQUEST_NULL) {
        MPI_Cancel(&request);
        MPI_Request_free(&request);
      }
    for (MPI_Comm *comm : {&world, &tpComm, &dpComm})
      if (*comm != MPI_COMM_NULL)
        MPI_Comm_free(comm);
  }

  /// Plans for GPU clusters can be far beyond a CPU rank: refuse them by name, not by
  /// running out of memory halfway.
  void checkMemory() const {
    const ModelShape &m = config.model;
    const StageLayout &layout = config.stages[size_t(stage)];
    const double layerWeights = double(4 * hiddenShard * m.hidden + 2 * ffnShard * m.hidden);
    double weights = double(layout.layers) * layerWeights;
    if (layout.embedding)
      weights += double((m.vocab + m.seq) * m.hidden);
    if (layout.head)
      weights += double(m.vocab * m.hidden);
    const double perMicroBatchLayer =
        double(tokens) * double(2 * m.hidden + 4 * hiddenShard + 2 * ffnShard) +
        double(config.microBatch * headsShard * m.seq * m.seq);
    // 1F1B keeps at most about 2 x pp micro-batches' activations in flight on a stage.
    const double inFlight = double(std::min(config.microBatches, 2 * config.pp));
    const double floats = 5 * weights + inFlight * double(layout.layers) * perMicroBatchLayer +
                          (layout.head ? 3.0 * double(tokens * m.vocab) : 0.0);
    // The plan is valid but this machine cannot run its model: the data, not the call.
    const std::string excess = detail::cpuMemoryExcess(floats);
    if (!excess.empty())
      throw Error(ZENRT_ERR_PLAN, "hybrid plan: stage " + std::to_string(stage) + " " + excess +
                                      ": execute a plan for a smaller model");
  }

  void addSlice(Unit &unit, const std::string &name, int64_t rows, int64_t cols,
                int64_t globalCols, int64_t rowOffset, int64_t colOffset) {
    unit.slices.push_back({name, rows, cols, globalCols, rowOffset, colOffset, unit.elements});
    unit.elements += rows * cols;
  }

  std::vector<int64_t> layersOf(int64_t virtualStage) const {
    const StageLayout &layout = config.stages[size_t(virtualStage % config.pp)];
    int64_t first = layout.firstLayer, count = layout.layers;
    if (config.virtualStages > 1) {
      count = config.model.layers / (config.pp * config.virtualStages);
      first = virtualStage * count;
    }
    std::vector<int64_t> layers;
    for (int64_t l = first; l < first + count; ++l)
      layers.push_back(l);
    return layers;
  }

  void buildUnits() {
    const ModelShape &m = config.model;
    const StageLayout &layout = config.stages[size_t(stage)];
    auto finish = [&](Unit &unit) {
      unit.padded = (unit.elements + config.dp - 1) / config.dp * config.dp;
      std::vector<float> weights(size_t(unit.padded), 0.0f);
      for (const Slice &slice : unit.slices) {
        const uint64_t stream = streamOf(options.seed, slice.name);
        const float scale = initialScale(slice.name);
        for (int64_t r = 0; r < slice.rows; ++r)
          for (int64_t col = 0; col < slice.cols; ++col)
            weights[size_t(slice.offset + r * slice.cols + col)] =
                scale * uniformAt(stream, uint64_t((slice.rowOffset + r) * slice.globalCols +
                                                   slice.colOffset + col));
      }
      const size_t held = size_t(heldElements(unit));
      if (config.zero == 3 && config.dp > 1)
        unit.shard.assign(weights.begin() + std::ptrdiff_t(heldFirst(unit)),
                          weights.begin() + std::ptrdiff_t(heldFirst(unit) + int64_t(held)));
      else
        unit.weights = std::move(weights);
      if (config.adam) {
        unit.momentum.assign(held, 0.0f);
        unit.variance.assign(held, 0.0f);
      }
      units.push_back(std::move(unit));
    };
    if (layout.embedding) {
      Unit unit;
      addSlice(unit, "embedding", m.vocab, m.hidden, m.hidden, 0, 0);
      addSlice(unit, "position", m.seq, m.hidden, m.hidden, 0, 0);
      embeddingUnit = int64_t(units.size());
      finish(unit);
    }
    for (int64_t chunk = 0; chunk < config.virtualStages; ++chunk)
      for (int64_t layer : layersOf(chunk * config.pp + stage)) {
        Unit unit;
        const std::string name = "layer" + std::to_string(layer);
        const int64_t h = hiddenShard, f = ffnShard, H = m.hidden;
        // wq, wk, wv adjacent: together the column-parallel [3h x H] QKV weight.
        for (const char *w : {".wq", ".wk", ".wv"})
          addSlice(unit, name + w, h, H, H, tpRank * h, 0);
        addSlice(unit, name + ".wo", H, h, H, 0, tpRank * h);
        addSlice(unit, name + ".w1", f, H, H, tpRank * f, 0);
        addSlice(unit, name + ".w2", H, f, m.ffn, 0, tpRank * f);
        layerUnit[layer] = units.size();
        finish(unit);
      }
    if (layout.head) {
      Unit unit;
      addSlice(unit, "head", m.vocab, m.hidden, m.hidden, 0, 0);
      headUnit = int64_t(units.size());
      finish(unit);
    }
  }

  /// Embeddings of unit size, positions small; GEMM weights 1/sqrt(fan-in) (w2's fan-in is
  /// the MLP's width), so the residual stream stays of order one over the layers.
  float initialScale(const std::string &name) const {
    if (name == "embedding")
      return 1.0f;
    if (name == "position")
      return 0.1f;
    const bool w2 = name.size() > 3 && name.compare(name.size() - 3, 3, ".w2") == 0;
    return 1.0f / std::sqrt(float(w2 ? config.model.ffn : config.model.hidden));
  }

  bool sharded() const { return config.zero >= 1 && config.dp > 1; }
  int64_t heldElements(const Unit &unit) const {
    return sharded() ? unit.padded / config.dp : unit.padded;
  }
  int64_t heldFirst(const Unit &unit) const { return sharded() ? dpRank * heldElements(unit) : 0; }

  void wait(MPI_Request &request, const std::string &what) {
    detail::waitBounded(request, options.timeoutSeconds, rank, [&] { return what; }, watch.get());
  }

  /// ZeRO-3 gathers a unit's weights before each use and frees them after.
  const float *acquire(Unit &unit) {
    if (config.zero == 3 && config.dp > 1) {
      unit.weights.resize(size_t(unit.padded));
      const int64_t held = heldElements(unit);
      MPI_Request request;
      detail::checkMpi(MPI_Iallgather(unit.shard.data(), int(held), MPI_FLOAT,
                                      unit.weights.data(), int(held), MPI_FLOAT, dpComm, &request),
                       "MPI_Iallgather");
      wait(request, "ZeRO-3 weight gather of " + unit.slices.front().name);
    }
    return unit.weights.data();
  }
  void release(Unit &unit) {
    if (config.zero == 3 && config.dp > 1) {
      unit.weights.clear();
      unit.weights.shrink_to_fit();
    }
  }

  // ------------------------------------------------ tensor-parallel collectives --

  /// The rows of chunk c of k: a contiguous range of the tokens, or with sequence
  /// parallelism the c-th part of every rank's shard (so that each chunk is a whole
  /// all-gather / reduce-scatter).
  Segments chunkRows(int64_t c, int64_t k) const {
    if (!config.sequenceParallel)
      return {{c * tokens / k, tokens / k}};
    Segments segments;
    const int64_t part = localTokens / k;
    for (int64_t j = 0; j < config.tp; ++j)
      segments.push_back({j * localTokens + c * part, part});
    return segments;
  }

  /// Brings the sequence-parallel shard `local` to every token in `full`, chunk by chunk,
  /// calling `ready` for each chunk's rows as it arrives (the next chunks are in flight).
  template <typename Ready>
  void gatherTokens(const Mat &local, int64_t k, Mat &full, Ready ready, const char *what) {
    if (!config.sequenceParallel || config.tp == 1) {
      full = local;
      ready(Segments{{0, tokens}});
      return;
    }
    const int64_t part = localTokens / k, width = local.cols(), block = part * width;
    std::vector<float> gathered(size_t(k * config.tp * block));
    std::vector<MPI_Request> requests(size_t(k), MPI_REQUEST_NULL);
    for (int64_t c = 0; c < k; ++c)
      detail::checkMpi(MPI_Iallgather(local.data() + c * block, int(block), MPI_FLOAT,
                                      &gathered[size_t(c * config.tp * block)], int(block),
                                      MPI_FLOAT, tpComm, &requests[size_t(c)]),
                       "MPI_Iallgather");
    full.resize(tokens, width);
    for (int64_t c = 0; c < k; ++c) {
      wait(requests[size_t(c)], std::string(what) + " all-gather chunk " + std::to_string(c));
      for (int64_t j = 0; j < config.tp; ++j)
        full.middleRows(j * localTokens + c * part, part) =
            ConstMap(&gathered[size_t((c * config.tp + j) * block)], part, width);
      ready(chunkRows(c, k));
    }
  }

  /// Sums every rank's partial [tokens x width] product over the tensor-parallel group,
  /// chunk by chunk: `partial(rows, out)` computes a chunk's rows while the previous
  /// chunks' reductions are in flight. All-reduce into `out` [tokens x width], or with
  /// sequence parallelism reduce-scatter into this rank's shard [localTokens x width].
  /// Partials add in rank order, whatever k.
  template <typename Partial>
  void reduceTokens(int64_t k, int64_t width, Partial partial, Mat &out, const char *what) {
    out.resize(localTokens, width);
    if (config.tp == 1) {
      partial(Segments{{0, tokens}}, out);
      return;
    }
    const int64_t rows = tokens / k, block = rows * width, t = config.tp;
    std::vector<Mat> partials(static_cast<size_t>(k));
    std::vector<std::vector<float>> gathered(size_t(k), std::vector<float>(size_t(t * block)));
    std::vector<MPI_Request> requests(size_t(k), MPI_REQUEST_NULL);
    for (int64_t c = 0; c < k; ++c) {
      Mat &mine = partials[size_t(c)];
      partial(chunkRows(c, k), mine);
      if (config.sequenceParallel)
        detail::checkMpi(MPI_Ialltoall(mine.data(), int(block / t), MPI_FLOAT,
                                       gathered[size_t(c)].data(), int(block / t), MPI_FLOAT,
                                       tpComm, &requests[size_t(c)]),
                         "MPI_Ialltoall");
      else
        detail::checkMpi(MPI_Iallgather(mine.data(), int(block), MPI_FLOAT,
                                        gathered[size_t(c)].data(), int(block), MPI_FLOAT,
                                        tpComm, &requests[size_t(c)]),
                         "MPI_Iallgather");
    }
    for (int64_t c = 0; c < k; ++c) {
      wait(requests[size_t(c)], std::string(what) + " reduction chunk " + std::to_string(c));
      const int64_t count = config.sequenceParallel ? block / t : block;
      const float *parts = gathered[size_t(c)].data();
      float *into = config.sequenceParallel ? out.data() + c * count : out.data() + c * block;
      const int64_t contributing = mutated(Mutation::TpDropsPartial) ? t - 1 : t;
      const bool reversed = c == 1 && mutated(Mutation::TpReordersChunk);
      for (int64_t i = 0; i < count; ++i) {
        float sum = parts[(reversed ? t - 1 : 0) * count + i];
        for (int64_t j = 1; j < contributing; ++j)
          sum += parts[(reversed ? t - 1 - j : j) * count + i];
        into[i] = sum;
      }
    }
  }

  // ---------------------------------------------------------------- the model --

  /// A tensor-parallel region forward: [all-gather +] column-parallel GEMM (chunked),
  /// the core, row-parallel GEMM + reduction (chunked). Returns the region's output as
  /// this rank holds the residual stream.
  template <typename Core>
  Mat regionForward(const Mat &x, int64_t k, const ConstMap &column, const ConstMap &row,
                    Mat &input, Mat &inner, Core core, const char *what) {
    inner.resize(tokens, column.rows());
    gatherTokens(
        x, k, input,
        [&](const Segments &rows) { scatterRows(detail::rowProduct(rowsOf(input, rows), column.transpose()), rows, inner); },
        what);
    const Mat &z = core();
    Mat out;
    reduceTokens(
        k, config.model.hidden,
        [&](const Segments &rows, Mat &partial) { partial = detail::rowProduct(rowsOf(z, rows), row.transpose()); },
        out, what);
    return out;
  }

  /// Its backward: [all-gather of dy +] GEMM with the row-parallel weight (chunked),
  /// weight gradients over every token, the core's backward, GEMM with the
  /// column-parallel weight + reduction (chunked).
  template <typename CoreBackward>
  Mat regionBackward(const Mat &dy, int64_t k, const ConstMap &column, const ConstMap &row,
                     const Mat &input, const Mat &z, float *columnGradient, float *rowGradient,
                     CoreBackward coreBackward, const char *what) {
    Mat dyFull, dz(tokens, row.cols());
    gatherTokens(
        dy, k, dyFull,
        [&](const Segments &rows) { scatterRows(detail::rowProduct(rowsOf(dyFull, rows), row), rows, dz); }, what);
    Map(rowGradient, row.rows(), row.cols()).noalias() += dyFull.transpose() * z;
    const Mat dInner = coreBackward(dz);
    Mat dx;
    reduceTokens(
        k, config.model.hidden,
        [&](const Segments &rows, Mat &partial) { partial = detail::rowProduct(rowsOf(dInner, rows), column); },
        dx, what);
    Map(columnGradient, column.rows(), column.cols()).noalias() += dInner.transpose() * input;
    return dx;
  }

  struct LayerWeights {
    ConstMap qkv, wo, w1, w2;
  };
  LayerWeights layerWeights(const float *w) const {
    const int64_t h = hiddenShard, f = ffnShard, H = config.model.hidden;
    return {ConstMap(w, 3 * h, H), ConstMap(w + 3 * h * H, H, h), ConstMap(w + 4 * h * H, f, H),
            ConstMap(w + 4 * h * H + f * H, H, f)};
  }

  const Mat &attentionCore(Saved &s) {
    const int64_t seq = config.model.seq, d = config.model.hidden / config.model.heads,
                  h = hiddenShard;
    const float scale = 1.0f / std::sqrt(float(d));
    s.context.resize(tokens, h);
    s.probabilities.clear();
    for (int64_t b = 0; b < config.microBatch; ++b)
      for (int64_t head = 0; head < headsShard; ++head) {
        auto q = s.qkv.block(b * seq, head * d, seq, d);
        auto key = s.qkv.block(b * seq, h + head * d, seq, d);
        auto value = s.qkv.block(b * seq, 2 * h + head * d, seq, d);
        Mat p = (q * key.transpose()) * scale;
        for (int64_t i = 0; i < seq; ++i) {  // causal softmax
          const float most = p.row(i).head(i + 1).maxCoeff();
          float sum = 0;
          for (int64_t j = 0; j <= i; ++j)
            sum += (p(i, j) = std::exp(p(i, j) - most));
          p.row(i).head(i + 1) /= sum;
          p.row(i).tail(seq - i - 1).setZero();
        }
        s.context.block(b * seq, head * d, seq, d).noalias() = p * value;
        s.probabilities.push_back(std::move(p));
      }
    return s.context;
  }

  Mat attentionCoreBackward(const Saved &s, const Mat &dContext) const {
    const int64_t seq = config.model.seq, d = config.model.hidden / config.model.heads,
                  h = hiddenShard;
    const float scale = 1.0f / std::sqrt(float(d));
    Mat dqkv(tokens, 3 * h);
    size_t index = 0;
    for (int64_t b = 0; b < config.microBatch; ++b)
      for (int64_t head = 0; head < headsShard; ++head) {
        const Mat &p = s.probabilities[index++];
        auto q = s.qkv.block(b * seq, head * d, seq, d);
        auto key = s.qkv.block(b * seq, h + head * d, seq, d);
        auto value = s.qkv.block(b * seq, 2 * h + head * d, seq, d);
        auto dc = dContext.block(b * seq, head * d, seq, d);
        Mat dp = dc * value.transpose();
        dqkv.block(b * seq, 2 * h + head * d, seq, d).noalias() = p.transpose() * dc;
        Mat ds = p.cwiseProduct(dp);
        const Eigen::VectorXf rowSums = ds.rowwise().sum();
        ds -= p.cwiseProduct(rowSums.replicate(1, seq));
        ds *= scale;
        dqkv.block(b * seq, head * d, seq, d).noalias() = ds * key;
        dqkv.block(b * seq, h + head * d, seq, d).noalias() = ds.transpose() * q;
      }
    return dqkv;
  }

  Mat blockForward(const Mat &x, int64_t microBatch, int64_t layer) {
    Unit &unit = units[layerUnit.at(layer)];
    const LayerWeights w = layerWeights(acquire(unit));
    Saved &s = saved[{microBatch, layer}];
    Mat mid = x + regionForward(
                      x, config.chunks.attentionForward, w.qkv, w.wo, s.attentionInput, s.qkv,
                      [&]() -> const Mat & { return attentionCore(s); }, "attention");
    Mat out = mid + regionForward(
                        mid, config.chunks.mlpForward, w.w1, w.w2, s.mlpInput, s.preActivation,
                        [&]() -> const Mat & {
                          s.activation = s.preActivation.unaryExpr(&gelu);
                          return s.activation;
                        },
                        "MLP");
    release(unit);
    return out;
  }

  Mat blockBackward(const Mat &dOut, int64_t microBatch, int64_t layer) {
    Unit &unit = units[layerUnit.at(layer)];
    const LayerWeights w = layerWeights(acquire(unit));
    const auto at = saved.find({microBatch, layer});
    const Saved &s = at->second;
    const int64_t h = hiddenShard, f = ffnShard, H = config.model.hidden;
    float *g = unit.gradients.data();
    Mat dMid = dOut + regionBackward(
                          dOut, config.chunks.mlpBackward, w.w1, w.w2, s.mlpInput, s.activation,
                          g + 4 * h * H, g + 4 * h * H + f * H,
                          [&](const Mat &dAct) -> Mat {
                            return dAct.cwiseProduct(s.preActivation.unaryExpr(&geluDerivative));
                          },
                          "MLP");
    Mat dx = dMid + regionBackward(
                        dMid, config.chunks.attentionBackward, w.qkv, w.wo, s.attentionInput,
                        s.context, g, g + 3 * h * H,
                        [&](const Mat &dContext) { return attentionCoreBackward(s, dContext); },
                        "attention");
    release(unit);
    saved.erase(at);
    return dx;
  }

  int64_t globalMicroBatch(int64_t microBatch) const {
    return dpRank * config.microBatches + microBatch;
  }
  int64_t tokenAt(const char *stream, int64_t microBatch, int64_t row) const {
    const uint64_t index = uint64_t(globalMicroBatch(microBatch) * tokens + row);
    return int64_t(splitMix64(streamOf(options.seed, stream) + index) % uint64_t(config.model.vocab));
  }
  /// The first token row this rank's residual stream holds.
  int64_t firstLocalRow() const { return config.sequenceParallel ? tpRank * localTokens : 0; }

  Mat embed(int64_t microBatch) {
    Unit &unit = units[size_t(embeddingUnit)];
    const float *w = acquire(unit);
    const int64_t H = config.model.hidden;
    const ConstMap table(w, config.model.vocab, H), position(w + config.model.vocab * H,
                                                             config.model.seq, H);
    Mat x(localTokens, H);
    for (int64_t r = 0; r < localTokens; ++r) {
      const int64_t row = firstLocalRow() + r;
      x.row(r) = table.row(tokenAt("tokens", microBatch, row)) +
                 position.row(row % config.model.seq);
    }
    release(unit);
    return x;
  }

  void embedBackward(const Mat &dx, int64_t microBatch) {
    Mat full;
    gatherTokens(dx, 1, full, [](const Segments &) {}, "embedding gradient");
    Unit &unit = units[size_t(embeddingUnit)];
    const int64_t H = config.model.hidden;
    Map table(unit.gradients.data(), config.model.vocab, H),
        position(unit.gradients.data() + config.model.vocab * H, config.model.seq, H);
    for (int64_t row = 0; row < tokens; ++row) {
      table.row(tokenAt("tokens", microBatch, row)) += full.row(row);
      position.row(row % config.model.seq) += full.row(row);
    }
  }

  /// Logits, the mean cross-entropy's share of the global batch, and its gradient.
  void headForward(const Mat &y, int64_t microBatch) {
    HeadSaved &s = headSaved[microBatch];
    gatherTokens(y, 1, s.output, [](const Segments &) {}, "head input");
    Unit &unit = units[size_t(headUnit)];
    const ConstMap w(acquire(unit), config.model.vocab, config.model.hidden);
    s.logitGradient = s.output * w.transpose();
    release(unit);
    const double share = 1.0 / double(tokens * config.microBatches * config.dp);
    for (int64_t row = 0; row < tokens; ++row) {
      auto logits = s.logitGradient.row(row);
      const float most = logits.maxCoeff();
      logits = (logits.array() - most).exp();
      const float sum = logits.sum();
      logits /= sum;
      const int64_t target = tokenAt("targets", microBatch, row);
      // Only one tensor-parallel rank counts the loss the whole group computed.
      if (tpRank == 0)
        loss -= std::log(std::max(double(logits(target)), 1e-30)) * share;
      logits(target) -= 1.0f;
      logits *= float(share);
    }
  }

  Mat headBackward(int64_t microBatch) {
    const auto at = headSaved.find(microBatch);
    HeadSaved &s = at->second;
    Unit &unit = units[size_t(headUnit)];
    const ConstMap w(acquire(unit), config.model.vocab, config.model.hidden);
    Map(unit.gradients.data(), config.model.vocab, config.model.hidden).noalias() +=
        s.logitGradient.transpose() * s.output;
    Mat dy = (s.logitGradient * w).middleRows(firstLocalRow(), localTokens);
    release(unit);
    headSaved.erase(at);
    return dy;
  }

  // ------------------------------------------------------------ the pipeline --

  int peerOf(int64_t otherStage) const {
    return int((otherStage * config.dp + dpRank) * config.tp + tpRank);
  }

  /// A stage-to-stage message: the tensor, then (micro-batch, virtual stage, direction)
  /// and a 64-bit hash of the tensor's bytes, checked on arrival.
  void send(const Mat &x, int64_t microBatch, int64_t virtualStage, bool forward) {
    std::vector<float> message(size_t(x.size()) + 5);
    std::memcpy(message.data(), x.data(), size_t(x.size()) * sizeof(float));
    const uint32_t header[5] = {uint32_t(microBatch), uint32_t(virtualStage), forward ? 1u : 0u,
                                uint32_t(fnv1a(x.data(), size_t(x.size()) * sizeof(float))),
                                uint32_t(fnv1a(x.data(), size_t(x.size()) * sizeof(float)) >> 32)};
    std::memcpy(message.data() + x.size(), header, sizeof header);
    if (mutated(Mutation::PipelineDamages))
      message[0] += 1.0f;
    sends.emplace_back(std::move(message), MPI_REQUEST_NULL);
    auto &[buffer, request] = sends.back();
    detail::checkMpi(MPI_Isend(buffer.data(), int(buffer.size()), MPI_FLOAT,
                               peerOf(virtualStage % config.pp),
                               int(2 * virtualStage + (forward ? 0 : 1)), world, &request),
                     "MPI_Isend");
  }

  Mat receive(int64_t microBatch, int64_t virtualStage, bool forward, int64_t fromVirtual) {
    const int64_t H = config.model.hidden;
    std::vector<float> message(size_t(localTokens * H) + 5);
    MPI_Request request;
    detail::checkMpi(MPI_Irecv(message.data(), int(message.size()), MPI_FLOAT,
                               peerOf(fromVirtual % config.pp),
                               int(2 * virtualStage + (forward ? 0 : 1)), world, &request),
                     "MPI_Irecv");
    const std::string what = std::string(forward ? "activations" : "gradients") +
                             " of micro-batch " + std::to_string(microBatch) +
                             " for virtual stage " + std::to_string(virtualStage);
    wait(request, "receiving the " + what + " from rank " +
                      std::to_string(peerOf(fromVirtual % config.pp)));
    Mat x = ConstMap(message.data(), localTokens, H);
    uint32_t header[5];
    std::memcpy(header, message.data() + x.size(), sizeof header);
    const uint64_t hash = fnv1a(x.data(), size_t(x.size()) * sizeof(float));
    if (header[0] != uint32_t(microBatch) || header[1] != uint32_t(virtualStage) ||
        header[2] != (forward ? 1u : 0u) || header[3] != uint32_t(hash) ||
        header[4] != uint32_t(hash >> 32))
      throw Error(ZENRT_ERR_INTERNAL, "rank " + std::to_string(rank) + ": the " + what +
                                          " arrived damaged or out of order");
    ++messagesChecked;
    return x;
  }

  void runStep(const Step &step) {
    const int64_t v = step.chunk * config.pp + stage,
                  last = config.pp * config.virtualStages - 1;
    const std::vector<int64_t> layers = layersOf(v);
    if (step.forward) {
      Mat x = v == 0 ? embed(step.microBatch) : receive(step.microBatch, v, true, v - 1);
      for (int64_t layer : layers)
        x = blockForward(x, step.microBatch, layer);
      if (v == last)
        headForward(x, step.microBatch);
      else
        send(x, step.microBatch, v + 1, true);
    } else {
      Mat dy = v == last ? headBackward(step.microBatch)
                         : receive(step.microBatch, v, false, v + 1);
      for (auto layer = layers.rbegin(); layer != layers.rend(); ++layer)
        dy = blockBackward(dy, step.microBatch, *layer);
      if (v == 0)
        embedBackward(dy, step.microBatch);
      else
        send(dy, step.microBatch, v - 1, false);
    }
  }

  // ---------------------------------------------- data-parallel sync, optimizer --

  void update(float *weights, const float *gradients, Unit &unit, int64_t count) {
    const float rate = float(options.learningRate);
    if (!config.adam) {
      for (int64_t i = 0; i < count; ++i)
        weights[i] -= rate * gradients[i];
      return;
    }
    constexpr float beta1 = 0.9f, beta2 = 0.999f, epsilon = 1e-8f;
    const float correction1 = 1.0f - std::pow(beta1, float(steps)),
                correction2 = 1.0f - std::pow(beta2, float(steps));
    for (int64_t i = 0; i < count; ++i) {
      float &m = unit.momentum[size_t(i)], &v = unit.variance[size_t(i)];
      m = beta1 * m + (1 - beta1) * gradients[i];
      v = beta2 * v + (1 - beta2) * gradients[i] * gradients[i];
      weights[i] -= rate * (m / correction1) / (std::sqrt(v / correction2) + epsilon);
    }
  }

  /// Each unit's gradients over this stage's data-parallel group: all-reduced (ZeRO 0), or
  /// reduce-scattered to the shard whose optimizer step this rank takes, then the weights
  /// all-gathered (ZeRO 1, 2; ZeRO-3 keeps only its shard).
  void synchronise() {
    for (size_t u = 0; u < units.size(); ++u) {
      Unit &unit = units[u];
      const std::string what = "data-parallel sync of " + unit.slices.front().name;
      MPI_Request request = MPI_REQUEST_NULL;
      if (!sharded()) {
        if (config.dp > 1 && !mutated(Mutation::DataParallelSkips)) {
          detail::checkMpi(MPI_Iallreduce(MPI_IN_PLACE, unit.gradients.data(), int(unit.padded),
                                          MPI_FLOAT, MPI_SUM, dpComm, &request),
                           "MPI_Iallreduce");
          wait(request, what);
        }
        update(unit.weights.data(), unit.gradients.data(), unit, unit.padded);
        continue;
      }
      const int64_t held = heldElements(unit), first = heldFirst(unit);
      unit.gradientShard.assign(size_t(held), 0.0f);
      detail::checkMpi(MPI_Ireduce_scatter_block(unit.gradients.data(), unit.gradientShard.data(),
                                                 int(held), MPI_FLOAT, MPI_SUM, dpComm, &request),
                       "MPI_Ireduce_scatter_block");
      wait(request, what);
      if (config.zero == 3) {
        update(unit.shard.data(), unit.gradientShard.data(), unit, held);
        continue;
      }
      update(unit.weights.data() + first, unit.gradientShard.data(), unit, held);
      detail::checkMpi(MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, unit.weights.data(),
                                      int(held), MPI_FLOAT, dpComm, &request),
                       "MPI_Iallgather");
      wait(request, "ZeRO weight all-gather of " + unit.slices.front().name);
    }
  }

  StepResult step() {
    MPI_Request barrier;
    detail::checkMpi(MPI_Ibarrier(world, &barrier), "MPI_Ibarrier");
    wait(barrier, "the barrier before step " + std::to_string(steps));
    if (options.programStarts)
      options.programStarts();
    const auto start = std::chrono::steady_clock::now();
    ++steps;
    loss = 0;
    messagesChecked = 0;
    for (Unit &unit : units)
      unit.gradients.assign(size_t(unit.padded), 0.0f);
    for (const Step &s : config.stages[size_t(stage)].program)
      runStep(s);
    for (auto &[buffer, request] : sends)
      wait(request, "a pipeline send");
    sends.clear();
    synchronise();
    StepResult result;
    result.elapsedUs =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
            .count();
    MPI_Request request;
    detail::checkMpi(MPI_Iallreduce(&loss, &result.loss, 1, MPI_DOUBLE, MPI_SUM, world, &request),
                     "MPI_Iallreduce");
    wait(request, "the loss");
    result.messagesChecked = messagesChecked;
    return result;
  }

  void visit(bool gradients,
             const std::function<void(const std::string &, int64_t, float)> &visitor) const {
    for (const Unit &unit : units) {
      const bool shard = gradients ? sharded() : (config.zero == 3 && config.dp > 1);
      const int64_t first = shard ? heldFirst(unit) : 0,
                    end = shard ? first + heldElements(unit) : unit.padded;
      const float *values = gradients ? (shard ? unit.gradientShard.data() : unit.gradients.data())
                                      : (shard ? unit.shard.data() : unit.weights.data());
      for (const Slice &slice : unit.slices)
        for (int64_t i = std::max(first, slice.offset);
             i < std::min(end, slice.offset + slice.rows * slice.cols); ++i) {
          const int64_t r = (i - slice.offset) / slice.cols, c = (i - slice.offset) % slice.cols;
          visitor(slice.name, (slice.rowOffset + r) * slice.globalCols + slice.colOffset + c,
                  values[i - first]);
        }
    }
  }
};

Executor::Executor(const Config &config, const Options &options, const void *comm)
    : impl(std::make_unique<Impl>(config, options, comm)) {}
Executor::~Executor() = default;
StepResult Executor::step() { return impl->step(); }
void Executor::forEachGradient(
    const std::function<void(const std::string &, int64_t, float)> &visit) const {
  impl->visit(true, visit);
}
void Executor::forEachWeight(
    const std::function<void(const std::string &, int64_t, float)> &visit) const {
  impl->visit(false, visit);
}

} // namespace zenrt::hybrid

//===- MoeCheck.h - what the MoE layer's numerics checks share ---*- C++ -*-===//
//
// zenrt-moe-check and zenopt-run run libzenrt's pipelined MoE layer (zenrt/Moe.h) forward and
// backward and check it against a reference: each expert's forward and backward in double
// on the rows it gets, with no chunks, no communication and no code shared with the runtime.
//
//===----------------------------------------------------------------------===//
#ifndef ZEN_TOOLS_MOECHECK_H
#define ZEN_TOOLS_MOECHECK_H

#include "DeterministicValues.h"
#include "zenrt/Moe.h"

#ifdef ZENRT_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace zen::cli {

/// Every expert's weights, in zenrt::moe::Layer's layout, drawn from a seed: every rank draws
/// them all, holds its share and checks against all. A bias the layer does not have is empty.
struct MoeWeights {
  MoeWeights(const zenrt::moe::Layer &shape, uint64_t seed, bool withFc1Bias = true,
             bool withFc2Bias = true) {
    DeterministicValues values(seed);
    const size_t e = size_t(shape.experts), h = size_t(shape.hidden), f = size_t(shape.ffn);
    fc1 = values.take(e * f * h);
    if (withFc1Bias)
      fc1Bias = values.take(e * f);
    fc2 = values.take(e * h * f);
    if (withFc2Bias)
      fc2Bias = values.take(e * h);
  }
  /// Points `layer` at the weights from expert `first` on (a rank's experts).
  void lend(zenrt::moe::Layer &layer, int64_t first) const {
    const int64_t h = layer.hidden, f = layer.ffn;
    layer.fc1 = &fc1[size_t(first * f * h)];
    layer.fc1Bias = fc1Bias.empty() ? nullptr : &fc1Bias[size_t(first * f)];
    layer.fc2 = &fc2[size_t(first * h * f)];
    layer.fc2Bias = fc2Bias.empty() ? nullptr : &fc2Bias[size_t(first * h)];
  }
  std::vector<float> fc1, fc1Bias, fc2, fc2Bias;
};

/// Weight gradients of local experts summed in double (a bias `w` lacks: empty).
struct GradientSums {
  GradientSums(const zenrt::moe::Layer &shape, int64_t local, const MoeWeights &w)
      : fc1(size_t(local * shape.ffn * shape.hidden)),
        fc1Bias(w.fc1Bias.empty() ? 0 : size_t(local * shape.ffn)),
        fc2(size_t(local * shape.hidden * shape.ffn)),
        fc2Bias(w.fc2Bias.empty() ? 0 : size_t(local * shape.hidden)) {}
  std::vector<double> fc1, fc1Bias, fc2, fc2Bias;
};

/// Where referenceExpert writes (null: not wanted): the rows' outputs and input gradients, the
/// weight gradients of local expert `local`, and the slack of each input and fc1 gradient
/// element: what the ReLU units at their kink could move it by.
struct ExpertOutputs {
  float *y = nullptr, *dx = nullptr, *dxSlack = nullptr;
  GradientSums *sums = nullptr, *sumsSlack = nullptr;
  int64_t local = 0;
};

/// Expert e on `rows` rows x with output gradient dy, in double with plain loops (Eigen here
/// would instantiate the runtime's kernels with another index type, which the linker may
/// merge). A unit whose pre-activation is within fp32's rounding of a dot product of its
/// size from 0 may fall on either side of the ReLU in the runtime: its gradient counts as
/// slack, not as an error.
inline void referenceExpert(const zenrt::moe::Layer &shape, const MoeWeights &w, int64_t e,
                            const float *x, const float *dy, int64_t rows,
                            const ExpertOutputs &to) {
  const size_t h = size_t(shape.hidden), f = size_t(shape.ffn), l = size_t(to.local);
  const float *fc1 = &w.fc1[size_t(e) * f * h], *fc2 = &w.fc2[size_t(e) * h * f];
  const float *b1 = w.fc1Bias.empty() ? nullptr : &w.fc1Bias[size_t(e) * f];
  const float *b2 = w.fc2Bias.empty() ? nullptr : &w.fc2Bias[size_t(e) * h];
  const double rounding = double(h + 2) * 0x1p-23;
  std::vector<double> z(f), unitGradient(f), kink(f), out(h), slack(h);
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = x + size_t(r) * h, *dyr = dy + size_t(r) * h;
    for (size_t u = 0; u < f; ++u) {
      double sum = b1 ? b1[u] : 0.0, magnitude = std::abs(sum), gradient = 0;
      for (size_t k = 0; k < h; ++k) {
        sum += double(fc1[u * h + k]) * xr[k];
        magnitude += std::abs(double(fc1[u * h + k]) * xr[k]);
        gradient += double(dyr[k]) * fc2[k * f + u];
      }
      z[u] = sum;
      unitGradient[u] = sum > 0 ? gradient : 0.0;
      kink[u] = std::abs(sum) <= rounding * magnitude ? std::abs(gradient) : 0.0;
    }
    if (to.y)
      for (size_t o = 0; o < h; ++o) {
        double sum = b2 ? b2[o] : 0.0;
        for (size_t u = 0; u < f; ++u)
          sum += double(fc2[o * f + u]) * std::max(z[u], 0.0);
        to.y[size_t(r) * h + o] = float(sum);
      }
    if (to.dx) {
      std::fill(out.begin(), out.end(), 0.0);
      std::fill(slack.begin(), slack.end(), 0.0);
      for (size_t u = 0; u < f; ++u)
        for (size_t k = 0; k < h; ++k) {
          out[k] += unitGradient[u] * fc1[u * h + k];
          slack[k] += kink[u] * std::abs(fc1[u * h + k]);
        }
      for (size_t k = 0; k < h; ++k) {
        to.dx[size_t(r) * h + k] = float(out[k]);
        to.dxSlack[size_t(r) * h + k] = float(slack[k]);
      }
    }
    if (to.sums) {
      double *g1 = &to.sums->fc1[l * f * h], *g2 = &to.sums->fc2[l * h * f];
      double *s1 = &to.sumsSlack->fc1[l * f * h];
      for (size_t o = 0; o < h; ++o) {
        if (b2)
          to.sums->fc2Bias[l * h + o] += dyr[o];
        for (size_t u = 0; u < f; ++u)
          g2[o * f + u] += double(dyr[o]) * std::max(z[u], 0.0);
      }
      for (size_t u = 0; u < f; ++u) {
        if (b1) {
          to.sums->fc1Bias[l * f + u] += unitGradient[u];
          to.sumsSlack->fc1Bias[l * f + u] += kink[u];
        }
        for (size_t k = 0; k < h; ++k) {
          g1[u * h + k] += unitGradient[u] * xr[k];
          s1[u * h + k] += kink[u] * std::abs(xr[k]);
        }
      }
    }
  }
}

/// Rows of `width` values as they arrive after travelling in `tokens`: fp16 and bf16 rounded
/// to nearest even, int8 as q x scale with scale = the row's max |x| / 127 and q = x / scale
/// rounded to nearest even (zenrt::moe::TokenFormat; written here apart from the runtime).
inline void travel(zenrt::moe::TokenFormat tokens, std::vector<float> &rows, int64_t width) {
  using zenrt::moe::TokenFormat;
  for (size_t first = 0; first < rows.size(); first += size_t(width)) {
    float *row = &rows[first];
    float largest = 0;
    for (int64_t i = 0; i < width; ++i)
      largest = std::max(largest, std::abs(row[i]));
    const float scale = largest / 127.0f;
    for (int64_t i = 0; i < width; ++i) {
      float &v = row[i];
      if (tokens == TokenFormat::Fp16) {
        v = float(static_cast<_Float16>(v));
      } else if (tokens == TokenFormat::Bf16) {
        uint32_t bits;
        std::memcpy(&bits, &v, sizeof bits);
        bits = (bits + 0x7fffu + ((bits >> 16) & 1u)) & 0xffff0000u;
        std::memcpy(&v, &bits, sizeof bits);
      } else if (tokens == TokenFormat::Int8) {
        v = scale > 0 ? std::clamp(std::nearbyint(v / scale), -127.0f, 127.0f) * scale : 0.0f;
      }
    }
  }
}

/// One rank's view of a layer run: its combined output and input gradient, and its experts'
/// gradients.
struct MoeResult {
  std::vector<float> combined, dispatchedGradient;
  zenrt::moe::Gradients gradients;
};

/// The reference's values, and how far each may be off for ReLU units at their kink (empty:
/// nowhere).
struct MoeReference {
  MoeResult values, slack;
};

/// The reference of `member`'s run in a group whose ranks fed `dispatched[s]` and
/// `combinedGradient[s]` ([experts][capacity][hidden] each): its rows through every expert,
/// and its experts' gradients over the rows of every rank of the group; every row that
/// travels between ranks (both ways, forward and backward) as it arrives in `tokens`.
inline MoeReference referenceRun(const zenrt::moe::Layer &shape, const MoeWeights &w,
                                 std::vector<std::vector<float>> dispatched,
                                 std::vector<std::vector<float>> combinedGradient, int member,
                                 zenrt::moe::TokenFormat tokens) {
  for (auto *buffers : {&dispatched, &combinedGradient})
    for (std::vector<float> &rows : *buffers)
      travel(tokens, rows, shape.hidden);
  const int64_t ranks = int64_t(dispatched.size()), local = shape.experts / ranks;
  const size_t expertFloats = size_t(shape.capacity * shape.hidden);
  const std::vector<float> &x = dispatched[size_t(member)], &dy = combinedGradient[size_t(member)];
  MoeReference out;
  out.values.combined.resize(x.size());
  out.values.dispatchedGradient.resize(x.size());
  out.slack.dispatchedGradient.resize(x.size());
  for (int64_t e = 0; e < shape.experts; ++e) {
    ExpertOutputs to;
    to.y = &out.values.combined[size_t(e) * expertFloats];
    to.dx = &out.values.dispatchedGradient[size_t(e) * expertFloats];
    to.dxSlack = &out.slack.dispatchedGradient[size_t(e) * expertFloats];
    referenceExpert(shape, w, e, &x[size_t(e) * expertFloats], &dy[size_t(e) * expertFloats],
                    shape.capacity, to);
  }
  GradientSums sums(shape, local, w), sumsSlack(shape, local, w);
  const int64_t first = member * local;
  for (int64_t l = 0; l < local; ++l)
    for (int64_t s = 0; s < ranks; ++s) {
      ExpertOutputs to;
      to.sums = &sums;
      to.sumsSlack = &sumsSlack;
      to.local = l;
      referenceExpert(shape, w, first + l, &dispatched[size_t(s)][size_t(first + l) * expertFloats],
                      &combinedGradient[size_t(s)][size_t(first + l) * expertFloats],
                      shape.capacity, to);
    }
  auto toFloat = [](const std::vector<double> &values) {
    return std::vector<float>(values.begin(), values.end());
  };
  out.values.gradients = {toFloat(sums.fc1), toFloat(sums.fc1Bias), toFloat(sums.fc2),
                          toFloat(sums.fc2Bias)};
  out.slack.gradients.fc1 = toFloat(sumsSlack.fc1);
  out.slack.gradients.fc1Bias = toFloat(sumsSlack.fc1Bias);
  travel(tokens, out.values.combined, shape.hidden);
  travel(tokens, out.values.dispatchedGradient, shape.hidden);
  return out;
}

/// The largest |got - expected| beyond its slack (none where `slack` is empty) over the
/// largest |expected| (infinite for other sizes).
inline double relativeError(const std::vector<float> &got, const std::vector<float> &expected,
                            const std::vector<float> &slack) {
  if (got.size() != expected.size())
    return INFINITY;
  double most = 1e-30, error = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    most = std::max(most, double(std::abs(expected[i])));
    const double allowed = slack.empty() ? 0.0 : double(slack[i]);
    error = std::max(error, std::abs(double(got[i]) - double(expected[i])) - allowed);
  }
  return error / most;
}

/// The largest relativeError against the reference that a run whose rows travel in `tokens`
/// may show: sums of a few thousand terms in another order (fp32), which can round a value
/// that travels back to the neighbouring value of the format (2 ulps of fp16 or bf16, 2
/// int8 steps of the row's largest).
inline double referenceTolerance(zenrt::moe::TokenFormat tokens) {
  switch (tokens) {
  case zenrt::moe::TokenFormat::Fp16:
    return 2e-3;
  case zenrt::moe::TokenFormat::Bf16:
  case zenrt::moe::TokenFormat::Int8:
    return 1.6e-2;
  case zenrt::moe::TokenFormat::None:
    break;
  }
  return 1e-4;
}

/// The spelling of a TokenFormat in the plan (`token_compression`).
inline const char *tokenFormatName(zenrt::moe::TokenFormat tokens) {
  switch (tokens) {
  case zenrt::moe::TokenFormat::Fp16:
    return "fp16";
  case zenrt::moe::TokenFormat::Bf16:
    return "bf16";
  case zenrt::moe::TokenFormat::Int8:
    return "int8";
  case zenrt::moe::TokenFormat::None:
    break;
  }
  return "none";
}

/// The largest relativeError over the six tensors of a run.
inline double maxRelativeError(const MoeResult &got, const MoeReference &reference) {
  const MoeResult &expected = reference.values, &slack = reference.slack;
  return std::max(
      {relativeError(got.combined, expected.combined, slack.combined),
       relativeError(got.dispatchedGradient, expected.dispatchedGradient, slack.dispatchedGradient),
       relativeError(got.gradients.fc1, expected.gradients.fc1, slack.gradients.fc1),
       relativeError(got.gradients.fc1Bias, expected.gradients.fc1Bias, slack.gradients.fc1Bias),
       relativeError(got.gradients.fc2, expected.gradients.fc2, slack.gradients.fc2),
       relativeError(got.gradients.fc2Bias, expected.gradients.fc2Bias, slack.gradients.fc2Bias)});
}

/// The first of the six tensors in which two runs differ in any bit ("" when none does).
inline std::string firstDifference(const MoeResult &a, const MoeResult &b) {
  auto same = [](const std::vector<float> &p, const std::vector<float> &q) {
    return p.size() == q.size() && std::memcmp(p.data(), q.data(), p.size() * sizeof(float)) == 0;
  };
  const std::pair<const char *, bool> tensors[] = {
      {"the output", same(a.combined, b.combined)},
      {"the input gradient", same(a.dispatchedGradient, b.dispatchedGradient)},
      {"the fc1 gradient", same(a.gradients.fc1, b.gradients.fc1)},
      {"the fc1 bias gradient", same(a.gradients.fc1Bias, b.gradients.fc1Bias)},
      {"the fc2 gradient", same(a.gradients.fc2, b.gradients.fc2)},
      {"the fc2 bias gradient", same(a.gradients.fc2Bias, b.gradients.fc2Bias)}};
  for (const auto &[name, equal] : tensors)
    if (!equal)
      return name;
  return "";
}

/// Floats in a communicator's memory: host vectors, or copies in CUDA device memory (Device).
class LayerBuffer {
public:
  /// A copy of from[count] (null: zeros), on CUDA device `device` for Device memory.
  LayerBuffer(zenrt::moe::Memory memory, int device, const float *from, size_t count)
      : memory(memory), count(count) {
    if (memory == zenrt::moe::Memory::Host) {
      host.assign(from, from + (from ? count : 0));
      host.resize(count);
      return;
    }
#ifdef ZENRT_HAVE_CUDA
    float *data = nullptr;
    check(cudaSetDevice(device), "cudaSetDevice");
    check(cudaMalloc(reinterpret_cast<void **>(&data), count * sizeof(float) + 1), "cudaMalloc");
    onDevice.reset(data, [](float *pointer) { cudaFree(pointer); });
    if (from)
      check(cudaMemcpy(data, from, count * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
    else
      check(cudaMemset(data, 0, count * sizeof(float)), "cudaMemset");
#else
    (void)device;
    throw std::runtime_error("device memory needs a build with CUDA");
#endif
  }
  float *data() { return memory == zenrt::moe::Memory::Host ? host.data() : onDevice.get(); }
  std::vector<float> toHost() const {
    if (memory == zenrt::moe::Memory::Host)
      return host;
    std::vector<float> out(count);
#ifdef ZENRT_HAVE_CUDA
    check(cudaMemcpy(out.data(), onDevice.get(), count * sizeof(float), cudaMemcpyDeviceToHost),
          "cudaMemcpy");
#endif
    return out;
  }

private:
#ifdef ZENRT_HAVE_CUDA
  static void check(cudaError_t code, const char *what) {
    if (code != cudaSuccess)
      throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(code));
  }
#endif
  zenrt::moe::Memory memory;
  size_t count;
  std::vector<float> host;
  std::shared_ptr<float> onDevice;
};

/// A layer whose weights (those `layer` points at, the rank's experts) and whose
/// [experts][capacity][hidden] input, output and their gradients are in `ranks`' memory.
struct StagedLayer {
  StagedLayer(const zenrt::moe::Layer &layer, const zenrt::moe::Communicator &ranks,
              const std::vector<float> &dispatched, const std::vector<float> &combinedGradient)
      : memory(ranks.memory()), layer(layer) {
    const size_t local = size_t(layer.experts / std::max(ranks.size(), 1)),
                 h = size_t(layer.hidden), f = size_t(layer.ffn);
    auto stage = [&](const float *&weights, size_t count) {
      if (!weights)
        return;
      weights_.emplace_back(memory, ranks.device(), weights, count);
      weights = weights_.back().data();
    };
    weights_.reserve(4);
    stage(this->layer.fc1, local * f * h);
    stage(this->layer.fc1Bias, local * f);
    stage(this->layer.fc2, local * h * f);
    stage(this->layer.fc2Bias, local * h);
    buffers.emplace_back(memory, ranks.device(), dispatched.data(), dispatched.size());
    buffers.emplace_back(memory, ranks.device(), combinedGradient.data(),
                         combinedGradient.size());
    // Outputs start as NaN: a row the layer does not write fails every check.
    const std::vector<float> unwritten(dispatched.size(), NAN);
    buffers.emplace_back(memory, ranks.device(), unwritten.data(), unwritten.size());
    buffers.emplace_back(memory, ranks.device(), unwritten.data(), unwritten.size());
  }
  const float *dispatched() { return buffers[0].data(); }
  const float *combinedGradient() { return buffers[1].data(); }
  float *combined() { return buffers[2].data(); }
  float *dispatchedGradient() { return buffers[3].data(); }
  std::vector<float> combinedOnHost() const { return buffers[2].toHost(); }
  std::vector<float> dispatchedGradientOnHost() const { return buffers[3].toHost(); }

  zenrt::moe::Memory memory;
  zenrt::moe::Layer layer; // pointing at the staged weights

private:
  std::vector<LayerBuffer> weights_, buffers;
};

/// Runs the layer through libzenrt in `ranks`' memory: forward in `forwardChunks`, then
/// backward in `backwardChunks` (the schedule otherwise as given), each phase after
/// `synchronise()`; stores each phase's microseconds where asked.
template <typename Synchronise>
MoeResult runLayer(const zenrt::moe::Layer &layer, zenrt::moe::Schedule schedule,
                   int64_t forwardChunks, int64_t backwardChunks,
                   const std::vector<float> &dispatched, const std::vector<float> &combinedGradient,
                   zenrt::moe::Communicator &ranks, Synchronise synchronise,
                   double *forwardUs = nullptr, double *backwardUs = nullptr) {
  using Clock = std::chrono::steady_clock;
  StagedLayer staged(layer, ranks, dispatched, combinedGradient);
  MoeResult out;
  zenrt::moe::Activations kept;
  synchronise();
  auto start = Clock::now();
  schedule.chunks = forwardChunks;
  zenrt::moe::forward(staged.layer, schedule, staged.dispatched(), staged.combined(), ranks,
                      &kept);
  if (forwardUs)
    *forwardUs = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
  synchronise();
  start = Clock::now();
  schedule.chunks = backwardChunks;
  out.gradients = zenrt::moe::backward(staged.layer, schedule, kept, staged.combinedGradient(),
                                       staged.dispatchedGradient(), ranks);
  if (backwardUs)
    *backwardUs = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
  out.combined = staged.combinedOnHost();
  out.dispatchedGradient = staged.dispatchedGradientOnHost();
  return out;
}

} // namespace zen::cli

#endif // ZEN_TOOLS_MOECHECK_H

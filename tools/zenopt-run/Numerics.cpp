//===- Numerics.cpp - zenopt-run's gradients and numerics check ------------===//
#include "Numerics.h"

#include <Eigen/Dense>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <numeric>
#include <random>

namespace zen::run {
namespace {

using zenrt::CompressionMethod;

const double kFloatUnit = std::ldexp(1.0, -24);  // relative rounding error of a float
/// Singular values below this fraction of the largest count as zero (float data: ~1e-7).
constexpr double kRankTolerance = 1e-4;
/// A rank-r average reconstructed by PowerSGD: error within this fraction of the largest
/// |input| on any rank (the factors are sums over ranks, so the inputs' rounding errors
/// remain where error feedback's residuals make the inputs larger than their average).
constexpr double kLowRankTolerance = 1e-4;

/// k of top-k and random-k as docs/plan-format.md defines it: max(1, round(ratio n)), <= n.
size_t keptCount(size_t n, double ratio) {
  double kept = std::round(ratio * double(n));
  return std::min(n, std::max<size_t>(1, size_t(kept)));
}

/// PowerSGD's view of a bucket (docs/plan-format.md): a column-major matrix of
/// rows = ceil(sqrt(n)) rows, zero past n, factors of rank min(planned rank, rows, cols).
struct PowerSgdShape {
  size_t rows, cols, rank;
  explicit PowerSgdShape(const zenrt::Bucket &bucket) {
    size_t n = size_t(bucket.elements);
    rows = size_t(std::ceil(std::sqrt(double(n))));
    cols = (n + rows - 1) / rows;
    rank = std::min({size_t(bucket.compression.rank), rows, cols});
  }
};

/// A matrix of exactly `shape.rank`, column-major, cut to n values: U V^T with U shared by
/// every rank (seeded without the rank) and V this rank's, so the ranks' sum keeps the rank.
/// A partly filled last column is zero, so the cut leaves the rank unchanged. The same
/// every iteration: PowerSGD's warm-started Q then stays in the sum's row space, where the
/// rounding errors that error feedback carries over are not amplified (a new row space
/// each iteration would meet the old Q at a wide angle and magnify them tenfold a step).
std::vector<float> lowRankBucket(const zenrt::Bucket &bucket, uint64_t seed, int rank) {
  PowerSgdShape shape(bucket);
  size_t n = size_t(bucket.elements);
  uint64_t base = seed * 1000003ull + uint64_t(bucket.id) * 104729ull;
  std::mt19937_64 shared(base), own(base ^ (uint64_t(rank + 1) * 0x9e3779b97f4a7c15ull));
  std::normal_distribution<double> normal(0.0, 1.0);
  Eigen::MatrixXd u(shape.rows, shape.rank), v(shape.cols, shape.rank);
  for (Eigen::Index i = 0; i < u.size(); ++i)
    u.data()[i] = normal(shared);
  for (Eigen::Index i = 0; i < v.size(); ++i)
    v.data()[i] = normal(own);
  if (n < shape.rows * shape.cols)
    v.row(Eigen::Index(shape.cols - 1)).setZero();
  Eigen::MatrixXd matrix = u * v.transpose() / std::sqrt(double(shape.rank));
  return std::vector<float>(matrix.data(), matrix.data() + n);
}

/// A number for a message, with the digits that matter at any scale.
std::string show(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.7g", value);
  return text;
}

/// Compares `actual` with `expected` elementwise; the first element beyond tolerance(i)
/// fails the check, its message naming `what`. Returns the largest error and its bound.
std::pair<double, double> compare(BucketCheck &check, const std::string &what,
                                  const std::vector<float> &actual,
                                  const std::vector<double> &expected,
                                  const std::function<double(size_t)> &tolerance) {
  double largest = 0, boundThere = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    double error = std::fabs(actual[i] - expected[i]), bound = tolerance(i);
    if (error > largest) {
      largest = error;
      boundThere = bound;
    }
    if (!(error <= bound) && check.ok) {
      check.ok = false;
      check.detail = what + ": element " + std::to_string(i) + " is " + show(actual[i]) +
                     ", expected " + show(expected[i]) + " (error " + show(error) +
                     " > bound " + show(bound) + ")";
    }
  }
  return {largest, boundThere};
}

void compareResult(BucketCheck &check, const std::vector<float> &result,
                   const std::vector<double> &reference,
                   const std::function<double(size_t)> &tolerance) {
  std::tie(check.maxError, check.bound) = compare(check, "result", result, reference, tolerance);
}

void fail(BucketCheck &check, const std::string &detail) {
  if (check.ok) {
    check.ok = false;
    check.detail = detail;
  }
}

size_t nonzeroCount(const std::vector<float> &values) {
  return size_t(std::count_if(values.begin(), values.end(), [](float v) { return v != 0; }));
}

/// x rounded to nearest even with `digits` significant bits, exponents down to
/// `minExponent` (subnormal below), infinite past `largest`: what fp16 (11, -14, 65504)
/// and bf16 (8, -126, 0x1.fep127) hold of a value.
double roundToFormat(double x, int digits, int minExponent, double largest) {
  if (x == 0 || !std::isfinite(x))
    return x;
  int exponent = 0;
  std::frexp(x, &exponent);  // |x| in [2^(exponent-1), 2^exponent)
  double quantum = std::ldexp(1.0, std::max(exponent - 1, minExponent) - (digits - 1));
  double rounded = std::nearbyint(x / quantum) * quantum;
  return std::fabs(rounded) > largest ? std::copysign(INFINITY, x) : rounded;
}

/// What top-k sends: x at the k largest |x| (ties in index order), 0 elsewhere.
std::vector<double> topKSent(const std::vector<float> &x, double ratio) {
  size_t n = x.size(), k = keptCount(n, ratio);
  std::vector<uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  std::nth_element(order.begin(), order.begin() + std::ptrdiff_t(k - 1), order.end(),
                   [&](uint32_t a, uint32_t b) {
                     float ma = std::fabs(x[a]), mb = std::fabs(x[b]);
                     return ma != mb ? ma > mb : a < b;
                   });
  std::vector<double> sent(n, 0.0);
  for (size_t j = 0; j < k; ++j)
    sent[order[j]] = x[order[j]];
  return sent;
}

/// What random-k sends on the indices it chose (the nonzero entries of `sent`): k distinct
/// indices, the same on every rank, and x there. Collective.
std::vector<double> randomKSent(BucketCheck &check, const BucketData &data, double ratio,
                                int ranks, BoundedCollectives &mpi, const std::string &what) {
  const std::vector<float> &x = data.input, &sent = data.sent;
  size_t n = x.size(), k = keptCount(n, ratio);
  // A chosen index where x is 0 sends 0: it cannot be told from an index not chosen.
  size_t chosen = nonzeroCount(sent), zeros = n - nonzeroCount(x);
  if (chosen > k || chosen + zeros < k)
    fail(check, "sends " + std::to_string(chosen) + " distinct indices, k = " +
                    std::to_string(k));
  std::vector<double> flags(2 * n);  // chosen here, then x is 0 here
  for (size_t i = 0; i < n; ++i) {
    flags[i] = sent[i] != 0;
    flags[n + i] = x[i] == 0;
  }
  std::vector<double> counts = mpi.allreduceSum(flags, what);
  for (size_t i = 0; i < n; ++i)
    if (counts[n + i] == 0 && counts[i] != 0 && counts[i] != ranks) {
      fail(check, "index " + std::to_string(i) + " chosen on " +
                      std::to_string(int(counts[i])) + " of " + std::to_string(ranks) +
                      " ranks (the indices must be shared)");
      break;
    }
  std::vector<double> expected(n, 0.0);
  for (size_t i = 0; i < n; ++i)
    if (sent[i] != 0)
      expected[i] = x[i];
  return expected;
}

/// What sign compression sends: mean|x| * sign(x), where x = 0 counts as positive.
std::vector<double> signSent(const std::vector<float> &x, double &scale) {
  double sum = 0;
  for (float v : x)
    sum += std::fabs(double(v));
  scale = x.empty() ? 0 : sum / double(x.size());
  std::vector<double> sent(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    sent[i] = x[i] >= 0 ? scale : -scale;
  return sent;
}

/// The singular values, largest first, of the bucket's first `columns` columns times a
/// random matrix of `probes` columns: with probability one they vanish where the columns'
/// own do, so they give the rank without the matrix's SVD.
Eigen::VectorXd sketchedSingularValues(const std::vector<float> &values, size_t rows,
                                       size_t columns, size_t probes) {
  std::mt19937_64 generator(0x5ca1ab1eull);
  std::normal_distribution<double> normal(0.0, 1.0);
  Eigen::MatrixXd omega(columns, probes);
  for (Eigen::Index i = 0; i < omega.size(); ++i)
    omega.data()[i] = normal(generator);
  Eigen::MatrixXd sketch = Eigen::MatrixXd::Zero(rows, probes);
  for (size_t c = 0; c < columns; ++c)
    for (size_t r = 0; r < rows; ++r)
      sketch.row(Eigen::Index(r)) += double(values[c * rows + r]) * omega.row(Eigen::Index(c));
  return Eigen::JacobiSVD<Eigen::MatrixXd>(sketch).singularValues();
}

/// PowerSGD's result: not all zero, an orthogonal projection of the average, of the planned
/// rank, and (LowRank) equal to the average, which has that rank.
void checkPowerSgd(BucketCheck &check, const zenrt::Bucket &bucket, const BucketData &data,
                   const std::vector<double> &average, double largestInput, GradientMode mode) {
  PowerSgdShape shape(bucket);
  const std::vector<float> &result = data.result;
  size_t n = result.size();
  double resultNorm = 0, errorNorm = 0, averageNorm = 0;
  for (size_t i = 0; i < n; ++i) {
    resultNorm += double(result[i]) * result[i];
    errorNorm += (result[i] - average[i]) * (result[i] - average[i]);
    averageNorm += average[i] * average[i];
  }
  // On a rank-r average the result must be the average; on others the distance to it is the
  // compression error, reported but not bounded.
  double tolerance = mode == GradientMode::LowRank ? kLowRankTolerance * largestInput : INFINITY;
  compareResult(check, result, average, [tolerance](size_t) { return tolerance; });
  if (resultNorm == 0 && averageNorm > 0)
    fail(check, "the result is all zero");
  // P P^T avg: |r|^2 + |r - avg|^2 = |avg|^2 for the padded matrix; dropping the padding's
  // approximation only lowers the left side.
  if (!(resultNorm + errorNorm - averageNorm <= 1e-3 * averageNorm + 1e-20))
    fail(check, "not a projection: |r|^2 + |r - avg|^2 = " + show(resultNorm + errorNorm) +
                    " but |avg|^2 = " + show(averageNorm));
  // The rank of the complete columns (a partly filled last column lost its padding's values).
  size_t columns = n / shape.rows;
  size_t expectedRank = std::min(shape.rank, columns);
  size_t probes = std::min(expectedRank + 1, columns);
  Eigen::VectorXd singular = sketchedSingularValues(result, shape.rows, columns, probes);
  size_t measuredRank = 0;
  for (Eigen::Index i = 0; i < singular.size(); ++i)
    measuredRank += singular[i] > kRankTolerance * singular[0];
  if (measuredRank != expectedRank)
    fail(check, "the result has rank " + std::to_string(measuredRank) + ", planned rank " +
                    std::to_string(expectedRank) + " (" + std::to_string(shape.rows) + " x " +
                    std::to_string(columns) + " complete columns)");
}

}  // namespace

void fillGradients(const zenrt::Plan &plan, GradientMode mode, uint64_t seed, int rank,
                   int iteration, std::vector<std::vector<float>> &values) {
  std::mt19937_64 generator(seed * 1000003ull + uint64_t(rank) * 7919ull + uint64_t(iteration));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (std::vector<float> &tensor : values)
    for (float &value : tensor)
      value = normal(generator);
  if (mode == GradientMode::Normal)
    return;
  std::map<std::string, size_t> tensorIndex;
  for (size_t t = 0; t < plan.tensors.size(); ++t)
    tensorIndex[plan.tensors[t].name] = t;
  for (const zenrt::Bucket &bucket : plan.buckets) {
    CompressionMethod method = bucket.compression.method;
    if (mode == GradientMode::Tied && method == CompressionMethod::TopK) {
      for (const zenrt::BucketTensor &entry : bucket.tensors)
        for (float &value : values[tensorIndex.at(entry.name)])
          value = std::round(value * 8) / 8;
    } else if (mode == GradientMode::LowRank && method == CompressionMethod::PowerSGD) {
      std::vector<float> packed = lowRankBucket(bucket, seed, rank);
      for (const zenrt::BucketTensor &entry : bucket.tensors)
        std::copy_n(packed.begin() + entry.offset, entry.elements,
                    values[tensorIndex.at(entry.name)].begin());
    }
  }
}

/// The result:
/// - none: the MPI_Allreduce average within float rounding (W+2)*2^-24*sum|v|.
/// - fp16/bf16: within (W+2)*u*sum|v| + W*2^-24 (u = 2^-11 resp. 2^-8).
/// - int8: within 2*sum_r max|v_r|/(254 W) + float rounding (quantisation, and
///   re-quantisation of the two-phase all-reduce).
/// - topk/randomk/sign: the average of what the ranks sent.
/// - powersgd: checkPowerSgd.
/// What each rank sent, against what the method sends for its input: v itself (none),
/// v rounded to nearest even (fp16/bf16), within half a quantisation step (int8),
/// topKSent, randomKSent, signSent, the result (powersgd). With error feedback, the new
/// residual is the input minus that reference.
BucketCheck checkBucket(const zenrt::Bucket &bucket, size_t index, const BucketData &data,
                        GradientMode mode, int ranks, BoundedCollectives &mpi) {
  BucketCheck check;
  const std::string what = "the numerics check of bucket " + std::to_string(index);
  const std::vector<float> &x = data.input;
  size_t n = x.size();
  double W = ranks;
  std::vector<double> input(x.begin(), x.end()), absolute(n);
  for (size_t i = 0; i < n; ++i)
    absolute[i] = std::fabs(input[i]);
  double largestInput = *std::max_element(absolute.begin(), absolute.end());
  std::vector<double> average = mpi.allreduceSum(input, what);
  std::vector<double> absSum = mpi.allreduceSum(absolute, what);
  for (double &value : average)
    value /= W;
  auto floatRounding = [&](size_t i) { return (W + 2) * kFloatUnit * absSum[i] + 1e-30; };
  const zenrt::Compression &compression = bucket.compression;
  CompressionMethod method = compression.method;
  // What this rank should have sent (decoded), within sentTolerance.
  std::vector<double> expectedSent = input;
  std::function<double(size_t)> sentTolerance = [](size_t) { return 0.0; };

  switch (method) {
  case CompressionMethod::None:
    check.check = "exact to float rounding";
    compareResult(check, data.result, average, floatRounding);
    break;
  case CompressionMethod::FP16:
  case CompressionMethod::BF16: {
    bool half = method == CompressionMethod::FP16;
    double u = std::ldexp(1.0, half ? -11 : -8);
    check.check = std::string(zenrt::toString(method)) + " bound (W+2)*u*sum|v|";
    for (double &value : expectedSent)
      value = half ? roundToFormat(value, 11, -14, 65504.0)
                   : roundToFormat(value, 8, -126, 0x1.fep127);
    compareResult(check, data.result, average, [&](size_t i) {
      return (W + 2) * u * absSum[i] + W * kFloatUnit + 1e-30;
    });
    break;
  }
  case CompressionMethod::Int8: {
    double sumOfMax = mpi.allreduceScalar(largestInput, MPI_SUM, what);
    check.check = "int8 bound 2*sum(max|v|)/(254W)";
    // Every quantisation block's scale is at most max|v| / 127 of the bucket (the runtime
    // chooses the blocks): each value sent is within half a step of it.
    sentTolerance = [&, halfStep = largestInput / 254](size_t i) {
      return halfStep * (1 + 1e-5) + kFloatUnit * absolute[i];
    };
    compareResult(check, data.result, average, [&](size_t i) {
      return 1.01 * 2 * sumOfMax / (254 * W) + floatRounding(i);
    });
    break;
  }
  case CompressionMethod::TopK:
  case CompressionMethod::RandomK:
  case CompressionMethod::Sign: {
    if (method == CompressionMethod::TopK) {
      check.check = "k largest |v|, ties by index + average";
      expectedSent = topKSent(x, compression.ratio);
      size_t sent = nonzeroCount(data.sent), expected = keptCount(n, compression.ratio);
      size_t expectedNonzero = size_t(std::count_if(expectedSent.begin(), expectedSent.end(),
                                                    [](double v) { return v != 0; }));
      if (sent != expectedNonzero)
        fail(check, "sends " + std::to_string(sent) + " nonzero values, the k = " +
                        std::to_string(expected) + " largest |v| have " +
                        std::to_string(expectedNonzero));
    } else if (method == CompressionMethod::RandomK) {
      check.check = "k distinct shared indices + average";
      expectedSent = randomKSent(check, data, compression.ratio, ranks, mpi, what);
    } else {
      check.check = "sign(v) * mean|v| + average";
      double scale = 0;
      expectedSent = signSent(x, scale);
      // The runtime rounds the scale to float and may sum in another order.
      sentTolerance = [scale](size_t) { return 4 * kFloatUnit * scale; };
    }
    std::vector<double> sentSum(data.sent.begin(), data.sent.end()), sentAbs(n);
    for (size_t i = 0; i < n; ++i)
      sentAbs[i] = std::fabs(sentSum[i]);
    sentSum = mpi.allreduceSum(sentSum, what);
    std::vector<double> sentAbsSum = mpi.allreduceSum(sentAbs, what);
    for (double &value : sentSum)
      value /= W;
    compareResult(check, data.result, sentSum,
                  [&](size_t i) { return (W + 2) * kFloatUnit * sentAbsSum[i] + 1e-30; });
    break;
  }
  case CompressionMethod::PowerSGD:
    check.check = "rank-" + std::to_string(PowerSgdShape(bucket).rank) + " projection" +
                  (mode == GradientMode::LowRank ? ", exact on rank-r input" : "");
    checkPowerSgd(check, bucket, data, average,
                  mpi.allreduceScalar(largestInput, MPI_MAX, what), mode);
    // Every rank's contribution is the aggregated approximation (PyTorch's PowerSGD hook).
    expectedSent.assign(data.result.begin(), data.result.end());
    break;
  }
  compare(check, "sent", data.sent, expectedSent, sentTolerance);

  if (compression.errorFeedback) {
    check.check += " + residual";
    std::vector<double> expectedResidual(n);
    for (size_t i = 0; i < n; ++i)
      expectedResidual[i] = double(x[i]) - expectedSent[i];
    compare(check, "residual", data.residual, expectedResidual, [&](size_t i) {
      return sentTolerance(i) + 2 * kFloatUnit * (std::fabs(x[i]) + std::fabs(expectedSent[i]));
    });
  }
  return check;
}

}  // namespace zen::run

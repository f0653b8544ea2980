//===- SparseRun.cpp - zenopt-run's execution of a plan's sparse tensors ---===//
#include "SparseRun.h"

#include "zenrt/Runtime.h"
#include "zenrt/SparseSync.h"
#include "zenrt/WatchedWaits.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <set>

namespace zen::run {
namespace {

/// One rank's raw lookups: row indices (any order, repeated) and their rows.
struct Lookups {
  std::vector<int64_t> indices;
  std::vector<float> values;
};

Lookups draw(const zenrt::SparseTensor &tensor, uint64_t seed, int iteration, size_t which,
             int rank) {
  std::seed_seq sequence{uint64_t(seed), uint64_t(iteration), uint64_t(which), uint64_t(rank)};
  std::mt19937_64 rng(sequence);
  const int64_t count =
      std::llround(tensor.statistics.density * double(tensor.rows));
  const int64_t head = std::max<int64_t>(1, tensor.rows / 8);
  std::uniform_int_distribution<int64_t> anyRow(0, tensor.rows - 1), headRow(0, head - 1);
  std::bernoulli_distribution inHead(tensor.statistics.skew);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-10, 10);
  Lookups out;
  for (int64_t k = 0; k < count; ++k) {
    out.indices.push_back(inHead(rng) ? headRow(rng) : anyRow(rng));
    for (int64_t e = 0; e < tensor.rowElements; ++e)
      out.values.push_back(std::ldexp(unit(rng), exponent(rng)));
  }
  return out;
}

/// The reference, apart from the runtime: per touched row, each rank's dense row (its
/// lookups scatter-added from zero, in order; zero when it has none) added in rank order.
std::map<int64_t, std::vector<float>> reference(const std::vector<Lookups> &ranks,
                                                int64_t width) {
  std::vector<std::map<int64_t, std::vector<float>>> dense(ranks.size());
  std::set<int64_t> touched;
  for (size_t r = 0; r < ranks.size(); ++r)
    for (size_t k = 0; k < ranks[r].indices.size(); ++k) {
      std::vector<float> &row = dense[r][ranks[r].indices[k]];
      row.resize(size_t(width), 0.0f);
      for (int64_t e = 0; e < width; ++e)
        row[size_t(e)] += ranks[r].values[k * size_t(width) + size_t(e)];
      touched.insert(ranks[r].indices[k]);
    }
  std::map<int64_t, std::vector<float>> sum;
  const std::vector<float> zeros(size_t(width), 0.0f);
  for (int64_t index : touched) {
    std::vector<float> total;
    for (size_t r = 0; r < ranks.size(); ++r) {
      auto it = dense[r].find(index);
      const std::vector<float> &row = it == dense[r].end() ? zeros : it->second;
      if (r == 0)
        total = row;
      else
        for (int64_t e = 0; e < width; ++e)
          total[size_t(e)] += row[size_t(e)];
    }
    sum[index] = std::move(total);
  }
  return sum;
}

}  // namespace

std::vector<SparseResult> runSparseTensors(const zenrt::Plan &plan, int rank, int ranks,
                                           int iterations, uint64_t seed,
                                           double timeoutSeconds,
                                           const std::function<void(const std::string &)> &fault) {
  std::vector<SparseResult> results;
  if (plan.sparseTensors.empty())
    return results;
  zenrt::WatchedWaits waits(nullptr, timeoutSeconds);
  fault("sparse");
  for (size_t t = 0; t < plan.sparseTensors.size(); ++t) {
    const zenrt::SparseTensor &tensor = plan.sparseTensors[t];
    SparseResult result;
    result.name = tensor.name;
    result.scheme = zen::vocab::toString(tensor.scheme);
    zenrt::sparse::Options options;
    options.scheme = tensor.scheme;
    if (tensor.blockRows > 0)
      options.blockRows = tensor.blockRows;
    if (tensor.denseThreshold > 0)
      options.denseThreshold = tensor.denseThreshold;
    options.timeoutSeconds = timeoutSeconds;
    options.waits = &waits;
    if (const char *perNode = std::getenv("ZENRT_RANKS_PER_NODE")) {
      char *end = nullptr;
      const long value = std::strtol(perNode, &end, 10);
      if (end == perNode || *end != '\0' || value < 1 || value > ranks)
        throw zenrt::Error(ZENRT_ERR_INVALID_ARGUMENT,
                           std::string("ZENRT_RANKS_PER_NODE='") + perNode +
                               "' is not a number of ranks in [1, " + std::to_string(ranks) +
                               "]");
      options.ranksPerNode = int(value);
    }
    const zenrt::sparse::Table table{tensor.rows, tensor.rowElements};
    const size_t width = size_t(tensor.rowElements);
    for (int iteration = 0; iteration < iterations; ++iteration) {
      std::vector<Lookups> every;
      for (int r = 0; r < ranks; ++r)
        every.push_back(draw(tensor, seed, iteration, t, r));
      const Lookups &own = every[size_t(rank)];
      const zenrt::sparse::RowSparse local = zenrt::sparse::coalesce(
          table, int64_t(own.indices.size()), own.indices.data(), own.values.data());
      const auto start = std::chrono::steady_clock::now();
      const zenrt::sparse::RowSparse reduced = zenrt::sparse::allReduce(table, local, options);
      result.callUs.push_back(
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
              .count());
      const std::map<int64_t, std::vector<float>> expected = reference(every, tensor.rowElements);
      if (iteration == 0)
        result.touchedRows = int64_t(expected.size());
      auto differ = [&](const std::string &what) {
        if (result.detail.empty())
          result.detail = "iteration " + std::to_string(iteration) + ": " + what;
        result.ok = false;
      };
      if (reduced.indices.size() != expected.size())
        differ(std::to_string(reduced.indices.size()) + " rows, " +
               std::to_string(expected.size()) + " touched by the ranks");
      for (const auto &[index, row] : expected) {
        const auto at = std::lower_bound(reduced.indices.begin(), reduced.indices.end(), index);
        if (at == reduced.indices.end() || *at != index) {
          differ("row " + std::to_string(index) + " is missing from the result");
          result.differingElements += int64_t(width);
          continue;
        }
        const size_t k = size_t(at - reduced.indices.begin());
        for (size_t e = 0; e < width; ++e)
          if (std::memcmp(&reduced.values[k * width + e], &row[e], sizeof(float)) != 0) {
            ++result.differingElements;
            char text[160];
            std::snprintf(text, sizeof(text), "row %lld element %zu is %.9g, expected %.9g",
                          static_cast<long long>(index), e, reduced.values[k * width + e],
                          row[e]);
            differ(text);
          }
      }
    }
    results.push_back(std::move(result));
  }
  return results;
}

}  // namespace zen::run

//===- Sparse.cpp - statistics and prices of row-sparse gradients ---------===//
//
// The statistics model and the price of every SparseScheme (costmodel/README.md "Sparse
// gradients"). Zen's analysis (arXiv 2309.13254, section 3) gives the physics the prices
// follow, with M the table's bytes, d its density, b the bandwidth and gamma_k the growth
// after merging k ranks:
//   balanced parallelism      ~ (n-1)/n (gamma_n + 1) 2Md/b   (push the pairs, pull the shards)
//   hierarchical centralising ~ sum_i gamma_{2^(i-1)} 2Md/b     (recursive doubling, SparCML)
// where Zen's 2 is the (index, value) pair of an element; here a pair is an index and a row.
// Every exchange is priced by the cost model's collectives (their latencies included), every
// kernel as the HBM bytes it moves plus a launch, as the compression kernels are.
//
//===----------------------------------------------------------------------===//
#include "zen/CostModel/Sparse.h"
#include "zen/Support/FileIO.h"
#include "zen/Support/StrictJson.h" // escapeJsonPointerToken

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>

namespace zen::cost {
namespace {

constexpr double kKernelLaunchUs = 4; // launch + tail of a small CUDA kernel (Compression.cpp)
constexpr double kSectorBytes = 32;   // a scattered row touches at least one DRAM sector
constexpr double kInfinity = std::numeric_limits<double>::infinity();
/// Rows summed exactly by zipfMass; beyond, the midpoint integral (relative error < 1e-8).
constexpr int64_t kExactRows = 4096;
/// Consecutive rows (blocks) share one probability while it changes by less than this.
constexpr double kGroupTolerance = 1e-3;

/// Sum of i^-s for i in [first, last], 1 <= first <= last.
class ZipfMass {
public:
  explicit ZipfMass(double exponent) : s(exponent), prefix(kExactRows + 1, 0.0) {
    for (int64_t i = 1; i <= kExactRows; ++i)
      prefix[size_t(i)] = prefix[size_t(i - 1)] + std::pow(double(i), -s);
  }
  double operator()(int64_t first, int64_t last) const {
    double mass = 0;
    if (first <= kExactRows)
      mass += prefix[size_t(std::min(last, kExactRows))] - prefix[size_t(first - 1)];
    if (last > kExactRows)
      mass += integral(double(std::max(first, kExactRows + 1)) - 0.5, double(last) + 0.5);
    return mass;
  }

private:
  double integral(double a, double b) const {
    return s == 1.0 ? std::log(b / a) : (std::pow(b, 1 - s) - std::pow(a, 1 - s)) / (1 - s);
  }
  double s;
  std::vector<double> prefix;
};

/// Units (rows or blocks) of equal probability: `count` units of `probability` each.
struct UnitGroup {
  double count;
  double probability;
};

/// Units of `unitRows` rows over [0, rows), grouped while their probability changes by less
/// than kGroupTolerance, never across `boundary` (a unit index).
std::vector<UnitGroup> groupUnits(const ZipfMass &mass, int64_t rows, int64_t unitRows,
                                  int64_t boundary) {
  const double total = mass(1, rows);
  const int64_t units = (rows + unitRows - 1) / unitRows;
  std::vector<UnitGroup> groups;
  for (int64_t unit = 0; unit < units;) {
    int64_t width = std::max<int64_t>(1, int64_t(double(unit) * kGroupTolerance));
    int64_t end = std::min(units, unit + width);
    if (unit < boundary && end > boundary)
      end = boundary;
    const int64_t firstRow = unit * unitRows + 1, lastRow = std::min(rows, end * unitRows);
    groups.push_back({double(end - unit), mass(firstRow, lastRow) / total / double(end - unit)});
    unit = end;
  }
  return groups;
}

/// Expected units hit at least once by `draws` independent draws, over groups [from, to).
double expectedHit(const std::vector<UnitGroup> &groups, double draws, size_t from = 0,
                   size_t to = std::numeric_limits<size_t>::max()) {
  double hit = 0;
  for (size_t g = from; g < std::min(to, groups.size()); ++g)
    hit += groups[g].count * -std::expm1(draws * std::log1p(-std::min(groups[g].probability, 1.0)));
  return hit;
}

/// gamma[k] = hit(2^k x draws) / hit(draws), 2^k up to worldSize.
std::vector<double> growth(const std::vector<UnitGroup> &groups, double draws, double hitOne,
                           int64_t worldSize) {
  std::vector<double> gamma{1.0};
  for (int64_t ranks = 2; ranks <= worldSize; ranks *= 2)
    gamma.push_back(hitOne > 0 ? expectedHit(groups, draws * double(ranks)) / hitOne : 1.0);
  return gamma;
}

double interpolate(const std::vector<double> &values, double ranks) {
  if (values.empty())
    return 1.0;
  double position = std::log2(std::max(ranks, 1.0));
  size_t below = size_t(position);
  if (below + 1 >= values.size())
    return values.back();
  double fraction = position - double(below);
  return values[below] + fraction * (values[below + 1] - values[below]);
}

/// A GPU kernel moving `bytes` of HBM traffic, in `launches` launches.
double kernelUs(const CostModel &model, double bytes, int launches = 1) {
  return model.computeUs(0, bytes, DType::F32) + launches * kKernelLaunchUs;
}

} // namespace

const char *toString(SparsitySource source) {
  return source == SparsitySource::Measured ? "measured" : "model";
}

double SparsityStatistics::gammaAt(double ranks) const { return interpolate(gamma, ranks); }

double SparsityStatistics::mergedDensity(double ranks) const {
  return std::min(1.0, density * gammaAt(ranks));
}

double SparsityStatistics::rangeShare(int64_t parts) const {
  const double clamped = std::clamp(skew, 1.0 / kSkewPartitions, 1.0);
  // skew = (1/8)^a: a = 1 spreads evenly, a -> 0 puts everything in the first range.
  const double a = std::log(clamped) / std::log(1.0 / kSkewPartitions);
  return std::clamp(std::pow(1.0 / double(std::max<int64_t>(parts, 1)), a),
                    1.0 / double(std::max<int64_t>(parts, 1)), 1.0);
}

int64_t omniReduceBlockRows(const SparseTable &table) {
  return std::max<int64_t>(1, kOmniReduceBlockElements / std::max<int64_t>(table.rowElements, 1));
}

double indexBytes(const SparseTable &table) {
  return table.rows <= (int64_t(1) << 31) ? 4.0 : 8.0;
}

SparsityStatistics zipfStatistics(const SparseTable &table, int64_t lookupsPerStep,
                                  int64_t worldSize, double exponent) {
  SparsityStatistics stats;
  stats.source = SparsitySource::Model;
  const int64_t rows = std::max<int64_t>(table.rows, 1);
  const double draws = double(std::max<int64_t>(lookupsPerStep, 0));
  const ZipfMass mass(exponent);
  const int64_t firstRange = (rows + kSkewPartitions - 1) / kSkewPartitions;
  std::vector<UnitGroup> rowGroups = groupUnits(mass, rows, 1, firstRange);
  const size_t firstRangeGroups = size_t(
      std::find_if(rowGroups.begin(), rowGroups.end(),
                   [&, covered = 0.0](const UnitGroup &group) mutable {
                     covered += group.count;
                     return covered > double(firstRange);
                   }) -
      rowGroups.begin());
  const double hit = expectedHit(rowGroups, draws);
  stats.density = hit / double(rows);
  stats.gamma = growth(rowGroups, draws, hit, worldSize);
  // Rows are numbered by popularity, so the first range is the fullest.
  stats.skew = hit > 0 ? expectedHit(rowGroups, draws, 0, firstRangeGroups) / hit
                       : 1.0 / kSkewPartitions;
  // Hashing spreads the popular rows over the partitions: in expectation evenly.
  stats.hashSkew = 1.0 / kSkewPartitions;
  const int64_t blockRows = omniReduceBlockRows(table);
  const int64_t blocks = (rows + blockRows - 1) / blockRows;
  std::vector<UnitGroup> blockGroups = groupUnits(mass, rows, blockRows, blocks);
  const double blockHit = expectedHit(blockGroups, draws);
  stats.blockDensity = blockHit / double(blocks);
  stats.blockGamma = growth(blockGroups, draws, blockHit, worldSize);
  return stats;
}

SparsityStatistics sharedRowsStatistics(const SparseTable &table, int64_t lookupsPerStep,
                                        int64_t worldSize) {
  SparsityStatistics stats;
  stats.source = SparsitySource::Model;
  const int64_t rows = std::max<int64_t>(table.rows, 1);
  const int64_t touched = std::clamp<int64_t>(lookupsPerStep, 1, rows);
  stats.density = double(touched) / double(rows);
  // Every rank touches the same rows: merging ranks adds none.
  int64_t powers = 1;
  while ((int64_t(1) << powers) <= std::max<int64_t>(worldSize, 1))
    ++powers;
  stats.gamma.assign(size_t(powers), 1.0);
  // Rows 0 .. touched-1: the first index ranges fill up, row r hashes to r mod 8.
  const int64_t range = (rows + kSkewPartitions - 1) / kSkewPartitions;
  stats.skew = std::max(1.0 / kSkewPartitions, double(std::min(range, touched)) / double(touched));
  stats.hashSkew = double((touched + kSkewPartitions - 1) / kSkewPartitions) / double(touched);
  const int64_t blockRows = omniReduceBlockRows(table);
  const int64_t blocks = (rows + blockRows - 1) / blockRows;
  stats.blockDensity = double((touched + blockRows - 1) / blockRows) / double(blocks);
  stats.blockGamma.assign(size_t(powers), 1.0);
  return stats;
}

namespace {

/// The distinct rows of steps [first, first + count) of `batch` samples each.
std::vector<int64_t> distinctRows(const std::vector<std::vector<int64_t>> &samples, int64_t batch,
                                  int64_t first, int64_t count) {
  std::vector<int64_t> rows;
  for (int64_t s = first * batch; s < (first + count) * batch; ++s)
    rows.insert(rows.end(), samples[size_t(s)].begin(), samples[size_t(s)].end());
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  return rows;
}

int64_t stepsOf(const std::vector<std::vector<int64_t>> &samples, int64_t batch, int64_t ranks) {
  if (batch < 1 || ranks < 1)
    throw std::invalid_argument("batch and ranks must be at least 1");
  const int64_t steps = int64_t(samples.size()) / batch;
  if (steps < ranks)
    throw std::invalid_argument("the stream holds " + std::to_string(samples.size()) +
                                " samples, " + std::to_string(steps) + " steps of " +
                                std::to_string(batch) + ": merging " + std::to_string(ranks) +
                                " ranks needs " + std::to_string(ranks * batch) + " samples");
  return steps;
}

} // namespace

double measuredMergedDensity(const std::vector<std::vector<int64_t>> &samples, int64_t rows,
                             int64_t batch, int64_t ranks) {
  const int64_t groups = stepsOf(samples, batch, ranks) / ranks;
  double distinct = 0;
  for (int64_t g = 0; g < groups; ++g)
    distinct += double(distinctRows(samples, batch, g * ranks, ranks).size());
  return distinct / double(groups) / double(rows);
}

SparsityStatistics measureStatistics(const std::vector<std::vector<int64_t>> &samples,
                                     int64_t rows, int64_t batch, int64_t maxRanks) {
  const int64_t steps = stepsOf(samples, batch, maxRanks);
  SparsityStatistics stats;
  stats.source = SparsitySource::Measured;
  const int64_t rangeRows = (rows + kSkewPartitions - 1) / kSkewPartitions;
  double skew = 0, hashSkew = 0;
  for (int64_t step = 0; step < steps; ++step) {
    std::vector<int64_t> touched = distinctRows(samples, batch, step, 1);
    int64_t range[kSkewPartitions] = {}, hash[kSkewPartitions] = {};
    for (int64_t row : touched) {
      ++range[row / rangeRows];
      ++hash[row % kSkewPartitions];
    }
    const double count = std::max<double>(1, double(touched.size()));
    skew += double(*std::max_element(range, range + kSkewPartitions)) / count;
    hashSkew += double(*std::max_element(hash, hash + kSkewPartitions)) / count;
  }
  stats.skew = skew / double(steps);
  stats.hashSkew = hashSkew / double(steps);
  stats.density = measuredMergedDensity(samples, rows, batch, 1);
  for (int64_t ranks = 1; ranks <= maxRanks; ranks *= 2)
    stats.gamma.push_back(stats.density > 0
                              ? measuredMergedDensity(samples, rows, batch, ranks) / stats.density
                              : 1.0);
  return stats;
}

namespace {
std::string numberText(double value) {
  std::ostringstream text;
  text << value;
  return text.str();
}
} // namespace

SparsityStatistics parseSparsityStatistics(const std::string &text, const std::string &source) {
  auto fail = [&](const std::string &path, const std::string &what) -> void {
    throw Error(ErrorKind::BadInput, source + ": " + path + ": " + what);
  };
  // Duplicate keys are refused where they occur (nlohmann keeps the last silently). The file
  // is read bounded (1 MiB by zenopt), so the callback parse's cost does not matter.
  struct Level {
    bool object;
    std::set<std::string> keys;
    std::string key; // the object's current key
  };
  std::vector<Level> levels;
  auto strict = [&](int, nlohmann::json::parse_event_t event, nlohmann::json &parsed) {
    using Event = nlohmann::json::parse_event_t;
    if (event == Event::object_start || event == Event::array_start) {
      levels.push_back({event == Event::object_start, {}, ""});
    } else if (event == Event::object_end || event == Event::array_end) {
      levels.pop_back();
    } else if (event == Event::key) {
      Level &level = levels.back();
      level.key = parsed.get<std::string>();
      if (!level.keys.insert(level.key).second) {
        std::string path;
        for (const Level &outer : levels)
          path += "/" + (outer.object ? escapeJsonPointerToken(outer.key) : std::string("-"));
        fail(path, "duplicate key");
      }
    }
    return true;
  };
  nlohmann::json document;
  try {
    document = nlohmann::json::parse(text, strict);
  } catch (const nlohmann::json::exception &error) {
    throw Error(ErrorKind::BadInput, source + ": not valid JSON: " + error.what());
  }
  if (!document.is_object() || !document.contains("statistics") ||
      !document["statistics"].is_object())
    fail("/statistics", "missing: the file needs a statistics object (zenopt sparsity writes one)");
  const nlohmann::json &object = document["statistics"];
  for (const auto &item : object.items())
    if (item.key() != "density" && item.key() != "gamma" && item.key() != "skew" &&
        item.key() != "hash_skew" && item.key() != "source")
      fail("/statistics/" + escapeJsonPointerToken(item.key()), "unknown field");
  auto number = [&](const char *key, double low, double high) {
    const std::string path = std::string("/statistics/") + key;
    if (!object.contains(key) || !object[key].is_number())
      fail(path, "must be a number");
    const double value = object[key].get<double>();
    if (!(value >= low && value <= high))
      fail(path, numberText(value) + " is outside [" + numberText(low) + ", " +
                     numberText(high) + "]");
    return value;
  };
  SparsityStatistics stats;
  stats.source = SparsitySource::Measured;
  stats.density = number("density", 0, 1);
  if (stats.density == 0)
    fail("/statistics/density", "must be positive");
  const double even = 1.0 / double(kSkewPartitions);
  stats.skew = number("skew", even, 1);
  stats.hashSkew = object.contains("hash_skew") ? number("hash_skew", even, 1) : even;
  if (object.contains("source") && object["source"] != "measured" && object["source"] != "model")
    fail("/statistics/source", "must be \"measured\" or \"model\"");
  if (object.contains("source") && object["source"] == "model")
    stats.source = SparsitySource::Model;
  if (!object.contains("gamma") || !object["gamma"].is_array() || object["gamma"].empty())
    fail("/statistics/gamma", "must be a non-empty array");
  const nlohmann::json &gamma = object["gamma"];
  if (gamma.size() > 21)
    fail("/statistics/gamma", "holds more than 21 values (2^20 ranks)");
  for (size_t k = 0; k < gamma.size(); ++k) {
    const std::string path = "/statistics/gamma/" + std::to_string(k);
    if (!gamma[k].is_number())
      fail(path, "must be a number");
    const double value = gamma[k].get<double>();
    const double low = k == 0 ? 1.0 : stats.gamma.back();
    const double high = k == 0 ? 1.0 : std::min(double(size_t(1) << k), 1.0 / stats.density);
    if (!(value >= low && value <= high * (1 + 1e-9)))
      fail(path, numberText(value) + " is outside [" + numberText(low) + ", " +
                     numberText(high) +
                     "] (gamma starts at 1 and grows at most with the ranks, to a density of 1)");
    stats.gamma.push_back(value);
  }
  return stats;
}

SparseSyncCost sparseSyncCost(const CostModel &model, SparseScheme scheme,
                              const SparseTable &table, const SparsityStatistics &stats,
                              Group group) {
  SparseSyncCost cost;
  cost.scheme = scheme;
  const int64_t ranks = std::max<int64_t>(group.ranks, 1);
  const int64_t nodes = std::clamp<int64_t>(group.nodes, 1, ranks);
  const int64_t ranksPerNode = (ranks + nodes - 1) / nodes;
  const double n = double(ranks);
  const double rows = double(table.rows);
  const double rowBytes = 4.0 * double(table.rowElements);
  const double pairBytes = rowBytes + indexBytes(table);
  const double scattered = std::max(rowBytes, kSectorBytes);
  const double denseBytes = table.denseBytes();
  const double mine = stats.density * rows;                       // rows one rank touched
  auto merged = [&](double k) { return stats.mergedDensity(k) * rows; };
  // Every sparse scheme compacts the rank's rows into (index, row) pairs first (sort and
  // unique the indices, gather the rows) and ends by scattering the merged rows into the
  // dense result.
  const double compactUs = kernelUs(model, mine * (scattered + pairBytes), 2);
  const double scatterUs = kernelUs(model, 2 * merged(n) * scattered);

  switch (scheme) {
  case SparseScheme::Dense: {
    cost.communicationUs = model.collective(CollectiveKind::AllReduce, denseBytes, group).timeUs;
    cost.wireBytes = 2 * (n - 1) / n * denseBytes;
    break;
  }
  case SparseScheme::AgSparse: {
    const double gathered = n * mine * pairBytes;
    cost.communicationUs = model.collective(CollectiveKind::AllGather, gathered, group).timeUs;
    // Every rank adds every rank's pairs into its result.
    cost.kernelUs = compactUs + kernelUs(model, n * mine * (pairBytes + 2 * scattered));
    cost.wireBytes = (n - 1) / n * gathered;
    break;
  }
  case SparseScheme::Balanced: {
    // Hash partitioning: the fullest owner receives hashSkew x 8 times its even share.
    const double imbalance = std::max(1.0, stats.hashSkew * kSkewPartitions);
    const double push = mine * pairBytes * imbalance;
    const double bitmap = rows / 8;
    const double pull = merged(n) * rowBytes * imbalance + bitmap;
    cost.communicationUs = model.collective(CollectiveKind::AllToAll, push, group).timeUs +
                           model.collective(CollectiveKind::AllGather, pull, group).timeUs;
    cost.kernelUs = compactUs + kernelUs(model, 2 * mine * pairBytes)     // hash into n buffers
                    + kernelUs(model, push + 2 * merged(n) / n * scattered) // owner sums its share
                    + scatterUs + kernelUs(model, bitmap);
    cost.wireBytes = (n - 1) / n * (push + pull);
    break;
  }
  case SparseScheme::OmniReduce: {
    // Blocks of omniReduceBlockRows rows, range-partitioned over the ranks without
    // balancing: the owner of the fullest range receives and sends n x its share.
    cost.blockRows = omniReduceBlockRows(table);
    const double blocks = std::ceil(rows / double(cost.blockRows));
    const double blockBytes = double(cost.blockRows) * rowBytes + indexBytes(table);
    const double imbalance = std::max(1.0, n * stats.rangeShare(ranks));
    const double mineBlocks = stats.blockDensity * blocks;
    const double mergedBlocks =
        std::min(1.0, stats.blockDensity * interpolate(stats.blockGamma, n)) * blocks;
    const double push = mineBlocks * blockBytes * imbalance;
    const double pull = mergedBlocks * blockBytes * imbalance;
    cost.communicationUs = model.collective(CollectiveKind::AllToAll, push, group).timeUs +
                           model.collective(CollectiveKind::AllGather, pull, group).timeUs;
    cost.kernelUs = kernelUs(model, 2 * mineBlocks * blockBytes, 2) // find and pack blocks
                    + kernelUs(model, 2 * push)                      // owner sums its blocks
                    + kernelUs(model, 2 * mergedBlocks * blockBytes);
    cost.wireBytes = (n - 1) / n * (push + pull);
    break;
  }
  case SparseScheme::SparCml: {
    // Recursive doubling: round k exchanges the rows 2^(k-1) ranks merged with a partner (inside
    // the node while 2^(k-1) < ranks per node), until the pairs would outweigh the dense table:
    // the rest is the dense all-reduce.
    cost.denseThreshold = rowBytes / pairBytes;
    cost.kernelUs = compactUs;
    double holders = 1;
    for (; holders < n; holders *= 2) {
      const double payload = merged(holders) * pairBytes;
      if (payload >= denseBytes)
        break;
      const bool inside = holders < double(ranksPerNode);
      const Group pair = inside ? Group{2, 1} : Group{2 * ranksPerNode, 2};
      cost.communicationUs += model.collective(CollectiveKind::SendRecv, payload, pair).timeUs;
      cost.kernelUs += kernelUs(model, 2 * payload + merged(2 * holders) * pairBytes);
      cost.wireBytes += payload;
    }
    if (holders < n) {
      cost.communicationUs +=
          model.collective(CollectiveKind::AllReduce, denseBytes, group).timeUs;
      cost.wireBytes += 2 * (n - 1) / n * denseBytes;
    } else {
      cost.kernelUs += scatterUs;
    }
    break;
  }
  case SparseScheme::Hierarchical: {
    // Dense reduce-scatter in the node, a balanced exchange of each rank's range shard with
    // its peers in the other nodes (one rank per node: the collective model gives each such
    // group its own NIC, as NCCL's rails do), dense all-gather in the node.
    if (nodes < 2 || ranksPerNode < 2 || ranks != nodes * ranksPerNode) {
      cost.timeUs = kInfinity;
      cost.communicationUs = kInfinity;
      return cost;
    }
    const Group node{ranksPerNode, 1}, peers{nodes, nodes};
    const double share = stats.rangeShare(ranksPerNode);
    const double inNode = merged(double(ranksPerNode)) * share; // rows of the fullest shard
    const double across = merged(n) * share;
    const double push = inNode * pairBytes;
    const double pull = across * rowBytes + rows / double(ranksPerNode) / 8;
    cost.communicationUs =
        model.collective(CollectiveKind::ReduceScatter, denseBytes, node).timeUs +
        model.collective(CollectiveKind::AllToAll, push, peers).timeUs +
        model.collective(CollectiveKind::AllGather, pull, peers).timeUs +
        model.collective(CollectiveKind::AllGather, denseBytes, node).timeUs;
    cost.kernelUs = kernelUs(model, denseBytes / double(ranksPerNode) + push, 2) // compact shard
                    + kernelUs(model, 2 * push)                                 // sum the shard
                    + kernelUs(model, 2 * across * scattered);
    cost.wireBytes = 2 * (double(ranksPerNode) - 1) / double(ranksPerNode) * denseBytes +
                     (double(nodes) - 1) / double(nodes) * (push + pull);
    break;
  }
  }
  cost.timeUs = cost.communicationUs + cost.kernelUs;
  return cost;
}

std::vector<SparseSyncCost> rankSparseSchemes(const CostModel &model, const SparseTable &table,
                                              const SparsityStatistics &stats, Group group) {
  std::vector<SparseSyncCost> costs;
  for (const auto &traits : vocab::kSparseSchemes)
    costs.push_back(sparseSyncCost(model, traits.value, table, stats, group));
  std::stable_sort(costs.begin(), costs.end(), [](const SparseSyncCost &a, const SparseSyncCost &b) {
    return a.timeUs < b.timeUs;
  });
  return costs;
}

std::map<std::string, SparsityStatistics> readSparsityStatistics(const std::vector<std::string> &entries) {
  std::map<std::string, SparsityStatistics> byParam;
  for (const std::string &entry : entries) {
    const size_t equals = entry.find('=');
    const std::string param = equals == std::string::npos ? "" : entry.substr(0, equals);
    const std::string path = equals == std::string::npos ? entry : entry.substr(equals + 1);
    SparsityStatistics stats = parseSparsityStatistics(
        io::readBounded(path, kMaxStatisticsFileBytes, "statistics file"), path);
    if (!byParam.emplace(param, std::move(stats)).second)
      throw Error(ErrorKind::BadInput,
                  "two statistics files for " + (param.empty() ? std::string("every table") : "'" + param + "'"));
  }
  return byParam;
}

std::optional<SparsityStatistics> statisticsFor(const std::map<std::string, SparsityStatistics> &byParam,
                                                const std::string &table) {
  auto found = byParam.find(table);
  if (found == byParam.end())
    found = byParam.find("");
  if (found == byParam.end())
    return std::nullopt;
  return found->second;
}

} // namespace zen::cost

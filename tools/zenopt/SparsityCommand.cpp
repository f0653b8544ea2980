//===- SparsityCommand.cpp - `zenopt sparsity`: measure a sparse gradient's statistics -===//
//
//   zenopt sparsity --indices FILE --rows N --batch B --ranks n,... [-o stats.json]
//
// Reads a sample of a real index stream (one sample's row indices per line, whitespace
// separated; blank lines skipped), takes B consecutive samples as one rank's step and k
// consecutive steps as k ranks merged, and writes the statistics the planner prices sparse
// schemes from (cost::measureStatistics; costmodel/README.md "Sparse gradients"): density,
// gamma at the powers of two up to the largest --ranks (the plan's layout), the merged
// density at each --ranks, range and hash skew over 8 partitions. Source "measured".
//
//===----------------------------------------------------------------------===//
#include "CliChecks.h"
#include "Command.h"

#include "zen/CostModel/Sparse.h"
#include "zen/Support/FileIO.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <charconv>
#include <iostream>
#include <vector>

namespace zen::cli {
namespace {

/// An index stream larger than this is a sample too large to be one: refused by size (65).
constexpr uint64_t kMaxIndexFileBytes = uint64_t(1) << 30;

struct SparsityOptions {
  std::string indices;
  int64_t rows = 0;
  int64_t batch = 0;
  std::vector<int64_t> ranks;
  std::string output;
};

/// One vector of row indices per non-blank line; a token that is not an integer in
/// [0, rows) is bad input naming the file, line and token.
std::vector<std::vector<int64_t>> readSamples(const std::string &path, int64_t rows) {
  std::string text;
  try {
    text = io::readBounded(path, kMaxIndexFileBytes, "index file");
  } catch (const io::FileError &error) {
    throw CommandError(exitCodeOf(error.kind), error.what());
  }
  std::vector<std::vector<int64_t>> samples;
  size_t line = 0;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos)
      end = text.size();
    ++line;
    std::vector<int64_t> sample;
    const char *cursor = text.data() + start, *stop = text.data() + end;
    while (cursor < stop) {
      if (*cursor == ' ' || *cursor == '\t' || *cursor == '\r') {
        ++cursor;
        continue;
      }
      const char *tokenEnd = cursor;
      while (tokenEnd < stop && *tokenEnd != ' ' && *tokenEnd != '\t' && *tokenEnd != '\r')
        ++tokenEnd;
      int64_t row = -1;
      auto [next, error] = std::from_chars(cursor, tokenEnd, row);
      if (error != std::errc() || next != tokenEnd || row < 0 || row >= rows)
        throw CommandError(ExitDataError,
                           fmt::format("{}:{}: '{}' is not a row index in [0, {}) (--rows)", path,
                                       line, std::string(cursor, tokenEnd), rows));
      sample.push_back(row);
      cursor = tokenEnd;
    }
    if (!sample.empty())
      samples.push_back(std::move(sample));
    start = end + 1;
  }
  return samples;
}

int runSparsity(const SparsityOptions &options) {
  io::requireDistinctOutputs({{"-o", options.output}, {"standard output", "/dev/stdout"}});
  const std::vector<std::vector<int64_t>> samples = readSamples(options.indices, options.rows);
  int64_t maxRanks = *std::max_element(options.ranks.begin(), options.ranks.end());
  cost::SparsityStatistics stats;
  nlohmann::ordered_json mergedAt = nlohmann::ordered_json::object();
  try {
    // gamma in the plan's layout: powers of two up to the largest --ranks.
    int64_t powerOfTwo = 1;
    while (powerOfTwo * 2 <= maxRanks)
      powerOfTwo *= 2;
    stats = cost::measureStatistics(samples, options.rows, options.batch, powerOfTwo);
    for (int64_t ranks : options.ranks)
      mergedAt[std::to_string(ranks)] =
          cost::measuredMergedDensity(samples, options.rows, options.batch, ranks);
  } catch (const std::invalid_argument &error) {
    throw CommandError(ExitDataError, options.indices + ": " + error.what() + " (--batch " +
                                          std::to_string(options.batch) + ", --ranks)");
  }
  nlohmann::ordered_json out;
  out["rows"] = options.rows;
  out["batch"] = options.batch;
  out["samples"] = samples.size();
  out["statistics"] = {{"density", stats.density},
                       {"gamma", stats.gamma},
                       {"skew", stats.skew},
                       {"hash_skew", stats.hashSkew},
                       {"source", cost::toString(stats.source)}};
  out["merged_density"] = std::move(mergedAt);
  const std::string text = out.dump(2) + "\n";
  if (options.output.empty()) {
    std::cout << text;
    return ExitSuccess;
  }
  try {
    io::OutputFiles outputs;
    outputs.add(options.output, text);
    outputs.commit();
  } catch (const io::FileError &error) {
    throw CommandError(exitCodeOf(error.kind), error.what());
  }
  return ExitSuccess;
}

CommandRegistration registration(
    "sparsity", "Measure a row-sparse gradient's statistics from a sample of its index stream",
    [](CLI::App &app) -> std::function<int()> {
      auto options = std::make_shared<SparsityOptions>();
      app.add_option("--indices", options->indices,
                     "Index stream: one sample's row indices per line, whitespace separated")
          ->required();
      app.add_option("--rows", options->rows, "Rows of the table")
          ->required()
          ->check(wholeNumber(1));
      app.add_option("--batch", options->batch, "Samples per rank per step")
          ->required()
          ->check(wholeNumber(1));
      app.add_option("--ranks", options->ranks, "Rank counts to merge, comma-separated")
          ->required()
          ->delimiter(',')
          ->check(wholeNumber(1, int64_t(1) << 20));
      app.add_option("-o,--output", options->output, "Statistics file (default: standard output)");
      return [options] { return runSparsity(*options); };
    });

} // namespace
} // namespace zen::cli

//===- SparseRun.h - zenopt-run's execution of a plan's sparse tensors -*- C++ -*-===//
//
// Each sparse tensor of the plan (docs/plan-format.md "sparse_tensors") is summed over the
// ranks with its scheme once per iteration (zenrt::sparse::allReduce), on a row-sparse
// gradient drawn from its statistics: density x rows lookups per rank (duplicates summed), a
// `skew` share of them in the first eighth of the table, values over many magnitudes and both
// signs. Every rank draws every rank's gradient from the same seeds and checks the result bit
// for bit against its own reference: the ranks' dense gradients added in rank order (written
// apart from the runtime's code), and the rows any rank touched.
//
//===----------------------------------------------------------------------===//
#ifndef ZEN_TOOLS_ZENOPT_RUN_SPARSERUN_H
#define ZEN_TOOLS_ZENOPT_RUN_SPARSERUN_H

#include "zenrt/Plan.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace zen::run {

struct SparseResult {
  std::string name;
  std::string scheme;
  bool ok = true;
  /// The first difference from the reference ("" when none): iteration, row, element.
  std::string detail;
  int64_t differingElements = 0;  // over every iteration, this rank
  int64_t touchedRows = 0;        // rows any rank touched, in the first iteration
  std::vector<double> callUs;     // this rank's time in allReduce, per iteration
};

/// Runs every sparse tensor of `plan` for `iterations` iterations (collective over
/// MPI_COMM_WORLD; MPI_THREAD_MULTIPLE). `fault` is called with "sparse" before the first sum
/// (the test hooks). Throws zenrt::Error for a runtime failure: a timeout names the rank, the
/// phase and the ranks that stopped answering (the sums wait through one zenrt::WatchedWaits).
std::vector<SparseResult> runSparseTensors(const zenrt::Plan &plan, int rank, int ranks,
                                           int iterations, uint64_t seed, double timeoutSeconds,
                                           const std::function<void(const std::string &)> &fault);

}  // namespace zen::run

#endif  // ZEN_TOOLS_ZENOPT_RUN_SPARSERUN_H

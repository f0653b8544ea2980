//===- PlanFuzzer.cpp - fuzz target: the plan file parser ------------------===//
//
// Arbitrary bytes as a plan file. A PlanError(BadInput) is the expected answer to bad input;
// an accepted plan must round-trip: writePlan(parsePlan(text)) parses back to a plan
// that writes the same text, and its hash is stable. Anything else (another exception,
// a crash, a sanitizer report) is a bug.
//
//===----------------------------------------------------------------------===//
#include "zenrt/Plan.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {
[[noreturn]] void bug(const std::string &what) {
  std::fprintf(stderr, "plan fuzz target: %s\n", what.c_str());
  std::abort();
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string text(reinterpret_cast<const char *>(data), size);
  zenrt::Plan plan;
  try {
    plan = zenrt::parsePlan(text, "fuzz.json");
  } catch (const zenrt::PlanError &error) {
    if (error.kind != zen::ErrorKind::BadInput)
      bug("parsePlan failed with error kind " + std::to_string(static_cast<int>(error.kind)) + ": " +
          error.what());
    return 0;
  }
  std::string written;
  try {
    written = zenrt::writePlan(plan);
    zenrt::Plan again = zenrt::parsePlan(written, "rewritten.json");
    if (zenrt::writePlan(again) != written)
      bug("the plan does not round-trip");
    if (zenrt::planHash(again) != zenrt::planHash(plan))
      bug("the plan hash is not stable");
  } catch (const zenrt::PlanError &error) {
    bug(std::string("an accepted plan does not round-trip: ") + error.what());
  }
  return 0;
}

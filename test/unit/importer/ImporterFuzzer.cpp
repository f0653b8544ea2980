//===- ImporterFuzzer.cpp - libFuzzer entry point for the ONNX importer ---===//
//
// Feeds arbitrary bytes to the importer as a binary model and as ONNX text syntax. An
// ImportError is the expected answer to bad input; any other exception, a crash, a
// hang, or an import whose IR fails to verify is a bug.
//
// Built with clang's -fsanitize=fuzzer as `zen-importer-fuzzer` (ZEN_ENABLE_FUZZER), and
// always as `zen-importer-fuzz-corpus`, which replays a corpus plus deterministic
// mutations of it (FuzzCorpusMain.cpp).
//
//===----------------------------------------------------------------------===//
#include "zen/Importer/ModelGraph.h"
#include "zen/Importer/ZenImporter.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {
void importOne(const std::string &bytes, const char *path) {
  zen::importer::ModelGraph graph;
  try {
    graph = zen::importer::importModelFromBytes(bytes, path);
  } catch (const zen::importer::ImportError &) {
    return;
  }
  mlir::MLIRContext context;
  if (!zen::importer::buildZenModule(context, graph)) {
    std::fprintf(stderr, "imported model %s built IR that fails to verify\n", path);
    std::abort();
  }
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string bytes(reinterpret_cast<const char *>(data), size);
  importOne(bytes, "fuzz.onnx");
  importOne(bytes, "fuzz.onnxtxt");
  return 0;
}

//===- ImporterFuzzer.cpp - fuzz target: the ONNX importer -----------------===//
//
// Feeds arbitrary bytes to the importer as a binary model and as ONNX text syntax. An
// ImportError is the expected answer to bad input; any other exception, a crash, a
// hang, negative FLOPs or bytes, or (where the IR is built) an import whose IR fails to
// verify is a bug.
//
// Built as `zen-importer-fuzz-replay` in every build (ZEN_FUZZ_BUILD_IR: the zen IR is
// built and verified too; FuzzReplayMain.cpp replays a corpus and mutations of it), and
// as the ASan + UBSan libFuzzer target of scripts/fuzz.sh (the importer alone, no MLIR).
//
//===----------------------------------------------------------------------===//
#include "zen/Importer/ModelGraph.h"
#ifdef ZEN_FUZZ_BUILD_IR
#include "zen/Importer/ZenImporter.h"
#endif

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {
[[noreturn]] void bug(const char *what, const char *path) {
  std::fprintf(stderr, "importer fuzz target: %s: %s\n", path, what);
  std::abort();
}

void importOne(const std::string &bytes, const char *path) {
  zen::importer::ModelGraph graph;
  try {
    graph = zen::importer::importModelFromBytes(bytes, path);
  } catch (const zen::importer::ImportError &) {
    return;
  }
  if (graph.forwardFlops() < 0 || graph.backwardFlops() < 0 || graph.trainableBytes() < 0)
    bug("negative FLOPs or bytes", path);
  for (const zen::importer::Node &node : graph.nodes)
    if (node.flops < 0 || node.bytes < 0)
      bug("a node with negative FLOPs or bytes", path);
#ifdef ZEN_FUZZ_BUILD_IR
  mlir::MLIRContext context;
  if (!zen::importer::buildZenModule(context, graph))
    bug("the imported IR fails to verify", path);
#endif
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string bytes(reinterpret_cast<const char *>(data), size);
  importOne(bytes, "fuzz.onnx");
  importOne(bytes, "fuzz.onnxtxt");
  return 0;
}

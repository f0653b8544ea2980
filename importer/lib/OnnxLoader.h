//===- OnnxLoader.h - parse, validate and shape-infer an ONNX model -*- C++ -*-===//
#ifndef ZEN_IMPORTER_ONNXLOADER_H
#define ZEN_IMPORTER_ONNXLOADER_H

#include "NameTable.h"
#include "zen/Importer/ModelGraph.h"

#include "onnx/onnx_pb.h"

#include <google/protobuf/arena.h>

#include <functional>
#include <memory>
#include <string>

namespace zen::importer::detail {

struct LoadedModel {
  /// Owns the model's messages: parsing and shape inference create one per node, value
  /// and dim, and an arena allocates them in blocks and frees them at once.
  std::unique_ptr<google::protobuf::Arena> arena;
  onnx::ModelProto *model = nullptr; ///< on `arena`; nodes topologically sorted, shapes inferred
  int64_t opsetVersion = 0; ///< of the default ONNX domain
  int64_t batch = 1;
  int64_t exportBatch = 1;
  BatchMode batchMode = BatchMode::Scaled;
  std::vector<std::string> warnings;
  /// Shape inference took the memoized driver (ShapeInference.h), in its only round.
  bool shapesMemoized = false;
  /// Every value of the graph by name with its type, as the memoized inference left it
  /// for the graph builder; empty when ONNX's driver ran or the graph was edited after.
  ValueTable values;
};

/// Memoized: ONNX's inference once per distinct node where the graph allows it, ONNX's
/// InferShapes elsewhere. Onnx: InferShapes always (what the memoized driver is checked
/// against).
enum class ShapeInferenceDriver { Memoized, Onnx };

/// Parses `bytes` (text syntax when `path` ends in .onnxtxt), checks the IR version,
/// opset imports, names, dims and graph structure, applies the batch and runs strict
/// shape inference. Never opens external data files. Throws ImportError (65).
LoadedModel loadOnnxModel(const std::string &bytes, const std::string &path,
                          const ImportOptions &options,
                          ShapeInferenceDriver driver = ShapeInferenceDriver::Memoized);

/// A value that a subgraph of a node (a Loop, If or Scan body, or one nested in it) reads:
/// `reader` reads it at input `input`. `initializer` is set when the value is an
/// initializer of one of those subgraphs; otherwise the value comes from the graphs around
/// the node, and the node uses it as it uses its own inputs.
struct SubgraphRead {
  const std::string &name;
  const onnx::NodeProto &reader;
  int input;
  const onnx::TensorProto *initializer;
};

/// Calls `visit` for every read of a value that `node`'s subgraphs do not compute
/// themselves, in the order of their nodes (nested subgraphs after their node's inputs).
void forEachSubgraphRead(const onnx::NodeProto &node,
                         const std::function<void(const SubgraphRead &)> &visit);

/// Element size in bytes of an ONNX data type, 0 when unknown.
int64_t onnxElementSize(int32_t onnxType);
/// Short dtype name (f32, i64, ...) of an ONNX data type.
std::string onnxDtypeName(int32_t onnxType);

} // namespace zen::importer::detail

#endif // ZEN_IMPORTER_ONNXLOADER_H

//===- ShapeInference.h - ONNX shape inference, memoized per node kind ----===//
#ifndef ZEN_IMPORTER_SHAPEINFERENCE_H
#define ZEN_IMPORTER_SHAPEINFERENCE_H

#include "NameTable.h"
#include "onnx/defs/schema.h"
#include "onnx/onnx_pb.h"

#include <string>

namespace zen::importer::detail {

/// ONNX 1.12's shape inference over `model`'s main graph as InferShapes(check_type,
/// strict, data propagation) does it, for graphs whose values all get static shapes and
/// need no data propagation, calling ONNX's inference function once per distinct node
/// (operator schema, attributes, input types and the input data it reads) instead of
/// once per node: a model's repeated layers are inferred once. The model ends as
/// UntypedValueGuard and InferShapes leave it (value_info entries for the initializers
/// and every node output, typed).
///
/// Returns false, the model as it was but for types ONNX infers on the same prefix of the
/// graph, when the graph needs more than this covers (subgraphs, local functions, sparse
/// initializers, an untyped graph input, an operator without schema or inference
/// function, a dynamic dimension, shape data propagation) or any check fails: the caller
/// then runs ONNX's own inference, which gives the same types and reports the error.
/// On true, `values` has every value the graph names, by its name in the model, with its
/// type entry (valid while the graph is not edited).
bool inferStaticShapesMemoized(onnx::ModelProto &model, ValueTable &values);

/// What every per-node ONNX function sees of a node besides its inputs: its schema and its
/// attributes. The start of the keys under which the importer checks or infers each
/// distinct node once.
std::string schemaAndAttributesKey(const onnx::OpSchema &schema, const onnx::NodeProto &node);

} // namespace zen::importer::detail

#endif // ZEN_IMPORTER_SHAPEINFERENCE_H

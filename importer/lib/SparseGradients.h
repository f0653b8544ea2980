//===- SparseGradients.h - parameters with row-sparse gradients -*- C++ -*-===//
#ifndef ZEN_IMPORTER_SPARSEGRADIENTS_H
#define ZEN_IMPORTER_SPARSEGRADIENTS_H

#include "zen/Importer/ModelGraph.h"

#include "onnx/onnx_pb.h"

namespace zen::importer::detail {

/// Fills `graph.sparseGradients` and `graph.denselyUsedTables` from the built graph (its
/// parameters, nodes and shapes) and the model's graph `proto` (node attributes, Loop bodies).
void findSparseGradients(const onnx::GraphProto &proto, ModelGraph &graph);

} // namespace zen::importer::detail

#endif // ZEN_IMPORTER_SPARSEGRADIENTS_H

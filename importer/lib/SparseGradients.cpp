//===- SparseGradients.cpp - parameters with row-sparse gradients ---------===//
//
// A trainable table whose every forward use gathers rows of it gets a gradient that is
// non-zero only in the rows a step looked up (issue 39; docs/design.md "Sparse gradients").
// Two export patterns gather rows:
//  - nn.Embedding: `Gather(table, indices)` on axis 0;
//  - nn.EmbeddingBag (torch's ONNX exporter): a `Loop` whose body gathers from the table,
//    one bag per iteration, with indices sliced from the graph's index input.
// Any other use (a tied output projection's MatMul or Gemm, a Transpose on the way to one)
// makes the gradient dense.
//
//===----------------------------------------------------------------------===//
#include "SparseGradients.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace zen::importer::detail {
namespace {

/// Whether `node` is a `Gather` on axis 0 of data of rank `rank`.
bool isRowGather(const onnx::NodeProto &node, int64_t rank) {
  if (node.op_type() != "Gather" || !node.domain().empty())
    return false;
  int64_t axis = 0;
  for (const onnx::AttributeProto &attr : node.attribute())
    if (attr.name() == "axis")
      axis = attr.i();
  return axis == 0 || axis == -rank;
}

/// Every node of `graph`'s subgraphs (nested ones too) by the name of each output.
void indexSubgraphProducers(const onnx::NodeProto &node,
                            std::map<std::string, const onnx::NodeProto *> &producers,
                            std::vector<const onnx::NodeProto *> &bodyNodes) {
  auto visitGraph = [&](const onnx::GraphProto &body) {
    for (const onnx::NodeProto &inner : body.node()) {
      bodyNodes.push_back(&inner);
      for (const std::string &output : inner.output())
        producers[output] = &inner;
      indexSubgraphProducers(inner, producers, bodyNodes);
    }
  };
  for (const onnx::AttributeProto &attr : node.attribute()) {
    if (attr.has_g())
      visitGraph(attr.g());
    for (const onnx::GraphProto &body : attr.graphs())
      visitGraph(body);
  }
}

/// How one parameter is used in the forward pass.
struct TableUses {
  /// Index tensors (ids in ModelGraph::tensors) of its row gathers.
  std::vector<int> indices;
  /// The first use that is not a row gather, if any.
  const onnx::NodeProto *denseUse = nullptr;
};

class SparseGradientFinder {
public:
  SparseGradientFinder(const onnx::GraphProto &proto, ModelGraph &graph)
      : proto(proto), graph(graph) {}

  void run() {
    indexConsumers();

    for (size_t p = 0; p < graph.parameters.size(); ++p) {
      const Tensor &table = graph.tensors[size_t(graph.parameters[p].tensor)];
      if (table.dims.size() < 2 || !table.rankKnown)
        continue;
      TableUses uses = usesOf(graph.parameters[p].tensor);
      if (uses.indices.empty())
        continue;
      if (uses.denseUse) {
        graph.denselyUsedTables.push_back(
            {static_cast<int>(p), uses.denseUse->name(), uses.denseUse->op_type()});
        continue;
      }
      graph.sparseGradients.push_back(describe(static_cast<int>(p), table, uses.indices));
    }
  }

private:
  /// Each tensor's (node, input) uses, flat: those of tensor t are
  /// tensorUses[firstUse[t], firstUse[t + 1]). One allocation, not one per tensor.
  void indexConsumers() {
    firstUse.assign(graph.tensors.size() + 1, 0);
    for (const Node &node : graph.nodes)
      for (int input : node.inputs)
        if (input >= 0)
          ++firstUse[size_t(input) + 1];
    for (size_t t = 0; t < graph.tensors.size(); ++t)
      firstUse[t + 1] += firstUse[t];
    tensorUses.resize(firstUse.back());
    std::vector<size_t> next(firstUse.begin(), firstUse.end() - 1);
    for (size_t n = 0; n < graph.nodes.size(); ++n)
      for (size_t i = 0; i < graph.nodes[n].inputs.size(); ++i)
        if (int input = graph.nodes[n].inputs[i]; input >= 0)
          tensorUses[next[size_t(input)]++] = {n, i};
  }

  /// The graph builder made one node per node of the (sorted) graph, in its order.
  const onnx::NodeProto &protoOf(size_t node) const { return proto.node(static_cast<int>(node)); }

  int tensorNamed(const std::string &name) {
    if (tensorByName.empty())
      for (int id = 0; id < static_cast<int>(graph.tensors.size()); ++id)
        tensorByName.emplace(graph.tensors[size_t(id)].name, id);
    auto found = tensorByName.find(name);
    return found == tensorByName.end() ? -1 : found->second;
  }

  /// Walks the forward uses of `tableId`, through `Identity` (the exporter's alias of a
  /// shared weight).
  TableUses usesOf(int tableId) {
    TableUses uses;
    const int64_t rank = static_cast<int64_t>(graph.tensors[size_t(tableId)].dims.size());
    std::vector<int> frontier{tableId};
    while (!frontier.empty() && !uses.denseUse) {
      int current = frontier.back();
      frontier.pop_back();
      for (size_t u = firstUse[size_t(current)]; u < firstUse[size_t(current) + 1]; ++u) {
        auto [n, input] = tensorUses[u];
        const Node &node = graph.nodes[n];
        const onnx::NodeProto &nodeProto = protoOf(n);
        if (node.opType == "Identity") {
          for (int output : node.outputs)
            if (output >= 0)
              frontier.push_back(output);
          continue;
        }
        const size_t outerFirst = node.inputs.size() - size_t(node.outerScopeInputs);
        if (input >= outerFirst) {
          if (!readBodyGathers(nodeProto, graph.tensors[size_t(current)].name, rank, uses))
            return uses;
          continue;
        }
        if (input == 0 && node.inputs.size() == 2 && node.inputs[1] >= 0 &&
            isRowGather(nodeProto, rank)) {
          uses.indices.push_back(node.inputs[1]);
          continue;
        }
        uses.denseUse = &nodeProto;
        return uses;
      }
    }
    return uses;
  }

  /// The reads of `table` inside the subgraphs of `node` (a Loop's body): each must be a row
  /// gather; its indices are traced back through the body to the values it reads from the
  /// enclosing graph, and the integer one with the most elements is taken (the index input
  /// the bags are sliced from, rather than their offsets). Returns false, with
  /// `uses.denseUse` set, at the first read that is not a row gather.
  bool readBodyGathers(const onnx::NodeProto &node, const std::string &table, int64_t rank,
                       TableUses &uses) {
    std::map<std::string, const onnx::NodeProto *> producers;
    std::vector<const onnx::NodeProto *> bodyNodes;
    indexSubgraphProducers(node, producers, bodyNodes);
    for (const onnx::NodeProto *inner : bodyNodes) {
      for (int i = 0; i < inner->input_size(); ++i) {
        if (inner->input(i) != table)
          continue;
        if (i != 0 || inner->input_size() != 2 || !isRowGather(*inner, rank)) {
          uses.denseUse = inner;
          return false;
        }
        int index = outerIndexSource(inner->input(1), producers);
        if (index < 0) { // indices made inside the body alone: no shape to count lookups by
          uses.denseUse = inner;
          return false;
        }
        uses.indices.push_back(index);
      }
    }
    return true;
  }

  /// The integer tensor of the enclosing graph with the most elements that `name` is computed
  /// from inside a body, or -1.
  int outerIndexSource(const std::string &name,
                       const std::map<std::string, const onnx::NodeProto *> &producers) {
    int best = -1;
    std::vector<std::string> frontier{name};
    std::set<std::string> seen;
    while (!frontier.empty()) {
      std::string current = std::move(frontier.back());
      frontier.pop_back();
      if (!seen.insert(current).second)
        continue;
      if (auto producer = producers.find(current); producer != producers.end()) {
        for (const std::string &input : producer->second->input())
          if (!input.empty())
            frontier.push_back(input);
        continue;
      }
      int outer = tensorNamed(current);
      if (outer < 0)
        continue; // a body input (the iteration count, the carried condition)
      const Tensor &tensor = graph.tensors[size_t(outer)];
      if (!tensor.isFloat() && !tensor.isInitializer &&
          (best < 0 || tensor.elements > graph.tensors[size_t(best)].elements))
        best = outer;
    }
    return best;
  }

  /// Rows, row size and lookups of parameter `p` gathered by `indices`. Index tensors that
  /// grow with the batch hold the lookups of all samples: their dims are at the model's batch
  /// once re-inferred (symbolic), at the export's batch otherwise.
  SparseGradient describe(int p, const Tensor &table, const std::vector<int> &indices) const {
    SparseGradient sparse;
    sparse.parameter = p;
    sparse.rows = table.dims[0];
    sparse.rowElements = 1;
    for (size_t d = 1; d < table.dims.size(); ++d)
      sparse.rowElements *= std::max<int64_t>(table.dims[d], 1);
    const int64_t dimsBatch =
        graph.batchMode == BatchMode::Symbolic ? graph.batch : graph.exportBatch;
    int64_t perSample = 0, shared = 0;
    for (int id : indices) {
      const Tensor &index = graph.tensors[size_t(id)];
      if (index.batchProportional)
        perSample += std::max<int64_t>(1, (index.elements + dimsBatch - 1) / dimsBatch);
      else
        shared += index.elements;
    }
    // Shared lookups (position ids) count per sample beside the per-sample ones; only a table
    // gathered by shared indices alone is shared across samples.
    sparse.sharedAcrossSamples = perSample == 0;
    sparse.lookupsPerSample = perSample + shared;
    return sparse;
  }

  const onnx::GraphProto &proto;
  ModelGraph &graph;
  std::map<std::string, int> tensorByName;
  std::vector<size_t> firstUse;
  std::vector<std::pair<size_t, size_t>> tensorUses;
};

} // namespace

void findSparseGradients(const onnx::GraphProto &proto, ModelGraph &graph) {
  if (size_t(proto.node_size()) != graph.nodes.size())
    throw ImportError(ErrorKind::Internal,
                      graph.path + ": the graph's nodes no longer match the model's (" +
                          std::to_string(graph.nodes.size()) + " against " +
                          std::to_string(proto.node_size()) + ")");
  SparseGradientFinder(proto, graph).run();
}

} // namespace zen::importer::detail

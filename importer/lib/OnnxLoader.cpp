//===- OnnxLoader.cpp - parse, validate and shape-infer an ONNX model -----===//
#include "OnnxLoader.h"

#include "Moe.h"
#include "NameTable.h"
#include "ShapeInference.h"

#include "onnx/defs/parser.h"
#include "onnx/defs/schema.h"
#include "onnx/defs/tensor_proto_util.h"
#include "onnx/shape_inference/implementation.h"

#include <google/protobuf/io/coded_stream.h>

#include <algorithm>
#include <functional>
#include <optional>
#include <queue>
#include <sstream>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

namespace zen::importer::detail {
namespace {

constexpr int64_t kMinOpset = 7;
/// Values small enough to be shape arithmetic, not data.
constexpr size_t kMaxShapeValueElements = 64;

[[noreturn]] void fail(const std::string &path, const std::string &message) {
  throw ImportError(ErrorKind::BadInput, path + ": " + message);
}

/// Initializers and nodes of one graph: planning spends ~10 KB for each gradient tensor
/// (importer and IR ~4.5 KB, the rest the planner; a 100 000-tensor MLP plans in
/// 0.9-1.1 GB), so a larger graph is refused before it is parsed (10^6 tensors took 5.3 GB
/// to plan, and parsing them alone 1.6 GB). 1.3x the largest graph the benchmarks plan
/// (mlp_100000).
constexpr int64_t kMaxGraphInitializers = int64_t{1} << 17;
constexpr int64_t kMaxGraphNodes = int64_t{1} << 18;

void checkGraphSize(int64_t initializers, int64_t nodes, const std::string &path) {
  auto check = [&](int64_t count, int64_t limit, const char *what) {
    if (count > limit)
      fail(path, "the graph has " + std::to_string(count) + " " + what + ", more than the limit of " +
                     std::to_string(limit) + " (planning costs ~10 KB each; docs/design.md)");
  };
  check(initializers, kMaxGraphInitializers, "initializers");
  check(nodes, kMaxGraphNodes, "nodes");
}

/// The graph's initializers (GraphProto field 5) and nodes (field 1) counted on the wire,
/// without building the model (ModelProto field 7 is the graph); nothing when the bytes are
/// not a well-formed protobuf (the parse then says so).
std::optional<std::pair<int64_t, int64_t>> countGraphEntries(const std::string &bytes) {
  google::protobuf::io::CodedInputStream input(reinterpret_cast<const uint8_t *>(bytes.data()),
                                               static_cast<int>(bytes.size()));
  auto skip = [&](uint32_t tag) {
    uint64_t varint = 0;
    uint32_t length = 0;
    switch (tag & 7) {
    case 0: return input.ReadVarint64(&varint);
    case 1: return input.Skip(8);
    case 2: return input.ReadVarint32(&length) && input.Skip(static_cast<int>(length));
    case 5: return input.Skip(4);
    default: return false;  // groups: not in ONNX
    }
  };
  int64_t initializers = 0, nodes = 0;
  while (uint32_t tag = input.ReadTag()) {
    if (tag != ((7u << 3) | 2)) {
      if (!skip(tag))
        return std::nullopt;
      continue;
    }
    uint32_t length = 0;
    if (!input.ReadVarint32(&length))
      return std::nullopt;
    const auto limit = input.PushLimit(static_cast<int>(length));
    while (uint32_t inner = input.ReadTag()) {
      initializers += (inner >> 3) == 5;
      nodes += (inner >> 3) == 1;
      if (!skip(inner))
        return std::nullopt;
    }
    input.PopLimit(limit);
  }
  return std::make_pair(initializers, nodes);
}

bool endsWith(const std::string &text, const std::string &suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string describeNode(const onnx::NodeProto &node) {
  return "node '" + node.name() + "' (" + node.op_type() + ")";
}

void parseModel(const std::string &bytes, const std::string &path, onnx::ModelProto &model) {
  if (endsWith(path, ".onnxtxt")) {
    if (bytes.find('\0') != std::string::npos)
      fail(path, "not ONNX text syntax: the file contains NUL bytes");
    onnx::Status status;
    try {
      status = onnx::OnnxParser::Parse(model, bytes.c_str());
    } catch (const std::exception &error) {  // the parser's number conversions throw
      fail(path, std::string("not valid ONNX text syntax: ") + error.what());
    }
    if (!status.IsOK())
      fail(path, "not valid ONNX text syntax: " + status.ErrorMessage());
    checkGraphSize(model.graph().initializer_size(), model.graph().node_size(), path);
    return;
  }
  if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max()))
    fail(path, "model file larger than 2 GiB; keep the weights as external data");
  if (const auto counts = countGraphEntries(bytes))
    checkGraphSize(counts->first, counts->second, path);
  if (!model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    fail(path, "not an ONNX model: the protobuf is truncated or corrupt");
}

void checkVersions(const onnx::ModelProto &model, const std::string &path, LoadedModel &loaded) {
  if (!model.has_ir_version() || model.ir_version() <= 0 || !model.has_graph())
    fail(path, "not an ONNX model: no IR version or no graph");
  if (model.ir_version() < 3 || model.ir_version() > onnx::IR_VERSION)
    fail(path, "unsupported ONNX IR version " + std::to_string(model.ir_version()) +
                   " (supported 3.." + std::to_string(onnx::IR_VERSION) + ")");
  const int64_t maxOpset =
      onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map().at("").second;
  bool found = false;
  for (const onnx::OperatorSetIdProto &opset : model.opset_import()) {
    if (!opset.domain().empty() && opset.domain() != "ai.onnx")
      continue;
    if (opset.version() < kMinOpset || opset.version() > maxOpset)
      fail(path, "unsupported opset version " + std::to_string(opset.version()) +
                     " of domain ai.onnx (supported " + std::to_string(kMinOpset) + ".." +
                     std::to_string(maxOpset) + ")");
    loaded.opsetVersion = opset.version();
    found = true;
  }
  if (!found)
    fail(path, "no opset import for the default ONNX domain (ai.onnx)");
  if (model.graph().node_size() == 0)
    fail(path, "model graph has no nodes");
}

/// Checks every declared dim: non-negative, and the element count of the tensor fits.
/// Zero dims count as one, as the cost model counts them (ModelGraph), so that a zero axis
/// cannot hide an overflowing product of the others.
void checkDims(const std::string &path, const std::string &tensor,
               const std::vector<int64_t> &dims) {
  int64_t elements = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0)
      fail(path, "tensor '" + tensor + "' has negative dimension " + std::to_string(dims[i]) +
                     " at axis " + std::to_string(i));
    // 16 bytes per element at most: the byte count must fit too.
    if (__builtin_mul_overflow(elements, std::max<int64_t>(dims[i], 1), &elements) ||
        elements > std::numeric_limits<int64_t>::max() / 16)
      fail(path, "tensor '" + tensor + "' has overflowing dimensions (axis " +
                     std::to_string(i) + " = " + std::to_string(dims[i]) + ")");
  }
}

void checkValueInfoDims(const std::string &path, const onnx::ValueInfoProto &info) {
  if (!info.type().has_tensor_type() || !info.type().tensor_type().has_shape())
    return;
  std::vector<int64_t> dims;
  for (const auto &dim : info.type().tensor_type().shape().dim())
    if (dim.has_dim_value())
      dims.push_back(dim.dim_value());
  checkDims(path, info.name(), dims);
}

void checkAllDims(const onnx::GraphProto &graph, const std::string &path) {
  for (const onnx::TensorProto &init : graph.initializer())
    checkDims(path, init.name(), {init.dims().begin(), init.dims().end()});
  for (const auto &info : graph.input())
    checkValueInfoDims(path, info);
  for (const auto &info : graph.output())
    checkValueInfoDims(path, info);
  for (const auto &info : graph.value_info())
    checkValueInfoDims(path, info);
}

/// Checks that raw_data, where a tensor carries it (graph-only models carry none), holds
/// exactly the bytes its dims and type need. (Typed values are not counted: the text
/// syntax's graph-only shorthand `float[3, 4] W = {0.0}` gives one value for any dims.)
void checkTensorData(const onnx::TensorProto &tensor, const std::string &what,
                     const std::string &path) {
  if (tensor.data_location() == onnx::TensorProto::EXTERNAL || !tensor.has_raw_data())
    return;  // external data is never opened
  int64_t elements = 1;
  std::string dims;
  for (int64_t dim : tensor.dims()) {
    if (dim < 0 || __builtin_mul_overflow(elements, dim, &elements) ||
        elements > std::numeric_limits<int64_t>::max() / 16)
      fail(path, what + " has a negative or overflowing dimension " + std::to_string(dim));
    dims += (dims.empty() ? "" : ", ") + std::to_string(dim);
  }
  int64_t width = onnxElementSize(tensor.data_type());
  if (width > 0 && int64_t(tensor.raw_data().size()) != elements * width)
    fail(path, what + " has " + std::to_string(tensor.raw_data().size()) +
                   " bytes of raw_data but its dims [" + dims + "] and type " +
                   onnxDtypeName(tensor.data_type()) + " need " +
                   std::to_string(elements * width));
}

void checkAllTensorData(const onnx::GraphProto &graph, const std::string &path) {
  for (const onnx::TensorProto &init : graph.initializer())
    checkTensorData(init, "initializer '" + init.name() + "'", path);
  for (const onnx::NodeProto &node : graph.node())
    for (const onnx::AttributeProto &attr : node.attribute()) {
      if (attr.has_t())
        checkTensorData(attr.t(), describeNode(node) + " attribute '" + attr.name() + "'",
                        path);
      if (attr.has_g())
        checkAllTensorData(attr.g(), path);
      for (const onnx::GraphProto &subgraph : attr.graphs())
        checkAllTensorData(subgraph, path);
    }
}

bool hasSubgraphs(const onnx::NodeProto &node) {
  return std::any_of(node.attribute().begin(), node.attribute().end(),
                     [](const onnx::AttributeProto &attr) {
                       return attr.has_g() || attr.graphs_size() > 0;
                     });
}

/// forEachSubgraphRead over one subgraph: `scope` holds the names the node's subgraphs
/// enclosing `graph` define, `initializers` which of them are their initializers.
void visitSubgraphReads(const onnx::GraphProto &graph, NameSet scope,
                        NameMap<const onnx::TensorProto *> initializers,
                        const std::function<void(const SubgraphRead &)> &visit) {
  for (const onnx::TensorProto &init : graph.initializer()) {
    scope.insert(init.name());
    initializers[init.name()] = &init;
  }
  for (const auto &input : graph.input())
    scope.insert(input.name());
  for (const onnx::NodeProto &node : graph.node())
    for (const std::string &output : node.output())
      scope.insert(output);
  for (const onnx::NodeProto &node : graph.node()) {
    for (int i = 0; i < node.input_size(); ++i) {
      const std::string &input = node.input(i);
      if (input.empty())
        continue;
      auto init = initializers.find(input);
      if (init != initializers.end())
        visit({input, node, i, init->second});
      else if (!scope.count(input))
        visit({input, node, i, nullptr});
    }
    for (const onnx::AttributeProto &attr : node.attribute()) {
      if (attr.has_g())
        visitSubgraphReads(attr.g(), scope, initializers, visit);
      for (const onnx::GraphProto &subgraph : attr.graphs())
        visitSubgraphReads(subgraph, scope, initializers, visit);
    }
  }
}

/// Names unnamed nodes, checks that every input is defined exactly once, and sorts the
/// nodes topologically (stable: file order where the file order is valid).
void checkAndSortGraph(onnx::GraphProto &graph, const std::string &path) {
  // tensor -> node index, -1 for sources; the names are views of the graph's strings, which
  // stay in place until the nodes are reordered at the end
  NameMap<int> producer;
  producer.reserve(graph.initializer_size() + graph.input_size() + graph.node_size());
  for (const onnx::TensorProto &init : graph.initializer()) {
    if (init.name().empty())
      fail(path, "an initializer has no name");
    producer.emplace(init.name(), -1);
  }
  for (const auto &input : graph.input()) {
    if (input.name().empty())
      fail(path, "a graph input has no name");
    producer.emplace(input.name(), -1);
  }
  const int nodeCount = graph.node_size();
  for (int i = 0; i < nodeCount; ++i) {
    onnx::NodeProto &node = *graph.mutable_node(i);
    if (node.op_type().empty())
      fail(path, "node #" + std::to_string(i) + " has no op type");
    if (node.name().empty())
      node.set_name(node.op_type() + "_" + std::to_string(i));
    for (const std::string &output : node.output()) {
      if (output.empty())
        continue;
      auto [it, inserted] = producer.emplace(output, i);
      if (!inserted)
        fail(path, describeNode(node) + " redefines tensor '" + output + "'" +
                       (it->second >= 0 ? " already produced by " +
                                              describeNode(graph.node(it->second))
                                        : std::string(" (a graph input or initializer)")));
    }
  }
  // A node depends on its inputs and on the values its subgraphs read from this graph.
  auto forEachDependency = [](const onnx::NodeProto &node, auto use) {
    for (const std::string &input : node.input())
      if (!input.empty())
        use(input);
    if (hasSubgraphs(node))
      forEachSubgraphRead(node, [&](const SubgraphRead &read) {
        if (!read.initializer)
          use(read.name);
      });
  };
  // Exporters write nodes in topological order: when every input is produced by an earlier
  // node, that order is the sort's answer and the dependency graph is not built.
  bool fileOrderSorts = true;
  for (int i = 0; i < nodeCount; ++i) {
    const onnx::NodeProto &node = graph.node(i);
    forEachDependency(node, [&](const std::string &input) {
      auto it = producer.find(input);
      if (it == producer.end())
        fail(path, describeNode(node) + " uses undefined input '" + input + "'" +
                       (std::find(node.input().begin(), node.input().end(), input) ==
                                node.input().end()
                            ? " in its subgraph"
                            : ""));
      fileOrderSorts = fileOrderSorts && it->second < i;
    });
  }
  for (const auto &output : graph.output())
    if (!producer.count(output.name()))
      fail(path, "graph output '" + output.name() + "' is not produced by any node");
  if (fileOrderSorts)
    return;

  std::vector<std::vector<int>> consumers(nodeCount);
  std::vector<int> pending(nodeCount, 0);
  std::vector<int> lastConsumer(nodeCount, -1); // counts each producer once per consumer
  for (int i = 0; i < nodeCount; ++i) {
    forEachDependency(graph.node(i), [&](const std::string &input) {
      const int from = producer.find(input)->second;
      if (from >= 0 && lastConsumer[from] != i) {
        lastConsumer[from] = i;
        consumers[from].push_back(i);
        ++pending[i];
      }
    });
  }

  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
  for (int i = 0; i < nodeCount; ++i)
    if (pending[i] == 0)
      ready.push(i);
  std::vector<int> order;
  order.reserve(nodeCount);
  while (!ready.empty()) {
    int node = ready.top();
    ready.pop();
    order.push_back(node);
    for (int consumer : consumers[node])
      if (--pending[consumer] == 0)
        ready.push(consumer);
  }
  if (static_cast<int>(order.size()) != nodeCount) {
    for (int i = 0; i < nodeCount; ++i)
      if (pending[i] > 0)
        fail(path, "graph has a cycle through " + describeNode(graph.node(i)));
  }
  google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
  nodes.Reserve(nodeCount);
  for (int index : order)
    *nodes.Add() = graph.node(index);
  graph.mutable_node()->Swap(&nodes);
}

/// ONNX 1.12's shape inference divides by these without checking them (a zero stride
/// raises SIGFPE), so they are validated first.
void checkDivisorAttributes(const onnx::GraphProto &graph, const std::string &path) {
  static const char *const kPositive[] = {"strides", "dilations", "kernel_shape", "group",
                                          "blocksize"};
  for (const onnx::NodeProto &node : graph.node())
    for (const onnx::AttributeProto &attr : node.attribute())
      for (const char *name : kPositive) {
        if (attr.name() != name)
          continue;
        bool positive = attr.ints_size() > 0 || attr.has_i();
        for (int64_t value : attr.ints())
          positive &= value > 0;
        if (attr.has_i())
          positive &= attr.i() > 0;
        if (!positive)
          fail(path, describeNode(node) + " has a non-positive '" + name + "' attribute");
      }
}

/// ONNX 1.12 derives a missing Conv kernel_shape from the weight's dims and indexes past
/// them when the weight's rank differs from the input's (a crash). kernel_shape defaults to
/// the weight's spatial dims, so it is spelled out here from the declared weight, where the
/// rank check of shape inference then applies.
void spellOutKernelShapes(onnx::GraphProto &graph, const std::string &path) {
  auto lacksKernelShape = [](const onnx::NodeProto &node) {
    if (node.op_type() != "Conv" && node.op_type() != "ConvTranspose")
      return false;
    return std::none_of(
        node.attribute().begin(), node.attribute().end(),
        [](const onnx::AttributeProto &attr) { return attr.name() == "kernel_shape"; });
  };
  // The table of declared shapes costs a string per value: only built when a node needs it.
  if (std::none_of(graph.node().begin(), graph.node().end(), lacksKernelShape))
    return;
  std::unordered_map<std::string, std::vector<int64_t>> declared;
  for (const auto &init : graph.initializer())
    declared[init.name()].assign(init.dims().begin(), init.dims().end());
  auto declare = [&](const onnx::ValueInfoProto &info) {
    if (!info.type().has_tensor_type() || !info.type().tensor_type().has_shape())
      return;
    std::vector<int64_t> dims;
    for (const auto &dim : info.type().tensor_type().shape().dim())
      dims.push_back(dim.has_dim_value() ? dim.dim_value() : -1);
    declared.emplace(info.name(), std::move(dims));
  };
  for (const auto &info : graph.input())
    declare(info);
  for (const auto &info : graph.value_info())
    declare(info);
  for (onnx::NodeProto &node : *graph.mutable_node()) {
    if (!lacksKernelShape(node))
      continue;
    auto weight = node.input_size() > 1 ? declared.find(node.input(1)) : declared.end();
    if (weight == declared.end() || weight->second.size() < 3 ||
        std::any_of(weight->second.begin() + 2, weight->second.end(),
                    [](int64_t dim) { return dim <= 0; }))
      fail(path, describeNode(node) +
                     " has no kernel_shape attribute and no declared static weight shape");
    onnx::AttributeProto *attr = node.add_attribute();
    attr->set_name("kernel_shape");
    attr->set_type(onnx::AttributeProto::INTS);
    for (size_t i = 2; i < weight->second.size(); ++i)
      attr->add_ints(weight->second[i]);
  }
}

/// Sets the batch: the first dim of the first graph input is the batch dimension.
void applyBatch(onnx::GraphProto &graph, const ImportOptions &options, LoadedModel &loaded,
                const std::string &path) {
  NameSet initializers;
  initializers.reserve(graph.initializer_size());
  for (const auto &init : graph.initializer())
    initializers.insert(init.name());
  const onnx::ValueInfoProto *first = nullptr;
  for (const auto &input : graph.input())
    if (!initializers.count(input.name())) {
      first = &input;
      break;
    }
  loaded.batchMode = BatchMode::Scaled;
  loaded.exportBatch = 1;
  if (first && first->type().has_tensor_type() && first->type().tensor_type().has_shape() &&
      first->type().tensor_type().shape().dim_size() > 0) {
    const auto &dim = first->type().tensor_type().shape().dim(0);
    if (dim.has_dim_value()) {
      if (dim.dim_value() == 0)
        fail(path, "graph input '" + first->name() + "' has batch dimension 0");
      loaded.exportBatch = dim.dim_value();
    } else {
      loaded.batchMode = BatchMode::Symbolic;
    }
  }
  loaded.batch = options.batch.value_or(
      loaded.batchMode == BatchMode::Symbolic ? 1 : loaded.exportBatch);
  if (loaded.batchMode != BatchMode::Symbolic)
    return;
  const std::string symbol = first->type().tensor_type().shape().dim(0).dim_param();
  auto setBatch = [&](onnx::ValueInfoProto &info, bool isFirst) {
    if (!info.type().has_tensor_type() || !info.type().tensor_type().has_shape())
      return;
    auto *shape = info.mutable_type()->mutable_tensor_type()->mutable_shape();
    for (int i = 0; i < shape->dim_size(); ++i) {
      auto *dim = shape->mutable_dim(i);
      bool matches = symbol.empty() ? (isFirst && i == 0)
                                    : (dim->has_dim_param() && dim->dim_param() == symbol);
      if (matches)
        dim->set_dim_value(loaded.batch);
    }
  };
  for (auto &input : *graph.mutable_input())
    setBatch(input, &input == first);
  for (auto &output : *graph.mutable_output())
    setBatch(output, false);
  for (auto &info : *graph.mutable_value_info())
    setBatch(info, false);
}

//===----------------------------------------------------------------------===//
// Shape completion: ONNX 1.12 cannot infer Slice shapes whose bounds are computed from
// Shape (the PyTorch exporter's split of a fused QKV projection). A small evaluator of
// integer shape arithmetic fills them in, and inference runs again.
//===----------------------------------------------------------------------===//

using Values = std::vector<int64_t>;

class ShapeArithmetic {
public:
  ShapeArithmetic(onnx::GraphProto &graph) : graph(graph) {}

  /// Completes missing Slice/Reshape output shapes; returns how many it filled.
  /// `unlocksMore` tells whether one of them feeds a node with an output shape still
  /// unknown: only then can another round of inference change a shape.
  int completeShapes(bool &unlocksMore) {
    unlocksMore = false;
    // Only Slice and Reshape outputs are completed: without them there is nothing to
    // evaluate (an MLP of 100 000 tensors would index every value for nothing).
    if (std::none_of(graph.node().begin(), graph.node().end(), [](const onnx::NodeProto &node) {
          return node.op_type() == "Slice" || node.op_type() == "Reshape";
        }))
      return 0;
    collectTypes();
    collectInitializerValues();
    std::unordered_set<std::string_view> completed;
    for (const onnx::NodeProto &node : graph.node()) {
      evaluate(node);
      if (node.output_size() == 0 || node.output(0).empty() || isStatic(node.output(0)))
        continue;
      std::optional<Values> dims;
      if (node.op_type() == "Slice")
        dims = sliceShape(node);
      else if (node.op_type() == "Reshape")
        dims = reshapeShape(node);
      if (!dims)
        continue;
      recordShape(node.output(0), node.input(0), *dims);
      completed.insert(node.output(0));
    }
    if (!completed.empty())
      unlocksMore = std::any_of(graph.node().begin(), graph.node().end(),
                                [&](const onnx::NodeProto &node) {
                                  return readsAny(node, completed) && !allOutputsStatic(node);
                                });
    return static_cast<int>(completed.size());
  }

private:
  void collectTypes() {
    types.clear();
    for (const auto &info : graph.input())
      types[info.name()] = &info.type();
    for (const auto &info : graph.value_info())
      types[info.name()] = &info.type();
    for (const auto &info : graph.output())
      types[info.name()] = &info.type();
    initializerDims.clear();
    for (const auto &init : graph.initializer())
      initializerDims[init.name()] = Values(init.dims().begin(), init.dims().end());
  }

  void collectInitializerValues() {
    values.clear();
    for (const auto &init : graph.initializer())
      if (auto value = tensorValues(init))
        values[init.name()] = *value;
  }

  static std::optional<Values> tensorValues(const onnx::TensorProto &tensor) {
    if (tensor.data_location() == onnx::TensorProto::EXTERNAL)
      return std::nullopt;  // never opened
    int64_t elements = 1;
    for (int64_t dim : tensor.dims())
      elements *= dim;
    if (elements < 0 || static_cast<size_t>(elements) > kMaxShapeValueElements)
      return std::nullopt;
    try {
      Values result;
      if (tensor.data_type() == onnx::TensorProto::INT64) {
        result = onnx::ParseData<int64_t>(&tensor);
      } else if (tensor.data_type() == onnx::TensorProto::INT32) {
        for (int32_t v : onnx::ParseData<int32_t>(&tensor))
          result.push_back(v);
      } else {
        return std::nullopt;
      }
      if (static_cast<int64_t>(result.size()) != elements)
        return std::nullopt;
      return result;
    } catch (const std::exception &) {
      return std::nullopt;  // malformed data: just not known
    }
  }

  /// Whether every dim of `name` is known; passes them in order to `visit` (which may have
  /// seen a prefix when the answer is no).
  template <typename Visit> bool visitStaticDims(const std::string &name, Visit visit) const {
    if (auto it = initializerDims.find(name); it != initializerDims.end()) {
      for (int64_t dim : it->second)
        visit(dim);
      return true;
    }
    auto it = types.find(name);
    if (it == types.end() || !it->second->has_tensor_type() ||
        !it->second->tensor_type().has_shape())
      return false;
    for (const auto &dim : it->second->tensor_type().shape().dim()) {
      if (!dim.has_dim_value())
        return false;
      visit(dim.dim_value());
    }
    return true;
  }

  std::optional<Values> staticDims(const std::string &name) const {
    Values dims;
    if (!visitStaticDims(name, [&](int64_t dim) { dims.push_back(dim); }))
      return std::nullopt;
    return dims;
  }

  // Asked of every node's output: no dims are copied.
  bool isStatic(const std::string &name) const {
    return visitStaticDims(name, [](int64_t) {});
  }

  static bool readsAny(const onnx::NodeProto &node,
                       const std::unordered_set<std::string_view> &names) {
    return std::any_of(node.input().begin(), node.input().end(),
                       [&](const std::string &input) { return names.count(input) > 0; });
  }

  bool allOutputsStatic(const onnx::NodeProto &node) const {
    return std::all_of(node.output().begin(), node.output().end(),
                       [&](const std::string &output) { return output.empty() || isStatic(output); });
  }

  const Values *known(const onnx::NodeProto &node, int index) const {
    if (index >= node.input_size() || node.input(index).empty())
      return nullptr;
    auto it = values.find(node.input(index));
    return it == values.end() ? nullptr : &it->second;
  }

  static int64_t intAttr(const onnx::NodeProto &node, const std::string &name, int64_t def) {
    for (const auto &attr : node.attribute())
      if (attr.name() == name)
        return attr.i();
    return def;
  }

  void evaluate(const onnx::NodeProto &node) {
    if (node.output_size() == 0 || node.output(0).empty())
      return;
    std::optional<Values> result = evaluateOp(node);
    if (result && result->size() <= kMaxShapeValueElements)
      values[node.output(0)] = std::move(*result);
  }

  std::optional<Values> evaluateOp(const onnx::NodeProto &node) {
    const std::string &op = node.op_type();
    if (op == "Constant") {
      for (const auto &attr : node.attribute()) {
        if (attr.name() == "value")
          return tensorValues(attr.t());
        if (attr.name() == "value_int")
          return Values{attr.i()};
        if (attr.name() == "value_ints")
          return Values(attr.ints().begin(), attr.ints().end());
      }
      return std::nullopt;
    }
    if (op == "Shape") {
      auto dims = staticDims(node.input(0));
      if (!dims)
        return std::nullopt;
      int64_t rank = dims->size();
      int64_t start = clampAxis(intAttr(node, "start", 0), rank);
      int64_t end = clampAxis(intAttr(node, "end", rank), rank);
      return Values(dims->begin() + start, dims->begin() + std::max(start, end));
    }
    if (op == "Size") {
      auto dims = staticDims(node.input(0));
      if (!dims)
        return std::nullopt;
      int64_t elements = 1;
      for (int64_t dim : *dims)
        elements *= dim;
      return Values{elements};
    }
    if (op == "Identity" || op == "Unsqueeze" || op == "Squeeze" || op == "Reshape" ||
        op == "Flatten" || op == "Cast") {
      if (op == "Cast" && !isIntegerCast(node))
        return std::nullopt;
      if (const Values *input = known(node, 0))
        return *input;
      return std::nullopt;
    }
    if (op == "Concat") {
      Values result;
      for (int i = 0; i < node.input_size(); ++i) {
        const Values *input = known(node, i);
        if (!input)
          return std::nullopt;
        result.insert(result.end(), input->begin(), input->end());
      }
      return result;
    }
    if (op == "Gather") {
      const Values *data = known(node, 0);
      const Values *indices = known(node, 1);
      if (!data || !indices || intAttr(node, "axis", 0) != 0)
        return std::nullopt;
      Values result;
      int64_t size = data->size();
      for (int64_t index : *indices) {
        if (index < -size || index >= size)
          return std::nullopt;
        result.push_back((*data)[index < 0 ? index + size : index]);
      }
      return result;
    }
    if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div") {
      const Values *lhs = known(node, 0);
      const Values *rhs = known(node, 1);
      if (!lhs || !rhs || lhs->empty() || rhs->empty())
        return std::nullopt;
      if (lhs->size() != rhs->size() && lhs->size() != 1 && rhs->size() != 1)
        return std::nullopt;
      size_t count = std::max(lhs->size(), rhs->size());
      Values result(count);
      for (size_t i = 0; i < count; ++i) {
        int64_t a = (*lhs)[lhs->size() == 1 ? 0 : i];
        int64_t b = (*rhs)[rhs->size() == 1 ? 0 : i];
        bool overflow = false;
        if (op == "Add")
          overflow = __builtin_add_overflow(a, b, &result[i]);
        else if (op == "Sub")
          overflow = __builtin_sub_overflow(a, b, &result[i]);
        else if (op == "Mul")
          overflow = __builtin_mul_overflow(a, b, &result[i]);
        else if (b == 0 || (a == std::numeric_limits<int64_t>::min() && b == -1))
          overflow = true;
        else
          result[i] = floorDiv(a, b);
        if (overflow)
          return std::nullopt;
      }
      return result;
    }
    return std::nullopt;
  }

  static int64_t floorDiv(int64_t a, int64_t b) {
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
  }

  static bool isIntegerCast(const onnx::NodeProto &node) {
    int64_t to = intAttr(node, "to", 0);
    return to == onnx::TensorProto::INT64 || to == onnx::TensorProto::INT32;
  }

  static int64_t clampAxis(int64_t axis, int64_t rank) {
    if (axis < 0)
      axis += rank;
    return std::clamp<int64_t>(axis, 0, rank);
  }

  std::optional<Values> sliceShape(const onnx::NodeProto &node) const {
    auto dims = staticDims(node.input(0));
    const Values *starts = known(node, 1);
    const Values *ends = known(node, 2);
    if (!dims || !starts || !ends || starts->size() != ends->size())
      return std::nullopt;
    int64_t rank = dims->size();
    Values axes, steps(starts->size(), 1);
    if (const Values *given = known(node, 3))
      axes = *given;
    else if (node.input_size() > 3 && !node.input(3).empty())
      return std::nullopt;
    else
      for (size_t i = 0; i < starts->size(); ++i)
        axes.push_back(i);
    if (const Values *given = known(node, 4))
      steps = *given;
    else if (node.input_size() > 4 && !node.input(4).empty())
      return std::nullopt;
    if (axes.size() != starts->size() || steps.size() != starts->size())
      return std::nullopt;
    Values result = *dims;
    for (size_t i = 0; i < axes.size(); ++i) {
      int64_t axis = axes[i] < 0 ? axes[i] + rank : axes[i];
      if (axis < 0 || axis >= rank || steps[i] == 0)
        return std::nullopt;
      int64_t size = (*dims)[axis];
      auto clampIndex = [&](int64_t index, int64_t low, int64_t high) {
        if (index < 0)
          index += size;
        return std::clamp(index, low, high);
      };
      if (steps[i] > 0) {
        int64_t start = clampIndex((*starts)[i], 0, size);
        int64_t end = clampIndex((*ends)[i], 0, size);
        result[axis] = end > start ? (end - start + steps[i] - 1) / steps[i] : 0;
      } else {
        int64_t start = clampIndex((*starts)[i], -1, size - 1);
        int64_t end = clampIndex((*ends)[i], -1, size - 1);
        result[axis] = start > end ? (start - end - steps[i] - 1) / -steps[i] : 0;
      }
    }
    return result;
  }

  std::optional<Values> reshapeShape(const onnx::NodeProto &node) const {
    auto dims = staticDims(node.input(0));
    const Values *shape = known(node, 1);
    if (!dims || !shape)
      return std::nullopt;
    bool allowZero = intAttr(node, "allowzero", 0) != 0;
    int64_t elements = 1;
    for (int64_t dim : *dims)
      elements *= dim;
    Values result;
    int64_t product = 1;
    int inferred = -1;
    for (size_t i = 0; i < shape->size(); ++i) {
      int64_t dim = (*shape)[i];
      if (dim == 0 && !allowZero) {
        if (i >= dims->size())
          return std::nullopt;
        dim = (*dims)[i];
      }
      if (dim == -1) {
        if (inferred >= 0)
          return std::nullopt;
        inferred = static_cast<int>(i);
        result.push_back(1);
        continue;
      }
      if (dim < 0 || __builtin_mul_overflow(product, dim, &product))
        return std::nullopt;
      result.push_back(dim);
    }
    if (inferred >= 0) {
      if (product == 0 || elements % product != 0)
        return std::nullopt;
      result[inferred] = elements / product;
    } else if (product != elements) {
      return std::nullopt;
    }
    return result;
  }

  void recordShape(const std::string &name, const std::string &like, const Values &dims) {
    int32_t elemType = 0;
    if (auto it = types.find(like); it != types.end() && it->second->has_tensor_type())
      elemType = it->second->tensor_type().elem_type();
    for (const auto &init : graph.initializer())
      if (init.name() == like)
        elemType = init.data_type();
    onnx::ValueInfoProto *info = nullptr;
    for (auto &existing : *graph.mutable_value_info())
      if (existing.name() == name)
        info = &existing;
    if (!info) {
      info = graph.add_value_info();
      info->set_name(name);
    }
    auto *tensorType = info->mutable_type()->mutable_tensor_type();
    if (elemType)
      tensorType->set_elem_type(elemType);
    tensorType->clear_shape();
    auto *shape = tensorType->mutable_shape();
    for (int64_t dim : dims)
      shape->add_dim()->set_dim_value(dim);
    types[name] = &info->type();
  }

  onnx::GraphProto &graph;
  std::unordered_map<std::string, const onnx::TypeProto *> types;
  std::unordered_map<std::string, Values> initializerDims;
  std::unordered_map<std::string, Values> values;
};

//===----------------------------------------------------------------------===//
// Guards for ONNX 1.12's shape inference, which trusts its input: it assumes a model
// the ONNX checker accepted, and every value a node reads to have a type.
//===----------------------------------------------------------------------===//

/// Names of values: views of the model's own strings, which outlive every walk over it
/// (adding value infos moves no existing string), so no name is copied.
using Names = std::unordered_set<std::string_view>;

/// Calls `visit` on `graph` and on every subgraph of its nodes (If, Loop, Scan bodies),
/// with the names the enclosing graphs define.
template <typename Visit>
void forEachGraph(onnx::GraphProto &graph, const Names &outer, Visit visit) {
  Names scope = visit(graph, outer);
  for (onnx::NodeProto &node : *graph.mutable_node())
    for (onnx::AttributeProto &attr : *node.mutable_attribute()) {
      if (attr.has_g())
        forEachGraph(*attr.mutable_g(), scope, visit);
      for (onnx::GraphProto &subgraph : *attr.mutable_graphs())
        forEachGraph(subgraph, scope, visit);
    }
}

/// Everything OpSchema::Verify reads of a node but its name (in its message only): the
/// schema, the attributes, which inputs and outputs are present.
std::string schemaSignature(const onnx::OpSchema &schema, const onnx::NodeProto &node) {
  std::string signature = schemaAndAttributesKey(schema, node);
  signature += '|';
  for (const std::string &input : node.input())
    signature += input.empty() ? '0' : '1';
  signature += '|';
  for (const std::string &output : node.output())
    signature += output.empty() ? '0' : '1';
  return signature;
}

/// The schema checks of the ONNX checker for every node with a schema: input and output
/// counts, required inputs present (not the empty name), attribute types. Inference
/// functions index inputs and read attributes on that promise (a required input left
/// empty is a null dereference). Nodes without a schema are left to the cost rules.
void verifyNodesAgainstSchemas(onnx::ModelProto &model, const std::string &path) {
  // A model's repeated layers repeat their nodes: each distinct one is verified once.
  std::unordered_set<std::string> verified;
  std::unordered_map<std::string, int> opsets;
  for (const onnx::OperatorSetIdProto &opset : model.opset_import())
    opsets[opset.domain() == "ai.onnx" ? "" : opset.domain()] = int(opset.version());
  forEachGraph(*model.mutable_graph(), {}, [&](onnx::GraphProto &graph, const Names &) {
    for (const onnx::NodeProto &node : graph.node()) {
      std::string domain = node.domain() == "ai.onnx" ? "" : node.domain();
      auto version = opsets.find(domain);
      if (version == opsets.end())
        fail(path, describeNode(node) + " is in domain '" + node.domain() +
                       "', which the model does not import");
      const onnx::OpSchema *schema =
          onnx::OpSchemaRegistry::Schema(node.op_type(), version->second, domain);
      if (!schema || !verified.insert(schemaSignature(*schema, node)).second)
        continue;
      try {
        schema->Verify(node);
      } catch (const std::exception &error) {
        fail(path, describeNode(node) + " does not match its ONNX schema: " + error.what());
      }
    }
    return Names{};
  });
}

/// ONNX 1.12's inference and data-propagation functions take the type of a node's input
/// from a table and dereference it unchecked (Shape's data propagation does; so does
/// other code once a check was skipped). The table has no entry for a value nobody typed:
/// the output of an op without a schema or whose inference gave up, a graph input or
/// output declared without a type, an IR 3 initializer that is not a graph input, an
/// omitted optional input (the empty name). Such a value reads as a null type and the
/// process dies. So before inference every value a node can read gets a type entry,
/// empty where nothing is known (ONNX merges an inferred type into an empty one and
/// skips its checks against it), and the entries still empty afterwards are removed.
class UntypedValueGuard {
public:
  explicit UntypedValueGuard(onnx::ModelProto &model) : model(model) {
    forEachGraph(*model.mutable_graph(), {}, [&](onnx::GraphProto &graph, const Names &outer) {
      return typeEveryValue(graph, outer);
    });
  }
  ~UntypedValueGuard() {
    forEachGraph(*model.mutable_graph(), {}, [](onnx::GraphProto &graph, const Names &) {
      removeEmptyTypes(graph);
      return Names{};
    });
  }
  UntypedValueGuard(const UntypedValueGuard &) = delete;
  UntypedValueGuard &operator=(const UntypedValueGuard &) = delete;

private:
  static bool isEmpty(const onnx::TypeProto &type) {
    return type.value_case() == onnx::TypeProto::VALUE_NOT_SET;
  }

  /// Returns the names defined in `graph` and the scopes around it.
  static Names typeEveryValue(onnx::GraphProto &graph, const Names &outer) {
    Names typed;
    for (onnx::ValueInfoProto &info : *graph.mutable_input()) {
      info.mutable_type();  // present, even if empty
      typed.insert(info.name());
    }
    for (onnx::ValueInfoProto &info : *graph.mutable_output()) {
      info.mutable_type();
      typed.insert(info.name());
    }
    for (const onnx::ValueInfoProto &info : graph.value_info())
      typed.insert(info.name());
    auto addEntry = [&](const std::string &name) -> onnx::TypeProto * {
      if (outer.count(name) || !typed.insert(name).second)
        return nullptr;
      onnx::ValueInfoProto *info = graph.add_value_info();
      info->set_name(name);
      return info->mutable_type();
    };
    // Shape inference types initializers itself only from IR 4 on: give the others theirs.
    for (const onnx::TensorProto &init : graph.initializer())
      if (onnx::TypeProto *type = addEntry(init.name())) {
        auto *tensor = type->mutable_tensor_type();
        tensor->set_elem_type(init.data_type());
        auto *shape = tensor->mutable_shape();
        for (int64_t dim : init.dims())
          shape->add_dim()->set_dim_value(dim);
      }
    for (const onnx::SparseTensorProto &sparse : graph.sparse_initializer())
      typed.insert(sparse.values().name());
    for (const onnx::NodeProto &node : graph.node()) {
      for (const std::string &input : node.input())
        addEntry(input);  // also the empty name of an omitted optional input
      for (const std::string &output : node.output())
        if (!output.empty())
          addEntry(output);
    }
    typed.insert(outer.begin(), outer.end());
    return typed;
  }

  static void removeEmptyTypes(onnx::GraphProto &graph) {
    for (onnx::ValueInfoProto &info : *graph.mutable_input())
      if (isEmpty(info.type()))
        info.clear_type();
    for (onnx::ValueInfoProto &info : *graph.mutable_output())
      if (isEmpty(info.type()))
        info.clear_type();
    auto *infos = graph.mutable_value_info();
    infos->erase(std::remove_if(infos->begin(), infos->end(),
                                [](const onnx::ValueInfoProto &info) {
                                  return isEmpty(info.type());
                                }),
                 infos->end());
  }

  onnx::ModelProto &model;
};

/// Returns whether the memoized driver inferred every shape.
bool inferShapes(onnx::ModelProto &model, const std::string &path, ShapeInferenceDriver driver,
                 ValueTable &values) {
  if (driver == ShapeInferenceDriver::Memoized && inferStaticShapesMemoized(model, values))
    return true;
  UntypedValueGuard guard(model);
  // check_type, strict error mode (throws per node), data propagation.
  onnx::ShapeInferenceOptions options(true, 1, true);
  try {
    onnx::shape_inference::InferShapes(model, onnx::OpSchemaRegistry::Instance(), options);
  } catch (const std::exception &error) {
    fail(path, std::string("shape inference failed: ") + error.what());
  }
  return false;
}

} // namespace

int64_t onnxElementSize(int32_t onnxType) {
  switch (onnxType) {
  case onnx::TensorProto::FLOAT: case onnx::TensorProto::INT32:
  case onnx::TensorProto::UINT32:
    return 4;
  case onnx::TensorProto::DOUBLE: case onnx::TensorProto::INT64:
  case onnx::TensorProto::UINT64: case onnx::TensorProto::COMPLEX64:
    return 8;
  case onnx::TensorProto::FLOAT16: case onnx::TensorProto::BFLOAT16:
  case onnx::TensorProto::INT16: case onnx::TensorProto::UINT16:
    return 2;
  case onnx::TensorProto::INT8: case onnx::TensorProto::UINT8: case onnx::TensorProto::BOOL:
    return 1;
  case onnx::TensorProto::COMPLEX128:
    return 16;
  default:
    return 0;
  }
}

std::string onnxDtypeName(int32_t onnxType) {
  switch (onnxType) {
  case onnx::TensorProto::FLOAT: return "f32";
  case onnx::TensorProto::DOUBLE: return "f64";
  case onnx::TensorProto::FLOAT16: return "f16";
  case onnx::TensorProto::BFLOAT16: return "bf16";
  case onnx::TensorProto::INT64: return "i64";
  case onnx::TensorProto::INT32: return "i32";
  case onnx::TensorProto::INT16: return "i16";
  case onnx::TensorProto::INT8: return "i8";
  case onnx::TensorProto::UINT64: return "ui64";
  case onnx::TensorProto::UINT32: return "ui32";
  case onnx::TensorProto::UINT16: return "ui16";
  case onnx::TensorProto::UINT8: return "ui8";
  case onnx::TensorProto::BOOL: return "i1";
  case onnx::TensorProto::COMPLEX64: return "complex64";
  case onnx::TensorProto::COMPLEX128: return "complex128";
  case onnx::TensorProto::STRING: return "string";
  default: return "unknown";
  }
}

LoadedModel loadOnnxModel(const std::string &bytes, const std::string &path,
                          const ImportOptions &options, ShapeInferenceDriver driver) {
  LoadedModel loaded;
  loaded.arena = std::make_unique<google::protobuf::Arena>();
  loaded.model = google::protobuf::Arena::CreateMessage<onnx::ModelProto>(loaded.arena.get());
  onnx::ModelProto &model = *loaded.model;
  parseModel(bytes, path, model);
  if (options.parsed) {
    uint64_t weightBytes = 0;
    for (const onnx::TensorProto &initializer : model.graph().initializer())
      weightBytes += initializer.ByteSizeLong();
    options.parsed(bytes.size() - std::min<uint64_t>(weightBytes, bytes.size()));
  }
  // The graph checks read no ONNX registry: they run while importModel may still be
  // registering the schemas on another thread (on a small model, while the main thread
  // would otherwise wait). A model failing both reports its versions first, as before.
  onnx::GraphProto &graph = *model.mutable_graph();
  std::optional<ImportError> graphError;
  try {
    checkAndSortGraph(graph, path);
    checkAllDims(graph, path);
    checkAllTensorData(graph, path);
  } catch (const ImportError &error) {
    graphError = error;
  }
  // Before anything reads ONNX's registries (the opset ranges included): this waits for them.
  registerMoeSchema();
  checkVersions(model, path, loaded);
  if (graphError)
    throw *graphError;
  verifyNodesAgainstSchemas(model, path);
  checkDivisorAttributes(graph, path);
  spellOutKernelShapes(graph, path);
  applyBatch(graph, options, loaded, path);
  loaded.shapesMemoized = inferShapes(model, path, driver, loaded.values);
  // Shape arithmetic completes what ONNX left unknown; after the memoized driver every node
  // output is static (it covers nothing else), so it has nothing to do.
  // Each round can unlock the next (a completed Slice feeds a Reshape); 4 rounds cover
  // the exporter's patterns, and a fixed bound keeps adversarial input cheap. A round
  // whose completed shapes feed only nodes with known output shapes changes no other
  // shape: ONNX is not run again over the whole model (a tenth of planning GPT-2 small
  // end to end) just to re-derive them; their consumers' shape checks are the importer's.
  for (int round = 0; round < 4 && !loaded.shapesMemoized; ++round) {
    ShapeArithmetic arithmetic(graph);
    bool unlocksMore = false;
    if (arithmetic.completeShapes(unlocksMore) == 0 || !unlocksMore)
      break;
    inferShapes(model, path, driver, loaded.values);
  }
  // On inferred shapes: the pattern is recognised by the shapes of its values.
  // The table stands for the graph as the first round left it, with its names and nodes.
  if (fuseMoePatterns(model) || !loaded.shapesMemoized)
    loaded.values = {};
  checkAllDims(graph, path);
  return loaded;
}

void forEachSubgraphRead(const onnx::NodeProto &node,
                         const std::function<void(const SubgraphRead &)> &visit) {
  for (const onnx::AttributeProto &attr : node.attribute()) {
    if (attr.has_g())
      visitSubgraphReads(attr.g(), {}, {}, visit);
    for (const onnx::GraphProto &subgraph : attr.graphs())
      visitSubgraphReads(subgraph, {}, {}, visit);
  }
}

} // namespace zen::importer::detail

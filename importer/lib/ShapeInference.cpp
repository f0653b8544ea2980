//===- ShapeInference.cpp - ONNX shape inference, memoized per node kind --===//
//
// ONNX's InferShapes spends ~7 us on every node outside the operator's own inference
// function: an inference context of hash maps over the node's attributes, input types
// and data, the schema's type constraints checked through type strings, a data
// propagation context. On a 10 000-tensor model that is a fifth of planning end to end,
// nearly all of it on layers identical to the one before. Here the operator's inference
// function (through ONNX's own context), the constraint check and the data propagation
// run once per distinct node; a node equal to an earlier one in everything they can
// observe takes the earlier node's output types and merges them as ONNX does.
//
//===----------------------------------------------------------------------===//
#include "ShapeInference.h"

#include "NameTable.h"
#include "onnx/defs/schema.h"
#include "onnx/shape_inference/implementation.h"

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace zen::importer::detail {
namespace {

using onnx::shape_inference::DataPropagationContextImpl;
using onnx::shape_inference::InferenceContextImpl;

/// The node's context as ONNX builds it, recording which inputs' data the inference
/// function reads: the one observation besides the schema, the attributes and the input
/// types that can make two nodes' output types differ.
class RecordingContext final : public onnx::InferenceContext {
public:
  explicit RecordingContext(onnx::InferenceContext &inner) : inner(inner) {}

  const onnx::AttributeProto *getAttribute(const std::string &name) const override {
    return inner.getAttribute(name);
  }
  size_t getNumInputs() const override { return inner.getNumInputs(); }
  const onnx::TypeProto *getInputType(size_t index) const override {
    return inner.getInputType(index);
  }
  const onnx::TensorProto *getInputData(size_t index) const override {
    dataRead.push_back(index);
    return inner.getInputData(index);
  }
  size_t getNumOutputs() const override { return inner.getNumOutputs(); }
  onnx::TypeProto *getOutputType(size_t index) override { return inner.getOutputType(index); }
  onnx::GraphInferencer *getGraphAttributeInferencer(const std::string &name) override {
    return inner.getGraphAttributeInferencer(name);
  }
  // Always null here: no sparse initializers, and no shape data is ever generated.
  const onnx::SparseTensorProto *getInputSparseData(size_t index) const override {
    return inner.getInputSparseData(index);
  }
  const onnx::TensorShapeProto *getSymbolicInput(size_t index) const override {
    return inner.getSymbolicInput(index);
  }

  mutable std::vector<size_t> dataRead;

private:
  onnx::InferenceContext &inner;
};

/// A node's inferred output types, and the input data the inference read to get them.
struct InferredNode {
  std::vector<std::pair<size_t, std::string>> dataRead;  ///< input index, the data's bytes
  std::vector<onnx::TypeProto> outputs;
  std::vector<int32_t> outputTypeIds;
  bool comparable = true;  ///< false: data too large to compare, not kept for later nodes
};

/// Data larger than this is not compared byte by byte (the node is inferred afresh).
constexpr size_t kMaxComparedDataBytes = 64 * 1024;

/// The bytes of a tensor's data, type and dims: equal for equal constants under
/// different names, and never empty (absent data is).
std::string dataBytes(const onnx::TensorProto &data) {
  onnx::TensorProto unnamed = data;
  unnamed.clear_name();
  return '+' + unnamed.SerializeAsString();
}

bool isStaticTensor(const onnx::TypeProto &type) {
  if (!type.has_tensor_type() || !type.tensor_type().has_shape())
    return false;
  for (const onnx::TensorShapeProto::Dimension &dim : type.tensor_type().shape().dim())
    if (!dim.has_dim_value())
      return false;
  return true;
}

bool hasSubgraph(const onnx::NodeProto &node) {
  for (const onnx::AttributeProto &attr : node.attribute())
    if (attr.has_g() || attr.graphs_size() > 0)
      return true;
  return false;
}

class MemoizedInference {
public:
  MemoizedInference(onnx::ModelProto &model, ValueTable &values)
      : model(model), graph(*model.mutable_graph()), values(values) {}

  /// On false, the value_info entries added are removed again: those merged into the
  /// model's own entries are ONNX's types for a prefix of the graph, which ONNX merges
  /// again unchanged.
  bool run() {
    const int declaredInfos = graph.value_info_size();
    if (collectValues() && inferNodes()) {
      // As UntypedValueGuard leaves a graph output nothing typed.
      for (onnx::ValueInfoProto &output : *graph.mutable_output())
        if (output.type().value_case() == onnx::TypeProto::VALUE_NOT_SET)
          output.clear_type();
      return true;
    }
    graph.mutable_value_info()->DeleteSubrange(declaredInfos,
                                               graph.value_info_size() - declaredInfos);
    return false;
  }

private:
  bool inferNodes() {
    for (onnx::NodeProto &node : *graph.mutable_node())
      if (!inferNode(node))
        return false;
    return true;
  }

  /// The types and the constant data ONNX's InferShapes starts from, or false for a
  /// graph this does not cover.
  bool collectValues() {
    if (model.functions_size() > 0 || graph.sparse_initializer_size() > 0)
      return false;
    std::vector<const onnx::NodeProto *> constants;
    size_t nodeOutputs = 0;
    for (const onnx::NodeProto &node : graph.node()) {
      nodeOutputs += size_t(node.output_size());
      if (hasSubgraph(node))
        return false;
      if (!node.domain().empty())
        continue;
      if (node.op_type() == "Shape" || node.op_type() == "Size")
        return false;  // their shape data propagates to other nodes: ONNX's driver tracks it
      if (node.op_type() != "Constant")
        continue;
      if (node.output_size() != 1 || node.attribute_size() != 1 ||
          node.attribute(0).name() != "value" || !node.attribute(0).has_t())
        return false;  // a constant spelled otherwise: ONNX's data rules, not restated here
      constants.push_back(&node);
    }
    for (const onnx::OperatorSetIdProto &opset : model.opset_import())
      opsets[opset.domain()] = static_cast<int>(opset.version());
    // Sized once for every value the graph names (initializers and node outputs are
    // added as they are typed): a 100 000-tensor model would otherwise rehash ~5 times.
    values.reserve(size_t(graph.value_info_size() + graph.input_size() + graph.output_size() +
                          graph.initializer_size()) +
                   nodeOutputs);
    auto addTypes = [&](google::protobuf::RepeatedPtrField<onnx::ValueInfoProto> &infos) {
      for (onnx::ValueInfoProto &info : infos)
        if (info.has_type() && !values.try_emplace(info.name(), ValueEntry{info.mutable_type()}).second)
          return false;  // declared twice: which one ONNX merges into is its business
      return true;
    };
    // The type table UntypedValueGuard would leave ONNX: every graph input typed (else
    // ONNX's driver), every graph output and every value_info entry typed, if only empty.
    for (const onnx::ValueInfoProto &input : graph.input())
      if (!input.has_type())
        return false;
    for (const onnx::ValueInfoProto &info : graph.value_info())
      if (!info.has_type())
        return false;
    for (onnx::ValueInfoProto &output : *graph.mutable_output())
      output.mutable_type();
    if (!addTypes(*graph.mutable_value_info()) || !addTypes(*graph.mutable_input()) ||
        !addTypes(*graph.mutable_output()))
      return false;
    NameSet graphInputs;
    for (const onnx::ValueInfoProto &input : graph.input())
      graphInputs.insert(input.name());
    for (const onnx::TensorProto &initializer : graph.initializer()) {
      auto typed = values.find(initializer.name());
      if (typed == values.end())
        typed = values.emplace(initializer.name(), ValueEntry{typeEntryOf(initializer)}).first;
      typed->second.data = &initializer;
      if (graphInputs.count(initializer.name())) {
        // ONNX checks a graph input against the initializer that gives its default.
        onnx::TypeProto initializerType;
        auto *tensor = initializerType.mutable_tensor_type();
        tensor->set_elem_type(initializer.data_type());
        auto *shape = tensor->mutable_shape();
        for (int64_t dim : initializer.dims())
          shape->add_dim()->set_dim_value(dim);
        onnx::shape_inference::checkShapesAndTypes(initializerType, *typed->second.type);
      }
    }
    for (const onnx::NodeProto *constant : constants)
      values[constant->output(0)].data = &constant->attribute(0).t();
    return true;
  }

  /// A value_info entry typing `initializer`, as UntypedValueGuard adds it.
  onnx::TypeProto *typeEntryOf(const onnx::TensorProto &initializer) {
    onnx::ValueInfoProto *info = graph.add_value_info();
    info->set_name(initializer.name());
    auto *tensor = info->mutable_type()->mutable_tensor_type();
    tensor->set_elem_type(initializer.data_type());
    auto *shape = tensor->mutable_shape();
    for (int64_t dim : initializer.dims())
      shape->add_dim()->set_dim_value(dim);
    return info->mutable_type();
  }

  int32_t typeIdOf(const onnx::TypeProto &type) {
    return typeIds.try_emplace(type.SerializeAsString(), int32_t(typeIds.size())).first->second;
  }

  const onnx::OpSchema *schemaOf(const onnx::NodeProto &node) {
    auto &byName = schemas[node.domain()];
    auto known = byName.find(node.op_type());
    if (known != byName.end())
      return known->second;
    const onnx::OpSchema *schema = nullptr;
    auto opset = opsets.find(node.domain());
    if (opset != opsets.end())
      schema = onnx::OpSchemaRegistry::Schema(node.op_type(), opset->second, node.domain());
    if (schema && (schema->Deprecated() || !schema->has_type_and_shape_inference_function()))
      schema = nullptr;  // ONNX's function expansion or its errors: ONNX's own driver
    byName.emplace(node.op_type(), schema);
    return schema;
  }

  /// What the inference of `node` can observe besides the data it reads; `inputs` gets
  /// its inputs' entries (null for the empty name of an omitted input).
  std::string keyOf(const onnx::OpSchema *schema, const onnx::NodeProto &node,
                    std::vector<ValueEntry *> &inputs) {
    std::string key = schemaAndAttributesKey(*schema, node);
    auto append = [&key](int32_t value) {
      key.append(reinterpret_cast<const char *>(&value), sizeof value);
    };
    append(node.input_size());
    append(node.output_size());
    for (const std::string &input : node.input()) {
      auto found = values.find(input);
      if (found == values.end() && !input.empty())
        throw std::runtime_error("an input nothing defines");  // ONNX's driver reports it
      ValueEntry *value = found == values.end() ? nullptr : &found->second;
      inputs.push_back(value);
      if (value && value->type && value->typeId < 0)
        value->typeId = typeIdOf(*value->type);
      append(value && value->type ? value->typeId : -1);
      append(value && value->data ? 1 : 0);
    }
    return key;
  }

  static bool dataMatches(const std::vector<ValueEntry *> &inputs, const InferredNode &inferred) {
    for (const auto &[index, bytes] : inferred.dataRead) {
      const onnx::TensorProto *data = inputs[index] ? inputs[index]->data : nullptr;
      if (data ? dataBytes(*data) != bytes : !bytes.empty())
        return false;
    }
    return true;
  }

  /// Runs ONNX's inference, type check and data propagation on `node` in ONNX's own
  /// contexts; false when the propagation generated shape data, which flows on to other
  /// nodes (ONNX's driver tracks it).
  bool inferAfresh(const onnx::OpSchema *schema, onnx::NodeProto &node,
                   const std::vector<ValueEntry *> &inputs, InferredNode &inferred) {
    // The contexts look up only the node's inputs in these tables.
    std::unordered_map<std::string, onnx::TypeProto *> types;
    std::unordered_map<std::string, const onnx::TensorProto *> data;
    for (int i = 0; i < node.input_size(); ++i)
      if (const ValueEntry *value = inputs[size_t(i)]) {
        if (value->type)
          types.emplace(node.input(i), value->type);
        if (value->data)
          data.emplace(node.input(i), value->data);
      }
    std::unordered_map<std::string, onnx::TensorShapeProto> generated;
    InferenceContextImpl context(node, types, data, {}, &generated);
    RecordingContext recording(context);
    schema->GetTypeAndShapeInferenceFunction()(recording);
    schema->CheckInputOutputType(recording);
    if (schema->has_data_propagation_function()) {
      DataPropagationContextImpl propagation(node, types, data, generated);
      schema->GetDataPropagationFunction()(propagation);
      if (!generated.empty())
        return false;
    }
    for (size_t index : recording.dataRead) {
      const onnx::TensorProto *read = context.getInputData(index);
      if (read && read->ByteSizeLong() > kMaxComparedDataBytes) {
        inferred.comparable = false;  // never compared: not copied either
        inferred.dataRead.clear();
        break;
      }
      inferred.dataRead.emplace_back(index, read ? dataBytes(*read) : std::string());
    }
    for (size_t i = 0; i < size_t(node.output_size()); ++i) {
      inferred.outputs.push_back(*context.getOutputType(i));
      inferred.outputTypeIds.push_back(typeIdOf(inferred.outputs.back()));
    }
    return true;
  }

  bool inferNode(onnx::NodeProto &node) {
    const onnx::OpSchema *schema = schemaOf(node);
    if (!schema)
      return false;
    try {
      std::vector<ValueEntry *> inputs;
      std::vector<InferredNode> &seen = memo[keyOf(schema, node, inputs)];
      for (const InferredNode &earlier : seen)
        if (dataMatches(inputs, earlier))
          return mergeOutputs(node, earlier);
      InferredNode fresh;
      if (!inferAfresh(schema, node, inputs, fresh))
        return false;
      if (!fresh.comparable)
        return mergeOutputs(node, fresh);
      seen.push_back(std::move(fresh));
      return mergeOutputs(node, seen.back());
    } catch (const std::exception &) {
      return false;  // ONNX reports it, in its words
    }
  }

  bool mergeOutputs(const onnx::NodeProto &node, const InferredNode &inferred) {
    for (int i = 0; i < node.output_size(); ++i) {
      const onnx::TypeProto &type = inferred.outputs[size_t(i)];
      if (node.output(i).empty() && type.value_case() == onnx::TypeProto::VALUE_NOT_SET)
        continue;  // an optional output left out
      if (node.output(i).empty() || !isStaticTensor(type))
        return false;  // symbolic or unknown dimensions: ONNX's symbol table
      ValueEntry &output = values[node.output(i)];
      if (!output.type) {  // as UntypedValueGuard adds the entry
        onnx::ValueInfoProto *info = graph.add_value_info();
        info->set_name(node.output(i));
        output.type = info->mutable_type();
      }
      const bool wasEmpty = output.type->value_case() == onnx::TypeProto::VALUE_NOT_SET;
      onnx::shape_inference::mergeShapesAndTypes(type, output.type);
      // Merged into an empty entry, the type is the inferred one.
      output.typeId = wasEmpty ? inferred.outputTypeIds[size_t(i)] : -1;
    }
    return true;
  }

  onnx::ModelProto &model;
  onnx::GraphProto &graph;
  std::unordered_map<std::string, int> opsets;
  /// Every typed value by name (the names are the model's strings); what the node's
  /// inference reads of its inputs.
  ValueTable &values;
  /// Schemas by domain and operator.
  std::unordered_map<std::string_view, std::unordered_map<std::string_view, const onnx::OpSchema *>>
      schemas;
  std::unordered_map<std::string, int32_t> typeIds;  ///< by serialized type
  std::unordered_map<std::string, std::vector<InferredNode>> memo;
};

} // namespace

std::string schemaAndAttributesKey(const onnx::OpSchema &schema, const onnx::NodeProto &node) {
  const onnx::OpSchema *identity = &schema;
  std::string key(reinterpret_cast<const char *>(&identity), sizeof identity);
  for (const onnx::AttributeProto &attr : node.attribute()) {
    std::string bytes = attr.SerializeAsString();
    key += std::to_string(bytes.size()) + ':' + bytes;
  }
  return key;
}

bool inferStaticShapesMemoized(onnx::ModelProto &model, ValueTable &values) {
  values.clear();
  bool inferred = false;
  try {
    inferred = MemoizedInference(model, values).run();
  } catch (const std::exception &) {
  }
  if (!inferred)
    values = {};
  return inferred;
}

} // namespace zen::importer::detail

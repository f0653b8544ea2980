//===- NameTable.h - Tables keyed by the model's value names -------------===//
#ifndef ZEN_IMPORTER_NAMETABLE_H
#define ZEN_IMPORTER_NAMETABLE_H

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"

#include <cstdint>
#include <string_view>

namespace onnx {
class TensorProto;
class TypeProto;
} // namespace onnx

namespace zen::importer::detail {

/// Every import stage looks names up in a table of all the model's values (hundreds of
/// thousands on a large model): open addressing keeps a lookup to about one cache miss where
/// std::unordered_map's chained nodes take three. Keys are views of the model's own strings.
/// The iteration order is not deterministic (the hash is seeded per process): look up,
/// never iterate where the order reaches an output.
template <typename Value> using NameMap = absl::flat_hash_map<std::string_view, Value>;
using NameSet = absl::flat_hash_set<std::string_view>;

/// One value of the graph as the import stages see it. The memoized shape inference fills
/// the first three, the graph builder the last: one table of every name serves both.
struct ValueEntry {
  onnx::TypeProto *type = nullptr;          ///< in the model; null: nothing types it
  const onnx::TensorProto *data = nullptr;  ///< an initializer's or a Constant's
  int32_t typeId = -1;                      ///< the inference's interned type; -1: not yet
  int32_t tensorId = -1;                    ///< the ModelGraph tensor; -1: not yet created
};
using ValueTable = NameMap<ValueEntry>;

} // namespace zen::importer::detail

#endif // ZEN_IMPORTER_NAMETABLE_H

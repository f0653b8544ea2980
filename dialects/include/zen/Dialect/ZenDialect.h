//===- ZenDialect.h - the zen dialect ---------------------------*- C++ -*-===//
#ifndef ZEN_DIALECT_ZENDIALECT_H
#define ZEN_DIALECT_ZENDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "llvm/ADT/DenseMap.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "zen/SparseScheme.h"
#include "zen/SyncScheme.h"

#include <functional>
#include <future>
#include <map>
#include <optional>
#include <string>

// Attributes first: the dialect declares typed module attributes of these classes.
#include "zen/Dialect/ZenEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "zen/Dialect/ZenAttrs.h.inc"

#include "zen/Dialect/ZenDialect.h.inc"

#define GET_TYPEDEF_CLASSES
#include "zen/Dialect/ZenTypes.h.inc"

namespace zen {
/// The dialect's compression, device, sync-scheme, sparse-scheme, algorithm and recompute enums are the vocabulary's
/// (vocabulary/include/zen/Vocabulary.h) under MLIR spellings; these are the
/// only conversions, checked case by case in ZenDialect.cpp.
vocab::CompressionMethod toVocabulary(CompressionMethod method);
CompressionMethod fromVocabulary(vocab::CompressionMethod method);
vocab::Device toVocabulary(Device device);
Device fromVocabulary(vocab::Device device);
vocab::SyncScheme toVocabulary(SyncScheme scheme);
SyncScheme fromVocabulary(vocab::SyncScheme scheme);
vocab::SparseScheme toVocabulary(SparseScheme scheme);
SparseScheme fromVocabulary(vocab::SparseScheme scheme);
vocab::Algorithm toVocabulary(CollectiveAlgorithm algorithm);
CollectiveAlgorithm fromVocabulary(vocab::Algorithm algorithm);
vocab::Recompute toVocabulary(Recompute recompute);
Recompute fromVocabulary(vocab::Recompute recompute);

/// The collective a zen collective op runs; nullopt for any other op.
std::optional<vocab::CollectiveKind> collectiveKindOf(mlir::Operation *op);

/// Bytes of the payload an op moves: its first operand's (or, with none, its
/// first result's) tensor bytes, or the wire size of a compressed payload.
int64_t payloadBytes(mlir::Operation *op);

/// Checks a list of baselines (`zen.baselines`, a search's `baselines`): #zen.baseline
/// entries sorted by name, each name once. `owner` names the list in the message.
mlir::LogicalResult verifyBaselines(llvm::function_ref<mlir::InFlightDiagnostic()> emitError,
                                    mlir::ArrayAttr baselines, llvm::StringRef owner);

/// A list of baselines by name, as the planner and the plan file hold them.
struct BaselineTable {
  std::map<std::string, double> iterationUs;
  /// The same baselines with uncompressed gradients (zenopt compared like with like).
  std::map<std::string, double> uncompressedUs;
  /// Why a baseline cannot run, instead of a time.
  std::map<std::string, std::string> notFitting;
  /// The configuration a baseline ran, where the search chose one.
  std::map<std::string, std::string> configurations;
};
/// The #zen.baseline list of `table`, sorted by name.
mlir::ArrayAttr baselinesAttr(mlir::MLIRContext *context, const BaselineTable &table);
/// The table of a verified list; an empty one for a null attribute.
BaselineTable baselineTableOf(mlir::ArrayAttr baselines);

/// i64 attributes by value, for code that builds many ops: a model's repeated layers give
/// most ops the same FLOP and byte counts, and a map lookup costs a tenth of uniquing the
/// attribute again (APInt hashing under the context's uniquer).
class I64AttrCache {
public:
  explicit I64AttrCache(mlir::MLIRContext *context)
      : type(mlir::IntegerType::get(context, 64)) {}
  mlir::IntegerAttr get(int64_t value) {
    mlir::IntegerAttr &attr = attrs[value];
    if (!attr)
      attr = mlir::IntegerAttr::get(type, value);
    return attr;
  }

private:
  mlir::IntegerType type;
  llvm::DenseMap<int64_t, mlir::IntegerAttr> attrs;
};
} // namespace zen

#include "zen/Dialect/ZenInterfaces.h.inc"

#define GET_OP_CLASSES
#include "zen/Dialect/ZenOps.h.inc"

#endif // ZEN_DIALECT_ZENDIALECT_H

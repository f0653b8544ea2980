//===- MeasuredCompute.cpp - zenopt --measured-compute FILE ---------------===//
#include "MeasuredCompute.h"

#include "Command.h"
#include "ExitCodes.h"
#include "zen/Support/FileIO.h"
#include "zen/Support/StrictJson.h"

#include "mlir/IR/Builders.h"

#include <cmath>
#include <set>

namespace zen::cli {

namespace {
/// The file is a few numbers per parameter: 16 MiB holds ~200 000 parameters.
constexpr uint64_t kMaxMeasuredComputeBytes = uint64_t(16) << 20;
} // namespace

MeasuredComputeAttr readMeasuredCompute(mlir::MLIRContext &context, const std::string &path,
                                        const importer::ModelGraph &graph) {
  auto fail = [&](const std::string &pointer, const std::string &what) -> void {
    throw CommandError(ExitDataError, "--measured-compute " + path + ": " + pointer + ": " + what);
  };
  std::string text;
  try {
    text = io::readBounded(path, kMaxMeasuredComputeBytes, "measured compute file");
  } catch (const zen::Error &error) {
    throw CommandError(exitCodeOf(error.kind), "--measured-compute: " + std::string(error.what()));
  }
  nlohmann::json document;
  StrictJsonParse strict(fail);
  try {
    document = strict.parse(text, /*ignoreComments=*/false);
  } catch (const nlohmann::json::exception &error) {
    throw CommandError(ExitDataError, "--measured-compute " + path + ": not valid JSON at " +
                                          strict.currentPath() + ": " + error.what());
  }
  if (!document.is_object())
    fail("", "must be an object");
  for (const auto &item : document.items())
    if (item.key() != "method" && item.key() != "forward_us" && item.key() != "backward_us" &&
        item.key() != "optimizer_us" && item.key() != "parameters")
      fail("/" + escapeJsonPointerToken(item.key()), "unknown field");
  auto time = [&](const nlohmann::json &object, const std::string &key,
                  const std::string &pointer) -> double {
    if (!object.contains(key) || !object[key].is_number())
      fail(pointer, "must be a number of microseconds");
    const double value = object[key].get<double>();
    if (!(value >= 0 && std::isfinite(value)))
      fail(pointer, "must be a finite time >= 0, got " + object[key].dump());
    return value;
  };
  const double forwardUs = time(document, "forward_us", "/forward_us");
  const double backwardUs = time(document, "backward_us", "/backward_us");
  const double optimizerUs = time(document, "optimizer_us", "/optimizer_us");
  if (!document.contains("method") || !document["method"].is_string() ||
      document["method"].get<std::string>().empty())
    fail("/method", "must say how the times were measured (a non-empty string)");
  if (!document.contains("parameters") || !document["parameters"].is_object())
    fail("/parameters", "must be an object of parameter name -> {first_read_us, ready_us}");

  std::set<std::string> trainable;
  for (const importer::Parameter &parameter : graph.parameters)
    trainable.insert(parameter.name);
  mlir::Builder builder(&context);
  llvm::SmallVector<mlir::NamedAttribute> firstRead, ready;
  for (const auto &item : document["parameters"].items()) {
    const std::string pointer = "/parameters/" + escapeJsonPointerToken(item.key());
    if (!trainable.count(item.key()))
      fail(pointer, "is no trainable parameter of " + graph.modelName +
                        " (a timing of another model?)");
    const nlohmann::json &entry = item.value();
    if (!entry.is_object())
      fail(pointer, "must be an object {first_read_us, ready_us}");
    for (const auto &field : entry.items())
      if (field.key() != "first_read_us" && field.key() != "ready_us")
        fail(pointer + "/" + escapeJsonPointerToken(field.key()), "unknown field");
    if (entry.empty())
      fail(pointer, "needs first_read_us, ready_us or both");
    // Each point lies inside its pass.
    auto point = [&](const char *key, double passUs, const char *pass,
                     llvm::SmallVector<mlir::NamedAttribute> &points) {
      if (!entry.contains(key))
        return;
      const std::string at = pointer + "/" + key;
      const double us = time(entry, key, at);
      if (us > passUs)
        fail(at, std::string("lies after ") + pass + " ends (" + pass + "_us " +
                     nlohmann::json(passUs).dump() + ")");
      points.push_back(builder.getNamedAttr(item.key(), builder.getF64FloatAttr(us)));
    };
    point("first_read_us", forwardUs, "forward", firstRead);
    point("ready_us", backwardUs, "backward", ready);
  }
  return MeasuredComputeAttr::get(
      &context, builder.getF64FloatAttr(forwardUs), builder.getF64FloatAttr(backwardUs),
      builder.getF64FloatAttr(optimizerUs), builder.getDictionaryAttr(firstRead),
      builder.getDictionaryAttr(ready),
      builder.getStringAttr(document["method"].get<std::string>()));
}

} // namespace zen::cli

//===- Diagnostics.h - MLIR diagnostics for the CLI's error reports -*- C++ -*-===//
#ifndef ZEN_TOOLS_ZENOPT_DIAGNOSTICS_H
#define ZEN_TOOLS_ZENOPT_DIAGNOSTICS_H

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

#include <mutex>
#include <string>

namespace zen::cli {

/// Collects MLIR diagnostics so they can be reported with the CLI's exit codes. The
/// verifier may report from its own thread (BackgroundVerification).
class DiagnosticCollector {
public:
  explicit DiagnosticCollector(mlir::MLIRContext &context)
      : handler(&context, [this](mlir::Diagnostic &diagnostic) {
          if (diagnostic.getSeverity() == mlir::DiagnosticSeverity::Error) {
            std::lock_guard<std::mutex> lock(mutex);
            text += (text.empty() ? "" : "\n") + diagnostic.str();
          }
          return mlir::success();
        }) {}
  std::string messages() const {
    std::lock_guard<std::mutex> lock(mutex);
    return text;
  }

private:
  mutable std::mutex mutex;
  std::string text;
  mlir::ScopedDiagnosticHandler handler;
};

} // namespace zen::cli

#endif // ZEN_TOOLS_ZENOPT_DIAGNOSTICS_H

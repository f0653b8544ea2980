//===- Command.h - zenopt subcommand registry and exit codes ----*- C++ -*-===//
//
// Each subcommand lives in its own file and registers itself with a static
// CommandRegistration, so adding one touches no other file.
//
//===----------------------------------------------------------------------===//
#ifndef ZEN_TOOLS_ZENOPT_COMMAND_H
#define ZEN_TOOLS_ZENOPT_COMMAND_H

#include "ExitCodes.h"

#include <CLI/CLI.hpp>

#include <functional>
#include <stdexcept>
#include <string>

namespace zen::cli {


/// Thrown by command code for an error the user must fix; main prints
/// "zenopt: <message>" and exits with `exitCode`.
struct CommandError : std::runtime_error {
  CommandError(int exitCode, const std::string &message)
      : std::runtime_error(message), exitCode(exitCode) {}
  int exitCode;
};

/// Sets up options on `app` (the subcommand, or the root app for the default
/// planning command) and returns the action that runs after parsing.
using CommandSetup = std::function<std::function<int()>(CLI::App &app)>;

struct CommandRegistration {
  /// `name` empty registers the default command (zenopt MODEL.onnx ...).
  CommandRegistration(const char *name, const char *description, CommandSetup setup);
};

/// Prints "zenopt: <message>" and returns `exitCode`. Library errors (zen::Error)
/// reach it as exitCodeOf(error.kind).
int reportError(const std::string &message, int exitCode);

} // namespace zen::cli

#endif // ZEN_TOOLS_ZENOPT_COMMAND_H

//===- Errors.h - what went wrong, as every library reports it --*- C++ -*-===//
//
// Libraries throw errors of a kind; only the tools turn kinds into process exit
// codes (tools/ExitCodes.h). docs/design.md lists the codes.
//
//===----------------------------------------------------------------------===//
#ifndef ZEN_ERRORS_H
#define ZEN_ERRORS_H

#include <stdexcept>
#include <string>

namespace zen {

enum class ErrorKind {
  BadUsage,    // the request itself is wrong (an option the build cannot honour)
  BadInput,    // a model, cluster or plan that is malformed or out of range
  Unreadable,  // an input that is missing or cannot be read
  Unwritable,  // an output that cannot be written
  Internal,    // a failure that is ours or the system's
};

/// The base of every library error: a message naming the file and field, and its kind.
class Error : public std::runtime_error {
public:
  Error(ErrorKind kind, const std::string &message) : std::runtime_error(message), kind(kind) {}
  ErrorKind kind;
};

} // namespace zen

#endif // ZEN_ERRORS_H

//===- ExitCodes.h - the tools' exit codes ----------------------*- C++ -*-===//
//
// The process exit codes of every zenopt tool (sysexits.h values; docs/design.md)
// and the one mapping from the libraries' error kinds to them.
//
//===----------------------------------------------------------------------===//
#ifndef ZEN_TOOLS_EXITCODES_H
#define ZEN_TOOLS_EXITCODES_H

#include "zen/Errors.h"

namespace zen::cli {

enum ExitCode : int {
  ExitSuccess = 0,
  ExitUsage = 2,
  ExitDataError = 65,
  ExitNoInput = 66,
  ExitSoftware = 70,
  ExitCantCreate = 73,
};

inline int exitCodeOf(ErrorKind kind) {
  switch (kind) {
  case ErrorKind::BadUsage: return ExitUsage;
  case ErrorKind::BadInput: return ExitDataError;
  case ErrorKind::Unreadable: return ExitNoInput;
  case ErrorKind::Unwritable: return ExitCantCreate;
  case ErrorKind::Internal: return ExitSoftware;
  }
  return ExitSoftware;
}

} // namespace zen::cli

#endif // ZEN_TOOLS_EXITCODES_H

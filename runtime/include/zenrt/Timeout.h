//===- zenrt/Timeout.h - How long the runtime's waits may take ------------===//
#ifndef ZENRT_TIMEOUT_H
#define ZENRT_TIMEOUT_H

#include <cmath>
#include <cstdlib>
#include <string>

namespace zenrt {

constexpr double kDefaultTimeoutSeconds = 300;

/// Seconds every wait may take: `requested` when positive and finite, else the environment
/// variable ZENRT_TIMEOUT_S, else kDefaultTimeoutSeconds. A ZENRT_TIMEOUT_S that is not a
/// positive number of seconds sets `error` to the message and returns 0 (the library and
/// the tools report it in their own error types).
inline double resolveTimeoutSeconds(double requested, std::string &error) {
  if (requested > 0 && std::isfinite(requested))
    return requested;
  const char *env = std::getenv("ZENRT_TIMEOUT_S");
  if (!env)
    return kDefaultTimeoutSeconds;
  char *end = nullptr;
  const double seconds = std::strtod(env, &end);
  if (end == env || *end != '\0' || !std::isfinite(seconds) || seconds <= 0) {
    error = std::string("ZENRT_TIMEOUT_S='") + env + "' is not a positive number of seconds";
    return 0;
  }
  return seconds;
}

} // namespace zenrt

#endif // ZENRT_TIMEOUT_H

//===- CliChecks.h - Command-line value checks with plain messages -*- C++ -*-===//
//
// CLI11's own range validators print "Value 0 not in range 0.000000 to 1.797e308" and
// let a negative size wrap around in an unsigned option. These say what is expected in
// plain words ("--iters: must be a whole number from 1 to 1000000 (got 0)"), check the
// text before it is converted, and are shared by every zenopt tool.
//
//===----------------------------------------------------------------------===//
#ifndef ZEN_TOOLS_CLICHECKS_H
#define ZEN_TOOLS_CLICHECKS_H

#include <CLI/CLI.hpp>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>

namespace zen::cli {

/// A whole number in [low, high].
inline CLI::Validator wholeNumber(int64_t low, int64_t high = std::numeric_limits<int64_t>::max()) {
  std::string expected =
      high == std::numeric_limits<int64_t>::max()
          ? (low == 1 ? std::string("a positive whole number")
                      : "a whole number of at least " + std::to_string(low))
          : "a whole number from " + std::to_string(low) + " to " + std::to_string(high);
  return CLI::Validator(
      [=](std::string &text) -> std::string {
        errno = 0;
        char *end = nullptr;
        long long value = std::strtoll(text.c_str(), &end, 10);
        if (text.empty() || *end != '\0' || errno == ERANGE || value < low || value > high)
          return "must be " + expected + " (got '" + text + "')";
        return "";
      },
      expected);
}

/// A finite number in [low, high]; `exclusiveLow` excludes low itself ("positive").
inline CLI::Validator realNumber(double low, double high, bool exclusiveLow = false) {
  auto show = [](double value) {
    std::string text = std::to_string(value);
    text.erase(text.find_last_not_of('0') + 1);
    if (text.back() == '.')
      text.pop_back();
    return text;
  };
  std::string expected = exclusiveLow ? "a number greater than " + show(low) + " and at most " + show(high)
                                      : "a number from " + show(low) + " to " + show(high);
  return CLI::Validator(
      [=](std::string &text) -> std::string {
        char *end = nullptr;
        double value = std::strtod(text.c_str(), &end);
        if (text.empty() || *end != '\0' || !std::isfinite(value) || value < low ||
            (exclusiveLow && value == low) || value > high)
          return "must be " + expected + " (got '" + text + "')";
        return "";
      },
      expected);
}

/// A byte count with an optional binary suffix (B, KB, MB, GB, TB = 2^10.. ; KiB..TiB
/// alike), never negative, at most 2^62 bytes; rewrites the text to the plain number.
inline CLI::Validator byteSize() {
  return CLI::Validator(
      [](std::string &text) -> std::string {
        std::string fail = "must be a byte count such as 4096, 64KB or 1GB (got '" + text + "')";
        size_t digits = 0;
        while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits])))
          ++digits;
        if (digits == 0)
          return fail;
        std::string suffix = text.substr(digits);
        for (char &c : suffix)
          c = char(std::toupper(static_cast<unsigned char>(c)));
        if (suffix.size() == 3 && suffix[1] == 'I')
          suffix.erase(1, 1);  // KiB -> KB
        static const char *const kSuffixes[] = {"", "KB", "MB", "GB", "TB"};
        int shift = -1;
        for (int i = 0; i < 5; ++i)
          if (suffix == kSuffixes[i] || (i == 0 && suffix == "B") ||
              (i > 0 && suffix.size() == 1 && suffix[0] == kSuffixes[i][0]))
            shift = 10 * i;
        if (shift < 0)
          return fail;
        errno = 0;
        unsigned long long value = std::strtoull(text.substr(0, digits).c_str(), nullptr, 10);
        constexpr unsigned long long kMax = 1ull << 62;
        if (errno == ERANGE || value > (kMax >> shift))
          return "must be at most 2^62 bytes (got '" + text + "')";
        text = std::to_string(value << shift);
        return "";
      },
      "BYTES");
}

} // namespace zen::cli

#endif // ZEN_TOOLS_CLICHECKS_H

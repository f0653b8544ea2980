//===- zen/Support/StrictJson.h - JSON input: duplicate keys, nesting limit ===//
//
// The plan file and the cluster description are parsed with nlohmann::json through
// this callback, so both reject a duplicate key, nesting deeper than kMaxJsonNestingDepth
// levels and more than kMaxJsonValues values (documented in docs/plan-format.md and
// costmodel/README.md) with the JSON pointer of the offending value.
//
//===----------------------------------------------------------------------===//
#ifndef ZEN_SUPPORT_STRICTJSON_H
#define ZEN_SUPPORT_STRICTJSON_H

#include <nlohmann/json.hpp>

#include <functional>
#include <set>
#include <string>
#include <vector>

namespace zen {

/// Deeper than any file of ours (plans and clusters nest 6 levels) and shallow enough that
/// a hostile file costs little.
constexpr size_t kMaxJsonNestingDepth = 64;

/// Values (scalars, arrays and objects) one file may hold. A plan's reader spends up to
/// ~200 bytes on each (measured with an object of 5M numbers, the costliest shape: the
/// streaming pass's key set, the DOM's map, the decoded map), so 4.5 * 2^20 values are read
/// in under 1 GB, and the pass stops at the limit before the DOM is built, whatever the
/// file's size or shape (docs/plan-format.md "Errors"). A plan of zenopt's holds ~42 values
/// per gradient tensor: a 100 000-tensor model's plan (4.2M) is read.
constexpr size_t kMaxJsonValues = size_t(9) << 19;

/// JSON pointer escaping of one reference token (RFC 6901).
inline std::string escapeJsonPointerToken(const std::string &token) {
  std::string out;
  for (char c : token) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out += c;
  }
  return out;
}

/// Parses a file's JSON in two passes, both linear in the input: a streaming (SAX) pass that
/// tracks the JSON pointer, so that a duplicate key is reported where it occurs (the default
/// parser silently keeps the last), and refuses nesting deeper than kMaxJsonNestingDepth and
/// a value beyond kMaxJsonValues before anything is built; then nlohmann's plain parser
/// builds the document. (nlohmann 3.11.2's callback parser, used before, rescans an array
/// for every object that ends in it: a plan's 200 000 tasks took 100 s.) Each level keeps
/// only its own reference token (a path is assembled when an error needs it), so the pass's
/// memory stays linear in the nesting. `fail(path, what)` must throw; syntax errors and
/// number overflow throw nlohmann's exceptions, with currentPath() where they stopped.
class StrictJsonParse {
public:
  using Fail = std::function<void(const std::string &path, const std::string &what)>;
  explicit StrictJsonParse(Fail fail) : fail(std::move(fail)) {}

  nlohmann::json parse(const std::string &text, bool ignoreComments) {
    Events events{*this};
    nlohmann::json::sax_parse(text, &events, nlohmann::json::input_format_t::json,
                              /*strict=*/true, ignoreComments);
    return nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/true, ignoreComments);
  }

  /// The path of the value being parsed (where a syntax error stopped).
  std::string currentPath() const {
    std::string path;
    for (size_t i = 1; i < frames.size(); ++i)
      path += "/" + frames[i].token;
    std::string child = childToken();
    return child.empty() && (frames.empty() || frames.back().isObject) ? path : path + "/" + child;
  }

private:
  struct Frame {
    bool isObject;
    std::string token;  // this level's reference token in its parent
    std::set<std::string> keys;
    std::string currentKey;
    size_t index;
  };
  /// The reference token of the value being parsed within the innermost level.
  std::string childToken() const {
    if (frames.empty())
      return "";
    const Frame &parent = frames.back();
    return parent.isObject ? escapeJsonPointerToken(parent.currentKey)
                           : std::to_string(parent.index);
  }
  /// nlohmann's SAX interface, forwarded to the checks.
  struct Events {
    StrictJsonParse &parse;
    bool null() { return parse.scalar(); }
    bool boolean(bool) { return parse.scalar(); }
    bool number_integer(nlohmann::json::number_integer_t) { return parse.scalar(); }
    bool number_unsigned(nlohmann::json::number_unsigned_t) { return parse.scalar(); }
    bool number_float(nlohmann::json::number_float_t, const std::string &) { return parse.scalar(); }
    bool string(std::string &) { return parse.scalar(); }
    bool binary(nlohmann::json::binary_t &) { return parse.scalar(); }
    bool start_object(std::size_t) { return parse.start(true); }
    bool key(std::string &key) { return parse.key(key); }
    bool end_object() { return parse.end(); }
    bool start_array(std::size_t) { return parse.start(false); }
    bool end_array() { return parse.end(); }
    template <typename Exception>
    bool parse_error(std::size_t, const std::string &, const Exception &error) {
      throw error;
    }
  };
  /// Every value (scalar, object or array) counts towards kMaxJsonValues.
  void count() {
    if (++values > kMaxJsonValues)
      fail(currentPath(), "more than " + std::to_string(kMaxJsonValues) +
                              " JSON values in the file (the limit)");
  }
  bool scalar() {
    count();
    advanceArrayIndex();
    return true;
  }
  bool start(bool isObject) {
    count();
    if (frames.size() == kMaxJsonNestingDepth)
      fail(currentPath(), "nested deeper than " + std::to_string(kMaxJsonNestingDepth) + " levels");
    frames.push_back({isObject, childToken(), {}, "", 0});
    return true;
  }
  bool key(const std::string &key) {
    Frame &frame = frames.back();
    frame.currentKey = key;
    if (!frame.keys.insert(key).second)
      fail(currentPath(), "duplicate key");
    return true;
  }
  bool end() {
    frames.pop_back();
    advanceArrayIndex();
    return true;
  }
  /// Called when a value (scalar or container) is complete in the top frame.
  void advanceArrayIndex() {
    if (frames.empty())
      return;
    if (frames.back().isObject)
      frames.back().currentKey.clear();  // a syntax error now belongs to the object itself
    else
      ++frames.back().index;
  }
  Fail fail;
  std::vector<Frame> frames;
  size_t values = 0;
};

}  // namespace zen

#endif  // ZEN_SUPPORT_STRICTJSON_H

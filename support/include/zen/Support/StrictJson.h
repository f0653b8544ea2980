//===- zen/Support/StrictJson.h - JSON input: duplicate keys, nesting limit ===//
//
// The plan file and the cluster description are parsed with nlohmann::json through
// this callback, so both reject a duplicate key and nesting deeper than
// kMaxJsonNestingDepth levels (documented in docs/plan-format.md and
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

/// Tracks the JSON pointer during nlohmann's callback parse, so that a duplicate key is
/// reported where it occurs (the default parser silently keeps the last), and refuses
/// nesting deeper than kMaxJsonNestingDepth before the level is built. Each level keeps
/// only its own reference token (a path is assembled when an error needs it), so memory
/// stays linear in the input. `fail(path, what)` must throw.
class StrictJsonParse {
public:
  using Fail = std::function<void(const std::string &path, const std::string &what)>;
  explicit StrictJsonParse(Fail fail) : fail(std::move(fail)) {}

  /// The path of the value being parsed (where a syntax error stopped).
  std::string currentPath() const {
    std::string path;
    for (size_t i = 1; i < frames.size(); ++i)
      path += "/" + frames[i].token;
    std::string child = childToken();
    return child.empty() && (frames.empty() || frames.back().isObject) ? path : path + "/" + child;
  }

  bool operator()(int, nlohmann::json::parse_event_t event, nlohmann::json &parsed) {
    using json = nlohmann::json;
    switch (event) {
    case json::parse_event_t::object_start:
    case json::parse_event_t::array_start:
      if (frames.size() == kMaxJsonNestingDepth)
        fail(currentPath(),
             "nested deeper than " + std::to_string(kMaxJsonNestingDepth) + " levels");
      frames.push_back({event == json::parse_event_t::object_start, childToken(), {}, "", 0});
      break;
    case json::parse_event_t::key: {
      Frame &frame = frames.back();
      const std::string &key = parsed.get_ref<const std::string &>();
      frame.currentKey = key;
      if (!frame.keys.insert(key).second)
        fail(currentPath(), "duplicate key");
      break;
    }
    case json::parse_event_t::object_end:
    case json::parse_event_t::array_end:
      frames.pop_back();
      advanceArrayIndex();
      break;
    case json::parse_event_t::value:
      advanceArrayIndex();
      break;
    }
    return true;
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
};

}  // namespace zen

#endif  // ZEN_SUPPORT_STRICTJSON_H

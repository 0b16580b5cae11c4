// Private helper of the loaders: reads one JSON object field by field, tracking the
// JSON path for messages, and reports keys nobody asked for ("did you mean").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "stepcast/models/text.h"

namespace stepcast::detail {

using nlohmann::json;

// Collected error messages, in the order found.
class Diagnostics {
 public:
  void add(const std::string& path, const std::string& reason);
  bool empty() const { return lines_.empty(); }
  std::size_t size() const { return lines_.size(); }
  std::string joined() const;

 private:
  std::vector<std::string> lines_;
};

// printable() and edit_distance() are public (stepcast/models/text.h).
using stepcast::edit_distance;
using stepcast::printable;

// The candidate `word` is the start of when exactly one is (and `word` has at least 3
// characters: "h100" -> "h100-sxm"); else the closest candidate within a small edit
// distance; "" when none is close.
std::string closest(std::string_view word, const std::vector<std::string>& candidates);
// A JSON value as a user would recognise it in a message: 8, 2.5, 1e+15, "400G", true.
std::string describe(const json& value);
// A JSON path: join("plan", "tp") == "plan.tp"; join("", "plan") == "plan".
std::string join(const std::string& path, std::string_view key);

class ObjectReader {
 public:
  // REQUIRES: obj.is_object(). `obj` and `diag` must outlive the reader.
  ObjectReader(const json& obj, std::string path, Diagnostics& diag);

  bool has(std::string_view key) const;
  // The raw value; marks the key as known. nullptr when absent.
  const json* raw(std::string_view key);

  // Each accessor marks `key` as known, returns nullopt when absent (or null, where
  // `allow_null`), and reports a type or range error (returning nullopt) otherwise.
  std::optional<std::int64_t> integer(std::string_view key, std::int64_t min, std::int64_t max);
  std::optional<double> number(std::string_view key, double min, double max,
                               bool allow_null = false, bool min_exclusive = false);
  std::optional<bool> boolean(std::string_view key);
  std::optional<std::string> string(std::string_view key);
  // One of `choices`, else an error listing them.
  std::optional<std::string> choice(std::string_view key, const std::vector<std::string>& choices);

  // Keys accepted and not interpreted (documentation fields such as "source").
  void ignore(std::initializer_list<std::string_view> keys);

  // Reports every key that no accessor asked for, with "did you mean".
  void finish();

  const std::string& path() const { return path_; }
  std::string path_of(std::string_view key) const { return join(path_, key); }
  Diagnostics& diag() { return diag_; }

 private:
  const json& obj_;
  std::string path_;
  Diagnostics& diag_;
  std::vector<std::string> known_;
};

}  // namespace stepcast::detail

// The one JSON reader every input file goes through (scenarios, traces, measurements,
// benchmark files, calibrations, validation records): a bounded file read that refuses
// what is not a regular file, a parse with the loader's rules (comments allowed, no NUL
// bytes, bounded nesting, duplicate keys rejected, parse errors at their JSON path), and a
// field-by-field object reader whose messages name the JSON path and the reason
// (`plan.tp: expected an integer, got "x"`) and report unknown keys with "did you mean".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "stepcast/models/result.h"
#include "stepcast/models/text.h"

namespace stepcast::reader {

using nlohmann::json;

// Nesting deeper than this is refused before parsing (a scenario is 4 levels deep; deep
// nesting is garbage or an attack on the recursive parser).
inline constexpr int kMaxDepth = 64;
// Input files larger than this are refused unless the caller allows more (traces).
inline constexpr std::uint64_t kMaxInputBytes = 64ull << 20;
// Diagnostics keeps this many lines; the rest are counted ("... and 999 more problems").
inline constexpr std::size_t kMaxDiagnosticLines = 20;

// Collected error messages, in the order found; at most kMaxDiagnosticLines are kept.
class Diagnostics {
 public:
  void add(const std::string& path, const std::string& reason);
  bool empty() const { return lines_.empty(); }
  std::size_t size() const { return lines_.size() + dropped_; }
  // One line per problem; when more than kMaxDiagnosticLines were added, a last line says
  // how many more there were.
  std::string joined() const;

 private:
  std::vector<std::string> lines_;
  std::size_t dropped_ = 0;
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
// An array element's path: index("records", 3) == "records[3]".
std::string index(const std::string& path, std::size_t i);

// Reads the file at `path` whole. Errors name the file: not found, a directory, not a
// regular file (a FIFO, /dev/zero: refused, they could be read forever), larger than
// `max_bytes`, or unreadable.
Result<std::string> read_input_file(const std::string& path, std::uint64_t max_bytes = kMaxInputBytes);

// Parses one JSON document with the loader's rules: "//" and "/* */" comments allowed;
// a NUL byte, an empty document, nesting beyond kMaxDepth and a repeated key are errors;
// a parse error or a number beyond a double's range is reported at its JSON path. The
// message is the reason without a file name (callers prefix it).
Result<json> parse_document(std::string_view text);
// The checks parse_document makes before parsing (a NUL byte, an empty document, nesting
// beyond kMaxDepth), for readers that parse in a stream (traces): the reason, or nullopt
// when `text` passes them.
std::optional<std::string> precheck_document(std::string_view text);

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
  // A required field: like the accessors, plus "missing" when absent.
  std::optional<std::int64_t> required_integer(std::string_view key, std::int64_t min, std::int64_t max);
  std::optional<double> required_number(std::string_view key, double min, double max);
  std::optional<std::string> required_string(std::string_view key);
  // An array (nullptr, with an error, when present and not an array; nullptr when absent).
  const json* array(std::string_view key);
  // An object (nullptr, with an error, when present and not an object; nullptr when absent).
  const json* object(std::string_view key);

  // Keys accepted and not interpreted (documentation fields such as "source").
  void ignore(std::initializer_list<std::string_view> keys);

  // Reports every key that no accessor asked for, with "did you mean".
  void finish();
  // The same for a lenient reader (validation records, whose sources carry fields stepcast
  // does not read): a key within two edits of a known one (four letters or more) is still
  // an error, as a likely misspelling; the others are appended to `ignored` as paths
  // ("records[0].measured.throughput"). `ignored` null: finish().
  void finish(std::vector<std::string>* ignored);

  const std::string& path() const { return path_; }
  std::string path_of(std::string_view key) const { return join(path_, key); }
  Diagnostics& diag() { return diag_; }

 private:
  const json& obj_;
  std::string path_;
  Diagnostics& diag_;
  std::vector<std::string> known_;
};

// Prefixes every line of `message` with "`source`: " (the file a multi-line error is about).
std::string prefix_lines(const std::string& source, const std::string& message);

}  // namespace stepcast::reader

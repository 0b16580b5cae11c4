#include "stepcast/models/json_reader.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <set>

#include <fmt/format.h>

namespace stepcast::reader {

void Diagnostics::add(const std::string& path, const std::string& reason) {
  if (lines_.size() >= kMaxDiagnosticLines) {
    ++dropped_;
    return;
  }
  lines_.push_back(printable(path.empty() ? reason : path + ": " + reason));
}

// Length of the well-formed UTF-8 sequence starting at s[i] (2 to 4), or 0 when there is none.
static std::size_t utf8_sequence_length(std::string_view s, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char b = byte(i);
  std::size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // range of the second byte (RFC 3629 table)
  if (b >= 0xC2 && b <= 0xDF) n = 2;
  else if (b >= 0xE0 && b <= 0xEF) {
    n = 3;
    if (b == 0xE0) lo = 0xA0;
    if (b == 0xED) hi = 0x9F;
  } else if (b >= 0xF0 && b <= 0xF4) {
    n = 4;
    if (b == 0xF0) lo = 0x90;
    if (b == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < n; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  }
  return n;
}

std::string Diagnostics::joined() const {
  std::string out;
  for (std::size_t i = 0; i < lines_.size(); ++i) {
    if (i) out += '\n';
    out += lines_[i];
  }
  if (dropped_ > 0) {
    out += fmt::format("\n... and {} more problem{} (the first {} are listed)", dropped_, dropped_ == 1 ? "" : "s",
                       lines_.size());
  }
  return out;
}

std::string closest(std::string_view word, const std::vector<std::string>& candidates) {
  // A unique completion beats edit distance: "h100" is 2 edits from "b200" but the
  // start of "h100-sxm". Completions that all extend the shortest one count as that one
  // ("h100-sxm" and its variant "h100-sxm-500w").
  if (word.size() >= 3) {
    auto starts = [](std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; };
    const std::string* shortest = nullptr;
    for (const auto& c : candidates) {
      if (c.size() > word.size() && starts(c, word) && (!shortest || c.size() < shortest->size())) shortest = &c;
    }
    const bool one = shortest && std::all_of(candidates.begin(), candidates.end(), [&](const std::string& c) {
                       return !(c.size() > word.size() && starts(c, word)) || starts(c, *shortest);
                     });
    if (one) return *shortest;
  }
  std::string best;
  int best_d = 0;
  const int limit = std::max(2, static_cast<int>(word.size()) / 3);
  for (const auto& c : candidates) {  // first best wins: candidates are in a fixed order
    const int d = edit_distance(word, c);
    if (d <= limit && (best.empty() || d < best_d)) {
      best = c;
      best_d = d;
    }
  }
  return best;
}

std::string describe(const json& v) {
  if (v.is_number_float()) return fmt::format("{}", v.get<double>());
  std::string s = v.dump();
  if (s.size() > 40) {
    std::size_t cut = 37;
    while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;  // whole UTF-8 characters
    s = s.substr(0, cut) + "...";
  }
  return s;
}

std::string join(const std::string& path, std::string_view key) {
  return path.empty() ? std::string(key) : path + "." + std::string(key);
}

std::string index(const std::string& path, std::size_t i) { return path + "[" + std::to_string(i) + "]"; }

ObjectReader::ObjectReader(const json& obj, std::string path, Diagnostics& diag)
    : obj_(obj), path_(std::move(path)), diag_(diag) {}

bool ObjectReader::has(std::string_view key) const { return obj_.contains(key); }

const json* ObjectReader::raw(std::string_view key) {
  known_.emplace_back(key);
  auto it = obj_.find(key);
  return it == obj_.end() ? nullptr : &*it;
}

static std::string range_text(double min, double max) {
  return fmt::format("{} to {}", min, max);
}

std::optional<std::int64_t> ObjectReader::integer(std::string_view key, std::int64_t min,
                                                  std::int64_t max) {
  const json* v = raw(key);
  if (!v) return std::nullopt;
  std::optional<double> d;
  std::int64_t value = 0;
  if (v->is_number_integer()) {
    if (v->is_number_unsigned() && v->get<std::uint64_t>() > static_cast<std::uint64_t>(max)) {
      diag_.add(path_of(key), fmt::format("{} is out of range ({} to {})", describe(*v), min, max));
      return std::nullopt;
    }
    value = v->get<std::int64_t>();
  } else if (v->is_number_float()) {
    const double x = v->get<double>();
    if (!std::isfinite(x) || x != std::floor(x)) {
      diag_.add(path_of(key), "expected an integer, got " + describe(*v));
      return std::nullopt;
    }
    // 2^63 is the first double above every int64; casting it (or more) is undefined.
    if (x < static_cast<double>(min) || x > static_cast<double>(max) || x >= 0x1p63) {
      diag_.add(path_of(key), fmt::format("{} is out of range ({} to {})", describe(*v), min, max));
      return std::nullopt;
    }
    value = static_cast<std::int64_t>(x);
  } else {
    diag_.add(path_of(key), "expected an integer, got " + describe(*v));
    return std::nullopt;
  }
  if (value < min || value > max) {
    diag_.add(path_of(key), fmt::format("{} is out of range ({} to {})", value, min, max));
    return std::nullopt;
  }
  return value;
}

std::optional<double> ObjectReader::number(std::string_view key, double min, double max,
                                           bool allow_null, bool min_exclusive) {
  const json* v = raw(key);
  if (!v || (allow_null && v->is_null())) return std::nullopt;
  if (!v->is_number()) {
    diag_.add(path_of(key), std::string(min_exclusive && min == 0 ? "expected a positive number"
                                                                  : "expected a number") +
                                ", got " + describe(*v));
    return std::nullopt;
  }
  const double x = v->get<double>();
  if (min_exclusive && min == 0 && x <= 0) {
    diag_.add(path_of(key), "expected a positive number, got " + describe(*v));
    return std::nullopt;
  }
  if (!(x >= min && x <= max) || (min_exclusive && x == min)) {
    diag_.add(path_of(key), describe(*v) + " is out of range (" + range_text(min, max) + ")");
    return std::nullopt;
  }
  return x;
}

std::optional<bool> ObjectReader::boolean(std::string_view key) {
  const json* v = raw(key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) {
    diag_.add(path_of(key), "expected true or false, got " + describe(*v));
    return std::nullopt;
  }
  return v->get<bool>();
}

std::optional<std::string> ObjectReader::string(std::string_view key) {
  const json* v = raw(key);
  if (!v) return std::nullopt;
  if (!v->is_string()) {
    diag_.add(path_of(key), "expected a string, got " + describe(*v));
    return std::nullopt;
  }
  return v->get<std::string>();
}

std::optional<std::string> ObjectReader::choice(std::string_view key,
                                                const std::vector<std::string>& choices) {
  auto s = string(key);
  if (!s) return std::nullopt;
  if (std::find(choices.begin(), choices.end(), *s) != choices.end()) return s;
  std::string list;
  for (std::size_t i = 0; i < choices.size(); ++i) {
    list += (i ? ", \"" : "\"") + choices[i] + "\"";
  }
  std::string msg = "\"" + *s + "\" is not one of " + list;
  const std::string near = closest(*s, choices);
  if (!near.empty()) msg += "; did you mean \"" + near + "\"?";
  diag_.add(path_of(key), msg);
  return std::nullopt;
}

void ObjectReader::ignore(std::initializer_list<std::string_view> keys) {
  for (auto k : keys) known_.emplace_back(k);
}

void ObjectReader::finish() { finish(nullptr); }

void ObjectReader::finish(std::vector<std::string>* ignored) {
  for (auto it = obj_.begin(); it != obj_.end(); ++it) {  // nlohmann objects iterate in key order
    if (std::find(known_.begin(), known_.end(), it.key()) != known_.end()) continue;
    const std::string near = closest(it.key(), known_);
    // Lenient: only a likely misspelling (a known key within two edits of a key of four
    // letters or more) is an error; anything else is left unread, to the caller to say.
    const bool typo = !near.empty() && it.key().size() >= 4 && edit_distance(it.key(), near) <= 2;
    if (ignored && !typo) {
      ignored->push_back(path_of(it.key()));
      continue;
    }
    std::string msg = "unknown key";
    if (!near.empty()) msg += "; did you mean \"" + near + "\"?";
    diag_.add(path_of(it.key()), msg);
  }
}

std::optional<std::int64_t> ObjectReader::required_integer(std::string_view key, std::int64_t min,
                                                           std::int64_t max) {
  if (!has(key)) {
    raw(key);
    diag_.add(path_of(key), "missing (required)");
    return std::nullopt;
  }
  return integer(key, min, max);
}

std::optional<double> ObjectReader::required_number(std::string_view key, double min, double max) {
  if (!has(key)) {
    raw(key);
    diag_.add(path_of(key), "missing (required)");
    return std::nullopt;
  }
  return number(key, min, max);
}

std::optional<std::string> ObjectReader::required_string(std::string_view key) {
  if (!has(key)) {
    raw(key);
    diag_.add(path_of(key), "missing (required)");
    return std::nullopt;
  }
  return string(key);
}

const json* ObjectReader::array(std::string_view key) {
  const json* v = raw(key);
  if (v && !v->is_array()) {
    diag_.add(path_of(key), "expected an array, got " + describe(*v));
    return nullptr;
  }
  return v;
}

const json* ObjectReader::object(std::string_view key) {
  const json* v = raw(key);
  if (v && !v->is_object()) {
    diag_.add(path_of(key), "expected an object, got " + describe(*v));
    return nullptr;
  }
  return v;
}

std::string prefix_lines(const std::string& source, const std::string& message) {
  std::string out;
  std::size_t start = 0;
  while (start <= message.size()) {
    const std::size_t nl = message.find('\n', start);
    const std::size_t end = nl == std::string::npos ? message.size() : nl;
    if (!out.empty()) out += '\n';
    out += source + ": " + message.substr(start, end - start);
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  return out;
}

Result<std::string> read_input_file(const std::string& path, std::uint64_t max_bytes) {
  const std::string shown = printable(path);
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return Error{shown + ": no such file or directory"};
    return Error{fmt::format("{}: cannot open file ({})", shown, std::strerror(errno))};
  }
  if (S_ISDIR(st.st_mode)) return Error{shown + ": is a directory"};
  // FIFOs, character devices (/dev/zero, /dev/urandom) and sockets never end or block:
  // only regular files are input.
  if (!S_ISREG(st.st_mode)) return Error{shown + ": not a regular file (a pipe, device or socket)"};
  if (static_cast<std::uint64_t>(st.st_size) > max_bytes) {
    return Error{fmt::format("{}: {} bytes is larger than the {} MiB an input file may have", shown,
                             static_cast<std::uint64_t>(st.st_size), max_bytes >> 20)};
  }
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) return Error{fmt::format("{}: cannot open file ({})", shown, std::strerror(errno))};
  std::string text;
  text.resize(static_cast<std::size_t>(st.st_size));
  std::size_t got = text.empty() ? 0 : std::fread(text.data(), 1, text.size(), f.get());
  if (std::ferror(f.get())) return Error{shown + ": cannot read file"};
  text.resize(got);
  // A file that grew after stat(): read on, within the cap.
  char buf[65536];
  std::size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, f.get())) > 0) {
    if (text.size() + n > max_bytes) {
      return Error{fmt::format("{}: larger than the {} MiB an input file may have", shown, max_bytes >> 20)};
    }
    text.append(buf, n);
  }
  if (std::ferror(f.get())) return Error{shown + ": cannot read file"};
  return text;
}

namespace {

// Rejects what the JSON parser should never see: NUL bytes, empty input and nesting beyond
// kMaxDepth.
std::optional<std::string> prescan(std::string_view text) {
  // JSON text never holds a NUL byte (strings escape it as \u0000), and nlohmann's lexer
  // takes one for the end of input, silently dropping what follows ("{}\0garbage" would load).
  if (const auto nul = text.find('\0'); nul != std::string_view::npos) {
    const std::string_view before = text.substr(0, nul);
    const auto line_start = before.rfind('\n');
    const std::size_t column = line_start == std::string_view::npos ? nul + 1 : nul - line_start;
    return fmt::format("invalid JSON: NUL byte at line {}, column {} (is this a binary file?)",
                       std::count(before.begin(), before.end(), '\n') + 1, column);
  }
  std::size_t i = 0;
  bool any = false;
  int depth = 0, line = 1;
  bool in_string = false;
  for (; i < text.size(); ++i) {
    const char ch = text[i];
    if (ch == '\n') ++line;
    if (in_string) {
      if (ch == '\\') ++i;
      else if (ch == '"') in_string = false;
      continue;
    }
    if (ch == '/' && i + 1 < text.size() && text[i + 1] == '/') {
      while (i < text.size() && text[i] != '\n') ++i;
      if (i < text.size()) ++line;
      continue;
    }
    if (ch == '/' && i + 1 < text.size() && text[i + 1] == '*') {
      i += 2;
      while (i + 1 < text.size() && !(text[i] == '*' && text[i + 1] == '/')) {
        if (text[i] == '\n') ++line;
        ++i;
      }
      ++i;
      continue;
    }
    if (ch != ' ' && ch != '\t' && ch != '\r' && ch != '\n') any = true;
    if (ch == '"') in_string = true;
    if (ch == '{' || ch == '[') {
      if (++depth > kMaxDepth) {
        return fmt::format("invalid JSON: nesting deeper than {} levels at line {}", kMaxDepth, line);
      }
    } else if (ch == '}' || ch == ']') {
      --depth;
    }
  }
  if (!any) return std::string("empty document: expected a JSON object");
  return std::nullopt;
}

}  // namespace

namespace {

// The SAX handler of parse_document: builds the document with nlohmann's own DOM builder
// and tracks the JSON path of the value being read, so that a number the parser rejects
// ("tp": 1e400) is reported at its field, and finds repeated keys (the parser would
// silently keep the last one). Not json::parse with a callback: nlohmann's callback parser
// is quadratic in the length of an array (100,000 elements took 21 s, plain parsing 0.3 s).
class PathTrackingSax {
 public:
  explicit PathTrackingSax(json& doc) : dom_(doc, /*allow_exceptions_=*/true) {}

  std::vector<std::string> duplicates;  // paths of repeated keys, in document order

  // The JSON path of the value being read ("plan.tp", "expect.mfu[1]").
  std::string path() const {
    std::string p;
    for (const Frame& f : frames_) p = f.array ? index(p, f.done) : join(p, f.key);
    return p;
  }

  bool null() { return done(dom_.null()); }
  bool boolean(bool v) { return done(dom_.boolean(v)); }
  bool number_integer(json::number_integer_t v) { return done(dom_.number_integer(v)); }
  bool number_unsigned(json::number_unsigned_t v) { return done(dom_.number_unsigned(v)); }
  bool number_float(json::number_float_t v, const json::string_t& s) { return done(dom_.number_float(v, s)); }
  bool string(json::string_t& v) { return done(dom_.string(v)); }
  bool binary(json::binary_t& v) { return done(dom_.binary(v)); }
  bool start_object(std::size_t n) {
    frames_.push_back(Frame{false, "", {}, 0});
    return dom_.start_object(n);
  }
  bool key(json::string_t& k) {
    Frame& f = frames_.back();
    f.key = k;
    if (!f.keys.insert(k).second) duplicates.push_back(path());
    return dom_.key(k);
  }
  bool end_object() {
    frames_.pop_back();
    return done(dom_.end_object());
  }
  bool start_array(std::size_t n) {
    frames_.push_back(Frame{true, "", {}, 0});
    return dom_.start_array(n);
  }
  bool end_array() {
    frames_.pop_back();
    return done(dom_.end_array());
  }
  // Throws `ex` with its own type (parse_error, out_of_range), as json::parse does.
  template <typename Exception>
  bool parse_error(std::size_t pos, const std::string& token, const Exception& ex) {
    return dom_.parse_error(pos, token, ex);
  }

 private:
  struct Frame {
    bool array = false;
    std::string key;             // objects: the current key
    std::set<std::string> keys;  // objects: every key so far
    std::size_t done = 0;        // arrays: elements completed
  };
  bool done(bool ok) {
    if (!frames_.empty() && frames_.back().array) ++frames_.back().done;
    return ok;
  }

  nlohmann::detail::json_sax_dom_parser<json> dom_;
  std::vector<Frame> frames_;
};

}  // namespace

std::optional<std::string> precheck_document(std::string_view text) { return prescan(text); }

Result<json> parse_document(std::string_view text) {
  if (auto bad = prescan(text)) return Error{*bad};
  json doc;
  PathTrackingSax handler(doc);
  auto path_now = [&handler] { return handler.path(); };
  try {
    json::sax_parse(text.begin(), text.end(), &handler, json::input_format_t::json, /*strict=*/true,
                    /*ignore_comments=*/true);
  } catch (const json::out_of_range& e) {
    // 406: a number beyond the range of a double. The message quotes the number.
    std::string what = e.what();
    const auto open = what.find('\'');
    const auto close = what.rfind('\'');
    if (e.id == 406 && open != std::string::npos && close > open) {
      Diagnostics diag;
      diag.add(path_now(), what.substr(open + 1, close - open - 1) + " is beyond the range of a number (about 1.8e308)");
      return Error{diag.joined()};
    }
    return Error{printable("invalid JSON: " + what)};
  } catch (const json::exception& e) {
    // parse_error: the library's "[json.exception.parse_error.101] " prefix is dropped,
    // and the bytes it quotes from the input are made printable (the input may be binary).
    std::string what = e.what();
    if (auto pos = what.find("] "); what.rfind("[json.exception", 0) == 0 && pos != std::string::npos) {
      what = what.substr(pos + 2);
    }
    return Error{printable("invalid JSON: " + what)};
  }
  if (!handler.duplicates.empty()) {
    Diagnostics diag;
    for (const auto& path : handler.duplicates) diag.add(path, "duplicate key (each key may appear once)");
    return Error{diag.joined()};
  }
  return doc;
}

}  // namespace stepcast::reader

namespace stepcast {

std::string seconds_text(double s) {
  if (s >= 1) return fmt::format("{:.3f} s", s);
  if (s >= 1e-3) return fmt::format("{:.2f} ms", s * 1e3);
  return fmt::format("{:.1f} us", s * 1e6);
}

std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    const auto b = static_cast<unsigned char>(text[i]);
    std::size_t n = 1;
    if (b >= 0x20 && b < 0x7F) {
      out += text[i];
    } else if (b == '\n') {
      out += "\\n";
    } else if (b == '\r') {
      out += "\\r";
    } else if (b == '\t') {
      out += "\\t";
    } else if (b < 0x80) {  // other control characters, DEL
      out += fmt::format("\\u{:04X}", b);
    } else if ((n = reader::utf8_sequence_length(text, i)) != 0) {
      out.append(text.substr(i, n));
    } else {
      n = 1;
      out += fmt::format("\\x{:02X}", b);
    }
    i += n;
  }
  return out;
}

int edit_distance(std::string_view a, std::string_view b) {
  std::vector<int> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = static_cast<int>(j);
  for (std::size_t i = 1; i <= a.size(); ++i) {
    int diag = row[0];
    row[0] = static_cast<int>(i);
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const int up = row[j];
      const int cost = a[i - 1] == b[j - 1] ? 0 : 1;
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + cost});
      diag = up;
    }
  }
  return row[b.size()];
}

}  // namespace stepcast

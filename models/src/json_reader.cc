#include "json_reader.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace stepcast::detail {

void Diagnostics::add(const std::string& path, const std::string& reason) {
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
  return out;
}

std::string closest(std::string_view word, const std::vector<std::string>& candidates) {
  // A unique completion beats edit distance: "h100" is 2 edits from "b200" but the
  // start of "h100-sxm".
  if (word.size() >= 3) {
    const std::string* completion = nullptr;
    int completions = 0;
    for (const auto& c : candidates) {
      if (c.size() > word.size() && std::string_view(c).substr(0, word.size()) == word &&
          (!completion || c != *completion)) {
        completion = &c;
        ++completions;
      }
    }
    if (completions == 1) return *completion;
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

void ObjectReader::finish() {
  for (auto it = obj_.begin(); it != obj_.end(); ++it) {  // nlohmann objects iterate in key order
    if (std::find(known_.begin(), known_.end(), it.key()) != known_.end()) continue;
    std::string msg = "unknown key";
    const std::string near = closest(it.key(), known_);
    if (!near.empty()) msg += "; did you mean \"" + near + "\"?";
    diag_.add(path_of(it.key()), msg);
  }
}

}  // namespace stepcast::detail

namespace stepcast {

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
    } else if ((n = detail::utf8_sequence_length(text, i)) != 0) {
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

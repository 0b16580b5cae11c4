#include "json_edit.h"

#include <nlohmann/json.hpp>

namespace stepcast::gui {
namespace {

struct Member {
  std::string key;
  std::size_t key_begin = 0;
  std::size_t value_begin = 0, value_end = 0;  // [begin, end)
};

struct Object {
  std::size_t open = 0, close = 0;  // positions of '{' and '}'
  std::vector<Member> members;
};

// A scanner over the loader's JSON dialect (// and /* */ comments): spans, not values.
class Scanner {
 public:
  explicit Scanner(std::string_view t) : t_(t) {}

  std::size_t skip(std::size_t p) const {
    while (p < t_.size()) {
      const char c = t_[p];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++p;
      } else if (c == '/' && p + 1 < t_.size() && t_[p + 1] == '/') {
        while (p < t_.size() && t_[p] != '\n') ++p;
      } else if (c == '/' && p + 1 < t_.size() && t_[p + 1] == '*') {
        const std::size_t e = t_.find("*/", p + 2);
        if (e == std::string_view::npos) throw std::runtime_error("unterminated comment");
        p = e + 2;
      } else {
        break;
      }
    }
    return p;
  }

  // The end of the string starting at p (a '"'); its decoded text in `out`.
  std::size_t string_end(std::size_t p, std::string* out) const {
    std::size_t q = p + 1;
    while (q < t_.size() && t_[q] != '"') q += t_[q] == '\\' ? 2 : 1;
    if (q >= t_.size()) throw std::runtime_error("unterminated string");
    if (out) *out = nlohmann::json::parse(t_.substr(p, q + 1 - p)).get<std::string>();
    return q + 1;
  }

  // The end of the value starting at p (after whitespace).
  std::size_t value_end(std::size_t p, int depth = 0) const {
    if (depth > 64) throw std::runtime_error("nesting too deep");
    if (p >= t_.size()) throw std::runtime_error("unexpected end of document");
    const char c = t_[p];
    if (c == '"') return string_end(p, nullptr);
    if (c == '{') return object(p, depth).close + 1;
    if (c == '[') {
      std::size_t q = skip(p + 1);
      if (q < t_.size() && t_[q] == ']') return q + 1;
      for (;;) {
        q = skip(value_end(q, depth + 1));
        if (q >= t_.size()) throw std::runtime_error("unterminated array");
        if (t_[q] == ']') return q + 1;
        if (t_[q] != ',') throw std::runtime_error("expected ',' or ']' in an array");
        q = skip(q + 1);
      }
    }
    std::size_t q = p;
    while (q < t_.size() && std::string_view("{}[],: \t\r\n/\"").find(t_[q]) == std::string_view::npos) ++q;
    if (q == p) throw std::runtime_error(std::string("unexpected '") + c + "'");
    return q;
  }

  Object object(std::size_t p, int depth = 0) const {
    if (p >= t_.size() || t_[p] != '{') throw std::runtime_error("expected an object");
    Object o;
    o.open = p;
    std::size_t q = skip(p + 1);
    if (q < t_.size() && t_[q] == '}') {
      o.close = q;
      return o;
    }
    for (;;) {
      if (q >= t_.size() || t_[q] != '"') throw std::runtime_error("expected a key");
      Member m;
      m.key_begin = q;
      q = skip(string_end(q, &m.key));
      if (q >= t_.size() || t_[q] != ':') throw std::runtime_error("expected ':' after \"" + m.key + "\"");
      m.value_begin = skip(q + 1);
      m.value_end = value_end(m.value_begin, depth + 1);
      o.members.push_back(m);
      q = skip(m.value_end);
      if (q >= t_.size()) throw std::runtime_error("unterminated object");
      if (t_[q] == '}') {
        o.close = q;
        return o;
      }
      if (t_[q] != ',') throw std::runtime_error("expected ',' or '}' in an object");
      q = skip(q + 1);
    }
  }

  Object root() const { return object(skip(0)); }

 private:
  std::string_view t_;
};

const Member* find(const Object& o, const std::string& key) {
  for (const Member& m : o.members) {
    if (m.key == key) return &m;
  }
  return nullptr;
}

// The indentation (spaces and tabs) of the line holding position p.
std::string indent_at(std::string_view t, std::size_t p) {
  std::size_t b = t.rfind('\n', p == 0 ? 0 : p - 1);
  b = b == std::string_view::npos ? 0 : b + 1;
  std::size_t e = b;
  while (e < t.size() && (t[e] == ' ' || t[e] == '\t')) ++e;
  return std::string(t.substr(b, e - b));
}

std::string member_text(const std::vector<std::string>& path, std::size_t from, std::string_view value_json) {
  std::string v(value_json);
  for (std::size_t i = path.size(); i-- > from + 1;) v = "{ " + nlohmann::json(path[i]).dump() + ": " + v + " }";
  return nlohmann::json(path[from]).dump() + ": " + v;
}

// Where `path` leads from the root: the deepest object reached, the index of its key
// there (`level`), and the member when the whole path exists.
struct Walk {
  Object object;
  std::size_t level = 0;
  const Member* member = nullptr;
};

// Throws when a parent on the path is not an object.
Walk walk(const Scanner& s, std::string_view text, const std::vector<std::string>& path) {
  if (path.empty()) throw std::runtime_error("empty path");
  Walk w{s.root(), 0, nullptr};
  for (;; ++w.level) {
    const Member* m = find(w.object, path[w.level]);
    if (!m) return w;
    if (w.level + 1 == path.size()) {
      w.member = m;
      return w;
    }
    if (text[m->value_begin] != '{') throw std::runtime_error("\"" + path[w.level] + "\" is not an object");
    w.object = s.object(m->value_begin);
  }
}

}  // namespace

std::optional<std::string> set_json_value(std::string_view text, const std::vector<std::string>& path,
                                          std::string_view value_json, std::string* error) {
  try {
    const Scanner s(text);
    const Walk w = walk(s, text, path);
    const Object& o = w.object;
    std::string out(text);
    if (w.member) return out.replace(w.member->value_begin, w.member->value_end - w.member->value_begin, value_json);
    const std::string member = member_text(path, w.level, value_json);
    if (o.members.empty()) return out.insert(o.close, member);
    const Member& last = o.members.back();
    const bool multiline = text.substr(o.open, o.close - o.open).find('\n') != std::string_view::npos;
    if (!multiline) return out.insert(last.value_end, ", " + member);
    // After the last member's line (and any comment on it), indented as that member.
    std::size_t p = last.value_end;
    while (p < text.size() && (text[p] == ' ' || text[p] == '\t')) ++p;
    if (text.substr(p, 2) == "//") {
      while (p < text.size() && text[p] != '\n') ++p;
    } else {
      p = last.value_end;
    }
    if (p > o.close) p = last.value_end;
    out.insert(p, "\n" + indent_at(text, last.key_begin) + member);
    return out.insert(last.value_end, ",");
  } catch (const std::exception& e) {
    if (error) *error = e.what();
  }
  return std::nullopt;
}

std::optional<std::string> remove_json_member(std::string_view text, const std::vector<std::string>& path,
                                              std::string* error) {
  try {
    if (path.empty()) throw std::invalid_argument("empty path");
    const Scanner s(text);
    Walk w;
    try {
      w = walk(s, text, path);
    } catch (const std::runtime_error&) {
      // A parent that is not an object holds no such member (a scan error is rethrown below).
      s.root();
      return std::string(text);
    }
    if (!w.member) return std::string(text);
    const std::vector<Member>& ms = w.object.members;
    const std::size_t k = static_cast<std::size_t>(w.member - ms.data());
    std::string out(text);
    if (k + 1 < ms.size()) return out.erase(w.member->key_begin, ms[k + 1].key_begin - w.member->key_begin);
    if (k > 0) return out.erase(ms[k - 1].value_end, w.member->value_end - ms[k - 1].value_end);
    return out.erase(w.member->key_begin, w.member->value_end - w.member->key_begin);
  } catch (const std::exception& e) {
    if (error) *error = e.what();
  }
  return std::nullopt;
}

}  // namespace stepcast::gui

#include "stepcast/analysis/format.h"

#include <algorithm>

#include <fmt/format.h>

namespace stepcast::analysis {

std::string rank_ranges(std::vector<int> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  std::string out;
  for (std::size_t i = 0; i < v.size();) {
    std::size_t j = i;
    while (j + 1 < v.size() && v[j + 1] == v[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += j == i ? std::to_string(v[i]) : fmt::format("{}-{}", v[i], v[j]);
    i = j + 1;
  }
  return out;
}

std::vector<int> parse_rank_ranges(const std::string& text) {
  std::vector<int> out;
  std::size_t i = 0;
  auto number = [&](int& x) {
    const std::size_t start = i;
    x = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9' && i - start < 9) x = x * 10 + (text[i++] - '0');
    return i > start;
  };
  while (i < text.size()) {
    int a = 0, b = 0;
    if (!number(a)) break;
    b = a;
    if (i < text.size() && text[i] == '-') {
      ++i;
      if (!number(b) || b < a) break;
    }
    for (int r = a; r <= b; ++r) out.push_back(r);
    if (i >= text.size() || text[i] != ',') break;
    ++i;
  }
  return out;
}

std::string join_ints(const std::vector<int>& v, const char* sep) {
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? sep : "") + std::to_string(v[i]);
  return out;
}

std::string human_duration(double s) {
  if (s >= 0.1) return fmt::format("{:.3f} s", s);
  if (s >= 1e-4) return fmt::format("{:.2f} ms", s * 1e3);
  return fmt::format("{:.1f} us", s * 1e6);
}

}  // namespace stepcast::analysis

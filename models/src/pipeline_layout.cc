#include "stepcast/models/pipeline_layout.h"

#include <cctype>
#include <cstddef>
#include <optional>
#include <string>

#include <fmt/format.h>

namespace stepcast {

namespace {

constexpr int kMaxRepeat = 10000;
constexpr std::size_t kMaxExpanded = 1'000'000;  // characters after expansion

// Recursive-descent expansion of "X*N" and "(...)*N" into the plain character sequence.
class Expander {
 public:
  explicit Expander(std::string_view text) : text_(text) {}

  Result<std::string> run() {
    std::string out;
    if (auto err = sequence(out, 0)) return Error{*err};
    if (pos_ < text_.size()) return Error{at(pos_, "')' without its '('")};
    return out;
  }

 private:
  std::string at(std::size_t i, const std::string& why) const {
    return fmt::format("\"{}\": {} (character {})", text_, why, i + 1);
  }

  // Items until the end or a ')'. Returns an error message or nothing.
  std::optional<std::string> sequence(std::string& out, int depth) {
    if (depth > 32) return at(pos_, "parentheses nested deeper than 32");
    while (pos_ < text_.size() && text_[pos_] != ')') {
      std::string item;
      const char ch = text_[pos_];
      if (ch == '(') {
        const std::size_t open = pos_++;
        if (auto err = sequence(item, depth + 1)) return err;
        if (pos_ >= text_.size()) return at(open, "'(' without its ')'");
        ++pos_;  // ')'
      } else if (ch == 'E' || ch == 't' || ch == 'm' || ch == 'L' || ch == '|') {
        item = ch;
        ++pos_;
      } else {
        return at(pos_, fmt::format("'{}' is not one of E, t, m, L, |, (, ), *N", ch));
      }
      int times = 1;
      if (pos_ < text_.size() && text_[pos_] == '*') {
        const std::size_t star = pos_++;
        std::size_t end = pos_;
        while (end < text_.size() && std::isdigit(static_cast<unsigned char>(text_[end])) && end - pos_ < 6) ++end;
        if (end == pos_) return at(star, "'*' without a count after it");
        times = std::stoi(std::string(text_.substr(pos_, end - pos_)));
        if (times < 1 || times > kMaxRepeat)
          return at(star, fmt::format("repeat count {} outside 1..{}", times, kMaxRepeat));
        pos_ = end;
      }
      if (out.size() + item.size() * static_cast<std::size_t>(times) > kMaxExpanded) {
        return at(pos_ - 1, fmt::format("expands to more than {} characters", kMaxExpanded));
      }
      for (int i = 0; i < times; ++i) out += item;
    }
    return std::nullopt;
  }

  std::string_view text_;
  std::size_t pos_ = 0;
};

}  // namespace

Result<PipelineLayout> parse_pipeline_layout(std::string_view text) {
  auto expanded = Expander(text).run();
  if (!expanded.ok()) return expanded.error();
  const std::string& s = *expanded;
  PipelineLayout out;
  out.layers.push_back(0);
  const std::size_t last_bar = s.rfind('|');
  bool loss = false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char ch = s[i];
    const bool last_chunk = last_bar == std::string::npos || i > last_bar;
    auto wrong = [&](const char* why) {
      return Error{
          fmt::format("\"{}\": '{}' {} (Megatron-Core's layout; stepcast runs the embedding on the first "
                      "chunk, the multi-token-prediction modules and the loss on the last)",
                      text, ch, why)};
    };
    if (loss) return wrong("follows the loss 'L', which must end the layout");
    switch (ch) {
      case '|': out.layers.push_back(0); break;
      case 't':
        if (out.mtp > 0) return wrong("follows an 'm': the decoder layers come before the MTP modules");
        ++out.layers.back();
        break;
      case 'E':
        if (i != 0) return wrong("must open the first chunk (the embedding)");
        break;
      case 'm':
        if (!last_chunk) return wrong("must stand in the last chunk");
        ++out.mtp;
        break;
      case 'L':
        if (i + 1 != s.size()) return wrong("must end the layout (the loss on the last chunk)");
        loss = true;
        break;
      default: break;
    }
  }
  if (s.empty() || s.front() != 'E') {
    return Error{fmt::format("\"{}\": the first chunk must open with 'E' (the embedding)", text)};
  }
  if (!loss) return Error{fmt::format("\"{}\": the last chunk must end with 'L' (the loss)", text)};
  return out;
}

std::string pipeline_layout_text(const std::vector<int>& layers) {
  std::string out;
  for (std::size_t i = 0; i < layers.size();) {
    std::size_t j = i;
    while (j < layers.size() && layers[j] == layers[i]) ++j;
    if (!out.empty()) out += ',';
    out += j - i > 1 ? fmt::format("{}x{}", layers[i], j - i) : std::to_string(layers[i]);
    i = j;
  }
  return out;
}

}  // namespace stepcast

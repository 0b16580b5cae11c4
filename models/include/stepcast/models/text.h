// Text helpers for user-facing messages, shared by every loader and parser.
#pragma once

#include <string>
#include <string_view>

namespace stepcast {

// `text` safe to quote on one line of a message: printable ASCII and well-formed UTF-8 kept,
// \n \r \t escaped, other control characters as \u00XX, malformed bytes as \xNN.
std::string printable(std::string_view text);

// Levenshtein distance, for "did you mean".
int edit_distance(std::string_view a, std::string_view b);

// A duration for reports: "1.234 s", "12.34 ms", "56.7 us".
std::string seconds_text(double s);

}  // namespace stepcast

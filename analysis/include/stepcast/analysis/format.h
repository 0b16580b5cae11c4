// Small formatting rules shared by the analysis reports (and the simulator's
// counterfactual reports, which quote them): rank lists as ranges, durations for a sentence.
#pragma once

#include <string>
#include <vector>

namespace stepcast::analysis {

// "0-3,5,7-9": the ranks, sorted and deduplicated, as ranges (the form of the engine's
// hang report). "" when empty.
std::string rank_ranges(std::vector<int> ranks);
// The inverse of rank_ranges(): "0-3,5" -> {0, 1, 2, 3, 5}; stops at the first malformed
// item (what was read before it is returned).
std::vector<int> parse_rank_ranges(const std::string& text);
// "3, 6, 9" with `sep` ", ": the values in their order.
std::string join_ints(const std::vector<int>& values, const char* sep);
// A duration for a sentence: seconds with 3 decimals from 0.1 s, else ms with 2 decimals
// from 0.1 ms, else us with 1 (a tiny test model's 4 ms step must not read "0.004 s").
std::string human_duration(double seconds);

}  // namespace stepcast::analysis

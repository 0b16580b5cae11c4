// One rank's spans as rows [op, step, stream, post_ns, begin_ns, end_ns] and its step ends
// as nanoseconds: the shared layout of the rank wire format (wire.cc) and measured.json
// (measurement.cc).
#pragma once

#include <nlohmann/json.hpp>

#include "stepcast/models/timeline.h"

namespace stepcast::exec {

inline constexpr const char* kSpansColumns = "op, step, stream, post_ns, begin_ns, end_ns";

inline nlohmann::json spans_json(const RankTimeline& t) {
  nlohmann::json spans = nlohmann::json::array();
  for (const Span& s : t.spans) {
    spans.push_back({s.op, s.step, static_cast<int>(s.stream), s.post.ns(), s.begin.ns(), s.end.ns()});
  }
  return spans;
}

inline nlohmann::json step_end_json(const RankTimeline& t) {
  nlohmann::json ends = nlohmann::json::array();
  for (SimTime e : t.step_end) ends.push_back(e.ns());
  return ends;
}

}  // namespace stepcast::exec

#include "stepcast/executor/wire.h"

#include <nlohmann/json.hpp>

#include "spans_json.h"

namespace stepcast::exec {

using nlohmann::json;

std::string rank_result_wire(const RankResult& r) {
  return json{{"rank", r.timeline.rank}, {"stage", r.timeline.stage}, {"spans", spans_json(r.timeline)},
              {"step_end", step_end_json(r.timeline)},
              {"step_s", r.step_s}, {"verified", r.verified_elements}, {"wrong", r.wrong_elements},
              {"errors", r.errors}, {"peak", r.peak_memory_bytes}, {"predicted_peak", r.predicted_peak_bytes}}
      .dump();
}

namespace {

void read_spans(const json& j, RankTimeline& t) {
  for (const json& s : j.at("spans")) {
    Span sp;
    sp.op = s.at(0).get<std::uint32_t>();
    sp.step = s.at(1).get<std::uint16_t>();
    sp.stream = static_cast<Stream>(s.at(2).get<int>());
    sp.post = SimTime::from_ns(s.at(3).get<std::int64_t>());
    sp.begin = SimTime::from_ns(s.at(4).get<std::int64_t>());
    sp.end = SimTime::from_ns(s.at(5).get<std::int64_t>());
    t.spans.push_back(sp);
  }
  for (const json& e : j.at("step_end")) t.step_end.push_back(SimTime::from_ns(e.get<std::int64_t>()));
}

}  // namespace

RankResult rank_result_from_wire(const std::string& s) {
  const json j = json::parse(s);
  RankResult r;
  r.timeline.rank = j.at("rank").get<int>();
  r.timeline.stage = j.at("stage").get<int>();
  read_spans(j, r.timeline);
  r.step_s = j.at("step_s").get<std::vector<double>>();
  r.verified_elements = j.at("verified").get<std::int64_t>();
  r.wrong_elements = j.at("wrong").get<std::int64_t>();
  r.errors = j.at("errors").get<std::vector<std::string>>();
  r.peak_memory_bytes = j.at("peak").get<double>();
  r.predicted_peak_bytes = j.at("predicted_peak").get<double>();
  r.timeline.peak_bytes = r.peak_memory_bytes;
  return r;
}

}  // namespace stepcast::exec

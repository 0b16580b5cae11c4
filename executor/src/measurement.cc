#include "stepcast/executor/measurement.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "spans_json.h"
#include "stepcast/models/json_reader.h"

namespace stepcast::exec {

using nlohmann::json;

double Measurement::median_step_s() const {
  if (step_time_s.empty()) return 0;
  std::vector<double> v = step_time_s;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string measurement_json(const Measurement& m) {
  json ranks = json::array();
  for (const RankTimeline& r : m.timeline.ranks) {
    ranks.push_back({{"rank", r.rank}, {"stage", r.stage}, {"step_end", step_end_json(r)},
                     {"spans_columns", kSpansColumns}, {"spans", spans_json(r)}});
  }
  nlohmann::ordered_json j;
  j["format"] = 1;
  j["kind"] = "stepcast-measurement";
  j["scenario"] = m.scenario;
  j["scale_down"] = m.scale_down;
  j["backend"] = m.backend;
  j["device"] = m.device;
  j["communicator"] = m.communicator;
  j["host"] = m.host;
  j["ranks"] = m.ranks;
  j["warmup"] = m.warmup;
  j["steps"] = m.steps;
  j["step_time_s"] = m.step_time_s;
  j["step_time_median_s"] = m.median_step_s();
  j["predicted_step_time_s"] = m.predicted_step_time_s;
  if (m.predicted_p90_s > 0) {
    j["predicted_step_time_band_s"] = {{"p10", m.predicted_p10_s}, {"p90", m.predicted_p90_s}};
  }
  j["verification"] = {{"elements", m.verified_elements}, {"wrong", m.wrong_elements}, {"errors", m.errors}};
  j["memory"] = {{"peak_bytes", m.peak_memory_bytes}, {"predicted_peak_bytes", m.predicted_peak_bytes}};
  j["timeline"] = ranks;
  return j.dump(1) + "\n";
}

namespace {

constexpr std::int64_t kMaxInt = std::numeric_limits<int>::max();
constexpr std::int64_t kMaxI64 = std::numeric_limits<std::int64_t>::max();

// A non-negative integer array element (span rows, step ends) at `path`; nullopt with an
// error otherwise.
std::optional<std::int64_t> row_integer(const json& v, const std::string& path, std::int64_t max,
                                        reader::Diagnostics& diag) {
  if (v.is_number_unsigned() && v.get<std::uint64_t>() <= static_cast<std::uint64_t>(max)) {
    return v.get<std::int64_t>();
  }
  if (v.is_number_integer() && v.get<std::int64_t>() >= 0 && v.get<std::int64_t>() <= max) return v.get<std::int64_t>();
  if (v.is_number_integer() && v.get<std::int64_t>() >= 0) {
    diag.add(path, fmt::format("{} is out of range (0 to {})", reader::describe(v), max));
  } else {
    diag.add(path, "expected a non-negative integer, got " + reader::describe(v));
  }
  return std::nullopt;
}

// A list of numbers at `key` (required).
std::vector<double> number_list(reader::ObjectReader& r, std::string_view key, bool required) {
  std::vector<double> out;
  const json* a = r.array(key);
  if (a == nullptr) {
    if (required && !r.has(key)) r.diag().add(r.path_of(key), "missing (required)");
    return out;
  }
  for (std::size_t i = 0; i < a->size(); ++i) {
    const json& v = (*a)[i];
    if (!v.is_number() || v.get<double>() < 0) {
      r.diag().add(reader::index(r.path_of(key), i), "expected a non-negative number, got " + reader::describe(v));
      continue;
    }
    out.push_back(v.get<double>());
  }
  return out;
}

void read_rank(const json& v, const std::string& path, RankTimeline& t, reader::Diagnostics& diag) {
  if (!v.is_object()) {
    diag.add(path, "expected an object, got " + reader::describe(v));
    return;
  }
  reader::ObjectReader r(v, path, diag);
  t.rank = static_cast<int>(r.required_integer("rank", 0, kMaxInt).value_or(0));
  t.stage = static_cast<int>(r.required_integer("stage", 0, kMaxInt).value_or(0));
  r.ignore({"spans_columns"});
  if (const json* ends = r.array("step_end")) {
    for (std::size_t i = 0; i < ends->size(); ++i) {
      if (auto ns = row_integer((*ends)[i], reader::index(r.path_of("step_end"), i), kMaxI64, diag)) {
        t.step_end.push_back(SimTime::from_ns(*ns));
      }
    }
  } else if (!r.has("step_end")) {
    diag.add(r.path_of("step_end"), "missing (required)");
  }
  static constexpr const char* kColumns[] = {"op", "step", "stream", "post_ns", "begin_ns", "end_ns"};
  const std::int64_t limit[] = {std::numeric_limits<std::uint32_t>::max(), std::numeric_limits<std::uint16_t>::max(),
                              kNumStreams - 1, kMaxI64, kMaxI64, kMaxI64};
  if (const json* spans = r.array("spans")) {
    for (std::size_t i = 0; i < spans->size(); ++i) {
      const json& row = (*spans)[i];
      const std::string rp = reader::index(r.path_of("spans"), i);
      if (!row.is_array() || row.size() != 6) {
        diag.add(rp, fmt::format("expected a row [{}], got {}", kSpansColumns, reader::describe(row)));
        continue;
      }
      std::int64_t x[6] = {};
      bool ok = true;
      for (std::size_t c = 0; c < 6; ++c) {
        auto got = row_integer(row[c], rp + "." + kColumns[c], limit[c], diag);
        ok = ok && got.has_value();
        x[c] = got.value_or(0);
      }
      if (!ok) continue;
      Span s;
      s.op = static_cast<std::uint32_t>(x[0]);
      s.step = static_cast<std::uint16_t>(x[1]);
      s.stream = static_cast<Stream>(x[2]);
      s.post = SimTime::from_ns(x[3]);
      s.begin = SimTime::from_ns(x[4]);
      s.end = SimTime::from_ns(x[5]);
      t.spans.push_back(s);
    }
  } else if (!r.has("spans")) {
    diag.add(r.path_of("spans"), "missing (required)");
  }
  r.finish();
}

}  // namespace

Result<Measurement> parse_measurement(const std::string& text, const std::string& source) {
  auto doc = reader::parse_document(text);
  if (!doc.ok()) return Error{reader::prefix_lines(source, doc.error().message)};
  const json& j = *doc;
  if (!j.is_object()) return Error{source + ": expected a JSON object, got " + reader::describe(j)};
  if (!j.contains("kind") || j["kind"] != "stepcast-measurement") {
    return Error{source + ": kind: not a stepcast measurement (written by `stepcast execute`)"};
  }
  reader::Diagnostics diag;
  reader::ObjectReader r(j, "", diag);
  Measurement m;
  r.raw("kind");
  r.required_integer("format", 1, 1);
  m.scenario = r.required_string("scenario").value_or("");
  m.scale_down = static_cast<int>(r.required_integer("scale_down", 1, kMaxInt).value_or(1));
  m.backend = r.required_string("backend").value_or("");
  m.device = r.required_string("device").value_or("");
  m.communicator = r.required_string("communicator").value_or("");
  m.host = r.string("host").value_or("");
  m.ranks = static_cast<int>(r.required_integer("ranks", 1, kMaxInt).value_or(1));
  m.warmup = static_cast<int>(r.required_integer("warmup", 0, kMaxInt).value_or(0));
  m.steps = static_cast<int>(r.required_integer("steps", 1, kMaxInt).value_or(1));
  m.step_time_s = number_list(r, "step_time_s", true);
  r.number("step_time_median_s", 0, std::numeric_limits<double>::max());
  m.predicted_step_time_s = r.required_number("predicted_step_time_s", 0, std::numeric_limits<double>::max()).value_or(0);
  if (const json* band = r.object("predicted_step_time_band_s")) {
    reader::ObjectReader br(*band, r.path_of("predicted_step_time_band_s"), diag);
    m.predicted_p10_s = br.required_number("p10", 0, std::numeric_limits<double>::max()).value_or(0);
    m.predicted_p90_s = br.required_number("p90", 0, std::numeric_limits<double>::max()).value_or(0);
    if (m.predicted_p10_s > m.predicted_p90_s) {
      diag.add(br.path_of("p10"), fmt::format("{:g} is above p90 ({:g})", m.predicted_p10_s, m.predicted_p90_s));
    }
    br.finish();
  }
  if (const json* v = r.object("verification")) {
    reader::ObjectReader vr(*v, r.path_of("verification"), diag);
    m.verified_elements = vr.required_integer("elements", 0, kMaxI64).value_or(0);
    m.wrong_elements = vr.required_integer("wrong", 0, kMaxI64).value_or(0);
    if (const json* errs = vr.array("errors")) {
      for (std::size_t i = 0; i < errs->size(); ++i) {
        if ((*errs)[i].is_string()) m.errors.push_back((*errs)[i].get<std::string>());
        else diag.add(reader::index(vr.path_of("errors"), i), "expected a string, got " + reader::describe((*errs)[i]));
      }
    }
    vr.finish();
  } else if (!r.has("verification")) {
    diag.add("verification", "missing (required)");
  }
  if (const json* mem = r.object("memory")) {
    reader::ObjectReader mr(*mem, r.path_of("memory"), diag);
    m.peak_memory_bytes = number_list(mr, "peak_bytes", false);
    m.predicted_peak_bytes = number_list(mr, "predicted_peak_bytes", false);
    mr.finish();
  }
  if (const json* tl = r.array("timeline")) {
    for (std::size_t i = 0; i < tl->size(); ++i) {
      RankTimeline t;
      read_rank((*tl)[i], reader::index("timeline", i), t, diag);
      m.timeline.ranks.push_back(std::move(t));
    }
  } else if (!r.has("timeline")) {
    diag.add("timeline", "missing (required)");
  }
  r.finish();
  if (!diag.empty()) return Error{reader::prefix_lines(source, diag.joined())};
  for (const RankTimeline& rt : m.timeline.ranks) {
    if (m.timeline.step_end.size() < rt.step_end.size()) m.timeline.step_end.resize(rt.step_end.size());
    for (std::size_t s = 0; s < rt.step_end.size(); ++s) {
      m.timeline.step_end[s] = std::max(m.timeline.step_end[s], rt.step_end[s]);
    }
  }
  return m;
}

Result<Measurement> read_measurement(const std::string& path) {
  auto text = reader::read_input_file(path, kMaxMeasurementBytes);
  if (!text.ok()) return text.error();
  return parse_measurement(*text, path);
}

bool looks_like_measurement(const std::string& text) {
  const auto head = text.substr(0, 256);
  return head.find("\"kind\": \"stepcast-measurement\"") != std::string::npos;
}

}  // namespace stepcast::exec

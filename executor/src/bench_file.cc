#include "stepcast/executor/bench_file.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "stepcast/models/json_reader.h"

namespace stepcast::exec {

using nlohmann::json;

std::string bench_json(const BenchFile& b) {
  nlohmann::ordered_json j;
  j["format"] = 1;
  j["kind"] = "stepcast-bench";
  j["bench"] = b.kind;
  j["device"] = b.device;
  j["communicator"] = b.communicator;
  j["ranks"] = b.ranks;
  json pts = json::array();
  for (const GemmPoint& g : b.gemm) {
    pts.push_back({{"m", g.shape.m}, {"n", g.shape.n}, {"k", g.shape.k}, {"time_s", g.time_s},
                   {"tflops", g.shape.flops() / g.time_s / 1e12}});
  }
  for (const CollectivePoint& c : b.collectives) {
    const double algbw = c.bytes / c.time_s / 1e9;
    pts.push_back({{"collective", std::string(to_string(c.kind))}, {"bytes", c.bytes}, {"count", c.count},
                   {"ranks", c.ranks}, {"inter_node", c.inter_node}, {"time_s", c.time_s}, {"algbw_GBps", algbw},
                   {"busbw_GBps", algbw * bus_factor(c.kind, c.ranks)}, {"wrong", c.wrong}});
  }
  j["results"] = pts;
  return j.dump(1) + "\n";
}


namespace {

constexpr double kMaxDouble = std::numeric_limits<double>::max();
constexpr std::int64_t kMaxI64 = std::numeric_limits<std::int64_t>::max();

// A point's time_s: positive, and large enough that the rates bench_json derives from it
// (`work` / time_s: TFLOP/s, GB/s) are finite, so that the file it writes loads again.
double positive_time(reader::ObjectReader& r, double work) {
  if (!r.has("time_s")) {
    r.diag().add(r.path_of("time_s"), "missing (required)");
    return 0;
  }
  const std::optional<double> t = r.number("time_s", 0, kMaxDouble, false, true);
  if (!t) return 0;
  if (!std::isfinite(work / *t)) {
    r.diag().add(r.path_of("time_s"), fmt::format("{} is too small for the point's work ({:g})", *t, work));
    return 0;
  }
  return *t;
}

void read_point(const json& p, const std::string& path, BenchFile& b, reader::Diagnostics& diag) {
  if (!p.is_object()) {
    diag.add(path, "expected an object, got " + reader::describe(p));
    return;
  }
  reader::ObjectReader r(p, path, diag);
  if (r.has("m")) {
    GemmPoint g;
    g.shape.m = r.required_integer("m", 1, kMaxI64).value_or(1);
    g.shape.n = r.required_integer("n", 1, kMaxI64).value_or(1);
    g.shape.k = r.required_integer("k", 1, kMaxI64).value_or(1);
    g.time_s = positive_time(r, g.shape.flops());
    r.number("tflops", 0, kMaxDouble);
    b.gemm.push_back(g);
  } else {
    CollectivePoint c;
    std::vector<std::string> names;
    const std::vector<CollKind> kinds = {CollKind::kAllReduce, CollKind::kAllGather, CollKind::kReduceScatter,
                                         CollKind::kAllToAll, CollKind::kBroadcast, CollKind::kSendRecv};
    for (CollKind k : kinds) names.emplace_back(to_string(k));
    if (r.has("collective")) {
      if (auto k = r.choice("collective", names)) {
        for (CollKind kind : kinds) {
          if (to_string(kind) == *k) c.kind = kind;
        }
      }
    } else {
      diag.add(path, "expected a GEMM point (m, n, k, time_s) or a collective point (collective, bytes, ...)");
      return;
    }
    c.bytes = r.required_number("bytes", 0, kMaxDouble).value_or(0);
    c.count = static_cast<std::size_t>(r.required_integer("count", 0, kMaxI64).value_or(0));
    c.ranks = static_cast<int>(r.required_integer("ranks", 1, std::numeric_limits<int>::max()).value_or(1));
    if (r.has("inter_node")) c.inter_node = r.boolean("inter_node").value_or(false);
    else diag.add(r.path_of("inter_node"), "missing (required)");
    c.time_s = positive_time(r, c.bytes * std::max(1.0, bus_factor(c.kind, c.ranks)));
    c.wrong = r.required_integer("wrong", 0, kMaxI64).value_or(0);
    r.number("algbw_GBps", 0, kMaxDouble);
    r.number("busbw_GBps", 0, kMaxDouble);
    b.collectives.push_back(c);
  }
  r.finish();
}

}  // namespace

Result<BenchFile> parse_bench(const std::string& text, const std::string& source) {
  auto doc = reader::parse_document(text);
  if (!doc.ok()) return Error{reader::prefix_lines(source, doc.error().message)};
  const json& j = *doc;
  if (!j.is_object() || !j.contains("kind") || j["kind"] != "stepcast-bench") {
    return Error{source + ": kind: not a stepcast bench file (written by `stepcast bench ... --json FILE`)"};
  }
  reader::Diagnostics diag;
  reader::ObjectReader r(j, "", diag);
  BenchFile b;
  r.raw("kind");
  r.required_integer("format", 1, 1);
  b.kind = r.choice("bench", {"gemm", "collectives"}).value_or("");
  if (!r.has("bench")) diag.add("bench", "missing (required)");
  b.device = r.string("device").value_or("");
  b.communicator = r.string("communicator").value_or("");
  b.ranks = static_cast<int>(r.integer("ranks", 1, std::numeric_limits<int>::max()).value_or(1));
  if (const json* pts = r.array("results")) {
    for (std::size_t i = 0; i < pts->size(); ++i) read_point((*pts)[i], reader::index("results", i), b, diag);
  } else if (!r.has("results")) {
    diag.add("results", "missing (required)");
  }
  r.finish();
  if (!diag.empty()) return Error{reader::prefix_lines(source, diag.joined())};
  return b;
}

Result<BenchFile> read_bench(const std::string& path) {
  auto text = reader::read_input_file(path);
  if (!text.ok()) return text.error();
  return parse_bench(*text, path);
}

}  // namespace stepcast::exec

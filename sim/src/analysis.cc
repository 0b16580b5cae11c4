#include "stepcast/sim/analysis.h"

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "stepcast/models/compute.h"
#include "stepcast/models/estimate.h"

namespace stepcast::sim {

namespace {

RankBreakdown analyze_rank(const Program& program, const RankTimeline& r, std::int64_t end, int steps) {
  const RoleTemplate& role = program.roles[static_cast<std::size_t>(r.stage)];
  std::vector<PartInterval> iv;
  iv.reserve(r.spans.size() * 2);
  for (const Span& s : r.spans) {
    const Op& op = role.ops[s.op];
    if (op.kind == OpKind::kAlloc || op.kind == OpKind::kFree || op.kind == OpKind::kSend) continue;
    if (op.stream == Stream::kCompute) {
      if (s.end == s.begin) continue;
      const Part c = op.cclass == ComputeClass::kOptimizer ? Part::kOptimizer
                     : op.cclass == ComputeClass::kInput   ? Part::kInput
                                                           : Part::kCompute;
      iv.push_back({s.begin.ns(), s.end.ns(), c});
      continue;
    }
    if (s.begin > s.post && op.kind == OpKind::kCollective) iv.push_back({s.post.ns(), s.begin.ns(), Part::kWait});
    if (s.end > s.begin) iv.push_back({s.begin.ns(), s.end.ns(), transfer_part(op.stream)});
  }
  RankBreakdown b = sweep_breakdown(r.rank, r.stage, iv, end, steps);
  b.peak_bytes = r.peak_bytes;
  return b;
}

}  // namespace

Part transfer_part(Stream stream) {
  switch (stream) {
    case Stream::kTp: return Part::kTp;
    case Stream::kCp: return Part::kCp;
    case Stream::kEp: return Part::kEp;
    case Stream::kPp:
    case Stream::kPpRecv: return Part::kPp;
    case Stream::kDp:
    case Stream::kCompute: break;
  }
  return Part::kDp;
}

RankBreakdown sweep_breakdown(int rank, int stage, const std::vector<PartInterval>& intervals, std::int64_t end,
                              int steps) {
  constexpr int kParts = 9;
  struct Point {
    std::int64_t t;
    int delta;
    int part;
    bool operator<(const Point& o) const { return t < o.t; }
  };
  std::vector<Point> pts;
  pts.reserve(intervals.size() * 2);
  for (const PartInterval& i : intervals) {
    pts.push_back({i.begin_ns, +1, static_cast<int>(i.part)});
    pts.push_back({i.end_ns, -1, static_cast<int>(i.part)});
  }
  std::stable_sort(pts.begin(), pts.end());
  double acc[kParts + 1] = {};
  int count[kParts] = {};
  std::int64_t t = 0;
  auto account = [&](std::int64_t until) {
    if (until <= t) return;
    int part = kParts;  // bubble
    for (int c = 0; c < kParts; ++c) {
      if (count[c] > 0) {
        part = c;
        break;
      }
    }
    acc[part] += static_cast<double>(until - t);
    t = until;
  };
  for (const Point& p : pts) {
    account(std::min(p.t, end));
    count[p.part] += p.delta;
  }
  account(end);
  const double k = 1e-9 / steps;
  RankBreakdown b;
  b.rank = rank;
  b.stage = stage;
  b.compute = acc[static_cast<int>(Part::kCompute)] * k;
  b.optimizer = acc[static_cast<int>(Part::kOptimizer)] * k;
  b.input = acc[static_cast<int>(Part::kInput)] * k;
  b.tp = acc[static_cast<int>(Part::kTp)] * k;
  b.cp = acc[static_cast<int>(Part::kCp)] * k;
  b.ep = acc[static_cast<int>(Part::kEp)] * k;
  b.pp = acc[static_cast<int>(Part::kPp)] * k;
  b.dp = acc[static_cast<int>(Part::kDp)] * k;
  b.wait = acc[static_cast<int>(Part::kWait)] * k;
  b.bubble = acc[kParts] * k;
  return b;
}

SimSummary analyze(const Program& program, const Timeline& tl) {
  SimSummary out;
  const int steps = static_cast<int>(tl.step_end.size());
  SimTime prev;
  for (SimTime e : tl.step_end) {
    out.step_times_s.push_back((e - prev).seconds());
    prev = e;
  }
  if (steps == 0) return out;
  out.step_time_s = tl.step_end.back().seconds() / steps;
  for (const RankTimeline& r : tl.ranks) {
    out.ranks.push_back(analyze_rank(program, r, tl.step_end.back().ns(), steps));
  }
  for (std::size_t i = 0; i < out.ranks.size(); ++i) {
    const RankBreakdown& b = out.ranks[i];
    const RankBreakdown& c = out.ranks[out.critical];
    if (b.bubble + b.wait < c.bubble + c.wait) out.critical = i;
    if (b.peak_bytes > out.ranks[out.peak].peak_bytes) out.peak = i;
  }
  return out;
}

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::int64_t whole(double bytes) { return static_cast<std::int64_t>(std::llround(bytes)); }

}  // namespace

std::string simulate_report_json(const Scenario& s, const Program& program, const SimSummary& sum,
                                 bool full, int steps) {
  const RankBreakdown& c = sum.ranks[sum.critical];
  const RankBreakdown& pk = sum.ranks[sum.peak];
  const MemoryBreakdown mem = stage_memory(s.model, s.cluster, s.plan, s.workload, pk.stage);
  const double world = program.placement.world();
  nlohmann::ordered_json j;
  j["format"] = 1;
  j["scenario"] = s.name;
  j["command"] = "simulate";
  j["mode"] = full ? "full" : "representative";
  j["steps"] = steps;
  j["world"] = program.placement.world();
  j["params_total"] = count_params(s.model).total;
  j["tokens_per_step"] = program.tokens_per_step;
  j["model_flops_per_step"] = program.model_flops_per_step;
  j["step_time_s"] = sum.step_time_s;
  j["step_times_s"] = sum.step_times_s;
  j["tokens_per_s"] = static_cast<double>(program.tokens_per_step) / sum.step_time_s;
  j["mfu"] = program.model_flops_per_step / (sum.step_time_s * world * program.peak_flops_per_gpu);
  // HFU: model FLOPs plus the requested recomputation (estimate.h), over the simulated step.
  j["hfu"] = estimate(s).hardware_flops_per_step / (sum.step_time_s * world * program.peak_flops_per_gpu);
  j["mfu_convention"] = kMfuConvention;
  j["critical_rank"] = c.rank;
  j["breakdown_s"] = {{"compute", c.compute}, {"exposed_comm", c.exposed_comm()}, {"bubble", c.bubble},
                      {"wait", c.wait}, {"optimizer", c.optimizer}, {"input", c.input}};
  j["exposed_comm_s"] = {{"tp", c.tp}, {"dp", c.dp}, {"pp", c.pp}, {"cp", c.cp}, {"ep", c.ep}};
  const double static_bytes = mem.params + mem.grads + mem.optimizer + mem.buffers;
  j["memory_bytes"] = {{"params", whole(mem.params)},
                       {"grads", whole(mem.grads)},
                       {"optimizer", whole(mem.optimizer)},
                       {"activations", whole(pk.peak_bytes - static_bytes)},
                       {"buffers", whole(mem.buffers)},
                       {"total", whole(pk.peak_bytes)},
                       {"capacity", whole(mem.capacity)},
                       {"usable", whole(mem.usable)}};
  j["memory_rank"] = pk.rank;
  j["fits"] = pk.peak_bytes <= mem.usable;
  j["seed"] = s.seed;
  j["network"] = s.network;
  if (full) {
    nlohmann::ordered_json ranks = nlohmann::ordered_json::array();
    for (const RankBreakdown& b : sum.ranks) {
      ranks.push_back({{"rank", b.rank}, {"stage", b.stage}, {"step_time_s", b.total()},
                       {"compute_s", b.compute}, {"wait_s", b.wait}, {"bubble_s", b.bubble},
                       {"exposed_comm_s", b.exposed_comm()}, {"peak_bytes", whole(b.peak_bytes)}});
    }
    j["ranks"] = ranks;
  }
  return j.dump(2) + "\n";
}

std::string simulate_report_text(const Scenario& s, const Program& program, const SimSummary& sum,
                                 bool full, int steps) {
  const RankBreakdown& c = sum.ranks[sum.critical];
  const RankBreakdown& pk = sum.ranks[sum.peak];
  const MemoryBreakdown mem = stage_memory(s.model, s.cluster, s.plan, s.workload, pk.stage);
  const double world = program.placement.world();
  std::string o;
  auto line = [&](const std::string& x) { o += x + "\n"; };
  line(fmt::format("stepcast simulate: {} ({} mode, {} step{}, {} ranks simulated)", s.name,
                   full ? "full" : "representative", steps, steps == 1 ? "" : "s", sum.ranks.size()));
  line(fmt::format("Step time {:.4f} s   tokens/s {:.0f}   MFU {:.1f}%", sum.step_time_s,
                   static_cast<double>(program.tokens_per_step) / sum.step_time_s,
                   100 * program.model_flops_per_step / (sum.step_time_s * world * program.peak_flops_per_gpu)));
  if (steps > 1) {
    std::string st;
    for (double x : sum.step_times_s) st += fmt::format(" {:.4f}", x);
    line("  per step:" + st);
  }
  line(fmt::format("Breakdown of the critical rank {} (pipeline stage {}):", c.rank, c.stage));
  auto part = [&](const char* name, double t) {
    line(fmt::format("  {:<18}{:>12.4f} s  {:5.1f}%", name, t, 100 * t / sum.step_time_s));
  };
  part("compute", c.compute);
  part("exposed comm", c.exposed_comm());
  if (c.tp > 0) part("  tp", c.tp);
  if (c.dp > 0) part("  dp", c.dp);
  if (c.pp > 0) part("  pp", c.pp);
  if (c.cp > 0) part("  cp", c.cp);
  if (c.ep > 0) part("  ep", c.ep);
  part("bubble", c.bubble);
  part("wait", c.wait);
  part("optimizer", c.optimizer);
  if (c.input > 0) part("input", c.input);
  line(fmt::format("Peak memory {:.2f} GiB on rank {} (stage {}) of {:.2f} GiB usable: {}", pk.peak_bytes / kGiB,
                   pk.rank, pk.stage, mem.usable / kGiB, pk.peak_bytes <= mem.usable ? "fits" : "DOES NOT FIT"));
  line("Per pipeline stage (first rank of each):");
  line(fmt::format("  {:>5} {:>6} {:>10} {:>10} {:>10} {:>10} {:>10}", "stage", "rank", "compute", "comm", "bubble",
                   "wait", "peak GiB"));
  int last_stage = -1;
  for (const RankBreakdown& b : sum.ranks) {
    if (b.stage == last_stage) continue;
    last_stage = b.stage;
    line(fmt::format("  {:>5} {:>6} {:>10.4f} {:>10.4f} {:>10.4f} {:>10.4f} {:>10.2f}", b.stage, b.rank, b.compute,
                     b.exposed_comm(), b.bubble, b.wait, b.peak_bytes / kGiB));
  }
  return o;
}

}  // namespace stepcast::sim

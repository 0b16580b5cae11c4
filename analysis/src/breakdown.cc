#include "stepcast/analysis/breakdown.h"

#include <algorithm>

namespace stepcast::analysis {

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
      const Part c = compute_part(op.cclass);
      iv.push_back({s.begin.ns(), s.end.ns(), c});
      continue;
    }
    if (s.begin > s.post && op.kind == OpKind::kCollective && counts_as_wait(op.group, program.placement.pp)) {
      iv.push_back({s.post.ns(), s.begin.ns(), Part::kWait});
    }
    // The optimizer's own transfers (optimizer offload) are part of its step.
    const Part part = op.cclass == ComputeClass::kOptimizer && op.kind == OpKind::kCompute ? Part::kOptimizer
                                                                                           : transfer_part(op.stream);
    if (s.end > s.begin) iv.push_back({s.begin.ns(), s.end.ns(), part});
  }
  RankBreakdown b = sweep_breakdown(r.rank, r.stage, iv, end, steps);
  b.peak_bytes = r.peak_bytes;
  return b;
}

}  // namespace

bool counts_as_wait(GroupKind g, int pp) { return g != GroupKind::kWorld || pp <= 1; }

Part compute_part(ComputeClass c) {
  switch (c) {
    case ComputeClass::kOptimizer:
    case ComputeClass::kHostOptimizer: return Part::kOptimizer;
    case ComputeClass::kInput: return Part::kInput;
    case ComputeClass::kHost: return Part::kHost;
    case ComputeClass::kGemm:
    case ComputeClass::kAttention:
    case ComputeClass::kElementwise:
    case ComputeClass::kInterference: break;  // compute slowed by an overlapped collective
  }
  return Part::kCompute;
}

Part transfer_part(Stream stream) {
  switch (stream) {
    case Stream::kTp: return Part::kTp;
    case Stream::kCp: return Part::kCp;
    case Stream::kEp: return Part::kEp;
    case Stream::kPp:
    case Stream::kPpRecv: return Part::kPp;
    case Stream::kHostOut:
    case Stream::kHostIn: return Part::kOffload;
    case Stream::kDp:
    case Stream::kCompute: break;
  }
  return Part::kDp;
}

RankBreakdown sweep_breakdown(int rank, int stage, const std::vector<PartInterval>& intervals, std::int64_t end,
                              int steps) {
  constexpr int kParts = 11;
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
  // Offload transfers count where nothing else runs, as the closed form's host part (model-
  // reference "Offload": exposed beyond the layer's compute and communication).
  b.host = (acc[static_cast<int>(Part::kHost)] + acc[static_cast<int>(Part::kOffload)]) * k;
  b.tp = acc[static_cast<int>(Part::kTp)] * k;
  b.cp = acc[static_cast<int>(Part::kCp)] * k;
  b.ep = acc[static_cast<int>(Part::kEp)] * k;
  b.pp = acc[static_cast<int>(Part::kPp)] * k;
  b.dp = acc[static_cast<int>(Part::kDp)] * k;
  b.wait = acc[static_cast<int>(Part::kWait)] * k;
  b.bubble = acc[kParts] * k;
  return b;
}

RankBreakdown mean_breakdown(const std::vector<RankBreakdown>& ranks) {
  RankBreakdown m;
  m.rank = m.stage = -1;
  for (const RankBreakdown& b : ranks) {
    m.compute += b.compute;
    m.optimizer += b.optimizer;
    m.input += b.input;
    m.host += b.host;
    m.bubble += b.bubble;
    m.wait += b.wait;
    m.tp += b.tp;
    m.cp += b.cp;
    m.ep += b.ep;
    m.pp += b.pp;
    m.dp += b.dp;
  }
  if (ranks.empty()) return m;
  const double n = static_cast<double>(ranks.size());
  for (double* x : {&m.compute, &m.optimizer, &m.input, &m.host, &m.bubble, &m.wait, &m.tp, &m.cp, &m.ep, &m.pp, &m.dp}) *x /= n;
  return m;
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

}  // namespace stepcast::analysis

#include "stepcast/sim/diagnose.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace stepcast::sim {

namespace {

using json = nlohmann::json;

constexpr int kGroupKinds = 6;  // GroupKind values: tp, cp, ep, dp, edp, pp

// ---------------------------------------------------------------------------------------
// Small helpers.

std::string describe(const json& v) {
  std::string s = v.is_discarded() ? "nothing" : v.dump();
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return s;
}

// "0-3,5,7-9": ascending ranks as ranges (the form of the engine's hang report).
std::string ranges(std::vector<int> v) {
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

// The inverse of ranges(): "0-3,5" -> {0, 1, 2, 3, 5}; stops at the first malformed item.
std::vector<int> parse_ranges(const std::string& text) {
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

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Robust {
  double median = 0, mad = 0;
  // Robust z of x (Iglewicz & Hoaglin's modified z-score, 1.4826 MAD ~ sigma for normal
  // data); with MAD = 0 (most values identical) any value above the median is infinitely far.
  double z(double x) const {
    if (mad > 0) return (x - median) / (1.4826 * mad);
    return x > median ? std::numeric_limits<double>::infinity() : 0.0;
  }
};

Robust robust(const std::vector<double>& v) {
  Robust r;
  r.median = median(v);
  std::vector<double> dev;
  dev.reserve(v.size());
  for (double x : v) dev.push_back(std::abs(x - r.median));
  r.mad = median(dev);
  return r;
}

template <typename E, std::size_t N>
std::optional<E> enum_of(const std::string& s, const std::array<E, N>& all) {
  for (E e : all) {
    if (s == to_string(e)) return e;
  }
  return std::nullopt;
}

template <typename E, std::size_t N>
std::string enum_names(const std::array<E, N>& all) {
  std::string out;
  for (std::size_t i = 0; i < N; ++i) out += fmt::format("{}\"{}\"", i ? ", " : "", to_string(all[i]));
  return out;
}

constexpr std::array<ComputeClass, 5> kClasses = {ComputeClass::kGemm, ComputeClass::kAttention,
                                                  ComputeClass::kElementwise, ComputeClass::kOptimizer,
                                                  ComputeClass::kInput};
constexpr std::array<GroupKind, 6> kGroups = {GroupKind::kTp, GroupKind::kCp, GroupKind::kEp,
                                              GroupKind::kDp, GroupKind::kEdp, GroupKind::kPp};
constexpr std::array<CollKind, 6> kColls = {CollKind::kAllReduce, CollKind::kAllGather,
                                            CollKind::kReduceScatter, CollKind::kAllToAll,
                                            CollKind::kBroadcast, CollKind::kSendRecv};

// ---------------------------------------------------------------------------------------
// Reading a trace.

struct RawOp {
  std::size_t index = 0;  // position in traceEvents (for messages)
  int pid = 0, tid = 0;
  std::string name;
  TraceOp op;
};

class TraceReader {
 public:
  bool failed() const { return !error_.empty(); }
  const std::string& error() const { return error_; }

  // One element of traceEvents, parsed.
  void event(const json& e, std::size_t i) {
    if (failed()) return;
    at_ = fmt::format("traceEvents[{}]", i);
    if (!e.is_object()) return fail(at_, "expected an event object, got " + describe(e));
    const std::string ph = str(e, "ph", at_);
    if (failed()) return;
    if (ph == "M") return metadata(e, i);
    if (ph != "X") return;  // counters, instants, flows: not ours to read
    const std::string name = str(e, "name", at_);
    if (failed() || name.rfind("wait: ", 0) == 0) return;  // the wait slice repeats wait_us
    RawOp r;
    r.index = i;
    r.name = name;
    r.pid = static_cast<int>(integer(e, "pid", at_, 0, 100'000'000));
    r.tid = static_cast<int>(integer(e, "tid", at_, 0, kNumStreams - 1));
    const std::int64_t ts = micros(e, "ts", at_);
    const std::int64_t dur = micros(e, "dur", at_);
    const json* args = object(e, "args", at_);
    if (failed()) return;
    const std::string ap = at_ + ".args";
    r.op.step = static_cast<int>(integer(*args, "step", ap, 0, 1'000'000));
    const std::string kind = str(*args, "kind", ap);
    if (failed()) return;
    r.op.stream = static_cast<Stream>(r.tid);
    r.op.begin_ns = ts;
    r.op.post_ns = ts;
    r.op.end_ns = ts + dur;
    if (kind == "compute") {
      r.op.kind = TraceOpKind::kCompute;
      const std::string c = str(*args, "class", ap);
      if (failed()) return;
      const auto cc = enum_of(c, kClasses);
      if (!cc) return fail(ap + ".class", fmt::format("\"{}\" is not one of {}", c, enum_names(kClasses)));
      r.op.cclass = *cc;
      if (r.tid != 0) return fail(at_ + ".tid", fmt::format("a compute op runs on stream 0 (compute), got {}", r.tid));
    } else if (kind == "collective" || kind == "send" || kind == "recv") {
      r.op.kind = kind == "collective" ? TraceOpKind::kCollective : kind == "send" ? TraceOpKind::kSend
                                                                                      : TraceOpKind::kRecv;
      if (r.tid == 0) return fail(at_ + ".tid", fmt::format("a {} runs on a communication stream (1 to 5), got 0", kind));
      r.op.post_ns = ts - micros(*args, "wait_us", ap);
      r.op.bytes = number(*args, "bytes", ap);
      if (r.op.post_ns < 0 && !failed()) return fail(ap + ".wait_us", "longer than the time before the op (ts)");
      if (r.op.kind == TraceOpKind::kCollective) {
        const std::string g = str(*args, "group", ap);
        const std::string c = str(*args, "collective", ap);
        if (failed()) return;
        const auto gk = enum_of(g, kGroups);
        if (!gk) return fail(ap + ".group", fmt::format("\"{}\" is not one of {}", g, enum_names(kGroups)));
        const auto ck = enum_of(c, kColls);
        if (!ck) return fail(ap + ".collective", fmt::format("\"{}\" is not one of {}", c, enum_names(kColls)));
        r.op.group = *gk;
        r.op.coll = *ck;
        r.op.group_root = static_cast<int>(integer(*args, "group_root", ap, 0, 100'000'000));
        r.op.seq = static_cast<std::uint32_t>(integer(*args, "seq", ap, 1, 4'000'000'000));
      }
    } else {
      return fail(ap + ".kind", fmt::format("\"{}\" is not one of \"compute\", \"collective\", \"send\", \"recv\"", kind));
    }
    if (failed()) return;
    ops_.push_back(std::move(r));
  }

  void not_an_object(std::size_t i, const std::string& what) {
    if (!failed()) fail(fmt::format("traceEvents[{}]", i), "expected an event object, got " + what);
  }

  Result<Trace> finish(bool saw_events) {
    if (failed()) return Error{error_};
    if (!saw_events) return Error{"not a stepcast trace: no \"traceEvents\" list"};
    if (!meta_) {
      return Error{"not a stepcast trace: no {\"ph\":\"M\",\"name\":\"stepcast\"} metadata event "
                   "(write traces with `stepcast simulate --trace FILE`)"};
    }
    Trace t;
    t.placement = placement_;
    t.step_end_ns = step_end_;
    const int world = placement_.world();
    std::set<int> present = pids_;
    for (const RawOp& r : ops_) present.insert(r.pid);
    for (int p : present) {
      if (p >= world) {
        // Name the first event of that rank.
        for (const RawOp& r : ops_) {
          if (r.pid == p) {
            return Error{fmt::format("traceEvents[{}].pid: rank {} is outside the trace's world ({} ranks)", r.index,
                                     p, world)};
          }
        }
        return Error{fmt::format("process_name of pid {}: rank {} is outside the trace's world ({} ranks)", p, p, world)};
      }
    }
    std::map<int, std::size_t> slot;
    for (int p : present) {
      slot[p] = t.ranks.size();
      TraceRank tr;
      tr.rank = p;
      tr.stage = placement_.coords(p).p;
      tr.node = placement_.node(p);
      t.ranks.push_back(std::move(tr));
    }
    std::map<std::string, std::uint32_t> interned;
    for (RawOp& r : ops_) {
      if (r.op.step >= static_cast<int>(step_end_.size())) {
        return Error{fmt::format("traceEvents[{}].args.step: {} is beyond the trace's {} steps (step_end_us)", r.index,
                                 r.op.step, step_end_.size())};
      }
      if (r.op.kind == TraceOpKind::kCollective) {
        if (placement_.group_root(r.op.group, r.pid) != r.op.group_root) {
          return Error{fmt::format("traceEvents[{}].args.group_root: {} is not the lowest rank of rank {}'s {} group ({})",
                                   r.index, r.op.group_root, r.pid, to_string(r.op.group),
                                   placement_.group_root(r.op.group, r.pid))};
        }
      }
      auto [it, fresh] = interned.try_emplace(r.name, static_cast<std::uint32_t>(t.names.size()));
      if (fresh) t.names.push_back(r.name);
      r.op.name = it->second;
      t.ranks[slot[r.pid]].ops.push_back(r.op);
    }
    return t;
  }

 private:
  void fail(const std::string& path, const std::string& why) {
    if (error_.empty()) error_ = path + ": " + why;
  }

  const json* field(const json& o, const char* key, const std::string& path) {
    auto it = o.find(key);
    if (it == o.end()) {
      fail(path + "." + key, "missing");
      return nullptr;
    }
    return &*it;
  }
  std::string str(const json& o, const char* key, const std::string& path) {
    const json* v = failed() ? nullptr : field(o, key, path);
    if (!v) return "";
    if (!v->is_string()) {
      fail(path + "." + key, "expected a string, got " + describe(*v));
      return "";
    }
    return v->get<std::string>();
  }
  std::int64_t integer(const json& o, const char* key, const std::string& path, std::int64_t lo, std::int64_t hi) {
    const json* v = failed() ? nullptr : field(o, key, path);
    if (!v) return lo;
    if (!v->is_number_integer() || v->get<std::int64_t>() < lo || v->get<std::int64_t>() > hi) {
      fail(path + "." + key, fmt::format("expected an integer from {} to {}, got {}", lo, hi, describe(*v)));
      return lo;
    }
    return v->get<std::int64_t>();
  }
  double number(const json& o, const char* key, const std::string& path) {
    const json* v = failed() ? nullptr : field(o, key, path);
    if (!v) return 0;
    if (!v->is_number() || v->get<double>() < 0) {
      fail(path + "." + key, "expected a non-negative number, got " + describe(*v));
      return 0;
    }
    return v->get<double>();
  }
  // Microseconds (printed with nanosecond decimals) to integer nanoseconds.
  std::int64_t micros(const json& o, const char* key, const std::string& path) {
    const double us = number(o, key, path);
    if (failed()) return 0;
    if (us > 1e12) {
      fail(path + "." + key, fmt::format("{} us is beyond the 11.6 days a trace may span", us));
      return 0;
    }
    return std::llround(us * 1000.0);
  }
  const json* object(const json& o, const char* key, const std::string& path) {
    const json* v = failed() ? nullptr : field(o, key, path);
    if (v && !v->is_object()) {
      fail(path + "." + key, "expected an object, got " + describe(*v));
      return nullptr;
    }
    return v;
  }

  void metadata(const json& e, std::size_t i) {
    const std::string name = str(e, "name", at_);
    if (failed()) return;
    if (name == "process_name") {
      pids_.insert(static_cast<int>(integer(e, "pid", at_, 0, 100'000'000)));
      return;
    }
    if (name != "stepcast") return;
    if (meta_) return fail(at_, fmt::format("a second stepcast metadata event (the first is traceEvents[{}])", meta_index_));
    const json* a = object(e, "args", at_);
    if (failed()) return;
    const std::string ap = at_ + ".args";
    const std::int64_t format = integer(*a, "format", ap, 0, 1'000'000);
    if (failed()) return;
    if (format != 1) return fail(ap + ".format", fmt::format("{} is not supported (this stepcast reads format 1)", format));
    Placement& pl = placement_;
    const std::int64_t world = integer(*a, "world", ap, 1, 100'000'000);
    pl.tp = static_cast<int>(integer(*a, "tp", ap, 1, 100'000'000));
    pl.cp = static_cast<int>(integer(*a, "cp", ap, 1, 100'000'000));
    pl.dp = static_cast<int>(integer(*a, "dp", ap, 1, 100'000'000));
    pl.pp = static_cast<int>(integer(*a, "pp", ap, 1, 100'000'000));
    pl.ep = static_cast<int>(integer(*a, "ep", ap, 1, 100'000'000));
    pl.gpus_per_node = static_cast<int>(integer(*a, "gpus_per_node", ap, 1, 1'000'000));
    if (failed()) return;
    const std::int64_t product = std::int64_t{pl.tp} * pl.cp * pl.dp * pl.pp;
    if (product != world) {
      return fail(ap + ".world", fmt::format("{} is not tp x cp x dp x pp = {}", world, product));
    }
    if ((std::int64_t{pl.dp} * pl.cp) % pl.ep != 0) {
      return fail(ap + ".ep", fmt::format("{} does not divide dp x cp = {}", pl.ep, pl.dp * pl.cp));
    }
    const json* order = field(*a, "order", ap);
    if (failed()) return;
    bool perm = order->is_array() && order->size() == 4;
    std::array<bool, 4> seen{};
    for (std::size_t k = 0; perm && k < 4; ++k) {
      const json& d = (*order)[k];
      perm = d.is_number_integer() && d.get<std::int64_t>() >= 0 && d.get<std::int64_t>() < 4 &&
             !seen[static_cast<std::size_t>(d.get<std::int64_t>())];
      if (perm) {
        seen[static_cast<std::size_t>(d.get<std::int64_t>())] = true;
        pl.order[k] = static_cast<int>(d.get<std::int64_t>());
      }
    }
    if (!perm) return fail(ap + ".order", "expected a permutation of [0, 1, 2, 3], got " + describe(*order));
    const json* ends = field(*a, "step_end_us", ap);
    if (failed()) return;
    if (!ends->is_array() || ends->empty()) {
      return fail(ap + ".step_end_us", "expected a list of step end times (one per step), got " + describe(*ends));
    }
    for (std::size_t k = 0; k < ends->size(); ++k) {
      const json& x = (*ends)[k];
      if (!x.is_number() || x.get<double>() < 0 || x.get<double>() > 1e12) {
        return fail(fmt::format("{}.step_end_us[{}]", ap, k), "expected a non-negative number, got " + describe(x));
      }
      step_end_.push_back(std::llround(x.get<double>() * 1000.0));
    }
    meta_ = true;
    meta_index_ = i;
  }

  std::string error_;
  std::string at_;
  bool meta_ = false;
  std::size_t meta_index_ = 0;
  Placement placement_;
  std::vector<std::int64_t> step_end_;
  std::set<int> pids_;
  std::vector<RawOp> ops_;
};

}  // namespace

int Trace::first_unfinished_step() const {
  int first = steps();
  std::int64_t prev = 0;
  for (int k = 0; k < steps(); ++k) {
    if (step_end_ns[static_cast<std::size_t>(k)] <= prev) {
      first = k;
      break;
    }
    prev = step_end_ns[static_cast<std::size_t>(k)];
  }
  // Ranks of one stage run the same op list: one that completed fewer ops in a step than
  // its busiest stage peer stopped in that step.
  std::map<std::pair<int, int>, std::vector<std::size_t>> counts;  // (stage, step) -> ops of each rank
  for (const TraceRank& r : ranks) {
    std::vector<std::size_t> per(static_cast<std::size_t>(steps()), 0);
    for (const TraceOp& o : r.ops) {
      if (o.step < steps()) ++per[static_cast<std::size_t>(o.step)];
    }
    for (int k = 0; k < steps(); ++k) counts[{r.stage, k}].push_back(per[static_cast<std::size_t>(k)]);
  }
  for (const auto& [key, v] : counts) {
    if (*std::min_element(v.begin(), v.end()) != *std::max_element(v.begin(), v.end())) {
      first = std::min(first, key.second);
    }
  }
  return first;
}

bool looks_like_trace(std::string_view text) { return text.find("\"traceEvents\"") != std::string_view::npos; }

Result<Trace> read_trace(std::string_view text) {
  TraceReader reader;
  std::string key1;        // the last key of the top-level object
  bool in_events = false, saw_events = false;
  std::size_t index = 0;
  // Stream the events: each event object is handed to the reader when it ends and then
  // dropped from the document, so a trace of millions of events never sits in memory.
  json::parser_callback_t cb = [&](int depth, json::parse_event_t ev, json& parsed) -> bool {
    if (depth == 1 && ev == json::parse_event_t::key) {
      key1 = parsed.get<std::string>();
      return true;
    }
    if (depth == 1 && ev == json::parse_event_t::array_start && key1 == "traceEvents") {
      in_events = saw_events = true;
      return true;
    }
    if (depth == 1 && ev == json::parse_event_t::array_end) {
      in_events = false;
      return true;
    }
    if (!in_events || depth != 2) return true;
    if (ev == json::parse_event_t::object_end) {
      reader.event(parsed, index++);
      return false;
    }
    if (ev == json::parse_event_t::value || ev == json::parse_event_t::array_end) {
      reader.not_an_object(index++, ev == json::parse_event_t::value ? describe(parsed) : "a list");
      return false;
    }
    return true;
  };
  try {
    const json root = json::parse(text.begin(), text.end(), cb);
    if (!root.is_object()) {
      return Error{"not a stepcast trace: expected a JSON object with \"traceEvents\", got " + describe(root)};
    }
  } catch (const json::exception& e) {
    return Error{std::string("not a stepcast trace: invalid JSON: ") + e.what()};
  }
  return reader.finish(saw_events);
}

Trace trace_from_timeline(const Program& program, const Timeline& timeline) {
  Trace t;
  t.placement = program.placement;
  for (SimTime e : timeline.step_end) t.step_end_ns.push_back(e.ns());
  std::vector<std::vector<std::uint32_t>> seqs;
  for (const RoleTemplate& role : program.roles) seqs.push_back(collective_sequence(role));
  std::map<std::uint32_t, std::uint32_t> interned;  // program name -> trace name
  for (const RankTimeline& r : timeline.ranks) {
    TraceRank tr;
    tr.rank = r.rank;
    tr.stage = r.stage;
    tr.node = program.placement.node(r.rank);
    const RoleTemplate& role = program.roles[static_cast<std::size_t>(r.stage)];
    for (const Span& sp : r.spans) {
      const Op& op = role.ops[sp.op];
      if (op.kind == OpKind::kAlloc || op.kind == OpKind::kFree) continue;
      TraceOp o;
      o.post_ns = sp.post.ns();
      o.begin_ns = sp.begin.ns();
      o.end_ns = sp.end.ns();
      o.step = sp.step;
      o.stream = sp.stream;
      auto [it, fresh] = interned.try_emplace(op.name, static_cast<std::uint32_t>(t.names.size()));
      if (fresh) t.names.push_back(program.names[op.name]);
      o.name = it->second;
      switch (op.kind) {
        case OpKind::kCompute:
          o.kind = TraceOpKind::kCompute;
          o.cclass = op.cclass;
          o.post_ns = o.begin_ns;
          break;
        case OpKind::kCollective:
          o.kind = TraceOpKind::kCollective;
          o.group = op.group;
          o.coll = op.coll;
          o.group_root = program.placement.group_root(op.group, r.rank);
          o.seq = seqs[static_cast<std::size_t>(r.stage)][sp.op];
          o.bytes = op.bytes;
          break;
        default:
          o.kind = op.kind == OpKind::kSend ? TraceOpKind::kSend : TraceOpKind::kRecv;
          o.bytes = op.bytes;
          break;
      }
      tr.ops.push_back(o);
    }
    t.ranks.push_back(std::move(tr));
  }
  return t;
}

// ---------------------------------------------------------------------------------------
// Breakdown (the rules of analyze(), sim/analysis.cc, on the neutral trace).

namespace {

RankBreakdown breakdown_rank(const TraceRank& r, std::int64_t end, int steps) {
  std::vector<PartInterval> iv;
  iv.reserve(r.ops.size() * 2);
  for (const TraceOp& o : r.ops) {
    if (o.kind == TraceOpKind::kSend) continue;
    if (o.stream == Stream::kCompute) {
      if (o.end_ns == o.begin_ns) continue;
      const Part c = o.cclass == ComputeClass::kOptimizer ? Part::kOptimizer
                     : o.cclass == ComputeClass::kInput   ? Part::kInput
                                                          : Part::kCompute;
      iv.push_back({o.begin_ns, o.end_ns, c});
      continue;
    }
    if (o.begin_ns > o.post_ns && o.kind == TraceOpKind::kCollective) iv.push_back({o.post_ns, o.begin_ns, Part::kWait});
    if (o.end_ns > o.begin_ns) iv.push_back({o.begin_ns, o.end_ns, transfer_part(o.stream)});
  }
  return sweep_breakdown(r.rank, r.stage, iv, end, steps);
}

}  // namespace

std::vector<RankBreakdown> trace_breakdown(const Trace& trace) {
  std::vector<RankBreakdown> out;
  if (trace.step_end_ns.empty()) return out;
  for (const TraceRank& r : trace.ranks) out.push_back(breakdown_rank(r, trace.step_end_ns.back(), trace.steps()));
  return out;
}

// ---------------------------------------------------------------------------------------
// Resume audit.

std::string ResumeAudit::missing_list() const {
  std::vector<std::string> names;
  for (const ResumeItem& m : missing) {
    if (m.matters) names.emplace_back(state_part_name(m.part));
  }
  std::sort(names.begin(), names.end());
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i) out += (i ? "," : "") + names[i];
  return out;
}

ResumeAudit resume_audit(const CheckpointSpec& checkpoint, bool loss_scaling) {
  ResumeAudit a;
  for (StatePart p : kAllStateParts) {
    if (checkpoint.saves(p)) continue;
    ResumeItem m;
    m.part = p;
    switch (p) {
      case StatePart::kModel:
        m.consequence = "training restarts from the initial weights: everything trained before the restart is lost";
        break;
      case StatePart::kOptimizer:
        m.consequence = "the optimizer state (Adam moments) restarts from zero: a loss spike after the restart and a "
                        "curve that no longer follows the uninterrupted run";
        break;
      case StatePart::kLrScheduler:
        m.consequence = "the learning rate restarts at the wrong position of its schedule (warm-up again, or the "
                        "wrong point of the decay)";
        break;
      case StatePart::kGradScaler:
        m.matters = loss_scaling;
        m.consequence = loss_scaling ? "the loss scale restarts at its initial value: early overflow skips (steps "
                                       "dropped while the scale backs off)"
                                     : "none here: the run does not scale its loss (no fp16)";
        break;
      case StatePart::kRng:
        m.consequence = "dropout masks and random sampling differ from the uninterrupted run";
        break;
      case StatePart::kDataSampler:
        m.consequence = "the data window repeats after a restart: samples already trained on are seen again and "
                        "others are skipped";
        break;
      case StatePart::kStep:
        m.consequence = "the step counter restarts at 0: whatever is keyed on it (schedules, data order, "
                        "checkpoint names) restarts too";
        break;
      case StatePart::kConfig:
        m.consequence = "nothing checks that the restarted job uses the same layout, batch and sequence length";
        break;
    }
    a.missing.push_back(std::move(m));
  }
  return a;
}

// ---------------------------------------------------------------------------------------
// Detectors.

namespace {

struct CollRec {
  std::uint8_t group;
  int root;
  int step;
  std::uint32_t seq;
  std::uint32_t idx;  // position in trace.ranks
  std::int64_t post;
  bool operator<(const CollRec& o) const {
    return std::tie(group, root, step, seq, idx) < std::tie(o.group, o.root, o.step, o.seq, o.idx);
  }
  bool same_instance(const CollRec& o) const {
    return group == o.group && root == o.root && step == o.step && seq == o.seq;
  }
};

// Per (rank slot, step) quantities, flattened.
struct PerRankStep {
  int steps = 0;
  std::vector<std::int64_t> compute, input;
  // Sum over its collectives of (arrival - the group's median arrival), signed: a rank
  // that is early as often as late sums to about 0, a straggler to how far it lags. (The
  // sum, not the mean: after a rank's first late arrival its group resynchronises, and a
  // mean over hundreds of collectives would dilute that lag. Ranks of a stage run the
  // same collectives, so their sums compare.)
  std::vector<double> lateness;
  std::vector<double> caused_sum, caused_peer;  // x kGroupKinds
  void init(std::size_t ranks, int n) {
    steps = n;
    const std::size_t cells = ranks * static_cast<std::size_t>(n);
    compute.assign(cells, 0);
    input.assign(cells, 0);
    lateness.assign(cells, 0.0);
    caused_sum.assign(cells * kGroupKinds, 0.0);
    caused_peer.assign(cells * kGroupKinds, 0.0);
  }
  std::size_t at(std::size_t slot, int step) const { return slot * static_cast<std::size_t>(steps) + static_cast<std::size_t>(step); }
};

RankBreakdown mean_of(const std::vector<RankBreakdown>& ranks) {
  RankBreakdown m;
  m.rank = m.stage = -1;
  for (const RankBreakdown& b : ranks) {
    m.compute += b.compute;
    m.optimizer += b.optimizer;
    m.input += b.input;
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
  for (double* x : {&m.compute, &m.optimizer, &m.input, &m.bubble, &m.wait, &m.tp, &m.cp, &m.ep, &m.pp, &m.dp}) *x /= n;
  return m;
}

std::string hang_report_of_trace(const Trace& trace) {
  const int first_unfinished = trace.first_unfinished_step();
  std::string out = fmt::format("hang: the trace ends before every rank finished step {} (steps 0 to {})",
                                first_unfinished, trace.steps() - 1);
  // Ranks grouped by their last completed op and last completed collective; the group that
  // stopped first (earliest last completion) is the first suspect.
  struct Line {
    std::int64_t last_end = 0;
    std::vector<int> ranks;
  };
  std::map<std::string, Line> lines;
  std::vector<int> silent;
  for (const TraceRank& r : trace.ranks) {
    const TraceOp* last = nullptr;
    const TraceOp* last_coll = nullptr;
    for (const TraceOp& o : r.ops) {
      if (!last || o.end_ns > last->end_ns) last = &o;
      if (o.kind == TraceOpKind::kCollective && (!last_coll || o.end_ns > last_coll->end_ns)) last_coll = &o;
    }
    if (!last) {
      silent.push_back(r.rank);
      continue;
    }
    std::string what = fmt::format("'{}' (step {})", trace.names[last->name], last->step);
    if (last_coll) {
      what += fmt::format("; last collective completed: {} #{} '{}' on the {} group (step {})", to_string(last_coll->coll),
                          last_coll->seq, trace.names[last_coll->name], to_string(last_coll->group), last_coll->step);
    }
    Line& l = lines[what];
    l.last_end = std::max(l.last_end, last->end_ns);
    l.ranks.push_back(r.rank);
  }
  std::vector<std::tuple<std::int64_t, int, std::string>> sorted;
  for (const auto& [what, l] : lines) {
    const std::string who = l.ranks.size() == 1
                                ? fmt::format("rank {} (node {})", l.ranks.front(), trace.placement.node(l.ranks.front()))
                                : fmt::format("ranks {} ({} ranks)", ranges(l.ranks), l.ranks.size());
    sorted.emplace_back(l.last_end, l.ranks.front(),
                        fmt::format("{}: last op completed at {:.6f} s: {}", who, static_cast<double>(l.last_end) * 1e-9,
                                    what));
  }
  std::sort(sorted.begin(), sorted.end());
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    out += "\n  " + std::get<2>(sorted[i]);
    if (i == 0 && sorted.size() > 1) out += " (stopped first)";
  }
  std::vector<int> absent;
  std::size_t j = 0;
  for (int r = 0; r < trace.placement.world(); ++r) {
    while (j < trace.ranks.size() && trace.ranks[j].rank < r) ++j;
    if (j >= trace.ranks.size() || trace.ranks[j].rank != r) absent.push_back(r);
  }
  absent.insert(absent.end(), silent.begin(), silent.end());
  if (!absent.empty()) out += fmt::format("\n  ranks {}: no op completed in the trace", ranges(absent));
  return out;
}

// A duration for a sentence: seconds with 3 decimals from 0.1 s, else ms or us (a tiny
// test model's 4 ms step must not read "0.004 s vs 0.003 s").
std::string human(double s) {
  if (s >= 0.1) return fmt::format("{:.3f} s", s);
  if (s >= 1e-4) return fmt::format("{:.2f} ms", s * 1e3);
  return fmt::format("{:.1f} us", s * 1e6);
}

void build_verdict(Diagnosis& d, const DiagnoseOptions& opt) {
  d.verdict.clear();
  if (d.hang) {
    // Who stopped and whom the others wait for, from the report's lines (ours: the
    // engine's or hang_report_of_trace's).
    std::vector<int> stopped, never;
    std::size_t pos = 0;
    while ((pos = d.hang_report.find("\n  ", pos)) != std::string::npos) {
      pos += 3;
      const std::string l = d.hang_report.substr(pos, d.hang_report.find('\n', pos) - pos);
      const std::size_t sp = l.find(' '), paren = l.find(" (");
      if (l.find("stopped") != std::string::npos && sp != std::string::npos && paren != std::string::npos && sp < paren) {
        const std::vector<int> who = parse_ranges(l.substr(sp + 1, paren - sp - 1));
        stopped.insert(stopped.end(), who.begin(), who.end());
      }
      const std::size_t na = l.find("never arrived: ");
      if (na != std::string::npos) {
        const std::vector<int> who = parse_ranges(l.substr(na + 15, l.find(';', na) - na - 15));
        never.insert(never.end(), who.begin(), who.end());
      }
    }
    std::string t = "the run hangs";
    const bool first = d.hang_report.find("(stopped first)") != std::string::npos;  // a trace's report
    if (!stopped.empty()) {
      t += fmt::format(": rank{} {} stopped{}", stopped.size() == 1 ? "" : "s", ranges(stopped),
                       first ? " first; the others completed ops after it, then nothing" : "");
    }
    if (!never.empty()) {
      t += fmt::format("{} the others wait in collectives for rank{} {}, which never arrive{}", stopped.empty() ? ":" : " and",
                       never.size() == 1 ? "" : "s", ranges(never), never.size() == 1 ? "s" : "");
    }
    if (stopped.empty() && never.empty()) t += ": no rank can proceed";
    d.verdict.push_back({true, t + " (hang report above)"});
    for (const std::string& m : d.mismatches) d.verdict.push_back({true, "collective mismatch: " + m});
  }
  for (const OutlierRank& o : d.outliers) {
    std::string t = fmt::format("rank {} (node {}, stage {}): ", o.rank, o.node, o.stage);
    if (o.compute_steps > 0) {
      t += fmt::format("compute {:.1f} % above its stage's median in {}/{} steps ({} vs {} per step)",
                       100 * o.compute_excess, o.compute_steps, o.steps, human(o.compute_s), human(o.median_compute_s));
    } else {
      t += fmt::format("compute normal ({:.1f} % from its stage's median), but it arrives late at its collectives in "
                       "{}/{} steps ({} per step behind its groups' median arrivals, summed over its collectives): idle time on its own side, such as "
                       "host or launch delays",
                       100 * o.compute_excess, o.late_steps, o.steps, human(o.lateness_s));
    }
    std::string caused;
    for (const CausedWait& c : o.caused) {
      caused += fmt::format("{}its {} group ({} ranks) waits {} per step for it", caused.empty() ? "" : ", ",
                            to_string(c.group), c.group_size, human(c.per_peer_s));
    }
    if (!caused.empty()) t += "; " + caused + " (mean per peer)";
    d.verdict.push_back({true, t});
  }
  for (const InputStall& s : d.stalls) {
    std::string when = s.stalled_steps.size() == 1
                           ? fmt::format("in step {}", s.stalled_steps.front())
                           : fmt::format("in {}/{} steps ({}{})", s.stalled_steps.size(), d.steps,
                                         "steps " + join_ints(s.stalled_steps, ", "),
                                         s.period > 0 ? fmt::format(": every {} steps", s.period) : ": irregular");
    std::string t = fmt::format("host {} (ranks {}): input stalls {} longer than the median input time {}, {} "
                                "per step on average",
                                s.node, ranges(s.ranks), human(s.excess_s), when, human(s.per_step_s));
    if (s.peers_wait_s > 0) t += fmt::format("; its peers wait {} per stalled step for it", human(s.peers_wait_s));
    d.verdict.push_back({true, t});
  }
  if (d.resume) {
    for (const ResumeItem& m : d.resume->missing) {
      d.verdict.push_back({m.matters, fmt::format("the checkpoint lacks {}: {}", state_part_name(m.part), m.consequence)});
    }
  }
  const bool any_problem = std::any_of(d.verdict.begin(), d.verdict.end(), [](const Finding& f) { return f.problem; });
  if (!d.hang && d.step_time_s > 0) {
    if (d.comm.fraction >= opt.exposed_comm_note_fraction) {
      std::string kinds;
      for (std::size_t k = 0; k < kCommKindNames.size(); ++k) {
        if (d.comm.by_kind[k] > 0.01 * d.comm.total) kinds += fmt::format("{}{} {}", kinds.empty() ? "" : ", ", kCommKindNames[k], human(d.comm.by_kind[k]));
      }
      d.verdict.push_back({false, fmt::format("exposed communication: {} per step ({:.1f} % of the step): {}",
                                              human(d.comm.total), 100 * d.comm.fraction, kinds)});
    }
    if (d.mean.input >= opt.input_note_fraction * d.step_time_s) {
      d.verdict.push_back({false, fmt::format("input: {} per step on average ({:.1f} % of the step) reading input",
                                              human(d.mean.input), 100 * d.mean.input / d.step_time_s)});
    }
  }
  if (!any_problem && !d.hang) {
    d.verdict.push_back({false, fmt::format("healthy: no outlier rank, input stall or hang among {} ranks over {} steps",
                                            d.ranks_analysed, d.steps)});
  }
  std::stable_partition(d.verdict.begin(), d.verdict.end(), [](const Finding& f) { return f.problem; });
}

}  // namespace

bool Diagnosis::problem() const {
  return std::any_of(verdict.begin(), verdict.end(), [](const Finding& f) { return f.problem; });
}

std::string Diagnosis::outlier_list() const {
  std::vector<int> v;
  for (const OutlierRank& o : outliers) v.push_back(o.rank);
  return join_ints(v, ",");
}

std::string Diagnosis::stalling_list() const {
  std::vector<int> v;
  for (const InputStall& s : stalls) v.push_back(s.node);
  return join_ints(v, ",");
}

Diagnosis diagnose_trace(const Trace& trace, const DiagnoseOptions& opt) {
  Diagnosis d;
  d.input = "trace";
  d.mode = "trace";
  d.world = trace.placement.world();
  d.ranks_analysed = static_cast<int>(trace.ranks.size());
  d.steps = trace.steps();
  d.options = opt;
  if (!trace.complete()) {
    d.hang = true;
    d.hang_report = hang_report_of_trace(trace);
    build_verdict(d, opt);
    return d;
  }
  const int S = d.steps;
  std::int64_t prev = 0;
  for (std::int64_t e : trace.step_end_ns) {
    d.step_times_s.push_back(static_cast<double>(e - prev) * 1e-9);
    prev = e;
  }
  d.step_time_s = static_cast<double>(trace.step_end_ns.back()) * 1e-9 / S;
  const double median_step_ns = median(d.step_times_s) * 1e9;

  // Breakdown and its mean over ranks.
  d.ranks = trace_breakdown(trace);
  d.mean = mean_of(d.ranks);
  d.comm.by_kind = {d.mean.tp, d.mean.cp, d.mean.ep, d.mean.pp, d.mean.dp};
  d.comm.total = d.mean.exposed_comm();
  d.comm.fraction = d.step_time_s > 0 ? d.comm.total / d.step_time_s : 0;

  // Per rank and step: compute (all but input), input, latest arrival, waits caused.
  const std::size_t R = trace.ranks.size();
  PerRankStep prs;
  prs.init(R, S);
  std::vector<CollRec> recs;
  for (std::size_t i = 0; i < R; ++i) {
    for (const TraceOp& o : trace.ranks[i].ops) {
      if (o.kind == TraceOpKind::kCompute) {
        (o.cclass == ComputeClass::kInput ? prs.input : prs.compute)[prs.at(i, o.step)] += o.end_ns - o.begin_ns;
      } else if (o.kind == TraceOpKind::kCollective) {
        recs.push_back({static_cast<std::uint8_t>(o.group), o.group_root, o.step, o.seq, static_cast<std::uint32_t>(i),
                        o.post_ns});
      }
    }
  }
  std::sort(recs.begin(), recs.end());
  std::vector<double> posts;
  for (std::size_t a = 0; a < recs.size();) {
    std::size_t b = a;
    while (b < recs.size() && recs[b].same_instance(recs[a])) ++b;
    const std::size_t n = b - a;
    if (n >= 2) {
      posts.clear();
      std::int64_t last = recs[a].post;
      for (std::size_t k = a; k < b; ++k) {
        posts.push_back(static_cast<double>(recs[k].post));
        last = std::max(last, recs[k].post);
      }
      const double med = median(posts);
      double total = 0;
      std::size_t tied = 0;
      for (std::size_t k = a; k < b; ++k) {
        total += static_cast<double>(last - recs[k].post);
        tied += recs[k].post == last;
        const std::size_t cell = prs.at(recs[k].idx, recs[k].step);
        prs.lateness[cell] += static_cast<double>(recs[k].post) - med;
      }
      if (total > 0) {
        for (std::size_t k = a; k < b; ++k) {
          if (recs[k].post != last) continue;
          const std::size_t cell = prs.at(recs[k].idx, recs[k].step) * kGroupKinds + recs[k].group;
          prs.caused_sum[cell] += total / static_cast<double>(tied);
          prs.caused_peer[cell] += total / static_cast<double>(tied) / static_cast<double>(n - 1);
        }
      }
    }
    a = b;
  }

  // Input stalls per host: each host's input time per step (its slowest stage-0 rank) vs
  // the median of all hosts and steps.
  std::map<int, std::vector<std::size_t>> hosts;  // node -> slots of stage-0 ranks
  for (std::size_t i = 0; i < R; ++i) {
    if (trace.ranks[i].stage == 0) hosts[trace.ranks[i].node].push_back(i);
  }
  std::map<std::pair<int, int>, std::int64_t> host_input;  // (node, step) -> ns
  std::vector<double> all_inputs;
  for (const auto& [node, slots] : hosts) {
    for (int k = 0; k < S; ++k) {
      std::int64_t v = 0;
      for (std::size_t i : slots) v = std::max(v, prs.input[prs.at(i, k)]);
      host_input[{node, k}] = v;
      all_inputs.push_back(static_cast<double>(v));
    }
  }
  const Robust in_stat = robust(all_inputs);
  std::set<std::pair<int, int>> stalled;  // (node, step)
  for (const auto& [node, slots] : hosts) {
    InputStall st;
    st.node = node;
    st.median_input_s = in_stat.median * 1e-9;
    double excess_sum = 0;
    for (int k = 0; k < S; ++k) {
      const double v = static_cast<double>(host_input[{node, k}]);
      const double excess = v - in_stat.median;
      const double floor = std::max(opt.min_stall_input_fraction * in_stat.median,
                                    opt.min_stall_step_fraction * median_step_ns);
      if (excess > 0 && excess >= floor && in_stat.z(v) >= opt.z_threshold) {
        st.stalled_steps.push_back(k);
        excess_sum += excess;
        stalled.insert({node, k});
      }
    }
    if (st.stalled_steps.empty()) continue;
    for (std::size_t i : slots) st.ranks.push_back(trace.ranks[i].rank);
    const std::size_t n = st.stalled_steps.size();
    st.excess_s = excess_sum / static_cast<double>(n) * 1e-9;
    st.per_step_s = excess_sum / S * 1e-9;
    if (n >= 2) {
      st.period = st.stalled_steps[1] - st.stalled_steps[0];
      for (std::size_t k = 2; k < n; ++k) {
        if (st.stalled_steps[k] - st.stalled_steps[k - 1] != st.period) st.period = 0;
      }
    }
    // What its ranks (all of them, any stage) make their peers wait in the stalled steps.
    double wait = 0;
    for (std::size_t i = 0; i < R; ++i) {
      if (trace.ranks[i].node != node) continue;
      for (int k : st.stalled_steps) {
        for (int g = 0; g < kGroupKinds; ++g) wait += prs.caused_peer[prs.at(i, k) * kGroupKinds + static_cast<std::size_t>(g)];
      }
    }
    st.peers_wait_s = wait / static_cast<double>(n) * 1e-9;
    d.stalls.push_back(std::move(st));
  }

  // Outlier ranks, each compared with the ranks of its own pipeline stage (stages run
  // different work by design) step by step.
  const int min_steps = std::max(1, std::min(opt.min_outlier_steps, S));
  std::map<int, std::vector<std::size_t>> stages;
  for (std::size_t i = 0; i < R; ++i) stages[trace.ranks[i].stage].push_back(i);
  std::vector<int> compute_hits(R, 0), late_hits(R, 0);
  std::vector<double> excess_hit_sum(R, 0), excess_all_sum(R, 0), stage_median_sum(R, 0);
  std::vector<char> slow(R * static_cast<std::size_t>(S), 0);  // (slot, step): a compute outlier
  std::vector<std::pair<std::size_t, int>> late_candidates;      // (slot, step)
  std::vector<double> xs;
  // Location per step (the stage's median that step), scale pooled over all steps (the
  // MAD of every rank-step's deviation from its step's median): a scale from 8 ranks of
  // one step alone is too noisy for a 3.5-sigma test.
  auto per_step_median = [&](const std::vector<std::size_t>& slots, auto value) {
    std::vector<double> med(static_cast<std::size_t>(S)), dev;
    for (int k = 0; k < S; ++k) {
      xs.clear();
      for (std::size_t i : slots) xs.push_back(value(i, k));
      med[static_cast<std::size_t>(k)] = median(xs);
      for (double x : xs) dev.push_back(std::abs(x - med[static_cast<std::size_t>(k)]));
    }
    return std::make_pair(med, median(dev));
  };
  auto zscore = [](double dev, double mad) {
    if (mad > 0) return dev / (1.4826 * mad);
    return dev > 0 ? std::numeric_limits<double>::infinity() : 0.0;
  };
  for (const auto& [stage, slots] : stages) {
    if (slots.size() < 3) continue;  // no majority to compare with
    const auto [cmed, cmad] =
        per_step_median(slots, [&](std::size_t i, int k) { return static_cast<double>(prs.compute[prs.at(i, k)]); });
    const auto [lmed, lmad] = per_step_median(slots, [&](std::size_t i, int k) { return prs.lateness[prs.at(i, k)]; });
    for (int k = 0; k < S; ++k) {
      const double cm = cmed[static_cast<std::size_t>(k)], lm = lmed[static_cast<std::size_t>(k)];
      for (std::size_t i : slots) {
        const double x = static_cast<double>(prs.compute[prs.at(i, k)]);
        const double rel = cm > 0 ? x / cm - 1 : 0;
        stage_median_sum[i] += cm;
        excess_all_sum[i] += rel;
        if (cm > 0 && rel >= opt.min_compute_excess && zscore(x - cm, cmad) >= opt.z_threshold) {
          ++compute_hits[i];
          excess_hit_sum[i] += rel;
          slow[prs.at(i, k)] = 1;
        }
        const double y = prs.lateness[prs.at(i, k)] - lm;
        if (y >= opt.min_lateness_step_fraction * median_step_ns && zscore(y, lmad) >= opt.z_threshold) {
          late_candidates.emplace_back(i, k);
        }
      }
    }
  }
  // A late arrival is the rank's own (idle time on its side) unless, in that step, a rank
  // it runs in lockstep with -- its tensor-, context- or expert-parallel group, or those of
  // its pipeline neighbours -- computes slowly or sits on a stalling host: delays propagate
  // through those groups within a microbatch, while the data-parallel group only meets at
  // the gradient reduction (where the late rank is the one that causes the wait).
  std::map<int, std::size_t> slot_of;
  for (std::size_t i = 0; i < R; ++i) slot_of[trace.ranks[i].rank] = i;
  const Placement& pl = trace.placement;
  auto explained = [&](std::size_t i, int k) {
    if (stalled.count({trace.ranks[i].node, k})) return true;
    for (int st = 0; st < pl.pp; ++st) {
      const int q = pl.stage_peer(trace.ranks[i].rank, st);
      for (GroupKind g : {GroupKind::kTp, GroupKind::kCp, GroupKind::kEp}) {
        for (int m = 0; m < pl.group_size(g); ++m) {
          const int peer = pl.group_member(g, q, m);
          const auto it = slot_of.find(peer);
          if (it == slot_of.end() || it->second == i) continue;
          if (slow[prs.at(it->second, k)] || stalled.count({trace.ranks[it->second].node, k})) return true;
        }
      }
    }
    return false;
  };
  for (const auto& [i, k] : late_candidates) {
    if (!explained(i, k)) ++late_hits[i];
  }
  for (std::size_t i = 0; i < R; ++i) {
    if (compute_hits[i] < min_steps && late_hits[i] < min_steps) continue;
    const TraceRank& r = trace.ranks[i];
    OutlierRank o;
    o.rank = r.rank;
    o.stage = r.stage;
    o.node = r.node;
    o.steps = S;
    o.compute_steps = compute_hits[i] >= min_steps ? compute_hits[i] : 0;
    o.late_steps = late_hits[i];
    double comp = 0, late = 0;
    for (int k = 0; k < S; ++k) {
      comp += static_cast<double>(prs.compute[prs.at(i, k)]);
      late += prs.lateness[prs.at(i, k)];
    }
    o.compute_s = comp / S * 1e-9;
    o.median_compute_s = stage_median_sum[i] / S * 1e-9;
    o.compute_excess = o.compute_steps > 0 ? excess_hit_sum[i] / compute_hits[i] : excess_all_sum[i] / S;
    o.lateness_s = late / S * 1e-9;
    for (GroupKind g : kGroups) {
      double sum = 0, peer = 0;
      for (int k = 0; k < S; ++k) {
        const std::size_t cell = prs.at(i, k) * kGroupKinds + static_cast<std::size_t>(g);
        sum += prs.caused_sum[cell];
        peer += prs.caused_peer[cell];
      }
      if (sum <= 0) continue;
      o.caused.push_back({g, trace.placement.group_size(g), sum / S * 1e-9, peer / S * 1e-9});
    }
    d.outliers.push_back(std::move(o));
  }
  build_verdict(d, opt);
  return d;
}

Diagnosis diagnose_run(const Scenario& scenario, const RunResult& run, const DiagnoseOptions& opt) {
  Diagnosis d;
  d.options = opt;
  if (run.out.deadlock) {
    d.input = "scenario";
    d.world = run.program.placement.world();
    d.ranks_analysed = static_cast<int>(run.out.timeline.ranks.size());
    d.steps = static_cast<int>(run.out.timeline.step_end.size());
    d.hang = true;
    d.hang_report = run.out.deadlock_report;
    d.mismatches = run.out.mismatches;
  } else {
    d = diagnose_trace(trace_from_timeline(run.program, run.out.timeline), opt);
  }
  d.source = scenario.name;
  d.input = "scenario";
  d.mode = run.full ? "full" : "representative";
  d.seed = scenario.seed;
  if (scenario.checkpoint) d.resume = resume_audit(*scenario.checkpoint, scenario.plan.precision == Precision::kFp16);
  build_verdict(d, opt);
  return d;
}

Result<Diagnosis> diagnose_scenario(const Scenario& scenario, int steps, const DiagnoseOptions& opt) {
  RunOptions o;
  o.steps = steps;
  o.record_memory = false;
  auto run = run_scenario(scenario, o);
  if (!run.ok()) return run.error();
  return diagnose_run(scenario, *run, opt);
}

// ---------------------------------------------------------------------------------------
// Reports.

namespace {

json breakdown_json(const RankBreakdown& b) {
  json j = json::object();
  j["compute"] = b.compute;
  j["exposed_comm"] = b.exposed_comm();
  j["bubble"] = b.bubble;
  j["wait"] = b.wait;
  j["optimizer"] = b.optimizer;
  j["input"] = b.input;
  return j;
}

}  // namespace

std::string diagnosis_json(const Diagnosis& d) {
  nlohmann::ordered_json j;
  j["format"] = 1;
  j["command"] = "diagnose";
  j["source"] = d.source;
  j["input"] = d.input;
  j["mode"] = d.mode;
  j["world"] = d.world;
  j["ranks_analysed"] = d.ranks_analysed;
  j["steps"] = d.steps;
  if (d.input == "scenario") j["seed"] = d.seed;
  j["healthy"] = !d.problem();
  j["hang"] = d.hang;
  j["mismatch"] = !d.mismatches.empty();
  if (!d.hang) {
    j["outlier_ranks"] = d.outlier_list();
    j["stalling_hosts"] = d.stalling_list();
  }
  j["resume_missing"] = d.resume ? d.resume->missing_list() : "";
  if (d.hang) {
    j["hang_report"] = d.hang_report;
    j["mismatches"] = d.mismatches;
  } else {
    j["step_time_s"] = d.step_time_s;
    j["step_times_s"] = d.step_times_s;
    nlohmann::ordered_json outs = nlohmann::ordered_json::array();
    for (const OutlierRank& o : d.outliers) {
      nlohmann::ordered_json caused = nlohmann::ordered_json::array();
      for (const CausedWait& c : o.caused) {
        caused.push_back({{"group", to_string(c.group)}, {"group_size", c.group_size}, {"per_peer_s", c.per_peer_s},
                          {"summed_s", c.summed_s}});
      }
      outs.push_back({{"rank", o.rank}, {"node", o.node}, {"stage", o.stage}, {"compute_s", o.compute_s},
                      {"median_compute_s", o.median_compute_s}, {"compute_excess", o.compute_excess},
                      {"compute_outlier_steps", o.compute_steps}, {"late_steps", o.late_steps},
                      {"lateness_s", o.lateness_s}, {"caused_wait_per_step", caused}});
    }
    j["outliers"] = outs;
    nlohmann::ordered_json stalls = nlohmann::ordered_json::array();
    for (const InputStall& s : d.stalls) {
      stalls.push_back({{"node", s.node}, {"ranks", s.ranks}, {"stalled_steps", s.stalled_steps},
                        {"period_steps", s.period}, {"median_input_s", s.median_input_s}, {"excess_s", s.excess_s},
                        {"per_step_s", s.per_step_s}, {"peers_wait_s", s.peers_wait_s}});
    }
    j["input_stalls"] = stalls;
    j["breakdown_s"] = breakdown_json(d.mean);
    nlohmann::ordered_json comm;
    for (std::size_t k = 0; k < kCommKindNames.size(); ++k) comm[kCommKindNames[k]] = d.comm.by_kind[k];
    j["exposed_comm_s"] = comm;
    j["exposed_comm_fraction"] = d.comm.fraction;
  }
  if (d.resume) {
    nlohmann::ordered_json miss = nlohmann::ordered_json::array();
    for (const ResumeItem& m : d.resume->missing) {
      miss.push_back({{"part", state_part_name(m.part)}, {"matters", m.matters}, {"consequence", m.consequence}});
    }
    j["resume_audit"] = {{"missing", miss}};
  }
  nlohmann::ordered_json verdict = nlohmann::ordered_json::array();
  for (const Finding& f : d.verdict) verdict.push_back({{"severity", f.problem ? "problem" : "note"}, {"text", f.text}});
  j["verdict"] = verdict;
  return j.dump(2) + "\n";
}

std::string diagnosis_text(const Diagnosis& d) {
  std::string o;
  auto line = [&](const std::string& x) { o += x + "\n"; };
  line(fmt::format("stepcast diagnose: {} ({}, {} of {} ranks{}, {} step{})", d.source, d.input, d.ranks_analysed,
                   d.world,
                   d.mode == "representative" ? " (representative mode: no rank is perturbed, one per stage)" : "",
                   d.steps, d.steps == 1 ? "" : "s"));
  if (d.hang) {
    line("");
    line(d.hang_report);
  } else {
    double lo = d.step_times_s.empty() ? 0 : d.step_times_s.front(), hi = lo;
    for (double s : d.step_times_s) {
      lo = std::min(lo, s);
      hi = std::max(hi, s);
    }
    line(fmt::format("Step time {:.4f} s (mean; min {:.4f}, max {:.4f})", d.step_time_s, lo, hi));
    const RankBreakdown& m = d.mean;
    line(fmt::format("Mean over ranks per step: compute {:.4f}  exposed comm {:.4f}  bubble {:.4f}  wait {:.4f}  "
                     "optimizer {:.4f}  input {:.4f} s",
                     m.compute, m.exposed_comm(), m.bubble, m.wait, m.optimizer, m.input));
    line("");
    const DiagnoseOptions& t = d.options;
    line(fmt::format("Outlier ranks (vs the median of their pipeline stage, each step: robust z >= {:g} and compute "
                     ">= {:g} % above,",
                     t.z_threshold, 100 * t.min_compute_excess));
    line(fmt::format("or arrival >= {:g} % of a step behind the group's median; flagged in >= {} steps)",
                     100 * t.min_lateness_step_fraction, std::max(1, std::min(t.min_outlier_steps, d.steps))));
    if (d.outliers.empty()) {
      line("  none");
    } else {
      line(fmt::format("  {:>5} {:>5} {:>5} {:>10} {:>10} {:>8} {:>8} {:>6} {:>9}  {}", "rank", "node", "stage", "compute s",
                       "median s", "excess", "steps", "late", "late s", "wait caused per step (mean per peer)"));
      for (const OutlierRank& x : d.outliers) {
        std::string caused;
        for (const CausedWait& c : x.caused) {
          caused += fmt::format("{}{} {:.4f} s", caused.empty() ? "" : ", ", to_string(c.group), c.per_peer_s);
        }
        line(fmt::format("  {:>5} {:>5} {:>5} {:>10.4f} {:>10.4f} {:>+7.1f}% {:>8} {:>6} {:>9.4f}  {}", x.rank, x.node,
                         x.stage, x.compute_s, x.median_compute_s, 100 * x.compute_excess,
                         fmt::format("{}/{}", x.compute_steps, x.steps), x.late_steps, x.lateness_s,
                         caused.empty() ? "-" : caused));
      }
    }
    line("");
    line(fmt::format("Input stalls per host (input time vs the median of all hosts and steps: robust z >= {:g}, "
                     ">= {:g} % above it and >= {:g} % of a step)",
                     t.z_threshold, 100 * t.min_stall_input_fraction, 100 * t.min_stall_step_fraction));
    if (d.stalls.empty()) {
      line("  none");
    } else {
      line(fmt::format("  {:>5}  {:<12} {:<16} {:>9} {:>10} {:>10} {:>12}", "host", "ranks", "stalled steps", "period",
                       "excess s", "per step s", "peers wait s"));
      for (const InputStall& s : d.stalls) {
        line(fmt::format("  {:>5}  {:<12} {:<16} {:>9} {:>10.4f} {:>10.4f} {:>12.4f}", s.node, ranges(s.ranks),
                         join_ints(s.stalled_steps, ","), s.period > 0 ? fmt::format("every {}", s.period) : "-",
                         s.excess_s, s.per_step_s, s.peers_wait_s));
      }
    }
    line("");
    std::string kinds;
    for (std::size_t k = 0; k < kCommKindNames.size(); ++k) {
      kinds += fmt::format("  {} {:.4f}", kCommKindNames[k], d.comm.by_kind[k]);
    }
    line(fmt::format("Exposed communication (mean over ranks, s per step):{}  total {:.4f} ({:.1f} % of the step)", kinds,
                     d.comm.total, 100 * d.comm.fraction));
  }
  if (d.resume) {
    line("");
    line("Resume audit (checkpoint.contents)");
    if (d.resume->missing.empty()) line("  complete: every part of the training state is saved");
    for (const ResumeItem& m : d.resume->missing) {
      line(fmt::format("  {:<13} {}: {}", state_part_name(m.part), m.matters ? "MISSING" : "missing, harmless",
                       m.consequence));
    }
  }
  line("");
  line("Verdict");
  for (const Finding& f : d.verdict) line(fmt::format("  {} {}", f.problem ? "PROBLEM" : "note   ", f.text));
  return o;
}

// ---------------------------------------------------------------------------------------
// compare A B.

namespace {

std::string describe_fault(const StragglerSpec& f) {
  std::string who;
  if (!f.ranks.empty()) who += fmt::format("rank{} {}", f.ranks.size() == 1 ? "" : "s", ranges(f.ranks));
  if (!f.nodes.empty()) {
    who += fmt::format("{}node{} {}", who.empty() ? "" : " and ", f.nodes.size() == 1 ? "" : "s", ranges(f.nodes));
  }
  if (who.empty()) who = "every rank";
  std::string out;
  switch (f.kind) {
    case StragglerKind::kSlowdown: out = fmt::format("slowdown of {} (compute x{:g})", who, f.factor); break;
    case StragglerKind::kInputStall:
      out = fmt::format("input stall on {} ({:g} s every {} step{})", who, f.duration_s, f.every_steps,
                        f.every_steps == 1 ? "" : "s");
      break;
    case StragglerKind::kDataSkew: out = fmt::format("data skew on {} (cv {:g})", who, f.cv); break;
    case StragglerKind::kSlowLink: out = fmt::format("slow link on {} (bandwidth x{:g})", who, f.factor); break;
    case StragglerKind::kJitter: out = fmt::format("jitter on {} (cv {:g})", who, f.cv); break;
  }
  if (f.from_step > 0 || f.to_step != INT_MAX) {
    out += f.to_step == INT_MAX ? fmt::format(" from step {}", f.from_step)
                                : fmt::format(" in steps {}-{}", f.from_step, f.to_step);
  }
  return out;
}

// Step time and mean breakdown of `s` (no detectors): the counterfactual runs.
Result<std::pair<double, RankBreakdown>> step_of(const Scenario& s, int steps) {
  RunOptions o;
  o.steps = steps;
  o.record_memory = false;
  auto run = run_scenario(s, o);
  if (!run.ok()) return run.error();
  if (run->out.deadlock) return Error{"the run hangs: " + run->out.deadlock_report};
  const Trace t = trace_from_timeline(run->program, run->out.timeline);
  const RankBreakdown mean = mean_of(trace_breakdown(t));
  return std::make_pair(static_cast<double>(t.step_end_ns.back()) * 1e-9 / t.steps(), mean);
}

}  // namespace

Result<CompareSide> compare_side(const Scenario& scenario, int steps, const DiagnoseOptions& opt) {
  RunOptions o;
  o.steps = steps;
  o.record_memory = false;
  auto run = run_scenario(scenario, o);
  if (!run.ok()) return run.error();
  const Diagnosis d = diagnose_run(scenario, *run, opt);
  CompareSide s;
  s.name = scenario.name;
  s.world = run->program.placement.world();
  s.steps = steps;
  if (d.hang) {
    s.hang_report = d.hang_report;
    return s;
  }
  s.step_time_s = d.step_time_s;
  s.mean = d.mean;
  s.tokens_per_step = run->program.tokens_per_step;
  s.global_batch = scenario.plan.global_batch;
  s.seq_len = scenario.workload.seq_len;
  s.model_flops_per_step = run->program.model_flops_per_step;
  s.peak_flops_per_gpu = run->program.peak_flops_per_gpu;
  for (const Finding& f : d.verdict) {
    if (f.problem) s.findings.push_back(f.text);
  }
  s.clean_step_time_s = s.step_time_s;
  s.clean_mean = s.mean;
  const std::vector<StragglerSpec>& all = scenario.faults.perturb.stragglers;
  std::vector<std::size_t> faults;
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (all[i].kind != StragglerKind::kJitter) faults.push_back(i);
  }
  if (faults.empty()) return s;
  auto without = [&](const std::vector<std::size_t>& drop) {
    Scenario c = scenario;
    c.faults.perturb.stragglers.clear();
    for (std::size_t i = 0; i < all.size(); ++i) {
      if (std::find(drop.begin(), drop.end(), i) == drop.end()) c.faults.perturb.stragglers.push_back(all[i]);
    }
    return step_of(c, steps);
  };
  for (std::size_t i : faults) {
    auto r = without({i});
    if (!r.ok()) return r.error();
    s.faults.push_back({fmt::format("faults.stragglers[{}]", i), describe_fault(all[i]), s.step_time_s - r->first});
  }
  auto r = without(faults);
  if (!r.ok()) return r.error();
  s.clean_step_time_s = r->first;
  s.clean_mean = r->second;
  s.faults_together_s = s.step_time_s - s.clean_step_time_s;
  return s;
}

CompareSide compare_side_measured(const Scenario& scenario, const Program& program, const Timeline& measured,
                                  const std::string& name, const DiagnoseOptions& opt) {
  const Diagnosis d = diagnose_trace(trace_from_timeline(program, measured), opt);
  CompareSide s;
  s.name = name;
  s.world = program.placement.world();
  s.steps = d.steps;
  if (d.hang) {
    s.hang_report = d.hang_report;
    return s;
  }
  s.step_time_s = d.step_time_s;
  s.mean = d.mean;
  s.tokens_per_step = program.tokens_per_step;
  s.global_batch = scenario.plan.global_batch;
  s.seq_len = scenario.workload.seq_len;
  s.model_flops_per_step = program.model_flops_per_step;
  s.peak_flops_per_gpu = program.peak_flops_per_gpu;
  for (const Finding& f : d.verdict) {
    if (f.problem) s.findings.push_back(f.text);
  }
  s.clean_step_time_s = s.step_time_s;
  s.clean_mean = s.mean;
  return s;
}

Comparison compare(const CompareSide& a, const CompareSide& b) {
  Comparison c;
  c.a = a;
  c.b = b;
  static constexpr std::pair<const char*, double RankBreakdown::*> kParts[] = {
      {"compute", &RankBreakdown::compute}, {"exposed_comm.tp", &RankBreakdown::tp},
      {"exposed_comm.cp", &RankBreakdown::cp}, {"exposed_comm.ep", &RankBreakdown::ep},
      {"exposed_comm.pp", &RankBreakdown::pp}, {"exposed_comm.dp", &RankBreakdown::dp},
      {"bubble", &RankBreakdown::bubble}, {"wait", &RankBreakdown::wait},
      {"input", &RankBreakdown::input}, {"optimizer", &RankBreakdown::optimizer}};
  for (const auto& [name, field] : kParts) {
    c.parts.push_back({name, a.mean.*field, b.mean.*field});
    c.layout_parts.push_back({name, a.clean_mean.*field, b.clean_mean.*field});
  }
  c.step_delta_s = b.step_time_s - a.step_time_s;
  for (const ComparePart& p : c.parts) c.parts_delta_s += p.delta_s();
  c.layout_delta_s = b.clean_step_time_s - a.clean_step_time_s;
  const double thr_a = static_cast<double>(a.tokens_per_step) / a.step_time_s / a.world;
  const double thr_b = static_cast<double>(b.tokens_per_step) / b.step_time_s / b.world;
  c.scaling_efficiency = thr_b / thr_a;
  c.same_training = a.global_batch == b.global_batch && a.tokens_per_step == b.tokens_per_step;
  const bool same_work_per_gpu = a.tokens_per_step * b.world == b.tokens_per_step * a.world;
  c.scaling_kind = c.same_training ? "strong" : same_work_per_gpu ? "weak" : "throughput";
  if (!c.same_training) {
    c.warnings.push_back(fmt::format(
        "A and B do not train the same thing: global batch {} vs {} sequences of {} tokens ({} vs {} tokens per "
        "step). Part of any difference in loss curve or time to a target loss is an optimization change (batch size, "
        "learning-rate schedule), not a systems one; compare time to a target loss, not only step time.",
        a.global_batch, b.global_batch,
        a.seq_len == b.seq_len ? std::to_string(a.seq_len) : fmt::format("{} vs {}", a.seq_len, b.seq_len),
        a.tokens_per_step, b.tokens_per_step));
  }
  return c;
}

std::string comparison_json(const Comparison& c) {
  nlohmann::ordered_json j;
  j["format"] = 1;
  j["command"] = "compare";
  auto side_json = [](const CompareSide& s) {
    nlohmann::ordered_json x;
    x["scenario"] = s.name;
    x["world"] = s.world;
    x["steps"] = s.steps;
    x["step_time_s"] = s.step_time_s;
    x["global_batch"] = s.global_batch;
    x["seq_len"] = s.seq_len;
    x["tokens_per_step"] = s.tokens_per_step;
    x["tokens_per_gpu_per_step"] = static_cast<double>(s.tokens_per_step) / s.world;
    x["model_flops_per_gpu_per_step"] = s.model_flops_per_step / s.world;
    x["tokens_per_s"] = static_cast<double>(s.tokens_per_step) / s.step_time_s;
    x["mfu"] = s.model_flops_per_step / (s.step_time_s * s.world * s.peak_flops_per_gpu);
    x["findings"] = s.findings;
    return x;
  };
  j["a"] = side_json(c.a);
  j["b"] = side_json(c.b);
  j["step_time_delta_s"] = c.step_delta_s;
  nlohmann::ordered_json parts;
  for (const ComparePart& p : c.parts) parts[p.name] = {{"a_s", p.a_s}, {"b_s", p.b_s}, {"delta_s", p.delta_s()}};
  j["parts"] = parts;
  j["parts_delta_s"] = c.parts_delta_s;
  nlohmann::ordered_json causes;
  for (const CompareSide* side : {&c.a, &c.b}) {
    nlohmann::ordered_json x;
    nlohmann::ordered_json faults = nlohmann::ordered_json::array();
    for (const FaultEffect& f : side->faults) {
      faults.push_back({{"fault", f.fault}, {"description", f.description}, {"alone_s", f.alone_s}});
    }
    x["faults"] = faults;
    x["together_s"] = side->faults_together_s;
    x["step_time_without_faults_s"] = side->clean_step_time_s;
    causes[side == &c.a ? "a" : "b"] = x;
  }
  nlohmann::ordered_json layout;
  for (const ComparePart& p : c.layout_parts) layout[p.name] = {{"a_s", p.a_s}, {"b_s", p.b_s}, {"delta_s", p.delta_s()}};
  causes["layout_delta_s"] = c.layout_delta_s;
  causes["layout_parts"] = layout;
  j["by_cause"] = causes;
  j["scaling_efficiency"] = c.scaling_efficiency;
  j["scaling_kind"] = c.scaling_kind;
  j["same_training"] = c.same_training;
  j["warnings"] = c.warnings;
  return j.dump(2) + "\n";
}

std::string comparison_text(const Comparison& c) {
  std::string o;
  auto line = [&](const std::string& x) { o += x + "\n"; };
  const CompareSide &a = c.a, &b = c.b;
  line(fmt::format("stepcast compare (means of {} steps)", a.steps));
  line(fmt::format("  A: {} ({} GPUs)", a.name, a.world));
  line(fmt::format("  B: {} ({} GPUs)", b.name, b.world));
  line("");
  line(fmt::format("  {:<22} {:>10} {:>10} {:>11}", "per step, s", "A", "B", "B - A"));
  line(fmt::format("  {:<22} {:>10.4f} {:>10.4f} {:>+11.4f}  ({:+.1f} %)", "step time", a.step_time_s, b.step_time_s,
                   c.step_delta_s, 100 * c.step_delta_s / a.step_time_s));
  for (const ComparePart& p : c.parts) {
    if (p.a_s == 0 && p.b_s == 0) continue;
    line(fmt::format("  {:<22} {:>10.4f} {:>10.4f} {:>+11.4f}", "  " + p.name, p.a_s, p.b_s, p.delta_s()));
  }
  line(fmt::format("  {:<22} {:>10} {:>10} {:>+11.4f}  (the parts add up to the step-time difference)", "  sum of parts",
                   "", "", c.parts_delta_s));
  if (!c.a.faults.empty() || !c.b.faults.empty()) {
    line("");
    line("By cause (each side re-simulated without its faults, one at a time and all together; jitter is kept as noise)");
    auto row = [&](const std::string& label, double v, const std::string& tail) {
      line(fmt::format("  {:<70} {:>+8.4f} s{}", label, v, tail));
    };
    for (const CompareSide* side : {&c.a, &c.b}) {
      const std::string who = side == &c.a ? "A" : "B";
      const double sign = side == &c.a ? -1 : 1;
      for (const FaultEffect& f : side->faults) row(fmt::format("{}  {} {}", who, f.fault, f.description), sign * f.alone_s, "  alone");
      if (side->faults.empty()) continue;
      double sum = 0;
      for (const FaultEffect& f : side->faults) sum += f.alone_s;
      std::string how;
      if (side->faults.size() > 1 && std::abs(sum - side->faults_together_s) > 0.0005) {
        how = side->faults_together_s > sum
                  ? "  more than the sum of each alone: they hide behind each other, so fixing one alone recovers less"
                  : "  less than the sum of each alone: they amplify each other";
      }
      row(who + "  its faults together", sign * side->faults_together_s, how);
    }
    std::string layout;
    for (const ComparePart& p : c.layout_parts) {
      if (std::abs(p.delta_s()) >= 0.0005) layout += fmt::format("{}{} {:+.4f}", layout.empty() ? "" : ", ", p.name, p.delta_s());
    }
    row("   layout and scale: B without its faults vs A without its faults", c.layout_delta_s, "");
    if (!layout.empty()) line("       " + layout);
    row("   total (the step-time difference)", c.b.faults_together_s - c.a.faults_together_s + c.layout_delta_s, "");
  }
  line("");
  line("Work per GPU per step");
  auto per = [](const CompareSide& s, double x) { return x / s.world; };
  line(fmt::format("  {:<22} {:>14.0f} {:>14.0f}", "tokens", per(a, static_cast<double>(a.tokens_per_step)),
                   per(b, static_cast<double>(b.tokens_per_step))));
  line(fmt::format("  {:<22} {:>14.2f} {:>14.2f}", "model TFLOP", per(a, a.model_flops_per_step) * 1e-12,
                   per(b, b.model_flops_per_step) * 1e-12));
  auto mfu = [](const CompareSide& s) { return s.model_flops_per_step / (s.step_time_s * s.world * s.peak_flops_per_gpu); };
  line(fmt::format("  {:<22} {:>13.1f}% {:>13.1f}%", "MFU", 100 * mfu(a), 100 * mfu(b)));
  line(fmt::format("  {:<22} {:>14.0f} {:>14.0f}", "tokens/s (job)", static_cast<double>(a.tokens_per_step) / a.step_time_s,
                   static_cast<double>(b.tokens_per_step) / b.step_time_s));
  line("");
  const char* what = c.scaling_kind == "strong" ? "strong-scaling efficiency (same global batch)"
                     : c.scaling_kind == "weak" ? "weak-scaling efficiency (same work per GPU)"
                                                : "per-GPU throughput ratio (the work per GPU differs too)";
  line(fmt::format("Scaling: {} = {:.1f} % (tokens/s per GPU, B over A; {} -> {} GPUs)", what,
                   100 * c.scaling_efficiency, a.world, b.world));
  for (const std::string& w : c.warnings) line("WARNING: " + w);
  for (const auto* s : {&a, &b}) {
    if (s->findings.empty()) continue;
    line("");
    line(fmt::format("What diagnose finds in {} ({}):", s == &a ? "A" : "B", s->name));
    for (const std::string& f : s->findings) line("  - " + f);
  }
  return o;
}

}  // namespace stepcast::sim

#include "stepcast/analysis/trace.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>

#include <fmt/format.h>

#include "stepcast/models/json_reader.h"

namespace stepcast::analysis {

namespace {

using json = nlohmann::json;
using reader::ObjectReader;

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

constexpr std::array<ComputeClass, 8> kClasses = {
    ComputeClass::kGemm,  ComputeClass::kAttention, ComputeClass::kElementwise,  ComputeClass::kOptimizer,
    ComputeClass::kInput, ComputeClass::kHost,      ComputeClass::kInterference, ComputeClass::kHostOptimizer};
constexpr std::array<CollKind, 6> kColls = {CollKind::kAllReduce, CollKind::kAllGather,
                                            CollKind::kReduceScatter, CollKind::kAllToAll,
                                            CollKind::kBroadcast, CollKind::kSendRecv};
constexpr std::int64_t kMaxRank = 100'000'000;
// Times in a trace: at most 1e12 us (11.6 days); a message: at most 1e18 bytes.
constexpr double kMaxMicros = 1e12;
constexpr double kMaxBytes = 1e18;

constexpr const char* kNoMetadata =
    "not a stepcast trace: no {\"ph\":\"M\",\"name\":\"stepcast\"} metadata event before its slices (write traces "
    "with `stepcast simulate --trace FILE`)";

struct RawOp {
  std::size_t index = 0;  // position in traceEvents (for messages)
  int pid = 0, tid = 0;
  std::string name;
  TraceOp op;
};

// Reads the events one at a time; the first error stops it (later events are ignored).
class TraceReader {
 public:
  bool failed() const { return !error_.empty(); }

  // One element of traceEvents, parsed.
  void event(const json& e, std::size_t i) {
    if (failed()) return;
    const std::string at = reader::index("traceEvents", i);
    if (!e.is_object()) return fail(at + ": expected an event object, got " + reader::describe(e));
    reader::Diagnostics diag;
    ObjectReader ev(e, at, diag);
    const auto ph = ev.required_string("ph");
    if (!check(diag)) return;
    if (*ph == "M") return metadata(ev, i);
    if (*ph != "X") return;  // counters, instants, flows: not ours to read
    // The writer puts the metadata event first: a slice before it is another tool's trace.
    if (!meta_) return fail(kNoMetadata);
    slice(ev, i);
  }

  void not_an_object(std::size_t i, const std::string& what) {
    if (!failed()) fail(reader::index("traceEvents", i) + ": expected an event object, got " + what);
  }
  // A parse error at `path` (where the text broke).
  void invalid(const std::string& path, const std::string& why) {
    reader::Diagnostics diag;
    diag.add(path, why);
    fail(diag.joined());
  }

  Result<Trace> finish(bool saw_events);

 private:
  void fail(const std::string& message) {
    if (error_.empty()) error_ = message;
  }
  // True when `diag` holds no error; else it becomes the reader's error.
  bool check(const reader::Diagnostics& diag) {
    if (diag.empty()) return true;
    fail(diag.joined());
    return false;
  }
  // Microseconds (printed with nanosecond decimals, at most kMaxMicros) to integer
  // nanoseconds; nullopt with an error in `r` when absent or not such a time.
  static std::optional<std::int64_t> micros(ObjectReader& r, std::string_view key) {
    const auto us = r.required_number(key, 0, kMaxMicros);
    if (!us) return std::nullopt;
    return std::llround(*us * 1000.0);
  }

  void slice(ObjectReader& ev, std::size_t i);
  bool compute_args(ObjectReader& args, RawOp& r);
  bool comm_args(ObjectReader& args, const std::string& kind, std::int64_t ts, RawOp& r);
  void metadata(ObjectReader& ev, std::size_t i);
  bool layout(ObjectReader& args);
  bool step_ends(ObjectReader& args);

  std::string error_;
  bool meta_ = false;
  std::size_t meta_index_ = 0;
  Placement placement_;
  std::vector<std::int64_t> step_end_;
  std::set<int> pids_;
  std::vector<RawOp> ops_;
};

void TraceReader::slice(ObjectReader& ev, std::size_t i) {
  reader::Diagnostics& diag = ev.diag();
  const auto name = ev.required_string("name");
  if (!check(diag) || name->rfind("wait: ", 0) == 0) return;  // the wait slice repeats wait_us
  RawOp r;
  r.index = i;
  r.name = *name;
  const auto pid = ev.required_integer("pid", 0, kMaxRank);
  const auto tid = ev.required_integer("tid", 0, kNumStreams - 1);
  const auto ts = micros(ev, "ts");
  const auto dur = micros(ev, "dur");
  const json* a = ev.object("args");
  if (!a && diag.empty()) diag.add(ev.path_of("args"), "missing (required)");
  if (!check(diag)) return;
  r.pid = static_cast<int>(*pid);
  r.tid = static_cast<int>(*tid);
  ObjectReader args(*a, ev.path_of("args"), diag);
  const auto step = args.required_integer("step", 0, 1'000'000);
  const auto kind = args.required_string("kind");
  if (!check(diag)) return;
  r.op.step = static_cast<int>(*step);
  r.op.stream = static_cast<Stream>(r.tid);
  r.op.begin_ns = r.op.post_ns = *ts;
  r.op.end_ns = *ts + *dur;
  const bool ok = *kind == "compute" ? compute_args(args, r) : comm_args(args, *kind, *ts, r);
  if (ok) ops_.push_back(std::move(r));
}

bool TraceReader::compute_args(ObjectReader& args, RawOp& r) {
  r.op.kind = TraceOpKind::kCompute;
  const auto c = args.required_string("class");
  if (!check(args.diag())) return false;
  const auto cc = enum_of(*c, kClasses);
  if (!cc) {
    fail(fmt::format("{}: \"{}\" is not one of {}", args.path_of("class"), *c, enum_names(kClasses)));
    return false;
  }
  r.op.cclass = *cc;
  if (r.tid != 0) {
    fail(fmt::format("traceEvents[{}].tid: a compute op runs on stream 0 (compute), got {}", r.index, r.tid));
    return false;
  }
  return true;
}

bool TraceReader::comm_args(ObjectReader& args, const std::string& kind, std::int64_t ts, RawOp& r) {
  if (kind != "collective" && kind != "send" && kind != "recv") {
    fail(args.path_of("kind") + ": \"" + kind + "\" is not one of \"compute\", \"collective\", \"send\", \"recv\"");
    return false;
  }
  r.op.kind = kind == "collective" ? TraceOpKind::kCollective : kind == "send" ? TraceOpKind::kSend
                                                                                  : TraceOpKind::kRecv;
  if (r.tid == 0) {
    fail(fmt::format("traceEvents[{}].tid: a {} runs on a communication stream (1 to 5), got 0", r.index, kind));
    return false;
  }
  reader::Diagnostics& diag = args.diag();
  const auto wait = micros(args, "wait_us");
  const auto bytes = args.required_number("bytes", 0, kMaxBytes);
  if (!check(diag)) return false;
  r.op.post_ns = ts - *wait;
  r.op.bytes = *bytes;
  if (r.op.post_ns < 0) {
    fail(args.path_of("wait_us") + ": longer than the time before the op (ts)");
    return false;
  }
  if (r.op.kind != TraceOpKind::kCollective) return true;
  const auto g = args.required_string("group");
  const auto c = args.required_string("collective");
  const auto root = args.required_integer("group_root", 0, kMaxRank);
  const auto seq = args.required_integer("seq", 1, 4'000'000'000);
  if (!check(diag)) return false;
  const auto gk = enum_of(*g, kAllGroupKinds);
  if (!gk) {
    fail(fmt::format("{}: \"{}\" is not one of {}", args.path_of("group"), *g, enum_names(kAllGroupKinds)));
    return false;
  }
  const auto ck = enum_of(*c, kColls);
  if (!ck) {
    fail(fmt::format("{}: \"{}\" is not one of {}", args.path_of("collective"), *c, enum_names(kColls)));
    return false;
  }
  r.op.group = *gk;
  r.op.coll = *ck;
  r.op.group_root = static_cast<int>(*root);
  r.op.seq = static_cast<std::uint32_t>(*seq);
  return true;
}

void TraceReader::metadata(ObjectReader& ev, std::size_t i) {
  reader::Diagnostics& diag = ev.diag();
  const auto name = ev.required_string("name");
  if (!check(diag)) return;
  if (*name == "process_name") {
    const auto pid = ev.required_integer("pid", 0, kMaxRank);
    if (check(diag)) pids_.insert(static_cast<int>(*pid));
    return;
  }
  if (*name != "stepcast") return;
  if (meta_) {
    return fail(fmt::format("{}: a second stepcast metadata event (the first is traceEvents[{}])", ev.path(),
                            meta_index_));
  }
  const json* a = ev.object("args");
  if (!a && diag.empty()) diag.add(ev.path_of("args"), "missing (required)");
  if (!check(diag)) return;
  ObjectReader args(*a, ev.path_of("args"), diag);
  const auto format = args.required_integer("format", 0, 1'000'000);
  if (!check(diag)) return;
  if (*format != 1) {
    return fail(fmt::format("{}: {} is not supported (this stepcast reads format 1)", args.path_of("format"), *format));
  }
  if (!layout(args) || !step_ends(args)) return;
  meta_ = true;
  meta_index_ = i;
}

bool TraceReader::layout(ObjectReader& args) {
  reader::Diagnostics& diag = args.diag();
  Placement& pl = placement_;
  const auto world = args.required_integer("world", 1, kMaxRank);
  const auto tp = args.required_integer("tp", 1, kMaxRank);
  const auto cp = args.required_integer("cp", 1, kMaxRank);
  const auto dp = args.required_integer("dp", 1, kMaxRank);
  const auto pp = args.required_integer("pp", 1, kMaxRank);
  const auto ep = args.required_integer("ep", 1, kMaxRank);
  const auto gpn = args.required_integer("gpus_per_node", 1, 1'000'000);
  if (!check(diag)) return false;
  pl.tp = static_cast<int>(*tp);
  pl.cp = static_cast<int>(*cp);
  pl.dp = static_cast<int>(*dp);
  pl.pp = static_cast<int>(*pp);
  pl.ep = static_cast<int>(*ep);
  pl.gpus_per_node = static_cast<int>(*gpn);
  // Each factor is <= kMaxRank, so a product that stays <= kMaxRank before each multiplication
  // cannot overflow; one beyond it cannot equal `world`.
  std::int64_t product = 1;
  for (std::int64_t x : {*tp, *cp, *dp, *pp}) product = product > kMaxRank ? product : product * x;
  if (product != *world) {
    fail(product > kMaxRank
             ? fmt::format("{}: {} is not tp x cp x dp x pp (more than {})", args.path_of("world"), *world, kMaxRank)
             : fmt::format("{}: {} is not tp x cp x dp x pp = {}", args.path_of("world"), *world, product));
    return false;
  }
  // Expert tensor parallelism: absent in traces of unfolded layouts (etp = tp).
  if (const auto etp = args.integer("etp", 1, kMaxRank)) pl.etp = static_cast<int>(*etp);
  if (!check(diag)) return false;
  const json* order = args.raw("order");
  if (!order) {
    diag.add(args.path_of("order"), "missing (required)");
    return check(diag);
  }
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
  if (!perm) {
    fail(args.path_of("order") + ": expected a permutation of [0, 1, 2, 3], got " + reader::describe(*order));
    return false;
  }
  if (const ExpertLayoutError e = expert_layout_error(pl); !e.field.empty()) {
    fail(fmt::format("{}: {}", args.path_of(e.field), e.message));
    return false;
  }
  return true;
}

bool TraceReader::step_ends(ObjectReader& args) {
  const std::string path = args.path_of("step_end_us");
  const json* ends = args.raw("step_end_us");
  if (!ends) {
    fail(path + ": missing (required)");
    return false;
  }
  if (!ends->is_array() || ends->empty()) {
    fail(path + ": expected a list of step end times (one per step), got " + reader::describe(*ends));
    return false;
  }
  for (std::size_t k = 0; k < ends->size(); ++k) {
    const json& x = (*ends)[k];
    if (!x.is_number() || x.get<double>() < 0 || x.get<double>() > kMaxMicros) {
      fail(reader::index(path, k) + ": expected a non-negative number, got " + reader::describe(x));
      return false;
    }
    step_end_.push_back(std::llround(x.get<double>() * 1000.0));
  }
  return true;
}

Result<Trace> TraceReader::finish(bool saw_events) {
  if (failed()) return Error{error_};
  if (!saw_events) return Error{"not a stepcast trace: no \"traceEvents\" list"};
  if (!meta_) return Error{kNoMetadata};
  Trace t;
  t.placement = placement_;
  t.step_end_ns = step_end_;
  const int world = placement_.world();
  std::set<int> present = pids_;
  for (const RawOp& r : ops_) present.insert(r.pid);
  for (int p : present) {
    if (p < world) continue;
    for (const RawOp& r : ops_) {  // name the first event of that rank
      if (r.pid == p) {
        return Error{fmt::format("traceEvents[{}].pid: rank {} is outside the trace's world ({} ranks)", r.index, p,
                                 world)};
      }
    }
    return Error{fmt::format("process_name of pid {}: rank {} is outside the trace's world ({} ranks)", p, p, world)};
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
    if (r.op.kind == TraceOpKind::kCollective && placement_.group_root(r.op.group, r.pid) != r.op.group_root) {
      return Error{fmt::format("traceEvents[{}].args.group_root: {} is not the lowest rank of rank {}'s {} group ({})",
                               r.index, r.op.group_root, r.pid, to_string(r.op.group),
                               placement_.group_root(r.op.group, r.pid))};
    }
    auto [it, fresh] = interned.try_emplace(r.name, static_cast<std::uint32_t>(t.names.size()));
    if (fresh) t.names.push_back(r.name);
    r.op.name = it->second;
    t.ranks[slot[r.pid]].ops.push_back(r.op);
  }
  return t;
}

// The JSON path of the value being parsed, and repeated keys, tracked from the streaming
// parser's events (as reader::parse_document does for a whole document).
class PathTracker {
 public:
  void on(json::parse_event_t event, const json& parsed) {
    using E = json::parse_event_t;
    if (event == E::object_start || event == E::array_start) {
      frames_.push_back(Frame{event == E::array_start, "", {}, 0});
    } else if (event == E::key) {
      if (frames_.empty()) return;
      Frame& f = frames_.back();
      f.key = parsed.get<std::string>();
      if (std::find(f.keys.begin(), f.keys.end(), f.key) != f.keys.end()) {
        if (duplicate_.empty()) duplicate_ = path();
      } else {
        f.keys.push_back(f.key);
      }
    } else if (event == E::object_end || event == E::array_end || event == E::value) {
      if (event != E::value && !frames_.empty()) frames_.pop_back();
      if (!frames_.empty() && frames_.back().array) ++frames_.back().done;
    }
  }
  std::string path() const {
    std::string p;
    for (const Frame& f : frames_) p = f.array ? reader::index(p, f.done) : reader::join(p, f.key);
    return p;
  }
  // The path of the first repeated key; "" when none.
  const std::string& duplicate() const { return duplicate_; }

 private:
  struct Frame {
    bool array = false;
    std::string key;                // objects: the current key
    std::vector<std::string> keys;  // objects: every key so far
    std::size_t done = 0;           // arrays: elements completed
  };
  std::vector<Frame> frames_;
  std::string duplicate_;
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
  if (auto bad = reader::precheck_document(text)) return Error{*bad};
  TraceReader tr;
  PathTracker where;
  bool in_events = false, saw_events = false;
  std::size_t index = 0;
  // Stream the events: each event object is handed to the reader when it ends and then
  // dropped from the document, so a trace of millions of events never sits in memory.
  json::parser_callback_t cb = [&](int depth, json::parse_event_t ev, json& parsed) -> bool {
    where.on(ev, parsed);
    if (!where.duplicate().empty()) {
      tr.invalid(where.duplicate(), "duplicate key (each key may appear once)");
      throw std::runtime_error("duplicate key");  // stops the parse; reported as above
    }
    if (depth == 1 && ev == json::parse_event_t::array_start && where.path() == "traceEvents[0]") {
      in_events = saw_events = true;
      return true;
    }
    if (depth == 1 && ev == json::parse_event_t::array_end) {
      in_events = false;
      return true;
    }
    if (!in_events || depth != 2) return true;
    if (ev == json::parse_event_t::object_end) {
      tr.event(parsed, index++);
      return false;
    }
    if (ev == json::parse_event_t::value || ev == json::parse_event_t::array_end) {
      tr.not_an_object(index++, ev == json::parse_event_t::value ? reader::describe(parsed) : "a list");
      return false;
    }
    return true;
  };
  try {
    const json root = json::parse(text.begin(), text.end(), cb, /*allow_exceptions=*/true, /*ignore_comments=*/true);
    if (!root.is_object()) {
      return Error{"not a stepcast trace: expected a JSON object with \"traceEvents\", got " + reader::describe(root)};
    }
  } catch (const json::exception& e) {
    // The library's "[json.exception.parse_error.101] " prefix is dropped; the error names
    // where the text broke (a truncated trace: the event it ends in).
    std::string what = e.what();
    if (auto pos = what.find("] "); what.rfind("[json.exception", 0) == 0 && pos != std::string::npos) {
      what = what.substr(pos + 2);
    }
    tr.invalid(where.path(), "invalid JSON: " + what);
    return tr.finish(saw_events);
  } catch (const std::runtime_error&) {
    return tr.finish(saw_events);  // the duplicate key
  }
  return tr.finish(saw_events);
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

namespace {

// The rules of analyze() (breakdown.cc) on the neutral trace.
RankBreakdown breakdown_rank(const TraceRank& r, std::int64_t end, int steps, int pp) {
  std::vector<PartInterval> iv;
  iv.reserve(r.ops.size() * 2);
  for (const TraceOp& o : r.ops) {
    if (o.kind == TraceOpKind::kSend) continue;
    if (o.stream == Stream::kCompute) {
      if (o.end_ns == o.begin_ns) continue;
      const Part c = compute_part(o.cclass);
      iv.push_back({o.begin_ns, o.end_ns, c});
      continue;
    }
    if (o.begin_ns > o.post_ns && o.kind == TraceOpKind::kCollective && counts_as_wait(o.group, pp)) {
      iv.push_back({o.post_ns, o.begin_ns, Part::kWait});
    }
    if (o.end_ns > o.begin_ns) iv.push_back({o.begin_ns, o.end_ns, transfer_part(o.stream)});
  }
  return sweep_breakdown(r.rank, r.stage, iv, end, steps);
}

}  // namespace

std::vector<RankBreakdown> trace_breakdown(const Trace& trace) {
  std::vector<RankBreakdown> out;
  if (trace.step_end_ns.empty()) return out;
  for (const TraceRank& r : trace.ranks)
    out.push_back(breakdown_rank(r, trace.step_end_ns.back(), trace.steps(), trace.placement.pp));
  return out;
}

}  // namespace stepcast::analysis

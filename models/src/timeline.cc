#include "stepcast/models/timeline.h"

#include <fmt/format.h>

namespace stepcast {

namespace {

// Microseconds with three decimals from integer nanoseconds (no floating point).
std::string us(SimTime t) {
  const std::int64_t ns = t.ns();
  const std::int64_t whole = ns / 1000, frac = ns % 1000;
  if (ns < 0) return fmt::format("-{}.{:03}", -whole, -frac);
  return fmt::format("{}.{:03}", whole, frac);
}

std::string escape(const std::string& s) {
  std::string o;
  for (char ch : s) {
    if (ch == '"' || ch == '\\') o += '\\';
    o += ch;
  }
  return o;
}

}  // namespace

std::string chrome_trace_json(const Program& program, const Timeline& timeline) {
  std::string out = "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
  bool first = true;
  auto emit = [&](const std::string& e) {
    if (!first) out += ",\n";
    out += e;
    first = false;
  };
  // What a reader needs to regroup ranks (stepcast diagnose reads its own traces back).
  const Placement& pl = program.placement;
  std::string step_ends;
  for (SimTime t : timeline.step_end) step_ends += (step_ends.empty() ? "" : ",") + us(t);
  emit(fmt::format(R"j({{"ph":"M","name":"stepcast","pid":0,"args":{{"format":1,"world":{},"tp":{},"cp":{},"dp":{},"pp":{},"ep":{},{}"gpus_per_node":{},"order":[{},{},{},{}],"step_end_us":[{}]}}}})j",
                   pl.world(), pl.tp, pl.cp, pl.dp, pl.pp, pl.ep,
                   pl.folded() ? fmt::format(R"j("etp":{},)j", pl.expert_tp()) : std::string(), pl.gpus_per_node,
                   pl.order[0], pl.order[1], pl.order[2], pl.order[3], step_ends));
  std::vector<std::vector<std::uint32_t>> seqs;
  for (const RoleTemplate& role : program.roles) seqs.push_back(collective_sequence(role));
  for (const RankTimeline& r : timeline.ranks) {
    emit(fmt::format(R"j({{"ph":"M","name":"process_name","pid":{},"args":{{"name":"rank {} (stage {}, node {})"}}}})j",
                     r.rank, r.rank, r.stage, program.placement.node(r.rank)));
    emit(fmt::format(R"j({{"ph":"M","name":"process_sort_index","pid":{},"args":{{"sort_index":{}}}}})j", r.rank, r.rank));
    for (int s = 0; s < kNumStreams; ++s) {
      emit(fmt::format(R"j({{"ph":"M","name":"thread_name","pid":{},"tid":{},"args":{{"name":"{}"}}}})j", r.rank, s,
                       to_string(static_cast<Stream>(s))));
    }
    const RoleTemplate& role = program.roles[static_cast<std::size_t>(r.stage)];
    for (const Span& sp : r.spans) {
      const Op& op = role.ops[sp.op];
      if (op.kind == OpKind::kAlloc || op.kind == OpKind::kFree) continue;
      const std::string& name = program.names[op.name];
      std::string args = fmt::format(R"j("step":{},"kind":"{}")j", sp.step, to_string(op.kind));
      if (op.layer >= 0) args += fmt::format(R"(,"layer":{})", op.layer);
      if (op.microbatch >= 0) args += fmt::format(R"(,"microbatch":{})", op.microbatch);
      if (op.kind == OpKind::kCompute) {
        args += fmt::format(R"(,"class":"{}","flops":{})", to_string(op.cclass), op.flops);
      } else {
        args += fmt::format(R"(,"bytes":{},"wait_us":{})", op.bytes, us(sp.begin - sp.post));
        if (op.kind == OpKind::kCollective) {
          args += fmt::format(R"j(,"group":"{}","collective":"{}","group_root":{},"seq":{})j", to_string(op.group),
                              to_string(op.coll), pl.group_root(op.group, r.rank),
                              seqs[static_cast<std::size_t>(r.stage)][sp.op]);
        }
      }
      // Waiting for peers is drawn as its own slice, then the transfer.
      if (sp.begin > sp.post) {
        emit(fmt::format(R"j({{"ph":"X","name":"wait: {}","pid":{},"tid":{},"ts":{},"dur":{},"args":{{{}}}}})j",
                         escape(name), r.rank, static_cast<int>(sp.stream), us(sp.post),
                         us(sp.begin - sp.post), args));
      }
      emit(fmt::format(R"j({{"ph":"X","name":"{}","pid":{},"tid":{},"ts":{},"dur":{},"args":{{{}}}}})j",
                       escape(name), r.rank, static_cast<int>(sp.stream), us(sp.begin),
                       us(sp.end - sp.begin), args));
    }
    for (const MemorySample& m : r.memory) {
      emit(fmt::format(R"j({{"ph":"C","name":"memory GiB","pid":{},"ts":{},"args":{{"GiB":{:.6f}}}}})j", r.rank,
                       us(m.time), m.bytes / (1024.0 * 1024.0 * 1024.0)));
    }
  }
  out += "\n]}\n";
  return out;
}

}  // namespace stepcast

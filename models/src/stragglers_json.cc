#include "stragglers_json.h"

#include <fmt/format.h>

namespace stepcast {

const char* to_string(StragglerKind kind) {
  switch (kind) {
    case StragglerKind::kSlowdown: return "slowdown";
    case StragglerKind::kJitter: return "jitter";
    case StragglerKind::kInputStall: return "input_stall";
    case StragglerKind::kDataSkew: return "data_skew";
    case StragglerKind::kSlowLink: return "slow_link";
  }
  return "?";
}

}  // namespace stepcast

namespace stepcast::detail {

namespace {

constexpr std::int64_t kMaxIndex = 100'000'000;
// Length caps (docs/scenarios.md "Limits"): far above any real fault description, and low
// enough that a hostile file cannot make the loader, the diagnostics or the simulation that
// loops over every straggler per op spend minutes on it.
constexpr std::size_t kMaxStragglers = 1000;
constexpr std::size_t kMaxListEntries = 100'000;

std::vector<int> int_list(ObjectReader& r, std::string_view key) {
  std::vector<int> out;
  const json* v = r.raw(key);
  if (!v) return out;
  if (!v->is_array()) {
    r.diag().add(r.path_of(key), "expected a list of integers, got " + describe(*v));
    return out;
  }
  if (v->size() > kMaxListEntries) {
    r.diag().add(r.path_of(key), fmt::format("{} entries, more than the {} stepcast supports", v->size(),
                                             kMaxListEntries));
    return out;
  }
  for (std::size_t i = 0; i < v->size(); ++i) {
    const json& x = (*v)[i];
    const std::string path = fmt::format("{}[{}]", r.path_of(key), i);
    if (!x.is_number_integer() || x.get<std::int64_t>() < 0 || x.get<std::int64_t>() > kMaxIndex) {
      r.diag().add(path, "expected a non-negative integer, got " + describe(x));
      continue;
    }
    out.push_back(static_cast<int>(x.get<std::int64_t>()));
  }
  return out;
}

StragglerSpec read_straggler(ObjectReader& r) {
  StragglerSpec s;
  const auto kind = r.choice("kind", {"slowdown", "jitter", "input_stall", "data_skew", "slow_link"});
  if (!kind) {
    if (!r.has("kind")) r.diag().add(r.path_of("kind"), "required: slowdown, jitter, input_stall, data_skew or slow_link");
    r.ignore({"ranks", "nodes", "factor", "cv", "per", "every_steps", "duration_s", "from_step", "to_step"});
    return s;
  }
  s.kind = *kind == "slowdown"      ? StragglerKind::kSlowdown
           : *kind == "jitter"      ? StragglerKind::kJitter
           : *kind == "input_stall" ? StragglerKind::kInputStall
           : *kind == "data_skew"   ? StragglerKind::kDataSkew
                                    : StragglerKind::kSlowLink;
  s.ranks = int_list(r, "ranks");
  s.nodes = int_list(r, "nodes");
  if (auto v = r.integer("from_step", 0, 1'000'000)) s.from_step = static_cast<int>(*v);
  if (auto v = r.integer("to_step", 0, 1'000'000)) s.to_step = static_cast<int>(*v);
  switch (s.kind) {
    case StragglerKind::kSlowdown:
      if (auto f = r.number("factor", 0, 1000, false, true)) s.factor = *f;
      else if (!r.has("factor")) r.diag().add(r.path_of("factor"), "required: compute time multiplier (1.18 = 18 % slower)");
      if (s.ranks.empty() && s.nodes.empty()) r.diag().add(r.path(), "a slowdown needs \"ranks\" or \"nodes\"");
      break;
    case StragglerKind::kJitter:
    case StragglerKind::kDataSkew:
      if (auto c = r.number("cv", 0, 10)) s.cv = *c;
      else if (!r.has("cv")) r.diag().add(r.path_of("cv"), "required: coefficient of variation (0.02 = 2 %)");
      if (s.kind == StragglerKind::kJitter) {
        if (auto p = r.choice("per", {"op", "step"})) s.per_op = *p == "op";
      }
      break;
    case StragglerKind::kInputStall:
      if (auto d = r.number("duration_s", 0, 1e6, false, true)) s.duration_s = *d;
      else if (!r.has("duration_s")) r.diag().add(r.path_of("duration_s"), "required: extra input time of a stalled step");
      if (auto e = r.integer("every_steps", 1, 1'000'000)) s.every_steps = static_cast<int>(*e);
      if (s.nodes.empty()) r.diag().add(r.path(), "an input stall needs \"nodes\" (the hosts that stall)");
      break;
    case StragglerKind::kSlowLink:
      if (auto f = r.number("factor", 0, 1, false, true)) s.factor = *f;
      else if (!r.has("factor")) r.diag().add(r.path_of("factor"), "required: bandwidth multiplier in (0, 1]");
      if (s.ranks.empty() && s.nodes.empty()) r.diag().add(r.path(), "a slow link needs \"nodes\" or \"ranks\"");
      break;
  }
  if (s.from_step > s.to_step) r.diag().add(r.path_of("to_step"), fmt::format("{} is before from_step ({})", s.to_step, s.from_step));
  return s;
}

}  // namespace

PerturbationSpec read_perturbations(ObjectReader& faults) {
  PerturbationSpec out;
  Diagnostics& diag = faults.diag();
  if (const json* v = faults.raw("stragglers")) {
    if (!v->is_array()) {
      diag.add(faults.path_of("stragglers"), "expected a list of objects, got " + describe(*v));
    } else if (v->size() > kMaxStragglers) {
      diag.add(faults.path_of("stragglers"),
               fmt::format("{} entries, more than the {} stepcast supports", v->size(), kMaxStragglers));
    } else {
      for (std::size_t i = 0; i < v->size(); ++i) {
        const std::string path = fmt::format("{}[{}]", faults.path_of("stragglers"), i);
        if (!(*v)[i].is_object()) {
          diag.add(path, "expected an object, got " + describe((*v)[i]));
          continue;
        }
        ObjectReader r((*v)[i], path, diag);
        out.stragglers.push_back(read_straggler(r));
        r.finish();
      }
    }
  }
  if (const json* v = faults.raw("crash")) {
    if (!v->is_object()) {
      diag.add(faults.path_of("crash"), "expected an object, got " + describe(*v));
    } else {
      ObjectReader r(*v, faults.path_of("crash"), diag);
      CrashSpec c;
      if (auto x = r.integer("rank", 0, kMaxIndex)) c.rank = static_cast<int>(*x);
      else if (!r.has("rank")) diag.add(r.path_of("rank"), "required");
      if (auto x = r.integer("step", 0, 1'000'000)) c.step = static_cast<int>(*x);
      if (auto x = r.integer("at_op", 0, kMaxIndex)) c.at_op = static_cast<std::uint32_t>(*x);
      c.at_time_s = r.number("at_time_s", 0, 1e9);
      if (!c.at_op && !c.at_time_s && !r.has("at_op") && !r.has("at_time_s")) {
        diag.add(r.path(), "give \"at_op\" (an op index of the rank's program, see the trace) or \"at_time_s\"");
      }
      r.finish();
      out.crash = c;
    }
  }
  if (const json* v = faults.raw("mismatch")) {
    if (!v->is_object()) {
      diag.add(faults.path_of("mismatch"), "expected an object, got " + describe(*v));
    } else {
      ObjectReader r(*v, faults.path_of("mismatch"), diag);
      MismatchSpec m;
      if (auto x = r.integer("rank", 0, kMaxIndex)) m.rank = static_cast<int>(*x);
      else if (!r.has("rank")) diag.add(r.path_of("rank"), "required");
      if (auto x = r.integer("step", 0, 1'000'000)) m.step = static_cast<int>(*x);
      if (auto x = r.integer("at_op", 0, kMaxIndex)) m.at_op = static_cast<std::uint32_t>(*x);
      else if (!r.has("at_op")) diag.add(r.path_of("at_op"), "required: the op index of the collective (see the trace)");
      if (auto x = r.number("bytes_factor", 0, 1e6, false, true)) m.bytes_factor = *x;
      r.finish();
      out.mismatch = m;
    }
  }
  return out;
}

std::vector<std::string> perturbation_errors(const PerturbationSpec& spec, const ClusterSpec& c) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < spec.stragglers.size(); ++i) {
    const StragglerSpec& s = spec.stragglers[i];
    for (std::size_t k = 0; k < s.ranks.size(); ++k) {
      if (s.ranks[k] >= c.world()) {
        out.push_back(fmt::format("faults.stragglers[{}].ranks[{}]: rank {} is outside the cluster ({} GPUs)", i, k,
                                  s.ranks[k], c.world()));
      }
    }
    for (std::size_t k = 0; k < s.nodes.size(); ++k) {
      if (s.nodes[k] >= c.nodes) {
        out.push_back(fmt::format("faults.stragglers[{}].nodes[{}]: node {} is outside the cluster ({} nodes)", i, k,
                                  s.nodes[k], c.nodes));
      }
    }
  }
  if (spec.crash && spec.crash->rank >= c.world()) {
    out.push_back(fmt::format("faults.crash.rank: rank {} is outside the cluster ({} GPUs)", spec.crash->rank, c.world()));
  }
  if (spec.mismatch && spec.mismatch->rank >= c.world()) {
    out.push_back(fmt::format("faults.mismatch.rank: rank {} is outside the cluster ({} GPUs)", spec.mismatch->rank,
                              c.world()));
  }
  return out;
}

}  // namespace stepcast::detail

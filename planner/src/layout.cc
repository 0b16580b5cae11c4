#include "stepcast/planner/layout.h"

#include <algorithm>
#include <cstdlib>
#include <charconv>
#include <limits>
#include <vector>

#include <fmt/format.h>

#include "stepcast/models/names.h"
#include "stepcast/models/text.h"

namespace stepcast::planner {

namespace {

const std::vector<std::string>& keys() {
  static const std::vector<std::string> k = {"tp",
                                             "pp",
                                             "dp",
                                             "cp",
                                             "ep",
                                             "etp",
                                             "sp",
                                             "tpo",
                                             "tp_comm_overlap",
                                             "a2a",
                                             "moe_a2a_overlap",
                                             "dispatcher",
                                             "moe_dispatcher",
                                             "schedule",
                                             "v",
                                             "virtual_stages",
                                             "microbatch_group_size_per_vp_stage",
                                             "mb",
                                             "microbatch",
                                             "gb",
                                             "global_batch",
                                             "zero",
                                             "recompute",
                                             "recompute_num_layers",
                                             "recompute_method",
                                             "recompute_modules",
                                             "stack",
                                             "gpus",
                                             "offload_optimizer",
                                             "offload_activations",
                                             "offload_weights"};
  return k;
}

std::optional<std::int64_t> to_int(std::string_view s) {
  std::int64_t x = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), x);
  if (ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return x;
}


}  // namespace

// The C-string names of layout.h, from the tables of stepcast/models/names.h.
const char* schedule_name(Schedule schedule) { return to_string(schedule).data(); }
const char* recompute_name(Recompute recompute) { return to_string(recompute).data(); }

std::string recompute_modules_text(std::uint32_t modules) {
  std::string out;
  for (const std::string& n : recompute_module_names(modules)) out += (out.empty() ? "" : "+") + n;
  return out;
}

std::string layout_string(const Plan& p) {
  return fmt::format("tp={},pp={},dp={},cp={},ep={}{},sp={}{}{},schedule={},v={},mb={},gb={},zero={},recompute={}{}",
                     p.tp, p.pp, p.dp, p.cp, p.ep,
                     p.expert_tp() != p.tp ? fmt::format(",etp={}", p.expert_tp()) : std::string(),
                     p.sequence_parallel ? "true" : "false", p.tp_comm_overlap ? ",tpo=true" : "",
                     std::string(p.moe_a2a_overlap ? ",a2a=true" : "") +
                         (p.moe_dispatcher == MoeDispatcher::kAllToAll
                              ? std::string()
                              : ",dispatcher=" + std::string(to_string(p.moe_dispatcher))),
                     schedule_name(p.schedule), p.virtual_stages, p.microbatch, p.global_batch, p.zero,
                     recompute_name(p.recompute),
                     p.stack == Stack::kMegatronCore ? std::string() : ",stack=" + std::string(to_string(p.stack))) +
         (p.microbatch_group > 0 ? fmt::format(",microbatch_group_size_per_vp_stage={}", p.microbatch_group) : "") +
         (p.recompute_group() > 1 ? ",recompute_method=uniform" : "") +
         (p.recompute_count() > 0 ? fmt::format(",recompute_num_layers={}", p.recompute_count()) : "") +
         (p.recompute == Recompute::kSelective && p.recompute_modules != kDefaultRecomputeModules
              ? ",recompute_modules=" + recompute_modules_text(p.recompute_modules)
              : "") +
         (p.offload_optimizer > 0 ? fmt::format(",offload_optimizer={:g}", p.offload_optimizer) : "") +
         (p.offload_activations > 0 ? fmt::format(",offload_activations={:g}", p.offload_activations) : "") +
         (p.offload_weights > 0 ? fmt::format(",offload_weights={:g}", p.offload_weights) : "");
}

Result<ParsedLayout> parse_layout(std::string_view text, const Plan& base) {
  ParsedLayout out;
  out.plan = base;
  const std::string quoted = "\"" + printable(text) + "\"";
  if (text.empty()) return Error{"\"\": empty layout; expected key=value pairs such as \"tp=8,pp=4\""};
  std::vector<std::string> seen;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = text.find(',', start);
    const std::string_view item =
        text.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    start = comma == std::string_view::npos ? text.size() + 1 : comma + 1;
    const std::size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      return Error{fmt::format("{}: \"{}\" is not key=value", quoted, printable(item))};
    }
    std::string key(item.substr(0, eq));
    const std::string_view value = item.substr(eq + 1);
    if (std::find(keys().begin(), keys().end(), key) == keys().end()) {
      std::string msg = fmt::format("{}: unknown key \"{}\"", quoted, printable(key));
      std::string best;
      int best_d = std::numeric_limits<int>::max();
      for (const std::string& k : keys()) {
        const int d = edit_distance(key, k);
        if (d < best_d) {
          best_d = d;
          best = k;
        }
      }
      if (best_d <= std::max<int>(1, static_cast<int>(key.size()) / 3)) msg += "; did you mean \"" + best + "\"?";
      return Error{msg +
                   " (keys: tp, pp, dp, cp, ep, etp, sp, tpo, a2a, dispatcher, schedule, v, "
                   "microbatch_group_size_per_vp_stage, mb, gb, zero, recompute, "
                   "recompute_num_layers, recompute_method, recompute_modules, stack, gpus, "
                   "offload_optimizer, offload_activations, offload_weights)"};
    }
    // Aliases share one slot.
    if (key == "virtual_stages") key = "v";
    if (key == "microbatch") key = "mb";
    if (key == "global_batch") key = "gb";
    if (key == "tp_comm_overlap") key = "tpo";
    if (key == "moe_a2a_overlap") key = "a2a";
    if (key == "moe_dispatcher") key = "dispatcher";
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) {
      return Error{fmt::format("{}: {} is given twice", quoted, key)};
    }
    seen.push_back(key);
    auto integer = [&](std::int64_t min, std::int64_t max) -> Result<std::int64_t> {
      const auto x = to_int(value);
      if (!x) return Error{fmt::format("{}: {}: expected an integer, got \"{}\"", quoted, key, printable(value))};
      if (*x < min || *x > max) {
        return Error{fmt::format("{}: {}: {} is out of range ({} to {})", quoted, key, *x, min, max)};
      }
      return *x;
    };
    constexpr std::int64_t kMax = 1'000'000;
    if (key == "sp") {
      if (value == "true" || value == "1") out.plan.sequence_parallel = true;
      else if (value == "false" || value == "0") out.plan.sequence_parallel = false;
      else return Error{fmt::format("{}: sp: expected true or false, got \"{}\"", quoted, printable(value))};
    } else if (key == "tpo") {
      if (value == "true" || value == "1") out.plan.tp_comm_overlap = true;
      else if (value == "false" || value == "0") out.plan.tp_comm_overlap = false;
      else return Error{fmt::format("{}: tpo: expected true or false, got \"{}\"", quoted, printable(value))};
    } else if (key == "a2a") {
      out.a2a_given = true;
      if (value == "true" || value == "1") out.plan.moe_a2a_overlap = true;
      else if (value == "false" || value == "0") out.plan.moe_a2a_overlap = false;
      else return Error{fmt::format("{}: a2a: expected true or false, got \"{}\"", quoted, printable(value))};
    } else if (key == "schedule") {
      if (auto x = parse_schedule(value)) out.plan.schedule = *x;
      else {
        return Error{fmt::format("{}: schedule: \"{}\" is not one of {}", quoted, printable(value),
                                 quoted_names<Schedule>())};
      }
      out.schedule_given = true;
    } else if (key.rfind("offload_", 0) == 0) {
      char* end = nullptr;
      const std::string v(value);
      const double f = v.empty() ? -1 : std::strtod(v.c_str(), &end);
      if (v.empty() || end != v.c_str() + v.size() || !(f >= 0 && f <= 1)) {
        return Error{fmt::format("{}: {}: expected a fraction 0 to 1, got \"{}\"", quoted, key, printable(value))};
      }
      (key == "offload_optimizer" ? out.plan.offload_optimizer
       : key == "offload_activations" ? out.plan.offload_activations
                                      : out.plan.offload_weights) = f;
    } else if (key == "dispatcher") {
      if (auto x = parse_name<MoeDispatcher>(value)) out.plan.moe_dispatcher = *x;
      else {
        return Error{fmt::format("{}: dispatcher: \"{}\" is not one of {}", quoted, printable(value),
                                 quoted_names<MoeDispatcher>())};
      }
    } else if (key == "stack") {
      if (auto x = parse_stack(value)) out.plan.stack = *x;
      else {
        return Error{fmt::format("{}: stack: \"{}\" is not one of {}", quoted, printable(value), quoted_names<Stack>())};
      }
    } else if (key == "recompute_method") {
      if (auto x = parse_name<RecomputeMethod>(value)) out.plan.recompute_method = *x;
      else {
        return Error{fmt::format("{}: recompute_method: \"{}\" is not one of {}", quoted, printable(value),
                                 quoted_names<RecomputeMethod>())};
      }
    } else if (key == "recompute_modules") {
      std::uint32_t bits = 0;
      const std::string v(value);
      std::size_t at = 0;
      while (at <= v.size()) {
        const std::size_t plus = std::min(v.find('+', at), v.size());
        const std::string name = v.substr(at, plus - at);
        if (auto m = parse_name<RecomputeModule>(name)) {
          bits |= module_bit(*m);
        } else {
          return Error{fmt::format("{}: recompute_modules: \"{}\" is not one of {} (several joined by \"+\")", quoted,
                                   printable(name), quoted_names<RecomputeModule>())};
        }
        at = plus + 1;
      }
      out.plan.recompute_modules = bits;
      out.modules_given = true;
    } else if (key == "recompute") {
      if (auto x = parse_recompute(value)) out.plan.recompute = *x;
      else {
        return Error{fmt::format("{}: recompute: \"{}\" is not one of {}", quoted, printable(value),
                                 quoted_names<Recompute>())};
      }
    } else {
      const std::int64_t max = key == "gb"                                   ? 1'000'000'000
                               : key == "gpus"                               ? 10'000'000
                               : key == "zero"                               ? 3
                               : key == "v"                                  ? 1000
                               : key == "microbatch_group_size_per_vp_stage" ? 1'000'000'000
                                                                             : kMax;
      auto x = integer(key == "zero" || key == "recompute_num_layers" ? 0 : 1, max);
      if (!x.ok()) return x.error();
      const int v = static_cast<int>(*x);
      if (key == "tp") out.plan.tp = v;
      else if (key == "pp") out.plan.pp = v;
      else if (key == "dp") out.plan.dp = v, out.dp_given = true;
      else if (key == "cp") out.plan.cp = v;
      else if (key == "ep") out.plan.ep = v;
      else if (key == "etp") out.plan.etp = v;
      else if (key == "v") out.plan.virtual_stages = v;
      else if (key == "microbatch_group_size_per_vp_stage") out.plan.microbatch_group = v;
      else if (key == "mb") out.plan.microbatch = v;
      else if (key == "gb") out.plan.global_batch = *x, out.gb_given = true;
      else if (key == "zero") out.plan.zero = v;
      else if (key == "recompute_num_layers") out.plan.recompute_num_layers = v;
      else if (key == "gpus") out.gpus = v;
    }
  }
  // A layout string names its recomputed modules when they are not Megatron-Core's default:
  // "recompute=selective" alone is the default set, whatever the scenario's plan holds.
  if (!out.modules_given && std::find(seen.begin(), seen.end(), "recompute") != seen.end()) {
    out.plan.recompute_modules = kDefaultRecomputeModules;
  }
  if (!out.schedule_given && out.plan.virtual_stages >= 2) out.plan.schedule = Schedule::kInterleaved;
  if (!out.schedule_given && out.plan.virtual_stages == 1 && out.plan.schedule == Schedule::kInterleaved) {
    out.plan.schedule = Schedule::kOneFOneB;
  }
  return out;
}

}  // namespace stepcast::planner

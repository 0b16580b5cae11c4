#include "search_json.h"

#include "list_reader.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include <fmt/format.h>

#include "stepcast/models/names.h"

namespace stepcast::detail {

namespace {

constexpr std::int64_t kMaxGpus = 10'000'000;
constexpr std::int64_t kMaxGlobalBatch = 1'000'000'000;  // as plan.global_batch
constexpr std::int64_t kMaxDegree = 1'000'000;           // as plan.tp, plan.pp, ...

// One integer in [min, max], with the messages of ObjectReader::integer.
std::optional<std::int64_t> integer_value(const json& v, const std::string& path, std::int64_t min,
                                          std::int64_t max, Diagnostics& diag) {
  if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(max)) {
    diag.add(path, fmt::format("{} is out of range ({} to {})", describe(v), min, max));
    return std::nullopt;
  }
  std::int64_t x = 0;
  if (v.is_number_integer()) {
    x = v.get<std::int64_t>();
  } else if (v.is_number_float() && std::isfinite(v.get<double>()) &&
             v.get<double>() == std::floor(v.get<double>())) {
    const double d = v.get<double>();
    if (d < static_cast<double>(min) || d > static_cast<double>(max)) {
      diag.add(path, fmt::format("{} is out of range ({} to {})", describe(v), min, max));
      return std::nullopt;
    }
    x = static_cast<std::int64_t>(d);
  } else {
    diag.add(path, "expected an integer, got " + describe(v));
    return std::nullopt;
  }
  if (x < min || x > max) {
    diag.add(path, fmt::format("{} is out of range ({} to {})", x, min, max));
    return std::nullopt;
  }
  return x;
}

template <typename T>
std::optional<std::vector<T>> integers(ObjectReader& r, std::string_view key, std::int64_t min,
                                       std::int64_t max) {
  const json* v = r.raw(key);
  if (!v) return std::nullopt;
  return list_of<T>(*v, r.path_of(key), "an integer or a list of integers", r.diag(),
                    [&](const json& e, const std::string& path) -> std::optional<T> {
                      if (auto x = integer_value(e, path, min, max, r.diag())) return static_cast<T>(*x);
                      return std::nullopt;
                    });
}

// `gpus`: an integer, a list, or {"min": A, "max": B}: A, 2A, 4A, ... up to B.
std::optional<std::vector<int>> read_gpus(ObjectReader& r) {
  const json* v = r.raw("gpus");
  if (!v) return std::nullopt;
  if (!v->is_object()) return integers<int>(r, "gpus", 1, kMaxGpus);
  const std::size_t before = r.diag().size();
  ObjectReader range(*v, r.path_of("gpus"), r.diag());
  const auto lo = range.integer("min", 1, kMaxGpus);
  const auto hi = range.integer("max", 1, kMaxGpus);
  range.finish();
  if (r.diag().size() != before) return std::nullopt;
  if (!lo || !hi) {
    r.diag().add(r.path_of("gpus"), "a range needs \"min\" and \"max\" (the sweep doubles from min to max)");
    return std::nullopt;
  }
  if (*lo > *hi) {
    r.diag().add(r.path_of("gpus"), fmt::format("min {} exceeds max {}", *lo, *hi));
    return std::nullopt;
  }
  std::vector<int> out;
  for (std::int64_t g = *lo; g <= *hi; g *= 2) out.push_back(static_cast<int>(g));
  return out;
}

}  // namespace

std::optional<SearchSpec> read_search(const json& v, Diagnostics& diag) {
  if (!v.is_object()) {
    diag.add("search", "expected an object, got " + describe(v));
    return std::nullopt;
  }
  SearchSpec q;
  ObjectReader r(v, "search", diag);
  if (auto x = read_gpus(r)) q.gpus = *x;
  if (auto x = integers<std::int64_t>(r, "global_batch", 1, kMaxGlobalBatch)) q.global_batch = *x;
  if (auto x = integers<int>(r, "tp", 1, kMaxDegree)) q.tp = *x;
  if (auto x = integers<int>(r, "pp", 1, kMaxDegree)) q.pp = *x;
  if (auto x = integers<int>(r, "cp", 1, kMaxDegree)) q.cp = *x;
  if (auto x = integers<int>(r, "ep", 1, kMaxDegree)) q.ep = *x;
  if (auto x = integers<int>(r, "virtual_stages", 2, 1000)) q.virtual_stages = *x;
  if (auto x = integers<int>(r, "microbatch", 1, kMaxDegree)) q.microbatch = *x;
  if (auto x = integers<int>(r, "zero", 0, 3)) q.zero = *x;
  if (auto x = choices<Schedule>(r, "schedule")) q.schedule = *x;
  if (auto x = choices<Recompute>(r, "recompute")) q.recompute = *x;
  if (const json* raw = r.raw("recompute_num_layers")) {
    // Counts (integers >= 0) and/or "fit" (kFit here): the fewest layers that fit, per layout.
    constexpr int kFit = -1;
    auto x = list_of<int>(*raw, r.path_of("recompute_num_layers"), "an integer, \"fit\" or a list of them", diag,
                          [&](const json& e, const std::string& path) -> std::optional<int> {
                            if (e.is_string()) {
                              if (e.get<std::string>() == "fit") return kFit;
                              diag.add(path, fmt::format("{}: expected an integer >= 0 or \"fit\" (the fewest "
                                                         "layers per chunk that make each layout fit)",
                                                         describe(e)));
                              return std::nullopt;
                            }
                            if (auto n = integer_value(e, path, 0, 100000, diag)) return static_cast<int>(*n);
                            return std::nullopt;
                          });
    if (x) {
      q.recompute_num_layers_fit = !x->empty() && x->front() == kFit;  // sorted: kFit first
      if (q.recompute_num_layers_fit) x->erase(x->begin());
      q.recompute_num_layers = *x;
    }
  }
  if (auto x = choices<RecomputeMethod>(r, "recompute_method")) q.recompute_method = *x;
  if (const json* raw = r.raw("recompute_modules")) {
    // A list of module sets, each a list of Megatron-Core's module names.
    const std::string path = r.path_of("recompute_modules");
    const char* example = "a list of module sets, e.g. [[\"core_attn\"], [\"moe_act\", \"layernorm\"]]";
    if (!raw->is_array() || raw->empty() || !(*raw)[0].is_array()) {
      diag.add(path, fmt::format("expected {}, got {}", example, describe(*raw)));
    } else {
      auto x = list_of<std::uint32_t>(
          *raw, path, example, diag, [&](const json& e, const std::string& at) -> std::optional<std::uint32_t> {
            auto mods = list_of<RecomputeModule>(
                e, at, "a list of module names", diag,
                [&](const json& n, const std::string& np) { return name_value<RecomputeModule>(n, np, diag); });
            if (!mods) return std::nullopt;
            if (!e.is_array()) {
              diag.add(at, fmt::format("expected a list of module names (a set), got {}", describe(e)));
              return std::nullopt;
            }
            std::uint32_t bits = 0;
            for (RecomputeModule m : *mods) bits |= module_bit(m);
            return bits;
          });
      if (x) q.recompute_modules = *x;
    }
  }
  if (auto x = choices<Stack>(r, "stack")) q.stack = *x;
  if (auto x = choices<MoeDispatcher>(r, "moe_dispatcher")) q.moe_dispatcher = *x;
  // A boolean or a list of them.
  auto bools = [&](const char* key, std::vector<bool>& out) {
    const json* raw = r.raw(key);
    if (!raw) return;
    auto x = list_of<bool>(*raw, r.path_of(key), "true, false or a list of them", diag,
                           [&](const json& e, const std::string& path) -> std::optional<bool> {
                             if (e.is_boolean()) return e.get<bool>();
                             diag.add(path, "expected true or false, got " + describe(e));
                             return std::nullopt;
                           });
    if (x) out = *x;
  };
  bools("sequence_parallel", q.sequence_parallel);
  bools("tp_comm_overlap", q.tp_comm_overlap);
  bools("fold_experts", q.fold_experts);
  if (auto x = integers<int>(r, "etp", 1, kMaxDegree)) {
    q.etp = *x;
    if (!q.fold_experts.empty()) {
      diag.add(r.path_of("etp"), "give either etp (the expert tensor-parallel widths) or fold_experts, not both");
    }
  }
  // A fraction 0..1 or a list of them.
  auto fractions = [&](const char* key, std::vector<double>& out) {
    const json* raw = r.raw(key);
    if (!raw) return;
    auto x = list_of<double>(*raw, r.path_of(key), "a number 0 to 1 or a list of them", diag,
                             [&](const json& e, const std::string& path) -> std::optional<double> {
                               if (!e.is_number()) {
                                 diag.add(path, "expected a number 0 to 1, got " + describe(e));
                                 return std::nullopt;
                               }
                               const double f = e.get<double>();
                               if (!(f >= 0 && f <= 1)) {
                                 diag.add(path, fmt::format("{} is out of range (0 to 1)", describe(e)));
                                 return std::nullopt;
                               }
                               return f;
                             });
    if (x) out = *x;
  };
  fractions("offload_optimizer", q.offload_optimizer);
  fractions("offload_activations", q.offload_activations);
  fractions("offload_weights", q.offload_weights);
  if (auto x = r.boolean("allow_tp_across_nodes")) q.allow_tp_across_nodes = *x;
  if (auto x = r.integer("top_k", 0, 1000)) q.top_k = static_cast<int>(*x);
  if (auto x = r.choice("objective", names_of<Objective>())) q.objective = parse_objective(*x);
  if (auto x = r.number("price_per_gpu_hour", 0, 1e6)) q.price_per_gpu_hour = *x;
  if (auto x = r.integer("threads", 0, 1024)) q.threads = static_cast<int>(*x);
  r.finish();
  // A key of one kind of recomputation, given while search.recompute leaves that kind out.
  auto applies_to = [&](bool given, const char* key, Recompute kind) {
    if (given && !q.recompute.empty() && std::find(q.recompute.begin(), q.recompute.end(), kind) == q.recompute.end()) {
      diag.add(fmt::format("search.{}", key),
               fmt::format("applies to recompute \"{}\", which search.recompute leaves out", to_string(kind)));
    }
  };
  applies_to(!q.recompute_modules.empty(), "recompute_modules", Recompute::kSelective);
  applies_to(!q.recompute_method.empty(), "recompute_method", Recompute::kFull);
  if (!q.virtual_stages.empty() && !q.schedule.empty() &&
      std::find(q.schedule.begin(), q.schedule.end(), Schedule::kInterleaved) == q.schedule.end()) {
    diag.add("search.virtual_stages", "applies to schedule \"interleaved\", which search.schedule leaves out");
  }
  return q;
}

std::vector<std::string> complete_search(Scenario& s, bool plan_template, bool plan_given,
                                         bool dp_given) {
  std::vector<std::string> out;
  SearchSpec& q = *s.search;
  Plan& p = s.plan;
  if (plan_template && !plan_given) p.global_batch = -1;  // not given
  const int gpn = s.cluster.gpus_per_node;
  if (q.gpus.empty()) {
    q.gpus = {s.cluster.world()};
  } else {
    for (int g : q.gpus) {
      if (g % gpn != 0) {
        out.push_back(fmt::format("search.gpus: {} is not a multiple of cluster.gpus_per_node ({}): "
                                  "the planner resizes the cluster in whole nodes",
                                  g, gpn));
      }
    }
  }
  if (q.global_batch.empty()) {
    if (p.global_batch > 0) {
      q.global_batch = {p.global_batch};
    } else {
      out.push_back("search.global_batch: required when plan.global_batch is not given: the "
                    "sequences per optimizer step, e.g. [512]");
    }
  }
  if (q.objective && *q.objective != Objective::kTokensPerS && !(s.workload.train_tokens > 0)) {
    out.push_back(fmt::format("search.objective: \"{}\" needs workload.train_tokens (the tokens of "
                              "the whole run, e.g. 15e12)",
                              objective_name(*q.objective)));
  }
  if (q.objective == Objective::kCost && !(q.price_per_gpu_hour > 0)) {
    out.push_back("search.objective: \"cost\" needs search.price_per_gpu_hour (e.g. 2.5)");
  }
  if (!plan_template) {
    q.plan_is_layout = true;  // the loader checked the layout
    return out;
  }
  // The settings every candidate shares must hold on their own: the same messages as
  // layout_errors gives for a layout.
  if (p.global_batch < 0) p.global_batch = q.global_batch.empty() ? 1 : q.global_batch.front();
  bool layout = plan_given;
  if (!dp_given) {
    const std::int64_t inner = std::int64_t{p.tp} * p.pp * p.cp;
    if (s.cluster.world() % inner == 0) p.dp = static_cast<int>(s.cluster.world() / inner);
    else layout = false;
  }
  for (std::string& e : layout_errors(s.model, s.cluster, p, s.workload)) {
    if (e.rfind("plan.precision:", 0) == 0 || e.rfind("plan.fp8_recipe:", 0) == 0 || e.rfind("workload.", 0) == 0) {
      out.push_back(std::move(e));
    } else {
      layout = false;
    }
  }
  q.plan_is_layout = layout && out.empty();
  return out;
}

}  // namespace stepcast::detail

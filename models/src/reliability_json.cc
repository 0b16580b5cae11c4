#include "reliability_json.h"

#include "stragglers_json.h"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "spec_json.h"
#include "stepcast/models/names.h"

namespace stepcast::detail {

namespace {

constexpr double kMaxSeconds = 1e7;  // about 116 days: any latency beyond is a typo

void read_component(ObjectReader& parent, FailureCause cause, ComponentFailures& c) {
  const char* name = failure_cause_name(cause);
  const json* v = parent.raw(name);
  if (!v) return;
  const std::string path = parent.path_of(name);
  if (!v->is_object()) {
    parent.diag().add(path, "expected an object, got " + describe(*v));
    return;
  }
  ObjectReader r(*v, path, parent.diag());
  if (auto x = r.number(failure_rate_key(cause), 0, 1)) c.rate_per_unit_h = *x;
  if (auto l = r.choice("lifetime", names_of<Lifetime>())) c.lifetime = *parse_lifetime(*l);
  if (auto k = r.number("weibull_shape", 0.1, 20)) {
    if (c.lifetime != Lifetime::kWeibull) {
      r.diag().add(r.path_of("weibull_shape"), "only used with \"lifetime\": \"weibull\"");
    }
    c.weibull_shape = *k;
  }
  if (auto d = r.number("detection_s", 0, kMaxSeconds)) c.detection_s = *d;
  r.ignore({"derivation"});
  r.finish();
}

}  // namespace

FailureSpec read_failures(ObjectReader& r, FailureSpec f, bool from_preset) {
  (void)from_preset;  // a full object starts from FailureSpec's defaults
  if (auto s = r.string("source")) f.source = *s;
  r.ignore({"preset", "notes"});
  for (FailureCause cause : kAllFailureCauses) read_component(r, cause, f.component(cause));
  if (auto n = r.integer("nodes_per_switch", 1, 1'000'000)) f.nodes_per_switch = static_cast<int>(*n);
  if (auto x = r.number("detection_s", 0, kMaxSeconds)) f.detection_s = *x;
  if (auto x = r.number("reschedule_s", 0, kMaxSeconds)) f.reschedule_s = *x;
  if (auto x = r.number("init_s", 0, kMaxSeconds)) f.init_s = *x;
  if (auto n = r.integer("spare_nodes", 0, 1'000'000)) f.spare_nodes = static_cast<int>(*n);
  if (auto x = r.number("replace_node_h", 0, 1e5)) f.replace_node_h = *x;
  const bool any = std::any_of(f.components.begin(), f.components.end(),
                               [](const ComponentFailures& c) { return c.rate_per_unit_h > 0; });
  if (!any) {
    r.diag().add(r.path(),
                 "every component's rate is 0: give a preset or at least one rate, e.g. "
                 "\"gpu\": {\"rate_per_gpu_h\": 1.3e-5}");
  }
  return f;
}

FaultSpec read_faults(const json& v, Diagnostics& diag,
                      const std::map<std::string, FailureSpec>& presets) {
  FaultSpec out;
  if (!v.is_object()) {
    diag.add("faults", "expected an object, got " + describe(v));
    return out;
  }
  ObjectReader r(v, "faults", diag);
  if (const json* f = r.raw("failures")) {
    FailureSpec defaults;
    out.failures = resolve_spec<FailureSpec>(
        *f, "faults.failures", diag, presets, defaults, "failure model",
        [](ObjectReader& rr, FailureSpec base, bool fp) { return read_failures(rr, std::move(base), fp); });
  }
  out.perturb = read_perturbations(r);  // stragglers, crash, mismatch (stragglers_json.cc)
  r.finish();
  return out;
}

std::optional<CheckpointSpec> read_checkpoint(const json& v, Diagnostics& diag) {
  if (!v.is_object()) {
    diag.add("checkpoint", "expected an object, got " + describe(v));
    return std::nullopt;
  }
  const std::size_t before = diag.size();
  CheckpointSpec c;
  ObjectReader r(v, "checkpoint", diag);
  c.interval_s = r.number("interval_s", 0, 1e9, false, true);
  c.interval_steps = r.integer("interval_steps", 1, 1'000'000'000'000);
  if (r.has("interval_s") && r.has("interval_steps")) {
    diag.add("checkpoint", "give interval_s or interval_steps, not both");
  }
  if (auto m = r.choice("mode", names_of<CheckpointMode>())) c.mode = *parse_checkpoint_mode(*m);
  if (auto s = r.boolean("sharded")) c.sharded = *s;
  if (const json* list = r.raw("contents")) {
    const std::string path = r.path_of("contents");
    std::vector<std::string> names;
    for (StatePart p : kAllStateParts) names.emplace_back(state_part_name(p));
    std::string all;
    for (std::size_t i = 0; i < names.size(); ++i) all += (i ? ", \"" : "\"") + names[i] + "\"";
    if (!list->is_array()) {
      diag.add(path, "expected a list of state parts (" + all + "), got " + describe(*list));
    } else if (list->empty()) {
      diag.add(path, "empty: list at least one of " + all);
    } else {
      c.contents.clear();
      for (std::size_t i = 0; i < list->size(); ++i) {
        const json& item = (*list)[i];
        const std::string at = path + "[" + std::to_string(i) + "]";
        if (!item.is_string()) {
          diag.add(at, "expected a string, got " + describe(item));
          continue;
        }
        const std::string s = item.get<std::string>();
        const auto it = std::find(names.begin(), names.end(), s);
        if (it == names.end()) {
          std::string msg = "\"" + s + "\" is not one of " + all;
          const std::string near = closest(s, names);
          if (!near.empty()) msg += "; did you mean \"" + near + "\"?";
          diag.add(at, msg);
          continue;
        }
        const StatePart part = kAllStateParts[static_cast<std::size_t>(it - names.begin())];
        if (c.saves(part)) {
          diag.add(at, "\"" + s + "\" is listed twice");
          continue;
        }
        c.contents.push_back(part);
      }
    }
  }
  if (const json* st = r.raw("storage")) {
    if (!st->is_object()) {
      diag.add(r.path_of("storage"), "expected an object, got " + describe(*st));
    } else {
      ObjectReader s(*st, r.path_of("storage"), diag);
      c.write_GBps = physical(s, "write_GBps", kStorageGBpsRange);
      c.read_GBps = physical(s, "read_GBps", kStorageGBpsRange);
      s.finish();
    }
  }
  if (auto x = physical(r, "d2h_GBps", kStorageGBpsRange)) c.d2h_GBps = *x;
  r.finish();
  if (diag.size() != before) return std::nullopt;
  return c;
}

}  // namespace stepcast::detail

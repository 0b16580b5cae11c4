#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "stepcast/analysis/compare.h"

namespace stepcast::analysis {

namespace {

// "GPU" when both sides ran on GPUs, else "rank" (a CPU process is no GPU).
const char* device_noun(const Comparison& c) { return c.a.on_gpus && c.b.on_gpus ? "GPU" : "rank"; }

// The header and one line per side: the device count and, when the sides differ, each
// side's own number of steps.
void header(const Comparison& c, std::string& o) {
  auto line = [&](const std::string& x) { o += x + "\n"; };
  const CompareSide &a = c.a, &b = c.b;
  const bool same_steps = a.steps == b.steps;
  line(same_steps ? fmt::format("stepcast compare (means of {} step{})", a.steps, a.steps == 1 ? "" : "s")
                  : std::string("stepcast compare (means over each side's own steps)"));
  for (const CompareSide* s : {&a, &b}) {
    const std::string steps = same_steps ? "" : fmt::format(", {} step{}", s->steps, s->steps == 1 ? "" : "s");
    line(fmt::format("  {}: {} ({} {}{})", s == &a ? "A" : "B", s->name, s->world, s->on_gpus ? "GPUs" : "ranks", steps));
  }
}

// The step-time difference by breakdown part.
void by_part(const Comparison& c, std::string& o) {
  auto line = [&](const std::string& x) { o += x + "\n"; };
  const CompareSide &a = c.a, &b = c.b;
  line(fmt::format("  {:<22} {:>10} {:>10} {:>11}", "per step, s", "A", "B", "B - A"));
  line(fmt::format("  {:<22} {:>10.4f} {:>10.4f} {:>+11.4f}  ({:+.1f} %)", "step time", a.step_time_s, b.step_time_s,
                   c.step_delta_s, 100 * c.step_delta_s / a.step_time_s));
  for (const ComparePart& p : c.parts) {
    if (p.a_s == 0 && p.b_s == 0) continue;
    line(fmt::format("  {:<22} {:>10.4f} {:>10.4f} {:>+11.4f}", "  " + p.name, p.a_s, p.b_s, p.delta_s()));
  }
  line(fmt::format("  {:<22} {:>10} {:>10} {:>+11.4f}  (the parts add up to the step-time difference)", "  sum of parts",
                   "", "", c.parts_delta_s));
  if (!a.step_time_band && !b.step_time_band) return;
  auto band = [](const CompareSide& s) {
    return s.step_time_band ? fmt::format("{:.4f} - {:.4f} s", s.step_time_band->p10, s.step_time_band->p90)
                            : std::string("measured");
  };
  line(fmt::format("  step time p10-p90: A {}, B {} (the error model, docs/model-reference.md section 8)", band(a),
                   band(b)));
  if (!c.tie_log_threshold) return;
  const double pct = 100 * (std::exp(*c.tie_log_threshold) - 1);
  line(c.ties ? fmt::format("  B - A is within what the model resolves between these two steps (+-{:.1f} %, from how "
                            "differently they are made up): too close to call, as `plan` marks ties",
                            pct)
              : fmt::format("  B - A is beyond what the model resolves between these two steps (+-{:.1f} %, from how "
                            "differently they are made up; the errors both share cancel in the ratio)",
                            pct));
}

// The difference by cause: each side's faults, then the layout-and-scale part.
void by_cause(const Comparison& c, std::string& o) {
  auto line = [&](const std::string& x) { o += x + "\n"; };
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

// Work per device per step, MFU and job throughput.
void work_per_device(const Comparison& c, std::string& o) {
  auto line = [&](const std::string& x) { o += x + "\n"; };
  const CompareSide &a = c.a, &b = c.b;
  line(fmt::format("Work per {} per step", device_noun(c)));
  auto per = [](const CompareSide& s, double x) { return x / s.world; };
  line(fmt::format("  {:<22} {:>14.0f} {:>14.0f}", "tokens", per(a, static_cast<double>(a.tokens_per_step)),
                   per(b, static_cast<double>(b.tokens_per_step))));
  line(fmt::format("  {:<22} {:>14.2f} {:>14.2f}", "model TFLOP", per(a, a.model_flops_per_step) * 1e-12,
                   per(b, b.model_flops_per_step) * 1e-12));
  auto mfu = [](const CompareSide& s) { return s.model_flops_per_step / (s.step_time_s * s.world * s.peak_flops_per_gpu); };
  line(fmt::format("  {:<22} {:>13.1f}% {:>13.1f}%", "MFU", 100 * mfu(a), 100 * mfu(b)));
  line(fmt::format("  {:<22} {:>14.0f} {:>14.0f}", "tokens/s (job)", static_cast<double>(a.tokens_per_step) / a.step_time_s,
                   static_cast<double>(b.tokens_per_step) / b.step_time_s));
}

// Scaling efficiency between device counts; on one device count, a layout comparison.
std::string scaling_line(const Comparison& c) {
  const std::string n = device_noun(c);
  if (c.scaling_kind == "layout") {
    return fmt::format("Layout: per-{} throughput of B over A = {:.1f} % (tokens/s per {}; both on {} {}s: a layout "
                       "comparison, no scaling)",
                       n, 100 * c.scaling_efficiency, n, c.a.world, n);
  }
  const std::string what = c.scaling_kind == "strong" ? "strong-scaling efficiency (same global batch)"
                           : c.scaling_kind == "weak"
                               ? fmt::format("weak-scaling efficiency (same work per {})", n)
                               : fmt::format("per-{} throughput ratio (the work per {} differs too)", n, n);
  return fmt::format("Scaling: {} = {:.1f} % (tokens/s per {}, B over A; {} -> {} {}s)", what, 100 * c.scaling_efficiency,
                     n, c.a.world, c.b.world, n);
}

}  // namespace

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
    if (s.step_time_band) x["step_time_band_s"] = {{"p10", s.step_time_band->p10}, {"p90", s.step_time_band->p90}};
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
  if (c.tie_log_threshold) {
    j["tie_threshold_log"] = *c.tie_log_threshold;
    j["ties"] = c.ties;
  }
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
  header(c, o);
  line("");
  by_part(c, o);
  if (!c.a.faults.empty() || !c.b.faults.empty()) {
    line("");
    by_cause(c, o);
  }
  line("");
  work_per_device(c, o);
  line("");
  line(scaling_line(c));
  for (const std::string& w : c.warnings) line("WARNING: " + w);
  for (const CompareSide* s : {&c.a, &c.b}) {
    if (s->findings.empty()) continue;
    line("");
    line(fmt::format("What diagnose finds in {} ({}):", s == &c.a ? "A" : "B", s->name));
    for (const std::string& f : s->findings) line("  - " + f);
  }
  return o;
}

}  // namespace stepcast::analysis

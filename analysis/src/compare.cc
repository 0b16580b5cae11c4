#include "stepcast/analysis/compare.h"

#include <cmath>

#include <fmt/format.h>

namespace stepcast::analysis {

CompareSide side_from_diagnosis(const Diagnosis& d, const Scenario& scenario, const Program& program,
                                const std::string& name) {
  CompareSide s;
  s.name = name;
  s.world = program.placement.world();
  s.steps = d.steps;
  if (d.hang) {
    s.hang_report = d.hang_report;
    return s;
  }
  s.step_time_s = d.step_time_s;
  s.step_time_band = d.step_time_band;
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

CompareSide compare_side_measured(const Scenario& scenario, const Program& program, const Timeline& measured,
                                  const std::string& name, const DiagnoseOptions& opt, bool on_gpus) {
  CompareSide s = side_from_diagnosis(diagnose_trace(trace_from_timeline(program, measured), opt), scenario, program, name);
  s.on_gpus = on_gpus;
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
      {"input", &RankBreakdown::input}, {"optimizer", &RankBreakdown::optimizer}, {"host", &RankBreakdown::host}};
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
  // On one device count nothing scales: the ratio compares two layouts (or setups).
  c.scaling_kind = a.world == b.world ? "layout" : c.same_training ? "strong" : same_work_per_gpu ? "weak" : "throughput";
  if (a.step_parts && b.step_parts && a.step_time_s > 0 && b.step_time_s > 0) {
    c.tie_log_threshold = tie_log_threshold(*a.step_parts, *b.step_parts);
    c.ties = ties(a.step_time_s, *a.step_parts, b.step_time_s, *b.step_parts);
  }
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

}  // namespace stepcast::analysis

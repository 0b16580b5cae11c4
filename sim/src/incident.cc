#include "stepcast/sim/incident.h"

#include <algorithm>
#include <climits>
#include <utility>

#include <fmt/format.h>

#include "stepcast/analysis/format.h"
#include "stepcast/analysis/simulate_report.h"
#include "stepcast/analysis/trace.h"

namespace stepcast::sim {

using analysis::CompareSide;
using analysis::Diagnosis;
using analysis::DiagnoseOptions;
using analysis::RankBreakdown;

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
    d = analysis::diagnose_trace(analysis::trace_from_timeline(run.program, run.out.timeline), opt);
  }
  d.source = scenario.name;
  d.input = "scenario";
  d.mode = run.full ? "full" : "representative";
  if (!d.hang && !run.summary.ranks.empty() && run.summary.step_time_s > 0) {
    // The band of simulate's step, around the mean step of the same run.
    const Band b = analysis::simulated_step_band(scenario, run.summary);
    const double k = d.step_time_s / run.summary.step_time_s;
    d.step_time_band = Band{b.p10 * k, b.p90 * k};
  }
  d.seed = scenario.seed;
  if (scenario.checkpoint) {
    d.resume = analysis::resume_audit(*scenario.checkpoint, scenario.plan.precision == Precision::kFp16,
                                      state_bytes_per_param(scenario.plan).master_in_optimizer);
  }
  analysis::rebuild_verdict(d);
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

namespace {

std::string describe_fault(const StragglerSpec& f) {
  using analysis::rank_ranges;
  std::string who;
  if (!f.ranks.empty()) who += fmt::format("rank{} {}", f.ranks.size() == 1 ? "" : "s", rank_ranges(f.ranks));
  if (!f.nodes.empty()) {
    who += fmt::format("{}node{} {}", who.empty() ? "" : " and ", f.nodes.size() == 1 ? "" : "s", rank_ranges(f.nodes));
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
  const analysis::Trace t = analysis::trace_from_timeline(run->program, run->out.timeline);
  const RankBreakdown mean = analysis::mean_breakdown(analysis::trace_breakdown(t));
  return std::make_pair(static_cast<double>(t.step_end_ns.back()) * 1e-9 / t.steps(), mean);
}

}  // namespace

Result<CompareSide> compare_side(const Scenario& scenario, int steps, const DiagnoseOptions& opt) {
  RunOptions o;
  o.steps = steps;
  o.record_memory = false;
  auto run = run_scenario(scenario, o);
  if (!run.ok()) return run.error();
  CompareSide s = analysis::side_from_diagnosis(diagnose_run(scenario, *run, opt), scenario, run->program, scenario.name);
  s.steps = steps;
  if (!s.hang_report.empty()) return s;
  if (s.step_time_band) s.step_parts = analysis::simulated_step_parts(scenario, run->summary);
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

}  // namespace stepcast::sim

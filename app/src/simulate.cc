#include "stepcast/app/simulate.h"

#include <fmt/format.h>

#include "stepcast/models/estimate.h"
#include "stepcast/models/report.h"
#include "stepcast/models/timeline.h"
#include "stepcast/sim/analysis.h"

namespace stepcast::app {

Result<SimulateReport> run_simulate(const SimulateRequest& request) {
  if (request.steps < 1 || request.steps > kMaxSimulatedSteps) {
    return Error{fmt::format("steps: {} is out of range (1 to {})", request.steps, kMaxSimulatedSteps)};
  }
  auto s = load(request.scenario);
  if (!s.ok()) return s.error();
  sim::RunOptions o;
  o.full = request.full;
  o.steps = request.steps;
  o.record_memory = request.trace;
  o.network = request.network;
  auto run = sim::run_scenario(*s, o);
  if (!run.ok()) return run.error();
  SimulateReport r{std::move(s).value(), std::move(run).value(), request.steps, ""};
  if (request.trace) r.trace_json = chrome_trace_json(r.run.program, r.run.out.timeline);
  return r;
}

namespace {

std::string with_notes(std::string text, const Scenario& s) {
  for (const std::string& n : s.notes) text += "note: " + n + "\n";
  return text;
}

}  // namespace

std::string simulate_text(const SimulateReport& r) {
  return with_notes(sim::simulate_report_text(r.scenario, r.run.program, r.run.summary, r.run.full, r.steps),
                    r.scenario);
}

std::string simulate_json(const SimulateReport& r) {
  if (r.scenario.notes.empty()) {
    return sim::simulate_report_json(r.scenario, r.run.program, r.run.summary, r.run.full, r.steps);
  }
  auto j = nlohmann::ordered_json::parse(
      sim::simulate_report_json(r.scenario, r.run.program, r.run.summary, r.run.full, r.steps));
  j["notes"] = r.scenario.notes;
  return j.dump(2) + "\n";
}

Fields simulate_fields(const SimulateReport& r) {
  Fields f = Fields::of(nlohmann::ordered_json::parse(
      sim::simulate_report_json(r.scenario, r.run.program, r.run.summary, r.run.full, r.steps)));
  f.merge(Fields::of(estimate_report_value(r.scenario, estimate(r.scenario))), /*replace=*/false);
  return f;
}

}  // namespace stepcast::app

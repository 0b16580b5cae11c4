// `simulate`: the event simulation of a scenario's training step(s) — per-rank timeline,
// breakdown, memory peak, and optionally the Chrome/Perfetto trace.
#pragma once

#include <string>

#include "stepcast/app/fields.h"
#include "stepcast/app/scenario_input.h"
#include "stepcast/sim/run.h"

namespace stepcast::app {

inline constexpr int kMaxSimulatedSteps = 10000;

struct SimulateRequest {
  ScenarioInput scenario;
  bool full = false;        // every rank (default: one per pipeline stage when symmetric)
  int steps = 1;            // 1 to kMaxSimulatedSteps
  std::string network;      // "" = the scenario's; "analytic" | "simgrid"
  bool trace = false;       // also render the trace (SimulateReport::trace_json)
};

struct SimulateReport {
  Scenario scenario;
  sim::RunResult run;
  int steps = 1;
  std::string trace_json;   // when requested (also on a hang: the trace up to it)
  bool hang() const { return run.out.deadlock; }
  // Why the run hangs (the engine's grouped report); "" when it finished.
  const std::string& hang_report() const { return run.out.deadlock_report; }
};

// Errors: the scenario's, steps out of range, an unknown or unavailable network.
Result<SimulateReport> run_simulate(const SimulateRequest& request);

// REQUIRES: !report.hang().
std::string simulate_text(const SimulateReport& report);
std::string simulate_json(const SimulateReport& report);
// The fields of the JSON report, plus the closed form's fields the simulation does not
// report (params_active, hfu, ...). REQUIRES: !report.hang().
Fields simulate_fields(const SimulateReport& report);

}  // namespace stepcast::app

// The reports of `stepcast simulate`: a simulation's summary (breakdown.h) with the
// scenario's memory model, as JSON (the report format of docs/simulator.md) and as text.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "stepcast/analysis/breakdown.h"
#include "stepcast/models/band.h"
#include "stepcast/models/program.h"
#include "stepcast/models/scenario.h"

namespace stepcast::analysis {

// The JSON report for a simulation of `steps` steps (`ranks` listed in full mode).
// REQUIRES: summary.ranks is not empty; `program` is lower(scenario).
std::string simulate_report_json(const Scenario& scenario, const Program& program, const SimSummary& summary,
                                 bool full, int steps);
// The same report as a JSON value (what simulate_report_json prints).
nlohmann::ordered_json simulate_report_value(const Scenario& scenario, const Program& program,
                                             const SimSummary& summary, bool full, int steps);
// The p10-p90 band of the simulated step (models/band.h): the critical rank's parts through
// the error model, scaled to the mean step time when the parts do not add up to it exactly.
// An MoE model's MoE blocks take the closed form's share of the step (the engine's ops are
// not labelled by block). What `simulate` reports as step_time_band_s, and `checkpoint`
// around the step it plans with. REQUIRES: summary.ranks is not empty.
Band simulated_step_band(const Scenario& scenario, const SimSummary& summary);
// The parts that band is computed from (the critical rank's, with the MoE blocks' share).
StepParts simulated_step_parts(const Scenario& scenario, const SimSummary& summary);

// The readable report; same REQUIRES.
std::string simulate_report_text(const Scenario& scenario, const Program& program, const SimSummary& summary,
                                 bool full, int steps);

}  // namespace stepcast::analysis

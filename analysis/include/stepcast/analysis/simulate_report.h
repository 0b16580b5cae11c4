// The reports of `stepcast simulate`: a simulation's summary (breakdown.h) with the
// scenario's memory model, as JSON (the report format of docs/simulator.md) and as text.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "stepcast/analysis/breakdown.h"
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
// The readable report; same REQUIRES.
std::string simulate_report_text(const Scenario& scenario, const Program& program, const SimSummary& summary,
                                 bool full, int steps);

}  // namespace stepcast::analysis

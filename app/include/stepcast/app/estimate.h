// `estimate`: the closed-form prediction of one scenario (parameters, FLOPs, memory per
// rank and whether it fits, step time with its breakdown, tokens/s, MFU). Microseconds: the
// GUI re-runs it on every edit.
#pragma once

#include <string>

#include "stepcast/app/fields.h"
#include "stepcast/app/scenario_input.h"
#include "stepcast/models/estimate.h"

namespace stepcast::app {

struct EstimateRequest {
  ScenarioInput scenario;
};

struct EstimateReport {
  Scenario scenario;
  Estimate estimate;
};

Result<EstimateReport> run_estimate(const EstimateRequest& request);

// The readable report, then the scenario's notes (defaults that change the result).
std::string estimate_text(const EstimateReport& report);
// The JSON report (docs/simulator.md, format 1), with "notes" when there are any.
std::string estimate_json(const EstimateReport& report);
// The fields `expect` may name (check): those of the JSON report.
Fields estimate_fields(const EstimateReport& report);

}  // namespace stepcast::app

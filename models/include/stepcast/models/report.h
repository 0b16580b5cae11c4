// Reports of a prediction: the JSON report of reference/interfaces.md and a readable
// text report. Both are pure functions of their inputs (byte-identical for equal input).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "stepcast/models/estimate.h"
#include "stepcast/models/scenario.h"

namespace stepcast {

// One JSON object (format 1), newline-terminated, fields in the documented order.
std::string estimate_report_json(const Scenario& scenario, const Estimate& estimate);
// The same report as a JSON value (what estimate_report_json prints).
nlohmann::ordered_json estimate_report_value(const Scenario& scenario, const Estimate& estimate);

// The human-readable estimate: parameters, FLOPs, memory table by part with the fit
// verdict, step-time breakdown, tokens/s and MFU (with the FLOP convention).
std::string estimate_report_text(const Scenario& scenario, const Estimate& estimate);

}  // namespace stepcast

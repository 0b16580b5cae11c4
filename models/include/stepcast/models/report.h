// Reports of a prediction: the JSON report of docs/interfaces.md and a readable
// text report. Both are pure functions of their inputs (byte-identical for equal input).
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "stepcast/models/estimate.h"
#include "stepcast/models/result.h"
#include "stepcast/models/scenario.h"

namespace stepcast {

// Step times beyond this are refused by the loader (about 11.6 days per step: far beyond
// any real layout, far inside what SimTime and the campaigns represent).
inline constexpr double kMaxStepTimeS = 1e6;

// The reports print numbers only: nothing infinite, NaN or null. An estimate whose numbers
// are all finite and whose step time is within (0, kMaxStepTimeS] gives nullopt; else an
// error naming the first offending quantity as the report names it:
//   "internal error: the estimate's step_time_s is inf (not a finite number)", or
//   "the estimated step time is 2.5e+07 s, more than the 1e+06 s stepcast simulates ...".
// The scenario loader runs this check, so a loaded scenario's estimate always passes it.
std::optional<Error> estimate_report_error(const Estimate& estimate);

// One JSON object (format 1), newline-terminated, fields in the documented order.
// REQUIRES: !estimate_report_error(estimate).
std::string estimate_report_json(const Scenario& scenario, const Estimate& estimate);
// The same report as a JSON value (what estimate_report_json prints).
nlohmann::ordered_json estimate_report_value(const Scenario& scenario, const Estimate& estimate);

// The human-readable estimate: parameters, FLOPs, memory table by part with the fit
// verdict, step-time breakdown, tokens/s and MFU (with the FLOP convention).
// REQUIRES: !estimate_report_error(estimate).
std::string estimate_report_text(const Scenario& scenario, const Estimate& estimate);

}  // namespace stepcast

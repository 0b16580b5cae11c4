// `compare A B`: the step-time difference of two runs, part by part and by cause (faults
// vs layout and scale), work per GPU and scaling efficiency. Each side is a scenario
// (simulated, with its faults' counterfactuals) or a measured run (measured.json of
// `stepcast execute`). docs/incidents.md.
#pragma once

#include <optional>
#include <string>

#include "stepcast/analysis/compare.h"
#include "stepcast/models/result.h"

namespace stepcast::app {

struct CompareRequest {
  std::string a, b;          // scenario files or measured.json files; A is the baseline
  std::optional<int> steps;  // steps simulated for a scenario, 1 to 10000 (default kDiagnoseSteps)
};

struct CompareReport {
  std::optional<analysis::Comparison> comparison;  // empty when a side hangs
  std::string hang;  // "PATH: report" of the side that hangs
};

// Errors: unreadable files, a trace (compare needs scenarios or measured runs), the
// scenarios' and measurements' errors, steps out of range.
Result<CompareReport> run_compare(const CompareRequest& request);

// REQUIRES: report.comparison.
std::string compare_text(const CompareReport& report);
std::string compare_json(const CompareReport& report);

}  // namespace stepcast::app

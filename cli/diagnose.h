// `stepcast diagnose` (a scenario or a trace: outlier ranks, input stalls, exposed
// communication, hangs, the resume audit) and `stepcast compare` (the step-time
// difference of two scenarios, part by part). docs/incidents.md.
#pragma once

#include <optional>
#include <string>

namespace stepcast::cli {

struct DiagnoseArgs {
  std::string input;          // scenario or trace file
  bool json = false;
  std::optional<int> steps;   // scenarios only; default analysis::kDiagnoseSteps
};
// Exit 0 healthy, 1 a problem found or the run hangs, 2 bad input.
int cmd_diagnose(const DiagnoseArgs& args);

struct CompareArgs {
  std::string a, b;           // scenario files
  bool json = false;
  std::optional<int> steps;   // default analysis::kDiagnoseSteps
};
// Exit 0, 1 when either run hangs, 2 bad input.
int cmd_compare(const CompareArgs& args);

}  // namespace stepcast::cli

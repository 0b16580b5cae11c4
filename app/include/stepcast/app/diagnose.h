// `diagnose`: explain a run — a scenario (simulated) or a trace (simulated or measured):
// outlier ranks and the wait they cause, input stalls, exposed communication, hangs (last
// collective per rank), the resume audit (docs/incidents.md).
#pragma once

#include <optional>
#include <string>

#include "stepcast/app/fields.h"
#include "stepcast/models/result.h"
#include "stepcast/models/scenario.h"
#include "stepcast/sim/diagnose.h"
#include "stepcast/sim/run.h"

namespace stepcast::app {

// Steps `diagnose`, `compare` and `check` (scenarios with faults) simulate by default.
inline constexpr int kDiagnoseSteps = sim::kDiagnoseSteps;

struct DiagnoseRequest {
  std::string path;              // a scenario, or a trace written by stepcast (--trace, execute)
  std::optional<int> steps;      // scenarios: 1 to 10000 (default kDiagnoseSteps); ignored for traces
};

struct DiagnoseReport {
  sim::Diagnosis diagnosis;
  std::string note;              // e.g. "--steps is ignored for a trace"
  bool problem() const { return diagnosis.problem(); }
};

Result<DiagnoseReport> run_diagnose(const DiagnoseRequest& request);

std::string diagnose_text(const DiagnoseReport& report);
std::string diagnose_json(const DiagnoseReport& report);
// healthy, hang, mismatch, outlier_ranks, stalling_hosts, resume_missing of a simulated
// run of `scenario` (what `check` may expect of a scenario with faults or a checkpoint).
Fields diagnose_fields(const Scenario& scenario, const sim::RunResult& run);

}  // namespace stepcast::app

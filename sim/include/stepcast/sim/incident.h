// Incidents by simulation (docs/incidents.md): diagnose a simulated scenario (the
// analysis library's detectors on its timeline, plus the engine's hang report and the
// resume audit) and build a `compare` side with counterfactual re-simulations (the
// scenario without each fault). What is read off a timeline lives in stepcast_analysis
// (stepcast/analysis/diagnose.h, compare.h); this adds only what needs the simulator.
#pragma once

#include "stepcast/analysis/compare.h"
#include "stepcast/analysis/diagnose.h"
#include "stepcast/models/result.h"
#include "stepcast/models/scenario.h"
#include "stepcast/sim/run.h"

namespace stepcast::sim {

// A finished simulation of `scenario` (its trace via analysis::trace_from_timeline; on a
// hang, the engine's report and mismatches), plus the resume audit when it has a
// checkpoint block.
analysis::Diagnosis diagnose_run(const Scenario& scenario, const RunResult& run,
                                 const analysis::DiagnoseOptions& options = {});
// Simulates `scenario` for `steps` steps (full mode when faults perturb ranks) and
// diagnoses it. Errors: those of run_scenario.
Result<analysis::Diagnosis> diagnose_scenario(const Scenario& scenario, int steps,
                                              const analysis::DiagnoseOptions& options = {});

// Simulates `scenario` for `steps` steps, diagnoses it and, when it has faults other than
// jitter, simulates the counterfactuals (without each fault alone, without all of them).
// Errors: those of run_scenario, or a counterfactual that hangs.
Result<analysis::CompareSide> compare_side(const Scenario& scenario, int steps,
                                           const analysis::DiagnoseOptions& options = {});

}  // namespace stepcast::sim

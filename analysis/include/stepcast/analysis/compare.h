// `compare A B`: the step-time difference between two runs, by breakdown part and by
// cause (each side's faults vs the layout and scale), the work per device, and the
// scaling efficiency or layout comparison (docs/incidents.md). A side is built by whoever
// ran it: compare_side_measured (here) for a measured run, sim::compare_side
// (stepcast/sim/incident.h) for a simulated scenario with its counterfactuals.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "stepcast/analysis/breakdown.h"
#include "stepcast/analysis/diagnose.h"
#include "stepcast/models/band.h"
#include "stepcast/models/program.h"
#include "stepcast/models/scenario.h"
#include "stepcast/models/timeline.h"

namespace stepcast::analysis {

// What one fault of a scenario (an entry of faults.stragglers other than jitter) costs:
// the step time with it minus the step time of the same scenario without it.
struct FaultEffect {
  std::string fault;        // "faults.stragglers[0]"
  std::string description;  // "slowdown of ranks 37 (x1.18)"
  double alone_s = 0;
};

struct CompareSide {
  std::string name;
  int world = 0;
  int steps = 0;                      // steps the means are over (the side's own)
  bool on_gpus = true;                // false: the ranks are CPU processes (cpu_mpi): reports say "ranks"
  double step_time_s = 0;
  RankBreakdown mean;                 // mean over ranks: its parts sum to step_time_s
  std::int64_t tokens_per_step = 0;
  std::int64_t global_batch = 0;      // sequences per step
  std::int64_t seq_len = 0;
  double model_flops_per_step = 0;
  double peak_flops_per_gpu = 0;
  std::vector<std::string> findings;  // the problems diagnose finds in it
  std::string hang_report;            // non-empty: the run hangs (nothing else is filled)
  // Counterfactuals: the scenario re-simulated without each fault alone and without all of
  // them (jitter is kept: ordinary noise, not a fault). Without faults, clean_* == the above.
  std::vector<FaultEffect> faults;
  double faults_together_s = 0;       // step_time_s - clean_step_time_s
  double clean_step_time_s = 0;
  RankBreakdown clean_mean;
  // A predicted side (a simulated scenario) only: its step's p10-p90 around step_time_s and
  // the parts the band is computed from (simulate_report.h); empty for a measured run.
  std::optional<Band> step_time_band;
  std::optional<StepParts> step_parts;
};

// A side from the diagnosis `d` of a run of `program`, lowered from `scenario`: name,
// world, d.steps, step time, mean breakdown, work per step and d's problems; no
// counterfactuals (clean_* == the measured). On a hang only name, world, steps and
// hang_report are filled.
CompareSide side_from_diagnosis(const Diagnosis& d, const Scenario& scenario, const Program& program,
                                const std::string& name);

// A side from a measured run (the executor's timeline of `program`, lowered from
// `scenario`): diagnosed as a trace; no counterfactuals (a measurement has no faults to
// remove). `name` labels it in reports; `on_gpus` is false for a run whose ranks are CPU
// processes (the cpu_mpi backend), so reports say "ranks", not "GPUs".
CompareSide compare_side_measured(const Scenario& scenario, const Program& program, const Timeline& measured,
                                  const std::string& name, const DiagnoseOptions& options = {}, bool on_gpus = true);

struct ComparePart {
  std::string name;   // "compute", "exposed_comm.tp", ..., "bubble", "wait", "input", "optimizer"
  double a_s = 0, b_s = 0;
  double delta_s() const { return b_s - a_s; }
};

struct Comparison {
  CompareSide a, b;
  // The step-time difference by breakdown part (means over ranks); the deltas add up to
  // b.step_time_s - a.step_time_s.
  std::vector<ComparePart> parts;
  double step_delta_s = 0;
  double parts_delta_s = 0;        // sum of the parts' deltas (equal up to rounding)
  // The same difference by cause: B's faults (together) minus A's faults (together) plus
  // the layout-and-scale part (B without faults vs A without faults, by breakdown part).
  std::vector<ComparePart> layout_parts;
  double layout_delta_s = 0;
  // Per-device throughput of B over A (tokens/s per GPU or rank). Between different device
  // counts: the strong-scaling efficiency when both train the same global batch, the
  // weak-scaling efficiency when the work per device is the same, else a throughput ratio.
  // On the same device count there is no scaling: a layout comparison.
  double scaling_efficiency = 0;
  std::string scaling_kind;        // "strong" | "weak" | "throughput" | "layout" (same world)
  bool same_training = true;       // same global batch and tokens per step
  std::vector<std::string> warnings;
  // Both sides predicted: the largest |log(B / A)| of step time that the error model cannot
  // tell from no difference (band.h tie_log_threshold: what `plan` marks as ties), and
  // whether this difference is within it.
  std::optional<double> tie_log_threshold;
  bool ties = false;
};

// REQUIRES: neither side hangs.
Comparison compare(const CompareSide& a, const CompareSide& b);
std::string comparison_text(const Comparison& c);
std::string comparison_json(const Comparison& c);

}  // namespace stepcast::analysis

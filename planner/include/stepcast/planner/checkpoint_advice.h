// Failure-aware checkpoint planning for a scenario (`stepcast checkpoint`, and the campaign
// fields of `stepcast check`): the job's failure rate, the checkpoint cost in both modes,
// Young's and Daly's intervals, a Monte Carlo sweep of intervals through the campaign
// simulation (sim/campaign.h), its optimum, and a recommendation (docs/reliability.md).
// The failure environment and Young's and Daly's formulas are models' (reliability.h), the
// same the planner's goodput (goodput.h) uses. Reports: checkpoint_report.h.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "stepcast/models/band.h"
#include "stepcast/models/reliability.h"
#include "stepcast/models/result.h"
#include "stepcast/models/scenario.h"
#include "stepcast/sim/campaign.h"

namespace stepcast::planner {

// The step time the campaign uses: one simulated step as `stepcast simulate` runs it
// (sim::run_scenario: the scenario's network and perturbations), the same step `stepcast
// check` simulates. Errors: those of run_scenario, and a deadlock.
Result<double> engine_step_time_s(const Scenario& scenario);

// That step with its p10-p90 band (analysis::simulated_step_band), as `stepcast simulate`
// reports both. Errors: engine_step_time_s's.
struct EngineStep {
  double step_time_s = 0;
  Band band;
};
Result<EngineStep> engine_step(const Scenario& scenario);

// The campaign of `scenario` with checkpoint cost `cost` (interval_steps left at 1).
// REQUIRES: scenario.faults.failures, step_time_s > 0, steps_total >= 1.
sim::CampaignModel campaign_model(const Scenario& scenario, const CheckpointCost& cost,
                             double step_time_s, std::int64_t steps_total);

// The p10-p90 band of a campaign's time to train with both of its spreads: the failures'
// (the simulated runs' p10 and p90 of `wall_s`) and the step time's (`step_band` around
// `step_time_s`, the error model of models/band.h). Each is read as a normal in log time,
// centred on the log-midpoint of its p10 and p90 with half their log-distance as its
// half-width (1.2816 sigma); the two are independent (the model's error does not depend on
// when failures strike), so the centres add and the half-widths add in quadrature. A longer
// step scales the whole campaign alike (failures per hour, detection and restarts stay; the
// lost work follows the interval in seconds), which is why the step's band applies to the
// wall time as a ratio. REQUIRES: wall_s.p10 > 0, step_time_s > 0, step_band.p10 > 0.
Band time_to_train_band(const sim::Stats& wall_s, double step_time_s, const Band& step_band);

struct IntervalResult {
  sim::CampaignSummary sim;        // Monte Carlo at this interval
  double daly_wall_s = 0;     // Daly's expected wall time at this interval
};

struct ModeAdvice {
  CheckpointMode mode = CheckpointMode::kSync;
  bool feasible = true;
  std::string why_not;        // why the mode cannot be used (async staging too large)
  double pause_s = 0;         // delta: what training stalls per checkpoint
  double background_s = 0;    // async: the write after the pause
  double young_s = 0, daly_s = 0;              // closed-form intervals (compute between checkpoints)
  std::int64_t young_steps = 0, daly_steps = 0;  // rounded to whole steps, >= 1
  std::vector<IntervalResult> sweep;           // ascending interval; includes every interval named here
  double optimum_s = 0;       // simulated optimum (least-squares fit, docs/reliability.md)
  std::int64_t optimum_steps = 0;
  // false when the runs saw too few failures to locate the optimum (fewer than
  // kMinFailuresForOptimum): optimum_s is then Daly's interval, and `note` says why.
  bool optimum_simulated = true;
  std::string note;
  std::int64_t best_grid_steps = 0;  // the sweep point with the least mean wall time

  // The sweep point at `steps`. REQUIRES: it is in the sweep.
  const IntervalResult& at(std::int64_t steps) const;
};

struct CheckpointAdvice {
  int runs = 0;
  double step_time_s = 0;
  std::int64_t tokens_per_step = 0;
  std::int64_t steps_total = 0;
  double solve_s = 0;                             // failure-free compute: steps x step time
  FailureSpec failures;
  FailureEnv env;                                 // failure_env(failures, cluster): rates, M, detection, node wait
  double restart_s = 0;                           // R = env.restart_s + restore
  CheckpointCost sync_cost, async_cost;
  ModeAdvice sync, async;
  // The recommendation: the mode and interval with the highest simulated goodput.
  CheckpointMode mode = CheckpointMode::kSync;
  std::int64_t interval_steps = 0;
  double interval_s = 0;
  std::string reason;
  IntervalResult recommended;
  // The scenario's own interval (checkpoint.interval_s / interval_steps), when it gives one.
  std::optional<IntervalResult> configured;
  CheckpointMode configured_mode = CheckpointMode::kSync;  // async falls back to sync when it does not fit
  // The step time's p10-p90 (AdviceOptions::step_time_band) when the caller gave it; the
  // reports then carry the policy's time_to_train_band.
  std::optional<Band> step_time_band;
};

// The fitted optimum tau* = sqrt(b/c) inherits the relative error of the lost-work term
// c, about 1/sqrt(N) for N failures seen (a Poisson count), so half that for tau*: 100
// failures over all runs locate it within about 5 %.
inline constexpr double kMinFailuresForOptimum = 100;

// time_to_train_band at interval `r` of `advice` with the advice's step band; nullopt when
// the advice has no band (AdviceOptions::step_time_band not given) or nothing to scale.
// What the reports and the GUI print.
std::optional<Band> time_to_train_band(const CheckpointAdvice& advice, const IntervalResult& r);

struct AdviceOptions {
  int runs = 64;  // Monte Carlo runs (seeds) per interval
  std::optional<Band> step_time_band;  // the step's p10-p90 (engine_step), passed to the advice
};

// The inputs a campaign needs and the scenario lacks, as the message advise_checkpoint
// would give (naming the field: faults.failures, workload.train_tokens); nullopt when both
// are there. Cheap: for reporting input errors before simulating anything.
std::optional<Error> campaign_input_error(const Scenario& scenario);

// Errors name the field: those of campaign_input_error, a failure model whose rates are
// all 0, a run beyond the simulated horizon, or failures so frequent that the job cannot
// finish. REQUIRES: step_time_s > 0.
Result<CheckpointAdvice> advise_checkpoint(const Scenario& scenario, double step_time_s,
                                           const AdviceOptions& options);

}  // namespace stepcast::planner

// `checkpoint`: the failure-aware checkpoint interval of a scenario (Young, Daly, the
// simulated optimum), sync vs async, goodput and time to train (docs/reliability.md).
#pragma once

#include <optional>
#include <string>

#include "stepcast/app/fields.h"
#include "stepcast/app/scenario_input.h"
#include "stepcast/models/reshard.h"
#include "stepcast/planner/checkpoint_advice.h"

namespace stepcast::app {

struct CheckpointRequest {
  ScenarioInput scenario;  // needs faults.failures and workload.train_tokens
  int runs = 64;           // Monte Carlo runs per interval, 1 to 10000
};

struct CheckpointReport {
  Scenario scenario;
  // Empty when the simulated step failed (a hang): `run_failure` says why.
  std::optional<planner::CheckpointAdvice> advice;
  std::string run_failure;
};

// Errors (input): the scenario's, runs out of range, a missing failure model or training
// length (naming the field), a run that cannot finish. A hang of the simulated step is not
// an error of the call: the report's run_failure says it.
Result<CheckpointReport> run_checkpoint(const CheckpointRequest& request);

// REQUIRES: report.advice.
std::string checkpoint_text(const CheckpointReport& report);
std::string checkpoint_json(const CheckpointReport& report);
std::string checkpoint_csv(const CheckpointReport& report);  // the goodput-vs-interval sweep

// The fields `check` may expect of a scenario with faults.failures (goodput, job_mtbf_h,
// checkpoint_interval_s, ...), at `step_time_s`, for its own interval when it gives one,
// else for the recommended one; 64 Monte Carlo runs, as `stepcast checkpoint` by default.
Result<Fields> checkpoint_fields(const Scenario& scenario, double step_time_s);

// `checkpoint --reshard-to LAYOUT`: what each rank of a new layout reads from the
// scenario's checkpoint and how long the restore takes (models/reshard.h). Needs no
// failure model. Errors (input): the scenario's, the layout string's, and the new layout's
// own errors, each naming the plan field ("--reshard-to: plan.tp: ...").
struct ReshardRequest {
  ScenarioInput scenario;
  std::string layout;   // "tp=8,pp=2,dp=2" or "gpus=32"
};
struct ReshardReport {
  Scenario scenario;
  ReshardPlan plan;
};
Result<ReshardReport> run_reshard(const ReshardRequest& request);
std::string reshard_text(const ReshardReport& report);
std::string reshard_json(const ReshardReport& report);

}  // namespace stepcast::app

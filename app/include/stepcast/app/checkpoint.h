// `checkpoint`: the failure-aware checkpoint interval of a scenario (Young, Daly, the
// simulated optimum), sync vs async, goodput and time to train (docs/reliability.md).
#pragma once

#include <optional>
#include <string>

#include "stepcast/app/fields.h"
#include "stepcast/app/scenario_input.h"
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

}  // namespace stepcast::app

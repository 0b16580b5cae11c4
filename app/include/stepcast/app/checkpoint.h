// `checkpoint`: the failure-aware checkpoint interval of a scenario (Young, Daly, the
// simulated optimum), sync vs async, goodput and time to train (docs/reliability.md).
#pragma once

#include <string>

#include "stepcast/app/fields.h"
#include "stepcast/app/scenario_input.h"

namespace stepcast::app {

// The fields `check` may expect of a scenario with faults.failures (goodput, job_mtbf_h,
// checkpoint_interval_s, ...), at `step_time_s`, for its own interval when it gives one,
// else for the recommended one; 64 Monte Carlo runs, as `stepcast checkpoint` by default.
Result<Fields> checkpoint_fields(const Scenario& scenario, double step_time_s);

}  // namespace stepcast::app

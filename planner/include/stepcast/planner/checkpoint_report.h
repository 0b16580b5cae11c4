// Reports of the checkpoint advice (checkpoint_advice.h; `stepcast checkpoint`, and the
// campaign fields of `stepcast check`; docs/reliability.md): a readable report, one JSON
// object (format 1), the sweep curve as CSV, and the flat fields a scenario's `expect` may
// name. Pure functions of their inputs: equal advice gives byte-identical reports.
#pragma once

#include <cstdint>
#include <string>

#include "stepcast/models/reliability.h"
#include "stepcast/models/scenario.h"
#include "stepcast/planner/checkpoint_advice.h"

namespace stepcast::planner {

// The campaign fields `stepcast check` adds to the report of a scenario with
// faults.failures (names as in scenario.cc's expectable fields), for the scenario's own
// interval when it gives one, else for the recommended one.
struct CheckpointCheckFields {
  double goodput = 0, goodput_p10 = 0, goodput_p90 = 0;  // simulated, fractions of 1
  double job_mtbf_h = 0;
  double checkpoint_interval_s = 0;
  std::int64_t checkpoint_interval_steps = 0;
  CheckpointMode checkpoint_mode = CheckpointMode::kSync;
  double checkpoint_pause_s = 0;
  double checkpoint_bytes = 0;
  double time_to_train_h = 0;  // mean simulated wall time
  double young_interval_s = 0, daly_interval_s = 0;  // of the mode above
};

CheckpointCheckFields checkpoint_check_fields(const CheckpointAdvice& advice);

// One JSON object on one line, keys in this order: goodput, goodput_p10, goodput_p90,
// job_mtbf_h, checkpoint_interval_s, checkpoint_interval_steps, checkpoint_mode ("sync" or
// "async"), checkpoint_pause_s, checkpoint_bytes, time_to_train_h, young_interval_s,
// daly_interval_s.
std::string checkpoint_check_fields_json(const CheckpointCheckFields& fields);

// `scenario` is the one the advice was computed for (its name, seed, cluster, workload and
// checkpoint section are printed).
std::string checkpoint_text(const CheckpointAdvice& advice, const Scenario& scenario);
// Top level: format, scenario, seed, runs, step_time_s, tokens_per_step, steps_total,
// failure_free_s, the check fields above, then failures, checkpoint, modes,
// recommendation and (when the scenario gives an interval) configured.
std::string checkpoint_json(const CheckpointAdvice& advice, const Scenario& scenario);
// The sweep of both modes: a header line and one line per interval, sync first.
std::string checkpoint_csv(const CheckpointAdvice& advice);

}  // namespace stepcast::planner

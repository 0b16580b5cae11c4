// `stepcast checkpoint`: failure-aware checkpoint interval, sync vs async, goodput and
// time to train (docs/reliability.md).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "stepcast/models/result.h"
#include "stepcast/models/scenario.h"

namespace stepcast::cli {

struct CheckpointArgs {
  std::string scenario;
  bool json = false;
  std::string csv;   // write the sweep curve here ("" = none)
  int runs = 64;     // Monte Carlo runs per interval
};
int cmd_checkpoint(const CheckpointArgs& args);

// The campaign fields `stepcast check` adds to the report of a scenario with
// faults.failures (names as in scenario.cc's expectable fields): goodput, goodput_p10,
// goodput_p90, job_mtbf_h, checkpoint_interval_s, checkpoint_interval_steps,
// checkpoint_mode, checkpoint_pause_s, checkpoint_bytes, time_to_train_h,
// young_interval_s, daly_interval_s — for the scenario's own interval when it gives one,
// else for the recommended one; 64 runs, as `stepcast checkpoint` by default.
Result<nlohmann::json> campaign_report_fields(const Scenario& scenario, double step_time_s);

}  // namespace stepcast::cli

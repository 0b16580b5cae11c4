// The planner's closed-form goodput of one layout (docs/planner.md "Goodput model"):
// the job's failure rate on the layout's cluster, the layout's own checkpoint cost
// (models/reliability.h: pause, background write, restore), Daly's interval for that cost
// in whole steps, and Daly's expected wall time (Daly 2006, FGCS 22(3); docs/cost-model-sources.md
// section 8). Microseconds per layout, so every candidate gets one; the campaign Monte
// Carlo (sim/campaign.h, `stepcast checkpoint`) stays the reference for a chosen layout.
#pragma once

#include <cstdint>

#include "stepcast/models/estimate.h"
#include "stepcast/models/reliability.h"
#include "stepcast/models/scenario.h"
#include "stepcast/models/specs.h"

namespace stepcast::planner {

// What every layout on one cluster shares (the failure rate and the restart without the
// restore) is models' FailureEnv (reliability.h): failure_env(*scenario.faults.failures,
// cluster) with `cluster` the scenario's cluster resized to the layout's world, or a
// default FailureEnv without a failure model.

struct Goodput {
  double goodput = 1;           // T_s / T_w (1 without a failure model)
  CheckpointMode mode = CheckpointMode::kSync;
  std::int64_t interval_steps = 0;  // 0 without a failure model
  double interval_s = 0;        // compute between checkpoints, whole steps
  double pause_s = 0;           // training stalls per checkpoint
  double background_s = 0;      // async: the write after the pause
  double restore_s = 0;
  double restart_s = 0;         // R: restart including the restore (and the async durability delay)
  double checkpoint_bytes = 0;
};

// Daly's goodput is models' daly_goodput (reliability.h), the formula the checkpoint
// advice (checkpoint_advice.h) uses too.

// The layout's goodput at its best interval, in whole steps (>= 1, <= steps_total when
// steps_total > 0): sync, Daly's interval for its pause; async, the interval that
// maximises the goodput below (golden-section search); or the scenario's
// checkpoint.interval_s / interval_steps when it gives one. Mode: the scenario's
// checkpoint.mode; without a `checkpoint` section, the better of sync and async (async
// only when its host staging fits). Async: the pause is the snapshot; the background write
// delays durability, which adds to the work lost per failure (R += background), and a
// write longer than the interval makes the next checkpoint wait (delta += background -
// tau). REQUIRES: a validated layout, step_time_s > 0.
Goodput layout_goodput(const Scenario& scenario, const ClusterSpec& cluster, const Plan& plan,
                       double step_time_s, std::int64_t steps_total, const FailureEnv& env);

// The checkpoint cost layout_goodput uses: the scenario's `checkpoint` (or the defaults) in
// async mode, which also holds the sync write time (reliability.h).
CheckpointCost layout_checkpoint_cost(const Scenario& scenario, const ClusterSpec& cluster, const Plan& plan);
// The same from the layout's estimate (its stages' state, Estimate::stages), as the search
// does: the stages' memory is not priced again.
CheckpointCost layout_checkpoint_cost(const Scenario& scenario, const ClusterSpec& cluster, const Plan& plan,
                                      const Estimate& estimate);
// The same with that cost computed once by the caller.
Goodput layout_goodput(const Scenario& scenario, const CheckpointCost& async_cost, double step_time_s,
                       std::int64_t steps_total, const FailureEnv& env);

}  // namespace stepcast::planner

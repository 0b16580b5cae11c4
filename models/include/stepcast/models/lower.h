// lower(): one training step of a validated scenario as a Program (program.h), using the
// per-op costs of layer_cost.h and the memory model of estimate.h. See
// docs/model-reference.md "The Program IR" for the op sequence of each schedule.
#pragma once

#include "stepcast/models/program.h"
#include "stepcast/models/scenario.h"

namespace stepcast {

// REQUIRES: layout_errors(model, cluster, plan, workload) is empty (a loaded Scenario).
Program lower(const ModelSpec& model, const ClusterSpec& cluster, const Plan& plan,
              const Workload& workload);
inline Program lower(const Scenario& s) { return lower(s.model, s.cluster, s.plan, s.workload); }

// The (forward?, microbatch, virtual chunk) order one pipeline stage executes:
// GPipe all forwards then all backwards; 1F1B min(p-s-1, m) warm-up forwards, then
// forward/backward pairs, then the cool-down backwards; interleaved 1F1B as Megatron-LM
// (warm-up 2(p-s-1) + (v-1)p chunk-microbatches, chunk of the k-th forward = (k/p) mod v).
struct ScheduleStep {
  bool forward = true;
  int microbatch = 0;
  int chunk = 0;  // virtual chunk 0..v-1 of this stage
};
std::vector<ScheduleStep> pipeline_schedule(const Plan& plan, int stage);
// The interleaved schedule's forward order, the same on every stage (Megatron-Core
// schedules.py get_schedule_table): (microbatch, chunk) for each of the m x v chunk passes;
// the k-th backward runs the k-th entry's microbatch on chunk v - 1 - chunk.
std::vector<ScheduleStep> interleaved_table(const Plan& plan);
// The warm-up forwards of `stage` in pipeline_schedule (plus one with plan.moe_a2a_overlap;
// all m with GPipe). The steady state's forward/backward pairs follow it.
int schedule_warmup(const Plan& plan, int stage);

}  // namespace stepcast

#include "stepcast/app/checkpoint.h"

#include "stepcast/sim/checkpoint_advice.h"

namespace stepcast::app {

Result<Fields> checkpoint_fields(const Scenario& s, double step_time_s) {
  sim::AdviceOptions opt;
  opt.runs = 64;
  auto a = sim::advise_checkpoint(s, step_time_s, opt);
  if (!a.ok()) return a.error();
  const bool configured = a->configured.has_value();
  const CheckpointMode mode = configured ? a->configured_mode : a->mode;
  const sim::IntervalResult& at = configured ? *a->configured : a->recommended;
  const sim::ModeAdvice& m = mode == CheckpointMode::kAsync ? a->async : a->sync;
  const CheckpointCost& cost = mode == CheckpointMode::kAsync ? a->async_cost : a->sync_cost;
  Fields f;
  f.set("goodput", at.sim.goodput.mean);
  f.set("goodput_p10", at.sim.goodput.p10);
  f.set("goodput_p90", at.sim.goodput.p90);
  f.set("job_mtbf_h", a->mtbf_s / 3600.0);
  f.set("checkpoint_interval_s", at.sim.interval_s);
  f.set("checkpoint_interval_steps", at.sim.interval_steps);
  f.set("checkpoint_mode", mode == CheckpointMode::kAsync ? "async" : "sync");
  f.set("checkpoint_pause_s", cost.pause_s);
  f.set("checkpoint_bytes", a->sync_cost.total_bytes);
  f.set("time_to_train_h", at.sim.wall_s.mean / 3600.0);
  f.set("young_interval_s", m.young_s);
  f.set("daly_interval_s", m.daly_s);
  return f;
}

}  // namespace stepcast::app

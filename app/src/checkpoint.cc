#include "stepcast/app/checkpoint.h"

#include <fmt/format.h>

#include "stepcast/models/names.h"
#include "stepcast/planner/checkpoint_report.h"

namespace stepcast::app {

Result<CheckpointReport> run_checkpoint(const CheckpointRequest& request) {
  if (request.runs < 1 || request.runs > 10000) {
    return Error{fmt::format("runs: {} is out of range (1 to 10000)", request.runs)};
  }
  auto s = load(request.scenario);
  if (!s.ok()) return s.error();
  const std::string name = request.scenario.path.empty() ? s->name : request.scenario.path;
  // Input errors first (they name a field), before the engine runs.
  if (auto e = planner::campaign_input_error(*s)) return Error{name + ": " + e->message};
  CheckpointReport r{std::move(s).value(), std::nullopt, ""};
  auto step = planner::engine_step_time_s(r.scenario);
  if (!step.ok()) {
    r.run_failure = step.error().message;
    return r;
  }
  planner::AdviceOptions opt;
  opt.runs = request.runs;
  auto a = planner::advise_checkpoint(r.scenario, *step, opt);
  if (!a.ok()) return Error{name + ": " + a.error().message};
  r.advice = std::move(a).value();
  return r;
}

std::string checkpoint_text(const CheckpointReport& r) { return planner::checkpoint_text(*r.advice, r.scenario); }

std::string checkpoint_json(const CheckpointReport& r) { return planner::checkpoint_json(*r.advice, r.scenario); }

std::string checkpoint_csv(const CheckpointReport& r) { return planner::checkpoint_csv(*r.advice); }

Result<Fields> checkpoint_fields(const Scenario& s, double step_time_s) {
  planner::AdviceOptions opt;
  opt.runs = 64;
  auto a = planner::advise_checkpoint(s, step_time_s, opt);
  if (!a.ok()) return a.error();
  const planner::CheckpointCheckFields c = planner::checkpoint_check_fields(*a);
  Fields f;
  f.set("goodput", c.goodput);
  f.set("goodput_p10", c.goodput_p10);
  f.set("goodput_p90", c.goodput_p90);
  f.set("job_mtbf_h", c.job_mtbf_h);
  f.set("checkpoint_interval_s", c.checkpoint_interval_s);
  f.set("checkpoint_interval_steps", c.checkpoint_interval_steps);
  f.set("checkpoint_mode", to_string(c.checkpoint_mode));
  f.set("checkpoint_pause_s", c.checkpoint_pause_s);
  f.set("checkpoint_bytes", c.checkpoint_bytes);
  f.set("time_to_train_h", c.time_to_train_h);
  f.set("young_interval_s", c.young_interval_s);
  f.set("daly_interval_s", c.daly_interval_s);
  return f;
}

}  // namespace stepcast::app

#include "stepcast/app/checkpoint.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "stepcast/analysis/format.h"

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
  auto step = planner::engine_step(r.scenario);
  if (!step.ok()) {
    r.run_failure = step.error().message;
    return r;
  }
  planner::AdviceOptions opt;
  opt.runs = request.runs;
  opt.step_time_band = step->band;
  auto a = planner::advise_checkpoint(r.scenario, step->step_time_s, opt);
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

Result<ReshardReport> run_reshard(const ReshardRequest& request) {
  auto s = load(request.scenario);
  if (!s.ok()) return s.error();
  auto to = parse_reshard_layout(request.layout, s->plan);
  if (!to.ok()) return to.error();
  ClusterSpec cluster = s->cluster;
  cluster.nodes = (to->world() + cluster.gpus_per_node - 1) / cluster.gpus_per_node;
  if (to->world() % cluster.gpus_per_node != 0 && cluster.nodes > 1) {
    return Error{fmt::format("--reshard-to: {} GPUs do not fill whole nodes of {} GPUs", to->world(), cluster.gpus_per_node)};
  }
  if (cluster.nodes == 1) cluster.gpus_per_node = std::min(cluster.gpus_per_node, to->world());
  const std::vector<std::string> errors = layout_errors(s->model, cluster, *to, s->workload);
  if (!errors.empty()) {
    std::string msg;
    for (const std::string& e : errors) msg += (msg.empty() ? "" : "\n") + ("--reshard-to: " + e);
    return Error{msg};
  }
  ReshardReport r{std::move(s).value(), {}};
  r.plan = reshard_plan(r.scenario.model, cluster, r.scenario.plan, *to, r.scenario.workload, r.scenario.checkpoint.value_or(CheckpointSpec{}));
  return r;
}

namespace {

std::string layout_text(const Plan& p) {
  std::string t = fmt::format("tp={} pp={} dp={}", p.tp, p.pp, p.dp);
  if (p.cp > 1) t += fmt::format(" cp={}", p.cp);
  if (p.ep > 1) t += fmt::format(" ep={}", p.ep);
  return t + fmt::format(" zero={}", p.zero);
}

std::string gigabytes(double bytes) { return fmt::format("{:.2f} GB", bytes / 1e9); }

}  // namespace

std::string reshard_text(const ReshardReport& r) {
  const ReshardPlan& p = r.plan;
  std::string out = fmt::format("stepcast checkpoint: reshard {}\n", r.scenario.name);
  out += fmt::format("From       {} GPUs ({})\nTo         {} GPUs ({}) on {} node(s)\n", p.from_world, layout_text(p.from),
                     p.to_world, layout_text(p.to), p.to_nodes);
  out += fmt::format("Bandwidth  storage read {:.1f} GB/s shared by every rank, {:.1f} GB/s per node's NICs, {:.1f} GB/s per GPU\n",
                     p.storage_read_Bps / 1e9, p.node_Bps / 1e9, p.rank_Bps / 1e9);
  out += "\nEach new rank reads the state it will hold from the old shards that cover it:\n";
  out += fmt::format("  {:<18} {:>5} {:>4} {:>11} {:>11} {:>9} {:>6}  {:<20} {:>9}\n", "ranks", "stage", "tp", "model",
                     "optimizer", "other", "files", "old stages / tp", "time");
  for (const ReshardRead& rd : p.reads) {
    std::string ranks = analysis::rank_ranges(rd.ranks);
    if (ranks.size() > 18) ranks = fmt::format("{} ranks", rd.ranks.size());
    const std::string from = analysis::join_ints(rd.old_stages, ",") + " / " + analysis::join_ints(rd.old_tp, ",");
    out += fmt::format("  {:<18} {:>5} {:>4} {:>11} {:>11} {:>9} {:>6}  {:<20} {:>9}\n", ranks, rd.stage, rd.tp_index,
                       gigabytes(rd.model_bytes), gigabytes(rd.optimizer_bytes), fmt::format("{:.0f} KB", rd.other_bytes / 1e3),
                       rd.files, from, analysis::human_duration(rd.read_s));
  }
  out += fmt::format("\nRestore    {} read in total (replicated weights are read by every replica): storage {}, "
                     "busiest node over its NICs {} -> {} ({}-bound)\n",
                     gigabytes(p.total_read_bytes), analysis::human_duration(p.storage_s), analysis::human_duration(p.node_s),
                     analysis::human_duration(p.restore_s), p.bound);
  return out;
}

std::string reshard_json(const ReshardReport& r) {
  const ReshardPlan& p = r.plan;
  auto layout = [](const Plan& l) {
    return nlohmann::ordered_json{{"tp", l.tp}, {"pp", l.pp}, {"dp", l.dp}, {"cp", l.cp}, {"ep", l.ep}, {"zero", l.zero},
                                  {"gpus", l.world()}};
  };
  nlohmann::ordered_json reads = nlohmann::ordered_json::array();
  for (const ReshardRead& rd : p.reads) {
    reads.push_back({{"ranks", rd.ranks}, {"stage", rd.stage}, {"tp_index", rd.tp_index},
                     {"model_bytes", rd.model_bytes}, {"optimizer_bytes", rd.optimizer_bytes},
                     {"other_bytes", rd.other_bytes}, {"files", rd.files}, {"old_stages", rd.old_stages},
                     {"old_tp", rd.old_tp}, {"read_s", rd.read_s}});
  }
  nlohmann::ordered_json j{{"scenario", r.scenario.name},
                           {"from", layout(p.from)},
                           {"to", layout(p.to)},
                           {"reads", reads},
                           {"total_read_bytes", p.total_read_bytes},
                           {"storage_s", p.storage_s},
                           {"node_s", p.node_s},
                           {"restore_s", p.restore_s},
                           {"bound", p.bound}};
  return j.dump(2) + "\n";
}

}  // namespace stepcast::app

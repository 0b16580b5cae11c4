#include "stepcast/planner/checkpoint_report.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "stepcast/models/names.h"

namespace stepcast::planner {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;


// Bytes in decimal units, as storage is sold and as the bandwidths are given (GB/s).
std::string bytes(double b) {
  if (b >= 1e12) return fmt::format("{:.2f} TB", b / 1e12);
  if (b >= 1e9) return fmt::format("{:.2f} GB", b / 1e9);
  if (b >= 1e6) return fmt::format("{:.2f} MB", b / 1e6);
  return fmt::format("{:.1f} kB", b / 1e3);
}

std::string duration(double s) {
  if (s >= 2 * 86400) return fmt::format("{:.2f} days", s / 86400);
  if (s >= 2 * 3600) return fmt::format("{:.2f} h", s / 3600);
  if (s >= 120) return fmt::format("{:.1f} min", s / 60);
  return fmt::format("{:.2f} s", s);
}

// A bandwidth in GB/s with its significant digits: whole GB/s from 100 up (as before),
// three significant digits below (0.5 GB/s is "0.5", not "0").
std::string rate_GBps(double bytes_per_s) {
  const double g = bytes_per_s / 1e9;
  return g >= 100 ? fmt::format("{:.0f}", g) : fmt::format("{:.3g}", g);
}

std::string pct(double x) { return fmt::format("{:.2f}%", x * 100); }

nlohmann::ordered_json band_h(const Band& b) { return {{"p10", b.p10 / 3600.0}, {"p90", b.p90 / 3600.0}}; }

const ModeAdvice& mode_of(const CheckpointAdvice& a, CheckpointMode m) {
  return m == CheckpointMode::kAsync ? a.async : a.sync;
}

// The policy a scenario's report describes: its own interval when it gives one, else the
// recommendation.
struct Policy {
  CheckpointMode mode;
  const IntervalResult* at;
};
Policy policy_of(const CheckpointAdvice& a) {
  if (a.configured) return {a.configured_mode, &*a.configured};
  return {a.mode, &a.recommended};
}

nlohmann::ordered_json interval_json(const IntervalResult& r, double solve_s) {
  nlohmann::ordered_json j;
  j["interval_steps"] = r.sim.interval_steps;
  j["interval_s"] = r.sim.interval_s;
  j["goodput"] = {{"mean", r.sim.goodput.mean}, {"p10", r.sim.goodput.p10},
                  {"p50", r.sim.goodput.p50}, {"p90", r.sim.goodput.p90}};
  j["time_to_train_s"] = {{"mean", r.sim.wall_s.mean}, {"p10", r.sim.wall_s.p10},
                          {"p50", r.sim.wall_s.p50}, {"p90", r.sim.wall_s.p90}};
  j["daly_goodput"] = solve_s / r.daly_wall_s;
  j["daly_time_to_train_s"] = r.daly_wall_s;
  j["unfinished_runs"] = r.sim.unfinished;
  return j;
}

nlohmann::ordered_json detail_json(const IntervalResult& r) {
  nlohmann::ordered_json j;
  j["breakdown_s"] = {{"compute", r.sim.compute_s},     {"lost_work", r.sim.lost_s},
                      {"checkpoint", r.sim.checkpoint_s}, {"detection", r.sim.detection_s},
                      {"node_wait", r.sim.node_wait_s}, {"restart", r.sim.restart_s},
                      {"restore", r.sim.restore_s}};
  for (FailureCause c : kAllFailureCauses) {
    const auto i = static_cast<std::size_t>(c);
    j["failures"][failure_cause_name(c)] = r.sim.failures[i];
    j["lost_gpu_h"][failure_cause_name(c)] = r.sim.lost_gpu_h[i];
  }
  return j;
}

nlohmann::ordered_json mode_json(const ModeAdvice& m, double solve_s) {
  nlohmann::ordered_json j;
  j["feasible"] = m.feasible;
  if (!m.feasible) {
    j["why_not"] = m.why_not;
    return j;
  }
  j["pause_s"] = m.pause_s;
  j["background_s"] = m.background_s;
  j["young_interval_s"] = m.young_s;
  j["daly_interval_s"] = m.daly_s;
  j["optimum_interval_s"] = m.optimum_s;
  j["optimum_simulated"] = m.optimum_simulated;
  if (!m.optimum_simulated) j["note"] = m.note;
  j["young"] = interval_json(m.at(m.young_steps), solve_s);
  j["daly"] = interval_json(m.at(m.daly_steps), solve_s);
  j["optimum"] = interval_json(m.at(m.optimum_steps), solve_s);
  j["sweep"] = nlohmann::ordered_json::array();
  for (const auto& r : m.sweep) j["sweep"].push_back(interval_json(r, solve_s));
  return j;
}

nlohmann::ordered_json fields_json(const CheckpointCheckFields& f) {
  nlohmann::ordered_json j;
  j["goodput"] = f.goodput;
  j["goodput_p10"] = f.goodput_p10;
  j["goodput_p90"] = f.goodput_p90;
  j["job_mtbf_h"] = f.job_mtbf_h;
  j["checkpoint_interval_s"] = f.checkpoint_interval_s;
  j["checkpoint_interval_steps"] = f.checkpoint_interval_steps;
  j["checkpoint_mode"] = to_string(f.checkpoint_mode);
  j["checkpoint_pause_s"] = f.checkpoint_pause_s;
  j["checkpoint_bytes"] = f.checkpoint_bytes;
  j["time_to_train_h"] = f.time_to_train_h;
  j["young_interval_s"] = f.young_interval_s;
  j["daly_interval_s"] = f.daly_interval_s;
  return j;
}

}  // namespace

CheckpointCheckFields checkpoint_check_fields(const CheckpointAdvice& a) {
  const Policy p = policy_of(a);
  const ModeAdvice& m = mode_of(a, p.mode);
  const CheckpointCost& cost = p.mode == CheckpointMode::kAsync ? a.async_cost : a.sync_cost;
  CheckpointCheckFields f;
  f.goodput = p.at->sim.goodput.mean;
  f.goodput_p10 = p.at->sim.goodput.p10;
  f.goodput_p90 = p.at->sim.goodput.p90;
  f.job_mtbf_h = a.env.mtbf_s / 3600.0;
  f.checkpoint_interval_s = p.at->sim.interval_s;
  f.checkpoint_interval_steps = p.at->sim.interval_steps;
  f.checkpoint_mode = p.mode;
  f.checkpoint_pause_s = cost.pause_s;
  f.checkpoint_bytes = a.sync_cost.total_bytes;
  f.time_to_train_h = p.at->sim.wall_s.mean / 3600.0;
  f.young_interval_s = m.young_s;
  f.daly_interval_s = m.daly_s;
  return f;
}

std::string checkpoint_check_fields_json(const CheckpointCheckFields& fields) {
  return fields_json(fields).dump();
}

std::string checkpoint_json(const CheckpointAdvice& a, const Scenario& s) {
  nlohmann::ordered_json j;
  j["format"] = 1;
  j["scenario"] = s.name;
  j["seed"] = s.seed;
  j["runs"] = a.runs;
  j["step_time_s"] = a.step_time_s;
  if (a.step_time_band) j["step_time_band_s"] = {{"p10", a.step_time_band->p10}, {"p90", a.step_time_band->p90}};
  j["tokens_per_step"] = a.tokens_per_step;
  j["steps_total"] = a.steps_total;
  j["failure_free_s"] = a.solve_s;
  j.update(fields_json(checkpoint_check_fields(a)));
  if (const auto b = time_to_train_band(a, *policy_of(a).at)) j["time_to_train_band_h"] = band_h(*b);
  const FailureSpec& f = a.failures;
  nlohmann::ordered_json fj;
  fj["model"] = f.name;
  fj["source"] = f.source;
  fj["job_failures_per_h"] = a.env.job_rate_per_h;
  for (FailureCause c : kAllFailureCauses) {
    const auto i = static_cast<std::size_t>(c);
    const ComponentFailures& comp = f.component(c);
    fj["causes"][failure_cause_name(c)] = {
        {"rate_per_unit_h", comp.rate_per_unit_h}, {"unit", failure_unit_name(c)},
        {"units", failure_units(f, s.cluster, c)}, {"per_job_h", a.env.cause_rate_per_h[i]},
        {"lifetime", to_string(comp.lifetime)}, {"weibull_shape", comp.weibull_shape},
        {"detection_s", f.detection_of(c)}, {"nodes_down", failure_nodes_down(f, s.cluster, c)}};
  }
  fj["nodes_per_switch"] = f.nodes_per_switch;
  fj["reschedule_s"] = f.reschedule_s;
  fj["init_s"] = f.init_s;
  fj["spare_nodes"] = f.spare_nodes;
  fj["replace_node_h"] = f.replace_node_h;
  fj["mean_detection_s"] = a.env.mean_detection_s;
  fj["restart_s"] = a.restart_s;
  j["failures"] = fj;
  const CheckpointCost& k = a.sync_cost;
  nlohmann::ordered_json cj;
  cj["bytes"] = k.total_bytes;
  for (StatePart part : kAllStateParts) {
    cj["part_bytes"][state_part_name(part)] = k.part_bytes[static_cast<std::size_t>(part)];
  }
  cj["sharded"] = s.checkpoint.value_or(CheckpointSpec{}).sharded;
  cj["rank_write_bytes"] = k.rank_write_bytes;
  cj["node_write_bytes"] = k.node_write_bytes;
  cj["write_s"] = k.write_s;
  cj["write_bound"] = k.write_bound;
  cj["commit_s"] = k.commit_s;
  cj["rank_state_bytes"] = a.async_cost.rank_state_bytes;
  cj["snapshot_s"] = a.async_cost.snapshot_s;
  cj["node_staging_bytes"] = a.async_cost.node_staging_bytes;
  cj["host_memory_bytes"] = a.async_cost.host_memory_bytes;
  cj["staging_fits"] = a.async_cost.staging_fits;
  cj["restore_s"] = k.restore_s;
  cj["reshard_s"] = k.reshard_s;
  j["checkpoint"] = cj;
  j["modes"]["sync"] = mode_json(a.sync, a.solve_s);
  j["modes"]["async"] = mode_json(a.async, a.solve_s);
  nlohmann::ordered_json rj;
  rj["mode"] = to_string(a.mode);
  rj["reason"] = a.reason;
  rj.update(interval_json(a.recommended, a.solve_s));
  if (const auto b = time_to_train_band(a, a.recommended)) rj["time_to_train_band_h"] = band_h(*b);
  rj.update(detail_json(a.recommended));
  j["recommendation"] = rj;
  if (a.configured) {
    nlohmann::ordered_json cfg;
    cfg["mode"] = to_string(a.configured_mode);
    cfg.update(interval_json(*a.configured, a.solve_s));
    if (const auto b = time_to_train_band(a, *a.configured)) cfg["time_to_train_band_h"] = band_h(*b);
    cfg.update(detail_json(*a.configured));
    j["configured"] = cfg;
  }
  return j.dump(2) + "\n";
}

std::string checkpoint_text(const CheckpointAdvice& a, const Scenario& s) {
  std::string o;
  auto line = [&o](const std::string& l) { o += l + "\n"; };
  line(fmt::format("stepcast checkpoint: {} (seed {}, {} runs per interval)", s.name, s.seed, a.runs));
  line("");
  line(fmt::format("Run         {} steps x {:.4f} s = {} of failure-free compute ({:g} tokens, {} per step)",
                   a.steps_total, a.step_time_s, duration(a.solve_s), s.workload.train_tokens,
                   a.tokens_per_step));
  if (a.step_time_band) {
    line(fmt::format(
        "            the simulated step's p10-p90 {:.4f} - {:.4f} s (the error model, docs/model-reference.md "
        "section 8)",
        a.step_time_band->p10, a.step_time_band->p90));
  }
  const FailureSpec& f = a.failures;
  line(fmt::format("Failures    {}: job MTBF {:.2f} h ({:.4g} failures per hour)", f.name, a.env.mtbf_s / 3600,
                   a.env.job_rate_per_h));
  line(fmt::format("  {:<9}{:>22}{:>8}{:>14}{:>8}  {:<12}{:>10}", "cause", "rate per unit-hour", "units",
                   "per job-hour", "share", "lifetime", "detection"));
  for (FailureCause c : kAllFailureCauses) {
    const auto i = static_cast<std::size_t>(c);
    const ComponentFailures& comp = f.component(c);
    if (comp.rate_per_unit_h <= 0) continue;
    std::string life(to_string(comp.lifetime));
    if (comp.lifetime == Lifetime::kWeibull) life += fmt::format(" k={:g}", comp.weibull_shape);
    line(fmt::format("  {:<9}{:>22}{:>8}{:>14.4g}{:>8}  {:<12}{:>8.0f} s", failure_cause_name(c),
                     fmt::format("{:.4g} /{}", comp.rate_per_unit_h, failure_unit_name(c)),
                     failure_units(f, s.cluster, c), a.env.cause_rate_per_h[i],
                     fmt::format("{:.1f}%", 100 * a.env.cause_rate_per_h[i] / a.env.job_rate_per_h), life,
                     f.detection_of(c)));
  }
  line(fmt::format("  restart R = detection {:.0f} s (mean) + node wait {:.0f} s + reschedule {:.0f} s + init "
                   "{:.0f} s + restore {:.1f} s = {:.0f} s",
                   a.env.mean_detection_s, a.env.node_wait_s, f.reschedule_s, f.init_s, a.sync_cost.restore_s,
                   a.restart_s));
  line(fmt::format("  {} spare nodes; a failed node is back {:g} h after detection; a switch failure takes "
                   "down {} node(s)",
                   f.spare_nodes, f.replace_node_h, std::min(f.nodes_per_switch, s.cluster.nodes)));
  line("");
  const CheckpointCost& k = a.sync_cost;
  const double other = k.total_bytes - k.part_bytes[0] - k.part_bytes[1];
  const bool sharded = s.checkpoint.value_or(CheckpointSpec{}).sharded;
  line(fmt::format("Checkpoint  {} per checkpoint (model {}, optimizer {}, other {}), {}", bytes(k.total_bytes),
                   bytes(k.part_bytes[0]), bytes(k.part_bytes[1]), bytes(other),
                   sharded ? "sharded: every rank writes its share" : "gathered to rank 0, which writes it"));
  line(fmt::format("  sync      pause {:.2f} s: the write (bound: {}; storage {} GB/s, busiest node {}){}", k.write_s,
                   k.write_bound, rate_GBps(k.storage_write_Bps), bytes(k.node_write_bytes),
                   k.commit_s > 0 ? fmt::format(" + {:.3f} s to create and commit its files", k.commit_s) : ""));
  const CheckpointCost& ka = a.async_cost;
  line(fmt::format("  async     pause {:.2f} s: device-to-host snapshot of {} per GPU at {} GB/s{}; staging "
                   "{} per node of {} host memory ({}){}",
                   ka.async_pause_s(), bytes(ka.rank_state_bytes), rate_GBps(ka.d2h_Bps),
                   ka.commit_s > 0 ? fmt::format(" + {:.3f} s to commit the previous save", ka.commit_s) : "",
                   fmt::format("{:.1f} GiB", ka.node_staging_bytes / kGiB),
                   fmt::format("{:.0f} GiB", ka.host_memory_bytes / kGiB), ka.staging_fits ? "fits" : "does NOT fit",
                   ka.staging_fits ? fmt::format("; durable {:.2f} s after the pause", ka.async_background_s()) : ""));
  line(fmt::format("  restore   {:.2f} s (read {} GB/s; +{:.2f} s to reshard when the world size changes)",
                   k.restore_s, rate_GBps(k.storage_read_Bps), k.reshard_s));
  line("");
  line(fmt::format("Intervals   compute between checkpoints; goodput = failure-free compute / wall time"));
  line(fmt::format("  {:<7}{:<19}{:>9}{:>7}{:>10}{:>9}{:>11}{:>20}{:>15}", "mode", "interval", "formula",
                   "steps", "compute", "Daly", "simulated", "p10 - p90", "time to train"));
  auto row = [&](std::string_view mode, const std::string& label, const std::string& formula,
                 const IntervalResult& r) {
    line(fmt::format("  {:<7}{:<19}{:>9}{:>7}{:>10}{:>9}{:>11}{:>20}{:>15}", mode, label, formula,
                     r.sim.interval_steps, fmt::format("{:.0f} s", r.sim.interval_s),
                     pct(a.solve_s / r.daly_wall_s), pct(r.sim.goodput.mean),
                     fmt::format("{} - {}", pct(r.sim.goodput.p10), pct(r.sim.goodput.p90)),
                     duration(r.sim.wall_s.mean)));
  };
  auto secs = [](double s_) { return fmt::format("{:.0f} s", s_); };
  for (const ModeAdvice* m : {&a.sync, &a.async}) {
    const std::string_view name = to_string(m->mode);
    if (!m->feasible) {
      line(fmt::format("  {:<7}not possible: {}", name, m->why_not));
      continue;
    }
    row(name, "Young (1974)", secs(m->young_s), m->at(m->young_steps));
    row(name, "Daly (2006)", secs(m->daly_s), m->at(m->daly_steps));
    row(name, m->optimum_simulated ? "simulated optimum" : "optimum (= Daly)", secs(m->optimum_s),
        m->at(m->optimum_steps));
    if (!m->optimum_simulated) line(fmt::format("  {:<7}note: {}", name, m->note));
  }
  if (a.configured) row(to_string(a.configured_mode), "the scenario's", "-", *a.configured);
  line("  formula: Young sqrt(2 delta M), Daly FGCS 2006 eq. 37 (delta = the pause, M = the job MTBF),");
  line("  simulated optimum: least-squares fit of the mean wall time of the sweep; each is rounded to");
  line("  whole steps. Daly: goodput T_s / T_w from Daly's expected wall time with R above; simulated:");
  line("  mean over the runs, with the 10th and 90th percentiles.");
  line("");
  const IntervalResult& r = a.recommended;
  line(fmt::format("Recommendation: {} checkpoints every {} steps ({:.0f} s of compute)", to_string(a.mode),
                   a.interval_steps, a.interval_s));
  line("  " + a.reason);
  line(fmt::format("  goodput {} (p10 {}, p90 {}); time to train {} (p10 {}, p90 {})", pct(r.sim.goodput.mean),
                   pct(r.sim.goodput.p10), pct(r.sim.goodput.p90), duration(r.sim.wall_s.mean),
                   duration(r.sim.wall_s.p10), duration(r.sim.wall_s.p90)));
  if (const auto b = time_to_train_band(a, r)) {
    line(
        fmt::format("  time to train with the step time's band as well: p10 {}, p90 {} (the failures' p10-p90 "
                    "above is the failures' spread alone)",
                    duration(b->p10), duration(b->p90)));
  }
  line(fmt::format("  wall time per run (mean): compute {} (lost and redone {}), checkpoints {}, detection {}, "
                   "waiting for nodes {}, reschedule + init {}, restore {}",
                   duration(r.sim.compute_s), duration(r.sim.lost_s), duration(r.sim.checkpoint_s),
                   duration(r.sim.detection_s), duration(r.sim.node_wait_s), duration(r.sim.restart_s),
                   duration(r.sim.restore_s)));
  line(fmt::format("  {:<10}{:>18}{:>22}", "cause", "failures per run", "GPU-hours lost"));
  double total_f = 0, total_h = 0;
  for (FailureCause c : kAllFailureCauses) {
    const auto i = static_cast<std::size_t>(c);
    if (f.component(c).rate_per_unit_h <= 0) continue;
    total_f += r.sim.failures[i];
    total_h += r.sim.lost_gpu_h[i];
    line(fmt::format("  {:<10}{:>18.1f}{:>22.0f}", failure_cause_name(c), r.sim.failures[i], r.sim.lost_gpu_h[i]));
  }
  line(fmt::format("  {:<10}{:>18.1f}{:>22.0f}", "total", total_f, total_h));
  return o;
}

std::string checkpoint_csv(const CheckpointAdvice& a) {
  std::string o =
      "mode,interval_steps,interval_s,goodput_mean,goodput_p10,goodput_p90,time_to_train_mean_s,"
      "time_to_train_p10_s,time_to_train_p90_s,daly_goodput,daly_time_to_train_s\n";
  for (const ModeAdvice* m : {&a.sync, &a.async}) {
    for (const IntervalResult& r : m->sweep) {
      o += fmt::format("{},{},{},{},{},{},{},{},{},{},{}\n", to_string(m->mode), r.sim.interval_steps,
                       r.sim.interval_s, r.sim.goodput.mean, r.sim.goodput.p10, r.sim.goodput.p90,
                       r.sim.wall_s.mean, r.sim.wall_s.p10, r.sim.wall_s.p90, a.solve_s / r.daly_wall_s,
                       r.daly_wall_s);
    }
  }
  return o;
}

}  // namespace stepcast::planner

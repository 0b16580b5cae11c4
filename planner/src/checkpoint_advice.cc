#include "stepcast/planner/checkpoint_advice.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "stepcast/analysis/simulate_report.h"
#include "stepcast/sim/campaign.h"
#include "stepcast/sim/run.h"

namespace stepcast::planner {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kMaxSolveS = 3.2e8;      // about 10 years of failure-free compute
constexpr double kMaxSlowdown = 20;       // Daly's T_w / T_s beyond this: the job cannot finish

// Least-squares fit of y = a + b/x + c x (the first-order shape of Daly's wall time:
// checkpoint cost ~ 1/tau, lost work ~ tau) and its minimum sqrt(b/c); nullopt when the
// fit has no interior minimum.
std::optional<double> fitted_minimum(const std::vector<double>& x, const std::vector<double>& y) {
  if (x.size() < 3) return std::nullopt;
  // Normal equations for the basis (1, 1/x, x).
  double m[3][4] = {};
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double f[3] = {1.0, 1.0 / x[i], x[i]};
    for (int r = 0; r < 3; ++r) {
      for (int c = 0; c < 3; ++c) m[r][c] += f[r] * f[c];
      m[r][3] += f[r] * y[i];
    }
  }
  for (int col = 0; col < 3; ++col) {  // Gauss-Jordan with partial pivoting
    int piv = col;
    for (int r = col + 1; r < 3; ++r) {
      if (std::abs(m[r][col]) > std::abs(m[piv][col])) piv = r;
    }
    if (std::abs(m[piv][col]) < 1e-300) return std::nullopt;
    for (int c = 0; c < 4; ++c) std::swap(m[col][c], m[piv][c]);
    for (int r = 0; r < 3; ++r) {
      if (r == col) continue;
      const double k = m[r][col] / m[col][col];
      for (int c = col; c < 4; ++c) m[r][c] -= k * m[col][c];
    }
  }
  const double b = m[1][3] / m[1][1], c = m[2][3] / m[2][2];
  if (!(b > 0 && c > 0)) return std::nullopt;
  return std::sqrt(b / c);
}

std::string gib(double bytes) { return fmt::format("{:.1f} GiB", bytes / kGiB); }

}  // namespace

Result<EngineStep> engine_step(const Scenario& s) {
  sim::RunOptions opt;  // representative mode, one step (run_scenario switches to every rank when
                   // the network or a perturbation needs it)
  auto r = sim::run_scenario(s, opt);
  if (!r.ok()) return r.error();
  if (r->out.deadlock) return Error{"deadlock: " + r->out.deadlock_report};
  return EngineStep{r->summary.step_time_s, analysis::simulated_step_band(s, r->summary)};
}

Result<double> engine_step_time_s(const Scenario& s) {
  auto r = engine_step(s);
  if (!r.ok()) return r.error();
  return r->step_time_s;
}

Band time_to_train_band(const sim::Stats& wall_s, double step_time_s, const Band& step_band) {
  constexpr auto mid = [](double lo, double hi) { return 0.5 * (std::log(lo) + std::log(hi)); };
  constexpr auto half = [](double lo, double hi) { return 0.5 * (std::log(hi) - std::log(lo)); };
  const double centre = mid(wall_s.p10, wall_s.p90) + mid(step_band.p10, step_band.p90) - std::log(step_time_s);
  const double width = std::hypot(half(wall_s.p10, wall_s.p90), half(step_band.p10, step_band.p90));
  return Band{std::exp(centre - width), std::exp(centre + width)};
}

std::optional<Band> time_to_train_band(const CheckpointAdvice& a, const IntervalResult& r) {
  if (!a.step_time_band || !(r.sim.wall_s.p10 > 0) || !(a.step_time_band->p10 > 0) || !(a.step_time_s > 0)) {
    return std::nullopt;
  }
  return time_to_train_band(r.sim.wall_s, a.step_time_s, *a.step_time_band);
}

sim::CampaignModel campaign_model(const Scenario& s, const CheckpointCost& cost, double step_time_s,
                             std::int64_t steps_total) {
  const FailureSpec& f = *s.faults.failures;
  sim::CampaignModel m;
  m.step_time = SimTime::from_s(step_time_s);
  m.steps_total = steps_total;
  m.pause = SimTime::from_s(cost.pause_s);
  m.background = SimTime::from_s(cost.background_s);
  m.restore = SimTime::from_s(cost.restore_s);
  for (FailureCause c : kAllFailureCauses) {
    sim::CauseModel& cm = m.causes[static_cast<std::size_t>(c)];
    const ComponentFailures& comp = f.component(c);
    cm.units = failure_units(f, s.cluster, c);
    cm.unit_rate_per_s = comp.rate_per_unit_h / 3600.0;
    cm.lifetime = comp.lifetime;
    cm.weibull_shape = comp.weibull_shape;
    cm.detection = SimTime::from_s(f.detection_of(c));
    cm.nodes_down = failure_nodes_down(f, s.cluster, c);
  }
  m.reschedule = SimTime::from_s(f.reschedule_s);
  m.init = SimTime::from_s(f.init_s);
  m.spare_nodes = f.spare_nodes;
  m.replace_node = SimTime::from_s(f.replace_node_h * 3600.0);
  m.world = s.cluster.world();
  m.wall_limit = SimTime::from_s(std::min(8e9, 2.0 * kMaxSlowdown * m.step_time.seconds() *
                                                  static_cast<double>(steps_total)));
  return m;
}

const IntervalResult& ModeAdvice::at(std::int64_t steps) const {
  for (const IntervalResult& r : sweep) {
    if (r.sim.interval_steps == steps) return r;
  }
  return sweep.front();  // not reached when the REQUIRES holds
}

namespace {

struct Context {
  const Scenario& s;
  double step_s;
  std::int64_t steps_total;
  double solve_s;
  double mtbf_s;
  double restart_s;
  std::vector<std::uint64_t> seeds;
  std::optional<std::int64_t> configured_steps;
  CheckpointMode configured_mode;
};

ModeAdvice evaluate(const Context& x, CheckpointMode mode, const CheckpointCost& cost) {
  ModeAdvice a;
  a.mode = mode;
  a.pause_s = cost.pause_s;
  a.background_s = cost.background_s;
  if (mode == CheckpointMode::kAsync && !cost.async) {
    a.feasible = false;
    a.why_not = fmt::format("an asynchronous snapshot needs {} of pinned host memory per node, more "
                            "than the node's {}",
                            gib(cost.node_staging_bytes), gib(cost.host_memory_bytes));
    return a;
  }
  const sim::CampaignModel model = campaign_model(x.s, cost, x.step_s, x.steps_total);
  const double step = model.step_time.seconds();
  // Young's and Daly's formulas need a pause > 0; a free checkpoint (nothing saved) has
  // its optimum at every step.
  const double delta = std::max(cost.pause_s, 1e-9);
  a.young_s = young_interval_s(delta, x.mtbf_s);
  a.daly_s = daly_interval_s(delta, x.mtbf_s);
  auto to_steps = [&](double tau_s) {
    const double n = std::round(tau_s / step);
    return static_cast<std::int64_t>(std::clamp(n, 1.0, static_cast<double>(x.steps_total)));
  };
  a.young_steps = to_steps(a.young_s);
  a.daly_steps = to_steps(a.daly_s);
  // The grid: Daly's interval x 2^(i/4), i = -8..8 (a quarter to four times), and the
  // intervals the report names.
  std::vector<std::int64_t> grid;
  for (int i = -8; i <= 8; ++i) grid.push_back(to_steps(a.daly_s * std::exp2(i / 4.0)));
  grid.push_back(a.young_steps);
  grid.push_back(a.daly_steps);
  if (x.configured_steps && x.configured_mode == mode) grid.push_back(*x.configured_steps);
  std::sort(grid.begin(), grid.end());
  grid.erase(std::unique(grid.begin(), grid.end()), grid.end());

  auto run = [&](const std::vector<std::int64_t>& intervals) {
    std::vector<IntervalResult> out;
    for (const sim::CampaignSummary& c : sim::sweep_campaigns(model, intervals, x.seeds)) {
      IntervalResult r;
      r.sim = c;
      r.daly_wall_s = daly_wall_time_s(x.solve_s, c.interval_s, cost.pause_s, x.restart_s, x.mtbf_s);
      out.push_back(r);
    }
    return out;
  };
  a.sweep = run(grid);

  // The simulated optimum: the grid point with the least mean wall time, refined by a
  // least-squares fit of a + b/tau + c tau to the points within a factor 2 of it.
  const IntervalResult* best = &a.sweep.front();
  for (const IntervalResult& r : a.sweep) {
    if (r.sim.wall_s.mean < best->sim.wall_s.mean) best = &r;
  }
  a.best_grid_steps = best->sim.interval_steps;
  double seen = 0;
  for (double n : best->sim.failures) seen += n * best->sim.runs;
  const double tau_best = best->sim.interval_s;
  std::vector<double> xs, ys;
  for (const IntervalResult& r : a.sweep) {
    if (r.sim.interval_s >= tau_best / 2 && r.sim.interval_s <= tau_best * 2) {
      xs.push_back(r.sim.interval_s / tau_best);
      ys.push_back(r.sim.wall_s.mean / x.solve_s);
    }
  }
  double opt = tau_best;
  if (seen < kMinFailuresForOptimum) {
    opt = a.daly_s;
    a.optimum_simulated = false;
    a.note = fmt::format("{:.0f} failures in {} runs are too few to locate the optimum ({:.0f} needed "
                         "for about 5 %): Daly's interval is used",
                         seen, best->sim.runs, kMinFailuresForOptimum);
  } else if (auto m = fitted_minimum(xs, ys)) {
    opt = tau_best * std::clamp(*m, *std::min_element(xs.begin(), xs.end()),
                                *std::max_element(xs.begin(), xs.end()));
  }
  a.optimum_s = opt;
  a.optimum_steps = to_steps(opt);
  if (std::none_of(a.sweep.begin(), a.sweep.end(),
                   [&](const IntervalResult& r) { return r.sim.interval_steps == a.optimum_steps; })) {
    a.sweep.push_back(run({a.optimum_steps}).front());
    std::sort(a.sweep.begin(), a.sweep.end(), [](const IntervalResult& l, const IntervalResult& r) {
      return l.sim.interval_steps < r.sim.interval_steps;
    });
  }
  return a;
}

}  // namespace

std::optional<Error> campaign_input_error(const Scenario& s) {
  if (!s.faults.failures) {
    return Error{"faults.failures: required: the failure model, e.g. \"faults\": {\"failures\": "
                 "\"llama3-405b\"} (stepcast presets lists them)"};
  }
  if (s.workload.train_tokens <= 0) {
    return Error{"workload.train_tokens: required: the tokens of the whole training run, e.g. 15e12"};
  }
  return std::nullopt;
}

Result<CheckpointAdvice> advise_checkpoint(const Scenario& s, double step_time_s,
                                           const AdviceOptions& options) {
  if (auto e = campaign_input_error(s)) return *e;
  CheckpointAdvice a;
  a.runs = options.runs;
  a.step_time_band = options.step_time_band;
  a.failures = *s.faults.failures;
  a.tokens_per_step = s.plan.global_batch * s.workload.seq_len;
  const double steps = std::ceil(s.workload.train_tokens / static_cast<double>(a.tokens_per_step));
  const SimTime step = SimTime::from_s(step_time_s);
  a.step_time_s = step.seconds();
  a.solve_s = steps * a.step_time_s;
  if (!(a.solve_s <= kMaxSolveS)) {
    return Error{fmt::format("workload.train_tokens: {:g} tokens = {:.0f} steps of {:.3f} s = {:.1f} "
                             "years without failures; campaigns are simulated up to 10 years",
                             s.workload.train_tokens, steps, a.step_time_s, a.solve_s / 3.156e7)};
  }
  a.steps_total = static_cast<std::int64_t>(steps);

  a.env = failure_env(a.failures, s.cluster);
  if (!a.env.failures) {
    return Error{"faults.failures: every failure rate is 0 on this cluster: there is no failure to "
                 "checkpoint against"};
  }

  CheckpointSpec spec = s.checkpoint.value_or(CheckpointSpec{});
  CheckpointSpec sync_spec = spec, async_spec = spec;
  sync_spec.mode = CheckpointMode::kSync;
  async_spec.mode = CheckpointMode::kAsync;
  a.sync_cost = checkpoint_cost(s.model, s.cluster, s.plan, s.workload, sync_spec);
  a.async_cost = checkpoint_cost(s.model, s.cluster, s.plan, s.workload, async_spec);
  a.restart_s = a.env.restart_s + a.sync_cost.restore_s;

  // A job whose failures outpace its restarts never finishes: refuse before simulating.
  const double tau = daly_interval_s(std::max(a.sync_cost.pause_s, 1e-9), a.env.mtbf_s);
  const double slowdown =
      daly_wall_time_s(a.solve_s, std::max(tau, a.step_time_s), a.sync_cost.pause_s, a.restart_s, a.env.mtbf_s) / a.solve_s;
  if (!(slowdown <= kMaxSlowdown)) {
    return Error{fmt::format("faults.failures: the job cannot finish: a failure every {:.3g} h on "
                             "average against a restart of {:.0f} s and a {:.1f} s checkpoint "
                             "(Daly's expected wall time is {:.3g} x the failure-free time)",
                             a.env.mtbf_s / 3600.0, a.restart_s, a.sync_cost.pause_s, slowdown)};
  }

  Context x{s, a.step_time_s, a.steps_total, a.solve_s, a.env.mtbf_s, a.restart_s,
            sim::campaign_seeds(s.seed, options.runs), std::nullopt, spec.mode};
  if (spec.interval_steps) {
    x.configured_steps = std::min(*spec.interval_steps, a.steps_total);
  } else if (spec.interval_s) {
    x.configured_steps = std::clamp<std::int64_t>(std::llround(*spec.interval_s / a.step_time_s), 1, a.steps_total);
  }
  if (spec.mode == CheckpointMode::kAsync && !a.async_cost.async) x.configured_mode = CheckpointMode::kSync;
  a.configured_mode = x.configured_mode;

  a.sync = evaluate(x, CheckpointMode::kSync, a.sync_cost);
  a.async = evaluate(x, CheckpointMode::kAsync, a.async_cost);

  const IntervalResult& best_sync = a.sync.at(a.sync.optimum_steps);
  const bool use_async = a.async.feasible &&
                         a.async.at(a.async.optimum_steps).sim.goodput.mean > best_sync.sim.goodput.mean;
  const ModeAdvice& chosen = use_async ? a.async : a.sync;
  a.mode = chosen.mode;
  a.interval_steps = chosen.optimum_steps;
  a.interval_s = static_cast<double>(a.interval_steps) * a.step_time_s;
  a.recommended = chosen.at(chosen.optimum_steps);
  const double g_sync = best_sync.sim.goodput.mean * 100;
  if (use_async) {
    const double g_async = a.recommended.sim.goodput.mean * 100;
    a.reason = fmt::format(
        "async: training pauses {:.2f} s per checkpoint for the device-to-host snapshot{} instead of "
        "{:.2f} s for the write; the snapshot needs {} of host memory per node (of {})",
        a.async_cost.pause_s, a.async_cost.commit_s > 0 ? " and the previous save's commit" : "", a.sync_cost.write_s, gib(a.async_cost.node_staging_bytes),
        gib(a.async_cost.host_memory_bytes));
    if (a.async_cost.background_s <= a.interval_s) {
      a.reason += fmt::format(", and the {:.2f} s background write ends before the next checkpoint "
                              "({:.0f} s later)",
                              a.async_cost.background_s, a.interval_s);
    } else {
      a.reason += fmt::format(", but the {:.2f} s background write outlasts the {:.0f} s interval: "
                              "each checkpoint waits for the previous write",
                              a.async_cost.background_s, a.interval_s);
    }
    a.reason += fmt::format("; goodput {:.2f}% vs {:.2f}% with sync", g_async, g_sync);
  } else if (!a.async.feasible) {
    a.reason = "sync: " + a.async.why_not;
  } else {
    a.reason = fmt::format("sync: asynchronous saving does not raise the goodput here ({:.2f}% vs "
                           "{:.2f}% with sync)",
                           a.async.at(a.async.optimum_steps).sim.goodput.mean * 100, g_sync);
  }
  if (x.configured_steps) {
    const ModeAdvice& m = x.configured_mode == CheckpointMode::kAsync ? a.async : a.sync;
    a.configured = m.at(*x.configured_steps);
  }
  return a;
}

}  // namespace stepcast::planner

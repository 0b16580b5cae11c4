#include "stepcast/planner/goodput.h"

#include <algorithm>
#include <cmath>

namespace stepcast::planner {

namespace {

Goodput at_best_interval(const Scenario& s, const CheckpointCost& cost, CheckpointMode mode,
                         double step_s, std::int64_t steps_total, const FailureEnv& env) {
  Goodput g;
  g.mode = mode;
  const bool async = mode == CheckpointMode::kAsync;
  g.pause_s = async ? cost.async_pause_s() : cost.write_s;
  g.background_s = async ? cost.async_background_s() : 0.0;
  g.restore_s = cost.restore_s;
  g.checkpoint_bytes = cost.total_bytes;
  g.restart_s = env.restart_s + cost.restore_s + g.background_s;
  const double delta = std::max(g.pause_s, 1e-9);
  auto to_steps = [&](double tau_s) {
    double n = std::max(1.0, std::round(tau_s / step_s));
    if (steps_total > 0) n = std::min(n, static_cast<double>(steps_total));
    return static_cast<std::int64_t>(n);
  };
  // A background write that outlasts the interval stalls the next checkpoint.
  auto goodput_at = [&](double tau_s) {
    return daly_goodput(tau_s, g.pause_s + std::max(0.0, g.background_s - tau_s), g.restart_s, env.mtbf_s);
  };
  const CheckpointSpec spec = s.checkpoint.value_or(CheckpointSpec{});
  if (spec.interval_steps) {
    g.interval_steps = std::max<std::int64_t>(1, *spec.interval_steps);
    if (steps_total > 0) g.interval_steps = std::min(g.interval_steps, steps_total);
  } else if (spec.interval_s) {
    g.interval_steps = to_steps(*spec.interval_s);
  } else if (g.background_s <= 0) {
    g.interval_steps = to_steps(daly_interval_s(delta, env.mtbf_s));
  } else {
    // Async: the goodput's maximum over tau (the durability delay moves it away from Daly's
    // interval for the pause alone): golden-section search on ln tau, then whole steps.
    double lo = std::log(step_s);
    double hi = std::log(std::max({4.0 * env.mtbf_s, 4.0 * g.background_s, 2.0 * step_s}));
    if (steps_total > 0) hi = std::min(hi, std::log(static_cast<double>(steps_total) * step_s));
    hi = std::max(hi, lo);
    const double phi = (std::sqrt(5.0) - 1) / 2;
    double a = hi - phi * (hi - lo), b = lo + phi * (hi - lo);
    double fa = goodput_at(std::exp(a)), fb = goodput_at(std::exp(b));
    for (int i = 0; i < 60 && hi - lo > 1e-4; ++i) {
      if (fa < fb) {
        lo = a;
        a = b;
        fa = fb;
        b = lo + phi * (hi - lo);
        fb = goodput_at(std::exp(b));
      } else {
        hi = b;
        b = a;
        fb = fa;
        a = hi - phi * (hi - lo);
        fa = goodput_at(std::exp(a));
      }
    }
    const double n = std::exp((lo + hi) / 2) / step_s;
    const std::int64_t down = to_steps(std::floor(n) * step_s), up = to_steps(std::ceil(n) * step_s);
    g.interval_steps = goodput_at(static_cast<double>(up) * step_s) > goodput_at(static_cast<double>(down) * step_s) ? up : down;
  }
  g.interval_s = static_cast<double>(g.interval_steps) * step_s;
  g.goodput = goodput_at(g.interval_s);
  return g;
}

// One cost in async mode gives both: the sync pause is its write time.
CheckpointSpec async_spec(const Scenario& s) {
  CheckpointSpec spec = s.checkpoint.value_or(CheckpointSpec{});
  spec.mode = CheckpointMode::kAsync;
  return spec;
}

}  // namespace

CheckpointCost layout_checkpoint_cost(const Scenario& s, const ClusterSpec& cluster, const Plan& plan) {
  return checkpoint_cost(s.model, cluster, plan, s.workload, async_spec(s));
}

CheckpointCost layout_checkpoint_cost(const Scenario& s, const ClusterSpec& cluster, const Plan& plan,
                                      const Estimate& e) {
  return checkpoint_cost(cluster, plan, async_spec(s), e.stages);
}

Goodput layout_goodput(const Scenario& s, const ClusterSpec& cluster, const Plan& plan,
                       double step_time_s, std::int64_t steps_total, const FailureEnv& env) {
  if (!env.failures) return Goodput{};
  return layout_goodput(s, layout_checkpoint_cost(s, cluster, plan), step_time_s, steps_total, env);
}

Goodput layout_goodput(const Scenario& s, const CheckpointCost& cost, double step_time_s,
                       std::int64_t steps_total, const FailureEnv& env) {
  if (!env.failures) return Goodput{};
  const Goodput sync = at_best_interval(s, cost, CheckpointMode::kSync, step_time_s, steps_total, env);
  if (!cost.async) return sync;  // the async staging does not fit in host memory
  if (s.checkpoint) {
    if (s.checkpoint->mode == CheckpointMode::kSync) return sync;
    return at_best_interval(s, cost, CheckpointMode::kAsync, step_time_s, steps_total, env);
  }
  const Goodput async = at_best_interval(s, cost, CheckpointMode::kAsync, step_time_s, steps_total, env);
  return async.goodput > sync.goodput ? async : sync;
}

}  // namespace stepcast::planner

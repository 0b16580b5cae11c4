#include "stepcast/sim/campaign.h"

#include <algorithm>
#include <cmath>
#include <functional>

namespace stepcast::sim {

namespace {

std::uint64_t splitmix64(std::uint64_t x) {
  std::uint64_t z = x + 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

SimTime times(SimTime t, std::int64_t n) { return SimTime::from_ns(t.ns() * n); }

// now + d seconds, or kNever when that is beyond what int64 nanoseconds hold (a failure
// centuries away; SimTime::from_s takes |s| < 9e9, and now + d must not overflow).
SimTime after(SimTime now, double d_s) {
  const double room_s = (static_cast<double>(kNever.ns()) - static_cast<double>(now.ns())) * 1e-9 - 1.0;
  if (!(d_s < 9e9 && d_s < room_s)) return kNever;
  return now + SimTime::from_s(d_s);
}

}  // namespace

std::uint64_t derive_seed(std::uint64_t seed, std::uint64_t purpose, std::uint64_t index) {
  return splitmix64(splitmix64(splitmix64(seed) ^ purpose) ^ index);
}

double uniform_open01(std::mt19937_64& gen) {
  return static_cast<double>((gen() >> 11) + 1) * 0x1p-53;
}

double exponential_draw(std::mt19937_64& gen, double mean) { return -mean * std::log(uniform_open01(gen)); }

double weibull_draw(std::mt19937_64& gen, double shape, double scale) {
  return scale * std::pow(-std::log(uniform_open01(gen)), 1.0 / shape);
}

double weibull_scale_for_mean(double mean, double shape) { return mean / std::tgamma(1.0 + 1.0 / shape); }

// ---------------------------------------------------------------------------------------

RandomFailures::RandomFailures(const std::array<CauseModel, kFailureCauses>& causes, std::uint64_t seed) {
  for (std::size_t c = 0; c < causes.size(); ++c) {
    const CauseModel& m = causes[c];
    Stream& s = streams_[c];
    s.gen.seed(derive_seed(seed, kFailureStreamPurpose, c));
    if (m.units <= 0 || m.unit_rate_per_s <= 0) continue;  // never fails
    if (m.lifetime == Lifetime::kWeibull) {
      s.weibull = true;
      s.shape = m.weibull_shape;
      s.mean_s = 1.0 / m.unit_rate_per_s;
      s.scale_s = weibull_scale_for_mean(s.mean_s, s.shape);
      s.heap.reserve(static_cast<std::size_t>(m.units));
      for (std::int64_t u = 0; u < m.units; ++u) {
        s.heap.emplace_back(after(SimTime{}, weibull_draw(s.gen, s.shape, s.scale_s)).ns(), u);
      }
      std::make_heap(s.heap.begin(), s.heap.end(), std::greater<>{});
    } else {
      s.mean_s = 1.0 / (static_cast<double>(m.units) * m.unit_rate_per_s);
      s.next = after(SimTime{}, exponential_draw(s.gen, s.mean_s));
    }
  }
}

SimTime RandomFailures::peek(const Stream& s) const {
  if (s.weibull) return s.heap.empty() ? kNever : SimTime::from_ns(s.heap.front().first);
  return s.next;
}

void RandomFailures::advance(Stream& s) {
  if (s.weibull) {
    std::pop_heap(s.heap.begin(), s.heap.end(), std::greater<>{});
    auto& [ns, unit] = s.heap.back();
    // The failed unit is replaced by a new one, whose lifetime starts now.
    ns = after(SimTime::from_ns(ns), weibull_draw(s.gen, s.shape, s.scale_s)).ns();
    std::push_heap(s.heap.begin(), s.heap.end(), std::greater<>{});
  } else {
    s.next = after(s.next, exponential_draw(s.gen, s.mean_s));
  }
}

Failure RandomFailures::at(std::size_t i) {
  while (seen_.size() <= i) {
    std::size_t best = 0;
    SimTime best_t = kNever;
    for (std::size_t c = 0; c < streams_.size(); ++c) {
      const SimTime t = peek(streams_[c]);
      if (t < best_t) {  // strict: ties go to the lower cause
        best_t = t;
        best = c;
      }
    }
    if (best_t == kNever) return Failure{kNever};
    seen_.push_back(Failure{best_t, static_cast<FailureCause>(best)});
    advance(streams_[best]);
  }
  return seen_[i];
}

// ---------------------------------------------------------------------------------------

CampaignRun run_campaign(const CampaignModel& m, FailureSource& src) {
  CampaignRun r;
  const std::int64_t total = m.steps_total;
  const std::int64_t k = m.interval_steps;
  const SimTime step = m.step_time;
  const bool async = m.background > SimTime{};

  SimTime t{};
  std::int64_t done = 0, durable = 0;  // steps run in the live job; steps in the last durable checkpoint
  bool pending = false;                // an async write in flight
  std::int64_t pending_step = 0;
  SimTime pending_end{};
  std::size_t next = 0;
  Failure f = src.at(0);
  // Nodes in repair, by return time (min-heap), and replacements the job waits for.
  std::vector<std::int64_t> repairs;
  int spares = m.spare_nodes;
  int need = 0;

  auto settle = [&](SimTime now) {
    if (pending && pending_end <= now) {
      durable = pending_step;
      pending = false;
      ++r.durable_checkpoints;
    }
  };
  // A failure at t (= f.time): count it, roll back to the last durable checkpoint (an
  // async write still in flight is lost), send its nodes to repair.
  FailureCause down_cause = FailureCause::kGpu;
  auto fail = [&](SimTime partial) {
    const auto c = static_cast<std::size_t>(f.cause);
    const CauseModel& cm = m.causes[c];
    ++r.failures[c];
    r.lost_by_cause[c] += times(step, done - durable) + partial;
    done = durable;
    pending = false;
    for (int n = 0; n < cm.nodes_down; ++n) {
      repairs.push_back((f.time + cm.detection + m.replace_node).ns());
      std::push_heap(repairs.begin(), repairs.end(), std::greater<>{});
    }
    need += cm.nodes_down;
    down_cause = f.cause;
    f = src.at(++next);
  };
  // The job is down from t: detection, nodes, reschedule, init, restore; a failure in
  // between starts the sequence again (Daly's model: failures also strike restarts).
  auto recover = [&]() {
    while (true) {
      if (t > m.wall_limit) return;  // failures faster than restarts: give up (finished = false)
      const auto c = static_cast<std::size_t>(down_cause);
      bool interrupted = false;
      // One phase of length d, charged to `bucket` and to the cause; false if a failure
      // cut it short (the caller restarts the sequence).
      auto phase = [&](SimTime d, SimTime& bucket) {
        if (f.time < t + d) {
          bucket += f.time - t;
          r.lost_by_cause[c] += f.time - t;
          t = f.time;
          fail(SimTime{});
          interrupted = true;
          return false;
        }
        bucket += d;
        r.lost_by_cause[c] += d;
        t += d;
        return true;
      };
      if (!phase(m.causes[c].detection, r.detection)) continue;
      // Nodes back from repair join the spares; the job takes what it needs, and waits for
      // the next returns when the spares run out.
      while (!repairs.empty() && repairs.front() <= t.ns()) {
        std::pop_heap(repairs.begin(), repairs.end(), std::greater<>{});
        repairs.pop_back();
        ++spares;
      }
      const int take = std::min(spares, need);
      spares -= take;
      need -= take;
      while (need > 0 && !interrupted) {
        const SimTime back = SimTime::from_ns(repairs.front());
        if (!phase(back - t, r.node_wait)) break;
        std::pop_heap(repairs.begin(), repairs.end(), std::greater<>{});
        repairs.pop_back();
        --need;
      }
      if (interrupted) continue;
      if (!phase(m.reschedule, r.restart)) continue;
      if (!phase(m.init, r.restart)) continue;
      if (!phase(m.restore, r.restore)) continue;
      return;
    }
  };
  // Stall for `d` (a checkpoint pause or a wait); false on a failure within it.
  auto stall = [&](SimTime d) {
    if (f.time < t + d) {
      r.checkpoint += f.time - t;
      t = f.time;
      fail(SimTime{});
      recover();
      return false;
    }
    r.checkpoint += d;
    t += d;
    return true;
  };

  while (true) {
    if (t > m.wall_limit) {
      r.finished = false;
      break;
    }
    // Whole periods (K steps + the checkpoint) that end before the next failure repeat the
    // same state change: apply n of them at once. Synchronous: each makes its checkpoint
    // durable. Asynchronous with a write no longer than the K steps: each settles the write
    // in flight during its compute and starts its own (the last one stays in flight).
    const SimTime compute_k = times(step, k);
    if (m.fast_forward && done % k == 0 &&
        (!async || (m.background <= compute_k && (!pending || pending_end <= t + compute_k)))) {
      const SimTime period = compute_k + m.pause;
      const std::int64_t fit = (f.time - t).ns() / period.ns();
      const std::int64_t n = std::min(fit, (total - done - 1) / k);
      if (n > 0) {
        r.compute += times(compute_k, n);
        r.checkpoint += times(m.pause, n);
        t += times(period, n);
        done += n * k;
        if (async) {
          r.durable_checkpoints += pending ? n : n - 1;
          durable = done - k;
          pending = true;
          pending_step = done;
          pending_end = t + m.background;
        } else {
          r.durable_checkpoints += n;
          durable = done;
        }
      }
    }
    // Compute up to the next checkpoint.
    const std::int64_t target = std::min((done / k + 1) * k, total);
    const SimTime run_for = times(step, target - done);
    if (f.time < t + run_for) {
      const SimTime ran = f.time - t;
      const std::int64_t whole = ran.ns() / step.ns();
      r.compute += ran;
      t = f.time;
      done += whole;
      settle(t);
      fail(ran - times(step, whole));
      recover();
      continue;
    }
    r.compute += run_for;
    t += run_for;
    done = target;
    settle(t);
    // Checkpoint at `done`.
    if (async) {
      if (pending && !stall(pending_end - t)) continue;  // the previous write still runs
      settle(t);
      if (!stall(m.pause)) continue;
      pending = true;
      pending_step = done;
      pending_end = t + m.background;
      if (done == total) {  // training ends when the final checkpoint is durable
        if (!stall(pending_end - t)) continue;
        settle(t);
        break;
      }
    } else {
      if (!stall(m.pause)) continue;
      durable = done;
      ++r.durable_checkpoints;
      if (done == total) break;
    }
  }
  r.wall = t;
  r.productive = times(step, total);
  r.lost = r.compute - r.productive;
  return r;
}

// ---------------------------------------------------------------------------------------

Stats stats_of(std::vector<double> v) {
  Stats s;
  if (v.empty()) return s;
  double sum = 0;
  for (double x : v) sum += x;
  s.mean = sum / static_cast<double>(v.size());
  std::sort(v.begin(), v.end());
  auto pct = [&](double p) {
    const double h = (static_cast<double>(v.size()) - 1.0) * p;
    const auto lo = static_cast<std::size_t>(std::floor(h));
    const std::size_t hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (h - static_cast<double>(lo)) * (v[hi] - v[lo]);
  };
  s.p10 = pct(0.10);
  s.p50 = pct(0.50);
  s.p90 = pct(0.90);
  return s;
}

std::vector<std::uint64_t> campaign_seeds(std::uint64_t scenario_seed, int runs) {
  std::vector<std::uint64_t> out;
  for (int i = 0; i < runs; ++i) out.push_back(derive_seed(scenario_seed, kCampaignPurpose, static_cast<std::uint64_t>(i)));
  return out;
}

std::vector<CampaignSummary> sweep_campaigns(const CampaignModel& model,
                                             const std::vector<std::int64_t>& intervals,
                                             const std::vector<std::uint64_t>& seeds) {
  const std::size_t n = intervals.size();
  std::vector<std::vector<double>> goodput(n), wall(n);
  std::vector<CampaignSummary> out(n);
  for (std::uint64_t seed : seeds) {
    RandomFailures failures(model.causes, seed);
    for (std::size_t i = 0; i < n; ++i) {
      CampaignModel m = model;
      m.interval_steps = intervals[i];
      const CampaignRun r = run_campaign(m, failures);
      CampaignSummary& s = out[i];
      ++s.runs;
      if (!r.finished) ++s.unfinished;
      goodput[i].push_back(r.goodput());
      wall[i].push_back(r.wall.seconds());
      s.compute_s += r.compute.seconds();
      s.checkpoint_s += r.checkpoint.seconds();
      s.lost_s += r.lost.seconds();
      s.detection_s += r.detection.seconds();
      s.node_wait_s += r.node_wait.seconds();
      s.restart_s += r.restart.seconds();
      s.restore_s += r.restore.seconds();
      for (std::size_t c = 0; c < kFailureCauses; ++c) {
        s.failures[c] += r.failures[c];
        s.lost_gpu_h[c] += r.lost_by_cause[c].seconds() / 3600.0 * static_cast<double>(model.world);
      }
    }
  }
  for (std::size_t i = 0; i < n; ++i) {
    CampaignSummary& s = out[i];
    s.interval_steps = intervals[i];
    s.interval_s = static_cast<double>(intervals[i]) * model.step_time.seconds();
    s.goodput = stats_of(goodput[i]);
    s.wall_s = stats_of(wall[i]);
    if (s.runs > 0) {
      const double k = 1.0 / s.runs;
      for (double* x : {&s.compute_s, &s.checkpoint_s, &s.lost_s, &s.detection_s, &s.node_wait_s,
                        &s.restart_s, &s.restore_s}) {
        *x *= k;
      }
      for (std::size_t c = 0; c < kFailureCauses; ++c) {
        s.failures[c] *= k;
        s.lost_gpu_h[c] *= k;
      }
    }
  }
  return out;
}

}  // namespace stepcast::sim

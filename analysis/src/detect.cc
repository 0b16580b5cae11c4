#include "detect.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <string>
#include <tuple>

#include <fmt/format.h>

#include "robust.h"
#include "stepcast/analysis/format.h"

namespace stepcast::analysis::detail {

namespace {

// One rank's arrival at one collective instance.
struct CollRec {
  std::uint8_t group;
  int root;
  int step;
  std::uint32_t seq;
  std::uint32_t idx;  // position in trace.ranks
  std::int64_t post;
  bool operator<(const CollRec& o) const {
    return std::tie(group, root, step, seq, idx) < std::tie(o.group, o.root, o.step, o.seq, o.idx);
  }
  bool same_instance(const CollRec& o) const {
    return group == o.group && root == o.root && step == o.step && seq == o.seq;
  }
};

// Lateness and caused wait from the arrivals at each collective instance [a, b) of `recs`.
void account_arrivals(const std::vector<CollRec>& recs, PerRankStep& prs) {
  std::vector<double> posts;
  for (std::size_t a = 0; a < recs.size();) {
    std::size_t b = a;
    while (b < recs.size() && recs[b].same_instance(recs[a])) ++b;
    const std::size_t n = b - a;
    if (n >= 2) {
      posts.clear();
      std::int64_t last = recs[a].post;
      for (std::size_t k = a; k < b; ++k) {
        posts.push_back(static_cast<double>(recs[k].post));
        last = std::max(last, recs[k].post);
      }
      const double med = median(posts);
      double total = 0;
      std::size_t tied = 0;
      for (std::size_t k = a; k < b; ++k) {
        total += static_cast<double>(last - recs[k].post);
        tied += recs[k].post == last;
        prs.lateness[prs.at(recs[k].idx, recs[k].step)] += static_cast<double>(recs[k].post) - med;
      }
      if (total > 0) {
        for (std::size_t k = a; k < b; ++k) {
          if (recs[k].post != last) continue;
          const std::size_t cell = prs.at(recs[k].idx, recs[k].step) * kGroupKinds + recs[k].group;
          prs.caused_sum[cell] += total / static_cast<double>(tied);
          prs.caused_peer[cell] += total / static_cast<double>(tied) / static_cast<double>(n - 1);
        }
      }
    }
    a = b;
  }
}

}  // namespace

PerRankStep per_rank_step(const Trace& trace) {
  const std::size_t R = trace.ranks.size();
  PerRankStep prs;
  prs.init(R, trace.steps());
  std::vector<CollRec> recs;
  for (std::size_t i = 0; i < R; ++i) {
    for (const TraceOp& o : trace.ranks[i].ops) {
      if (o.kind == TraceOpKind::kCompute) {
        // The host's dispatch waits and optimizer step are not the GPU's work: outliers compare
        // GPU compute.
        if (o.cclass == ComputeClass::kHost || o.cclass == ComputeClass::kInterference ||
            o.cclass == ComputeClass::kHostOptimizer)
          continue;
        (o.cclass == ComputeClass::kInput ? prs.input : prs.compute)[prs.at(i, o.step)] += o.end_ns - o.begin_ns;
      } else if (o.kind == TraceOpKind::kCollective) {
        recs.push_back({static_cast<std::uint8_t>(o.group), o.group_root, o.step, o.seq, static_cast<std::uint32_t>(i),
                        o.post_ns});
      }
    }
  }
  std::sort(recs.begin(), recs.end());
  account_arrivals(recs, prs);
  return prs;
}

// ---------------------------------------------------------------------------------------
// Input stalls per host: each host's input time per step (its slowest stage-0 rank) vs
// the median of all hosts and steps.

namespace {

// When the stalled steps are at a constant distance (>= 2 stalls), that distance; else 0.
int period_of(const std::vector<int>& steps) {
  if (steps.size() < 2) return 0;
  const int period = steps[1] - steps[0];
  for (std::size_t k = 2; k < steps.size(); ++k) {
    if (steps[k] - steps[k - 1] != period) return 0;
  }
  return period;
}

// What the node's ranks (all of them, any stage) make their peers wait in `steps`, per
// step and peer (ns, summed over group kinds).
double peers_wait_ns(const Trace& trace, const PerRankStep& prs, int node, const std::vector<int>& steps) {
  double wait = 0;
  for (std::size_t i = 0; i < trace.ranks.size(); ++i) {
    if (trace.ranks[i].node != node) continue;
    for (int k : steps) {
      for (int g = 0; g < kGroupKinds; ++g) wait += prs.caused_peer[prs.at(i, k) * kGroupKinds + static_cast<std::size_t>(g)];
    }
  }
  return wait / static_cast<double>(steps.size());
}

}  // namespace

std::vector<InputStall> detect_input_stalls(const Trace& trace, const PerRankStep& prs, const DiagnoseOptions& opt,
                                            double median_step_ns, StalledSteps& stalled) {
  const int S = prs.steps;
  std::map<int, std::vector<std::size_t>> hosts;  // node -> slots of stage-0 ranks
  for (std::size_t i = 0; i < trace.ranks.size(); ++i) {
    if (trace.ranks[i].stage == 0) hosts[trace.ranks[i].node].push_back(i);
  }
  std::map<std::pair<int, int>, std::int64_t> host_input;  // (node, step) -> ns
  std::vector<double> all_inputs;
  for (const auto& [node, slots] : hosts) {
    for (int k = 0; k < S; ++k) {
      std::int64_t v = 0;
      for (std::size_t i : slots) v = std::max(v, prs.input[prs.at(i, k)]);
      host_input[{node, k}] = v;
      all_inputs.push_back(static_cast<double>(v));
    }
  }
  const Robust in_stat = robust(all_inputs);
  const double floor = std::max(opt.min_stall_input_fraction * in_stat.median, opt.min_stall_step_fraction * median_step_ns);
  std::vector<InputStall> out;
  for (const auto& [node, slots] : hosts) {
    InputStall st;
    st.node = node;
    st.median_input_s = in_stat.median * 1e-9;
    double excess_sum = 0;
    for (int k = 0; k < S; ++k) {
      const double v = static_cast<double>(host_input[{node, k}]);
      const double excess = v - in_stat.median;
      if (excess > 0 && excess >= floor && in_stat.z(v) >= opt.z_threshold) {
        st.stalled_steps.push_back(k);
        excess_sum += excess;
        stalled.insert({node, k});
      }
    }
    if (st.stalled_steps.empty()) continue;
    for (std::size_t i : slots) st.ranks.push_back(trace.ranks[i].rank);
    const std::size_t n = st.stalled_steps.size();
    st.excess_s = excess_sum / static_cast<double>(n) * 1e-9;
    st.per_step_s = excess_sum / S * 1e-9;
    st.period = period_of(st.stalled_steps);
    st.peers_wait_s = peers_wait_ns(trace, prs, node, st.stalled_steps) * 1e-9;
    out.push_back(std::move(st));
  }
  return out;
}

// ---------------------------------------------------------------------------------------
// Outlier ranks, each compared with the ranks of its own pipeline stage (stages run
// different work by design) step by step.

namespace {

// Per slot: what the stage comparison found.
struct StageHits {
  std::vector<int> compute_hits, late_hits;
  std::vector<double> excess_hit_sum, excess_all_sum, stage_median_sum;
  std::vector<char> slow;                                  // (slot, step): a compute outlier
  std::vector<std::pair<std::size_t, int>> late_candidates;  // (slot, step)
  StageHits(std::size_t ranks, int steps)
      : compute_hits(ranks, 0), late_hits(ranks, 0), excess_hit_sum(ranks, 0), excess_all_sum(ranks, 0),
        stage_median_sum(ranks, 0), slow(ranks * static_cast<std::size_t>(steps), 0) {}
};

// Location per step (the stage's median that step), scale pooled over all steps (the
// MAD of every rank-step's deviation from its step's median): a scale from 8 ranks of
// one step alone is too noisy for a 3.5-sigma test.
template <typename Value>
std::pair<std::vector<double>, double> per_step_median(const std::vector<std::size_t>& slots, int steps, Value value) {
  std::vector<double> med(static_cast<std::size_t>(steps)), dev, xs;
  for (int k = 0; k < steps; ++k) {
    xs.clear();
    for (std::size_t i : slots) xs.push_back(value(i, k));
    med[static_cast<std::size_t>(k)] = median(xs);
    for (double x : xs) dev.push_back(std::abs(x - med[static_cast<std::size_t>(k)]));
  }
  return {med, median(dev)};
}

// Compares the ranks of one stage (`slots`, at least 3) step by step.
void compare_stage(const std::vector<std::size_t>& slots, const PerRankStep& prs, const DiagnoseOptions& opt,
                   double median_step_ns, StageHits& h) {
  const int S = prs.steps;
  const auto [cmed, cmad] =
      per_step_median(slots, S, [&](std::size_t i, int k) { return static_cast<double>(prs.compute[prs.at(i, k)]); });
  const auto [lmed, lmad] = per_step_median(slots, S, [&](std::size_t i, int k) { return prs.lateness[prs.at(i, k)]; });
  for (int k = 0; k < S; ++k) {
    const double cm = cmed[static_cast<std::size_t>(k)], lm = lmed[static_cast<std::size_t>(k)];
    for (std::size_t i : slots) {
      const double x = static_cast<double>(prs.compute[prs.at(i, k)]);
      const double rel = cm > 0 ? x / cm - 1 : 0;
      h.stage_median_sum[i] += cm;
      h.excess_all_sum[i] += rel;
      if (cm > 0 && rel >= opt.min_compute_excess && robust_z(x - cm, cmad) >= opt.z_threshold) {
        ++h.compute_hits[i];
        h.excess_hit_sum[i] += rel;
        h.slow[prs.at(i, k)] = 1;
      }
      const double y = prs.lateness[prs.at(i, k)] - lm;
      if (y >= opt.min_lateness_step_fraction * median_step_ns && robust_z(y, lmad) >= opt.z_threshold) {
        h.late_candidates.emplace_back(i, k);
      }
    }
  }
}

// A late arrival is the rank's own (idle time on its side) unless, in that step, a rank
// it runs in lockstep with -- its tensor-, context- or expert-parallel group, or those of
// its pipeline neighbours -- computes slowly or sits on a stalling host: delays propagate
// through those groups within a microbatch, while the data-parallel group only meets at
// the gradient reduction (where the late rank is the one that causes the wait). A slow
// link explains it too, when the rank or one it runs in lockstep with is a member of a
// slow group's slow transfer in that step: it waited in that transfer.
class LockstepExplainer {
 public:
  LockstepExplainer(const Trace& trace, const PerRankStep& prs, const StageHits& h, const StalledSteps& stalled,
                    const LinkHits& links)
      : trace_(trace), prs_(prs), h_(h), stalled_(stalled), links_(links) {
    for (std::size_t i = 0; i < trace.ranks.size(); ++i) slot_of_[trace.ranks[i].rank] = i;
  }

  bool explained(std::size_t i, int k) const {
    if (stalled_.count({trace_.ranks[i].node, k}) || links_[prs_.at(i, k)]) return true;
    const Placement& pl = trace_.placement;
    for (int st = 0; st < pl.pp; ++st) {
      const int q = pl.stage_peer(trace_.ranks[i].rank, st);
      for (GroupKind g : {GroupKind::kTp, GroupKind::kCp, GroupKind::kEp, GroupKind::kEtp}) {
        for (int m = 0; m < pl.group_size(g); ++m) {
          const auto it = slot_of_.find(pl.group_member(g, q, m));
          if (it == slot_of_.end() || it->second == i) continue;
          const std::size_t cell = prs_.at(it->second, k);
          if (h_.slow[cell] || links_[cell] || stalled_.count({trace_.ranks[it->second].node, k})) return true;
        }
      }
    }
    return false;
  }

 private:
  const Trace& trace_;
  const PerRankStep& prs_;
  const StageHits& h_;
  const StalledSteps& stalled_;
  const LinkHits& links_;
  std::map<int, std::size_t> slot_of_;
};

OutlierRank make_outlier(const Trace& trace, const PerRankStep& prs, const StageHits& h, std::size_t i,
                         int min_steps) {
  const int S = prs.steps;
  const TraceRank& r = trace.ranks[i];
  OutlierRank o;
  o.rank = r.rank;
  o.stage = r.stage;
  o.node = r.node;
  o.steps = S;
  o.compute_steps = h.compute_hits[i] >= min_steps ? h.compute_hits[i] : 0;
  o.late_steps = h.late_hits[i];
  double comp = 0, late = 0;
  for (int k = 0; k < S; ++k) {
    comp += static_cast<double>(prs.compute[prs.at(i, k)]);
    late += prs.lateness[prs.at(i, k)];
  }
  o.compute_s = comp / S * 1e-9;
  o.median_compute_s = h.stage_median_sum[i] / S * 1e-9;
  o.compute_excess = o.compute_steps > 0 ? h.excess_hit_sum[i] / h.compute_hits[i] : h.excess_all_sum[i] / S;
  o.lateness_s = late / S * 1e-9;
  for (GroupKind g : kAllGroupKinds) {
    double sum = 0, peer = 0;
    for (int k = 0; k < S; ++k) {
      const std::size_t cell = prs.at(i, k) * kGroupKinds + static_cast<std::size_t>(g);
      sum += prs.caused_sum[cell];
      peer += prs.caused_peer[cell];
    }
    if (sum <= 0) continue;
    o.caused.push_back({g, trace.placement.group_size(g), sum / S * 1e-9, peer / S * 1e-9});
  }
  return o;
}

}  // namespace

std::vector<OutlierRank> detect_outliers(const Trace& trace, const PerRankStep& prs, const DiagnoseOptions& opt,
                                         double median_step_ns, const StalledSteps& stalled, const LinkHits& links) {
  const std::size_t R = trace.ranks.size();
  const int min_steps = std::max(1, std::min(opt.min_outlier_steps, prs.steps));
  std::map<int, std::vector<std::size_t>> stages;
  for (std::size_t i = 0; i < R; ++i) stages[trace.ranks[i].stage].push_back(i);
  StageHits h(R, prs.steps);
  for (const auto& [stage, slots] : stages) {
    if (slots.size() >= 3) compare_stage(slots, prs, opt, median_step_ns, h);  // else no majority to compare with
  }
  const LockstepExplainer lockstep(trace, prs, h, stalled, links);
  for (const auto& [i, k] : h.late_candidates) {
    if (!lockstep.explained(i, k)) ++h.late_hits[i];
  }
  std::vector<OutlierRank> out;
  for (std::size_t i = 0; i < R; ++i) {
    if (h.compute_hits[i] >= min_steps || h.late_hits[i] >= min_steps) out.push_back(make_outlier(trace, prs, h, i, min_steps));
  }
  return out;
}

// ---------------------------------------------------------------------------------------
// Hangs.

std::string hang_report_of_trace(const Trace& trace) {
  const int first_unfinished = trace.first_unfinished_step();
  std::string out = fmt::format("hang: the trace ends before every rank finished step {} (steps 0 to {})",
                                first_unfinished, trace.steps() - 1);
  // Ranks grouped by their last completed op and last completed collective; the group that
  // stopped first (earliest last completion) is the first suspect.
  struct Line {
    std::int64_t last_end = 0;
    std::vector<int> ranks;
  };
  std::map<std::string, Line> lines;
  std::vector<int> silent;
  for (const TraceRank& r : trace.ranks) {
    const TraceOp* last = nullptr;
    const TraceOp* last_coll = nullptr;
    for (const TraceOp& o : r.ops) {
      if (!last || o.end_ns > last->end_ns) last = &o;
      if (o.kind == TraceOpKind::kCollective && (!last_coll || o.end_ns > last_coll->end_ns)) last_coll = &o;
    }
    if (!last) {
      silent.push_back(r.rank);
      continue;
    }
    std::string what = fmt::format("'{}' (step {})", trace.names[last->name], last->step);
    if (last_coll) {
      what += fmt::format("; last collective completed: {} #{} '{}' on the {} group (step {})", to_string(last_coll->coll),
                          last_coll->seq, trace.names[last_coll->name], to_string(last_coll->group), last_coll->step);
    }
    Line& l = lines[what];
    l.last_end = std::max(l.last_end, last->end_ns);
    l.ranks.push_back(r.rank);
  }
  std::vector<std::tuple<std::int64_t, int, std::string>> sorted;
  for (const auto& [what, l] : lines) {
    const std::string who = l.ranks.size() == 1
                                ? fmt::format("rank {} (node {})", l.ranks.front(), trace.placement.node(l.ranks.front()))
                                : fmt::format("ranks {} ({} ranks)", rank_ranges(l.ranks), l.ranks.size());
    sorted.emplace_back(l.last_end, l.ranks.front(),
                        fmt::format("{}: last op completed at {:.6f} s: {}", who, static_cast<double>(l.last_end) * 1e-9,
                                    what));
  }
  std::sort(sorted.begin(), sorted.end());
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    out += "\n  " + std::get<2>(sorted[i]);
    if (i == 0 && sorted.size() > 1) out += " (stopped first)";
  }
  std::vector<int> absent;
  std::size_t j = 0;
  for (int r = 0; r < trace.placement.world(); ++r) {
    while (j < trace.ranks.size() && trace.ranks[j].rank < r) ++j;
    if (j >= trace.ranks.size() || trace.ranks[j].rank != r) absent.push_back(r);
  }
  absent.insert(absent.end(), silent.begin(), silent.end());
  if (!absent.empty()) out += fmt::format("\n  ranks {}: no op completed in the trace", rank_ranges(absent));
  return out;
}

}  // namespace stepcast::analysis::detail

// The detectors' shared per-(rank, step) quantities and the detector functions, private to
// analysis/ (diagnose.cc runs them in order; the verdict is verdict.cc's).
#pragma once

#include <cstdint>
#include <set>
#include <utility>
#include <vector>

#include "stepcast/analysis/diagnose.h"
#include "stepcast/analysis/trace.h"

namespace stepcast::analysis::detail {

inline constexpr int kGroupKinds = kNumGroupKinds;  // GroupKind values: tp, cp, ep, dp, edp, pp, etp, etpep, world

// Per (rank slot, step) quantities, flattened; a slot is a position in Trace::ranks.
struct PerRankStep {
  int steps = 0;
  std::vector<std::int64_t> compute, input;  // ns: compute ops except input; input ops
  // Sum over its collectives of (arrival - the group's median arrival), signed: a rank
  // that is early as often as late sums to about 0, a straggler to how far it lags. (The
  // sum, not the mean: after a rank's first late arrival its group resynchronises, and a
  // mean over hundreds of collectives would dilute that lag. Ranks of a stage run the
  // same collectives, so their sums compare.)
  std::vector<double> lateness;
  std::vector<double> caused_sum, caused_peer;  // x kGroupKinds: wait caused (ns)
  void init(std::size_t ranks, int n) {
    steps = n;
    const std::size_t cells = ranks * static_cast<std::size_t>(n);
    compute.assign(cells, 0);
    input.assign(cells, 0);
    lateness.assign(cells, 0.0);
    caused_sum.assign(cells * kGroupKinds, 0.0);
    caused_peer.assign(cells * kGroupKinds, 0.0);
  }
  std::size_t at(std::size_t slot, int step) const {
    return slot * static_cast<std::size_t>(steps) + static_cast<std::size_t>(step);
  }
};

// (node, step) pairs in which the node's input stalled.
using StalledSteps = std::set<std::pair<int, int>>;

// Compute, input, arrival lateness and caused wait of every rank and step.
PerRankStep per_rank_step(const Trace& trace);
// Input stalls per host (ascending node); `stalled` receives their (node, step) pairs.
std::vector<InputStall> detect_input_stalls(const Trace& trace, const PerRankStep& prs, const DiagnoseOptions& opt,
                                            double median_step_ns, StalledSteps& stalled);
// Per (slot, step) (PerRankStep::at): 1 when the rank is a member of a slow group's slow
// transfer in that step.
using LinkHits = std::vector<char>;

// Slow links (see SlowLink); `hits` receives the (slot, step) cells of their members.
std::vector<SlowLink> detect_slow_links(const Trace& trace, const PerRankStep& prs, const DiagnoseOptions& opt,
                                        LinkHits& hits);
// Outlier ranks (ascending rank): compute outliers, and late arrivals not explained by a
// slow or stalled rank they run in lockstep with, or by a slow link.
std::vector<OutlierRank> detect_outliers(const Trace& trace, const PerRankStep& prs, const DiagnoseOptions& opt,
                                         double median_step_ns, const StalledSteps& stalled, const LinkHits& links);
// The hang report of an incomplete trace: per group of ranks, the last op and collective
// each completed, the group that stopped first first.
std::string hang_report_of_trace(const Trace& trace);

}  // namespace stepcast::analysis::detail

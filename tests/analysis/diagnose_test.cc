// The detectors (analysis/diagnose.h) on hand-built traces whose arrivals are set by hand:
// the expected lateness, caused wait and verdict follow from the construction (derivations
// above each test). Detectors on simulated runs are tested in tests/sim/incident_test.cc.
#include "stepcast/analysis/diagnose.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "stepcast/analysis/trace.h"

namespace stepcast {
namespace {

const analysis::CausedWait* caused(const analysis::OutlierRank& o, GroupKind g) {
  for (const analysis::CausedWait& c : o.caused) {
    if (c.group == g) return &c;
  }
  return nullptr;
}

// A hand-built trace: `ranks` data-parallel ranks (4 per node), each step one 100 ms
// compute op that starts `gap_ns(rank, step)` after the step starts, then a DP all-reduce
// of 10 ms that begins when the last rank arrives.
template <typename Gap>
analysis::Trace hand_trace(int ranks, int steps, Gap gap_ns) {
  analysis::Trace t;
  t.placement = Placement{1, 1, ranks, 1, 1, 4};
  t.names = {"F", "dp.ar"};
  t.ranks.resize(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    t.ranks[static_cast<std::size_t>(r)].rank = r;
    t.ranks[static_cast<std::size_t>(r)].node = r / 4;
  }
  std::int64_t start = 0;
  for (int k = 0; k < steps; ++k) {
    std::int64_t last = 0;
    for (int r = 0; r < ranks; ++r) last = std::max(last, start + gap_ns(r, k) + 100'000'000);
    for (int r = 0; r < ranks; ++r) {
      analysis::TraceOp c;
      c.begin_ns = c.post_ns = start + gap_ns(r, k);
      c.end_ns = c.begin_ns + 100'000'000;
      c.step = k;
      analysis::TraceOp a;
      a.kind = analysis::TraceOpKind::kCollective;
      a.stream = Stream::kDp;
      a.group = GroupKind::kDp;
      a.name = 1;
      a.seq = 1;
      a.step = k;
      a.post_ns = c.end_ns;
      a.begin_ns = last;
      a.end_ns = last + 10'000'000;
      t.ranks[static_cast<std::size_t>(r)].ops.push_back(c);
      t.ranks[static_cast<std::size_t>(r)].ops.push_back(a);
    }
    start = last + 10'000'000;
    t.step_end_ns.push_back(start);
  }
  return t;
}

TEST(Outliers, ALateRankWithNormalComputeIsNamedForItsLateness) {
  // Rank 6 starts its compute 30 ms late in every step (host-side delay): its compute is
  // normal, but it arrives 30 ms after the others at every all-reduce. Each of its 7 peers
  // waits 30 ms per step: per peer 0.030 s, summed 0.210 s. Lateness vs the group median
  // (7 ranks at t, one at t + 30 ms): 30 ms.
  const analysis::Trace t = hand_trace(8, 5, [](int r, int) { return r == 6 ? 30'000'000 : 0; });
  ASSERT_TRUE(t.complete());
  const analysis::Diagnosis d = analysis::diagnose_trace(t);
  ASSERT_EQ(d.outliers.size(), 1u);
  const analysis::OutlierRank& o = d.outliers[0];
  EXPECT_EQ(o.rank, 6);
  EXPECT_EQ(o.compute_steps, 0);
  EXPECT_EQ(o.late_steps, 5);
  EXPECT_DOUBLE_EQ(o.lateness_s, 0.030);
  const analysis::CausedWait* dp = caused(o, GroupKind::kDp);
  ASSERT_NE(dp, nullptr);
  EXPECT_DOUBLE_EQ(dp->per_peer_s, 0.030);
  EXPECT_DOUBLE_EQ(dp->summed_s, 0.210);
  EXPECT_NE(d.verdict[0].text.find("arrives late at its collectives in 5/5 steps"), std::string::npos) << d.verdict[0].text;
}

TEST(Outliers, LatenessBelowTheFloorOrInOneStepIsNotAnOutlier) {
  // 4 ms late (3.5 % of the 114 ms step, under the 5 % floor) in every step; 30 ms late in
  // one step only (under the 2-step minimum).
  EXPECT_TRUE(analysis::diagnose_trace(hand_trace(8, 5, [](int r, int) { return r == 6 ? 4'000'000 : 0; })).outliers.empty());
  EXPECT_TRUE(
      analysis::diagnose_trace(hand_trace(8, 5, [](int r, int k) { return r == 6 && k == 2 ? 30'000'000 : 0; })).outliers.empty());
}

TEST(Outliers, TiesForLastSplitTheWaitEvenly) {
  // Ranks 2 and 3 both arrive 20 ms late: the 6 on-time peers wait 20 ms each, 120 ms in
  // all, split evenly: 60 ms summed per late rank, 60 ms / 7 peers per peer.
  const analysis::Trace t = hand_trace(8, 4, [](int r, int) { return r == 2 || r == 3 ? 20'000'000 : 0; });
  const analysis::Diagnosis d = analysis::diagnose_trace(t);
  ASSERT_EQ(d.outliers.size(), 2u);
  for (const analysis::OutlierRank& o : d.outliers) {
    const analysis::CausedWait* dp = caused(o, GroupKind::kDp);
    ASSERT_NE(dp, nullptr);
    EXPECT_DOUBLE_EQ(dp->summed_s, 0.060);
    EXPECT_DOUBLE_EQ(dp->per_peer_s, 0.060 / 7);
  }
  EXPECT_EQ(d.outlier_list(), "2,3");
}

TEST(Hang, ACompleteTraceIsNotAHang) {
  const analysis::Trace t = hand_trace(4, 3, [](int, int) { return 0; });
  EXPECT_TRUE(t.complete());
  EXPECT_FALSE(analysis::diagnose_trace(t).hang);
  analysis::Trace cut = t;
  cut.step_end_ns[2] = 0;
  EXPECT_EQ(cut.first_unfinished_step(), 2);
  EXPECT_TRUE(analysis::diagnose_trace(cut).hang);
}


}  // namespace
}  // namespace stepcast

// Incidents by simulation (sim/incident.h) through the detectors of stepcast_analysis, on
// simulated runs. Oracles: the engine's own analysis (the trace reader and breakdown must
// agree with it exactly), the perturbation model (a slowdown x1.2 makes every compute op
// 20 % longer; an input stall adds exactly its duration), and arithmetic identities
// (compare's parts add up to the step-time difference). Tests on hand-built traces, the
// reader's errors and the resume audit's table are in tests/analysis/.
#include "stepcast/sim/incident.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "stepcast/analysis/breakdown.h"
#include "stepcast/analysis/compare.h"
#include "stepcast/analysis/diagnose.h"
#include "stepcast/analysis/simulate_report.h"
#include "stepcast/analysis/trace.h"
#include "stepcast/models/lower.h"
#include "stepcast/models/scenario.h"
#include "stepcast/models/timeline.h"
#include "stepcast/sim/run.h"

namespace stepcast {
namespace {

// --- helpers ---------------------------------------------------------------------------

Scenario scenario(const std::string& text) {
  Result<Scenario> r = parse_scenario(text);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? r.value() : Scenario{};
}

// A small dense model on `nodes` nodes of 4 H100 each: fast enough to simulate every rank
// for many steps. `plan` and `faults` are JSON object bodies.
Scenario tiny(const std::string& plan, const std::string& faults = "", int nodes = 2, std::uint64_t seed = 1,
              const std::string& extra = "") {
  return scenario(R"({
    "model": {"num_layers": 4, "hidden_size": 1024, "num_attention_heads": 8, "vocab_size": 8192,
              "max_seq_len": 1024},
    "cluster": {"preset": "dgx-h100", "nodes": )" +
                  std::to_string(nodes) + R"(, "gpus_per_node": 4},
    "plan": {)" + plan + R"(},
    "workload": {"seq_len": 1024},)" +
                  (faults.empty() ? "" : R"("faults": {)" + faults + "},") + extra + R"("seed": )" +
                  std::to_string(seed) + "}");
}

sim::RunResult simulate(const Scenario& s, int steps) {
  sim::RunOptions o;
  o.steps = steps;
  auto r = sim::run_scenario(s, o);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? std::move(r).value() : sim::RunResult{};
}

analysis::Diagnosis diagnose(const Scenario& s, int steps = 6) {
  auto d = sim::diagnose_scenario(s, steps);
  EXPECT_TRUE(d.ok()) << (d.ok() ? "" : d.error().message);
  return d.ok() ? std::move(d).value() : analysis::Diagnosis{};
}

const analysis::CausedWait* caused(const analysis::OutlierRank& o, GroupKind g) {
  for (const analysis::CausedWait& c : o.caused) {
    if (c.group == g) return &c;
  }
  return nullptr;
}

// A layout with every kind of op (TP collectives, pipeline send/recv, DP reductions).
const char* kMixedPlan = R"("tp": 2, "pp": 2, "dp": 2, "microbatch": 1, "global_batch": 4)";

// --- the trace reader --------------------------------------------------------------------

TEST(ReadTrace, ReadsBackExactlyWhatTheSimulationRecorded) {
  // The text path (chrome_trace_json -> read_trace) and the direct path
  // (trace_from_timeline) must give the same ops, times to the nanosecond, and layout:
  // `diagnose TRACE` and `diagnose SCENARIO` then run the same detectors on the same data.
  const Scenario s = tiny(kMixedPlan, R"("stragglers": [{"kind": "slowdown", "ranks": [5], "factor": 1.3},
                                                     {"kind": "jitter", "cv": 0.05}])");
  const sim::RunResult r = simulate(s, 2);
  const analysis::Trace direct = analysis::trace_from_timeline(r.program, r.out.timeline);
  auto read = analysis::read_trace(chrome_trace_json(r.program, r.out.timeline));
  ASSERT_TRUE(read.ok()) << read.error().message;
  const analysis::Trace& t = *read;
  EXPECT_EQ(t.placement.world(), 8);
  EXPECT_EQ(t.placement.tp, 2);
  EXPECT_EQ(t.placement.pp, 2);
  EXPECT_EQ(t.placement.gpus_per_node, 4);
  EXPECT_EQ(t.placement.order, direct.placement.order);
  EXPECT_EQ(t.step_end_ns, direct.step_end_ns);
  ASSERT_EQ(t.ranks.size(), direct.ranks.size());
  std::size_t ops = 0;
  bool saw[4] = {};
  for (std::size_t i = 0; i < t.ranks.size(); ++i) {
    const analysis::TraceRank &a = t.ranks[i], &b = direct.ranks[i];
    EXPECT_EQ(a.rank, b.rank);
    EXPECT_EQ(a.stage, b.stage);
    EXPECT_EQ(a.node, b.node);
    ASSERT_EQ(a.ops.size(), b.ops.size()) << "rank " << a.rank;
    for (std::size_t k = 0; k < a.ops.size(); ++k) {
      const analysis::TraceOp &x = a.ops[k], &y = b.ops[k];
      ASSERT_EQ(t.names[x.name], direct.names[y.name]) << "rank " << a.rank << " op " << k;
      EXPECT_EQ(x.post_ns, y.post_ns);
      EXPECT_EQ(x.begin_ns, y.begin_ns);
      EXPECT_EQ(x.end_ns, y.end_ns);
      EXPECT_EQ(x.step, y.step);
      EXPECT_EQ(x.kind, y.kind);
      EXPECT_EQ(x.stream, y.stream);
      EXPECT_EQ(x.bytes, y.bytes);
      if (x.kind == analysis::TraceOpKind::kCompute) {
        EXPECT_EQ(x.cclass, y.cclass);
      }
      if (x.kind == analysis::TraceOpKind::kCollective) {
        EXPECT_EQ(x.group, y.group);
        EXPECT_EQ(x.coll, y.coll);
        EXPECT_EQ(x.group_root, y.group_root);
        EXPECT_EQ(x.seq, y.seq);
      }
      saw[static_cast<int>(x.kind)] = true;
      ++ops;
    }
  }
  EXPECT_GT(ops, 500u);
  EXPECT_TRUE(saw[0] && saw[1] && saw[2] && saw[3]) << "compute, collective, send and recv all exercised";
}

TEST(ReadTrace, BreakdownEqualsTheEnginesAnalysis) {
  // trace_breakdown applies analyze()'s rules to the neutral trace: identical seconds
  // (integer nanoseconds summed in the same order) for every rank.
  const Scenario s = tiny(kMixedPlan, R"("stragglers": [{"kind": "slowdown", "ranks": [2], "factor": 1.25}])");
  const sim::RunResult r = simulate(s, 3);
  const analysis::SimSummary ref = analysis::analyze(r.program, r.out.timeline);
  auto t = analysis::read_trace(chrome_trace_json(r.program, r.out.timeline));
  ASSERT_TRUE(t.ok()) << t.error().message;
  const std::vector<analysis::RankBreakdown> got = analysis::trace_breakdown(*t);
  ASSERT_EQ(got.size(), ref.ranks.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    const analysis::RankBreakdown &a = got[i], &b = ref.ranks[i];
    EXPECT_EQ(a.rank, b.rank);
    EXPECT_EQ(a.compute, b.compute) << "rank " << a.rank;
    EXPECT_EQ(a.optimizer, b.optimizer);
    EXPECT_EQ(a.input, b.input);
    EXPECT_EQ(a.bubble, b.bubble);
    EXPECT_EQ(a.wait, b.wait);
    EXPECT_EQ(a.tp, b.tp);
    EXPECT_EQ(a.pp, b.pp);
    EXPECT_EQ(a.dp, b.dp);
  }
}

// --- outlier ranks -----------------------------------------------------------------------

const char* kDpPlan = R"("tp": 1, "pp": 1, "dp": 8, "microbatch": 1, "global_batch": 16)";

TEST(Outliers, SlowRankIsNamedWithItsExcessAndTheWaitItCauses) {
  // Rank 5 computes 20 % slower (slowdown x1.2 on every compute op, rounded to the
  // nanosecond). Its compute is 20 % above the median of its 8 stage peers in every step,
  // and its DP group waits for it.
  const Scenario s = tiny(kDpPlan, R"("stragglers": [{"kind": "slowdown", "ranks": [5], "factor": 1.2}])");
  const analysis::Diagnosis d = diagnose(s, 4);
  ASSERT_EQ(d.outliers.size(), 1u);
  const analysis::OutlierRank& o = d.outliers[0];
  EXPECT_EQ(o.rank, 5);
  EXPECT_EQ(o.node, 1);  // 4 GPUs per node
  EXPECT_EQ(o.stage, 0);
  EXPECT_EQ(o.compute_steps, 4);
  // Each op's duration is rounded to the nanosecond (ops of ~10 us: relative error < 1e-4).
  EXPECT_NEAR(o.compute_excess, 0.20, 1e-4);
  EXPECT_NEAR(o.compute_s, 1.2 * o.median_compute_s, 1e-4 * o.median_compute_s);
  EXPECT_EQ(o.late_steps, 4);
  // It arrives last at every DP reduction, so every peer's wait is its doing: the per-peer
  // wait it causes equals the mean wait of one of its peers at DP collectives, and the sum
  // over the 7 peers is 7 times that.
  const analysis::CausedWait* dp = caused(o, GroupKind::kDp);
  ASSERT_NE(dp, nullptr);
  EXPECT_EQ(dp->group_size, 8);
  EXPECT_GT(dp->per_peer_s, 0.0);
  EXPECT_NEAR(dp->summed_s, 7 * dp->per_peer_s, 1e-12);
  EXPECT_EQ(d.outlier_list(), "5");
  EXPECT_TRUE(d.problem());
  ASSERT_FALSE(d.verdict.empty());
  EXPECT_EQ(d.verdict[0].text.rfind("rank 5 (node 1, stage 0): compute 20.0 % above its stage's median in 4/4 steps", 0),
            0u)
      << d.verdict[0].text;
  EXPECT_NE(d.verdict[0].text.find("its dp group (8 ranks) waits"), std::string::npos);
}

TEST(Outliers, OrdinaryJitterGivesNoFalsePositive) {
  // 2 % jitter per op and per step, several seeds: no rank is named, the verdict is healthy.
  for (const char* per : {"op", "step"}) {
    for (std::uint64_t seed : {1, 2, 3, 4}) {
      const Scenario s = tiny(kDpPlan, std::string(R"("stragglers": [{"kind": "jitter", "cv": 0.02, "per": ")") + per +
                                           R"("}])",
                              2, seed);
      const analysis::Diagnosis d = diagnose(s, 8);
      EXPECT_TRUE(d.outliers.empty()) << per << " seed " << seed << ": " << d.outlier_list();
      EXPECT_TRUE(d.stalls.empty());
      EXPECT_FALSE(d.problem()) << per << " seed " << seed;
      EXPECT_EQ(d.verdict.back().text.rfind("healthy:", 0), 0u);
    }
  }
}

TEST(Outliers, SlowRankStandsOutOfJitter) {
  const Scenario s = tiny(kDpPlan, R"("stragglers": [{"kind": "jitter", "cv": 0.02, "per": "step"},
                                                     {"kind": "slowdown", "ranks": [2], "factor": 1.15}])");
  const analysis::Diagnosis d = diagnose(s, 8);
  EXPECT_EQ(d.outlier_list(), "2");
}

TEST(Outliers, RanksAreComparedWithinTheirPipelineStage) {
  // Two pipeline stages run different work (stage 1 adds the logits and the loss): no
  // outlier without a fault. A slowed rank of stage 1 is compared with stage 1 only.
  const char* plan = R"("tp": 1, "pp": 2, "dp": 4, "microbatch": 1, "global_batch": 8)";
  EXPECT_TRUE(diagnose(tiny(plan, R"("stragglers": [{"kind": "jitter", "cv": 0.02}])"), 4).outliers.empty());
  const analysis::Diagnosis d = diagnose(tiny(plan, R"("stragglers": [{"kind": "slowdown", "ranks": [6], "factor": 1.3}])"), 4);
  ASSERT_EQ(d.outliers.size(), 1u);
  EXPECT_EQ(d.outliers[0].rank, 6);
  EXPECT_EQ(d.outliers[0].stage, 1);
  EXPECT_NEAR(d.outliers[0].compute_excess, 0.30, 1e-4);
}

TEST(Outliers, ASlowTensorParallelRankMakesItsTpGroupWait) {
  const char* plan = R"("tp": 4, "pp": 1, "dp": 2, "microbatch": 1, "global_batch": 4)";
  const analysis::Diagnosis d = diagnose(tiny(plan, R"("stragglers": [{"kind": "slowdown", "ranks": [1], "factor": 1.25}])"), 3);
  ASSERT_EQ(d.outliers.size(), 1u);
  const analysis::CausedWait* tp = caused(d.outliers[0], GroupKind::kTp);
  ASSERT_NE(tp, nullptr);
  EXPECT_EQ(tp->group_size, 4);
  EXPECT_GT(tp->per_peer_s, 0.0);
}

TEST(Outliers, FewerThanThreeRanksPerStageAreNotJudged) {
  // Representative mode (no fault): one rank per stage, nothing to compare with.
  const analysis::Diagnosis d = diagnose(tiny(kDpPlan), 2);
  EXPECT_EQ(d.mode, "representative");
  EXPECT_EQ(d.ranks_analysed, 1);
  EXPECT_TRUE(d.outliers.empty());
  EXPECT_FALSE(d.problem());
}

// --- input stalls ------------------------------------------------------------------------

TEST(InputStalls, PeriodicStallOnOneHostIsNamedWithItsPeriod) {
  // Host 1 (ranks 4-7) stalls 0.2 s on steps 0, 3, 6 (every 3 steps); the input op is
  // otherwise 0 s long, so the excess is exactly 0.2 s and the mean per step 0.6 / 8.
  const Scenario s = tiny(kDpPlan, R"("stragglers": [{"kind": "input_stall", "nodes": [1], "duration_s": 0.2,
                                                      "every_steps": 3}])");
  const analysis::Diagnosis d = diagnose(s, 8);
  ASSERT_EQ(d.stalls.size(), 1u);
  const analysis::InputStall& st = d.stalls[0];
  EXPECT_EQ(st.node, 1);
  EXPECT_EQ(st.ranks, (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(st.stalled_steps, (std::vector<int>{0, 3, 6}));
  EXPECT_EQ(st.period, 3);
  EXPECT_DOUBLE_EQ(st.excess_s, 0.2);
  EXPECT_DOUBLE_EQ(st.per_step_s, 0.6 / 8);
  EXPECT_GT(st.peers_wait_s, 0.1);  // the other host waits for it at the DP reduction
  EXPECT_EQ(d.stalling_list(), "1");
  // Its ranks arrive late only on stalled steps: explained by the stall, not outliers.
  EXPECT_TRUE(d.outliers.empty()) << d.outlier_list();
  bool named = false;
  for (const analysis::Finding& f : d.verdict) {
    named = named || f.text.rfind("host 1 (ranks 4-7): input stalls 0.200 s longer than the median input time in 3/8 "
                                  "steps (steps 0, 3, 6: every 3 steps)",
                                  0) == 0;
  }
  EXPECT_TRUE(named);
}

TEST(InputStalls, AOneOffStallHasNoPeriod) {
  const Scenario s = tiny(kDpPlan, R"("stragglers": [{"kind": "input_stall", "nodes": [0], "duration_s": 0.3,
                                                      "from_step": 4, "to_step": 4}])");
  const analysis::Diagnosis d = diagnose(s, 6);
  ASSERT_EQ(d.stalls.size(), 1u);
  EXPECT_EQ(d.stalls[0].stalled_steps, (std::vector<int>{4}));
  EXPECT_EQ(d.stalls[0].period, 0);
}

TEST(InputStalls, EqualInputTimeOnEveryHostIsNoStall) {
  // 50 ms of input on every host and step: slow input, but no host stands out.
  Scenario s = tiny(kDpPlan, R"("stragglers": [{"kind": "jitter", "cv": 0.02}])");
  s.workload.input_time_s = 0.05;
  const analysis::Diagnosis d = diagnose(s, 6);
  EXPECT_TRUE(d.stalls.empty());
  EXPECT_TRUE(d.outliers.empty());
  EXPECT_NEAR(d.mean.input, 0.05, 1e-9);  // every rank is a stage-0 rank and reads input
}

// --- exposed communication ---------------------------------------------------------------

TEST(ExposedComm, IsTheMeanOverRanksOfTheBreakdownByKind) {
  const Scenario s = tiny(kMixedPlan, R"("stragglers": [{"kind": "jitter", "cv": 0.02}])");
  const analysis::Diagnosis d = diagnose(s, 2);
  double tp = 0, pp = 0, dp = 0;
  for (const analysis::RankBreakdown& b : d.ranks) {
    tp += b.tp / static_cast<double>(d.ranks.size());
    pp += b.pp / static_cast<double>(d.ranks.size());
    dp += b.dp / static_cast<double>(d.ranks.size());
  }
  EXPECT_DOUBLE_EQ(d.comm.by_kind[0], tp);
  EXPECT_DOUBLE_EQ(d.comm.by_kind[3], pp);
  EXPECT_DOUBLE_EQ(d.comm.by_kind[4], dp);
  EXPECT_GT(d.comm.by_kind[0], 0.0);  // TP collectives on the critical path
  EXPECT_NEAR(d.comm.total, tp + pp + dp, 1e-12);
  EXPECT_NEAR(d.comm.fraction, d.comm.total / d.step_time_s, 1e-12);
}

// --- slow links ------------------------------------------------------------------------

// scenarios/incident/slow-link.json: llama2-7b, TP 2 x PP 4 x DP 4 on 4 nodes of 8 x H100
// (32 ranks), 2 % jitter per op, rank 13's link at a quarter of its bandwidth: every
// transfer touching rank 13 takes 4x as long (perturb.cc), so its tp group {12, 13} and its
// dp group {9, 11, 13, 15} (rank 13's stage and TP index in each replica) move data for 4x
// as long as the other groups of their kind; rank 13 is the only rank both groups share.
Scenario slow_link_scenario(std::uint64_t seed) {
  auto s = load_scenario_file(STEPCAST_SOURCE_DIR "/scenarios/incident/slow-link.json");
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message);
  if (!s.ok()) return Scenario{};
  Scenario out = std::move(s).value();
  out.seed = seed;
  return out;
}

TEST(SlowLink, IsNamedAsTheLinkAndTheGroupsItSlowsNotAsIdleRanks) {
  // Regression: this run named 8 of the 31 healthy ranks (4, 5, 12, 13, 20, 21, 28, 29:
  // rank 13's replica) as outliers "idle on their own side": after waiting in rank 13's
  // slow transfers they arrive late at their next collectives.
  for (std::uint64_t seed : {3, 4, 5}) {
    const analysis::Diagnosis d = diagnose(slow_link_scenario(seed), 6);
    EXPECT_EQ(d.outlier_list(), "") << "seed " << seed;
    ASSERT_EQ(d.links.size(), 1u) << "seed " << seed;
    const analysis::SlowLink& l = d.links[0];
    EXPECT_EQ(l.ranks, (std::vector<int>{13}));
    EXPECT_EQ(l.nodes, (std::vector<int>{1}));
    ASSERT_EQ(l.groups.size(), 2u);
    EXPECT_EQ(l.groups[0].group, GroupKind::kTp);
    EXPECT_EQ(l.groups[0].members, (std::vector<int>{12, 13}));
    EXPECT_EQ(l.groups[1].group, GroupKind::kDp);
    EXPECT_EQ(l.groups[1].members, (std::vector<int>{9, 11, 13, 15}));
    EXPECT_EQ(l.groups[1].steps, 6);
    // A quarter of the bandwidth: every transfer takes 4x, rounded to the nanosecond.
    EXPECT_NEAR(l.groups[0].slowdown, 4.0, 1e-3);
    EXPECT_NEAR(l.groups[1].slowdown, 4.0, 1e-3);
    EXPECT_EQ(d.link_list(), "13");
    EXPECT_TRUE(d.problem());
    ASSERT_FALSE(d.verdict.empty());
    EXPECT_EQ(d.verdict[0].text,
              "slow link at rank 13 (node 1): its tp group (ranks 12-13) moves data 4.00x as long as the other tp "
              "groups in 6/6 steps, its dp group (ranks 9,11,13,15) 4.00x in 6/6 steps; every member waits for those "
              "transfers alike: it costs exposed communication, not a slow rank");
    EXPECT_NE(analysis::diagnosis_json(d).find("\"slow_link_ranks\": \"13\""), std::string::npos);
  }
}

TEST(SlowLink, WithoutTheLinkItsVictimsWouldBeNamedAsIdle) {
  // The mechanism of the regression above: with the slow-link detector off (a threshold no
  // transfer reaches), rank 13's replica on the other stages is named "idle on their own
  // side", as before. (Ranks 12 and 13 themselves were too until the gradient norm's
  // all-reduce over every rank came in: every rank now leaves each step's end together.)
  analysis::DiagnoseOptions off;
  off.min_link_slowdown = 1e9;
  auto d = sim::diagnose_scenario(slow_link_scenario(3), 6, off);
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->links.empty());
  EXPECT_EQ(d->outlier_list(), "4,5,20,21,28,29") << analysis::diagnosis_text(*d);
  for (const analysis::OutlierRank& o : d->outliers) EXPECT_EQ(o.compute_steps, 0) << o.rank;  // late, not slow
}

TEST(SlowLink, NoLinkIsNamedWithoutOne) {
  // The same job with jitter only: no slow link, no outlier (jitter touches compute, not
  // transfers).
  Scenario s = slow_link_scenario(3);
  s.faults.perturb.stragglers.erase(s.faults.perturb.stragglers.begin());
  const analysis::Diagnosis d = diagnose(s, 6);
  EXPECT_TRUE(d.links.empty());
  EXPECT_EQ(d.outlier_list(), "");
  EXPECT_FALSE(d.problem());
}

// --- hangs and mismatches ----------------------------------------------------------------

TEST(Hang, ACrashIsReportedWithTheRankThatNeverArrived) {
  const Scenario s = tiny(kDpPlan, R"("crash": {"rank": 3, "step": 1, "at_op": 5})");
  const analysis::Diagnosis d = diagnose(s, 3);
  EXPECT_TRUE(d.hang);
  EXPECT_TRUE(d.problem());
  EXPECT_EQ(d.hang_report.rfind("hang: the program cannot finish", 0), 0u);
  EXPECT_NE(d.hang_report.find("never arrived: 3"), std::string::npos) << d.hang_report;
  EXPECT_NE(d.hang_report.find("rank 3 (node 0): stopped before"), std::string::npos) << d.hang_report;
  ASSERT_EQ(d.verdict.size(), 1u);
  EXPECT_EQ(d.verdict[0].text,
            "the run hangs: rank 3 stopped and the others wait in collectives for rank 3, which never arrives (hang "
            "report above)");
  const std::string j = analysis::diagnosis_json(d);
  EXPECT_NE(j.find("\"hang\": true"), std::string::npos);
  EXPECT_EQ(j.find("outlier_ranks"), std::string::npos);  // nothing analysed on a hang
}

TEST(Hang, AHungTraceNamesTheRankThatStoppedFirst) {
  // The trace of the same crash: step 1 never ends (step_end_us[1] = 0) and rank 3
  // completed fewer ops than its stage peers; its last op ended before everyone else's.
  const Scenario s = tiny(kDpPlan, R"("crash": {"rank": 3, "step": 1, "at_op": 5})");
  const sim::RunResult r = simulate(s, 3);
  ASSERT_TRUE(r.out.deadlock);
  auto t = analysis::read_trace(chrome_trace_json(r.program, r.out.timeline));
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_FALSE(t->complete());
  EXPECT_EQ(t->first_unfinished_step(), 1);
  const analysis::Diagnosis d = analysis::diagnose_trace(*t);
  EXPECT_TRUE(d.hang);
  EXPECT_EQ(d.hang_report.rfind("hang: the trace ends before every rank finished step 1 (steps 0 to 2)\n  rank 3 (node 0): last op "
                                "completed at ",
                                0),
            0u)
      << d.hang_report;
  EXPECT_NE(d.hang_report.find("(stopped first)"), std::string::npos);
  EXPECT_EQ(d.verdict[0].text.rfind("the run hangs: rank 3 stopped", 0), 0u) << d.verdict[0].text;
}

TEST(Hang, AStageThatNeverReachesTheUpdateHoldsEveryRankAtTheGradientNorm) {
  // Rank 5 (stage 1 of tp 1 x pp 2 x dp 4) stops before its gradient norm's pass in step 0:
  // its data-parallel peers of stage 1 and every rank of stage 0 wait in the norm's
  // all-reduce over every rank, the step's last collective, as a real job hangs there.
  Scenario s = tiny(R"("tp": 1, "pp": 2, "dp": 4, "microbatch": 1, "global_batch": 16)",
                    R"("crash": {"rank": 5, "step": 0, "at_op": 0})");
  const Program p = lower(s);
  std::uint32_t norm = 0;
  while (p.names[p.roles[1].ops[norm].name] != "gradient norm") ++norm;
  s.faults.perturb.crash->at_op = norm;
  const analysis::Diagnosis d = diagnose(s, 2);
  ASSERT_TRUE(d.hang);
  EXPECT_NE(d.hang_report.find("never arrived: 5"), std::string::npos) << d.hang_report;
  EXPECT_NE(d.hang_report.find("rank 5 (node 1): stopped before 'gradient norm' (step 0)"), std::string::npos)
      << d.hang_report;
  EXPECT_NE(d.hang_report.find("ranks 0-4,6-7"), std::string::npos) << d.hang_report;
  EXPECT_NE(d.hang_report.find("in all_reduce #1 'world.ar gradient norm' on the world group (step 0)"),
            std::string::npos)
      << d.hang_report;
}

TEST(Hang, AMismatchedCollectiveIsReported) {
  // Rank 2 passes twice the bytes to its first DP collective: the group never completes
  // it, and the engine names the mismatch.
  Scenario s = tiny(kDpPlan, R"("mismatch": {"rank": 2, "step": 0, "at_op": 0})");
  const Program p = lower(s);
  std::uint32_t first = 0;
  while (p.roles[0].ops[first].kind != OpKind::kCollective) ++first;
  s.faults.perturb.mismatch->at_op = first;
  const analysis::Diagnosis d = diagnose(s, 2);
  EXPECT_TRUE(d.hang);
  ASSERT_EQ(d.mismatches.size(), 1u);
  EXPECT_NE(d.mismatches[0].find("members passed different sizes"), std::string::npos) << d.mismatches[0];
  bool named = false;
  for (const analysis::Finding& f : d.verdict) named = named || f.text.rfind("collective mismatch: ", 0) == 0;
  EXPECT_TRUE(named);
  EXPECT_NE(analysis::diagnosis_json(d).find("\"mismatch\": true"), std::string::npos);
}

// --- resume audit ------------------------------------------------------------------------

TEST(ResumeAudit, DiagnoseReportsItForAScenarioWithACheckpoint) {
  const Scenario s = tiny(kDpPlan, "", 2, 1,
                          R"("checkpoint": {"contents": ["model", "optimizer", "lr_scheduler", "grad_scaler", "rng",
                                                          "step", "config"]},)");
  const analysis::Diagnosis d = diagnose(s, 1);
  ASSERT_TRUE(d.resume.has_value());
  EXPECT_EQ(d.resume->missing_list(), "data_sampler");
  EXPECT_TRUE(d.problem());
  EXPECT_NE(analysis::diagnosis_json(d).find("\"resume_missing\": \"data_sampler\""), std::string::npos);
}

// --- compare -----------------------------------------------------------------------------

analysis::CompareSide side(const Scenario& s, int steps) {
  auto r = sim::compare_side(s, steps);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? std::move(r).value() : analysis::CompareSide{};
}

TEST(Compare, PartsAddUpToTheStepTimeDifferenceAndStrongScalingIsNamed) {
  // The same global batch (16 sequences) on 4 and 8 GPUs: strong scaling, no warning.
  const Scenario a = tiny(R"("tp": 1, "pp": 1, "dp": 4, "microbatch": 1, "global_batch": 16)", "", 1);
  const Scenario b = tiny(R"("tp": 1, "pp": 1, "dp": 8, "microbatch": 1, "global_batch": 16)", "", 2);
  const analysis::Comparison c = analysis::compare(side(a, 2), side(b, 2));
  EXPECT_NEAR(c.parts_delta_s, c.step_delta_s, 1e-12);
  EXPECT_LT(c.step_delta_s, 0.0);  // half the work per GPU
  EXPECT_EQ(c.scaling_kind, "strong");
  EXPECT_TRUE(c.same_training);
  EXPECT_TRUE(c.warnings.empty());
  // Strong scaling: efficiency = (T_a x N_a) / (T_b x N_b).
  EXPECT_NEAR(c.scaling_efficiency, (c.a.step_time_s * 4) / (c.b.step_time_s * 8), 1e-12);
  EXPECT_NEAR(c.layout_delta_s, c.step_delta_s, 1e-12);  // no faults: all of it is layout
}

TEST(Compare, APredictedSideCarriesSimulatesBandAndTheDifferenceIsJudgedByTheTieRule) {
  const Scenario a = tiny(R"("tp": 1, "pp": 1, "dp": 4, "microbatch": 1, "global_batch": 16)", "", 1);
  const Scenario b = tiny(R"("tp": 1, "pp": 1, "dp": 8, "microbatch": 1, "global_batch": 16)", "", 2);
  const analysis::CompareSide sa = side(a, 1), sb = side(b, 1);
  // One step: the side's step is simulate's, and so are its band and parts (a second path:
  // the engine run and analysis::simulated_step_band on it).
  const sim::RunResult ra = simulate(a, 1);
  ASSERT_TRUE(sa.step_time_band.has_value() && sa.step_parts.has_value());
  const Band want = analysis::simulated_step_band(a, ra.summary);
  EXPECT_NEAR(sa.step_time_s, ra.summary.step_time_s, 1e-12);
  EXPECT_NEAR(sa.step_time_band->p10, want.p10, 1e-12);
  EXPECT_NEAR(sa.step_time_band->p90, want.p90, 1e-12);
  EXPECT_LT(sa.step_time_band->p10, sa.step_time_s);
  EXPECT_GT(sa.step_time_band->p90, sa.step_time_s);
  // The tie rule of band.h on the two sides' parts.
  const analysis::Comparison c = analysis::compare(sa, sb);
  ASSERT_TRUE(c.tie_log_threshold.has_value());
  EXPECT_DOUBLE_EQ(*c.tie_log_threshold, tie_log_threshold(*sa.step_parts, *sb.step_parts));
  EXPECT_EQ(c.ties, std::abs(std::log(sb.step_time_s / sa.step_time_s)) <= *c.tie_log_threshold);
  EXPECT_FALSE(c.ties);  // half the work per GPU: far beyond what the make-up leaves unsure
  // A side against itself: no difference, a tie.
  const analysis::Comparison same = analysis::compare(sa, sa);
  EXPECT_TRUE(same.ties);
  EXPECT_EQ(*same.tie_log_threshold, 0.0);
  // A measured side has no band: nothing is judged.
  analysis::CompareSide measured = sb;
  measured.step_time_band.reset();
  measured.step_parts.reset();
  const analysis::Comparison m = analysis::compare(sa, measured);
  EXPECT_FALSE(m.tie_log_threshold.has_value());
  const std::string text = analysis::comparison_text(m);
  EXPECT_NE(text.find(", B measured (the error model"), std::string::npos) << text;
  const std::string json = analysis::comparison_json(c);
  EXPECT_NE(json.find("\"ties\": false"), std::string::npos) << json;
  EXPECT_NE(json.find("\"step_time_band_s\""), std::string::npos) << json;
}

TEST(Compare, TheIncidentIsAttributedToLayoutRank37AndHost5) {
  // scenarios/incident: 8 GPUs -> 64 GPUs with a slow rank and a stalling host (5 steps:
  // one stall, on step 0, as in 2 of 10). The decomposition adds up both ways; the two do
  // not train the same thing (global batch 64 -> 512), which compare must say.
  auto a = load_scenario_file(STEPCAST_SOURCE_DIR "/scenarios/incident/8gpu.json");
  auto b = load_scenario_file(STEPCAST_SOURCE_DIR "/scenarios/incident/64gpu.json");
  ASSERT_TRUE(a.ok() && b.ok());
  const analysis::Comparison c = analysis::compare(side(*a, 5), side(*b, 5));
  // The steps of docs/incident-walkthrough.md (each GPU count at the pace of its slowest GPU,
  // docs/model-reference.md section 4.5).
  EXPECT_NEAR(c.a.step_time_s, 2.49, 0.03);
  EXPECT_NEAR(c.b.step_time_s, 3.23, 0.05);
  EXPECT_NEAR(c.parts_delta_s, c.step_delta_s, 1e-9);
  EXPECT_NEAR(c.b.faults_together_s - c.a.faults_together_s + c.layout_delta_s, c.step_delta_s, 1e-9);
  EXPECT_FALSE(c.same_training);
  EXPECT_EQ(c.scaling_kind, "weak");  // 32,768 tokens per GPU on both
  ASSERT_EQ(c.warnings.size(), 1u);
  EXPECT_EQ(c.warnings[0].rfind("A and B do not train the same thing: global batch 64 vs 512 sequences", 0), 0u);
  ASSERT_EQ(c.b.faults.size(), 2u);
  EXPECT_EQ(c.b.faults[0].description, "slowdown of rank 37 (compute x1.18)");
  EXPECT_EQ(c.b.faults[1].description, "input stall on node 5 (0.8 s every 5 steps)");
  EXPECT_GT(c.b.faults[0].alone_s, 0.2);
  EXPECT_GT(c.b.faults[1].alone_s, 0.05);
  EXPECT_NEAR(c.layout_delta_s, 0.25, 0.03);  // cross-node DP + the smaller microbatch
  // Of it, the cross-node gradient reduction: exposed, and slowing the backward it overlaps
  // (interference, counted as compute: docs/model-reference.md 4.5a).
  double dp = 0, compute = 0;
  for (const analysis::ComparePart& p : c.layout_parts) {
    if (p.name == "exposed_comm.dp") dp = p.delta_s();
    if (p.name == "compute") compute = p.delta_s();
  }
  EXPECT_NEAR(dp, 0.18, 0.03);
  EXPECT_NEAR(compute, 0.09, 0.02);
  ASSERT_EQ(c.b.findings.size(), 2u);
  EXPECT_EQ(c.b.findings[0].rfind("rank 37 (node 4, stage 0)", 0), 0u);
  EXPECT_EQ(c.b.findings[1].rfind("host 5 (ranks 40-47)", 0), 0u);
}

// --- determinism -------------------------------------------------------------------------

TEST(Determinism, SameScenarioGivesByteIdenticalReportsThroughEitherPath) {
  const Scenario s = tiny(kMixedPlan, R"("stragglers": [{"kind": "jitter", "cv": 0.03},
                                                     {"kind": "slowdown", "ranks": [3], "factor": 1.2},
                                                     {"kind": "input_stall", "nodes": [1], "duration_s": 0.1,
                                                      "every_steps": 2}])");
  const analysis::Diagnosis d1 = diagnose(s, 4), d2 = diagnose(s, 4);
  EXPECT_EQ(analysis::diagnosis_json(d1), analysis::diagnosis_json(d2));
  EXPECT_EQ(analysis::diagnosis_text(d1), analysis::diagnosis_text(d2));
  // The trace text read back gives the same findings (the scenario path adds only its name,
  // mode, seed and the prediction's band: a trace is a record, not a prediction).
  const sim::RunResult r = simulate(s, 4);
  auto t = analysis::read_trace(chrome_trace_json(r.program, r.out.timeline));
  ASSERT_TRUE(t.ok());
  analysis::Diagnosis from_trace = analysis::diagnose_trace(*t);
  from_trace.source = d1.source;
  from_trace.input = d1.input;
  from_trace.mode = d1.mode;
  from_trace.seed = d1.seed;
  EXPECT_FALSE(from_trace.step_time_band.has_value());
  ASSERT_TRUE(d1.step_time_band.has_value());
  // simulate's band around the same steps' mean.
  const Band b = analysis::simulated_step_band(s, r.summary);
  EXPECT_NEAR(d1.step_time_band->p10, b.p10 * d1.step_time_s / r.summary.step_time_s, 1e-12);
  EXPECT_NEAR(d1.step_time_band->p90, b.p90 * d1.step_time_s / r.summary.step_time_s, 1e-12);
  from_trace.step_time_band = d1.step_time_band;
  EXPECT_EQ(analysis::diagnosis_json(from_trace), analysis::diagnosis_json(d1));
}

TEST(Determinism, CompareGivesByteIdenticalReports) {
  const Scenario a = tiny(kDpPlan, R"("stragglers": [{"kind": "jitter", "cv": 0.02}])");
  const Scenario b = tiny(kDpPlan, R"("stragglers": [{"kind": "jitter", "cv": 0.02},
                                                     {"kind": "slowdown", "ranks": [1], "factor": 1.2}])");
  const analysis::Comparison c1 = analysis::compare(side(a, 3), side(b, 3));
  const analysis::Comparison c2 = analysis::compare(side(a, 3), side(b, 3));
  EXPECT_EQ(analysis::comparison_json(c1), analysis::comparison_json(c2));
  EXPECT_EQ(analysis::comparison_text(c1), analysis::comparison_text(c2));
  // Same model, batch and GPUs: the whole difference is the slow rank's.
  EXPECT_TRUE(c1.same_training);
  ASSERT_EQ(c1.b.faults.size(), 1u);
  EXPECT_NEAR(c1.b.faults[0].alone_s, c1.b.faults_together_s, 1e-12);
  EXPECT_NEAR(c1.layout_delta_s, 0.0, 1e-12);
  EXPECT_NEAR(c1.b.faults_together_s, c1.step_delta_s, 1e-12);
}

}  // namespace
}  // namespace stepcast

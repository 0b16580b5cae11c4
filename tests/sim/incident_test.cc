// Incident analysis (sim/diagnose.h). Oracles: the engine's own analysis (the trace
// reader and breakdown must agree with it exactly), the perturbation model (a slowdown
// x1.2 makes every compute op 20 % longer; an input stall adds exactly its duration),
// hand-built traces whose arrivals are set by hand, the resume audit's table, and
// arithmetic identities (compare's parts add up to the step-time difference).
#include "stepcast/sim/diagnose.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "stepcast/models/lower.h"
#include "stepcast/models/scenario.h"
#include "stepcast/models/timeline.h"
#include "stepcast/sim/analysis.h"
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

sim::Diagnosis diagnose(const Scenario& s, int steps = 6) {
  auto d = sim::diagnose_scenario(s, steps);
  EXPECT_TRUE(d.ok()) << (d.ok() ? "" : d.error().message);
  return d.ok() ? std::move(d).value() : sim::Diagnosis{};
}

const sim::CausedWait* caused(const sim::OutlierRank& o, GroupKind g) {
  for (const sim::CausedWait& c : o.caused) {
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
  const sim::Trace direct = sim::trace_from_timeline(r.program, r.out.timeline);
  auto read = sim::read_trace(chrome_trace_json(r.program, r.out.timeline));
  ASSERT_TRUE(read.ok()) << read.error().message;
  const sim::Trace& t = *read;
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
    const sim::TraceRank &a = t.ranks[i], &b = direct.ranks[i];
    EXPECT_EQ(a.rank, b.rank);
    EXPECT_EQ(a.stage, b.stage);
    EXPECT_EQ(a.node, b.node);
    ASSERT_EQ(a.ops.size(), b.ops.size()) << "rank " << a.rank;
    for (std::size_t k = 0; k < a.ops.size(); ++k) {
      const sim::TraceOp &x = a.ops[k], &y = b.ops[k];
      ASSERT_EQ(t.names[x.name], direct.names[y.name]) << "rank " << a.rank << " op " << k;
      EXPECT_EQ(x.post_ns, y.post_ns);
      EXPECT_EQ(x.begin_ns, y.begin_ns);
      EXPECT_EQ(x.end_ns, y.end_ns);
      EXPECT_EQ(x.step, y.step);
      EXPECT_EQ(x.kind, y.kind);
      EXPECT_EQ(x.stream, y.stream);
      EXPECT_EQ(x.bytes, y.bytes);
      if (x.kind == sim::TraceOpKind::kCompute) {
        EXPECT_EQ(x.cclass, y.cclass);
      }
      if (x.kind == sim::TraceOpKind::kCollective) {
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
  const sim::SimSummary ref = sim::analyze(r.program, r.out.timeline);
  auto t = sim::read_trace(chrome_trace_json(r.program, r.out.timeline));
  ASSERT_TRUE(t.ok()) << t.error().message;
  const std::vector<sim::RankBreakdown> got = sim::trace_breakdown(*t);
  ASSERT_EQ(got.size(), ref.ranks.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    const sim::RankBreakdown &a = got[i], &b = ref.ranks[i];
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

std::string trace_error(const std::string& text) {
  auto r = sim::read_trace(text);
  EXPECT_FALSE(r.ok());
  return r.ok() ? "" : r.error().message;
}

const std::string kMeta =
    R"({"ph":"M","name":"stepcast","pid":0,"args":{"format":1,"world":4,"tp":1,"cp":1,"dp":4,"pp":1,"ep":1,)"
    R"("gpus_per_node":4,"order":[0,1,2,3],"step_end_us":[100.000]}})";

std::string with_event(const std::string& event) {
  return R"({"traceEvents":[)" + kMeta + "," + event + "]}";
}

TEST(ReadTrace, RejectsWhatIsNotAStepcastTraceNamingTheField) {
  EXPECT_EQ(trace_error(R"({"traceEvents":[]})"),
            "not a stepcast trace: no {\"ph\":\"M\",\"name\":\"stepcast\"} metadata event (write traces with "
            "`stepcast simulate --trace FILE`)");
  EXPECT_EQ(trace_error(R"({"model": "llama3-8b"})"), "not a stepcast trace: no \"traceEvents\" list");
  EXPECT_EQ(trace_error(R"([1, 2])"), "not a stepcast trace: expected a JSON object with \"traceEvents\", got [1,2]");
  EXPECT_EQ(trace_error(R"({"traceEvents":[)" + kMeta + ",17]}"),
            "traceEvents[1]: expected an event object, got 17");
  EXPECT_EQ(trace_error(with_event(R"({"ph":"X","name":"F mb0 L0 attn","pid":1,"tid":0,"ts":1,"dur":2,)"
                                   R"("args":{"step":"x","kind":"compute","class":"gemm"}})")),
            "traceEvents[1].args.step: expected an integer from 0 to 1000000, got \"x\"");
  EXPECT_EQ(trace_error(with_event(R"({"ph":"X","name":"F","pid":9,"tid":0,"ts":1,"dur":2,)"
                                   R"("args":{"step":0,"kind":"compute","class":"gemm"}})")),
            "traceEvents[1].pid: rank 9 is outside the trace's world (4 ranks)");
  EXPECT_EQ(trace_error(with_event(R"({"ph":"X","name":"dp.ar","pid":1,"tid":4,"ts":1,"dur":2,)"
                                   R"("args":{"step":0,"kind":"collective","bytes":4,"wait_us":0,"group":"dq",)"
                                   R"("collective":"all_reduce","group_root":0,"seq":1}})")),
            "traceEvents[1].args.group: \"dq\" is not one of \"tp\", \"cp\", \"ep\", \"dp\", \"edp\", \"pp\"");
  EXPECT_EQ(trace_error(with_event(R"({"ph":"X","name":"F","pid":1,"tid":0,"ts":1,"dur":2,)"
                                   R"("args":{"step":3,"kind":"compute","class":"gemm"}})")),
            "traceEvents[1].args.step: 3 is beyond the trace's 1 steps (step_end_us)");
  EXPECT_EQ(trace_error(with_event(R"({"ph":"X","name":"F","pid":1,"tid":0,"ts":1,)"
                                   R"("args":{"step":0,"kind":"compute","class":"gemm"}})")),
            "traceEvents[1].dur: missing");
  std::string meta2 = kMeta;
  meta2.replace(meta2.find("\"format\":1"), 10, "\"format\":2");
  EXPECT_EQ(trace_error(R"({"traceEvents":[)" + meta2 + "]}"),
            "traceEvents[0].args.format: 2 is not supported (this stepcast reads format 1)");
  std::string meta3 = kMeta;
  meta3.replace(meta3.find("\"world\":4"), 9, "\"world\":6");
  EXPECT_EQ(trace_error(R"({"traceEvents":[)" + meta3 + "]}"),
            "traceEvents[0].args.world: 6 is not tp x cp x dp x pp = 4");
  EXPECT_EQ(trace_error("{\"traceEvents\": [").rfind("not a stepcast trace: invalid JSON: ", 0), 0u);
  std::string meta4 = kMeta;
  meta4.replace(meta4.find("[100.000]"), 9, "[]");
  EXPECT_EQ(trace_error(R"({"traceEvents":[)" + meta4 + "]}"),
            "traceEvents[0].args.step_end_us: expected a list of step end times (one per step), got []");
}

TEST(ReadTrace, TellsTracesFromScenarios) {
  EXPECT_TRUE(sim::looks_like_trace(R"({"displayTimeUnit":"ns","traceEvents":[]})"));
  EXPECT_FALSE(sim::looks_like_trace(R"({"model": "llama3-8b", "plan": {}})"));
}

// --- outlier ranks -----------------------------------------------------------------------

const char* kDpPlan = R"("tp": 1, "pp": 1, "dp": 8, "microbatch": 1, "global_batch": 16)";

TEST(Outliers, SlowRankIsNamedWithItsExcessAndTheWaitItCauses) {
  // Rank 5 computes 20 % slower (slowdown x1.2 on every compute op, rounded to the
  // nanosecond). Its compute is 20 % above the median of its 8 stage peers in every step,
  // and its DP group waits for it.
  const Scenario s = tiny(kDpPlan, R"("stragglers": [{"kind": "slowdown", "ranks": [5], "factor": 1.2}])");
  const sim::Diagnosis d = diagnose(s, 4);
  ASSERT_EQ(d.outliers.size(), 1u);
  const sim::OutlierRank& o = d.outliers[0];
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
  const sim::CausedWait* dp = caused(o, GroupKind::kDp);
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
      const sim::Diagnosis d = diagnose(s, 8);
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
  const sim::Diagnosis d = diagnose(s, 8);
  EXPECT_EQ(d.outlier_list(), "2");
}

TEST(Outliers, RanksAreComparedWithinTheirPipelineStage) {
  // Two pipeline stages run different work (stage 1 adds the logits and the loss): no
  // outlier without a fault. A slowed rank of stage 1 is compared with stage 1 only.
  const char* plan = R"("tp": 1, "pp": 2, "dp": 4, "microbatch": 1, "global_batch": 8)";
  EXPECT_TRUE(diagnose(tiny(plan, R"("stragglers": [{"kind": "jitter", "cv": 0.02}])"), 4).outliers.empty());
  const sim::Diagnosis d = diagnose(tiny(plan, R"("stragglers": [{"kind": "slowdown", "ranks": [6], "factor": 1.3}])"), 4);
  ASSERT_EQ(d.outliers.size(), 1u);
  EXPECT_EQ(d.outliers[0].rank, 6);
  EXPECT_EQ(d.outliers[0].stage, 1);
  EXPECT_NEAR(d.outliers[0].compute_excess, 0.30, 1e-4);
}

TEST(Outliers, ASlowTensorParallelRankMakesItsTpGroupWait) {
  const char* plan = R"("tp": 4, "pp": 1, "dp": 2, "microbatch": 1, "global_batch": 4)";
  const sim::Diagnosis d = diagnose(tiny(plan, R"("stragglers": [{"kind": "slowdown", "ranks": [1], "factor": 1.25}])"), 3);
  ASSERT_EQ(d.outliers.size(), 1u);
  const sim::CausedWait* tp = caused(d.outliers[0], GroupKind::kTp);
  ASSERT_NE(tp, nullptr);
  EXPECT_EQ(tp->group_size, 4);
  EXPECT_GT(tp->per_peer_s, 0.0);
}

TEST(Outliers, FewerThanThreeRanksPerStageAreNotJudged) {
  // Representative mode (no fault): one rank per stage, nothing to compare with.
  const sim::Diagnosis d = diagnose(tiny(kDpPlan), 2);
  EXPECT_EQ(d.mode, "representative");
  EXPECT_EQ(d.ranks_analysed, 1);
  EXPECT_TRUE(d.outliers.empty());
  EXPECT_FALSE(d.problem());
}

// A hand-built trace: `ranks` data-parallel ranks (4 per node), each step one 100 ms
// compute op that starts `gap_ns(rank, step)` after the step starts, then a DP all-reduce
// of 10 ms that begins when the last rank arrives.
template <typename Gap>
sim::Trace hand_trace(int ranks, int steps, Gap gap_ns) {
  sim::Trace t;
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
      sim::TraceOp c;
      c.begin_ns = c.post_ns = start + gap_ns(r, k);
      c.end_ns = c.begin_ns + 100'000'000;
      c.step = k;
      sim::TraceOp a;
      a.kind = sim::TraceOpKind::kCollective;
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
  const sim::Trace t = hand_trace(8, 5, [](int r, int) { return r == 6 ? 30'000'000 : 0; });
  ASSERT_TRUE(t.complete());
  const sim::Diagnosis d = sim::diagnose_trace(t);
  ASSERT_EQ(d.outliers.size(), 1u);
  const sim::OutlierRank& o = d.outliers[0];
  EXPECT_EQ(o.rank, 6);
  EXPECT_EQ(o.compute_steps, 0);
  EXPECT_EQ(o.late_steps, 5);
  EXPECT_DOUBLE_EQ(o.lateness_s, 0.030);
  const sim::CausedWait* dp = caused(o, GroupKind::kDp);
  ASSERT_NE(dp, nullptr);
  EXPECT_DOUBLE_EQ(dp->per_peer_s, 0.030);
  EXPECT_DOUBLE_EQ(dp->summed_s, 0.210);
  EXPECT_NE(d.verdict[0].text.find("arrives late at its collectives in 5/5 steps"), std::string::npos) << d.verdict[0].text;
}

TEST(Outliers, LatenessBelowTheFloorOrInOneStepIsNotAnOutlier) {
  // 4 ms late (3.5 % of the 114 ms step, under the 5 % floor) in every step; 30 ms late in
  // one step only (under the 2-step minimum).
  EXPECT_TRUE(sim::diagnose_trace(hand_trace(8, 5, [](int r, int) { return r == 6 ? 4'000'000 : 0; })).outliers.empty());
  EXPECT_TRUE(
      sim::diagnose_trace(hand_trace(8, 5, [](int r, int k) { return r == 6 && k == 2 ? 30'000'000 : 0; })).outliers.empty());
}

TEST(Outliers, TiesForLastSplitTheWaitEvenly) {
  // Ranks 2 and 3 both arrive 20 ms late: the 6 on-time peers wait 20 ms each, 120 ms in
  // all, split evenly: 60 ms summed per late rank, 60 ms / 7 peers per peer.
  const sim::Trace t = hand_trace(8, 4, [](int r, int) { return r == 2 || r == 3 ? 20'000'000 : 0; });
  const sim::Diagnosis d = sim::diagnose_trace(t);
  ASSERT_EQ(d.outliers.size(), 2u);
  for (const sim::OutlierRank& o : d.outliers) {
    const sim::CausedWait* dp = caused(o, GroupKind::kDp);
    ASSERT_NE(dp, nullptr);
    EXPECT_DOUBLE_EQ(dp->summed_s, 0.060);
    EXPECT_DOUBLE_EQ(dp->per_peer_s, 0.060 / 7);
  }
  EXPECT_EQ(d.outlier_list(), "2,3");
}

// --- input stalls ------------------------------------------------------------------------

TEST(InputStalls, PeriodicStallOnOneHostIsNamedWithItsPeriod) {
  // Host 1 (ranks 4-7) stalls 0.2 s on steps 0, 3, 6 (every 3 steps); the input op is
  // otherwise 0 s long, so the excess is exactly 0.2 s and the mean per step 0.6 / 8.
  const Scenario s = tiny(kDpPlan, R"("stragglers": [{"kind": "input_stall", "nodes": [1], "duration_s": 0.2,
                                                      "every_steps": 3}])");
  const sim::Diagnosis d = diagnose(s, 8);
  ASSERT_EQ(d.stalls.size(), 1u);
  const sim::InputStall& st = d.stalls[0];
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
  for (const sim::Finding& f : d.verdict) {
    named = named || f.text.rfind("host 1 (ranks 4-7): input stalls 0.200 s longer than the median input time in 3/8 "
                                  "steps (steps 0, 3, 6: every 3 steps)",
                                  0) == 0;
  }
  EXPECT_TRUE(named);
}

TEST(InputStalls, AOneOffStallHasNoPeriod) {
  const Scenario s = tiny(kDpPlan, R"("stragglers": [{"kind": "input_stall", "nodes": [0], "duration_s": 0.3,
                                                      "from_step": 4, "to_step": 4}])");
  const sim::Diagnosis d = diagnose(s, 6);
  ASSERT_EQ(d.stalls.size(), 1u);
  EXPECT_EQ(d.stalls[0].stalled_steps, (std::vector<int>{4}));
  EXPECT_EQ(d.stalls[0].period, 0);
}

TEST(InputStalls, EqualInputTimeOnEveryHostIsNoStall) {
  // 50 ms of input on every host and step: slow input, but no host stands out.
  Scenario s = tiny(kDpPlan, R"("stragglers": [{"kind": "jitter", "cv": 0.02}])");
  s.workload.input_time_s = 0.05;
  const sim::Diagnosis d = diagnose(s, 6);
  EXPECT_TRUE(d.stalls.empty());
  EXPECT_TRUE(d.outliers.empty());
  EXPECT_NEAR(d.mean.input, 0.05, 1e-9);  // every rank is a stage-0 rank and reads input
}

// --- exposed communication ---------------------------------------------------------------

TEST(ExposedComm, IsTheMeanOverRanksOfTheBreakdownByKind) {
  const Scenario s = tiny(kMixedPlan, R"("stragglers": [{"kind": "jitter", "cv": 0.02}])");
  const sim::Diagnosis d = diagnose(s, 2);
  double tp = 0, pp = 0, dp = 0;
  for (const sim::RankBreakdown& b : d.ranks) {
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

// --- hangs and mismatches ----------------------------------------------------------------

TEST(Hang, ACrashIsReportedWithTheRankThatNeverArrived) {
  const Scenario s = tiny(kDpPlan, R"("crash": {"rank": 3, "step": 1, "at_op": 5})");
  const sim::Diagnosis d = diagnose(s, 3);
  EXPECT_TRUE(d.hang);
  EXPECT_TRUE(d.problem());
  EXPECT_EQ(d.hang_report.rfind("hang: the program cannot finish", 0), 0u);
  EXPECT_NE(d.hang_report.find("never arrived: 3"), std::string::npos) << d.hang_report;
  EXPECT_NE(d.hang_report.find("rank 3 (node 0): stopped before"), std::string::npos) << d.hang_report;
  ASSERT_EQ(d.verdict.size(), 1u);
  EXPECT_EQ(d.verdict[0].text,
            "the run hangs: rank 3 stopped and the others wait in collectives for rank 3, which never arrives (hang "
            "report above)");
  const std::string j = sim::diagnosis_json(d);
  EXPECT_NE(j.find("\"hang\": true"), std::string::npos);
  EXPECT_EQ(j.find("outlier_ranks"), std::string::npos);  // nothing analysed on a hang
}

TEST(Hang, AHungTraceNamesTheRankThatStoppedFirst) {
  // The trace of the same crash: step 1 never ends (step_end_us[1] = 0) and rank 3
  // completed fewer ops than its stage peers; its last op ended before everyone else's.
  const Scenario s = tiny(kDpPlan, R"("crash": {"rank": 3, "step": 1, "at_op": 5})");
  const sim::RunResult r = simulate(s, 3);
  ASSERT_TRUE(r.out.deadlock);
  auto t = sim::read_trace(chrome_trace_json(r.program, r.out.timeline));
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_FALSE(t->complete());
  EXPECT_EQ(t->first_unfinished_step(), 1);
  const sim::Diagnosis d = sim::diagnose_trace(*t);
  EXPECT_TRUE(d.hang);
  EXPECT_EQ(d.hang_report.rfind("hang: the trace ends before every rank finished step 1 (steps 0 to 2)\n  rank 3 (node 0): last op "
                                "completed at ",
                                0),
            0u)
      << d.hang_report;
  EXPECT_NE(d.hang_report.find("(stopped first)"), std::string::npos);
  EXPECT_EQ(d.verdict[0].text.rfind("the run hangs: rank 3 stopped", 0), 0u) << d.verdict[0].text;
}

TEST(Hang, ACompleteTraceIsNotAHang) {
  const sim::Trace t = hand_trace(4, 3, [](int, int) { return 0; });
  EXPECT_TRUE(t.complete());
  EXPECT_FALSE(sim::diagnose_trace(t).hang);
  sim::Trace cut = t;
  cut.step_end_ns[2] = 0;
  EXPECT_EQ(cut.first_unfinished_step(), 2);
  EXPECT_TRUE(sim::diagnose_trace(cut).hang);
}

TEST(Hang, AMismatchedCollectiveIsReported) {
  // Rank 2 passes twice the bytes to its first DP collective: the group never completes
  // it, and the engine names the mismatch.
  Scenario s = tiny(kDpPlan, R"("mismatch": {"rank": 2, "step": 0, "at_op": 0})");
  const Program p = lower(s);
  std::uint32_t first = 0;
  while (p.roles[0].ops[first].kind != OpKind::kCollective) ++first;
  s.faults.perturb.mismatch->at_op = first;
  const sim::Diagnosis d = diagnose(s, 2);
  EXPECT_TRUE(d.hang);
  ASSERT_EQ(d.mismatches.size(), 1u);
  EXPECT_NE(d.mismatches[0].find("members passed different sizes"), std::string::npos) << d.mismatches[0];
  bool named = false;
  for (const sim::Finding& f : d.verdict) named = named || f.text.rfind("collective mismatch: ", 0) == 0;
  EXPECT_TRUE(named);
  EXPECT_NE(sim::diagnosis_json(d).find("\"mismatch\": true"), std::string::npos);
}

// --- resume audit ------------------------------------------------------------------------

TEST(ResumeAudit, ACompleteCheckpointResumesExactly) {
  const sim::ResumeAudit a = sim::resume_audit(CheckpointSpec{});
  EXPECT_TRUE(a.missing.empty());
  EXPECT_TRUE(a.ok());
  EXPECT_EQ(a.missing_list(), "");
}

TEST(ResumeAudit, EachMissingPartIsNamedWithItsConsequence) {
  CheckpointSpec c;
  c.contents = {StatePart::kModel, StatePart::kOptimizer, StatePart::kGradScaler, StatePart::kStep, StatePart::kConfig};
  const sim::ResumeAudit a = sim::resume_audit(c);
  ASSERT_EQ(a.missing.size(), 3u);
  EXPECT_EQ(a.missing[0].part, StatePart::kLrScheduler);
  EXPECT_EQ(a.missing[0].consequence,
            "the learning rate restarts at the wrong position of its schedule (warm-up again, or the wrong point of the "
            "decay)");
  EXPECT_EQ(a.missing[1].part, StatePart::kRng);
  EXPECT_EQ(a.missing[1].consequence, "dropout masks and random sampling differ from the uninterrupted run");
  EXPECT_EQ(a.missing[2].part, StatePart::kDataSampler);
  EXPECT_EQ(a.missing[2].consequence,
            "the data window repeats after a restart: samples already trained on are seen again and others are skipped");
  EXPECT_EQ(a.missing_list(), "data_sampler,lr_scheduler,rng");
  EXPECT_FALSE(a.ok());
}

TEST(ResumeAudit, AMissingLossScalerMattersOnlyWithFp16) {
  CheckpointSpec c;
  c.contents = {StatePart::kModel, StatePart::kOptimizer, StatePart::kLrScheduler, StatePart::kRng,
                StatePart::kDataSampler, StatePart::kStep, StatePart::kConfig};
  const sim::ResumeAudit bf16 = sim::resume_audit(c, false);
  ASSERT_EQ(bf16.missing.size(), 1u);
  EXPECT_FALSE(bf16.missing[0].matters);
  EXPECT_TRUE(bf16.ok());
  const sim::ResumeAudit fp16 = sim::resume_audit(c, true);
  EXPECT_TRUE(fp16.missing[0].matters);
  EXPECT_EQ(fp16.missing_list(), "grad_scaler");
  EXPECT_NE(fp16.missing[0].consequence.find("early overflow skips"), std::string::npos);
}

TEST(ResumeAudit, DiagnoseReportsItForAScenarioWithACheckpoint) {
  const Scenario s = tiny(kDpPlan, "", 2, 1,
                          R"("checkpoint": {"contents": ["model", "optimizer", "lr_scheduler", "grad_scaler", "rng",
                                                          "step", "config"]},)");
  const sim::Diagnosis d = diagnose(s, 1);
  ASSERT_TRUE(d.resume.has_value());
  EXPECT_EQ(d.resume->missing_list(), "data_sampler");
  EXPECT_TRUE(d.problem());
  EXPECT_NE(sim::diagnosis_json(d).find("\"resume_missing\": \"data_sampler\""), std::string::npos);
}

// --- compare -----------------------------------------------------------------------------

sim::CompareSide side(const Scenario& s, int steps) {
  auto r = sim::compare_side(s, steps);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? std::move(r).value() : sim::CompareSide{};
}

TEST(Compare, PartsAddUpToTheStepTimeDifferenceAndStrongScalingIsNamed) {
  // The same global batch (16 sequences) on 4 and 8 GPUs: strong scaling, no warning.
  const Scenario a = tiny(R"("tp": 1, "pp": 1, "dp": 4, "microbatch": 1, "global_batch": 16)", "", 1);
  const Scenario b = tiny(R"("tp": 1, "pp": 1, "dp": 8, "microbatch": 1, "global_batch": 16)", "", 2);
  const sim::Comparison c = sim::compare(side(a, 2), side(b, 2));
  EXPECT_NEAR(c.parts_delta_s, c.step_delta_s, 1e-12);
  EXPECT_LT(c.step_delta_s, 0.0);  // half the work per GPU
  EXPECT_EQ(c.scaling_kind, "strong");
  EXPECT_TRUE(c.same_training);
  EXPECT_TRUE(c.warnings.empty());
  // Strong scaling: efficiency = (T_a x N_a) / (T_b x N_b).
  EXPECT_NEAR(c.scaling_efficiency, (c.a.step_time_s * 4) / (c.b.step_time_s * 8), 1e-12);
  EXPECT_NEAR(c.layout_delta_s, c.step_delta_s, 1e-12);  // no faults: all of it is layout
}

TEST(Compare, TheIncidentIsAttributedToLayoutRank37AndHost5) {
  // scenarios/incident: 8 GPUs -> 64 GPUs with a slow rank and a stalling host (5 steps:
  // one stall, on step 0, as in 2 of 10). The decomposition adds up both ways; the two do
  // not train the same thing (global batch 64 -> 512), which compare must say.
  auto a = load_scenario_file(STEPCAST_SOURCE_DIR "/scenarios/incident/8gpu.json");
  auto b = load_scenario_file(STEPCAST_SOURCE_DIR "/scenarios/incident/64gpu.json");
  ASSERT_TRUE(a.ok() && b.ok());
  const sim::Comparison c = sim::compare(side(*a, 5), side(*b, 5));
  EXPECT_NEAR(c.a.step_time_s, 2.14, 0.03);
  EXPECT_NEAR(c.b.step_time_s, 2.81, 0.05);
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
  EXPECT_NEAR(c.layout_delta_s, 0.24, 0.03);  // cross-node DP + the smaller microbatch
  double dp = 0;
  for (const sim::ComparePart& p : c.layout_parts) {
    if (p.name == "exposed_comm.dp") dp = p.delta_s();
  }
  EXPECT_NEAR(dp, 0.25, 0.03);
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
  const sim::Diagnosis d1 = diagnose(s, 4), d2 = diagnose(s, 4);
  EXPECT_EQ(sim::diagnosis_json(d1), sim::diagnosis_json(d2));
  EXPECT_EQ(sim::diagnosis_text(d1), sim::diagnosis_text(d2));
  // The trace text read back gives the same findings (the scenario path adds only its name,
  // mode and seed).
  const sim::RunResult r = simulate(s, 4);
  auto t = sim::read_trace(chrome_trace_json(r.program, r.out.timeline));
  ASSERT_TRUE(t.ok());
  sim::Diagnosis from_trace = sim::diagnose_trace(*t);
  from_trace.source = d1.source;
  from_trace.input = d1.input;
  from_trace.mode = d1.mode;
  from_trace.seed = d1.seed;
  EXPECT_EQ(sim::diagnosis_json(from_trace), sim::diagnosis_json(d1));
}

TEST(Determinism, CompareGivesByteIdenticalReports) {
  const Scenario a = tiny(kDpPlan, R"("stragglers": [{"kind": "jitter", "cv": 0.02}])");
  const Scenario b = tiny(kDpPlan, R"("stragglers": [{"kind": "jitter", "cv": 0.02},
                                                     {"kind": "slowdown", "ranks": [1], "factor": 1.2}])");
  const sim::Comparison c1 = sim::compare(side(a, 3), side(b, 3));
  const sim::Comparison c2 = sim::compare(side(a, 3), side(b, 3));
  EXPECT_EQ(sim::comparison_json(c1), sim::comparison_json(c2));
  EXPECT_EQ(sim::comparison_text(c1), sim::comparison_text(c2));
  // Same model, batch and GPUs: the whole difference is the slow rank's.
  EXPECT_TRUE(c1.same_training);
  ASSERT_EQ(c1.b.faults.size(), 1u);
  EXPECT_NEAR(c1.b.faults[0].alone_s, c1.b.faults_together_s, 1e-12);
  EXPECT_NEAR(c1.layout_delta_s, 0.0, 1e-12);
  EXPECT_NEAR(c1.b.faults_together_s, c1.step_delta_s, 1e-12);
}

}  // namespace
}  // namespace stepcast

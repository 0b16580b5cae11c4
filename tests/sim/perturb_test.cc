// Perturbations (faults.stragglers / crash / mismatch) as the engine applies them.
#include "stepcast/sim/perturb.h"

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <string>

#include "stepcast/models/scenario.h"
#include "stepcast/sim/run.h"

namespace {

using namespace stepcast;

// Llama-3-8B, 16 H100 on 2 nodes, TP2 DP8 (pp = 1: one role), 2 steps.
std::string scenario(const std::string& faults) {
  return R"({"model":"llama3-8b","cluster":{"preset":"dgx-h100","nodes":2},
    "plan":{"tp":2,"dp":8,"global_batch":16,"zero":1,"sequence_parallel":true},
    "workload":{"seq_len":4096},"seed":7,"faults":)" +
         faults + "}";
}

sim::RunResult run(const std::string& text, int steps = 2) {
  auto s = parse_scenario(text);
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message);
  sim::RunOptions o;
  o.steps = steps;
  auto r = sim::run_scenario(*s, o);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return *r;
}

// Sum of compute-stream span durations of `rank` (all steps): its own work, without input
// waits and interference delays (sized from the collectives, not the rank's speed).
double compute_s(const sim::RunResult& r, int rank) {
  const RankTimeline& tl = r.out.timeline.ranks[static_cast<std::size_t>(rank)];
  const RoleTemplate& role = r.program.roles[static_cast<std::size_t>(tl.stage)];
  std::int64_t ns = 0;
  for (const Span& s : tl.spans) {
    if (role.ops[s.op].stream == Stream::kCompute && role.ops[s.op].cclass != ComputeClass::kInput &&
        role.ops[s.op].cclass != ComputeClass::kInterference) {
      ns += (s.end - s.begin).ns();
    }
  }
  return static_cast<double>(ns) * 1e-9;
}

TEST(Perturb, NormalDrawsArePinnedAndStandard) {
  // Pinned: the first draws of keys 0..2 (counter-based: splitmix64 + Box-Muller). A change
  // here changes every jittered scenario's output: update only with a model change.
  EXPECT_DOUBLE_EQ(sim::normal_draw(0), 0.46642365222354237);
  EXPECT_DOUBLE_EQ(sim::normal_draw(1), 0.68318907958480346);
  EXPECT_DOUBLE_EQ(sim::normal_draw(2), -0.11456307127983389);
  // Moments over 200,000 keys: the mean's standard error is 1/sqrt(n) = 0.00224, the
  // variance's sqrt(2/n) = 0.00316; bounds at about 5 standard errors.
  double sum = 0, sum2 = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const double x = sim::normal_draw(sim::mix64(static_cast<std::uint64_t>(i)));
    sum += x;
    sum2 += x * x;
  }
  EXPECT_LT(std::abs(sum / n), 0.0112);
  EXPECT_LT(std::abs(sum2 / n - 1.0), 0.016);
}

TEST(Perturb, SlowdownMultipliesTheRanksComputeTime) {
  const sim::RunResult clean = run(scenario(R"({"stragglers":[{"kind":"jitter","cv":0.0}]})"));
  const sim::RunResult slow = run(scenario(R"({"stragglers":[{"kind":"slowdown","ranks":[5],"factor":1.5}]})"));
  ASSERT_TRUE(slow.full);
  // Every compute op of rank 5 lasts 1.5x its nominal (rounded to the ns): the sum is 1.5x
  // rank 4's, which is unperturbed, within the rounding of ~20,000 ops.
  EXPECT_NEAR(compute_s(slow, 5), 1.5 * compute_s(slow, 4), 1e-5);
  EXPECT_NEAR(compute_s(slow, 4), compute_s(clean, 4), 1e-9);
  // Its DP group waits for it: the step is at least the slow rank's compute.
  EXPECT_GT(slow.summary.step_time_s, clean.summary.step_time_s * 1.3);
}

TEST(Perturb, JitterIsSeededDeterministicAndCentred) {
  const std::string text = scenario(R"({"stragglers":[{"kind":"jitter","cv":0.05,"per":"op"}]})");
  const sim::RunResult a = run(text), b = run(text);
  EXPECT_EQ(a.summary.step_times_s, b.summary.step_times_s);
  const sim::RunResult clean = run(scenario(R"({"stragglers":[{"kind":"jitter","cv":0.0}]})"));
  // Per-op jitter of cv 5 % over thousands of ops averages out within 1 % per rank.
  EXPECT_NEAR(compute_s(a, 3) / compute_s(clean, 3), 1.0, 0.01);
  // A different seed gives a different run.
  std::string other = text;
  other.replace(other.find("\"seed\":7"), 8, "\"seed\":8");
  EXPECT_NE(run(other).summary.step_times_s, a.summary.step_times_s);
}

TEST(Perturb, InputStallsLengthenTheInputOfTheHostsStepsThatStall) {
  // Node 1 (ranks 8-15) stalls 0.25 s every 2nd step from step 0: steps 0 and 2 of 3.
  const sim::RunResult r = run(scenario(R"({"stragglers":[{"kind":"input_stall","nodes":[1],"every_steps":2,"duration_s":0.25}]})"), 3);
  const RankTimeline& tl = r.out.timeline.ranks[9];
  const RoleTemplate& role = r.program.roles[0];
  std::vector<double> input(3, 0.0);
  for (const Span& s : tl.spans) {
    if (role.ops[s.op].cclass == ComputeClass::kInput) input[s.step] += (s.end - s.begin).seconds();
  }
  EXPECT_DOUBLE_EQ(input[0], 0.25);
  EXPECT_DOUBLE_EQ(input[1], 0.0);
  EXPECT_DOUBLE_EQ(input[2], 0.25);
  // Everyone waits for the stalled host in the stalled steps.
  EXPECT_GT(r.summary.step_times_s[0], r.summary.step_times_s[1] + 0.2);
}

TEST(Perturb, SlowLinkStretchesTransfersTouchingTheNode) {
  const sim::RunResult clean = run(scenario(R"({"stragglers":[{"kind":"jitter","cv":0.0}]})"), 1);
  const sim::RunResult slow = run(scenario(R"({"stragglers":[{"kind":"slow_link","nodes":[1],"factor":0.25}]})"), 1);
  // The DP groups (8 ranks across both nodes) all touch node 1: 4x their nominal time.
  const auto& c = clean.summary.ranks[0];
  const auto& s = slow.summary.ranks[0];
  EXPECT_GT(s.dp, 3.0 * c.dp);
  EXPECT_DOUBLE_EQ(s.tp, c.tp);  // TP pairs stay inside a node; node 0's are untouched
}

TEST(Perturb, CrashStopsTheRankAndHangsItsGroups) {
  const sim::RunResult r = run(scenario(R"({"crash":{"rank":5,"at_time_s":0.05}})"), 1);
  ASSERT_TRUE(r.out.deadlock);
  EXPECT_NE(r.out.deadlock_report.find("rank 5 (node 0): stopped before"), std::string::npos) << r.out.deadlock_report;
  EXPECT_NE(r.out.deadlock_report.find("never arrived: 5"), std::string::npos) << r.out.deadlock_report;
  // 16 ranks read in a few lines.
  EXPECT_LE(std::count(r.out.deadlock_report.begin(), r.out.deadlock_report.end(), '\n'), 6);
}

TEST(Perturb, MismatchedCollectiveSizesAreReportedAndHang) {
  // Op 3 of the role is the first TP all-gather of step 0 (input, token-ids alloc, layer-0
  // activation alloc, then tp.ag): rank 1 passes twice the bytes.
  auto s = parse_scenario(scenario(R"({"mismatch":{"rank":1,"at_op":3,"bytes_factor":2}})"));
  ASSERT_TRUE(s.ok()) << s.error().message;
  sim::RunOptions o;
  auto r = sim::run_scenario(*s, o);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->program.roles[0].ops[3].kind, OpKind::kCollective);
  ASSERT_TRUE(r->out.deadlock);
  ASSERT_EQ(r->out.mismatches.size(), 1u);
  const double b = r->program.roles[0].ops[3].bytes;
  EXPECT_EQ(r->out.mismatches[0],
            fmt::format("all_gather #1 'tp.ag F mb0 L0 attn' on the tp group of rank 0 (step 0): members passed "
                        "different sizes: 0 {} bytes; 1 {} bytes",
                        b, 2 * b));
}

TEST(PerturbLoader, MessagesNameTheField) {
  auto err = [](const std::string& faults) {
    auto s = parse_scenario(scenario(faults));
    return s.ok() ? std::string("loaded") : s.error().message;
  };
  EXPECT_EQ(err(R"({"stragglers":[{"kind":"slowdwn","ranks":[1]}]})"),
            "faults.stragglers[0].kind: \"slowdwn\" is not one of \"slowdown\", \"jitter\", \"input_stall\", \"data_skew\", "
            "\"slow_link\"; did you mean \"slowdown\"?");
  EXPECT_EQ(err(R"({"stragglers":[{"kind":"slowdown","ranks":[37],"factor":1.2}]})"),
            "faults.stragglers[0].ranks[0]: rank 37 is outside the cluster (16 GPUs)");
  EXPECT_EQ(err(R"({"stragglers":[{"kind":"slowdown","factor":1.2}]})"),
            "faults.stragglers[0]: a slowdown needs \"ranks\" or \"nodes\"");
  EXPECT_EQ(err(R"({"stragglers":[{"kind":"slow_link","nodes":[0],"factor":2}]})"),
            "faults.stragglers[0].factor: 2 is out of range (0 to 1)");
  EXPECT_EQ(err(R"({"stragglers":[{"kind":"input_stall","every_steps":5,"duration_s":0.4}]})"),
            "faults.stragglers[0]: an input stall needs \"nodes\" (the hosts that stall)");
  EXPECT_EQ(err(R"({"crash":{"rank":3}})"),
            "faults.crash: give \"at_op\" (an op index of the rank's program, see the trace) or \"at_time_s\"");
  EXPECT_EQ(err(R"({"stragglers":{"kind":"jitter"}})"),
            "faults.stragglers: expected a list of objects, got {\"kind\":\"jitter\"}");
}

}  // namespace

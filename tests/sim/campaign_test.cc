// Campaign simulation (sim/campaign.h); the checkpoint advice built on it is tested in
// tests/planner/checkpoint_advice_test.cc.
// Oracles: the C++ standard's mt19937_64 check value and pinned first draws of our
// distributions (the formulas applied to those raw draws by hand); Poisson and renewal
// counts for the failure streams; hand-built timelines with exact nanosecond results for
// checkpoints, async writes and lost work; Daly's (2006) expected wall time and optimum
// interval in the exponential limit; and the simulation itself (determinism, the
// fast-forward path against step-by-step).
#include "stepcast/sim/campaign.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "stepcast/models/reliability.h"
#include "stepcast/models/scenario.h"

namespace stepcast::sim {
namespace {

SimTime sec(double s) { return SimTime::from_s(s); }

// ---------------------------------------------------------------------------------------
// Random numbers.

TEST(CampaignRandom, EngineIsTheStandardsMt19937_64) {
  // [rand.predef]: the 10000th output of a default-constructed mt19937_64.
  std::mt19937_64 g;
  g.discard(9999);
  EXPECT_EQ(g(), 9981545732273789042ULL);
}

TEST(CampaignRandom, FirstDrawsOfSeed42ArePinned) {
  // Raw draws of mt19937_64(42): 13930160852258120406, 11788048577503494824, ...
  // U = ((x >> 11) + 1) / 2^53; exponential: -1000 ln U; Weibull(k = 0.7, scale 1000):
  // 1000 (-ln U)^(1/0.7). A change of any of these changes every campaign result.
  std::mt19937_64 raw(42);
  EXPECT_EQ(raw(), 13930160852258120406ULL);
  EXPECT_EQ(raw(), 11788048577503494824ULL);
  std::mt19937_64 u(42), e(42), w(42);
  EXPECT_DOUBLE_EQ(uniform_open01(u), static_cast<double>((13930160852258120406ULL >> 11) + 1) * 0x1p-53);
  EXPECT_DOUBLE_EQ(uniform_open01(u), 0.63903139385469754);
  EXPECT_DOUBLE_EQ(exponential_draw(e, 1000), -1000 * std::log(0.75515553295453908));
  EXPECT_DOUBLE_EQ(exponential_draw(e, 1000), 447.8016961483612);
  EXPECT_DOUBLE_EQ(exponential_draw(e, 1000), 284.82588756991987);
  EXPECT_DOUBLE_EQ(weibull_draw(w, 0.7, 1000), 1000 * std::pow(0.28083154703570807, 1 / 0.7));
  EXPECT_DOUBLE_EQ(weibull_draw(w, 0.7, 1000), 317.35916799877594);
  // splitmix64-derived seeds.
  EXPECT_EQ(derive_seed(1, kCampaignPurpose, 0), 16585716482585886948ULL);
  EXPECT_EQ(campaign_seeds(1, 2), (std::vector<std::uint64_t>{16585716482585886948ULL, 4857009309031780208ULL}));
}

TEST(CampaignRandom, WeibullMatchesItsMeanAndCdf) {
  // Weibull(k = 0.7) with mean 1000: scale = 1000 / Gamma(1 + 1/0.7) = 789.9995...
  // n = 200,000 draws: the sample mean is within 4 standard errors of 1000 (sd = scale
  // sqrt(Gamma(1 + 2/k) - Gamma(1 + 1/k)^2)), and P(T <= scale) = 1 - 1/e within 4 sd.
  const double k = 0.7, scale = weibull_scale_for_mean(1000, k);
  EXPECT_NEAR(scale, 789.99954986990576, 1e-9);
  std::mt19937_64 g(7);
  const int n = 200000;
  double sum = 0;
  int below = 0;
  for (int i = 0; i < n; ++i) {
    const double x = weibull_draw(g, k, scale);
    sum += x;
    below += x <= scale;
  }
  const double sd = scale * std::sqrt(std::tgamma(1 + 2 / k) - std::pow(std::tgamma(1 + 1 / k), 2));
  EXPECT_NEAR(sum / n, 1000, 4 * sd / std::sqrt(n));
  const double p = 1 - std::exp(-1.0);
  EXPECT_NEAR(static_cast<double>(below) / n, p, 4 * std::sqrt(p * (1 - p) / n));
}

// ---------------------------------------------------------------------------------------
// Failure streams.

std::array<CauseModel, kFailureCauses> causes_of(double gpu_rate_per_h, double switch_rate_per_h,
                                                  double software_rate_per_h) {
  std::array<CauseModel, kFailureCauses> c{};
  c[0] = {16384, gpu_rate_per_h / 3600, Lifetime::kExponential, 1, sec(60), 1};
  c[3] = {1024, switch_rate_per_h / 3600, Lifetime::kExponential, 1, sec(600), 2};
  c[4] = {2048, software_rate_per_h / 3600, Lifetime::kExponential, 1, sec(120), 0};
  return c;
}

TEST(FailureStreams, CountsMatchTheConfiguredRates) {
  // The llama3-405b rates (per GPU-, switch-, node-hour) over H = 20,000 h: expected counts
  // N = units x rate x H = 4,135.6 (gpu), 540.1 (switch), 972.2 (software). A Poisson count
  // is within 4 sd = 4 sqrt(N) of N except with probability 6e-5.
  const double gpu = 1.2621467496141975e-05, sw = 2.6373215663580245e-05, soft = 2.3735894097222223e-05;
  RandomFailures f(causes_of(gpu, sw, soft), 2024);
  const SimTime horizon = sec(20000 * 3600.0);
  std::array<int, kFailureCauses> n{};
  SimTime last{};
  for (std::size_t i = 0;; ++i) {
    const Failure x = f.at(i);
    if (x.time > horizon) break;
    EXPECT_GE(x.time, last);
    last = x.time;
    ++n[static_cast<std::size_t>(x.cause)];
  }
  const double expect[] = {16384 * gpu * 20000, 0, 0, 1024 * sw * 20000, 2048 * soft * 20000};
  for (std::size_t c = 0; c < kFailureCauses; ++c) {
    EXPECT_NEAR(n[c], expect[c], 4 * std::sqrt(expect[c]) + 1e-9) << failure_cause_name(static_cast<FailureCause>(c));
  }
}

TEST(FailureStreams, WeibullUnitsRenewAtTheConfiguredMeanRate) {
  // 100 units, Weibull k = 1.5 (wear-out), mean life 100 h, over t = 10,000 h. Renewal
  // theory: E N(t) = units (t/mu + (CV^2 - 1)/2) + o(1) with CV^2 = Gamma(1+2/k) /
  // Gamma(1+1/k)^2 - 1 = 0.4610, so E N = 100 (100 - 0.2695) = 9,973; Var N ~ units t CV^2
  // / mu = 4,610 (sd 68). Bound: 4 sd.
  std::array<CauseModel, kFailureCauses> c{};
  c[0] = {100, 1.0 / (100 * 3600), Lifetime::kWeibull, 1.5, sec(60), 1};
  RandomFailures f(c, 99);
  int n = 0;
  while (f.at(static_cast<std::size_t>(n)).time <= sec(10000 * 3600.0)) ++n;
  const double cv2 = std::tgamma(1 + 2 / 1.5) / std::pow(std::tgamma(1 + 1 / 1.5), 2) - 1;
  const double expect = 100 * (100 + (cv2 - 1) / 2);
  EXPECT_NEAR(n, expect, 4 * std::sqrt(100 * 100 * cv2));
}

TEST(FailureStreams, SameSeedSameFailuresOtherSeedOthers) {
  const auto c = causes_of(1e-5, 1e-5, 1e-5);
  RandomFailures a(c, 5), b(c, 5), d(c, 6);
  for (std::size_t i = 0; i < 200; ++i) {
    EXPECT_EQ(a.at(i).time, b.at(i).time);
    EXPECT_EQ(a.at(i).cause, b.at(i).cause);
  }
  EXPECT_NE(a.at(0).time, d.at(0).time);
}

// ---------------------------------------------------------------------------------------
// Hand-built campaigns: 20 steps of 10 s, a checkpoint every 5 steps (and at the end).

CampaignModel small_job() {
  CampaignModel m;
  m.step_time = sec(10);
  m.steps_total = 20;
  m.interval_steps = 5;
  m.pause = sec(2);
  m.restore = sec(3);
  m.causes[4] = {1, 0, Lifetime::kExponential, 1, sec(5), 0};  // software: detection 5 s
  m.causes[0] = {1, 0, Lifetime::kExponential, 1, sec(5), 1};  // gpu: one node to replace
  m.causes[3] = {1, 0, Lifetime::kExponential, 1, sec(5), 2};  // switch: two nodes
  m.world = 8;
  return m;
}

SimTime parts(const CampaignRun& r) {
  return r.compute + r.checkpoint + r.detection + r.node_wait + r.restart + r.restore;
}

TEST(HandBuiltCampaign, FailureFreeSyncPausesAtEveryCheckpoint) {
  ScriptedFailures none({});
  const CampaignRun r = run_campaign(small_job(), none);
  // 200 s of steps + 4 checkpoints x 2 s.
  EXPECT_EQ(r.wall, sec(208));
  EXPECT_EQ(r.checkpoint, sec(8));
  EXPECT_EQ(r.durable_checkpoints, 4);
  EXPECT_DOUBLE_EQ(r.goodput(), 200.0 / 208.0);
}

TEST(HandBuiltCampaign, LostWorkGoesBackToTheLastSyncCheckpoint) {
  // [0,50) steps 1-5, [50,52) checkpoint 5; [52,102) steps 6-10, [102,104) checkpoint 10;
  // failure at 123 s during step 12: step 11 done (10 s) + 9 s of step 12 are lost = 19 s.
  // Down: detection 5 s, restore 3 s -> 131 s; steps 11-15 [131,181), checkpoint [181,183),
  // steps 16-20 [183,233), final checkpoint [233,235).
  ScriptedFailures one({{sec(123), FailureCause::kSoftware}});
  const CampaignRun r = run_campaign(small_job(), one);
  EXPECT_EQ(r.wall, sec(235));
  EXPECT_EQ(r.lost, sec(19));
  EXPECT_EQ(r.compute, sec(219));
  EXPECT_EQ(r.detection, sec(5));
  EXPECT_EQ(r.restore, sec(3));
  EXPECT_EQ(r.failures[4], 1);
  EXPECT_EQ(r.lost_by_cause[4], sec(19 + 5 + 3));  // lost compute + the down time it caused
  EXPECT_EQ(parts(r), r.wall);
}

TEST(HandBuiltCampaign, LostWorkGoesBackToTheLastDurableAsyncCheckpoint) {
  // Async: 1 s snapshot, then a 30 s background write. Checkpoint 5: snapshot [50,51),
  // durable at 81. Checkpoint 10: snapshot [101,102), its write would end at 132, but the
  // failure at 123 s comes first: checkpoint 10 is lost, the job falls back to step 5.
  // Ran 21 s after 102: steps 11, 12 and 1 s of 13; lost = (12 - 5) x 10 + 1 = 71 s.
  // Down 8 s -> 131. Steps 6-10 [131,181), snapshot [181,182) (durable 212), steps 11-15
  // [182,232), snapshot [232,233) (durable 263), steps 16-20 [233,283), final snapshot
  // [283,284) and its write until 314.
  CampaignModel m = small_job();
  m.pause = sec(1);
  m.background = sec(30);
  ScriptedFailures one({{sec(123), FailureCause::kSoftware}});
  const CampaignRun r = run_campaign(m, one);
  EXPECT_EQ(r.lost, sec(71));
  EXPECT_EQ(r.wall, sec(314));
  EXPECT_EQ(r.checkpoint, sec(5 * 1 + 30));
  EXPECT_EQ(parts(r), r.wall);
}

TEST(HandBuiltCampaign, AsyncWriteLongerThanTheIntervalMakesTheNextCheckpointWait) {
  // Failure-free; snapshot 1 s, write 70 s > 50 s of steps. Checkpoint 5: [50,51), write
  // until 121; checkpoint 10 at 101 waits 20 s, snapshot [121,122), write until 192;
  // likewise checkpoint 15 (waits [172,192)) and 20 (waits [243,263), snapshot, then the
  // final write until 334). Stalls: 1 + 3 x 21 + 70 = 134 s; sync with a 70 s write: 280 s.
  CampaignModel m = small_job();
  m.pause = sec(1);
  m.background = sec(70);
  ScriptedFailures none({});
  EXPECT_EQ(run_campaign(m, none).wall, sec(334));
  // Within the interval (write 30 s): only the snapshots and the final write stall:
  // 4 x 1 + 30 = 34 s.
  m.background = sec(30);
  ScriptedFailures none2({});
  EXPECT_EQ(run_campaign(m, none2).wall, sec(234));
}

TEST(HandBuiltCampaign, WithoutSparesAFailedNodeAddsItsReplacementTime) {
  // GPU failure at 123 s (as above: 19 s lost); detection 5 s; no spare: wait for the node,
  // back 100 s after detection; then restore 3 s: resume at 231 s, end at 235 + 100.
  CampaignModel m = small_job();
  m.replace_node = sec(100);
  ScriptedFailures one({{sec(123), FailureCause::kGpu}});
  const CampaignRun r = run_campaign(m, one);
  EXPECT_EQ(r.node_wait, sec(100));
  EXPECT_EQ(r.wall, sec(335));
  // With one spare the job takes it at once.
  m.spare_nodes = 1;
  ScriptedFailures again({{sec(123), FailureCause::kGpu}});
  EXPECT_EQ(run_campaign(m, again).wall, sec(235));
}

TEST(HandBuiltCampaign, ASwitchFailureNeedsAllItsNodes) {
  // A switch takes 2 nodes; one spare covers one, the other is waited for (100 s).
  CampaignModel m = small_job();
  m.replace_node = sec(100);
  m.spare_nodes = 1;
  ScriptedFailures one({{sec(123), FailureCause::kSwitch}});
  const CampaignRun r = run_campaign(m, one);
  EXPECT_EQ(r.node_wait, sec(100));
  EXPECT_EQ(r.wall, sec(335));
}

TEST(HandBuiltCampaign, AFailureDuringTheRestartStartsItAgain) {
  // Failure at 123 s; a second one at 126 s, during the 5 s detection: 3 s of detection
  // spent, then detection 5 s + restore 3 s from 126 -> resume at 134 (3 s later than with
  // one failure): wall 238 s.
  ScriptedFailures two({{sec(123), FailureCause::kSoftware}, {sec(126), FailureCause::kSoftware}});
  const CampaignRun r = run_campaign(small_job(), two);
  EXPECT_EQ(r.wall, sec(238));
  EXPECT_EQ(r.detection, sec(8));
  EXPECT_EQ(r.failures[4], 2);
  EXPECT_EQ(parts(r), r.wall);
}

// ---------------------------------------------------------------------------------------
// Random campaigns: invariants and agreement with Daly.

// A job of T_s = 1,000 h (360,000 steps of 10 s) with one exponential failure cause of
// job MTBF M = 1 h, no node replacement; R = detection 60 s + init 60 s = 120 s.
CampaignModel daly_job(SimTime pause, SimTime background = SimTime{}) {
  CampaignModel m;
  m.step_time = sec(10);
  m.steps_total = 360000;
  m.pause = pause;
  m.background = background;
  m.init = sec(60);
  m.causes[4] = {1000, 1.0 / (1000 * 3600.0), Lifetime::kExponential, 1, sec(60), 0};
  m.world = 1;
  return m;
}

TEST(RandomCampaign, BreakdownSumsToTheWallTimeAndFastForwardChangesNothing) {
  for (const SimTime bg : {SimTime{}, sec(20), sec(900)}) {  // sync; async within / beyond the interval
    CampaignModel m = daly_job(sec(30), bg);
    m.steps_total = 20000;
    m.interval_steps = 45;
    m.causes[0] = {64, 1.0 / (64 * 7200.0), Lifetime::kWeibull, 0.8, sec(30), 1};
    m.spare_nodes = 1;
    m.replace_node = sec(4 * 3600.0);
    for (std::uint64_t seed : {1, 2, 3}) {
      RandomFailures f1(m.causes, seed), f2(m.causes, seed);
      const CampaignRun fast = run_campaign(m, f1);
      CampaignModel slow_model = m;
      slow_model.fast_forward = false;
      const CampaignRun slow = run_campaign(slow_model, f2);
      EXPECT_EQ(parts(fast), fast.wall);
      EXPECT_EQ(fast.productive, sec(200000));
      EXPECT_EQ(fast.lost, fast.compute - fast.productive);
      EXPECT_EQ(fast.wall, slow.wall);
      EXPECT_EQ(fast.compute, slow.compute);
      EXPECT_EQ(fast.checkpoint, slow.checkpoint);
      EXPECT_EQ(fast.node_wait, slow.node_wait);
      EXPECT_EQ(fast.failures, slow.failures);
      EXPECT_EQ(fast.lost_by_cause, slow.lost_by_cause);
      EXPECT_EQ(fast.durable_checkpoints, slow.durable_checkpoints);
      EXPECT_GT(fast.failures[0] + fast.failures[4], 0);
    }
  }
}

TEST(RandomCampaign, ExpectedWallTimeMatchesDalysModelWithin2Percent) {
  // Daly: T_w = M e^{R/M} (e^{(tau+delta)/M} - 1) T_s / tau with M = 3600 s, R = 120 s,
  // delta = 30 s. At tau = 450 s: 1,000 h x 1.0339 x 8 x 0.14263 = 1,179.7 h. One run's
  // wall time has sd ~ 3.7 h (1,180 failures, each losing R + U(0, 480 s)); 16 runs put the
  // mean within 0.1 %. A simulation that did not roll back to the last checkpoint would be
  // about (tau + delta) / 2M = 6.7 % low, one without the restart R about R/M = 3.3 % low.
  // (Failures during restarts, Daly's e^{R/M}, weigh only R^2 / 2M^2 = 0.06 % here: the
  // hand-built AFailureDuringTheRestartStartsItAgain checks them.)
  const CampaignModel m = daly_job(sec(30));
  for (std::int64_t k : {20, 45, 90}) {
    const auto s = sweep_campaigns(m, {k}, campaign_seeds(11, 16)).front();
    const double daly = daly_wall_time_s(3.6e6, 10.0 * k, 30, 120, 3600);
    EXPECT_NEAR(s.wall_s.mean / daly, 1.0, 0.02) << "interval " << k << " steps";
    EXPECT_EQ(s.unfinished, 0);
  }
}

TEST(RandomCampaign, AsyncHelpsWhenItsWriteEndsBeforeTheNextCheckpoint) {
  // Same job and seeds; sync pauses 30 s. Async pausing 1 s whose 29 s write ends within
  // the 450 s interval gives a higher goodput; async whose write (900 s) outlasts the
  // interval stalls each checkpoint for the rest of the write and loses more work per
  // failure: lower goodput than sync. (Async that does not fit in host memory is sync:
  // checkpoint_cost gives the same pause and no background write, CheckpointCost tests.)
  const auto seeds = campaign_seeds(3, 8);
  const double sync = sweep_campaigns(daly_job(sec(30)), {45}, seeds).front().goodput.mean;
  const double fast = sweep_campaigns(daly_job(sec(1), sec(29)), {45}, seeds).front().goodput.mean;
  const double slow = sweep_campaigns(daly_job(sec(1), sec(900)), {45}, seeds).front().goodput.mean;
  EXPECT_GT(fast, sync + 0.03);  // about 6 % less checkpoint stall
  EXPECT_LT(slow, sync);
}

TEST(RandomCampaign, SameSeedsGiveIdenticalSummaries) {
  const CampaignModel m = daly_job(sec(30));
  CampaignModel shorter = m;
  shorter.steps_total = 36000;
  const auto a = sweep_campaigns(shorter, {30, 45}, campaign_seeds(9, 4));
  const auto b = sweep_campaigns(shorter, {30, 45}, campaign_seeds(9, 4));
  const auto c = sweep_campaigns(shorter, {30, 45}, campaign_seeds(10, 4));
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].wall_s.mean, b[i].wall_s.mean);
    EXPECT_EQ(a[i].wall_s.p10, b[i].wall_s.p10);
    EXPECT_EQ(a[i].goodput.p90, b[i].goodput.p90);
    EXPECT_EQ(a[i].lost_s, b[i].lost_s);
    EXPECT_EQ(a[i].failures, b[i].failures);
    EXPECT_NE(a[i].wall_s.mean, c[i].wall_s.mean);
  }
}

TEST(RandomCampaign, PercentilesInterpolateBetweenOrderStatistics) {
  // 1..10: mean 5.5; p10 at rank 0.9 -> 1.9; median 5.5; p90 at rank 8.1 -> 9.1.
  const Stats s = stats_of({10, 9, 8, 7, 6, 5, 4, 3, 2, 1});
  EXPECT_DOUBLE_EQ(s.mean, 5.5);
  EXPECT_DOUBLE_EQ(s.p10, 1.9);
  EXPECT_DOUBLE_EQ(s.p50, 5.5);
  EXPECT_DOUBLE_EQ(s.p90, 9.1);
}

}  // namespace
}  // namespace stepcast::sim

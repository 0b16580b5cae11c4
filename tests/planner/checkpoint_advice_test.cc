// Checkpoint advice (planner/checkpoint_advice.h) and its reports (checkpoint_report.h).
// Oracles: Daly's (2006) optimum interval and expected wall time (the Monte Carlo within
// 5 % and 2 %), hand calculations of Daly's formula, and the planner's goodput model
// (goodput.h) on the same failure environment.
#include "stepcast/planner/checkpoint_advice.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "stepcast/models/reliability.h"
#include "stepcast/models/scenario.h"
#include "stepcast/planner/checkpoint_report.h"
#include "stepcast/planner/goodput.h"

namespace stepcast::planner {
namespace {

// ---------------------------------------------------------------------------------------
// Advice on a scenario: the simulated optimum against Daly's interval.

Scenario daly_scenario() {
  // Llama-3-8B on 2 nodes (ZeRO-1): a checkpoint is 112.42 GB (CheckpointCost tests); at
  // 4 GB/s the synchronous pause is delta = 28.1 s. Software failures only, 0.5 per
  // node-hour on 2 nodes: M = 1 h, no node replacement. R = 60 + 60 s + restore 0.41 s.
  // With 10 s steps, 360,000 steps = T_s = 1,000 h (94.37e9 tokens of 262,144 per step).
  auto r = parse_scenario(R"({"format": 1, "model": "llama3-8b",
      "cluster": {"preset": "dgx-h100", "nodes": 2, "storage": {"write_GBps": 4, "read_GBps": 1000}},
      "plan": {"tp": 1, "pp": 1, "dp": 16, "zero": 1, "global_batch": 64},
      "workload": {"seq_len": 4096, "train_tokens": 94371840000},
      "faults": {"failures": {"software": {"rate_per_node_h": 0.5}, "detection_s": 60,
                              "reschedule_s": 0, "init_s": 60}},
      "seed": 5})");
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? *r : Scenario{};
}

// ---------------------------------------------------------------------------------------
// The time-to-train band: the failures' spread and the step time's, added in log space.

TEST(TimeToTrainBand, AddsTheFailuresAndTheStepTimesSpreadsInLogSpace) {
  sim::Stats wall;
  wall.mean = 100;
  wall.p10 = 90;
  wall.p90 = 110;
  // By hand (natural logs): the failures' centre (ln 90 + ln 110) / 2 = 4.600145, half-width
  // ln(110 / 90) / 2 = 0.100335; the step's band [8, 12.5] around 10: centre
  // (ln 8 + ln 12.5) / 2 - ln 10 = 0, half-width ln(12.5 / 8) / 2 = 0.223144. Together:
  // half-width sqrt(0.100335^2 + 0.223144^2) = 0.244664, so p10 = e^(4.600145 - 0.244664) =
  // 77.9043 and p90 = e^(4.600145 + 0.244664) = 127.0789.
  const Band b = time_to_train_band(wall, 10.0, Band{8.0, 12.5});
  EXPECT_NEAR(b.p10, 77.9043, 1e-3);
  EXPECT_NEAR(b.p90, 127.0789, 1e-3);
  // Without failures' spread it is the step band as a ratio of the wall time (the planner's
  // rule, planner/report.cc): [100 x 8/10, 100 x 12.5/10].
  wall.p10 = wall.p90 = 100;
  const Band only_step = time_to_train_band(wall, 10.0, Band{8.0, 12.5});
  EXPECT_NEAR(only_step.p10, 80.0, 1e-9);
  EXPECT_NEAR(only_step.p90, 125.0, 1e-9);
  // A step known exactly leaves the failures' p10-p90.
  wall.p10 = 90;
  wall.p90 = 110;
  const Band only_failures = time_to_train_band(wall, 10.0, Band{10.0, 10.0});
  EXPECT_NEAR(only_failures.p10, 90.0, 1e-9);
  EXPECT_NEAR(only_failures.p90, 110.0, 1e-9);
  // A band off-centre (validation bias) moves the whole band by its factor: [9, 12] has
  // centre ln(sqrt(108) / 10) = 0.038480.
  const Band biased = time_to_train_band(wall, 10.0, Band{9.0, 12.0});
  const double h = std::hypot(0.5 * std::log(110.0 / 90.0), 0.5 * std::log(12.0 / 9.0));
  EXPECT_NEAR(biased.p10, std::sqrt(9900.0) * std::sqrt(108.0) / 10 * std::exp(-h), 1e-9);
  EXPECT_NEAR(biased.p90, std::sqrt(9900.0) * std::sqrt(108.0) / 10 * std::exp(h), 1e-9);
}

TEST(CheckpointAdvice, ReportsCarryTheTimeToTrainBandOnlyWithAStepBand) {
  const Scenario s = daly_scenario();
  auto plain = advise_checkpoint(s, 10.0, AdviceOptions{2, std::nullopt});
  ASSERT_TRUE(plain.ok()) << plain.error().message;
  const auto pj = nlohmann::json::parse(checkpoint_json(*plain, s));
  EXPECT_FALSE(pj.contains("step_time_band_s"));
  EXPECT_FALSE(pj.contains("time_to_train_band_h"));
  auto banded = advise_checkpoint(s, 10.0, AdviceOptions{2, Band{9.0, 12.0}});
  ASSERT_TRUE(banded.ok()) << banded.error().message;
  const auto j = nlohmann::json::parse(checkpoint_json(*banded, s));
  EXPECT_EQ(j.at("step_time_band_s").at("p10").get<double>(), 9.0);
  EXPECT_EQ(j.at("step_time_band_s").at("p90").get<double>(), 12.0);
  // The recommended interval's band, from its simulated wall-time percentiles.
  const Band want = time_to_train_band(banded->recommended.sim.wall_s, 10.0, Band{9.0, 12.0});
  EXPECT_DOUBLE_EQ(j.at("time_to_train_band_h").at("p10").get<double>(), want.p10 / 3600);
  EXPECT_DOUBLE_EQ(j.at("time_to_train_band_h").at("p90").get<double>(), want.p90 / 3600);
  EXPECT_EQ(j.at("recommendation").at("time_to_train_band_h"), j.at("time_to_train_band_h"));
  // The advice itself does not move: the band is reported, not used.
  EXPECT_EQ(j.at("goodput"), pj.at("goodput"));
  EXPECT_EQ(j.at("time_to_train_h"), pj.at("time_to_train_h"));
  EXPECT_LT(j.at("time_to_train_band_h").at("p10").get<double>(), j.at("time_to_train_h").get<double>());
  EXPECT_GT(j.at("time_to_train_band_h").at("p90").get<double>(), j.at("time_to_train_h").get<double>());
  const std::string text = checkpoint_text(*banded, s);
  EXPECT_NE(text.find("the simulated step's p10-p90 9.0000 - 12.0000 s"), std::string::npos) << text;
  EXPECT_NE(text.find("time to train with the step time's band as well: p10 "), std::string::npos) << text;
}

TEST(CheckpointAdvice, SimulatedOptimumIsWithin5PercentOfDalysInterval) {
  const Scenario s = daly_scenario();
  auto a = advise_checkpoint(s, 10.0, AdviceOptions{64, std::nullopt});
  ASSERT_TRUE(a.ok()) << a.error().message;
  EXPECT_EQ(a->steps_total, 360000);
  EXPECT_NEAR(a->env.mtbf_s, 3600, 1e-9);
  EXPECT_NEAR(a->sync.pause_s, 112'424'052'744.0 / 4e9, 1e-9);
  // Daly eq. 37 with delta = 28.106 s, M = 3600 s: 431.6 s.
  EXPECT_NEAR(a->sync.daly_s, 431.6, 0.5);
  EXPECT_NEAR(a->sync.optimum_s / a->sync.daly_s, 1.0, 0.05)
      << "optimum " << a->sync.optimum_s << " s, Daly " << a->sync.daly_s << " s";
  // Every sweep point (tau from 110 s to 1,730 s) within 2 % of Daly's T_w.
  for (const IntervalResult& r : a->sync.sweep) {
    EXPECT_NEAR(r.sim.wall_s.mean / r.daly_wall_s, 1.0, 0.02) << r.sim.interval_steps << " steps";
  }
  // Async (0.88 s snapshot) wins: its pause is 32 x shorter.
  EXPECT_EQ(a->mode, CheckpointMode::kAsync);
  EXPECT_GT(a->recommended.sim.goodput.mean, a->sync.at(a->sync.optimum_steps).sim.goodput.mean);
}

TEST(CheckpointAdvice, AsyncIsNotRecommendedWhenItsStagingDoesNotFit) {
  Scenario s = daly_scenario();
  s.cluster.host_memory_GiB = 128;  // staging needs 164.5 GiB per node
  auto a = advise_checkpoint(s, 10.0, AdviceOptions{4, std::nullopt});
  ASSERT_TRUE(a.ok()) << a.error().message;
  EXPECT_FALSE(a->async.feasible);
  EXPECT_EQ(a->mode, CheckpointMode::kSync);
  EXPECT_EQ(a->reason,
            "sync: an asynchronous snapshot needs 164.5 GiB of pinned host memory per node, more than the "
            "node's 128.0 GiB");
}

TEST(CheckpointAdvice, MissingInputsNameTheirField) {
  Scenario s = daly_scenario();
  s.workload.train_tokens = 0;
  auto a = advise_checkpoint(s, 10.0, AdviceOptions{1, std::nullopt});
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.error().message, "workload.train_tokens: required: the tokens of the whole training run, e.g. 15e12");
  s.faults.failures.reset();
  a = advise_checkpoint(s, 10.0, AdviceOptions{1, std::nullopt});
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.error().message,
            "faults.failures: required: the failure model, e.g. \"faults\": {\"failures\": \"llama3-405b\"} "
            "(stepcast presets lists them)");
}

TEST(CheckpointAdvice, AJobThatCannotFinishIsRefused) {
  Scenario s = daly_scenario();
  s.faults.failures->component(FailureCause::kSoftware).rate_per_unit_h = 100;  // M = 18 s
  auto a = advise_checkpoint(s, 10.0, AdviceOptions{1, std::nullopt});
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.error().message.rfind("faults.failures: the job cannot finish: a failure every 0.005 h on average "
                                    "against a restart of 120 s",
                                    0),
            0u)
      << a.error().message;
}

// ---------------------------------------------------------------------------------------
// One Daly formula and one failure environment for the advice and the planner.

TEST(OneDalyFormula, HandCalculatedValue) {
  // tau = 1 s, delta = 0.1 s, R = 0.2 s, M = 10 s:
  // segment = M e^{R/M} (e^{(tau+delta)/M} - 1) = 10 x e^0.02 x (e^0.11 - 1)
  //         = 10 x 1.0202013400 x 0.1162780704 = 1.1862704330
  // goodput = tau / segment = 0.8429781036; T_w for T_s = 100 s: 118.62704330 s.
  EXPECT_NEAR(daly_segment_wall_s(1, 0.1, 0.2, 10), 1.1862704330, 1e-9);
  EXPECT_NEAR(daly_goodput(1, 0.1, 0.2, 10), 0.8429781036, 1e-9);
  EXPECT_NEAR(daly_wall_time_s(100, 1, 0.1, 0.2, 10), 118.62704330, 1e-7);
}

TEST(OneDalyFormula, AdviceAndPlannerGoodputAgreeOnTheSameInterval) {
  // The advice's Daly wall time at each sweep interval and the planner's goodput for the
  // same layout, pause and restart are the one function: T_s / T_w == daly_goodput.
  const Scenario s = daly_scenario();
  auto a = advise_checkpoint(s, 10.0, AdviceOptions{2, std::nullopt});
  ASSERT_TRUE(a.ok()) << a.error().message;
  const FailureEnv env = failure_env(*s.faults.failures, s.cluster);
  EXPECT_EQ(a->env.mtbf_s, env.mtbf_s);
  EXPECT_EQ(a->env.restart_s, env.restart_s);
  EXPECT_EQ(a->restart_s, env.restart_s + a->sync_cost.restore_s);
  // M = 1 h (0.5 /node-h x 2 nodes); R = 60 + 0 + 60 s without the restore.
  EXPECT_DOUBLE_EQ(env.mtbf_s, 3600);
  EXPECT_DOUBLE_EQ(env.restart_s, 120);
  for (const IntervalResult& r : a->sync.sweep) {
    EXPECT_EQ(r.daly_wall_s,
              daly_wall_time_s(a->solve_s, r.sim.interval_s, a->sync.pause_s, a->restart_s, env.mtbf_s));
    EXPECT_NEAR(a->solve_s / r.daly_wall_s,
                daly_goodput(r.sim.interval_s, a->sync.pause_s, a->restart_s, env.mtbf_s), 1e-12);
  }
  // The planner, asked for the scenario's sync checkpoints every Daly-interval steps, reports
  // daly_goodput at that interval with the same R (restart + restore).
  Scenario sync = s;
  sync.checkpoint = CheckpointSpec{};
  sync.checkpoint->interval_steps = a->sync.daly_steps;
  const Goodput g = layout_goodput(sync, s.cluster, s.plan, 10.0, a->steps_total, env);
  EXPECT_EQ(g.mode, CheckpointMode::kSync);
  EXPECT_EQ(g.restart_s, a->restart_s);
  EXPECT_EQ(g.pause_s, a->sync.pause_s);
  EXPECT_EQ(g.goodput, daly_goodput(g.interval_s, g.pause_s, g.restart_s, env.mtbf_s));
  EXPECT_NEAR(g.goodput, a->solve_s / a->sync.at(a->sync.daly_steps).daly_wall_s, 1e-12);
}

// ---------------------------------------------------------------------------------------
// Reports.

TEST(CheckpointReport, StoreRatesKeepTheirSignificantDigits) {
  // Storage written at 0.5 GB/s and read at 2.5 GB/s: the report used to print "0 GB/s"
  // and "2 GB/s" (whole GB/s); rates from 100 GB/s up stay whole.
  Scenario s = daly_scenario();
  s.cluster.storage_write_GBps = 0.5;
  s.cluster.storage_read_GBps = 2.5;
  s.checkpoint = CheckpointSpec{};
  s.checkpoint->d2h_GBps = 12.25;
  s.checkpoint->write_GBps.reset();
  s.checkpoint->read_GBps.reset();
  auto a = advise_checkpoint(s, 10.0, AdviceOptions{1, std::nullopt});
  ASSERT_TRUE(a.ok()) << a.error().message;
  const std::string text = checkpoint_text(*a, s);
  EXPECT_NE(text.find("(bound: storage; storage 0.5 GB/s, busiest node"), std::string::npos) << text;
  EXPECT_NE(text.find("(read 2.5 GB/s; +"), std::string::npos) << text;
  EXPECT_NE(text.find(" per GPU at 12.2 GB/s; staging"), std::string::npos) << text;
  s.cluster.storage_read_GBps = 1000;
  a = advise_checkpoint(s, 10.0, AdviceOptions{1, std::nullopt});
  ASSERT_TRUE(a.ok()) << a.error().message;
  EXPECT_NE(checkpoint_text(*a, s).find("(read 1000 GB/s; +"), std::string::npos);
}

TEST(CheckpointReport, CheckFieldsAreThoseOfThePolicy) {
  const Scenario s = daly_scenario();
  auto a = advise_checkpoint(s, 10.0, AdviceOptions{2, std::nullopt});
  ASSERT_TRUE(a.ok()) << a.error().message;
  const CheckpointCheckFields f = checkpoint_check_fields(*a);
  // No interval in the scenario: the recommendation's.
  EXPECT_EQ(f.checkpoint_mode, a->mode);
  EXPECT_EQ(f.checkpoint_interval_steps, a->interval_steps);
  EXPECT_EQ(f.goodput, a->recommended.sim.goodput.mean);
  EXPECT_DOUBLE_EQ(f.job_mtbf_h, 1.0);
  const std::string j = checkpoint_check_fields_json(f);
  EXPECT_EQ(j.rfind("{\"goodput\":", 0), 0u) << j;
  const std::string mode = a->mode == CheckpointMode::kAsync ? "async" : "sync";
  EXPECT_NE(j.find("\"checkpoint_mode\":\"" + mode + "\""), std::string::npos) << j;
}

TEST(CheckpointAdvice, AFailureModelWithoutFailuresIsAnInputError) {
  Scenario s = daly_scenario();
  s.faults.failures->component(FailureCause::kSoftware).rate_per_unit_h = 0;
  auto a = advise_checkpoint(s, 10.0, AdviceOptions{1, std::nullopt});
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.error().message,
            "faults.failures: every failure rate is 0 on this cluster: there is no failure to checkpoint against");
}

}  // namespace
}  // namespace stepcast::planner

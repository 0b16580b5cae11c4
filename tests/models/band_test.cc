// Prediction bands (band.h): the band of a step by hand from the error model's two inputs,
// rate bands as the inverse of time bands, the tie rule, and the reports carrying them.
#include <gtest/gtest.h>

#include <cmath>

#include <nlohmann/json.hpp>

#include "stepcast/models/band.h"
#include "stepcast/models/estimate.h"
#include "stepcast/models/layer_cost.h"
#include "stepcast/models/names.h"
#include "stepcast/models/presets.h"
#include "stepcast/models/report.h"
#include "stepcast/models/scenario.h"

namespace stepcast {
namespace {

TEST(Band, StepBandByHand) {
  // 8 s compute, 1.5 s exposed communication, 0.5 s bubble: shares 0.8, 0.15, 0.05.
  // model variance = (0.8 x 0.10)^2 + (0.15 x 0.25)^2 + (0.05 x 0.10)^2
  //                = 0.0064 + 0.00140625 + 0.000025 = 0.00783125,
  // sigma = sqrt(0.00783125 + sd^2); band = 10 s x exp(mean -/+ 1.2815516 sigma).
  const PartUncertainty& u = part_uncertainty();
  ASSERT_EQ(u.compute, 0.10);
  ASSERT_EQ(u.exposed_comm, 0.25);
  ASSERT_EQ(u.bubble, 0.10);
  const ValidationResiduals& v = validation_residuals();
  const double sigma = std::sqrt(0.00783125 + v.sd_log * v.sd_log);
  const Band b = step_time_band(StepParts{8.0, 1.5, 0.5, 0, 0, 0, 0}, v);
  EXPECT_NEAR(b.p10, 10.0 * std::exp(v.mean_log - 1.2815516 * sigma), 1e-6);
  EXPECT_NEAR(b.p90, 10.0 * std::exp(v.mean_log + 1.2815516 * sigma), 1e-6);
  EXPECT_LT(b.p10, b.p90);
  // The input time is the scenario's: it adds to the step, not to the uncertainty.
  const Band with_input = step_time_band(StepParts{8.0, 1.5, 0.5, 0, 0, 10.0, 0}, v);
  const double sigma_in = std::sqrt(0.00783125 / 4 + v.sd_log * v.sd_log);  // shares halve
  EXPECT_NEAR(with_input.p90, 20.0 * std::exp(v.mean_log + 1.2815516 * sigma_in), 1e-6);
  EXPECT_EQ(step_time_band(StepParts{}, v).p90, 0.0);
}

TEST(Band, AStackWithFewRecordsUsesThePooledResiduals) {
  // Hand-made residuals: a stack with no bias and a small spread narrows the band around
  // the point; the pooled (optimistic) ones move it up.
  const ValidationResiduals own{12, 0.0, 0.05};
  const Band b = step_time_band(StepParts{10.0, 0, 0, 0, 0, 0, 0}, own);
  const double sigma = std::sqrt(0.10 * 0.10 + 0.05 * 0.05);  // compute share 1
  EXPECT_NEAR(b.p10, 10.0 * std::exp(-1.2815516 * sigma), 1e-6);
  EXPECT_NEAR(b.p90, 10.0 * std::exp(1.2815516 * sigma), 1e-6);
  for (Stack st : {Stack::kMegatronCore, Stack::kFsdp2Eager, Stack::kFsdp2Compile, Stack::kDeepspeedZero}) {
    const ValidationResiduals& used = validation_residuals(st);
    if (stack_validation_residuals(st).records < kMinStackRecords) {
      EXPECT_EQ(&used, &validation_residuals()) << to_string(st);
    } else {
      EXPECT_EQ(&used, &stack_validation_residuals(st)) << to_string(st);
    }
  }
}

TEST(Band, RateBandIsTheInverseOfTheTimeBand) {
  const Band t{9.0, 12.0};
  const Band r = rate_band(t, 10.0, 1000.0);  // 1000 tokens/s at 10 s
  EXPECT_DOUBLE_EQ(r.p10, 1000.0 * 10.0 / 12.0);
  EXPECT_DOUBLE_EQ(r.p90, 1000.0 * 10.0 / 9.0);
}

TEST(Band, TiesDependOnHowDifferentlyTheStepsAreMadeUp) {
  // Same make-up: the shared errors cancel, nothing separates them; any difference ranks.
  const StepParts same{8, 2, 0, 0, 0, 0, 0};
  EXPECT_FALSE(ties(10.0, same, 10.01, same));
  EXPECT_TRUE(ties(10.0, same, 10.0, same));
  // Exposed communication 20% of one step and 5% of the other (compute 80% and 95%):
  // sigma_d^2 = (0.10 x (0.80 - 0.95))^2 + (0.25 x (0.20 - 0.05))^2 = 0.000225 + 0.00140625,
  // sigma_d = 0.040389, z90 sigma_d = 0.051760: a 5% difference (log 1.05 = 0.04879) ties,
  // 5.5% (0.05354) does not.
  const StepParts a{8, 2, 0, 0, 0, 0, 0}, b{9.5, 0.5, 0, 0, 0, 0, 0};
  EXPECT_TRUE(ties(10.0, a, 10.5, b));
  EXPECT_FALSE(ties(10.0, a, 10.55, b));
  EXPECT_TRUE(ties(10.5, b, 10.0, a));  // symmetric
  // The threshold itself (what `compare` prints): z90 sigma_d = 0.051760; none for one make-up.
  EXPECT_NEAR(tie_log_threshold(a, b), 1.2815516 * std::sqrt(0.000225 + 0.00140625), 1e-6);
  EXPECT_NEAR(tie_log_threshold(a, b), 0.051760, 1e-6);
  EXPECT_DOUBLE_EQ(tie_log_threshold(b, a), tie_log_threshold(a, b));
  EXPECT_EQ(tie_log_threshold(same, same), 0.0);
  EXPECT_EQ(tie_log_threshold(StepParts{}, a), 0.0);
}

TEST(Band, MoeBlocksWidenTheBandByTheirShare) {
  // 8 s compute and 2 s exposed communication, of which 5 s are MoE blocks (an attribution:
  // the step is still 10 s). model variance = (0.8 x 0.10)^2 + (0.2 x 0.25)^2 + (0.5 x 0.50)^2
  // = 0.0064 + 0.0025 + 0.0625 = 0.0714; with sd 0.05: sigma = sqrt(0.0739) = 0.271846.
  ASSERT_EQ(part_uncertainty().moe, 0.50);
  const ValidationResiduals v{12, 0.0, 0.05};
  StepParts moe{8, 2, 0, 0, 0, 0, 0, 0};
  moe.moe = 5;
  EXPECT_DOUBLE_EQ(moe.total(), 10.0);
  const Band b = step_time_band(moe, v);
  EXPECT_NEAR(b.p10, 10.0 * std::exp(-1.2815516 * 0.271846), 1e-4);
  EXPECT_NEAR(b.p90, 10.0 * std::exp(1.2815516 * 0.271846), 1e-4);  // 14.17 s
  // Without MoE blocks the same parts give the dense band: sqrt(0.0089 + 0.0025) = 0.106771.
  const Band dense = step_time_band(StepParts{8, 2, 0, 0, 0, 0, 0, 0}, v);
  EXPECT_NEAR(dense.p90, 10.0 * std::exp(1.2815516 * 0.106771), 1e-4);
  // Two layouts alike but for their MoE share (5 s and 1 s of 10): sigma_d = 0.5 x 0.4 = 0.2,
  // z90 sigma_d = 0.2563: 25 % apart (log 1.25 = 0.2231) ties, 30 % (0.2624) does not.
  StepParts less = moe;
  less.moe = 1;
  EXPECT_TRUE(ties(10.0, moe, 12.5, less));
  EXPECT_FALSE(ties(10.0, moe, 13.0, less));
}

// The MoE blocks of an estimate: its MoE layers' MLP blocks forward and backward, their host
// stall and the exposed all-to-alls, summed by hand from the layer costs on one stage.
TEST(Band, AnEstimatesMoeBlocksAreItsMoeLayersBlocksAndExposedAllToAlls) {
  auto loaded = load_scenario_file(std::string(STEPCAST_SOURCE_DIR) + "/scenarios/qwen3-30b-a3b-ep8-16xh100.json");
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  Scenario s = *loaded;
  s.plan.pp = 1;
  s.plan.virtual_stages = 1;
  s.plan.schedule = Schedule::kOneFOneB;
  s.plan.dp = 16;
  const Estimate e = estimate(s);
  const LayerCost lc = layer_cost(s.model, s.cluster, s.plan, s.workload.seq_len, true);
  const LayerComm cm = layer_comm(s.model, s.cluster, s.plan, s.workload.seq_len, true, lc);
  const double stall = host_stall(s.model, s.plan, lc, cm, true).total_s();
  const double mb = 512.0 / (16 * 2);  // global batch / (dp x microbatch)
  const double blocks = mb * 48 * (lc.mlp_fwd_s() + lc.mlp_bwd_s() + stall);
  EXPECT_GT(e.exposed.ep, 0.0);
  EXPECT_NEAR(e.breakdown.moe, blocks + e.exposed.ep, 1e-9 * e.step_time_s);
  EXPECT_LT(e.breakdown.moe, e.step_time_s);
  // The reports carry it: JSON moe_blocks_s, a text line under the step's parts.
  const auto j = nlohmann::json::parse(estimate_report_json(s, e));
  EXPECT_DOUBLE_EQ(j.at("moe_blocks_s").get<double>(), e.breakdown.moe);
  EXPECT_NE(estimate_report_text(s, e).find("of which MoE blocks"), std::string::npos);
  // A dense model has none, lists none, and its band is what it was without the MoE term.
  auto d = load_scenario_file(std::string(STEPCAST_SOURCE_DIR) + "/scenarios/llama3-70b-64xh100.json");
  ASSERT_TRUE(d.ok()) << d.error().message;
  const Estimate de = estimate(*d);
  EXPECT_EQ(de.breakdown.moe, 0.0);
  EXPECT_FALSE(nlohmann::json::parse(estimate_report_json(*d, de)).contains("moe_blocks_s"));
}

TEST(Band, EstimateReportsCarryTheBand) {
  auto s = load_scenario_file(std::string(STEPCAST_SOURCE_DIR) + "/scenarios/llama3-70b-64xh100.json");
  ASSERT_TRUE(s.ok()) << s.error().message;
  const Estimate e = estimate(*s);
  const StepBreakdown& k = e.breakdown;
  const Band b =
      step_time_band(StepParts{k.compute - e.compute.interference, k.exposed_comm, k.bubble, k.optimizer, k.wait,
                               k.input, k.host, e.compute.interference},
                     validation_residuals(s->plan.stack));
  EXPECT_GT(e.compute.interference, 0.0);  // its own part (u 0.5), out of the compute's
  EXPECT_DOUBLE_EQ(e.step_time_band.p10, b.p10);
  EXPECT_DOUBLE_EQ(e.step_time_band.p90, b.p90);
  EXPECT_LT(e.tokens_per_s_band.p10, e.tokens_per_s);
  const std::string json = estimate_report_json(*s, e);
  EXPECT_NE(json.find("\"step_time_band_s\""), std::string::npos);
  EXPECT_NE(json.find("\"tokens_per_s_band\""), std::string::npos);
  EXPECT_NE(estimate_report_text(*s, e).find("band p10-p90"), std::string::npos);
}

}  // namespace
}  // namespace stepcast

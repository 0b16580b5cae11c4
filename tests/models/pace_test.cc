// The slowest of N GPUs (docs/model-reference.md section 4.5): a synchronous job runs at the
// pace of its slowest GPU, 1 + sigma x E[max of N standard normals]. Blom's approximation of
// E[max] against the exact integral; the pace against every compute time of the closed form.
#include "stepcast/models/compute.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <numbers>
#include <string>

#include <nlohmann/json.hpp>

#include "stepcast/models/estimate.h"
#include "stepcast/models/layer_cost.h"
#include "stepcast/models/report.h"
#include "stepcast/models/scenario.h"

namespace stepcast {
namespace {

// E[max of n] = integral of x n phi(x) Phi(x)^(n-1) dx, by the trapezoid rule on [-12, 12]
// (the integrand is below 1e-25 outside) with 1e5 steps: a second method, not Blom's.
double exact_expected_max(std::int64_t n) {
  const double lo = -12, hi = 12;
  const int steps = 100000;
  const double dx = (hi - lo) / steps;
  double sum = 0;
  for (int i = 0; i <= steps; ++i) {
    const double x = lo + i * dx;
    const double phi = std::exp(-x * x / 2) / std::sqrt(2 * std::numbers::pi);
    const double cdf = 0.5 * std::erfc(-x / std::sqrt(2.0));
    const double f = x * static_cast<double>(n) * phi * std::pow(cdf, static_cast<double>(n - 1));
    sum += (i == 0 || i == steps) ? f / 2 : f;
  }
  return sum * dx;
}

TEST(Pace, BlomExpectedMaximumAgainstTheIntegral) {
  EXPECT_EQ(expected_max_standard_normal(1), 0.0);
  EXPECT_EQ(expected_max_standard_normal(0), 0.0);
  // Textbook values: E[max of 2] = 1/sqrt(pi) = 0.5642, E[max of 10] = 1.5388.
  EXPECT_NEAR(exact_expected_max(2), 1 / std::sqrt(std::numbers::pi), 1e-6);
  EXPECT_NEAR(exact_expected_max(10), 1.5388, 1e-4);
  EXPECT_NEAR(expected_max_standard_normal(2), exact_expected_max(2), 0.05 * exact_expected_max(2));
  for (std::int64_t n : {10, 64, 256, 1024, 3072, 16384, 100000}) {
    const double exact = exact_expected_max(n);
    EXPECT_NEAR(expected_max_standard_normal(n), exact, 0.006 * exact) << n;
  }
}

Scenario load(const std::string& text) {
  auto s = parse_scenario(text);
  EXPECT_TRUE(s.ok()) << s.error().message;
  return s.ok() ? *s : Scenario{};
}

std::string scenario_text(int nodes, const std::string& sigma) {
  return R"({"model": "llama3-8b", "cluster": {"preset": "dgx-h100", "nodes": )" + std::to_string(nodes) +
         sigma + R"(}, "plan": {"tp": 1, "pp": 1, "dp": )" + std::to_string(8 * nodes) +
         R"(, "zero": 1, "microbatch": 1, "global_batch": )" + std::to_string(8 * nodes) +
         R"(, "recompute": "full"}, "workload": {"seq_len": 8192}})";
}

TEST(Pace, EveryComputeTimeRunsAtTheSlowestGpusPace) {
  // 16 DGX H100 = 128 GPUs at the default spread 0.0148, and the same without spread.
  const Scenario s = load(scenario_text(16, ""));
  const Scenario even = load(scenario_text(16, R"(, "gpu_speed_sigma": 0)"));
  ASSERT_EQ(s.cluster.gpu_speed_sigma, 0.0148);
  const double pace = 1 + 0.0148 * expected_max_standard_normal(128);
  EXPECT_DOUBLE_EQ(job_pace(s.cluster), pace);
  EXPECT_EQ(job_pace(even.cluster), 1.0);
  EXPECT_GT(pace, 1.035);  // E[max of 128] = 2.58
  EXPECT_LT(pace, 1.040);
  // Every compute piece of a layer is the even cluster's times the pace; FLOPs unchanged.
  const LayerCost a = layer_cost(s.model, s.cluster, s.plan, 8192, false);
  const LayerCost b = layer_cost(even.model, even.cluster, even.plan, 8192, false);
  EXPECT_NEAR(a.attn_gemm_s, pace * b.attn_gemm_s, 1e-12 * a.attn_gemm_s);
  EXPECT_NEAR(a.attn_core_s, pace * b.attn_core_s, 1e-12 * a.attn_core_s);
  EXPECT_NEAR(a.mlp_gemm_s, pace * b.mlp_gemm_s, 1e-12 * a.mlp_gemm_s);
  EXPECT_NEAR(a.mlp_elem_s, pace * b.mlp_elem_s, 1e-12 * a.mlp_elem_s);
  EXPECT_NEAR(a.recompute_s, pace * b.recompute_s, 1e-12 * a.recompute_s);
  EXPECT_EQ(a.flops(), b.flops());
  // The step: compute and optimizer scale by the pace, communication does not.
  const Estimate ea = estimate(s), eb = estimate(even);
  // (The interference of the overlapped gradient buckets is sized from the collectives, at
  // no pace: compute without it.)
  EXPECT_NEAR(ea.breakdown.compute - ea.compute.interference, pace * (eb.breakdown.compute - eb.compute.interference),
              1e-9 * ea.breakdown.compute);
  EXPECT_GT(ea.compute.interference, 0.0);
  EXPECT_NEAR(ea.breakdown.optimizer, pace * eb.breakdown.optimizer, 1e-9 * ea.breakdown.optimizer);
  EXPECT_GT(ea.step_time_s, eb.step_time_s);
  EXPECT_EQ(ea.pace, pace);
  // The report names what the slowest GPU costs.
  const auto j = nlohmann::json::parse(estimate_report_json(s, ea));
  EXPECT_DOUBLE_EQ(j["slowest_gpu"]["step_s"].get<double>(), ea.step_time_s - eb.step_time_s);
  EXPECT_EQ(j["slowest_gpu"]["gpus"], 128);
  EXPECT_NE(estimate_report_text(s, ea).find("of which the slowest of 128 GPUs"), std::string::npos);
  EXPECT_FALSE(nlohmann::json::parse(estimate_report_json(even, eb)).contains("slowest_gpu"));
}

TEST(Pace, OneGpuAndTheCpuHostHaveNoSpread) {
  const Scenario one = load(R"({"model": "llama3-8b", "cluster": {"preset": "dgx-h100", "nodes": 1,
      "gpus_per_node": 1}, "plan": {"global_batch": 1, "microbatch": 1}, "workload": {"seq_len": 4096}})");
  EXPECT_EQ(job_pace(one.cluster), 1.0);
  const Scenario cpu = load(R"({"model": "llama3-8b", "cluster": {"preset": "cpu-host"},
      "plan": {"global_batch": 4, "microbatch": 1, "dp": 4}, "workload": {"seq_len": 1024}})");
  EXPECT_EQ(cpu.cluster.gpu_speed_sigma, 0.0);
  EXPECT_EQ(job_pace(cpu.cluster), 1.0);
}

TEST(Pace, BadSpreadIsNamed) {
  auto s = parse_scenario(scenario_text(2, R"(, "gpu_speed_sigma": -0.1)"));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("cluster.gpu_speed_sigma"), std::string::npos) << s.error().message;
}

}  // namespace
}  // namespace stepcast

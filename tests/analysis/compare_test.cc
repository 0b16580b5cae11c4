// compare on hand-built sides (analysis/compare.h): the kind of ratio and the words of the
// report follow from the sides' device counts, batches, step counts and devices. Oracle:
// the ratio is (tokens_b / T_b / N_b) / (tokens_a / T_a / N_a), computed by hand below.
#include "stepcast/analysis/compare.h"

#include <gtest/gtest.h>

#include <string>

namespace stepcast {
namespace {

analysis::CompareSide side(const std::string& name, int world, double step_s, int steps = 10) {
  analysis::CompareSide s;
  s.name = name;
  s.world = world;
  s.steps = steps;
  s.step_time_s = step_s;
  s.clean_step_time_s = step_s;
  s.mean.compute = s.clean_mean.compute = step_s;  // the parts sum to the step time
  s.tokens_per_step = 64 * 4096;
  s.global_batch = 64;
  s.seq_len = 4096;
  s.model_flops_per_step = 1e15;
  s.peak_flops_per_gpu = 1e15;
  return s;
}

TEST(Compare, TwoLayoutsOnOneGpuCountAreALayoutComparisonNotScaling) {
  // 64 GPUs both: 1.5 s vs 1.0 s per step for the same tokens: B's throughput per GPU is
  // 1.5 / 1.0 = 150 % of A's. Nothing scales, so no "scaling efficiency" is claimed.
  const analysis::Comparison c = analysis::compare(side("a", 64, 1.5), side("b", 64, 1.0));
  EXPECT_EQ(c.scaling_kind, "layout");
  EXPECT_DOUBLE_EQ(c.scaling_efficiency, 1.5);
  const std::string text = analysis::comparison_text(c);
  EXPECT_NE(text.find("\nLayout: per-GPU throughput of B over A = 150.0 % (tokens/s per GPU; both on 64 GPUs: a layout "
                      "comparison, no scaling)\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("scaling efficiency"), std::string::npos) << text;
  EXPECT_EQ(text.find("-scaling"), std::string::npos) << text;
  EXPECT_NE(analysis::comparison_json(c).find("\"scaling_kind\": \"layout\""), std::string::npos);
}

TEST(Compare, DifferentGpuCountsKeepTheScalingWords) {
  // The same global batch on 4 and 8 GPUs: strong scaling, (2.0 x 4) / (1.25 x 8) = 80 %.
  const analysis::Comparison c = analysis::compare(side("a", 4, 2.0, 2), side("b", 8, 1.25, 2));
  EXPECT_EQ(c.scaling_kind, "strong");
  EXPECT_DOUBLE_EQ(c.scaling_efficiency, 0.8);
  const std::string text = analysis::comparison_text(c);
  EXPECT_EQ(text.rfind("stepcast compare (means of 2 steps)\n  A: a (4 GPUs)\n  B: b (8 GPUs)\n", 0), 0u) << text;
  EXPECT_NE(text.find("\nScaling: strong-scaling efficiency (same global batch) = 80.0 % (tokens/s per GPU, B over A; "
                      "4 -> 8 GPUs)\n"),
            std::string::npos)
      << text;
}

TEST(Compare, EachSideSaysItsOwnStepCount) {
  // A simulated for 10 steps, B measured for 3: the header must not call both "means of 10".
  const analysis::Comparison c = analysis::compare(side("a", 4, 1.0, 10), side("b", 8, 1.0, 3));
  const std::string text = analysis::comparison_text(c);
  EXPECT_EQ(text.rfind("stepcast compare (means over each side's own steps)\n  A: a (4 GPUs, 10 steps)\n"
                       "  B: b (8 GPUs, 3 steps)\n",
                       0),
            0u)
      << text;
}

TEST(Compare, OneStepIsNotPlural) {
  const std::string text = analysis::comparison_text(analysis::compare(side("a", 4, 1.0, 1), side("b", 8, 1.0, 1)));
  EXPECT_EQ(text.rfind("stepcast compare (means of 1 step)\n", 0), 0u) << text;
}

TEST(Compare, CpuRanksAreNotCalledGpus) {
  // A measured run of the cpu_mpi backend: its ranks are processes, not GPUs.
  analysis::CompareSide b = side("b (measured)", 4, 1.0, 3);
  b.on_gpus = false;
  const analysis::Comparison c = analysis::compare(side("a", 4, 1.0, 3), b);
  const std::string text = analysis::comparison_text(c);
  EXPECT_EQ(text.rfind("stepcast compare (means of 3 steps)\n  A: a (4 GPUs)\n  B: b (measured) (4 ranks)\n", 0), 0u)
      << text;
  EXPECT_NE(text.find("\nWork per rank per step\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\nLayout: per-rank throughput of B over A = 100.0 % (tokens/s per rank; both on 4 ranks: a "
                      "layout comparison, no scaling)\n"),
            std::string::npos)
      << text;
}

TEST(Compare, PartsAddUpToTheStepTimeDifference) {
  analysis::CompareSide a = side("a", 8, 1.0), b = side("b", 8, 1.3);
  a.mean.compute = 0.7;
  a.mean.dp = 0.2;
  a.mean.bubble = 0.1;
  b.mean.compute = 0.7;
  b.mean.dp = 0.5;
  b.mean.bubble = 0.1;
  const analysis::Comparison c = analysis::compare(a, b);
  EXPECT_NEAR(c.parts_delta_s, c.step_delta_s, 1e-12);
  for (const analysis::ComparePart& p : c.parts) {
    EXPECT_NEAR(p.delta_s(), p.name == "exposed_comm.dp" ? 0.3 : 0.0, 1e-12) << p.name;
  }
}

}  // namespace
}  // namespace stepcast

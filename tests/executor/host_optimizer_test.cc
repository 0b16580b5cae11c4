// The host optimizer step of optimizer offload (executor/include/stepcast/executor/
// host_optimizer.h) against updates worked by hand, and the Runner running it.
#include "stepcast/executor/host_optimizer.h"

#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <vector>

namespace stepcast::exec {
namespace {

float from_bf16(std::uint16_t h) { return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16); }

// AdamW with a constant gradient moves each weight by lr x sign(g) per step (the bias
// corrections make m_hat = g and v_hat = g^2 exactly), after the decay w (1 - lr wd):
//   w = 1,  g = 0.5: step 1 0.99999 - 0.001 = 0.99899; step 2 0.99899 x 0.99999 - 0.001
//   w = -2, g = -2:  step 1 -1.99998 + 0.001 = -1.99898
// m and v by hand: m1 = 0.1 g, v1 = 0.001 g^2; m2 = 0.19 g, v2 = 0.001999 g^2.
TEST(HostOptimizer, AdamWUpdatesAsWorkedByHand) {
  std::vector<float> w{1.0f, -2.0f}, g{0.5f, -2.0f}, m(2, 0.0f), v(2, 0.0f);
  std::vector<std::uint16_t> w16(2);
  AdamParams a;
  a.lr = 1e-3f;
  a.weight_decay = 0.01f;
  adam_update(w, g, m, v, w16, a, 1);
  EXPECT_NEAR(w[0], 0.99899, 1e-6);
  EXPECT_NEAR(w[1], -1.99898, 1e-6);
  EXPECT_NEAR(m[0], 0.05, 1e-7);
  EXPECT_NEAR(v[0], 0.00025, 1e-4 * 0.00025);  // 1 - 0.999f is 0.001 to 1e-5 relative
  EXPECT_NEAR(m[1], -0.2, 1e-7);
  EXPECT_NEAR(v[1], 0.004, 1e-4 * 0.004);
  EXPECT_EQ(w16[0], to_bf16(w[0]));
  EXPECT_NEAR(from_bf16(w16[1]), w[1], 2.0 / 256);  // 8 significant bits
  adam_update(w, g, m, v, w16, a, 2);
  EXPECT_NEAR(w[0], 0.99899 * 0.99999 - 0.001, 1e-6);
  EXPECT_NEAR(m[0], 0.095, 1e-7);
  EXPECT_NEAR(v[0], 0.001999 * 0.25, 1e-4 * 0.0005);
}

// SGD with momentum 0.9 and weight decay 0.01: m = 0.9 x 0 + 0.5 + 0.01 x 1 = 0.51,
// w = 1 - 1e-3 x 0.51 = 0.99949; again: m = 0.9 x 0.51 + 0.5 + 0.01 x 0.99949.
TEST(HostOptimizer, SgdWithMomentumUpdatesAsWorkedByHand) {
  std::vector<float> w{1.0f}, g{0.5f}, m{0.0f};
  std::vector<std::uint16_t> w16(1);
  SgdParams s;
  s.lr = 1e-3f;
  sgd_update(w, g, m, w16, s);
  EXPECT_NEAR(m[0], 0.51, 1e-7);
  EXPECT_NEAR(w[0], 0.99949, 1e-7);
  sgd_update(w, g, m, w16, s);
  const double m2 = 0.9 * 0.51 + 0.5 + 0.01 * 0.99949;
  EXPECT_NEAR(m[0], m2, 1e-6);
  EXPECT_NEAR(w[0], 0.99949 - 1e-3 * m2, 1e-6);
}

// bf16 keeps the top 16 bits of the float, rounded to nearest, ties to even:
// 1 + 2^-8 lies halfway between 1 (0x3F80) and 1 + 2^-7 (0x3F81): to 0x3F80;
// 1 + 3 x 2^-8 halfway between 0x3F81 and 0x3F82: to 0x3F82; just above 1 + 2^-8: up.
TEST(HostOptimizer, Bf16RoundsToNearestEven) {
  EXPECT_EQ(to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(to_bf16(1.00390625f), 0x3F80);
  EXPECT_EQ(to_bf16(1.01171875f), 0x3F82);
  EXPECT_EQ(to_bf16(1.0040f), 0x3F81);
  EXPECT_EQ(to_bf16(-2.0f), 0xC000);
}

// More parameters than the working set: the step passes over it again until every
// parameter is counted; threads split each pass and change nothing of the arithmetic.
TEST(HostOptimizer, StepsOverMoreParametersThanItsWorkingSetHolds) {
  HostOptimizer small(1, 4);
  small.step(10, true);
  EXPECT_EQ(small.steps(), 1);
  EXPECT_EQ(small.working_set(), 4u);
  EXPECT_DOUBLE_EQ(small.elements_updated(), 10.0);
  small.step(3, false);
  EXPECT_DOUBLE_EQ(small.elements_updated(), 13.0);
  small.step(0, true);
  EXPECT_EQ(small.steps(), 2);

  HostOptimizer one(1), four(4);
  const double n = 300'000;  // 4 slices of 64 Ki and more
  for (int i = 0; i < 3; ++i) {
    one.step(n, true);
    four.step(n, true);
  }
  EXPECT_DOUBLE_EQ(four.elements_updated(), 3 * n);
  ASSERT_EQ(four.working_set(), one.working_set());
  EXPECT_EQ(std::memcmp(four.weights().data(), one.weights().data(), one.weights().size_bytes()), 0);
  EXPECT_NE(one.weights()[0], 0.01f);  // it moved from its start
}

}  // namespace
}  // namespace stepcast::exec

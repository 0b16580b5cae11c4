// The cost model against the kernel tables measured on one H200 (models/data/measured/
// h200-sxm.json, distilled from docs/data/executor-gpu/microbench.json by
// scripts/gpu-tables.py). The h200-sxm preset's GEMM ceilings and short-K factors were
// fitted to two rows per precision; every other row is held out here. The attention
// families sdpa-flash and sdpa-cudnn and the PyTorch stacks' loss traffic are checked
// against the rows they were transcribed or derived from.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "stepcast/models/attention.h"
#include "stepcast/models/compute.h"
#include "stepcast/models/presets.h"
#include "stepcast/models/stack.h"

namespace stepcast {
namespace {

using nlohmann::json;

const json& measured() {
  static const json doc = [] {
    std::ifstream in(std::string(STEPCAST_SOURCE_DIR) + "/models/data/measured/h200-sxm.json");
    return json::parse(in);
  }();
  return doc;
}

Precision precision_of(const std::string& dtype) { return dtype == "bf16" ? Precision::kBf16 : Precision::kFp8; }

// Model time over measured time for each GEMM row of `dtype` whose label starts with `prefix`.
std::vector<double> gemm_ratios(const std::string& dtype, const std::string& prefix) {
  const GpuSpec& g = builtin_presets().gpus.at("h200-sxm");
  std::vector<double> out;
  for (const json& r : measured().at("gemm")) {
    if (r.at("dtype") != dtype || r.at("label").get<std::string>().rfind(prefix, 0) != 0) continue;
    const double m = r.at("m"), n = r.at("n"), k = r.at("k");
    out.push_back(gemm_time_s(g, precision_of(dtype), m, n, k) / r.at("time_s").get<double>());
  }
  return out;
}

double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(q * static_cast<double>(v.size() - 1) + 0.5)];
}

double row_time(const std::string& label, const std::string& dtype) {
  for (const json& r : measured().at("gemm")) {
    if (r.at("label") == label && r.at("dtype") == dtype) return r.at("time_s");
  }
  ADD_FAILURE() << "no row " << label << " " << dtype;
  return 1;
}

// The fit by hand: at M = N = 8192 the 2048 output tiles of 128 x 256 fill 16 waves of 132
// SMs at 2048/2112, so rate = ceiling x 2048/2112 x K / (K + K_half). bf16: 514.5 TFLOP/s at
// K = 512 and 661.0 at K = 4096 give K_half = 173.8 and ceiling 710.6; fp8 (precise
// accumulation) 747.5 and 1181.4 give 370.5 and 1328.5 (gpus.json rounds K_half).
TEST(MeasuredH200, GemmCeilingsAndShortKFactorsReproduceTheirTwoRows) {
  const GpuSpec& g = builtin_presets().gpus.at("h200-sxm");
  EXPECT_DOUBLE_EQ(g.gemm_bf16_k_half, 174);
  EXPECT_DOUBLE_EQ(g.mamf_bf16_tflops, 710.6);
  EXPECT_DOUBLE_EQ(g.gemm_fp8_k_half, 370);
  EXPECT_DOUBLE_EQ(g.mamf_fp8_tflops, 1328.5);
  for (const char* dtype : {"bf16", "fp8"}) {
    for (int k : {512, 4096}) {
      SCOPED_TRACE(testing::Message() << dtype << " K " << k);
      const double t = gemm_time_s(g, precision_of(dtype), 8192, 8192, k);
      EXPECT_NEAR(t / row_time("small-k/" + std::to_string(k), dtype), 1.0, 0.005);
    }
  }
  // The ceiling by hand: 514.5 x (512 + 173.8) / 512 / (2048/2112) = 710.6.
  const double rate_512 = 2.0 * 8192 * 8192 * 512 / row_time("small-k/512", "bf16") / 1e12;
  const double k_half = 173.8;
  EXPECT_NEAR(rate_512 * (512 + k_half) / 512 / (2048.0 / 2112), 710.6, 0.5);
}

// Held out: the other short-K rows (K = 64 .. 2048 at M = N = 8192) within 7 % (K = 128,
// where the model is 17 % slow, is the exception the fit leaves), and the 96 layer GEMMs of
// Llama 3 8B and 70B at TP 1, 2, 4, 8 (forward, dgrad, wgrad at 8192 tokens): median
// model/measured time within [0.97, 1.05], 80 % of the rows within 10 %.
TEST(MeasuredH200, HeldOutGemmRowsComeOutOfTheModel) {
  for (const char* dtype : {"bf16", "fp8"}) {
    SCOPED_TRACE(dtype);
    for (int k : {64, 256, 1024, 2048}) {
      if (std::string(dtype) == "fp8" && k < 1024) continue;  // fp8's fit holds from K = 1024 (below: +10 to +26 %)
      const double t = gemm_time_s(builtin_presets().gpus.at("h200-sxm"), precision_of(dtype), 8192, 8192, k);
      EXPECT_NEAR(t / row_time("small-k/" + std::to_string(k), dtype), 1.0, 0.07) << "K " << k;
    }
    const std::vector<double> r = gemm_ratios(dtype, "llama3-");
    ASSERT_EQ(r.size(), 96u);
    EXPECT_GE(quantile(r, 0.5), 0.97);
    EXPECT_LE(quantile(r, 0.5), 1.05);
    const auto within = std::count_if(r.begin(), r.end(), [](double x) { return std::abs(x - 1) <= 0.10; });
    EXPECT_GE(static_cast<double>(within), 0.8 * static_cast<double>(r.size()));
  }
}

// Held out: outputs of 64 to 256 rows or columns (M or N small, the other two 8192), which
// the whole-tile model made 1.6 to 2.8x slow, come out of the split K loop (gemm_tiling)
// within 30 % in bf16 and fp8 (the worst, fp8 at 64 rows, 0.74: a memory-bound kernel that
// read 2.8 TB/s against the model's 0.8 x 4.8; a second sweep timed it at 0.94); and the
// wgrad of Llama 3 8B's projection at TP 8 (512 x 4096 x 8192: 64 tiles, two K slices),
// 1.99x slow before, within 5 %.
TEST(MeasuredH200, SmallOutputsSplitTheKLoop) {
  for (const char* dtype : {"bf16", "fp8"}) {
    for (const char* prefix : {"small-m/", "small-n/"}) {
      SCOPED_TRACE(testing::Message() << dtype << " " << prefix);
      const std::vector<double> r = gemm_ratios(dtype, prefix);
      ASSERT_EQ(r.size(), 7u);
      for (std::size_t i = 0; i < 3; ++i) EXPECT_NEAR(r[i], 1.0, 0.3) << "row " << i;  // 64, 128, 256
      EXPECT_LT(std::abs(r.back() - 1), 0.1);                                          // 4096
    }
  }
  const GpuSpec& g = builtin_presets().gpus.at("h200-sxm");
  EXPECT_DOUBLE_EQ(gemm_tiling(g, Precision::kBf16, 512, 4096, 8192).k_slices, 2);
  EXPECT_NEAR(gemm_time_s(g, Precision::kBf16, 512, 4096, 8192) / row_time("llama3-8b/tp8/proj.wgrad", "bf16"), 1.0,
              0.05);
}

// attention.json's sdpa-flash and sdpa-cudnn families are the measured rows (head dim 128,
// 16k tokens per batch): forward causal and non-causal, and the causal backward as
// 2.5 x forward FLOPs over its time, to the 0.1 TFLOP/s they were rounded to.
TEST(MeasuredH200, AttentionFamiliesAreTheMeasuredRows) {
  const AttentionTable* t = attention_table("hopper");
  ASSERT_NE(t, nullptr);
  for (const auto& [family, kernel] : {std::pair{"sdpa-flash", "flash"}, std::pair{"sdpa-cudnn", "cudnn"}}) {
    const AttentionKernelFigures& f = t->kernels.at(family);
    EXPECT_NE(f.source.find("MEASURED"), std::string::npos);
    int checked = 0;
    for (const json& r : measured().at("attention")) {
      if (r.at("kernel") != kernel || r.at("head_dim") != 128) continue;
      const double s = r.at("seq"), b = r.at("batch"), h = r.at("heads");
      const bool causal = r.at("causal");
      const double fwd = 4.0 * b * h * s * s * 128 * (causal ? 0.5 : 1.0);
      const auto i = static_cast<std::size_t>(std::find(t->seq.begin(), t->seq.end(), s) - t->seq.begin());
      ASSERT_LT(i, t->seq.size());
      SCOPED_TRACE(testing::Message() << family << " seq " << s << " causal " << causal);
      const double fwd_tflops = fwd / r.at("fwd_s").get<double>() / 1e12;
      EXPECT_NEAR((causal ? f.fwd_causal_tflops : f.fwd_tflops)[i], fwd_tflops, 0.051);
      if (causal) {
        EXPECT_NEAR(f.bwd_tflops[i], 2.5 * fwd / r.at("bwd_s").get<double>() / 1e12, 0.051);
      }
      ++checked;
    }
    EXPECT_EQ(checked, 12);
  }
}

// The PyTorch stacks' loss: F.cross_entropy on 4096 x 128256 fp32 logits, forward and
// backward, in bytes at stepcast's 0.8 x 4800 GB/s (34.1), plus the upcast (2 + 4 B) and
// the gradient's downcast (4 + 2 B): 46 B per logit.
TEST(MeasuredH200, PyTorchLossTrafficIsTheMeasuredCrossEntropyPlusItsCasts) {
  double t = 0;
  for (const json& r : measured().at("memory_bound")) {
    if (r.at("op").get<std::string>().rfind("cross_entropy", 0) == 0) t = r.at("time_s");
  }
  ASSERT_GT(t, 0);
  const double bytes = t / (4096.0 * 128256) * 0.8 * 4800e9 + 12;
  for (const char* stack : {"fsdp2-eager", "fsdp2-compile"}) {
    EXPECT_NEAR(stack_profile(*parse_stack(stack)).loss_traffic_bytes_per_logit, bytes, 0.5) << stack;
  }
  EXPECT_DOUBLE_EQ(stack_profile(Stack::kMegatronCore).loss_traffic_bytes_per_logit, 12);
}

}  // namespace
}  // namespace stepcast

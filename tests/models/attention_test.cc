// Fused attention kernels by family and architecture (docs/model-reference.md "Attention
// kernels"): the efficiencies against the figures of the FlashAttention-3 paper written out
// here by hand, the log2 interpolation and clamping, what wins over the table, and the
// layer's core attention priced with the stack's kernel family.
#include "stepcast/models/attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include <cmath>

#include "stepcast/models/compute.h"
#include "stepcast/models/estimate.h"
#include "stepcast/models/report.h"
#include "stepcast/models/scenario.h"
#include "stepcast/models/layer_cost.h"
#include "stepcast/models/presets.h"
#include "stepcast/models/stack.h"

namespace stepcast {
namespace {

// Shah et al. 2024 (FlashAttention-3), H100 80GB SXM5, head dim 128, TFLOP/s at 4k and 8k
// tokens: Figure 5 causal forward and Figure 6 backward; H100 SXM dense bf16 peak 989.4.
constexpr double kH100Peak = 989.4;
constexpr double kFa2CausalFwd4k = 319, kFa2CausalFwd8k = 333, kFa2Bwd8k = 318;
constexpr double kCudnnCausalFwd4k = 518, kCudnnBwd4k = 499, kCudnnFwd8k = 600;
// SDPA's flash backend measured on an H200 (attention.json sdpa-flash, from
// docs/data/executor-gpu/microbench.json): 8192 tokens, causal forward and backward.
constexpr double kSdpaFlashCausalFwd8k = 314.2, kSdpaFlashBwd8k = 267.9;

GpuSpec h100() { return builtin_presets().gpus.at("h100-sxm"); }

TEST(AttentionKernels, TablePointsAreThePublishedFiguresOverThePeak) {
  const GpuSpec g = h100();
  ASSERT_EQ(g.attention_efficiency, 0.0);  // not stated: the table applies
  const AttentionEfficiency fa2 = attention_efficiency(g, "fa2", 8192, true, true);
  EXPECT_TRUE(fa2.from_table);
  EXPECT_NEAR(fa2.fwd, kFa2CausalFwd8k / kH100Peak, 1e-12);
  EXPECT_NEAR(fa2.bwd, kFa2Bwd8k / kH100Peak, 1e-12);
  const AttentionEfficiency cudnn = attention_efficiency(g, "cudnn", 4096, true, true);
  EXPECT_NEAR(cudnn.fwd, kCudnnCausalFwd4k / kH100Peak, 1e-12);
  EXPECT_NEAR(cudnn.bwd, kCudnnBwd4k / kH100Peak, 1e-12);
  // Non-causal forward: its own series.
  EXPECT_NEAR(attention_efficiency(g, "cudnn", 8192, false, true).fwd, kCudnnFwd8k / kH100Peak, 1e-12);
  // FlashAttention-2 on Hopper: about a third of the peak, as the FlashAttention-3 abstract
  // says ("only 35% utilization"); cuDNN well above it.
  EXPECT_LT(fa2.fwd, 0.35);
  EXPECT_GT(cudnn.fwd, 0.5);
}

TEST(AttentionKernels, InterpolatesInLog2OfTheSequenceAndClampsAtTheEnds) {
  const GpuSpec g = h100();
  // 6144 tokens: log2 = 12.585, a fraction 0.585 of the way from 4096 to 8192.
  const double f = std::log2(6144.0) - 12.0;
  EXPECT_NEAR(attention_efficiency(g, "fa2", 6144, true, true).fwd,
              (kFa2CausalFwd4k + f * (kFa2CausalFwd8k - kFa2CausalFwd4k)) / kH100Peak, 1e-12);
  EXPECT_NEAR(attention_efficiency(g, "fa2", 128, true, true).fwd, 191 / kH100Peak, 1e-12);      // 512's
  EXPECT_NEAR(attention_efficiency(g, "fa2", 131072, true, true).fwd, 335 / kH100Peak, 1e-12);   // 16k's
  EXPECT_DOUBLE_EQ(interpolate_log2({1, 4}, {10, 30}, 2), 20);  // log2: 2 is half way from 1 to 4
}

// An H100 capped at 500 W (h100-sxm-500w) runs the table's kernels, measured at 700 W, at
// the clock its GEMM ceiling shows at the cap, both ceilings short-sweep figures
// (gemm_bf16_sweep_tflops): bf16 585.2 TFLOP/s at 500 W (FBGEMM PR 2546's best row) over
// 794.5 at 700 W (ml-engineering MAMF), not the presets' ceilings taken to large K or
// sustained (597.7, 710.6). The uncapped GPU and one of unknown power limit keep the figures.
TEST(AttentionKernels, APowerCapScalesTheFiguresByTheGemmCeilingAtTheCap) {
  const GpuSpec capped = builtin_presets().gpus.at("h100-sxm-500w");
  const double cap = 585.2 / 794.5;
  const AttentionTable& hopper = *attention_table("hopper");
  EXPECT_DOUBLE_EQ(hopper.reference_mamf_bf16_tflops, 794.5);
  EXPECT_DOUBLE_EQ(sweep_bf16_tflops(capped), 585.2);
  EXPECT_DOUBLE_EQ(capped.mamf_bf16_tflops, 597.7);
  EXPECT_NEAR(attention_power_cap_factor(capped, hopper), cap, 1e-12);
  const AttentionEfficiency e = attention_efficiency(capped, "fa2", 8192, true, true);
  EXPECT_NEAR(e.fwd, cap * kFa2CausalFwd8k / kH100Peak, 1e-12);
  EXPECT_NEAR(e.bwd, cap * kFa2Bwd8k / kH100Peak, 1e-12);
  EXPECT_EQ(attention_power_cap_factor(h100(), hopper), 1.0);
  EXPECT_EQ(attention_efficiency(h100(), "fa2", 8192, true, true).fwd, kFa2CausalFwd8k / kH100Peak);
  GpuSpec unknown = capped;
  unknown.tdp_W = 0;
  EXPECT_EQ(attention_efficiency(unknown, "fa2", 8192, true, true).fwd, kFa2CausalFwd8k / kH100Peak);
  // A GPU whose ceiling is above the reference's is not sped up.
  GpuSpec faster = capped;
  faster.gemm_bf16_sweep_tflops = 900;
  EXPECT_EQ(attention_power_cap_factor(faster, hopper), 1.0);
  EXPECT_EQ(attention_efficiency(faster, "fa2", 8192, true, true).fwd, kFa2CausalFwd8k / kH100Peak);
}

TEST(AttentionKernels, StatedEfficiencyWinsOtherwiseThePrior) {
  GpuSpec g = h100();
  g.attention_efficiency = 0.45;  // a scenario's, a preset's or a calibration's
  AttentionEfficiency e = attention_efficiency(g, "fa2", 8192, true, true);
  EXPECT_EQ(e.fwd, 0.45);
  EXPECT_EQ(e.bwd, 0.45);
  EXPECT_FALSE(e.from_table);
  // No FlashAttention (fused softmax path), or an architecture without a table: the prior.
  e = attention_efficiency(h100(), "fa2", 8192, true, false);
  EXPECT_EQ(e.fwd, kAttentionEfficiencyPrior);
  e = attention_efficiency(builtin_presets().gpus.at("a100-sxm-80gb"), "fa2", 8192, true, true);
  EXPECT_EQ(e.fwd, kAttentionEfficiencyPrior);
  EXPECT_EQ(e.bwd, kAttentionEfficiencyPrior);
}

TEST(AttentionKernels, EveryStackKernelHasFiguresInEveryTable) {
  for (const auto& [name, stack] : builtin_presets().stacks) {
    for (const auto& [arch, table] : builtin_presets().attention) {
      EXPECT_EQ(table.kernels.count(stack.attention_kernel), 1u) << name << " on " << arch;
    }
  }
}

// The names the loaders accept (attention_kernel_names) are exactly the families the Hopper
// table holds, and every other table holds only named families: a family added to
// attention.json without its name, or the reverse, fails here. Blackwell has no fa3
// (FlashAttention-3 runs on Hopper only): a plan naming it there gets the prior.
TEST(AttentionKernels, EveryNamedFamilyHasFiguresOnHopperAndEveryTableOnlyNamedOnes) {
  std::vector<std::string> names = attention_kernel_names();
  std::sort(names.begin(), names.end());
  for (const auto& [arch, table] : builtin_presets().attention) {
    std::vector<std::string> families;
    for (const auto& [kernel, figures] : table.kernels) families.push_back(kernel);
    if (arch == "hopper") {
      EXPECT_EQ(families, names);
    }
    for (const std::string& f : families) EXPECT_TRUE(std::binary_search(names.begin(), names.end(), f)) << arch;
  }
  const AttentionTable* blackwell = attention_table("blackwell");
  ASSERT_NE(blackwell, nullptr);
  EXPECT_EQ(blackwell->kernels.count("fa3"), 0u);
  const AttentionEfficiency e = attention_efficiency(builtin_presets().gpus.at("b200"), "fa3", 8192, true, true);
  EXPECT_FALSE(e.from_table);
  EXPECT_EQ(e.fwd, kAttentionEfficiencyPrior);
}

// Blackwell's table is cudnn-frontend's B200 SDPA benchmark (the Llama 3.1 405B layer: batch
// 1, 128 query heads, head dim 128, causal). By hand from its times at 8192 tokens: the
// causal forward's FLOPs are 4 s^2 d h / 2 = 2 x 8192^2 x 128 x 128 = 2.199e12, over cuDNN's
// 1.877 ms = 1171.6 TFLOP/s; the backward's 2.5x that over 5.833 ms = 942.5; FlashAttention-2
// 5.499 ms and 17.288 ms: 399.9 and 318.0. Over the B200's 2250 dense bf16 TFLOP/s. The CSV
// has no non-causal forward: that is priced at the causal figure. Shorter than its first
// row (2048) clamps there.
TEST(AttentionKernels, BlackwellFiguresAreCudnnFrontendsB200Times) {
  const GpuSpec b200 = builtin_presets().gpus.at("b200");
  ASSERT_EQ(b200.architecture, "blackwell");
  const double flops_fwd = 2.0 * 8192.0 * 8192.0 * 128 * 128;
  const double peak = 2250;
  const AttentionEfficiency cudnn = attention_efficiency(b200, "cudnn", 8192, true, true);
  EXPECT_TRUE(cudnn.from_table);
  EXPECT_NEAR(cudnn.fwd * peak, flops_fwd / 1.877e-3 / 1e12, 0.5);
  EXPECT_NEAR(cudnn.bwd * peak, 2.5 * flops_fwd / 5.833e-3 / 1e12, 0.5);
  const AttentionEfficiency fa2 = attention_efficiency(b200, "fa2", 8192, true, true);
  EXPECT_NEAR(fa2.fwd * peak, flops_fwd / 5.499e-3 / 1e12, 0.5);
  EXPECT_NEAR(fa2.bwd * peak, 2.5 * flops_fwd / 17.288e-3 / 1e12, 0.5);
  // PyTorch SDPA on cuDNN is the same benchmark row as cuDNN.
  EXPECT_EQ(attention_efficiency(b200, "sdpa-cudnn", 8192, true, true).fwd, cudnn.fwd);
  // Causal-only table: the non-causal forward is the causal figure, and the loader says so.
  EXPECT_EQ(attention_efficiency(b200, "cudnn", 8192, false, true).fwd, cudnn.fwd);
  EXPECT_TRUE(attention_table("blackwell")->kernels.at("cudnn").fwd_from_causal);
  EXPECT_FALSE(attention_table("hopper")->kernels.at("cudnn").fwd_from_causal);
  EXPECT_EQ(attention_efficiency(b200, "cudnn", 512, true, true).fwd,
            attention_efficiency(b200, "cudnn", 2048, true, true).fwd);
  // cuDNN on B200 at 8k tokens: about half the dense peak forward, 0.42 backward, below the
  // 0.6 prior Blackwell had without a table.
  EXPECT_LT(cudnn.fwd, kAttentionEfficiencyPrior);
  EXPECT_LT(cudnn.bwd, cudnn.fwd);
}

// Llama-3-8B's attention (32 heads of 128, GQA 8) at 8192 tokens, one microbatch, on one
// H100: the core's FLOPs by hand, 2 a (d_qk + d_v) T (s+1)/2, priced at SDPA's flash
// backend's measured figures under fsdp2-eager and at cuDNN's under megatron-core; with
// cp = 2 each rank's kernel sees 4096 tokens.
// One DGX H100 node, and a plan of one microbatch on it: data parallel over its 8 GPUs, no
// recomputation, fused attention.
ClusterSpec one_h100_node() {
  ClusterSpec c = builtin_presets().clusters.at("dgx-h100");
  c.nodes = 1;
  return c;
}
Plan one_microbatch_dp8(Stack stack) {
  Plan p;
  p.tp = 1;
  p.dp = 8;
  p.microbatch = 1;
  p.flash_attention = true;
  p.recompute = Recompute::kNone;
  p.stack = stack;
  return p;
}

TEST(AttentionKernels, LayerCorePricedWithTheStacksKernelFamily) {
  ModelSpec m = builtin_presets().models.at("llama3-8b");
  const ClusterSpec c = one_h100_node();
  const double pace = job_pace(c);
  Plan p = one_microbatch_dp8(Stack::kFsdp2Eager);
  const double s = 8192, T = 8192;
  const double flops = 2.0 * 32 * (128 + 128) * T * (s + 1) / 2;
  LayerCost lc = layer_cost(m, c, p, 8192, false);
  EXPECT_NEAR(lc.attn_core_flops, flops, 1e-6 * flops);
  EXPECT_NEAR(lc.attn_core_s, pace * flops / (kSdpaFlashCausalFwd8k * 1e12), 1e-9 * lc.attn_core_s);
  EXPECT_NEAR(lc.attn_core_bwd_s, pace * 2.5 * flops / (kSdpaFlashBwd8k * 1e12), 1e-9 * lc.attn_core_bwd_s);
  // plan.attention_kernel wins over the stack's: FlashAttention-2's published figures.
  p.attention_kernel = "fa2";
  lc = layer_cost(m, c, p, 8192, false);
  EXPECT_NEAR(lc.attn_core_s, pace * flops / (kFa2CausalFwd8k * 1e12), 1e-9 * lc.attn_core_s);
  EXPECT_NEAR(lc.attn_core_bwd_s, pace * 2.5 * flops / (kFa2Bwd8k * 1e12), 1e-9 * lc.attn_core_bwd_s);
  p.attention_kernel.clear();
  p.stack = Stack::kMegatronCore;
  lc = layer_cost(m, c, p, 8192, false);
  EXPECT_NEAR(lc.attn_core_s, pace * flops / (529 * 1e12), 1e-9 * lc.attn_core_s);
  EXPECT_NEAR(lc.attn_core_bwd_s, pace * 2.5 * flops / (518 * 1e12), 1e-9 * lc.attn_core_bwd_s);
  // Context parallelism: half the tokens per rank against all keys of its ring, at 4k.
  p.cp = 2;
  p.dp = 4;
  lc = layer_cost(m, c, p, 8192, false);
  const double flops_cp = flops / 2;
  EXPECT_NEAR(lc.attn_core_s, pace * flops_cp / (kCudnnCausalFwd4k * 1e12), 1e-9 * lc.attn_core_s);
  EXPECT_NEAR(lc.attn_core_bwd_s, pace * 2.5 * flops_cp / (kCudnnBwd4k * 1e12), 1e-9 * lc.attn_core_bwd_s);
}

// GPT-OSS-120b (64 heads of 64, a 128-token window on every other layer) at 4096 tokens,
// one microbatch, on one H100 under megatron-core (cuDNN): the full layers' queries see
// (s+1)/2 keys at the table's 4k figures; the windowed layers' see 128 - 128 x 127 / (2 s)
// keys (the band's mean: min(i, 128) over i = 1..s) at the table's shortest point (a
// 128-token window runs like a causal kernel over 256 tokens, below the table: clamped to
// 512 tokens, cuDNN 315 forward and 305 backward). Each layer is priced at the mean of the
// two. Without fused kernels the window changes nothing.
TEST(AttentionKernels, SlidingWindowLayersPricedAtTheWindowsShortSequence) {
  const ModelSpec m = builtin_presets().models.at("gpt-oss-120b");
  ModelSpec full = m;
  full.sliding_window = 0;
  full.window_attn_skip_freq = 0;
  const ClusterSpec c = one_h100_node();
  const double pace = job_pace(c);
  Plan p = one_microbatch_dp8(Stack::kMegatronCore);
  const double s = 4096, T = 4096, w = 128;
  const double per_key = 2.0 * 64 * (64 + 64) * T;
  const double full_flops = per_key * (s + 1) / 2;
  // Keys per query in the band, by hand: (w (w + 1) / 2 + (s - w) w) / s.
  const double win_keys = (w * (w + 1) / 2 + (s - w) * w) / s;
  EXPECT_NEAR(windowed_keys_per_query(s, w), win_keys, 1e-12 * win_keys);
  const double win_flops = per_key * win_keys;
  const LayerCost lc = layer_cost(m, c, p, 4096, true);
  EXPECT_NEAR(lc.attn_core_flops, 0.5 * full_flops + 0.5 * win_flops, 1e-9 * lc.attn_core_flops);
  const double fwd = pace * (0.5 * full_flops / (kCudnnCausalFwd4k * 1e12) + 0.5 * win_flops / (315 * 1e12));
  const double bwd = pace * 2.5 * (0.5 * full_flops / (kCudnnBwd4k * 1e12) + 0.5 * win_flops / (305 * 1e12));
  EXPECT_NEAR(lc.attn_core_s, fwd, 1e-9 * fwd);
  EXPECT_NEAR(lc.attn_core_bwd_s, bwd, 1e-9 * bwd);
  // The same model without the window: every layer at the full causal cost.
  const LayerCost no_window = layer_cost(full, c, p, 4096, true);
  EXPECT_NEAR(no_window.attn_core_s, pace * full_flops / (kCudnnCausalFwd4k * 1e12), 1e-9 * no_window.attn_core_s);
  EXPECT_GT(no_window.attn_core_s, 1.5 * lc.attn_core_s);
  // The fused-softmax path computes the whole square either way.
  p.flash_attention = false;
  EXPECT_EQ(layer_cost(m, c, p, 4096, true).attn_core_s, layer_cost(full, c, p, 4096, true).attn_core_s);
}

std::string scenario_text(const std::string& plan_fields) {
  return R"({"format": 1, "model": "llama3-8b", "cluster": {"preset": "dgx-h100", "nodes": 1},
             "plan": {"tp": 1, "pp": 1, "dp": 8, "global_batch": 16, "stack": "fsdp2-eager")" +
         plan_fields + R"(}, "workload": {"seq_len": 8192}})";
}

// plan.attention_kernel: a stated family replaces the stack's ("stack" or absent keeps it);
// FlashAttention-3's figures under fsdp2-eager price the core as the table's FA3 row, and
// the report says which kernel the plan named.
TEST(AttentionKernels, ThePlanCanNameTheKernelFamily) {
  const Result<Scenario> own = parse_scenario(scenario_text(""));
  const Result<Scenario> same = parse_scenario(scenario_text(R"(, "attention_kernel": "stack")"));
  const Result<Scenario> fa3 = parse_scenario(scenario_text(R"(, "attention_kernel": "fa3")"));
  ASSERT_TRUE(own.ok() && same.ok() && fa3.ok());
  EXPECT_EQ(same->plan.attention_kernel, "");
  EXPECT_EQ(fa3->plan.attention_kernel, "fa3");
  const double pace = job_pace(fa3->cluster);
  const LayerCost a = layer_cost(fa3->model, fa3->cluster, fa3->plan, 8192, false);
  const double flops = a.attn_core_flops;
  EXPECT_NEAR(a.attn_core_s, pace * flops / (602 * 1e12), 1e-9 * a.attn_core_s);      // FA3 causal fwd, 8k
  EXPECT_NEAR(a.attn_core_bwd_s, pace * 2.5 * flops / (559 * 1e12), 1e-9 * a.attn_core_bwd_s);  // FA3 bwd, 8k
  const Estimate e_own = estimate(own->model, own->cluster, own->plan, own->workload);
  const Estimate e_same = estimate(same->model, same->cluster, same->plan, same->workload);
  const Estimate e_fa3 = estimate(fa3->model, fa3->cluster, fa3->plan, fa3->workload);
  EXPECT_EQ(estimate_report_json(*own, e_own), estimate_report_json(*same, e_same));
  EXPECT_LT(e_fa3.step_time_s, e_own.step_time_s);  // FA3 is faster than FlashAttention-2 on Hopper
  // The report's compute split shows where: only the attention core's part moves.
  EXPECT_EQ(e_fa3.compute.gemm, e_own.compute.gemm);
  EXPECT_EQ(e_fa3.compute.memory_bound, e_own.compute.memory_bound);
  EXPECT_LT(e_fa3.compute.attention, 0.6 * e_own.compute.attention);  // 602/559 against 333/318 TFLOP/s
  EXPECT_NE(estimate_report_json(*fa3, e_fa3).find(R"("compute_s": {)"), std::string::npos);
  EXPECT_NE(estimate_report_text(*fa3, e_fa3).find("attention core"), std::string::npos);
  EXPECT_NE(estimate_report_json(*fa3, e_fa3).find(R"("attention_kernel": "fa3")"), std::string::npos);
  EXPECT_NE(estimate_report_text(*fa3, e_fa3).find("attention kernel fa3"), std::string::npos);
}

TEST(AttentionKernels, TheLoaderNamesTheFieldForABadKernel) {
  Result<Scenario> s = parse_scenario(scenario_text(R"(, "attention_kernel": "fa4")"));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find(R"(plan.attention_kernel: "fa4" is not one of "stack", "fa2", "cudnn", "fa3")"),
            std::string::npos)
      << s.error().message;
  s = parse_scenario(scenario_text(R"(, "flash_attention": false, "attention_kernel": "cudnn")"));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("plan.attention_kernel: \"cudnn\" is a FlashAttention-class kernel, but "
                                   "plan.flash_attention is false"),
            std::string::npos)
      << s.error().message;
}

}  // namespace
}  // namespace stepcast

// Software-stack profiles (plan.stack) and host dispatch per kernel
// (docs/model-reference.md section 4.3): the kernel count of a layer, a launch-bound step
// by hand, a large model the stack does not change, the default equal to an explicit
// "megatron-core", and the error for an unknown stack.
#include "stepcast/models/stack.h"

#include <gtest/gtest.h>

#include <string>

#include "stepcast/models/collectives.h"
#include "stepcast/models/compute.h"
#include "stepcast/models/estimate.h"
#include "stepcast/models/layer_cost.h"
#include "stepcast/models/names.h"
#include "stepcast/models/params.h"
#include "stepcast/models/presets.h"
#include "stepcast/models/report.h"
#include "stepcast/models/scenario.h"
#include "stepcast/models/sim_time.h"

namespace stepcast {
namespace {

// A Llama-style layer (RMSNorm, RoPE, SwiGLU, no dropout), tiny enough to be launch-bound.
ModelSpec tiny_llama() {
  ModelSpec m;
  m.name = "tiny";
  m.num_layers = 2;
  m.hidden_size = 64;
  m.num_attention_heads = 4;
  m.num_kv_heads = 4;
  m.head_dim = 16;
  m.ffn_hidden_size = 128;
  m.ffn_matrices = 3;
  m.vocab_size = 256;
  m.max_seq_len = 16;
  m.train_seq_len = 16;
  return m;
}

ClusterSpec one_h100() {
  ClusterSpec c = builtin_presets().clusters.at("dgx-h100");
  c.nodes = 1;
  c.gpus_per_node = 1;
  return c;
}

TEST(Stack, EveryNameHasAProfileWithSources) {
  for (const std::string& name : names_of<Stack>()) {
    const StackProfile& s = stack_profile(*parse_stack(name));
    EXPECT_EQ(s.name, name);
    // 39 parameters; the per-module ZeRO-3 fetch adds its gather and three element counts.
    const std::size_t params = s.zero3_fetch == Zero3Fetch::kModuleSync ? 43u : 39u;
    EXPECT_EQ(s.sources.size(), params) << name;
    EXPECT_EQ(s.verification.size(), params) << name;
  }
}

// fsdp2-eager, Llama layer: GEMMs wq wk wv + wo + w1 w3 + w2 = 7; elementwise 2 x 8
// (RMSNorm) + 6 (RoPE) + 2 (residual) + 2 (silu, mul) = 26; attention 1 -> forward 34.
// Backward 2 x 7 + 3 (attention) + 1 x 26 = 43. Host 77 x 10 us = 770 us.
TEST(Stack, Fsdp2EagerLlamaLayerKernelsByHand) {
  Plan p;
  const LayerKernels k = layer_kernels(tiny_llama(), p, false, stack_profile(Stack::kFsdp2Eager));
  EXPECT_EQ(k.fwd, 34);
  EXPECT_EQ(k.bwd, 43);
  EXPECT_NEAR(k.host_s, 770e-6, 1e-15);
  // megatron-core: GEMMs 1 + 1 + 1 + 1 = 4; elementwise 2 + 2 + 2 + 1 = 7; forward 12,
  // backward 8 + 3 + 7 = 18; host 30 x 10 us.
  const LayerKernels mc = layer_kernels(tiny_llama(), p, false, stack_profile(Stack::kMegatronCore));
  EXPECT_EQ(mc.fwd, 12);
  EXPECT_EQ(mc.bwd, 18);
  // With dropout and no FlashAttention, the attention probabilities' dropout is one more
  // forward kernel (and one backward); megatron-core's hidden dropouts stay fused.
  ModelSpec gpt = tiny_llama();
  gpt.dropout = true;
  Plan no_fa;
  no_fa.flash_attention = false;
  const LayerKernels d = layer_kernels(gpt, no_fa, false, stack_profile(Stack::kMegatronCore));
  EXPECT_EQ(d.fwd, 13);
  EXPECT_EQ(d.bwd, 19);
}

// llm-foundry, an MPT layer (LayerNorm, GELU with 2 matrices, learned positions, no
// dropout): GEMMs Wqkv 1 + out-proj 1 + up 1 + down 1 = 4; elementwise LayerNorm 2 +
// residual 2 + GELU 1 = 5; attention 1 -> forward 10; backward 2 x 4 + 3 + 5 = 16; host
// 26 x 10 us = 260 us. fsdp2-eager's separate q, k, v linears make it 6 GEMMs: forward 12,
// backward 2 x 6 + 3 + 5 = 20. Its fused cross entropy keeps 4 bytes per logit: the output
// head's buffer for 4096 tokens of hidden 64 and vocabulary 50368 is
// 4096 x (4 x 64 + 4 x 50368) = 826,277,888 B, against fsdp2-eager's
// 4096 x (4 x 64 + 12 x 50368) = 2,476,736,512 B.
TEST(Stack, LlmFoundryMptLayerByHand) {
  ModelSpec mpt = tiny_llama();
  mpt.norm = NormKind::kLayerNorm;
  mpt.ffn_activation = "gelu";
  mpt.ffn_matrices = 2;
  mpt.position_embedding = PositionEmbedding::kLearned;
  mpt.linear_bias = true;
  mpt.tied_embeddings = true;
  Plan p;
  const LayerKernels k = layer_kernels(mpt, p, false, stack_profile(Stack::kLlmFoundry));
  EXPECT_EQ(k.fwd, 10);
  EXPECT_EQ(k.bwd, 16);
  EXPECT_NEAR(k.host_s, 260e-6, 1e-15);
  const LayerKernels e = layer_kernels(mpt, p, false, stack_profile(Stack::kFsdp2Eager));
  EXPECT_EQ(e.fwd, 12);
  EXPECT_EQ(e.bwd, 20);
  mpt.vocab_size = 50368;
  p.stack = Stack::kLlmFoundry;
  EXPECT_DOUBLE_EQ(output_head_buffer_bytes(mpt, p, 4096), 826'277'888.0);
  p.stack = Stack::kFsdp2Eager;
  EXPECT_DOUBLE_EQ(output_head_buffer_bytes(mpt, p, 4096), 2'476'736'512.0);
  // torchtitan with its loss compiled keeps the 16-bit logits and their gradient, as the fused
  // loss does: 826,277,888 B again.
  p.stack = Stack::kFsdp2CompileLoss;
  EXPECT_DOUBLE_EQ(output_head_buffer_bytes(mpt, p, 4096), 826'277'888.0);
}

// An MoE layer of Qwen3-30B-A3B (128 experts, top-8, SwiGLU, no shared expert) with ep 8:
// 16 local experts. megatron-core (Transformer Engine's GroupedLinear: one cuBLAS GEMM
// launch per local expert on its multi-stream backend, the SwiGLU once on all rows):
// GEMMs qkv 1 + proj 1 + router 1 + 16 x (fc1 1 + fc2 1) = 35; elementwise RMSNorm 2 +
// QK norms 2 + RoPE 2 + residual 2 + router 4 + SwiGLU 1 = 13; attention 1 -> forward 49;
// backward 2 x 35 + 3 + 13 = 86. fsdp2-eager (a loop over the experts): GEMMs 3 + 1 + 1 +
// 16 x (w1 + w3 + w2) = 53; elementwise 16 + 16 (the QK norms' composite RMSNorms) + 6 + 2 +
// 4 + 16 x (silu, mul) = 76 -> forward 130; backward 106 + 3 + 76 = 185. With ep 128 (one
// local expert) the two loops are one launch each: megatron-core 5 GEMMs, forward 19.
TEST(Stack, MoeLayerKernelsByHand) {
  const ModelSpec& m = builtin_presets().models.at("qwen3-30b-a3b");
  ASSERT_TRUE(m.moe.has_value());
  ASSERT_EQ(m.moe->num_experts, 128);
  Plan p;
  p.ep = 8;
  const LayerKernels mc = layer_kernels(m, p, true, stack_profile(Stack::kMegatronCore));
  // Forward: QKV + projection + router + 16 local experts x (FC1 + FC2) = 35 GEMM launches,
  // attention 1, RMSNorm 2, the QK norms 2 (one TENorm each), RoPE 2, residual 2, the
  // router's 31 kernels (fused, as the recipes run it), SwiGLU once on all rows: 76.
  // Backward: 2 x 35 + 3 + 40 = 113.
  EXPECT_EQ(mc.fwd, 76);
  EXPECT_EQ(mc.bwd, 113);
  EXPECT_NEAR(mc.host_s, (76 + 113) * 10e-6, 1e-15);
  const LayerKernels eager = layer_kernels(m, p, true, stack_profile(Stack::kFsdp2Eager));
  EXPECT_EQ(eager.fwd, 130);
  EXPECT_EQ(eager.bwd, 185);
  p.ep = 128;
  const LayerKernels one = layer_kernels(m, p, true, stack_profile(Stack::kMegatronCore));
  EXPECT_EQ(one.fwd, 46);
  EXPECT_EQ(one.bwd, 2 * 5 + 3 + 40);
  // Megatron-Core's "moe" recomputation re-runs the router, the expert GEMMs (one launch
  // per local expert) and the SwiGLU before the backward: 1 + 31 + 16 x 2 + 1 = 65 more.
  p.ep = 8;
  p.recompute = Recompute::kSelective;
  p.recompute_modules = module_bit(RecomputeModule::kMoe);
  EXPECT_EQ(layer_kernels(m, p, true, stack_profile(Stack::kMegatronCore)).bwd, 113 + 65);
}

// Host-device synchronisation in an MoE layer's forward (stack moe_host_sync): Megatron-
// Core's dropless all-to-all dispatcher synchronises once per MoE layer forward when ep > 1
// or more than one expert is local; an eager loop once per local expert (torch.where).
TEST(Stack, MoeHostSynchronisationsPerLayer) {
  const ModelSpec& m = builtin_presets().models.at("qwen3-30b-a3b");
  Plan p;
  p.ep = 8;
  EXPECT_EQ(moe_host_syncs(m, p, stack_profile(Stack::kMegatronCore)), 1);
  EXPECT_EQ(moe_host_syncs(m, p, stack_profile(Stack::kFsdp2Eager)), 16);
  p.ep = 1;
  EXPECT_EQ(moe_host_syncs(m, p, stack_profile(Stack::kMegatronCore)), 1);  // 128 local experts
  EXPECT_EQ(moe_host_syncs(m, p, stack_profile(Stack::kDeepspeedZero)), 128);
  ModelSpec one = m;
  one.moe->num_experts = 1;
  one.moe->top_k = 1;
  EXPECT_EQ(moe_host_syncs(one, p, stack_profile(Stack::kMegatronCore)), 0);
  EXPECT_EQ(moe_host_syncs(builtin_presets().models.at("llama3-8b"), p, stack_profile(Stack::kMegatronCore)), 0);
  // Token dropping (token_dispatcher.py preprocess): padded to capacity the splits are known
  // on the host, no synchronisation; dropping without padding still waits, before the first
  // permutation.
  p.ep = 8;
  ModelSpec padded = m;
  padded.moe->capacity_factor = 1.0;
  padded.moe->pad_to_capacity = true;
  EXPECT_EQ(moe_host_syncs(padded, p, stack_profile(Stack::kMegatronCore)), 0);
  padded.moe->pad_to_capacity = false;
  EXPECT_EQ(moe_host_syncs(padded, p, stack_profile(Stack::kMegatronCore)), 1);
}

// The shipped Qwen3-30B-A3B scenario (megatron-core, ep 8, pp 2 interleaved, m = 32): each MoE
// layer's GPU time (milliseconds) is far above its dispatch (74 + 111 kernels x 10 us, Stack.
// MoeLayerKernelsByHand), so the only host time is the GPU's wait for the launch after each
// forward's synchronisation: 10 us x 24 layers per stage x 32 microbatches = 7.68 ms per step.
// Without MoE synchronisation (moe_host_sync "none" would leave it 0): the host is hidden.
TEST(Stack, MoeDispatcherSynchronisationWaitByHand) {
  const Result<Scenario> s =
      load_scenario_file(std::string(STEPCAST_SOURCE_DIR) + "/scenarios/qwen3-30b-a3b-ep8-16xh100.json");
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(s->plan.accumulation(), 32);
  const LayerCost lc = layer_cost(s->model, s->cluster, s->plan, s->workload.seq_len, true);
  const LayerComm cm = layer_comm(s->model, s->cluster, s->plan, s->workload.seq_len, true, lc);
  ASSERT_GT(lc.fwd_s(), 74 * 10e-6);
  ASSERT_GT(lc.bwd_s(), 111 * 10e-6);
  const HostStall h = host_stall(s->model, s->plan, lc, cm, true);
  EXPECT_NEAR(h.fwd_s, 10e-6, 1e-15);
  EXPECT_EQ(h.bwd_s, 0.0);
  const Estimate e = estimate(s->model, s->cluster, s->plan, s->workload);
  EXPECT_NEAR(e.breakdown.host, 32 * 24 * 10e-6, 1e-12);
  // A tiny launch-bound MoE (hidden 64, 8 experts top-2, fsdp2-eager: a loop with one
  // synchronisation per expert): the forward and the backward each wait for their own
  // dispatch, and the forward for 8 launches more: host - GPU + 8 x 10 us.
  ModelSpec tiny = s->model;
  tiny.num_layers = 2;
  tiny.hidden_size = 64;
  tiny.num_attention_heads = 4;
  tiny.num_kv_heads = 4;
  tiny.head_dim = 16;
  tiny.moe->num_experts = 8;
  tiny.moe->top_k = 2;
  tiny.moe->expert_ffn_hidden_size = 128;
  Plan p;
  p.stack = Stack::kFsdp2Eager;
  const LayerCost tl = layer_cost(tiny, one_h100(), p, 16, true);
  const LayerComm tc = layer_comm(tiny, one_h100(), p, 16, true, tl);
  const LayerKernels k = layer_kernels(tiny, p, true, stack_profile(Stack::kFsdp2Eager));
  ASSERT_GT(k.fwd * 10e-6, tl.fwd_s());
  ASSERT_GT(k.bwd * 10e-6, tl.bwd_s());
  const HostStall th = host_stall(tiny, p, tl, tc, true);
  EXPECT_NEAR(th.total_s(), (k.fwd + k.bwd) * 10e-6 - (tl.fwd_s() + tl.bwd_s() + tc.interference_s) + 8 * 10e-6, 1e-12);
}

// One H100, no parallelism, 2 layers, m = 2 microbatches of one 16-token sequence: each
// layer's GPU time is a few microseconds, its host time 770 us, so every layer takes
// 770 us. step = 77 kernels x 10 us x 2 layers x 2 microbatches + the rest (the logits and
// the optimizer) + eager PyTorch's heavier loss: (46 - 12) B per logit more, 16 x 256 logits
// per microbatch, at 0.8 x 3350 GB/s.
TEST(Stack, LaunchBoundStepByHand) {
  const ModelSpec m = tiny_llama();
  const ClusterSpec c = one_h100();
  Workload w;
  w.seq_len = 16;
  Plan p;
  p.global_batch = 2;  // m = 2
  const Estimate base = estimate(m, c, p, w);
  const LayerCost lc = layer_cost(m, c, p, w.seq_len, false);
  const double gpu_layer = lc.fwd_s() + lc.bwd_s();
  ASSERT_LT(gpu_layer, 770e-6);
  // megatron-core dispatches 30 kernels per layer: 300 us, also above the GPU time here.
  ASSERT_LT(gpu_layer, 300e-6);
  EXPECT_NEAR(base.breakdown.host, 2 * 2 * (300e-6 - gpu_layer), 1e-12);
  const double rest = base.step_time_s - 30 * 10e-6 * 2 * 2;  // logits + optimizer
  p.stack = Stack::kFsdp2Eager;
  const Estimate e = estimate(m, c, p, w);
  // Eager PyTorch also moves more bytes per norm, activation and RoPE element (stack.h), so
  // its layer's GPU time is longer; the host still sets the pace.
  const LayerCost eager = layer_cost(m, c, p, w.seq_len, false);
  const double gpu_eager = eager.fwd_s() + eager.bwd_s();
  ASSERT_GT(gpu_eager, gpu_layer);
  ASSERT_LT(gpu_eager, 770e-6);
  const double loss_extra = 2 * (46.0 - 12.0) * 16 * 256 / (0.8 * 3350e9);
  // ... and its gradient clipping's multiply on every step: 12 B per parameter against
  // Megatron's norm alone, 4 B (one rank holds them all).
  const double clip_extra = (12.0 - 4.0) * static_cast<double>(count_params(m).total) / (0.8 * 3350e9);
  EXPECT_NEAR(e.step_time_s, 77 * 10e-6 * 2 * 2 + rest + loss_extra + clip_extra, 1e-12);
  EXPECT_NEAR(e.breakdown.host, 2 * 2 * (770e-6 - gpu_eager), 1e-12);
  EXPECT_NEAR(e.breakdown.compute - base.breakdown.compute, 2 * 2 * (gpu_eager - gpu_layer) + loss_extra, 1e-12);
}

// Llama-3-70B on 64 H100 (the shipped plan): the GPU runs a layer for milliseconds, far
// above any stack's host time (at most 77 x 10 us), so no stack stalls on its host. The
// fused stacks (megatron-core, fsdp2-compile) move the same bytes in their layers; fsdp2-compile's
// step is longer by its attention and its loss alone (PyTorch SDPA's FlashAttention-2 against Transformer
// Engine's cuDNN kernels, AttentionKernels.LayerCorePricedWithTheStacksKernelFamily): with
// megatron-core's attention time it is the same step. The eager ones (fsdp2-eager,
// deepspeed-zero) are longer still, by their norm, SwiGLU and RoPE traffic
// (Stack.EagerElementwiseTrafficByHand).
TEST(Stack, LargeModelHostHiddenUnderEveryStack) {
  const Result<Scenario> s = load_scenario_file(std::string(STEPCAST_SOURCE_DIR) + "/scenarios/llama3-70b-64xh100.json");
  ASSERT_TRUE(s.ok());
  const Estimate base = estimate(s->model, s->cluster, s->plan, s->workload);
  for (const std::string& name : names_of<Stack>()) {
    Plan p = s->plan;
    p.stack = *parse_stack(name);
    const Estimate e = estimate(s->model, s->cluster, p, s->workload);
    EXPECT_EQ(e.breakdown.host, 0.0) << name;
    if (p.stack == Stack::kFsdp2Compile) {
      EXPECT_GT(e.step_time_s, base.step_time_s) << name;
      // The same step once both run an attention of one stated efficiency (it wins over
      // the kernel tables).
      ClusterSpec same_attention = s->cluster;
      same_attention.gpu.attention_efficiency = 0.5;
      const Estimate a = estimate(s->model, same_attention, p, s->workload);
      const Estimate b = estimate(s->model, same_attention, s->plan, s->workload);
      // ... but for PyTorch's heavier loss on the last stage: (46 - 12) B more per logit,
      // 8192 x 128256/8 logits per microbatch, 32 microbatches, at 0.8 x 3350 GB/s and the
      // job's pace (the slowest of 64 GPUs); and for its gradient clipping, which multiplies
      // every gradient on every step: 12 B per parameter of the optimizer shard against
      // Megatron's norm alone, 4 B, on stage 0 (whose optimizer step ends the step: its last
      // backward is the last to end).
      const double per_microbatch = (46.0 - 12.0) * 8192 * (128256.0 / 8) / (0.8 * 3350e9);
      const RankParams rp0 = rank_params(s->model, p, 0);
      const double clip = (12.0 - 4.0) * rp0.dense / p.dp / (0.8 * 3350e9);
      EXPECT_NEAR(a.step_time_s - b.step_time_s, (32 * per_microbatch + clip) * job_pace(s->cluster), 1e-9) << name;
    } else if (p.stack != Stack::kMegatronCore) {
      EXPECT_GT(e.step_time_s, base.step_time_s) << name;
    }
  }
}

// The elementwise traffic of one Llama-3-8B layer (h 4096, 32/8 heads of 128, F 14336),
// 8192 tokens, tp 1, per stack (models/data/stacks.json, docs/model-reference.md §4.2):
// eager PyTorch's composite RMSNorm moves 36 B per element against the fused kernel's 4,
// its SiLU-and-mul 10 B per inner element against 6, its RoPE 20 B per q or k element
// against 4. Forward difference = (2 x 4096 x 32 + 14336 x 4 + (32 + 8) x 128 x 16) B per
// token at the HBM's 3350 GB/s x 0.8, times the job's pace.
TEST(Stack, EagerElementwiseTrafficByHand) {
  const ModelSpec& m = builtin_presets().models.at("llama3-8b");
  const ClusterSpec c = builtin_presets().clusters.at("dgx-h100");
  Plan p;
  const LayerCost fused = layer_cost(m, c, p, 8192, false);
  p.stack = Stack::kFsdp2Eager;
  const LayerCost eager = layer_cost(m, c, p, 8192, false);
  const double bw = c.gpu.hbm_bandwidth_GBps * 1e9 * c.gpu.hbm_efficiency;
  const double pace = job_pace(c);
  EXPECT_NEAR(eager.attn_elem_s - fused.attn_elem_s, pace * 8192 * (4096 * 32 + 40 * 128 * 16.0) / bw, 1e-12);
  EXPECT_NEAR(eager.mlp_elem_s - fused.mlp_elem_s, pace * 8192 * (4096 * 32 + 14336 * 4.0) / bw, 1e-12);
  EXPECT_EQ(eager.attn_gemm_s, fused.attn_gemm_s);
  p.stack = Stack::kFsdp2Compile;
  EXPECT_EQ(layer_cost(m, c, p, 8192, false).mlp_elem_s, fused.mlp_elem_s);
}

std::string scenario_text(const std::string& stack_field) {
  return R"({"format": 1, "model": "llama3-8b", "cluster": {"preset": "dgx-h100", "nodes": 2},
             "plan": {"tp": 2, "pp": 2, "dp": 4, "global_batch": 64)" + stack_field +
         R"(}, "workload": {"seq_len": 8192}})";
}

TEST(Stack, ExplicitMegatronCoreEqualsAbsent) {
  const Result<Scenario> a = parse_scenario(scenario_text(""));
  const Result<Scenario> b = parse_scenario(scenario_text(R"(, "stack": "megatron-core")"));
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->plan.stack, Stack::kMegatronCore);
  const Estimate ea = estimate(a->model, a->cluster, a->plan, a->workload);
  const Estimate eb = estimate(b->model, b->cluster, b->plan, b->workload);
  EXPECT_EQ(estimate_report_json(*a, ea), estimate_report_json(*b, eb));
  EXPECT_EQ(estimate_report_text(*a, ea), estimate_report_text(*b, eb));
}

TEST(Stack, UnknownStackNamesTheFieldAndTheClosestName) {
  const Result<Scenario> s = parse_scenario(scenario_text(R"(, "stack": "fsdp2-eagre")"));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find(
                "plan.stack: \"fsdp2-eagre\" is not one of \"megatron-core\", \"fsdp2-eager\", "
                "\"fsdp2-compile\", \"deepspeed-zero\", \"deepspeed-zero-2021\", "
                "\"megatron-deepspeed\", \"llm-foundry\", \"fsdp2-compile-loss\"; did you mean \"fsdp2-eager\"?"),
            std::string::npos)
      << s.error().message;
}

}  // namespace
}  // namespace stepcast

namespace stepcast {
namespace {

// The loss's buffers per logit (stack.h loss_bytes_per_logit): Megatron-Core's fused vocab-
// parallel cross entropy keeps its fp32 logits (4 B); eager PyTorch's log_softmax + nll_loss
// hold three fp32 tensors at the start of their backward (12 B). Llama-3-8B, one 8192-token
// sequence per rank, one stage: 8 B x 8192 x 128,256 more on the (last) stage.
TEST(Stack, EagerLossBuffersByHand) {
  const ModelSpec& m = builtin_presets().models.at("llama3-8b");
  const ClusterSpec c = builtin_presets().clusters.at("dgx-h100");
  Plan p;
  p.dp = 8;
  p.global_batch = 8;
  const Workload w{8192, 0, 0};
  const double fused = stage_memory(m, c, p, w, 0).activations;
  p.stack = Stack::kFsdp2Eager;
  EXPECT_DOUBLE_EQ(stage_memory(m, c, p, w, 0).activations - fused, 8.0 * 8192 * 128'256);
  EXPECT_DOUBLE_EQ(output_head_buffer_bytes(m, p, 8192), 8192 * (4.0 * 4096 + 12.0 * 128'256));
}

}  // namespace
}  // namespace stepcast

namespace stepcast {
namespace {

// megatron-deepspeed (docs/model-reference.md 5.10): DeepSpeed's pipeline engine with its
// BF16_Optimizer all-reduces the fp32 gradients after the last microbatch and all-gathers the
// bf16 partitions after the step, keeping a whole fp32 master copy. Llama-3-8B on one DGX H100
// (tp 1, pp 1, dp 8, ZeRO 1): nothing hides the step's end, so the data-parallel part is the
// all-reduce of the rank's P fp32 gradients plus the all-gather of its P bf16 weights, priced
// by collective_cost; megatron-core's reduce-scatter in overlapped buckets exposes less. The
// optimizer's memory: Adam's moments sharded (8 B x P / 8) and the master whole (4 B x P).
TEST(Stack, MegatronDeepspeedAllReducesAfterTheBackwardAndKeepsTheWholeMaster) {
  auto load = [](const std::string& stack) {
    const Result<Scenario> s = parse_scenario(R"({"format": 1, "model": "llama3-8b", "cluster": "dgx-h100",
        "plan": {"tp": 1, "pp": 1, "dp": 8, "zero": 1, "global_batch": 16, "recompute": "full",
                 "stack": ")" + stack + R"("}, "workload": {"seq_len": 4096}})");
    EXPECT_TRUE(s.ok()) << s.error().message;
    return *s;
  };
  const Scenario ds = load("megatron-deepspeed"), mc = load("megatron-core");
  const Estimate e = estimate(ds.model, ds.cluster, ds.plan, ds.workload);
  const RankParams rp = rank_params(ds.model, ds.plan, 0);
  const double P = rp.dense + rp.expert;
  const GroupShape g = group_shape(8, 1, 8);
  // The gradients' all-reduce, the gradient norm's all-reduce of one fp32 scalar over the
  // 8 ranks, the parameters' all-gather after the update.
  const double by_hand = collective_cost(ds.cluster, CollKind::kAllReduce, g, P * 4).time_s +
                         SimTime::from_s(collective_cost(ds.cluster, CollKind::kAllReduce, g, 4).time_s).seconds() +
                         collective_cost(ds.cluster, CollKind::kAllGather, g, P * 2).time_s;
  EXPECT_NEAR(e.exposed.dp, by_hand, 1e-9 * by_hand);
  const Estimate m = estimate(mc.model, mc.cluster, mc.plan, mc.workload);
  EXPECT_LT(m.exposed.dp, e.exposed.dp);
  EXPECT_NEAR(e.memory.optimizer, P * 8 / 8 + P * 4, 1e-6 * P);
  EXPECT_NEAR(m.memory.optimizer, P * 12 / 8, 1e-6 * P);
  // The plan asked for overlap (the default): the estimate says it does not apply.
  bool said = false;
  for (const std::string& n : e.notes) said |= n.find("plan.overlap_grad_reduce does not apply") != std::string::npos;
  EXPECT_TRUE(said);
}

// The loader's message for scenario_text's two-stage plan (pp 2) under `stack` with ZeRO `z`;
// "(accepted)" when it loads.
std::string zero_refusal(const std::string& stack, int z) {
  const Result<Scenario> s =
      parse_scenario(scenario_text(R"(, "stack": ")" + stack + R"(", "zero": )" + std::to_string(z)));
  return s.ok() ? std::string("(accepted)") : s.error().message;
}

// DeepSpeed's pipeline engine runs ZeRO 0 or 1: zero 2 and 3 are refused, naming the field.
TEST(Stack, MegatronDeepspeedRefusesZeroTwoAndThree) {
  for (int z : {2, 3}) {
    const std::string why = zero_refusal("megatron-deepspeed", z);
    EXPECT_NE(why.find("plan.zero: " + std::to_string(z) +
                       " is not run by plan.stack \"megatron-deepspeed\": DeepSpeed's pipeline engine "
                       "with BF16_Optimizer runs ZeRO 0 or 1"),
              std::string::npos)
        << why;
  }
  EXPECT_EQ(zero_refusal("megatron-deepspeed", 1), "(accepted)");
}

// Composer (llm-foundry) has no pipeline and no context parallelism: refused, naming the field.
TEST(Stack, LlmFoundryRefusesPipelineAndContextParallelism) {
  const Result<Scenario> pp = parse_scenario(scenario_text(R"(, "stack": "llm-foundry", "zero": 3)"));
  ASSERT_FALSE(pp.ok());
  EXPECT_NE(pp.error().message.find("plan.pp: 2 is not run by plan.stack \"llm-foundry\": Composer has no pipeline "
                                    "parallelism"),
            std::string::npos)
      << pp.error().message;
  const Result<Scenario> cp = parse_scenario(R"({"format": 1, "model": "llama3-8b", "cluster": "dgx-h100",
      "plan": {"tp": 1, "pp": 1, "cp": 2, "dp": 4, "zero": 3, "global_batch": 8, "stack": "llm-foundry"},
      "workload": {"seq_len": 8192}})");
  ASSERT_FALSE(cp.ok());
  EXPECT_NE(cp.error().message.find("plan.cp: 2 is not run by plan.stack \"llm-foundry\""), std::string::npos)
      << cp.error().message;
  EXPECT_TRUE(parse_scenario(R"({"format": 1, "model": "llama3-8b", "cluster": "dgx-h100",
      "plan": {"tp": 2, "pp": 1, "dp": 4, "zero": 3, "global_batch": 8, "stack": "llm-foundry"},
      "workload": {"seq_len": 8192}})")
                  .ok());
}

// The limits are profile parameters (models/data/stacks.json), one per stack by hand:
// Composer none beside a pipeline and no context parallelism; DeepSpeed's pipeline engine
// ZeRO below 2 ("ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism"), and
// megatron-deepspeed ZeRO 0 or 1 throughout; the others ZeRO 3 everywhere.
TEST(Stack, WhatEachStackRunsIsAProfileParameter) {
  struct Want {
    Stack stack;
    int max_zero, pipeline_max_zero;
    bool cp;
  };
  for (const Want& w : {Want{Stack::kMegatronCore, 3, 3, true}, Want{Stack::kFsdp2Eager, 3, 3, true},
                        Want{Stack::kFsdp2Compile, 3, 3, true}, Want{Stack::kFsdp2CompileLoss, 3, 3, true},
                        Want{Stack::kDeepspeedZero, 3, 1, true}, Want{Stack::kDeepspeedZero2021, 3, 1, true},
                        Want{Stack::kMegatronDeepspeed, 1, 1, true}, Want{Stack::kLlmFoundry, 3, -1, false}}) {
    const StackProfile& s = stack_profile(w.stack);
    EXPECT_EQ(s.max_zero, w.max_zero) << s.name;
    EXPECT_EQ(s.pipeline_max_zero, w.pipeline_max_zero) << s.name;
    EXPECT_EQ(s.context_parallel, w.cp) << s.name;
  }
  // DeepSpeed ZeRO 2 or 3 beside a pipeline: refused with the engine's own words, naming
  // plan.zero; ZeRO 3 without a pipeline and ZeRO 1 with one are run.
  for (int z : {2, 3}) {
    const std::string why = zero_refusal("deepspeed-zero", z);
    EXPECT_NE(why.find("plan.zero: " + std::to_string(z) +
                       " beside pp 2 is not run by plan.stack \"deepspeed-zero\": DeepSpeed's "
                       "PipelineEngine asserts zero_optimization_stage() < 2"),
              std::string::npos)
        << why;
  }
  EXPECT_EQ(zero_refusal("deepspeed-zero", 1), "(accepted)");
  EXPECT_TRUE(parse_scenario(R"({"format": 1, "model": "llama3-8b", "cluster": "dgx-h100",
      "plan": {"tp": 1, "pp": 1, "dp": 8, "zero": 3, "global_batch": 8, "stack": "deepspeed-zero-2021"},
      "workload": {"seq_len": 2048}})")
                  .ok());
}

}  // namespace
}  // namespace stepcast

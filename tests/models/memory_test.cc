// Memory per rank: model states by ZeRO stage (docs/cost-model-sources.md section 2.1), activations
// per layer against Korthikanti et al. 2022 (section 2.2) and in-flight microbatches per
// pipeline schedule (sections 2.2 and 3).
#include <gtest/gtest.h>

#include <cstdint>

#include "stepcast/models/estimate.h"
#include "stepcast/models/params.h"
#include "stepcast/models/presets.h"
#include "stepcast/models/stack.h"

namespace stepcast {
namespace {

const ModelSpec& preset_model(const char* name) { return builtin_presets().models.at(name); }
const ClusterSpec& preset_cluster(const char* name) { return builtin_presets().clusters.at(name); }

// Llama-3-70B, TP8 PP4, N_d = 16 data-parallel replicas, 8192-token sequences.
Plan llama_tp8_pp4(int zero, int grad_bytes) {
  Plan p;
  p.tp = 8;
  p.pp = 4;
  p.dp = 16;
  p.zero = zero;
  p.grad_bytes = grad_bytes;
  p.global_batch = 64;
  return p;
}

double model_states(const MemoryBreakdown& m) { return m.params + m.grads + m.optimizer; }

TEST(Memory, ZeroStagesFollowThe16BytesPerParameterFamilyWithBf16Grads) {
  const ModelSpec& m = preset_model("llama3-70b");
  const ClusterSpec& c = preset_cluster("dgx-h100");
  const Workload w{8192, 0, 0};
  // Psi = parameters of a stage-0 rank before sharding (params_test derives it):
  // 20*106,971,136 + 131,334,144 = 2,270,756,864.
  const double psi = rank_params(m, llama_tp8_pp4(0, 2), 0).dense;
  ASSERT_DOUBLE_EQ(psi, 2'270'756'864.0);
  const double nd = 16;
  // Bytes per parameter: bf16 weight 2 + bf16 grad 2 + Adam K = 12 (section 2.1).
  // DDP: 16 Psi = 36,332,109,824.
  const MemoryBreakdown z0 = stage_memory(m, c, llama_tp8_pp4(0, 2), w, 0);
  EXPECT_DOUBLE_EQ(z0.params, 2 * psi);
  EXPECT_DOUBLE_EQ(z0.grads, 2 * psi);
  EXPECT_DOUBLE_EQ(z0.optimizer, 12 * psi);
  EXPECT_DOUBLE_EQ(model_states(z0), 16 * psi);
  // ZeRO-1: 4 Psi + 12 Psi/N_d = 9,083,027,456 + 1,703,067,648 = 10,786,095,104.
  const MemoryBreakdown z1 = stage_memory(m, c, llama_tp8_pp4(1, 2), w, 0);
  EXPECT_DOUBLE_EQ(z1.optimizer, 12 * psi / nd);
  EXPECT_DOUBLE_EQ(model_states(z1), 4 * psi + 12 * psi / nd);
  // ZeRO-2: 2 Psi + 14 Psi/N_d = 4,541,513,728 + 1,986,912,256 = 6,528,425,984.
  const MemoryBreakdown z2 = stage_memory(m, c, llama_tp8_pp4(2, 2), w, 0);
  EXPECT_DOUBLE_EQ(z2.grads, 2 * psi / nd);
  EXPECT_DOUBLE_EQ(model_states(z2), 2 * psi + 14 * psi / nd);
  // ZeRO-3: 16 Psi/N_d = 2,270,756,864 (= Psi bytes at N_d = 16).
  const MemoryBreakdown z3 = stage_memory(m, c, llama_tp8_pp4(3, 2), w, 0);
  EXPECT_DOUBLE_EQ(z3.params, 2 * psi / nd);
  EXPECT_DOUBLE_EQ(model_states(z3), 16 * psi / nd);
}

TEST(Memory, Fp32GradsGiveMegatrons18BytesAnd6Plus12OverNd) {
  const ModelSpec& m = preset_model("llama3-70b");
  const ClusterSpec& c = preset_cluster("dgx-h100");
  const Workload w{8192, 0, 0};
  const double psi = 2'270'756'864.0;  // stage-0 rank, as above
  // Megatron's estimator (section 2.1): bf16 weight 2 + fp32 grad 4 + 12 = 18 Psi
  // without the distributed optimizer = 40,873,623,552 ...
  EXPECT_DOUBLE_EQ(model_states(stage_memory(m, c, llama_tp8_pp4(0, 4), w, 0)), 18 * psi);
  // ... and (6 + 12/N_d) Psi with it (ZeRO-1) = 13,624,541,184 + 1,703,067,648.
  EXPECT_DOUBLE_EQ(model_states(stage_memory(m, c, llama_tp8_pp4(1, 4), w, 0)),
                   6 * psi + 12 * psi / 16);
}

TEST(Memory, ZeroDivisorIsDataParallelTimesContextParallel) {
  // Megatron shards dense weights over the DP group including CP ranks (section 2.1):
  // dp 8 x cp 2 shards exactly like dp 16.
  const ModelSpec& m = preset_model("llama3-70b");
  const ClusterSpec& c = preset_cluster("dgx-h100");
  const Workload w{8192, 0, 0};
  Plan with_cp = llama_tp8_pp4(3, 2);
  with_cp.dp = 8;
  with_cp.cp = 2;
  const MemoryBreakdown a = stage_memory(m, c, with_cp, w, 0);
  const MemoryBreakdown b = stage_memory(m, c, llama_tp8_pp4(3, 2), w, 0);
  // 16 Psi / 16 = 2,270,756,864 both ways.
  EXPECT_DOUBLE_EQ(model_states(a), 2'270'756'864.0);
  EXPECT_DOUBLE_EQ(model_states(b), 2'270'756'864.0);
}

TEST(Memory, Llama3_70bOn64DataParallelRanksMatchesSection2_1) {
  // Whole model per rank (tp = pp = 1), Psi = 70,553,706,496, N_d = 64, 2+2+12 bytes:
  // 16 Psi = 1128.86 GB; 4 Psi + 12 Psi/64 = 295.44 GB; 2 Psi + 14 Psi/64 = 156.54 GB;
  // 16 Psi/64 = 17.64 GB -- section 2.1 prints 1128.9 / 295.4 / 156.5 / 17.6 GB.
  const ModelSpec& m = preset_model("llama3-70b");
  const ClusterSpec& c = preset_cluster("dgx-h100");
  const Workload w{8192, 0, 0};
  const double printed_GB[4] = {1128.9, 295.4, 156.5, 17.6};
  for (int zero = 0; zero <= 3; ++zero) {
    Plan p;
    p.dp = 64;
    p.zero = zero;
    p.grad_bytes = 2;
    p.global_batch = 64;
    EXPECT_NEAR(model_states(stage_memory(m, c, p, w, 0)) / 1e9, printed_GB[zero], 0.05)
        << "zero " << zero;
  }
}

// GPT-3 175B as Korthikanti et al. count it: h=12288, a=96, s=2048, b=1, 16-bit
// activations, 1-byte dropout masks, attention scores materialised. The preset does not
// set `dropout` (it reads false), so the test turns it on.
ModelSpec gpt3_with_dropout() {
  ModelSpec m = preset_model("gpt3-175b");
  m.dropout = true;
  return m;
}
Plan korthikanti_plan(int tp, bool sp, Recompute rc) {
  Plan p;
  p.tp = tp;
  p.sequence_parallel = sp;
  p.recompute = rc;
  p.flash_attention = false;
  p.microbatch = 1;
  return p;
}

// s*b*h = 2048*1*12288 = 25,165,824; 5*a*s/h = 5*96*2048/12288 = 80.
constexpr double kSbh = 25'165'824.0;

TEST(Memory, Gpt3LayerActivationsMatchKorthikantiTable2) {
  const ModelSpec m = gpt3_with_dropout();
  // No parallelism: sbh*(34 + 5as/h) = sbh*114 = 2,868,903,936 bytes.
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, korthikanti_plan(1, false, Recompute::kNone), 2048, false),
                   kSbh * (34 + 80));
  // TP t=8 without SP: sbh*(10 + 24/t + 5as/(ht)) = sbh*(10 + 3 + 10) = 578,813,952.
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, korthikanti_plan(8, false, Recompute::kNone), 2048, false),
                   kSbh * (10 + 24.0 / 8 + 80.0 / 8));
  // TP + SP: sbh*(34 + 5as/h)/t = sbh*114/8 = 358,612,992.
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, korthikanti_plan(8, true, Recompute::kNone), 2048, false),
                   kSbh * 114 / 8);
  // TP + SP + selective recompute (the s^2 terms are recomputed): 34 sbh/t = 106,954,752.
  EXPECT_DOUBLE_EQ(
      layer_activation_bytes(m, korthikanti_plan(8, true, Recompute::kSelective), 2048, false),
      34 * kSbh / 8);
  // Full recompute: only the layer input, 2 sbh/t with SP = 6,291,456 ...
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, korthikanti_plan(8, true, Recompute::kFull), 2048, false),
                   2 * kSbh / 8);
  // ... and 2 sbh = 50,331,648 without SP (the input is replicated on the TP ranks).
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, korthikanti_plan(8, false, Recompute::kFull), 2048, false),
                   2 * kSbh);
}

TEST(Memory, FirstStageHoldsTokenIdsAndTheEmbeddingDropoutMaskByHand) {
  // GPT-3 175B with dropout, tp 8 + SP, pp 8 (12 layers a stage), 1F1B, 64 microbatches of
  // one 2048-token sequence, selective recomputation (34 sbh/t per layer). Stage 0 holds
  // p - 0 = 8 microbatches, each with its 12 layers, its int64 token ids (8 s) and the
  // embedding dropout's 1-byte mask, split by t with SP (s b h / t): Megatron's estimator's
  // "Inputs to embedding" and "Dropout in embedding layer" terms.
  const ModelSpec m = gpt3_with_dropout();
  Plan p = korthikanti_plan(8, true, Recompute::kSelective);
  p.pp = 8;
  p.global_batch = 64;
  const Workload w{2048, 0, 0};
  // Besides, once: the layer whose backward recomputes its attention core holds the scores
  // again, 5 a s^2 b / t (softmax output 2, dropout mask 1, dropout output 2 B per score)
  // = 10 sbh at t = 8.
  const ClusterSpec& c = preset_cluster("dgx-a100");
  EXPECT_DOUBLE_EQ(stage_memory(m, c, p, w, 0).activations, 8 * (12 * 34 * kSbh / 8 + 8 * 2048 + kSbh / 8) + 10 * kSbh);
  // Without SP the mask is whole on every TP rank (s b h).
  p.sequence_parallel = false;
  const double layer = layer_activation_bytes(m, p, 2048, false);
  EXPECT_DOUBLE_EQ(stage_memory(m, c, p, w, 0).activations, 8 * (12 * layer + 8 * 2048 + kSbh) + 10 * kSbh);
  // Without dropout, no mask: the token ids alone (and 2 a s^2 b / t = 4 sbh recomputed).
  ModelSpec nodrop = m;
  nodrop.dropout = false;
  const double layer_nodrop = layer_activation_bytes(nodrop, p, 2048, false);
  EXPECT_DOUBLE_EQ(stage_memory(nodrop, c, p, w, 0).activations, 8 * (12 * layer_nodrop + 8 * 2048) + 4 * kSbh);
}

TEST(Memory, LayerActivationsScaleLinearlyWithMicrobatch) {
  // Every term of Korthikanti's table carries one factor b: b = 4 holds 4x b = 1.
  const ModelSpec m = gpt3_with_dropout();
  Plan p = korthikanti_plan(8, false, Recompute::kNone);
  p.microbatch = 4;
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, p, 2048, false),
                   4 * kSbh * (10 + 24.0 / 8 + 80.0 / 8));
}

TEST(Memory, WithoutDropoutAGptLayerDropsTheMasksAndDropoutOutputs) {
  // Korthikanti's 34 = attention 11 + MLP 19 + norms 4, of which 2 are the two 1-byte
  // dropout masks (attention output, MLP output); the s^2 term 5as/h = softmax output 2 +
  // dropout mask 1 + dropout output 2 per score. Without dropout: sbh*(32 + 2as/h)
  // = sbh*(32 + 32) = 1,610,612,736 bytes.
  ModelSpec m = gpt3_with_dropout();
  m.dropout = false;
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, korthikanti_plan(1, false, Recompute::kNone), 2048, false),
                   kSbh * 64);
}

TEST(Memory, Llama3_70bLayerActivationsAre33_5SbhWithFlashAttention) {
  // Section 2.2 Llama-style count, 2 bytes per element, fused SwiGLU (6F):
  //   s*b*[2h + 2h + 2*a*d_h + 4*g*d_h + 2*a*d_h + 4a + 2h + 2h + 6F]
  //   = s*b*[8*8192 + 4*8192 + 4*1024 + 4*64 + 6*28672] = s*b*274,688 = 33.53 sbh,
  // the lower end of the "33.5-40.5 sbh" range; s = 8192, b = 1: 2,250,244,096 bytes.
  const ModelSpec& m = preset_model("llama3-70b");
  Plan p;
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, p, 8192, false), 8192.0 * 274'688);
  // TP 8 + SP divides every term by 8 (g = 8 KV heads split one per rank): s*b*34,336.
  p.tp = 8;
  p.sequence_parallel = true;
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, p, 8192, false), 8192.0 * 34'336);
}

Plan pipeline(Schedule s, int pp, int v, std::int64_t m) {
  Plan p;
  p.pp = pp;
  p.schedule = s;
  p.virtual_stages = v;
  p.microbatch = 1;
  p.dp = 1;
  p.global_batch = m;  // m = global_batch / (microbatch * dp)
  return p;
}

TEST(Memory, OneFOneBStageHoldsPMinusRMicrobatchesCappedAtM) {
  // PipeDream-Flush: warm-up p - r - 1 forwards, +1 in steady state (section 2.2).
  for (int r = 0; r < 4; ++r) {
    EXPECT_DOUBLE_EQ(inflight_microbatches(pipeline(Schedule::kOneFOneB, 4, 1, 16), r), 4 - r);
  }
  // m = 2 < p: never more than m in flight.
  EXPECT_DOUBLE_EQ(inflight_microbatches(pipeline(Schedule::kOneFOneB, 4, 1, 2), 0), 2);
  EXPECT_DOUBLE_EQ(inflight_microbatches(pipeline(Schedule::kOneFOneB, 4, 1, 2), 3), 1);
}

TEST(Memory, GpipeStageHoldsAllMMicrobatches) {
  // All forwards before any backward: m on every stage.
  EXPECT_DOUBLE_EQ(inflight_microbatches(pipeline(Schedule::kGpipe, 4, 1, 16), 0), 16);
  EXPECT_DOUBLE_EQ(inflight_microbatches(pipeline(Schedule::kGpipe, 4, 1, 16), 3), 16);
}

TEST(Memory, InterleavedFirstStageHoldsPPlusPMinus1OverVMicrobatches) {
  // Megatron warm-up 2(p-r-1) + (v-1)p chunk-microbatches, +1, over v chunks per stage.
  // r = 0: (2(p-1) + (v-1)p + 1)/v = p + (p-1)/v; p = 4, v = 2: 4 + 1.5 = 5.5, i.e.
  // L/p * 5.5 layer-microbatches = L*(1 + (p-1)/(pv)) = 1.375 L (section 2.2).
  EXPECT_DOUBLE_EQ(inflight_microbatches(pipeline(Schedule::kInterleaved, 4, 2, 64), 0), 4 + 3.0 / 2);
  // p = 8, v = 4: 8 + 7/4 = 9.75.
  EXPECT_DOUBLE_EQ(inflight_microbatches(pipeline(Schedule::kInterleaved, 8, 4, 64), 0), 8 + 7.0 / 4);
  // Last stage r = p-1: ((v-1)p + 1)/v = (4 + 1)/2 = 2.5.
  EXPECT_DOUBLE_EQ(inflight_microbatches(pipeline(Schedule::kInterleaved, 4, 2, 64), 3), 2.5);
  // Few microbatches: capped at all m*v chunks, i.e. m = 2.
  EXPECT_DOUBLE_EQ(inflight_microbatches(pipeline(Schedule::kInterleaved, 4, 2, 2), 0), 2);
}

TEST(Memory, MiddleStageActivationsAreInflightTimesLayersTimesPerLayer) {
  // A middle stage has neither token ids (first) nor logits (last): its activations are
  // in-flight microbatches x its layers x one layer's bytes. Llama-3-70B TP8 PP4 SP,
  // selective recompute (the core attention), m = 64/(1*2) = 32; stage 1 holds
  // min(4 - 1, 32) = 3 microbatches of 20 layers of 8192*34,304 bytes (the test above's
  // 34,336 without FlashAttention's fp32 log-sum-exp, 4 B x 8 heads, which the recomputed
  // core attention drops), plus that log-sum-exp of the one layer being recomputed:
  // 3 * 20 * 281,018,368 + 8192 * 32 = 16,861,364,224.
  const ModelSpec& m = preset_model("llama3-70b");
  const ClusterSpec& c = preset_cluster("dgx-h100");
  Plan p;
  p.tp = 8;
  p.pp = 4;
  p.dp = 2;
  p.sequence_parallel = true;
  p.recompute = Recompute::kSelective;
  p.global_batch = 64;
  const Workload w{8192, 0, 0};
  EXPECT_DOUBLE_EQ(stage_memory(m, c, p, w, 1).activations, 3 * 20 * 8192.0 * 34'304 + 8192.0 * 32);
  p.recompute = Recompute::kNone;
  EXPECT_DOUBLE_EQ(stage_memory(m, c, p, w, 1).activations, 3 * 20 * 8192.0 * 34'336);
  // Full recompute keeps 2sbh/t per layer (SP) = 2*8192*8192/8 = 16,777,216 per layer and
  // microbatch, plus one layer's full activations while it is recomputed (as kept without
  // recomputation): 3*20*16,777,216 + 281,280,512 = 1,287,913,472.
  p.recompute = Recompute::kFull;
  EXPECT_DOUBLE_EQ(stage_memory(m, c, p, w, 1).activations,
                   3 * 20 * 16'777'216.0 + 8192.0 * 34'336);
}

}  // namespace
}  // namespace stepcast

namespace stepcast {
namespace {

// FP8 as Transformer Engine runs it, Llama-3-70B (h 8192, 64 heads, 8 KV heads, F 28672),
// tp 4 with sequence parallelism, FlashAttention, one 8192-token sequence. Per token:
//  - QKV and FFN inputs (norm outputs, h/t each with SP) are kept as FP8 copies: 2 x 1 x
//    8192/4 = 4096 bytes fewer;
//  - the out-projection input O (a_r d_v = 16 x 128 = 2048 wide) stays 16-bit for the
//    FlashAttention backward and gains the projection's FP8 copy: 2048 bytes more;
//  - the down-projection input (F/t = 7168 wide) is kept as FP8: 7168 bytes fewer.
// Net: -9216 bytes per token.
TEST(Memory, Fp8KeepsGemmInputsAsFp8CopiesByHand) {
  const ModelSpec& m = builtin_presets().models.at("llama3-70b");
  Plan p;
  p.tp = 4;
  p.sequence_parallel = true;
  const double bf16 = layer_activation_bytes(m, p, 8192, false);
  p.precision = Precision::kFp8;
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, p, 8192, false) - bf16, -9216.0 * 8192);
}

// The FP8 weight cache: each layer weight's FP8 copy and transpose, 2 bytes per layer
// parameter on the rank; the embedding and output layer are not FP8.
TEST(Memory, Fp8AddsTwoBytesPerLayerParameterForTheWeightCache) {
  const ModelSpec& m = builtin_presets().models.at("llama3-70b");
  ClusterSpec c = builtin_presets().clusters.at("dgx-h100");
  c.nodes = 4;
  Plan p;
  p.tp = 4;
  p.pp = 8;
  p.sequence_parallel = true;
  const Workload w{8192, 0, 0};
  const double bf16 = stage_memory(m, c, p, w, 0).params;
  p.precision = Precision::kFp8;
  // Stage 0 holds 10 of the 80 layers; one layer's rank parameters as params_test counts them.
  const double layer = layer_rank_params(m, p, false).dense;
  EXPECT_DOUBLE_EQ(stage_memory(m, c, p, w, 0).params - bf16, 2.0 * 10 * layer);
}

// torchao's Float8Linear (the fsdp2 stacks' FP8) casts the weight in every forward and keeps
// no FP8 copy across microbatches: an FP8 plan's weights are the 16-bit plan's.
TEST(Memory, Fp8UnderTorchaoKeepsNoWeightCache) {
  const ModelSpec& m = builtin_presets().models.at("llama3-8b");
  ClusterSpec c = builtin_presets().clusters.at("dgx-h100");
  Plan p;
  p.dp = 8;
  p.zero = 3;
  p.stack = Stack::kFsdp2Compile;
  const Workload w{8192, 0, 0};
  const double bf16 = stage_memory(m, c, p, w, 0).params;
  p.precision = Precision::kFp8;
  EXPECT_DOUBLE_EQ(stage_memory(m, c, p, w, 0).params, bf16);
  EXPECT_FALSE(stack_profile(Stack::kFsdp2Eager).fp8_weight_cache);
  EXPECT_TRUE(stack_profile(Stack::kMegatronCore).fp8_weight_cache);
  // The same plan under Megatron-Core caches 2 bytes per layer parameter (not sharded).
  p.stack = Stack::kMegatronCore;
  EXPECT_DOUBLE_EQ(stage_memory(m, c, p, w, 0).params - bf16, 2.0 * 32 * layer_rank_params(m, p, false).dense);
}

}  // namespace
}  // namespace stepcast

namespace stepcast {
namespace {

// Offload (docs/model-reference.md §3.5), Llama-3-70B on one DGX H100, tp 8, sequence
// parallelism, ZeRO 0, one 8192-token microbatch (1F1B on one stage: one in flight). P is
// the rank's parameter count (params_test counts it).
TEST(Offload, MemoryMovesToTheHostByHand) {
  const ModelSpec& m = builtin_presets().models.at("llama3-70b");
  const ClusterSpec c = builtin_presets().clusters.at("dgx-h100");
  Plan p;
  p.tp = 8;
  p.sequence_parallel = true;
  p.global_batch = 1;
  const Workload w{8192, 0, 0};
  const MemoryBreakdown base = stage_memory(m, c, p, w, 0);
  const double P = rank_params(m, p, 0).dense;
  const double layer = layer_rank_params(m, p, false).dense;
  const double a = layer_activation_bytes(m, p, 8192, false);
  EXPECT_EQ(base.host, 0.0);
  // Optimizer states (12 B) and an fp32 gradient copy (4 B) per parameter go to the host.
  p.offload_optimizer = 1;
  MemoryBreakdown mem = stage_memory(m, c, p, w, 0);
  EXPECT_EQ(mem.optimizer, 0.0);
  EXPECT_DOUBLE_EQ(mem.host, 16 * P);
  // Activations of half the 80 layers (the first 40), one layer's worth kept for the transfer.
  p.offload_activations = 0.5;
  mem = stage_memory(m, c, p, w, 0);
  EXPECT_NEAR(mem.activations, base.activations - 40 * a, 1e-3 * a);
  EXPECT_NEAR(mem.buffers, base.buffers + a, 1e-3 * a);
  EXPECT_NEAR(mem.host, 16 * P + 40 * a, 1e-3 * a);
  // Weights of a quarter of the layers (20), two layers' weights staged (in use, prefetched).
  p.offload_weights = 0.25;
  mem = stage_memory(m, c, p, w, 0);
  EXPECT_NEAR(mem.params, base.params - 2 * 20 * layer, 1.0);
  EXPECT_NEAR(mem.buffers, base.buffers + a + 2 * 2 * layer, 1.0);
  EXPECT_NEAR(mem.host, 16 * P + 40 * a + 2 * 20 * layer, 1.0);
  // Each GPU's share of the node's 2 TiB host memory: 256 GiB.
  EXPECT_DOUBLE_EQ(mem.host_usable, 256.0 * 1024 * 1024 * 1024);
  EXPECT_TRUE(mem.fits);
}

TEST(Offload, HostMemoryIsPartOfTheFit) {
  const ModelSpec& m = builtin_presets().models.at("llama3-70b");
  ClusterSpec c = builtin_presets().clusters.at("dgx-h100");
  c.host_memory_GiB = 512;  // 64 GiB per GPU: less than the 8.8 G x 16 B the optimizer needs
  Plan p;
  p.tp = 8;
  p.sequence_parallel = true;
  p.global_batch = 1;
  p.recompute = Recompute::kFull;
  p.offload_optimizer = 1;
  const Estimate e = estimate(m, c, p, Workload{8192, 0, 0});
  EXPECT_LT(e.memory.total, e.memory.usable);
  EXPECT_FALSE(e.memory.fits);
  ASSERT_FALSE(e.notes.empty());
  EXPECT_EQ(e.notes.back().rfind("does not fit in host memory: stage 0 offloads 131.4 GiB per GPU, 64.0 GiB is each "
                                 "GPU's share of the node's 512 GiB",
                                 0),
            0u)
      << e.notes.back();
}

}  // namespace
}  // namespace stepcast

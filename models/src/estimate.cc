#include "stepcast/models/estimate.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <memory>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "stepcast/models/band.h"
#include "stepcast/models/collectives.h"
#include "stepcast/models/compute.h"
#include "stepcast/models/layer_cost.h"
#include "stepcast/models/lower.h"
#include "stepcast/models/names.h"
#include "stepcast/models/params.h"
#include "stepcast/models/program.h"
#include "stepcast/models/stack.h"
#include "stepcast/models/zero3_fetch.h"

namespace stepcast {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kWeightBytes = 2;            // bf16 weights (fp8 runs keep bf16 masters too)
constexpr double kMasterWeightBytes = 4;      // fp32 master weights (part of optimizer_state_bytes)
constexpr double kActBytes = 2;               // 16-bit activations
constexpr double kFp8WeightCacheBytes = 2;    // FP8 weight + its FP8 transpose, per layer parameter
constexpr double kContextBytes = 1.0 * kGiB;  // CUDA context + cuBLAS workspaces [U], measure
constexpr double kNcclBytes = 0.5 * kGiB;     // NCCL buffers when any group communicates [U]

double optimizer_state_bytes(const Plan& p) { return p.optimizer == Optimizer::kAdam ? 12 : 8; }

int dense_layers_of(const ModelSpec& m) { return m.moe ? m.moe->num_dense_layers : m.num_layers; }

// Calls f(first, n) for each model chunk of pipeline stage `stage` in model order (v chunks
// with the interleaved schedule, else one): its first layer and its number of layers.
template <class F>
void for_each_chunk(const ModelSpec& m, const Plan& p, int stage, F&& f) {
  for (int v = 0; v < p.virtual_stages; ++v) {
    const int chunk = stage + v * p.pp;
    f(chunk_first_layer(m, p, chunk), chunk_layers(m, p, chunk));
  }
}

// Of the layers [first, first + n), how many are MoE layers (the dense ones come first).
int moe_layers_in(const ModelSpec& m, int first, int n) { return std::clamp(first + n - dense_layers_of(m), 0, n); }

// The microbatches whose output head has run and whose backward has not, at most, on the
// last stage: all m with GPipe; one with 1F1B and with the interleaved schedule in groups of
// pp, whose last-chunk forwards are each followed by their backward; with larger groups the
// last group's last-chunk forwards run ahead of their backwards (lower.h pipeline_schedule:
// counted on its order, e.g. 3 for pp 4, v 2, 10 microbatches in groups of 6).
double output_heads_held(const Plan& p) {
  if (p.schedule == Schedule::kGpipe) return static_cast<double>(p.accumulation());
  if (p.schedule != Schedule::kInterleaved || p.vp_group() == p.pp) return 1.0;
  const int last = p.virtual_stages - 1;
  int held = 0, most = 1;
  for (const ScheduleStep& st : pipeline_schedule(p, p.pp - 1)) {
    if (st.chunk != last) continue;
    held += st.forward ? 1 : -1;
    most = std::max(most, held);
  }
  return most;
}

// Output layer and cross entropy (Megatron estimator): 4 T h (1 + V/h) / t per microbatch
// whose backward has not run (output_heads_held).
double output_head_bytes(const ModelSpec& m, const Plan& p, double seq) {
  const double T = p.microbatch * seq / p.cp;
  return output_heads_held(p) * output_head_buffer_bytes(m, p, T);
}

double activation_extras(const ModelSpec& m, const Plan& p, double seq, int stage, double inflight) {
  const double T = p.microbatch * seq / p.cp;
  double bytes = 0;
  if (stage == 0) bytes += first_stage_input_bytes(m, p, T) * inflight;  // token ids, embedding dropout mask
  if (stage == p.pp - 1) bytes += output_head_bytes(m, p, seq);
  return bytes;
}

}  // namespace

namespace {

// Model FLOPs per token that selective recomputation adds, in the MFU convention (full-square
// attention, 2 x weights per GEMM): each recomputed module's forward on every layer that has
// it, or torchtitan's recomputed matmuls (their share of the whole layer's, tp 1).
double recompute_token_flops(const ModelSpec& m, const Plan& p, const TokenFlops& tf) {
  if (p.recompute == Recompute::kSelectiveOp) {
    Plan whole = p;
    whole.tp = 1;
    double per_layer = 0;
    for (const OpSacMm& mm : op_sac_split(m, whole).mms) per_layer += mm.recompute_weight * 2 * mm.n * mm.k;
    return m.num_layers * per_layer;
  }
  using RM = RecomputeModule;
  const double h = static_cast<double>(m.hidden_size);
  const double G = m.ffn_matrices;
  const int moe_layers = m.moe ? m.num_layers - dense_layers_of(m) : 0;
  const int dense_layers = m.num_layers - moe_layers;
  double per_token = 0;
  if (p.recomputes(RM::kCoreAttn)) per_token += m.num_layers * tf.attention_core;
  if (p.recomputes(RM::kMlp)) per_token += dense_layers * 2 * G * h * static_cast<double>(m.ffn_hidden_size);
  if (m.moe) {
    const MoeSpec& e = *m.moe;
    const double shared = 2 * G * h * static_cast<double>(e.num_shared_experts) * e.shared_expert_ffn_hidden_size;
    if (p.recomputes(RM::kMoe)) {
      per_token += moe_layers * (2 * h * e.num_experts + 2 * G * h * e.top_k * static_cast<double>(e.expert_ffn_hidden_size) + shared);
    } else if (p.recomputes(RM::kSharedExperts)) {
      per_token += moe_layers * shared;
    }
  }
  if (m.mla && p.recomputes(RM::kMlaUpProj)) {
    const MlaSpec& a = *m.mla;
    const double heads = m.num_attention_heads;
    per_token += m.num_layers * 2 *
                 (static_cast<double>(a.q_lora_rank) * heads * (a.qk_nope_head_dim + a.qk_rope_head_dim) +
                  static_cast<double>(a.kv_lora_rank) * heads * (a.qk_nope_head_dim + a.v_head_dim));
  }
  return per_token;
}

}  // namespace

double output_head_buffer_bytes(const ModelSpec& m, const Plan& p, double tokens) {
  const double loss = stack_profile(p.stack).loss_bytes_per_logit;
  return tokens * (4.0 * static_cast<double>(m.hidden_size) + loss * static_cast<double>(m.vocab_size)) / p.tp;
}

double layer_activation_bytes(const ModelSpec& m, const Plan& p, std::int64_t seq_len, bool moe) {
  const double t = p.tp;
  const double seq = static_cast<double>(seq_len);
  const double T = p.microbatch * seq / p.cp;
  const double h = static_cast<double>(m.hidden_size);
  const bool sp = p.sequence_parallel && p.tp > 1;
  const double drop = m.dropout ? 1.0 : 0.0;
  if (p.recompute == Recompute::kFull) {
    return kActBytes * T * h / (sp ? t : 1.0);  // only the layer input is kept
  }
  if (p.recompute == Recompute::kSelectiveOp) {
    // torchtitan's op-level policy (layer_cost.h op_sac_split): the block's input, the saved
    // matmul outputs, and the attention's output with its fp32 log-sum-exp.
    const double heads = m.num_attention_heads / t;
    return T * (kActBytes * h / (sp ? t : 1.0) + op_sac_split(m, p).saved_bytes_per_token +
                kActBytes * heads * head_dims(m).v + 4.0 * heads);
  }
  // Per token, bytes (docs/cost-model-sources.md section 2.2, generalised Korthikanti counting):
  // not split by TP without SP: two norm inputs 4h, QKV input 2h, FFN input 2h, two
  // dropout masks (1 byte) 2h. With FP8, Transformer Engine keeps a GEMM's input for its
  // weight gradient as the FP8 copy (1 byte, transformer_engine/pytorch/module/linear.py
  // saved_inputmat): the QKV, out-projection, FFN (dense: fc1; MoE: the dispatched tokens)
  // and down-projection inputs. The router's input stays 16-bit.
  const bool fp8 = p.precision == Precision::kFp8;
  const double g_in = fp8 ? 1.0 : kActBytes;  // a saved GEMM input
  // Module recomputation (Megatron-Core recompute_modules; docs/model-reference.md "Module
  // recomputation"): what each module no longer keeps between its forward and backward.
  using RM = RecomputeModule;
  const bool mlp_block = moe ? p.recomputes(RM::kMoe) : p.recomputes(RM::kMlp);
  double ffn_in = moe ? kActBytes : g_in;  // the MLP block's input: the router's (16-bit) or fc1's
  double qkv_in = g_in;
  if (p.recomputes(RM::kLayernorm)) {
    // Output-discarding of the norms that are modules of their own: an MoE layer's pre-MLP
    // norm output (the router's 16-bit input) and MLA's input norm output (16-bit; with FP8
    // the down-projections keep their own FP8 copies, which it does not free).
    if (moe) ffn_in = 0;
    if (m.mla && !fp8) qkv_in = 0;
  }
  if (!moe && mlp_block) ffn_in = 0;  // fc1's input (the fused norm's output) is inside the checkpoint
  const double replicated = (4 + qkv_in + ffn_in + 2 * drop) * h;
  const HeadDims d = head_dims(m);
  const double a_r = m.num_attention_heads / t;
  const double g_r = kv_heads_per_rank(m, p);
  // Split by TP: Q, K, V; out-proj input; FFN: G-1 activation inputs and the down-proj input.
  // The out-projection's input is the attention output O, which a FlashAttention backward
  // also reads (16-bit): with FP8 the projection's FP8 copy comes on top of it.
  // A recomputed core attention (a checkpoint of its own) frees what FlashAttention keeps
  // for its backward: the fp32 log-sum-exp and the 16-bit output, which then stays only as
  // the out-projection's saved input (its FP8 copy with FP8).
  const bool core_rc = p.recomputes(RM::kCoreAttn);
  const double proj_in = p.flash_attention && !core_rc ? kActBytes + (fp8 ? 1.0 : 0.0) : g_in;
  // "mla_up_proj" (output-discarding) frees the up-projected Q, K, V the core attention reads.
  // A QK norm keeps its own input, the q and k heads before it (16-bit), for its backward.
  const double qk_norm_in = has_qk_norm(m) ? kActBytes * (a_r + g_r) * d.qk : 0.0;
  const double qkv =
      m.mla && p.recomputes(RM::kMlaUpProj) ? 0.0 : kActBytes * (a_r * d.qk + g_r * (d.qk + d.v)) + qk_norm_in;
  double split = qkv + proj_in * a_r * d.v;
  const double G = m.ffn_matrices;
  const double ffn_per_width = kActBytes * (G - 1) + g_in;
  if (!moe) {
    if (!mlp_block) split += ffn_per_width * m.ffn_hidden_size / t;
  } else if (!mlp_block) {
    const MoeSpec& e = *m.moe;
    // "moe_act" (output-discarding) frees the routed experts' activation output, the fc2
    // input, in 16 bits; with FP8 fc2 keeps its own FP8 copy, which it does not free.
    const double act_out = p.recomputes(RM::kMoeAct) && !fp8 ? g_in : 0.0;
    // The busiest rank's routed rows (moe_routed_load x the mean) set the worst rank's memory.
    const double routed = static_cast<double>(e.top_k) * moe_routed_load(e);
    split += (ffn_per_width - act_out) * routed * e.expert_ffn_hidden_size / t;
    if (!p.recomputes(RM::kSharedExperts)) {
      split += ffn_per_width * static_cast<double>(e.num_shared_experts) * e.shared_expert_ffn_hidden_size / t;
    }
    // The dispatched tokens, the experts' fc1 input: T_e k rows of h, gathered over the
    // expert-TP group (expert_tokens: T etp / tp, T / tp with etp 1). Megatron-Core applies
    // the routing probabilities inside the experts' activation (moe/experts.py
    // activation_func_with_probs), so the combine's unpermute is a plain scatter-add whose
    // backward keeps no tokens.
    split += g_in * routed * h * expert_tokens(p, 1.0);
  }
  // Core attention: the score matrix (softmax output 2, dropout mask 1, dropout output 2
  // bytes per score) unless FlashAttention or a recomputed core attention drops it;
  // FlashAttention keeps the fp32 log-sum-exp.
  if (!core_rc) split += p.flash_attention ? 4.0 * a_r : (2 + 3 * drop) * a_r * seq;
  return T * (replicated / (sp ? t : 1.0) + split);
}

double mtp_activation_bytes(const ModelSpec& m, const Plan& p, std::int64_t seq_len) {
  const double T = p.microbatch * static_cast<double>(seq_len) / p.cp;
  const double h = static_cast<double>(m.hidden_size);
  return layer_activation_bytes(m, p, seq_len, m.moe.has_value()) +
         kActBytes * T * 3 * h / (p.sequence_parallel && p.tp > 1 ? p.tp : 1);
}

int moe_layers_among_first(const ModelSpec& m, const Plan& p, int stage, int n) {
  if (!m.moe || n <= 0) return 0;
  int seen = 0, moe = 0;
  for_each_chunk(m, p, stage, [&](int first, int count) {
    const int k = std::clamp(n - seen, 0, count);
    moe += moe_layers_in(m, first, k);
    seen += k;
  });
  return moe;
}

namespace {

// The model chunk that holds layer `layer` (model order): its first layer and its number of
// layers; {layer, 0} past the model's last layer.
struct ChunkSpan {
  int first = 0, n = 0;
};
ChunkSpan chunk_of_layer(const ModelSpec& m, const Plan& p, int layer) {
  const int chunks = p.pp * p.virtual_stages;
  for (int chunk = 0; chunk < chunks; ++chunk) {
    const int first = chunk_first_layer(m, p, chunk);
    const int n = chunk_layers(m, p, chunk);
    if (layer < first + n) return {first, n};
  }
  return {layer, 0};
}

}  // namespace

bool recomputes_in_full(const ModelSpec& m, const Plan& p, int layer) {
  if (p.recompute != Recompute::kFull) return false;
  if (!p.partial_full_recompute()) return true;
  const ChunkSpan c = chunk_of_layer(m, p, layer);
  return c.n > 0 && layer - c.first < p.recompute_num_layers;
}

RecomputeGroup recompute_group_of(const ModelSpec& m, const Plan& p, int layer) {
  const ChunkSpan c = chunk_of_layer(m, p, layer);
  if (c.n == 0) return {layer, 1};
  const int g = p.recompute_group();
  const int start = c.first + (layer - c.first) / g * g;
  return {start, std::min(g, c.first + c.n - start)};
}

FullRecomputeLayers full_recompute_layers(const ModelSpec& m, const Plan& p, int stage) {
  FullRecomputeLayers out;
  if (p.recompute != Recompute::kFull) return out;
  for_each_chunk(m, p, stage, [&](int first, int n) {
    const int k = p.partial_full_recompute() ? std::min(n, p.recompute_num_layers) : n;
    const int moe = moe_layers_in(m, first, k);
    out.moe += moe;
    out.dense += k - moe;
  });
  return out;
}

double inflight_microbatches(const Plan& p, int stage) {
  const double m = static_cast<double>(p.accumulation());
  if (p.moe_a2a_overlap && p.schedule != Schedule::kGpipe) {
    // Merged steps (specs.h moe_a2a_overlap): the warm-up's chunks, one more forward than
    // without (stage_memory adds the layer a merged step holds beyond them). schedule_warmup
    // is capped at the m v chunk passes; virtual_stages is 1 unless interleaved.
    return static_cast<double>(schedule_warmup(p, stage)) / p.virtual_stages;
  }
  switch (p.schedule) {
    case Schedule::kGpipe: return m;
    case Schedule::kOneFOneB: return std::min<double>(p.pp - stage, m);
    case Schedule::kInterleaved: {
      const double v = p.virtual_stages;
      const double chunks = std::min(2.0 * (p.pp - stage - 1) + (v - 1) * p.vp_group() + 1, m * v);
      return chunks / v;
    }
  }
  return m;
}

namespace {

// One layer's activation bytes (layer_activation_bytes), dense and MoE, as the plan keeps
// them and (`whole`) without recomputation; the same on every stage, so estimate() computes
// them once for all stages' memory.
struct LayerActivations {
  double dense = 0, moe = 0, whole_dense = 0, whole_moe = 0;
};
LayerActivations layer_activations(const ModelSpec& m, const Plan& p, std::int64_t seq_len) {
  LayerActivations a;
  a.dense = layer_activation_bytes(m, p, seq_len, false);
  a.moe = m.moe ? layer_activation_bytes(m, p, seq_len, true) : 0.0;
  if (p.recompute != Recompute::kNone) {
    const Plan whole = p.without_recompute();
    a.whole_dense = layer_activation_bytes(m, whole, seq_len, false);
    a.whole_moe = m.moe ? layer_activation_bytes(m, whole, seq_len, true) : 0.0;
  }
  return a;
}

// What of a stage's memory its layers set: everything but the activations of the
// microbatches in flight, which its place in the schedule sets (stage_memory_finish). Middle
// stages alike (same_middle_stage) have the same shape: estimate() computes it once for them.
struct MemoryShape {
  MemoryBreakdown mem;      // params, grads, optimizer and buffers; host: the optimizer's share
  double layers_bytes = 0;  // one microbatch's activations kept by the stage's layers
  bool merged = false;      // a merged step's layer beyond the warm-up (moe_a2a_overlap)
  double merged_layer = 0, merged_token_ids = 0;
  bool offloads_activations = false;
  double offloaded_per_microbatch = 0;  // activations offloaded per microbatch in flight
  bool offloads_weights = false;
  double weights_away = 0;  // weights on the host
  double live = 0;          // what the backward's recomputation holds live at once
  int dense_layers = 0, moe_layers = 0;  // the stage's
};

// What of a stage's shape recompute_num_layers sets (layers_bytes, live, the merged step's
// layer), on `shape` with the rest set (stage_memory_shape_rest).
void set_recompute_terms(MemoryShape& shape, const ModelSpec& m, const Plan& p, const Workload& w, int stage,
                         const RankParams& rp, const LayerActivations& acts);

// The rest of the shape: what does not depend on recompute_num_layers.
MemoryShape stage_memory_shape_rest(const ModelSpec& m, const ParamCounts& pc, const Plan& p, int stage,
                                    const RankParams& rp, const LayerActivations& acts);

// stage_memory with the stage's parameters and the layers' activations already computed
// (estimate() has them): its shape, then what the microbatches in flight add.
MemoryShape stage_memory_shape(const ModelSpec& m, const ParamCounts& pc, const Plan& p, const Workload& w, int stage,
                               const RankParams& rp, const LayerActivations& acts) {
  MemoryShape shape = stage_memory_shape_rest(m, pc, p, stage, rp, acts);
  set_recompute_terms(shape, m, p, w, stage, rp, acts);
  return shape;
}

MemoryShape stage_memory_shape_rest(const ModelSpec& m, const ParamCounts& pc, const Plan& p, int stage,
                                    const RankParams& rp, const LayerActivations& acts) {
  MemoryShape shape;
  MemoryBreakdown& mem = shape.mem;
  const double nd = static_cast<double>(p.dp) * p.cp;
  const double nde = p.edp();
  const double sharded = rp.dense / nd + rp.expert / nde;
  const double full = rp.dense + rp.expert;
  // ZeRO-3 without reshard_after_forward: the stage's gathered parameters stay from the
  // forward to the backward, beside the shards.
  const bool kept_params = !p.reshard_after_forward && p.zero >= 3 && nd > 1;
  mem.params = ((p.zero >= 3 ? sharded : full) + (kept_params ? full : 0.0)) * kWeightBytes;
  // ZeRO-3 with fsdp_no_sync and accumulation: the unsharded gradients wait for the last
  // microbatch's reduce-scatter (plus the sharded ones it accumulates into).
  const bool unsharded_grads = p.defers_reduce_scatter() && nd > 1;
  mem.grads = ((p.zero >= 2 ? sharded : full) + (unsharded_grads ? full : 0.0)) * p.grad_bytes;
  mem.optimizer = (p.zero >= 1 ? sharded : full) * optimizer_state_bytes(p);
  if (p.zero >= 1 && !stack_profile(p.stack).master_weights_sharded) {
    // The stack keeps the whole fp32 master copy (4 B per parameter) beside its shard of the
    // moments (DeepSpeed's BF16_Optimizer).
    mem.optimizer += (full - sharded) * kMasterWeightBytes;
  }
  if (p.offload_optimizer > 0) {
    // The host holds its share of the optimizer states and an fp32 copy of their gradients.
    const double f = p.offload_optimizer;
    const double opt_params = p.zero >= 1 ? sharded : full;
    mem.host += f * (mem.optimizer + opt_params * 4.0);
    mem.optimizer *= 1.0 - f;
  }

  const int dense_total = dense_layers_of(m);
  // Dense layers come first: count this stage's dense and MoE layers.
  int dense_here = 0;
  for_each_chunk(m, p, stage, [&](int first, int n) { dense_here += std::clamp(dense_total - first, 0, n); });
  const int moe_here = rp.layers - dense_here;
  if (p.precision == Precision::kFp8 && stack_profile(p.stack).fp8_weight_cache) {
    // Transformer Engine caches each layer weight's FP8 copy and its transpose (1 + 1 byte)
    // from the first microbatch of a step to the last (Megatron-Core passes
    // is_first_microbatch); the embedding and output layer are not FP8. Stacks that cast
    // the weight in every forward (torchao) keep no such copy (stacks.json fp8_weight_cache).
    const LayerRankParams dl = layer_rank_params(m, pc, p, false);
    const LayerRankParams ml = m.moe ? layer_rank_params(m, pc, p, true) : LayerRankParams{};
    mem.params += kFp8WeightCacheBytes * (dense_here * dl.dense + moe_here * (ml.dense + ml.expert));
  }
  const double a_dense = acts.dense, a_moe = acts.moe;
  shape.dense_layers = dense_here;
  shape.moe_layers = moe_here;
  // Offload: whole layers, the stage's first ones (layer_cost.h offloaded_layers).
  if (const int n = offloaded_layers(p.offload_activations, rp.layers); n > 0) {
    const int n_moe = moe_layers_among_first(m, p, stage, n);
    shape.offloads_activations = true;
    shape.offloaded_per_microbatch = (n - n_moe) * a_dense + n_moe * a_moe;
    mem.buffers += std::max(n_moe < n ? a_dense : 0.0, n_moe > 0 ? a_moe : 0.0);  // one layer in transit
  }
  if (const int n = offloaded_layers(p.offload_weights, rp.layers); n > 0) {
    const int n_moe = moe_layers_among_first(m, p, stage, n);
    const LayerRankParams dl = layer_rank_params(m, pc, p, false);
    const LayerRankParams ml = m.moe ? layer_rank_params(m, pc, p, true) : LayerRankParams{};
    const double away = kWeightBytes * ((n - n_moe) * dl.dense + n_moe * (ml.dense + ml.expert));
    mem.params -= away;
    shape.offloads_weights = true;
    shape.weights_away = away;
    mem.buffers += 2 * kWeightBytes * rp.largest_layer;  // the layer in use and the one prefetched
  }
  const bool communicates = p.tp > 1 || p.pp > 1 || p.dp > 1 || p.cp > 1 || p.ep > 1;
  mem.buffers += kContextBytes + (communicates ? kNcclBytes : 0.0);
  if (p.zero >= 3 && nd > 1) {
    // FSDP: current and prefetched unsharded layer, plus the current unsharded gradients
    // (with fsdp_no_sync they are among the stage's unsharded gradients, mem.grads).
    // (Without reshard_after_forward the gathered weights are among mem.params.)
    mem.buffers += rp.largest_layer * ((kept_params ? 0.0 : 2 * kWeightBytes) + (unsharded_grads ? 0.0 : p.grad_bytes));
  }
  return shape;
}

void set_recompute_terms(MemoryShape& shape, const ModelSpec& m, const Plan& p, const Workload& w, int stage,
                         const RankParams& rp, const LayerActivations& acts) {
  const int dense_here = shape.dense_layers, moe_here = shape.moe_layers;
  const double a_dense = acts.dense, a_moe = acts.moe;
  // Partial full recomputation (recompute_num_layers): the layers that do not recompute keep
  // all their activations.
  // With full recomputation, a layer's whole activations (recomputed, or kept by the layers
  // past recompute_num_layers).
  const bool full_rc = p.recompute == Recompute::kFull;
  const double all_dense = full_rc ? acts.whole_dense : 0.0, all_moe = full_rc ? acts.whole_moe : 0.0;
  double layers_bytes = dense_here * a_dense + moe_here * a_moe;
  if (p.partial_full_recompute()) {
    const FullRecomputeLayers rc = full_recompute_layers(m, p, stage);
    layers_bytes =
        rc.dense * a_dense + rc.moe * a_moe + (dense_here - rc.dense) * all_dense + (moe_here - rc.moe) * all_moe;
  }
  // recompute_method "uniform" with groups of G layers: a group keeps only its first layer's
  // input; while it recomputes, its G layers' whole activations are live (the largest group
  // of the stage, added below).
  const int group = p.recompute_group();
  double group_live = 0;
  if (group > 1) {
    layers_bytes = 0;
    for_each_chunk(m, p, stage, [&](int first, int n) {
      // The chunk's backward recomputes its last group first; by the time it recomputes
      // group g, the later groups have freed their inputs.
      double later = 0;
      for (int g = (n - 1) / group * group; g >= 0; g -= group) {
        const int k = std::min(group, n - g);
        const int moe = moe_layers_in(m, first + g, k);
        const double input = moe_layers_in(m, first + g, 1) > 0 ? a_moe : a_dense;
        layers_bytes += input;
        group_live = std::max(group_live, (k - moe) * all_dense + moe * all_moe - later);
        later += input;
      }
    });
  }
  shape.layers_bytes = layers_bytes;
  if (merged_share(p, stage) > 0 && rp.layers > 0) {
    // A merged step allocates its forward's layers one by one while its backward frees its
    // own (lower.cc): one layer more than the warm-up's chunks. Its backward frees its output
    // head's buffer first, before its forward's loss allocates one: on the last stage the
    // layer adds only what it exceeds that buffer by.
    shape.merged = true;
    const double layer = layers_bytes / rp.layers;
    const double head = stage == p.pp - 1 ? output_head_bytes(m, p, static_cast<double>(w.seq_len)) : 0.0;
    shape.merged_layer = std::max(0.0, layer - head);
    // The first stage's merged forward also holds its microbatch's token ids (8 B each).
    if (stage == 0) shape.merged_token_ids = 8.0 * p.microbatch * static_cast<double>(w.seq_len) / p.cp;
  }
  if (full_rc) {
    // Backward recomputes one layer at a time: its full activations are live once.
    if (group > 1) {
      shape.live = group_live;
    } else if (!p.partial_full_recompute()) {
      shape.live = moe_here > 0 ? all_moe : all_dense;
    } else {
      // recompute_num_layers: a chunk's backward runs its kept (last) layers first and frees
      // their activations before it recomputes its first layers, so the recomputed layer
      // adds only what it exceeds the chunk's kept activations by (lower.cc).
      double live = 0;
      for_each_chunk(m, p, stage, [&](int first, int n) {
        if (n == 0) return;
        const int k = std::min(n, p.recompute_num_layers);
        const int moe_kept = moe_layers_in(m, first, n) - moe_layers_in(m, first, k);
        const double kept = (n - k - moe_kept) * all_dense + moe_kept * all_moe;
        live = std::max(live, (moe_layers_in(m, first, k) > 0 ? all_moe : all_dense) - kept);
      });
      shape.live = live;
    }
  } else if (p.recompute == Recompute::kSelective || p.recompute == Recompute::kSelectiveOp) {
    // Likewise what one layer recomputes (the larger kind on this stage).
    double most = 0;
    if (dense_here > 0) most = std::max(most, acts.whole_dense - acts.dense);
    if (moe_here > 0) most = std::max(most, acts.whole_moe - acts.moe);
    shape.live = most;
  }
}

// The stage's memory from its shape: the activations of the microbatches in flight (the
// schedule's warm-up on this stage), the first and the last stage's extras, the offloaded
// ones moved to the host, and what recomputation holds live.
MemoryBreakdown stage_memory_finish(const MemoryShape& shape, const ModelSpec& m, const ClusterSpec& c, const Plan& p,
                                    const Workload& w, int stage) {
  MemoryBreakdown mem = shape.mem;
  mem.stage = stage;
  const double inflight = inflight_microbatches(p, stage);
  mem.activations =
      inflight * shape.layers_bytes + activation_extras(m, p, static_cast<double>(w.seq_len), stage, inflight);
  if (shape.merged) {
    mem.activations += shape.merged_layer;
    if (stage == 0) mem.activations += shape.merged_token_ids;
  }
  if (stage == p.pp - 1 && m.mtp_layers > 0) {
    // Per module: its activations for each microbatch in flight, and one more output-head
    // buffer like the model's.
    mem.activations += m.mtp_layers * (inflight * mtp_activation_bytes(m, p, w.seq_len) +
                                       output_head_bytes(m, p, static_cast<double>(w.seq_len)));
  }
  if (shape.offloads_activations) {
    const double away = inflight * shape.offloaded_per_microbatch;
    mem.activations -= away;
    mem.host += away;
  }
  if (shape.offloads_weights) mem.host += shape.weights_away;
  mem.activations += shape.live;
  mem.total = mem.params + mem.grads + mem.optimizer + mem.activations + mem.buffers;
  mem.capacity = c.gpu.hbm_GiB * kGiB;
  mem.usable = mem.capacity * (1.0 - p.memory_headroom);
  mem.host_usable = c.host_memory_GiB * kGiB / c.gpus_per_node;
  mem.fits = mem.total <= mem.usable && mem.host <= mem.host_usable;
  return mem;
}

MemoryBreakdown stage_memory_with(const ModelSpec& m, const ParamCounts& pc, const ClusterSpec& c, const Plan& p,
                                  const Workload& w, int stage, const RankParams& rp, const LayerActivations& acts) {
  return stage_memory_finish(stage_memory_shape(m, pc, p, w, stage, rp, acts), m, c, p, w, stage);
}

// Calls f(s, memory of stage s) for every stage in order. A stage reuses the shape of the
// last stage whose shape was computed when alike(s, that stage) (same_middle_stage, or a
// record of it); shape_of(s) computes a stage's shape.
template <class Alike, class ShapeOf, class F>
void for_each_stage_memory(const ModelSpec& m, const ClusterSpec& c, const Plan& p, const Workload& w, Alike&& alike,
                           ShapeOf&& shape_of, F&& f) {
  MemoryShape shape;
  int computed = -1;
  for (int s = 0; s < p.pp; ++s) {
    if (computed < 0 || !alike(s, computed)) {
      shape = shape_of(s);
      computed = s;
    }
    f(s, stage_memory_finish(shape, m, c, p, w, s));
  }
}

}  // namespace

MemoryBreakdown stage_memory(const ModelSpec& m, const ClusterSpec& c, const Plan& p, const Workload& w,
                             int stage) {
  const ParamCounts pc = count_params(m);
  return stage_memory_with(m, pc, c, p, w, stage, rank_params(m, pc, p, stage), layer_activations(m, p, w.seq_len));
}

std::vector<MemoryBreakdown> stage_memories(const ModelSpec& m, const ClusterSpec& c, const Plan& p,
                                            const Workload& w) {
  const ParamCounts pc = count_params(m);
  const LayerActivations acts = layer_activations(m, p, w.seq_len);
  std::vector<MemoryBreakdown> out;
  out.reserve(static_cast<std::size_t>(std::max(p.pp, 0)));
  for_each_stage_memory(
      m, c, p, w, [&](int s, int r) { return same_middle_stage(m, p, s, r); },
      [&](int s) { return stage_memory_shape(m, pc, p, w, s, rank_params(m, pc, p, s), acts); },
      [&](int, const MemoryBreakdown& mem) { out.push_back(mem); });
  return out;
}

struct StageMemoriesByCount::Impl {
  const ModelSpec& m;
  const ClusterSpec& c;
  const Workload& w;
  Plan p;
  ParamCounts pc;
  LayerActivations acts;
  std::vector<char> reuses;  // stage s takes the shape of the last stage computed
  // Of each stage whose shape is computed: its parameters, and its shape but for what
  // recompute_num_layers sets (stage_memory_shape_rest).
  std::vector<RankParams> rps;
  std::vector<MemoryShape> rests;

  template <class F>
  void each(int n, F&& f) const {
    Plan q = p;
    q.recompute_num_layers = n;
    for_each_stage_memory(
        m, c, q, w, [&](int s, int) { return reuses[static_cast<std::size_t>(s)] != 0; },
        [&](int s) {
          const auto i = static_cast<std::size_t>(s);
          MemoryShape shape = rests[i];
          set_recompute_terms(shape, m, q, w, s, rps[i], acts);
          return shape;
        },
        f);
  }
};

StageMemoriesByCount::StageMemoriesByCount(const ModelSpec& m, const ClusterSpec& c, const Plan& p, const Workload& w)
    : impl_([&] {
        auto impl =
            std::make_unique<Impl>(Impl{m, c, w, p, count_params(m), layer_activations(m, p, w.seq_len), {}, {}, {}});
        const std::size_t stages = static_cast<std::size_t>(std::max(p.pp, 0));
        impl->reuses.assign(stages, 0);
        impl->rps.resize(stages);
        impl->rests.resize(stages);
        // As for_each_stage_memory decides it: alike the last stage whose shape was computed.
        // Neither that, nor a stage's parameters, nor the rest of its shape depends on
        // recompute_num_layers.
        int shape_of = -1;
        for (int s = 0; s < p.pp; ++s) {
          if (shape_of >= 0 && same_middle_stage(m, p, s, shape_of)) {
            impl->reuses[static_cast<std::size_t>(s)] = 1;
            continue;
          }
          const auto i = static_cast<std::size_t>(s);
          impl->rps[i] = rank_params(m, impl->pc, p, s);
          impl->rests[i] = stage_memory_shape_rest(m, impl->pc, p, s, impl->rps[i], impl->acts);
          shape_of = s;
        }
        return std::unique_ptr<const Impl>(std::move(impl));
      }()) {}

StageMemoriesByCount::~StageMemoriesByCount() = default;

std::vector<MemoryBreakdown> StageMemoriesByCount::at(int n) const {
  std::vector<MemoryBreakdown> out;
  out.reserve(impl_->rps.size());
  impl_->each(n, [&](int, const MemoryBreakdown& mem) { out.push_back(mem); });
  return out;
}

bool StageMemoriesByCount::fits(int n) const {
  bool all = true;
  impl_->each(n, [&](int, const MemoryBreakdown& mem) { all = all && mem.fits; });
  return all;
}

double StageMemoriesByCount::worst_total(int n) const {
  double most = 0;
  impl_->each(n, [&](int, const MemoryBreakdown& mem) { most = std::max(most, mem.total); });
  return most;
}

StageState stage_state(const Plan& p, const RankParams& rp, const MemoryBreakdown& mem) {
  const double nd = static_cast<double>(p.dp) * p.cp;
  return StageState{rp.dense / nd + rp.expert / p.edp(), mem.params, mem.optimizer};
}

std::vector<StageState> stage_states(const ModelSpec& m, const ClusterSpec& c, const Plan& p, const Workload& w) {
  const ParamCounts pc = count_params(m);
  const LayerActivations acts = layer_activations(m, p, w.seq_len);
  std::vector<StageState> out(static_cast<std::size_t>(p.pp));
  for (int s = 0; s < p.pp; ++s) {
    const RankParams rp = rank_params(m, pc, p, s);
    out[static_cast<std::size_t>(s)] = stage_state(p, rp, stage_memory_with(m, pc, c, p, w, s, rp, acts));
  }
  return out;
}

namespace {

struct Layers {
  LayerCost dense, moe;
  LayerComm dense_comm, moe_comm;
  LayerOffload dense_off, moe_off;
  double dense_stall = 0, moe_stall = 0;  // host-bound wait per layer and microbatch
  double logits_fwd = 0, logits_bwd = 0, logits_flops = 0;
  double mtp_proj_fwd = 0, mtp_proj_bwd = 0, mtp_proj_flops = 0;  // one MTP module's 2h -> h projection
  // Partial full recomputation (plan.recompute_num_layers): the layers that keep their
  // activations, priced with recompute "none" (the members above are the recomputing ones).
  std::shared_ptr<const Layers> kept;
};

// The part of a stage's times linear in its layers (stage_times_with): nd dense and nm MoE
// layers priced by `L`, times k (k = -1 takes them away). Without all-to-all overlap and
// offload, which partial full recomputation excludes (scenario.cc layout_errors).
void add_layer_times(StageTimes& st, double& fl, const Layers& L, double nd, double nm, double k) {
  const double i_fwd = nd * L.dense_comm.interference_fwd_s + nm * L.moe_comm.interference_fwd_s;
  const double i_all = nd * L.dense_comm.interference_s + nm * L.moe_comm.interference_s;
  const double ep = nm * L.moe_comm.ep_exposed_s;
  st.forward += k * (nd * L.dense.fwd_s() + nm * L.moe.fwd_s() + i_fwd);
  st.backward += k * (nd * L.dense.bwd_s() + nm * L.moe.bwd_s() + i_all - i_fwd);
  fl += k * (nd * L.dense.flops() + nm * L.moe.flops());
  st.parts.gemm += k * (nd * L.dense.gemm_s() + nm * L.moe.gemm_s());
  st.parts.attention += k * (nd * L.dense.attention_s() + nm * L.moe.attention_s());
  st.parts.memory_bound += k * (nd * L.dense.memory_bound_s() + nm * L.moe.memory_bound_s());
  st.parts.recompute += k * (nd * L.dense.recompute_s + nm * L.moe.recompute_s);
  st.parts.interference += k * i_all;
  st.tp += k * (nd * L.dense_comm.tp_exposed_s + nm * L.moe_comm.tp_exposed_s);
  st.cp += k * (nd * L.dense_comm.cp_exposed_s + nm * L.moe_comm.cp_exposed_s);
  st.ep += k * ep;
  st.host += k * (nd * L.dense_stall + nm * L.moe_stall);
  st.moe += k * (nm * (L.moe.mlp_fwd_s() + L.moe.mlp_bwd_s() + L.moe_stall) + ep);
}

}  // namespace

double merged_share(const Plan& p, int stage) {
  if (!p.moe_a2a_overlap || p.schedule == Schedule::kGpipe) return 0.0;
  const double total = static_cast<double>(p.accumulation()) * p.virtual_stages;  // v is 1 unless interleaved
  return std::max(0.0, total - schedule_warmup(p, stage)) / total;
}

int moe_host_syncs(const ModelSpec& m, const Plan& p, const StackProfile& s) {
  if (!m.moe) return 0;
  const int local = std::max(1, m.moe->num_experts / std::max(1, p.ep));
  switch (s.moe_host_sync) {
    case MoeHostSync::kPerExpert: return local;
    case MoeHostSync::kDispatcher:
      // Padded to capacity every split is known on the host (token_dispatcher.py preprocess:
      // drop_and_pad returns before any device-to-host copy, cuda_sync_point "no_sync");
      // dropping without padding waits "before_permutation_1", dropless "before_ep_alltoall".
      if (m.moe->pad_to_capacity && m.moe->capacity_factor > 0) return 0;
      return p.ep > 1 || local > 1 ? 1 : 0;
    case MoeHostSync::kNone: break;
  }
  return 0;
}

HostStall host_stall(const ModelSpec& m, const Plan& p, const LayerCost& lc, const LayerComm& cm, bool moe_layer) {
  const StackProfile& s = stack_profile(p.stack);
  const LayerKernels k = layer_kernels(m, p, moe_layer, s);
  const double comm = cm.tp_exposed_s + cm.cp_exposed_s + cm.ep_exposed_s + cm.interference_s;
  const double gpu = lc.fwd_s() + lc.bwd_s() + comm;
  HostStall h;
  const int syncs = moe_layer ? moe_host_syncs(m, p, s) : 0;
  if (syncs > 0 && k.fwd + k.bwd > 0) {
    // The forward's synchronisations (stack.h moe_host_sync): the host cannot run ahead
    // across them, so the forward's dispatch is set against the forward's GPU time alone
    // (the layer's communication split as its compute), and after each the GPU idles for
    // one launch. A recomputed MoE block ("moe" module) re-runs the dispatcher in the
    // backward, with its synchronisations.
    const double us = s.host_us_per_kernel * 1e-6;
    const double share = lc.fwd_s() + lc.bwd_s() > 0 ? lc.fwd_s() / (lc.fwd_s() + lc.bwd_s()) : 0.5;
    const double gpu_f = lc.fwd_s() + share * comm, gpu_b = gpu - gpu_f;
    const int syncs_b = p.recomputes(RecomputeModule::kMoe) ? syncs : 0;
    h.fwd_s = std::max(0.0, k.fwd * us - gpu_f) + syncs * us;
    h.bwd_s = std::max(0.0, k.bwd * us - gpu_b) + syncs_b * us;
    return h;
  }
  const double stall = std::max(0.0, k.host_s - gpu);
  if (stall > 0 && k.fwd + k.bwd > 0) {
    h.fwd_s = stall * k.fwd / (k.fwd + k.bwd);
    h.bwd_s = stall - h.fwd_s;
  }
  return h;
}

namespace {

// `times`: the caller's memo of the collectives, if any (layer_comm prices each once).
Layers layer_costs(const ModelSpec& m, const ClusterSpec& c, const Plan& p, const Workload& w, CollectiveTimes* times) {
  Layers L;
  L.dense = layer_cost(m, c, p, w.seq_len, false);
  L.dense_comm = layer_comm(m, c, p, w.seq_len, false, L.dense, times);
  if (m.moe) {
    L.moe = layer_cost(m, c, p, w.seq_len, true);
    L.moe_comm = layer_comm(m, c, p, w.seq_len, true, L.moe, times);
  }
  L.dense_stall = host_stall(m, p, L.dense, L.dense_comm, false).total_s();
  if (m.moe) L.moe_stall = host_stall(m, p, L.moe, L.moe_comm, true).total_s();
  if (p.offload_activations > 0 || p.offload_weights > 0) {
    L.dense_off = layer_offload(c, p, L.dense, L.dense_comm, layer_activation_bytes(m, p, w.seq_len, false),
                                kWeightBytes * layer_rank_params(m, p, false).dense);
    if (m.moe) {
      const LayerRankParams ml = layer_rank_params(m, p, true);
      L.moe_off = layer_offload(c, p, L.moe, L.moe_comm, layer_activation_bytes(m, p, w.seq_len, true),
                                kWeightBytes * (ml.dense + ml.expert));
    }
  }
  if (m.mtp_layers > 0) {
    const MtpProjection mp = mtp_projection_cost(m, c, p, w.seq_len);
    L.mtp_proj_fwd = mp.fwd_s;
    L.mtp_proj_bwd = mp.bwd_s;
    L.mtp_proj_flops = mp.flops;
  }
  const LogitsCost lg = logits_cost(m, c, p, w.seq_len);
  L.logits_fwd = lg.fwd_s;
  L.logits_bwd = lg.bwd_s;
  L.logits_flops = lg.flops;
  if (p.partial_full_recompute()) {
    L.kept = std::make_shared<const Layers>(layer_costs(m, c, p.without_recompute(), w, times));
  }
  return L;
}

StageTimes stage_times_with(const ModelSpec& m, const ParamCounts& pc, const ClusterSpec& c, const Plan& p,
                            const Workload& w, int stage, const Layers& L, CollectiveTimes& coll, double* flops,
                            RankParams* rp_out) {
  StageTimes st;
  const RankParams rp = rank_params(m, pc, p, stage);
  if (rp_out) *rp_out = rp;
  const int moe_n = rp.moe_layers, dense_n = rp.layers - rp.moe_layers;
  st.forward = dense_n * L.dense.fwd_s() + moe_n * L.moe.fwd_s();
  st.backward = dense_n * L.dense.bwd_s() + moe_n * L.moe.bwd_s();
  double fl = dense_n * L.dense.flops() + moe_n * L.moe.flops();
  if (stage == p.pp - 1) {
    st.forward += L.logits_fwd;
    st.backward += L.logits_bwd;
    fl += L.logits_flops;
  }
  // Multi-token prediction on the last stage: per module the projection, one layer of the
  // model's last kind (its collectives and host stall too) and the output head again.
  const int mtp = stage == p.pp - 1 ? m.mtp_layers : 0;
  const bool mtp_moe = m.moe.has_value();
  const int mtp_dense = mtp_moe ? 0 : mtp, mtp_moe_n = mtp_moe ? mtp : 0;
  if (mtp > 0) {
    st.forward += mtp * (L.mtp_proj_fwd + L.logits_fwd);
    st.backward += mtp * (L.mtp_proj_bwd + L.logits_bwd);
    fl += mtp * (3 * L.mtp_proj_flops + L.logits_flops);
  }
  st.forward += mtp_dense * L.dense.fwd_s() + mtp_moe_n * L.moe.fwd_s();
  st.backward += mtp_dense * L.dense.bwd_s() + mtp_moe_n * L.moe.bwd_s();
  fl += mtp_dense * L.dense.flops() + mtp_moe_n * L.moe.flops();
  {
    // The same compute by kind of work.
    const double nd = dense_n + mtp_dense, nm = moe_n + mtp_moe_n;
    st.parts.gemm = nd * L.dense.gemm_s() + nm * L.moe.gemm_s();
    st.parts.attention = nd * L.dense.attention_s() + nm * L.moe.attention_s();
    st.parts.memory_bound = nd * L.dense.memory_bound_s() + nm * L.moe.memory_bound_s();
    st.parts.recompute = nd * L.dense.recompute_s + nm * L.moe.recompute_s;
    if (stage == p.pp - 1)
      st.parts.output = (1 + mtp) * (L.logits_fwd + L.logits_bwd) + mtp * (L.mtp_proj_fwd + L.mtp_proj_bwd);
  }
  {
    // The compute the layers' overlapped TP, CP and EP collectives slow (layer_cost.h
    // LayerComm::interference_s): the forward pass's share in the forward, the rest
    // (recomputation and backward) in the backward.
    const double nd = dense_n + mtp_dense, nm = moe_n + mtp_moe_n;
    const double fwd = nd * L.dense_comm.interference_fwd_s + nm * L.moe_comm.interference_fwd_s;
    const double all = nd * L.dense_comm.interference_s + nm * L.moe_comm.interference_s;
    st.forward += fwd;
    st.backward += all - fwd;
    st.parts.interference = all;
  }
  st.tp = (dense_n + mtp_dense) * L.dense_comm.tp_exposed_s + (moe_n + mtp_moe_n) * L.moe_comm.tp_exposed_s;
  st.cp = (dense_n + mtp_dense) * L.dense_comm.cp_exposed_s + (moe_n + mtp_moe_n) * L.moe_comm.cp_exposed_s;
  st.ep = (moe_n + mtp_moe_n) * L.moe_comm.ep_exposed_s;
  if (p.moe_a2a_overlap && moe_n > 0) {
    // All-to-all overlap (specs.h moe_a2a_overlap): the steady state's merged steps, a share
    // r of the stage's chunk passes, hide each MoE layer's all-to-alls behind the other
    // pass's blocks (layer_cost.h merged_a2a); the warm-up and cool-down passes expose them
    // as before. The multi-token prediction layers run unmerged (lower.cc).
    const double r = merged_share(p, stage);
    const MergedA2a mg = merged_a2a(L.moe, L.moe_comm, overlap_interference(c.gpu));
    st.ep = moe_n * ((1 - r) * L.moe_comm.ep_exposed_s + r * mg.exposed) + mtp_moe_n * L.moe_comm.ep_exposed_s;
    // Half of the slowed blocks are forward ones (attention, experts), half backward.
    const double slowed = moe_n * r * mg.interference;
    st.forward += slowed / 2;
    st.backward += slowed / 2;
    st.parts.interference += slowed;
  }
  st.host = (dense_n + mtp_dense) * L.dense_stall + (moe_n + mtp_moe_n) * L.moe_stall;
  st.moe = (moe_n + mtp_moe_n) * (L.moe.mlp_fwd_s() + L.moe.mlp_bwd_s() + L.moe_stall) + st.ep;
  if (L.kept) {
    // Partial full recomputation: the stage's layers past the first recompute_num_layers of
    // each chunk keep their activations (the multi-token prediction layers recompute).
    const FullRecomputeLayers rc = full_recompute_layers(m, p, stage);
    const double kd = dense_n - rc.dense, km = moe_n - rc.moe;
    add_layer_times(st, fl, L, kd, km, -1.0);
    add_layer_times(st, fl, *L.kept, kd, km, 1.0);
  }
  if (p.offload_activations > 0 || p.offload_weights > 0) {
    // Whole layers, the stage's first ones: the first min(n_a, n_w) offload both kinds, the
    // next ones up to max(n_a, n_w) the more offloaded kind alone (layer_cost.h LayerOffload).
    const int n_a = offloaded_layers(p.offload_activations, rp.layers);
    const int n_w = offloaded_layers(p.offload_weights, rp.layers);
    const int both = std::min(n_a, n_w), any = std::max(n_a, n_w);
    const int moe_both = moe_layers_among_first(m, p, stage, both);
    const int moe_any = moe_layers_among_first(m, p, stage, any);
    auto pass = [](const LayerOffload& o, bool act, bool weight) {
      return o.exposed_fwd(act, weight) + o.exposed_bwd(act, weight);
    };
    const bool act_alone = n_a > n_w;
    st.offload = (both - moe_both) * pass(L.dense_off, true, true) + moe_both * pass(L.moe_off, true, true) +
                 (any - both - (moe_any - moe_both)) * pass(L.dense_off, act_alone, !act_alone) +
                 (moe_any - moe_both) * pass(L.moe_off, act_alone, !act_alone);
  }
  const int gpn = c.gpus_per_node;
  const double seq = static_cast<double>(w.seq_len);
  const double T = p.microbatch * seq / p.cp;
  if (p.pp > 1) {
    // Activation forward and gradient backward per chunk boundary; 1/t each with SP.
    const double S = T * static_cast<double>(m.hidden_size) * kActBytes /
                     (p.sequence_parallel && p.tp > 1 ? p.tp : 1);
    const int stride = Placement::of(p, gpn).group_stride(GroupKind::kPp);
    const GroupShape g = group_shape(2, stride, gpn);
    const double one = coll.time_s(CollKind::kSendRecv, g, S);
    const double v = p.virtual_stages;
    if (p.schedule == Schedule::kInterleaved && p.overlap_p2p_comm) {
      // Each receive is posted a step ahead and hides behind that step's chunk: in the
      // steady state a forward's behind a backward chunk and a backward's behind a forward.
      // Its transfer kernel slows that chunk's compute (interference, model-reference 4.5a;
      // lower.cc contend): f one is charged as compute, max(0, (1 - f) one - chunk) stays
      // exposed (ring_overlap_exposed_s with n = 2).
      const double f = overlap_interference(c.gpu);
      st.pp = v * ring_overlap_exposed_s(one, 2, st.backward / v, f) +
              v * ring_overlap_exposed_s(one, 2, st.forward / v, f);
      st.pp_fill = one;
      if (p.moe_a2a_overlap) {
        // A merged step (all-to-all overlap) sends its outputs when it ends, and the next
        // merged step of the neighbour needs its backward's gradient at once: no chunk lies
        // between them to hide it ((1 - f) one exposed per merged step); its forward's input
        // was sent a step earlier (the extra warm-up forward). r: the share of the stage's
        // chunk passes that run merged (merged_share).
        const double r = merged_share(p, stage);
        st.pp = (1 - r) * st.pp + r * v * (1 - f) * one;
      }
      // The stage's receives per microbatch: the activation into each of its chunks but the
      // model's first, the gradient into each but the model's last. A forward's receive is
      // posted before the backward chunk it follows, a backward's before a forward chunk.
      const double recv_fwd = v - (stage == 0 ? 1 : 0), recv_bwd = v - (stage == p.pp - 1 ? 1 : 0);
      st.backward += f * one * recv_fwd;
      st.forward += f * one * recv_bwd;
      st.parts.interference += f * one * (recv_fwd + recv_bwd);
    } else if (p.schedule == Schedule::kOneFOneB) {
      // Megatron's non-interleaved 1F1B batches each steady-state send with the receive it
      // waits for (send_forward_recv_backward, send_backward_recv_forward) and waits for
      // both: one exchange, one transfer each way at once, per neighbour and microbatch. A
      // middle stage exchanges with both neighbours, the first and the last stage with one.
      // A stack that sends and receives separately (DeepSpeed's pipeline engine) takes two
      // transfers, one after the other, per exchange (stack.h pipeline_exchange_transfers).
      const bool end = stage == 0 || stage == p.pp - 1;
      st.pp = (end ? 1.0 : 2.0) * pipeline_exchange_transfers(p) * one;
    } else {
      st.pp = 2.0 * v * one;
    }
  }
  if (zero3_module_fetch(m, p)) {
    // DeepSpeed's 2021 per-module fetch (zero3_fetch.h): the microbatch's trace timed segment
    // by segment between the coordinator's device synchronisations.
    const GroupShape g = group_shape(p.dp * p.cp, Placement::of(p, gpn).group_stride(GroupKind::kDp), gpn);
    const StackProfile& stack = stack_profile(p.stack);
    const Zero3Schedule& sched = zero3_schedule_cached(m, p, zero3_policy(stack));
    const Zero3Trace& t = sched.trace;
    const Zero3Hooks& hooks = sched.hooks;
    const Zero3RoleSeconds role_s = zero3_role_seconds(p, L.dense, L.logits_fwd, L.logits_bwd);
    // Every layer's weights have the same few sizes: price each size once (a scan of the few
    // sizes priced is cheaper than a memo lookup per weight; the trace holds about a thousand).
    std::vector<double> gather(t.numel.size()), reduce(t.numel.size());
    std::vector<std::size_t> priced;  // indices of the first weight of each size
    for (std::size_t i = 0; i < t.numel.size(); ++i) {
      const auto same =
          std::find_if(priced.begin(), priced.end(), [&](std::size_t j) { return t.numel[j] == t.numel[i]; });
      if (same != priced.end()) {
        gather[i] = gather[*same];
        reduce[i] = reduce[*same];
        continue;
      }
      gather[i] = coll.time_s(CollKind::kAllGather, g, t.numel[i] * kZero3WeightBytes);
      reduce[i] = coll.time_s(CollKind::kReduceScatter, g, t.numel[i] * p.grad_bytes);
      priced.push_back(i);
    }
    const double f = overlap_interference(c.gpu);
    const double launch = stack.host_us_per_kernel * 1e-6;
    const bool list = stack.zero3_gather == Zero3Gather::kSyncedList;
    const Zero3GatherWork work =
        list ? zero3_gather_work(c.gpu, p.grad_bytes, p.dp * p.cp, stack.host_us_per_kernel) : Zero3GatherWork{};
    // overlap_grad_reduce false: DeepSpeed's overlap_comm off, the reduce-scatters on the
    // compute stream.
    const Zero3Timing z =
        zero3_time(t, hooks, gather, reduce, f, launch, list ? &work : nullptr, !p.overlap_grad_reduce, &role_s);
    // The interference of the gathers prefetched in the forward slows the forward.
    st.forward += z.interference_fwd_s;
    st.backward += z.interference_s - z.interference_fwd_s;
    st.parts.interference += z.interference_s;
    // The launch after each synchronisation and (kSyncedList) each gather's issue are the GPU
    // waiting for the host (as the engine's zero3.launch and zero3.issue ops); the rest of
    // the exposure waits for the data-parallel stream.
    st.host += z.host_s;
    st.fsdp = z.exposed_s() - z.host_s;
    st.zero3_syncs = z.syncs;
    st.zero3_gathers = static_cast<int>(hooks.params.size());
    st.zero3_issue_s = work.issue_s;
    st.zero3_issue_launches = work.issue_launches;
  } else if (p.zero >= 3 && p.dp * p.cp > 1) {
    const GroupShape g = group_shape(p.dp * p.cp, Placement::of(p, gpn).group_stride(GroupKind::kDp), gpn);
    const double params = rp.dense + rp.expert;
    const double ag = coll.time_s(CollKind::kAllGather, g, params * kWeightBytes);
    const double rs = coll.time_s(CollKind::kReduceScatter, g, params * p.grad_bytes);
    const double layer_ag = coll.time_s(CollKind::kAllGather, g, rp.largest_layer * kWeightBytes);
    const double layer_rs = coll.time_s(CollKind::kReduceScatter, g, rp.largest_layer * p.grad_bytes);
    // Prefetch hides each layer's gather behind the previous layer's compute. Gathers and
    // reduce-scatters share the one DP stream (one communicator), so a forward chunk pass,
    // which follows a backward one in the steady state, waits for that pass's last
    // reduce-scatter and then its own first gather: v of them per microbatch with
    // interleaving. A backward pass's first gathers queue behind the forward's and finish
    // during its compute: only the stream's throughput can expose them.
    // Interference: every layer's gather (forward and backward) and reduce-scatter overlaps
    // compute (lower.cc contend); priced per layer collective, as the engine issues them.
    const double f = overlap_interference(c.gpu);
    const bool no_sync = p.defers_reduce_scatter();
    double waited = 1.0;  // of the chunk-boundary wait below, the share not spent slowed
    const LayerRankParams ld = layer_rank_params(m, pc, p, false);
    const LayerRankParams lm = m.moe ? layer_rank_params(m, pc, p, true) : LayerRankParams{};
    // The stack's copy of each gathered layer on the compute stream (FSDP2's copy-out), after
    // the forward's gather and the backward's (lower.cc fsdp_copy_out).
    const double copy = dense_n * zero3_copy_out_s(c, p, ld) + moe_n * zero3_copy_out_s(c, p, lm);
    const double copy_bwd = p.reshard_after_forward ? copy : 0.0;
    // Its copy of each layer's gradients into the reduce-scatter input before the
    // reduce-scatter (FSDP2's copy-in; lower.cc fsdp_copy_in): every microbatch, or with
    // fsdp_no_sync the last one's alone, spread here over the step's m microbatches (the
    // step's total; the engine runs them in the last microbatch).
    const double copy_in = (dense_n * zero3_copy_in_s(c, p, ld) + moe_n * zero3_copy_in_s(c, p, lm)) /
                           (no_sync ? static_cast<double>(p.accumulation()) : 1.0);
    st.forward += copy;
    st.backward += copy_bwd + copy_in;
    st.parts.memory_bound += copy + copy_bwd + copy_in;
    if (f > 0) {
      auto layer_coll = [&](CollKind k, const LayerRankParams& lp, double bytes_per_param) {
        const double bytes = (lp.dense + lp.expert) * bytes_per_param;
        return bytes > 0 ? coll.time_s(k, g, bytes) : 0.0;
      };
      const double ag_layers = dense_n * layer_coll(CollKind::kAllGather, ld, kWeightBytes) +
                               moe_n * layer_coll(CollKind::kAllGather, lm, kWeightBytes);
      const double rs_layers = dense_n * layer_coll(CollKind::kReduceScatter, ld, p.grad_bytes) +
                               moe_n * layer_coll(CollKind::kReduceScatter, lm, p.grad_bytes);
      // With fsdp_no_sync only the last microbatch reduce-scatters (fsdp_last below).
      const double rs_each = no_sync ? 0.0 : rs_layers;
      // Without reshard_after_forward the backward gathers nothing.
      const double ag_layers_bwd = p.reshard_after_forward ? ag_layers : 0.0;
      st.forward += f * ag_layers;
      st.backward += f * (ag_layers_bwd + rs_each);
      st.parts.interference += f * (ag_layers + ag_layers_bwd + rs_each);
      if (no_sync) st.fsdp_last_interference = f * rs_layers;
      // While a pass waits for the reduce-scatter and gather at its start, their
      // interference runs on the idle compute stream: that much of the wait is counted above.
      waited = 1.0 - f;
    }
    const double v = p.virtual_stages;
    // The backward's gathers (none without reshard_after_forward).
    const double ag_bwd = p.reshard_after_forward ? ag : 0.0;
    if (no_sync) {
      // No reduce-scatter in any microbatch but the last, whose backward carries them all
      // (once per step: the step's tail, estimate()); the forward after a backward then
      // waits only for its first gather.
      st.fsdp = std::max(waited * v * layer_ag, ag - st.forward) + std::max(0.0, ag_bwd - st.backward);
      st.fsdp_last =
          std::max(0.0, ag_bwd + rs - st.backward - st.fsdp_last_interference) - std::max(0.0, ag_bwd - st.backward);
    } else {
      st.fsdp = std::max(waited * v * (layer_rs + layer_ag), ag - st.forward) +
                std::max(0.0, ag_bwd + rs - st.backward);
    }
  }
  if (flops) *flops = fl;
  return st;
}

}  // namespace

double slowest_gpu_cost_s(const ModelSpec& m, const ClusterSpec& c, const Plan& p, const Workload& w,
                          double step_time_s) {
  if (!(job_pace(c) > 1.0)) return 0.0;
  ClusterSpec even = c;
  even.gpu_speed_sigma = 0;
  return step_time_s - estimate(m, even, p, w).step_time_s;
}

bool same_middle_stage(const ModelSpec& m, const Plan& p, int s, int r) {
  const auto middle = [&](int x) { return x > 0 && x < p.pp - 1; };
  if (!middle(s) || !middle(r)) return false;
  if (s == r) return true;
  const int dense = dense_layers_of(m);
  for (int v = 0; v < p.virtual_stages; ++v) {
    const int a = s + v * p.pp, b = r + v * p.pp;
    const int n = chunk_layers(m, p, a);
    if (chunk_layers(m, p, b) != n ||
        std::clamp(dense - chunk_first_layer(m, p, a), 0, n) != std::clamp(dense - chunk_first_layer(m, p, b), 0, n)) {
      return false;
    }
  }
  return !p.moe_a2a_overlap || schedule_warmup(p, s) == schedule_warmup(p, r);
}

StageTimes stage_times(const ModelSpec& m, const ClusterSpec& c, const Plan& p, const Workload& w,
                       int stage) {
  const Layers L = layer_costs(m, c, p, w, nullptr);
  CollectiveTimes coll(c);
  return stage_times_with(m, count_params(m), c, p, w, stage, L, coll, nullptr, nullptr);
}

StepParts step_parts(const StepBreakdown& b, const ComputeParts& compute) {
  const double slowed = compute.interference;
  return StepParts{b.compute - slowed, b.exposed_comm, b.bubble, b.optimizer, b.wait, b.input, b.host, slowed, b.moe};
}

Estimate estimate(const ModelSpec& m, const ClusterSpec& c, const Plan& p, const Workload& w, EstimateNotes notes,
                  CollectiveTimes* times) {
  if (times != nullptr && &times->cluster() != &c) times = nullptr;  // another cluster's
  // The stages' collectives repeat at the same sizes: priced once each, in the caller's memo
  // or in this estimate's own.
  std::optional<CollectiveTimes> own_times;
  CollectiveTimes& coll = times != nullptr ? *times : own_times.emplace(c);
  Estimate e;
  e.params = count_params(m);
  e.world = c.world();
  e.microbatches = p.accumulation();
  e.tokens_per_step = p.global_batch * w.seq_len;
  e.pace = job_pace(c);
  e.model_flops_per_step = token_flops(m, w.seq_len).training * static_cast<double>(e.tokens_per_step);
  const Layers L = layer_costs(m, c, p, w, times);
  const double mb = static_cast<double>(e.microbatches);
  const int gpn = c.gpus_per_node;
  const double nd = static_cast<double>(p.dp) * p.cp;

  double t_max = -1, t_sum = 0, hw_flops = 0;
  std::vector<RankParams> stage_params(static_cast<std::size_t>(p.pp));
  struct DpInputs {
    double dense, dense_last, expert, expert_last, forward, backward;
    bool operator==(const DpInputs&) const = default;
  };
  DpInputs dp_in{};
  struct DpSync {
    double time = 0;          // exposed beyond the stage's (slowed) last backward
    double interference = 0;  // compute slowed by the overlapped collectives
    double after = 0;         // the parameter gather after the optimizer (ZeRO 1/2, not overlapped)
  };
  DpSync dp_out{};
  bool have_dp = false;
  const double f_int = overlap_interference(c.gpu);
  const Placement placement = Placement::of(p, gpn);
  const GroupShape dp_group = group_shape(static_cast<int>(nd), placement.group_stride(GroupKind::kDp), gpn);
  const GroupShape edp_group =
      group_shape(p.edp(), placement.group_stride(GroupKind::kEdp), gpn);
  StageTimes slowest;
  // Each stage's tail after stage 0's last backward: exposed data-parallel time and its
  // optimizer. The stage with the longest tail sets the parts.
  // The tail has two halves around the gradient norm's all-reduce over every rank
  // (grad_norm_sync_s; lower.cc finish_step): no stage starts its update before the last
  // one has reduced its gradients and summed its part of the norm, so the step's tail is
  // max over stages of (exposed reduction + the norm's pass), the all-reduce, then max over
  // stages of (the rest of the optimizer + a parameter gather after it).
  struct Tail {
    double dp = 0;
    double clip = 0;   // the gradient norm, clip and fp16 unscale (OptimizerStep::clip_s)
    double rest = 0;   // the optimizer step after the norm (OptimizerStep::time_s() - clip_s)
    double after = 0;  // dp after the optimizer (DpSync::after)
    double tp = 0;     // sequence parallelism's gradients all-reduced over TP after dp
  };
  // The collectives overlapped with a stage's last backward slow it (compute.h
  // overlap_interference). The last microbatch's backward runs from the last stage to the
  // first, each stage waiting for the next one's gradient, so every stage's slowed compute
  // lies on that chain and delays stage 0's last backward (the engine's interference ops
  // sit between the layers' backward ops; tests/sim/engine_test.cc). The slowest stage's
  // share is its compute; the other stages' is its wait, i.e. bubble.
  double chain_interference = 0, slowest_interference = 0;
  // Backward compute (slowed) of the stages before s in the drain: the time stage s's
  // exposed reduction has before stage 0 ends its last backward.
  double drain_before = 0;
  // Tied embeddings across the pipeline (layer_cost.h tied_embedding_grad_bytes): the first
  // and the last stage exchange the embedding's gradients once both have reduced theirs,
  // before their optimizers (lower.cc tied_embedding_exchange); their tails wait for both.
  const double tied_bytes = tied_embedding_grad_bytes(m, p);
  const double t_tied =
      tied_bytes > 0 ? coll.time_s(CollKind::kSendRecv, Placement::of(p, gpn).stage_pair(0, p.pp - 1), tied_bytes)
                     : 0.0;
  // Sequence parallelism's replicated parameters (layer_cost.h sp_grad_allreduce_bytes): each
  // stage all-reduces their gradients over its TP group after its data-parallel reduction
  // (lower.cc finish_step), before the tied exchange and the norm.
  const GroupShape tp_group = group_shape(p.tp, placement.group_stride(GroupKind::kTp), gpn);
  double sp_bytes = 0, t_sp = 0;
  Tail first_tail, last_tail;  // the end stages' tails, kept for the exchange
  double before_best = -1, before_dp = 0, tail_clip = 0, tail_pp = 0, tail_tp = 0;  // the first half's longest stage
  double after_best = -1, after_dp = 0, after_opt = 0;                              // the second half's
  // `wait` for the other end stage's reductions counts as dp (what it waits for); `tied` is
  // the exchange.
  auto consider = [&](const Tail& t, double wait, double tied) {
    if (const double before = t.dp + t.tp + wait + tied + t.clip; before > before_best) {
      before_best = before;
      before_dp = t.dp + wait;
      tail_tp = t.tp;
      tail_pp = tied;
      tail_clip = t.clip;
    }
    if (const double after = t.rest + t.after; after > after_best) {
      after_best = after;
      after_dp = t.after;
      after_opt = t.rest;
    }
  };
  // The last middle stage priced: the next ones like it take its times (same_middle_stage).
  struct PricedStage {
    int stage = -1;
    StageTimes times;
    double flops = 0;
    RankParams params;
  } priced;
  // The optimizer step of the last distinct parameter count.
  double os_params = -1;
  OptimizerStep os;
  // Each stage's twin: the earlier stage it is alike (its shape of memory too), else itself.
  std::vector<int> twin(static_cast<std::size_t>(p.pp));
  for (int s = 0; s < p.pp; ++s) {
    double fl = 0;
    RankParams rp;
    StageTimes st;
    twin[static_cast<std::size_t>(s)] = s;
    if (priced.stage >= 0 && same_middle_stage(m, p, s, priced.stage)) {
      twin[static_cast<std::size_t>(s)] = priced.stage;
      st = priced.times;
      fl = priced.flops;
      rp = priced.params;
    } else {
      st = stage_times_with(m, e.params, c, p, w, s, L, coll, &fl, &rp);
      if (s > 0 && s < p.pp - 1) priced = {s, st, fl, rp};
    }
    stage_params[static_cast<std::size_t>(s)] = rp;
    hw_flops += fl * mb * p.tp * p.cp * p.dp;
    const double t = st.per_microbatch();
    t_sum += t;
    const bool is_slowest = t > t_max;
    if (is_slowest) {
      t_max = t;
      slowest = st;
      e.slowest_stage = s;
    }
    // Data-parallel gradient synchronisation and optimizer after the last backward.
    DpSync dp_time{};
    if (p.defers_reduce_scatter()) {
      // The last microbatch's reduce-scatters and the compute they slow (stage_times).
      dp_time = {st.fsdp_last, st.fsdp_last_interference};
    } else if (p.zero < 3 && nd > 1) {
      // The last bucket to become ready holds the stage's first layer (and, on stage 0, the
      // input embedding): it cannot overlap any backward compute.
      const int first_layer = chunk_first_layer(m, p, s);
      const bool first_moe = m.moe && first_layer >= m.moe->num_dense_layers;
      const LayerRankParams lp0 = layer_rank_params(m, e.params, p, first_moe);
      const ParamCounts& pc = e.params;
      const double extras0 = s == 0 ? static_cast<double>(pc.embedding_input) / p.tp + pc.position_embedding : 0.0;
      // Overlapped collectives slow the compute they overlap (compute.h
      // overlap_interference): by f x their time, all buckets but the last, whose compute
      // is done; the window that hides them grows by as much. The reduction's collective and
      // overlap are the stack's (stack.h dp_grad_collective).
      const CollKind grad_kind = dp_grad_collective(p);
      const bool grad_overlap = dp_grad_overlapped(p);
      auto sync = [&](const GroupShape& g, double params, double last_params) {
        DpSync out;
        if (params <= 0 || g.ranks <= 1) return out;
        const double grad_bytes = params * p.grad_bytes;
        double t_grad = coll.time_s(grad_kind, g, grad_bytes);
        if (grad_overlap) {
          const double bucket =
              std::min(grad_bytes, std::max(p.ddp_bucket_MiB * 1024 * 1024, last_params * p.grad_bytes));
          const double t_bucket = coll.time_s(grad_kind, g, bucket);
          const double slowed = f_int * std::max(0.0, t_grad - t_bucket);
          out.interference += slowed;
          t_grad = std::max(t_bucket, t_grad - st.backward - slowed);
        }
        double t_param = 0;
        if (p.zero >= 1) {
          t_param = coll.time_s(CollKind::kAllGather, g, params * kWeightBytes);
          if (p.overlap_param_gather) {
            const double slowed = f_int * t_param;
            out.interference += slowed;
            t_param = std::max(0.0, t_param - st.forward - slowed);
          } else {
            // lower.cc finish_step: gathered once the optimizer is done, after the gradient
            // norm's synchronisation: no drain slack hides it.
            out.after = t_param;
            t_param = 0;
          }
        }
        out.time = t_grad + t_param;
        return out;
      };
      // Middle stages usually hold the same parameters and take the same time: price the
      // synchronisation once per distinct input (the same function of the same inputs).
      const DpInputs in{rp.dense, lp0.dense + extras0, rp.expert, lp0.expert, st.forward, st.backward};
      if (!(have_dp && in == dp_in)) {
        dp_in = in;
        have_dp = true;
        const DpSync a = sync(dp_group, rp.dense, in.dense_last), b = sync(edp_group, rp.expert, in.expert_last);
        dp_out = {a.time + b.time, a.interference + b.interference, a.after + b.after};
      }
      dp_time = dp_out;
    }
    // Stage s ends its last backward the drain's backward passes of stages s-1 .. 0 (each
    // slowed by its own overlapped collectives, one chunk's share with virtual stages)
    // before stage 0 does: the slack that hides its exposed reduction.
    chain_interference += dp_time.interference;
    if (is_slowest) slowest_interference = dp_time.interference;
    const double slack = drain_before;
    drain_before += (st.backward + dp_time.interference) / p.virtual_stages;
    const double opt_params = p.zero >= 1 ? rp.dense / nd + rp.expert / p.edp() : rp.dense + rp.expert;
    if (opt_params != os_params) {
      os_params = opt_params;
      os = optimizer_step(c, p, opt_params);
    }
    const double exposed = std::max(0.0, dp_time.time - slack);
    // The TP all-reduce follows the reduction: what of the two the slack does not hide, the
    // reduction's share first.
    // (Stages with the same layers share the bytes: priced once per distinct size.)
    if (const double bytes = sp_grad_allreduce_bytes(m, e.params, p, rp, s == p.pp - 1); bytes != sp_bytes) {
      sp_bytes = bytes;
      t_sp = bytes > 0 ? coll.time_s(CollKind::kAllReduce, tp_group, bytes) : 0.0;
    }
    const double exposed_tp = std::max(0.0, dp_time.time + t_sp - slack) - exposed;
    const Tail own{exposed, os.clip_s, os.time_s() - os.clip_s, dp_time.after, exposed_tp};
    if (t_tied > 0 && (s == 0 || s == p.pp - 1)) {
      (s == 0 ? first_tail : last_tail) = own;
    } else {
      consider(own, 0, 0);
    }
  }
  if (t_tied > 0) {
    const double both = std::max(first_tail.dp + first_tail.tp, last_tail.dp + last_tail.tp);
    for (const Tail& t : {first_tail, last_tail}) consider(t, both - t.dp - t.tp, t_tied);
  }
  const double bubble = (t_sum - t_max) / p.virtual_stages + (chain_interference - slowest_interference);
  e.breakdown.compute = mb * (slowest.forward + slowest.backward) + slowest_interference;
  e.compute = {mb * slowest.parts.gemm,         mb * slowest.parts.attention,
               mb * slowest.parts.memory_bound, mb * slowest.parts.recompute,
               mb * slowest.parts.output,       mb * slowest.parts.interference + slowest_interference};
  e.exposed.tp = mb * slowest.tp + tail_tp;
  e.exposed.cp = mb * slowest.cp;
  e.exposed.ep = mb * slowest.ep;
  // Overlapped receives still lie on the fill and drain path: the first forward crosses
  // pp - 1 stage boundaries before the last stage starts, the last backward as many back.
  e.exposed.pp = mb * slowest.pp + 2.0 * (p.pp - 1) * slowest.pp_fill + tail_pp;
  const double t_norm = grad_norm_sync_s(c, p, times);
  e.exposed.dp = mb * slowest.fsdp + before_dp + t_norm + after_dp;
  e.breakdown.exposed_comm = e.exposed.tp + e.exposed.cp + e.exposed.ep + e.exposed.pp + e.exposed.dp;
  e.breakdown.bubble = bubble;
  e.breakdown.optimizer = tail_clip + after_opt;
  e.breakdown.optimizer_clip = tail_clip;
  e.breakdown.grad_norm_sync = t_norm;
  e.breakdown.sp_grad_sync = tail_tp;
  e.breakdown.input = w.input_time_s;
  e.breakdown.host = mb * (slowest.host + slowest.offload);
  e.breakdown.moe = mb * slowest.moe;
  e.step_time_s = e.breakdown.compute + e.breakdown.exposed_comm + e.breakdown.bubble +
                  e.breakdown.wait + e.breakdown.optimizer + e.breakdown.input;
  if (e.breakdown.host > 0) e.step_time_s += e.breakdown.host;  // added only when launch-bound
  e.tokens_per_s = static_cast<double>(e.tokens_per_step) / e.step_time_s;
  e.step_time_band = step_time_band(step_parts(e.breakdown, e.compute), validation_residuals(p.stack));
  e.tokens_per_s_band = rate_band(e.step_time_band, e.step_time_s, e.tokens_per_s);
  const double peak = peak_flops(c.gpu, p.precision) * static_cast<double>(e.world);
  e.mfu = e.model_flops_per_step / (e.step_time_s * peak);
  e.executed_flops_per_step = hw_flops;
  // HFU (PaLM, Korthikanti): model FLOPs plus the recomputation the plan requests, in the
  // same full-square convention as MFU, so HFU >= MFU.
  {
    const TokenFlops tf = token_flops(m, w.seq_len);
    // Per token: one more forward of the layers (full), or what selective recomputation re-runs
    // (none: 0).
    double extra = p.recompute == Recompute::kFull ? tf.forward - tf.logits : recompute_token_flops(m, p, tf);
    if (p.partial_full_recompute()) {
      // Of the layers, those that recompute (recompute_num_layers).
      int recomputed = 0;
      for (int s = 0; s < p.pp; ++s) recomputed += full_recompute_layers(m, p, s).total();
      extra *= static_cast<double>(recomputed) / m.num_layers;
    }
    e.hardware_flops_per_step = e.model_flops_per_step + extra * static_cast<double>(e.tokens_per_step);
  }
  e.hfu = e.hardware_flops_per_step / (e.step_time_s * peak);

  // The worst rank's memory; host memory (offload) is checked on every stage.
  int host_short = -1;
  MemoryBreakdown host_worst;
  const LayerActivations acts = layer_activations(m, p, w.seq_len);
  e.stages.resize(static_cast<std::size_t>(p.pp));
  const auto rank_of = [&](int s) -> const RankParams& { return stage_params[static_cast<std::size_t>(s)]; };
  for_each_stage_memory(
      m, c, p, w, [&](int s, int r) { return twin[static_cast<std::size_t>(s)] == r; },
      [&](int s) { return stage_memory_shape(m, e.params, p, w, s, rank_of(s), acts); },
      [&](int s, const MemoryBreakdown& mem) {
        e.stages[static_cast<std::size_t>(s)] = stage_state(p, rank_of(s), mem);
        if (s == 0 || mem.total > e.memory.total) e.memory = mem;
        if (host_short < 0 && mem.host > mem.host_usable) {
          host_short = s;
          host_worst = mem;
        }
      });
  if (host_short >= 0) e.memory.fits = false;
  // The rest writes the notes alone.
  if (notes == EstimateNotes::kSkip) return e;
  if (const GroupShape tg = group_shape(p.tp, Placement::of(p, gpn).group_stride(GroupKind::kTp), gpn);
      tg.nodes > 1) {
    e.notes.push_back(fmt::format("TP group of {} spans {} nodes: its collectives use the NICs", p.tp, tg.nodes));
  }
  if (m.moe && p.moe_deepep_dispatcher() && p.ep > 1) {
    const GroupShape eg = group_shape(p.ep, Placement::of(p, gpn).group_stride(GroupKind::kEp), gpn);
    const EpRouting& r = L.moe_comm.ep_routing;  // as layer_comm priced the exchanges
    e.notes.push_back(fmt::format(
        "DeepEP dispatcher: a token's {} routed copies reach {:.2f} of {} ranks{}, sent "
        "once per rank (docs/model-reference.md 5.11)",
        m.moe->top_k, r.ranks, p.ep, eg.nodes > 1 ? fmt::format(" on {:.2f} of {} nodes", r.nodes, eg.nodes) : ""));
  }
  if (m.moe && m.moe->capacity_factor > 0) {
    // Token dropping (docs/model-reference.md "Token dropping and padding"): what the
    // busiest rank's experts run, and what the cap drops there (its quality cost is not
    // stepcast's to price).
    const MoeSpec& moe = *m.moe;
    const double load = moe_routed_load(moe);
    const double dropped = 1.0 - std::min(1.0, moe.capacity_factor / moe.load_imbalance);
    e.notes.push_back(fmt::format(
        "token dropping at capacity factor {:g}{}: the busiest rank's experts run {:g} x the balanced rows{} "
        "(docs/model-reference.md 4.2)",
        moe.capacity_factor, moe.pad_to_capacity ? ", padded to capacity" : "", load,
        dropped > 0 ? fmt::format(", dropping {:.1f}% of its routed rows (load_imbalance {:g})", dropped * 100,
                                  moe.load_imbalance)
                    : ""));
  }
  if (slowest.zero3_syncs > 0) {
    e.notes.push_back(
        slowest.zero3_issue_s > 0
            ? fmt::format("ZeRO-3 fetched per module as {} ran it: {} device synchronisations and {} weights gathered "
                          "per microbatch, each gather after a drain, issued by the host in {:.2f} ms ({} launches); "
                          "the GPU waits {:.3g} s for the host (docs/model-reference.md 5.9)",
                          to_string(p.stack), slowest.zero3_syncs, slowest.zero3_gathers, slowest.zero3_issue_s * 1e3,
                          slowest.zero3_issue_launches, e.breakdown.host)
            : fmt::format("ZeRO-3 fetched per module as {} ran it: {} device synchronisations and {} weights gathered "
                          "per microbatch (docs/model-reference.md 5.9)",
                          to_string(p.stack), slowest.zero3_syncs, slowest.zero3_gathers));
  }
  if (zero3_module_sync_stack(p) && !zero3_module_fetch(m, p)) {
    e.notes.push_back(fmt::format(
        "ZeRO-3 priced per layer: {}'s per-module fetch is expressed with pp 1, tp 1, cp 1, dense layers with "
        "standard attention, no MTP or offload, per-microbatch reduce-scatters and reshard_after_forward "
        "(docs/model-reference.md 5.9)",
        to_string(p.stack)));
  }
  if (p.overlap_grad_reduce && !dp_grad_overlapped(p) && p.zero < 3 && static_cast<double>(p.dp) * p.cp > 1) {
    e.notes.push_back(
        fmt::format("{} reduces the gradients after the last microbatch: plan.overlap_grad_reduce does "
                    "not apply (docs/model-reference.md 5.10)",
                    to_string(p.stack)));
  }
  if (e.memory.total > e.memory.usable) {
    e.notes.push_back(fmt::format(
        "does not fit: stage {} needs {:.1f} GiB, {:.1f} GiB usable ({:.0f}% headroom); short by {:.1f} GiB",
        e.memory.stage, e.memory.total / kGiB, e.memory.usable / kGiB, p.memory_headroom * 100,
        (e.memory.total - e.memory.usable) / kGiB));
  }
  if (host_short >= 0) {
    e.notes.push_back(fmt::format(
        "does not fit in host memory: stage {} offloads {:.1f} GiB per GPU, {:.1f} GiB is each GPU's share of the "
        "node's {:.0f} GiB",
        host_short, host_worst.host / kGiB, host_worst.host_usable / kGiB, c.host_memory_GiB));
  }
  return e;
}

}  // namespace stepcast

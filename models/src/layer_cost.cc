#include "stepcast/models/layer_cost.h"

#include <algorithm>
#include <cmath>

#include "stepcast/models/collectives.h"
#include "stepcast/models/compute.h"
#include "stepcast/models/params.h"
#include "stepcast/models/program.h"
#include "stepcast/models/stack.h"

namespace stepcast {

namespace {

constexpr double kActBytes = 2;  // 16-bit activations
// Dropout as PyTorch's native_dropout runs it (aten/src/ATen/native/cuda/Dropout.cu): one
// kernel reads its 16-bit input and writes the output and a 1-byte bool mask.
constexpr double kDropoutMaskBytes = 1;
// Attention-probability dropout (no FlashAttention): read the probabilities 2, write the
// dropped probabilities 2 and the mask 1, per score; .V then reads the dropped copy.
constexpr double kAttnDropoutBytesPerScore = 2 * kActBytes + kDropoutMaskBytes;

}  // namespace

double kv_heads_per_rank(const ModelSpec& m, const Plan& p) {
  return std::max(1.0, static_cast<double>(m.num_kv_heads) / p.tp);
}

double expert_tokens(const Plan& p, double T) {
  return p.tp > 1 && !p.sequence_parallel ? T : T * p.expert_tp() / p.tp;
}

double fp8_quant_bytes_per_element(Fp8Recipe recipe) {
  switch (recipe) {
    case Fp8Recipe::kTensorwise: return 6;                 // amax read 2, then cast + transpose: read 2, write 1 + 1
    case Fp8Recipe::kDelayed: return 4;                    // cast + transpose, the amax recorded in the same pass
    case Fp8Recipe::kBlockwise: return 4 + 2.0 * 4 / 128;  // one pass; fp32 scales per 128, both layouts
    case Fp8Recipe::kMxfp8: return 4 + 2.0 / 32;           // one pass; E8M0 scales per 32, both layouts
  }
  return 6;
}

double moe_routed_load(const MoeSpec& e) {
  if (e.capacity_factor <= 0) return e.load_imbalance;
  return e.pad_to_capacity ? e.capacity_factor : std::min(e.load_imbalance, e.capacity_factor);
}

HeadDims head_dims(const ModelSpec& m) {
  if (m.mla) {
    return {static_cast<double>(m.mla->qk_nope_head_dim + m.mla->qk_rope_head_dim),
            static_cast<double>(m.mla->v_head_dim)};
  }
  return {static_cast<double>(m.head_dim), static_cast<double>(m.head_dim)};
}

Fp8Elements fp8_quantized_elements(const ModelSpec& m, const Plan& p, double T, bool moe) {
  const double t = p.tp;
  const double h = static_cast<double>(m.hidden_size);
  const bool sp = p.sequence_parallel && p.tp > 1;
  const double T_sp = sp ? T / t : T;  // a sequence-parallel shard
  const double G = m.ffn_matrices;
  Fp8Elements q;
  if (m.mla) {
    // The MLA projections priced as one GEMM: its input and output gradient, h wide each.
    q.fwd_attn = T_sp * h;
    q.bwd_attn = T_sp * h;
  } else {
    const HeadDims d = head_dims(m);
    const double a_r = m.num_attention_heads / t;
    const double n_qkv = a_r * d.qk + kv_heads_per_rank(m, p) * (d.qk + d.v);
    q.fwd_attn = T_sp * h + T * a_r * d.v;  // QKV input, out-projection input
    q.bwd_attn = T * n_qkv + T_sp * h;      // their output gradients
  }
  auto ffn = [&](double rows_in, double rows, double width) {
    q.fwd_mlp += rows_in * h + rows * width;              // fc1 input, fc2 input
    q.bwd_mlp += rows * (G - 1) * width + rows_in * h;    // fc1 and fc2 output gradients
  };
  if (!moe) {
    ffn(T_sp, T, static_cast<double>(m.ffn_hidden_size) / t);
  } else {
    // Routed experts: the dispatched rows at the expert's width (layer_cost); the router
    // runs in higher precision. Shared experts: a TP-split dense FFN.
    const MoeSpec& e = *m.moe;
    const double rows = expert_tokens(p, T) * e.top_k * moe_routed_load(e);  // the busiest rank's
    ffn(rows, rows, static_cast<double>(e.expert_ffn_hidden_size) / p.expert_tp());
    if (e.num_shared_experts > 0) {
      ffn(T_sp, T, static_cast<double>(e.num_shared_experts) * e.shared_expert_ffn_hidden_size / t);
    }
  }
  return q;
}

OpSacSplit op_sac_split(const ModelSpec& m, const Plan& p) {
  const double t = p.tp;
  const double h = static_cast<double>(m.hidden_size);
  const double a_r = m.num_attention_heads / t;
  const double g_r = kv_heads_per_rank(m, p);
  const HeadDims d = head_dims(m);
  const double F = static_cast<double>(m.ffn_hidden_size) / t;
  OpSacSplit out;
  out.mms = {{a_r * d.qk, h}, {g_r * d.qk, h}, {g_r * d.v, h}, {h, a_r * d.v}};
  if (m.ffn_matrices == 3) {
    out.mms.push_back({F, h});  // w1 (gate)
    out.mms.push_back({F, h});  // w3 (up)
  } else {
    out.mms.push_back({F, h});
  }
  out.mms.push_back({h, F});
  const bool alternates = out.mms.size() % 2 == 1;
  double a = 0, b = 0;  // bytes per token of the odd-numbered (1st, 3rd, ...) and even-numbered outputs
  for (std::size_t i = 0; i < out.mms.size(); ++i) {
    (i % 2 == 0 ? a : b) += kActBytes * out.mms[i].n;
    // A forward that saves the odd-numbered recomputes the even-numbered, and the other way.
    out.mms[i].recompute_weight = alternates ? 0.5 : (i % 2 == 0 ? 0.0 : 1.0);
  }
  out.saved_bytes_per_token = alternates ? std::max(a, b) : a;
  return out;
}

LayerCost layer_cost(const ModelSpec& m, const ClusterSpec& c, const Plan& p, std::int64_t seq_len,
                     bool moe) {
  const GpuSpec& gpu = c.gpu;
  const double pace = job_pace(c);  // the slowest GPU of the job sets every compute time
  const Precision prec = p.precision;
  const double seq = static_cast<double>(seq_len);
  const double t = p.tp;
  const double T = p.microbatch * seq / p.cp;  // tokens per rank per microbatch
  const double h = static_cast<double>(m.hidden_size);
  const double a_r = m.num_attention_heads / t;
  const double g_r = kv_heads_per_rank(m, p);
  const HeadDims d = head_dims(m);
  const bool sp = p.sequence_parallel && p.tp > 1;
  LayerCost lc;
  // A GEMM (M x K).(K x N): roofline time and 2MNK FLOPs. Its backward: the data gradient
  // (M x N).(N x K) and the weight gradient (K x M).(M x N), each timed on its own shape.
  struct Passes {
    double fwd = 0, dgrad = 0, wgrad = 0;
    double bwd() const { return dgrad + wgrad; }
  };
  auto fwd_time = [&](double mm, double nn, double kk) {
    return mm > 0 && nn > 0 && kk > 0 ? pace * gemm_time_s(gpu, prec, mm, nn, kk) : 0.0;
  };
  // Accumulates a GEMM's forward and backward seconds (gemm_backward_s's two shapes) and its
  // forward FLOPs.
  auto gemm = [&](double& time, double& bwd, double& flops, double mm, double nn, double kk) {
    if (mm <= 0 || nn <= 0 || kk <= 0) return Passes{};
    const Passes g{fwd_time(mm, nn, kk), fwd_time(mm, kk, nn), fwd_time(kk, nn, mm)};
    time += g.fwd;
    bwd += g.bwd();
    flops += 2 * mm * nn * kk;
    return g;
  };
  double attn_bwd = 0, mlp_bwd = 0;  // the blocks' backward GEMM seconds
  if (m.mla) {
    const double attn_w = static_cast<double>(count_params(m).attention_per_layer) / t;
    gemm(lc.attn_gemm_s, attn_bwd, lc.attn_gemm_flops, T, attn_w / h, h);  // MLA projections as one GEMM
  } else {
    const double n_qkv = a_r * d.qk + g_r * (d.qk + d.v), k_proj = a_r * d.v;
    const Passes q = gemm(lc.qkv_gemm_s, attn_bwd, lc.qkv_flops, T, n_qkv, h);
    const Passes o = gemm(lc.proj_gemm_s, attn_bwd, lc.proj_flops, T, h, k_proj);
    lc.qkv_dgrad_s = q.dgrad;
    lc.qkv_wgrad_s = q.wgrad;
    lc.proj_dgrad_s = o.dgrad;
    lc.proj_wgrad_s = o.wgrad;
    lc.attn_gemm_s = lc.qkv_gemm_s + lc.proj_gemm_s;
    lc.attn_gemm_flops = lc.qkv_flops + lc.proj_flops;
    if (!moe && sp && p.tp_comm_overlap) {
      lc.tp_overlap = true;
      lc.tp_chunks = p.tp;
      // A dgrad chunk is 1/tp of the unsplit data gradient: on its own (M/tp) x K output
      // the fixed 128 x 256 tiles, with no split-K, would leave most SMs idle (e.g. 32
      // tiles for the 70B proj at TP8) where the library splits K.
      lc.qkv_chunk_s = fwd_time(T / t, n_qkv, h);
      lc.proj_chunk_s = fwd_time(T / t, h, k_proj);
      lc.proj_dgrad_chunk_s = o.dgrad / t;
    }
  }
  double ffn_inner = 0;  // per-token FFN inner width on this rank (elementwise traffic)
  // For module recomputation: the shared experts' FLOPs and inner elements (tokens x width),
  // the routed experts' inner elements (their activation functions' work).
  double shared_flops = 0, shared_elem = 0, expert_act_elem = 0;
  const double G = m.ffn_matrices;
  if (!moe) {
    const double F = static_cast<double>(m.ffn_hidden_size) / t;
    const Passes f1 = gemm(lc.fc1_gemm_s, mlp_bwd, lc.fc1_flops, T, (G - 1) * F, h);
    const Passes f2 = gemm(lc.fc2_gemm_s, mlp_bwd, lc.fc2_flops, T, h, F);
    lc.fc1_dgrad_s = f1.dgrad;
    lc.fc1_wgrad_s = f1.wgrad;
    lc.fc2_dgrad_s = f2.dgrad;
    lc.fc2_wgrad_s = f2.wgrad;
    lc.mlp_gemm_s = lc.fc1_gemm_s + lc.fc2_gemm_s;
    lc.mlp_flops = lc.fc1_flops + lc.fc2_flops;
    if (lc.tp_overlap) {
      lc.fc1_chunk_s = fwd_time(T / t, (G - 1) * F, h);
      lc.fc2_chunk_s = fwd_time(T / t, h, F);
      lc.fc2_dgrad_chunk_s = f2.dgrad / t;  // as proj's above
    }
    ffn_inner = F;
  } else {
    const MoeSpec& e = *m.moe;
    const double T_in = sp ? T / t : T;  // tokens entering the layer on this rank
    gemm(lc.mlp_gemm_s, mlp_bwd, lc.mlp_flops, T_in, e.num_experts, h);  // router
    // Routed experts: the ep ranks' tokens spread evenly over the E experts, so each of
    // this rank's E/ep experts sees T_e*k*ep/E rows, T_e the tokens of its expert
    // tensor-parallel group: T/tp per rank with sequence parallelism, gathered over etp
    // ranks (T with etp = tp, as without SP). Each expert matrix is split etp ways.
    // Experts are identical: cost one.
    const double local = static_cast<double>(e.num_experts) / p.ep;
    // With load imbalance (or padding to capacity) the busiest rank receives
    // moe_routed_load x the mean rows, and its expert group waits for it: every expert-side
    // term below is that rank's.
    const double T_e = expert_tokens(p, T) * moe_routed_load(e);
    const double rows = T_e * e.top_k * p.ep / e.num_experts;
    const double Fe = static_cast<double>(e.expert_ffn_hidden_size) / p.expert_tp();
    double one_t = 0, one_b = 0, one_f = 0;
    gemm(one_t, one_b, one_f, rows, (G - 1) * Fe, h);
    gemm(one_t, one_b, one_f, rows, h, Fe);
    lc.mlp_gemm_s += one_t * local;
    mlp_bwd += one_b * local;
    lc.mlp_flops += one_f * local;
    if (e.num_shared_experts > 0) {
      const double Fs = static_cast<double>(e.num_shared_experts) * e.shared_expert_ffn_hidden_size / t;
      gemm(lc.shared_gemm_s, lc.shared_gemm_bwd_s, shared_flops, T, (G - 1) * Fs, h);
      gemm(lc.shared_gemm_s, lc.shared_gemm_bwd_s, shared_flops, T, h, Fs);
      lc.mlp_gemm_s += lc.shared_gemm_s;
      mlp_bwd += lc.shared_gemm_bwd_s;
      lc.mlp_flops += shared_flops;
      shared_elem = Fs * T;  // x the activation's elements moved per inner element (below)
      ffn_inner += Fs;
    }
    expert_act_elem = T_e * e.top_k * Fe;  // likewise
    ffn_inner += e.top_k * Fe * T_e / T;  // per token of T: the rank's T_e k expert rows
    // Token routing as Megatron-Core's all-to-all dispatcher runs it (token_dispatcher.py):
    // the router's softmax and top-k over E fp32 scores; `permute` gathers each token's k
    // copies (read + write T_in*k*h); after the all-to-all, with more than one local expert,
    // `sort_chunks_by_idxs` regroups the received T_e*k rows by expert, and again before the
    // combine; `unpermute` reads the k copies, scales them by the routing probabilities and
    // adds them into T_in*h.
    const double k = e.top_k;
    double elems = T_in * (2 * k * h + k * h + h);
    if (local > 1) elems += 2 * 2 * T_e * k * h;
    lc.moe_route_s = pace * memory_time_s(gpu, kActBytes * elems + 3.0 * 4.0 * e.num_experts * T_in);
  }
  // Core attention. FlashAttention-class kernels skip fully masked tiles: each query sees
  // (s+1)/2 keys on average (CP balanced). Without them (fused softmax) the matmuls
  // compute the whole s x s square.
  const double keys = p.flash_attention ? (seq + 1) / 2 : seq;
  const double per_key = 2.0 * a_r * (d.qk + d.v) * T;
  lc.core_bwd_factor = p.flash_attention ? 2.5 : 2.0;
  // The efficiency of the fused kernel family (the plan's, else the stack's) at the sequence
  // each rank's kernel sees (s/cp with context parallelism), from its published table
  // (attention.h).
  const StackProfile& stack = stack_profile(p.stack);
  const std::string& kernel = p.attention_kernel.empty() ? stack.attention_kernel : p.attention_kernel;
  lc.attn_eff = attention_efficiency(gpu, kernel, seq / p.cp, /*causal=*/true, p.flash_attention);
  const double attn_peak = peak_flops(gpu, Precision::kBf16);
  lc.attn_core_flops = per_key * keys;
  lc.attn_core_s = pace * lc.attn_core_flops / (lc.attn_eff.fwd * attn_peak);
  lc.attn_core_bwd_s = pace * lc.core_bwd_factor * lc.attn_core_flops / (lc.attn_eff.bwd * attn_peak);
  if (const int windowed = windowed_layers(m); windowed > 0 && p.flash_attention) {
    // Sliding-window layers (docs/model-reference.md "Sliding-window attention"): a fused
    // kernel computes only the tiles inside the window, windowed_keys_per_query keys per
    // query, and runs each query tile over about window / tile key tiles, as a causal kernel
    // does over a sequence of 2 x window: it is priced at the table's efficiency there (the
    // sequence itself when shorter). Every layer is priced at the mean over the model's
    // layers (a stage holding more windowed layers than the mean is not distinguished).
    // Without fused kernels the whole s x s square is computed and masked: no change.
    const double f = static_cast<double>(windowed) / m.num_layers;
    const double w = static_cast<double>(m.sliding_window);
    const AttentionEfficiency e = attention_efficiency(gpu, kernel, std::min(seq / p.cp, 2 * w), true, true);
    const double win_flops = per_key * windowed_keys_per_query(seq, w);
    const double full_fwd_s = lc.attn_core_s, full_bwd_s = lc.attn_core_bwd_s;
    lc.attn_core_s = (1 - f) * full_fwd_s + f * pace * win_flops / (e.fwd * attn_peak);
    lc.attn_core_bwd_s = (1 - f) * full_bwd_s + f * pace * lc.core_bwd_factor * win_flops / (e.bwd * attn_peak);
    lc.attn_core_flops = (1 - f) * lc.attn_core_flops + f * win_flops;
    // The layers' mean efficiency, as priced.
    lc.attn_eff.fwd = pace * lc.attn_core_flops / (lc.attn_core_s * attn_peak);
    lc.attn_eff.bwd = pace * lc.core_bwd_factor * lc.attn_core_flops / (lc.attn_core_bwd_s * attn_peak);
  }
  if (!p.flash_attention) {
    // Scores written, read by softmax, probabilities written and read by .V; with dropout
    // (model.dropout) the probabilities also pass through a dropout kernel. FlashAttention
    // applies dropout inside its kernel, on tiles it already holds.
    const double per_score = 4.0 * kActBytes + (m.dropout ? kAttnDropoutBytesPerScore : 0.0);
    const double scores_s = pace * memory_time_s(gpu, per_score * a_r * T * seq);
    lc.attn_core_s += scores_s;
    lc.attn_core_bwd_s += lc.core_bwd_factor * scores_s;
  }
  // Memory-bound work per token, in 2-byte elements moved: 2 norms, 2 residual adds (2
  // reads, 1 write) -- half in each block --, the activation function, RoPE on q and k. The
  // stack's profile says what a norm, the gated activation and RoPE move per element (fused
  // kernels: read + write; eager PyTorch's decompositions more; stack.h).
  const double replicated = sp ? 1.0 / t : 1.0;
  const double norm = (m.norm == NormKind::kRmsNorm ? stack.rmsnorm_bytes : stack.layernorm_bytes) / kActBytes;
  const double act = G == 3 ? stack.gated_activation_bytes / kActBytes : 2.0;  // gated; else read 1, write 1
  // With model.dropout each residual add is Megatron's fused bias-dropout-add, which also
  // writes the hidden dropout's 1-byte mask (in 2-byte units: half an element).
  const double residual_mask = m.dropout ? kDropoutMaskBytes / kActBytes : 0.0;
  double attn_elem = (norm + 3.0 + residual_mask) * h * replicated;
  if (m.position_embedding == PositionEmbedding::kRope) attn_elem += stack.rope_bytes / kActBytes * (a_r + g_r) * d.qk;
  // QK norm: the stack's RMSNorm over each of the rank's q and k heads (d_h wide), before RoPE.
  if (has_qk_norm(m)) attn_elem += stack.rmsnorm_bytes / kActBytes * (a_r + g_r) * d.qk;
  const double mlp_elem = (norm + 3.0 + residual_mask) * h * replicated + act * ffn_inner;
  lc.attn_elem_s = pace * memory_time_s(gpu, kActBytes * T * attn_elem);
  lc.mlp_elem_s = pace * memory_time_s(gpu, kActBytes * T * mlp_elem) + lc.moe_route_s;
  if (prec == Precision::kFp8) {
    // FP8 GEMM operands quantized as Transformer Engine's plan.fp8_recipe does it
    // (fp8_quant_bytes_per_element: current scaling's amax pass, then cast + transpose, 6 B
    // per element; the other recipes one pass, about 4 B). Forward: every GEMM input; backward:
    // every GEMM output gradient (dgrad and wgrad read its FP8 copies; the inputs' column-
    // wise copies come from the forward). Tensors that cross a sequence-parallel all-gather
    // or reduce-scatter are quantized on the rank's T/tp shard. The layer's total is charged
    // a third to the forward and two thirds to the backward, as its other memory-bound work.
    const Fp8Elements q = fp8_quantized_elements(m, p, T, moe);
    const double per = fp8_quant_bytes_per_element(p.fp8_recipe);
    lc.fp8_quant_bytes = per * (q.fwd_attn + q.bwd_attn + q.fwd_mlp + q.bwd_mlp);
    lc.attn_elem_s += pace * memory_time_s(gpu, per * (q.fwd_attn + q.bwd_attn) / 3);
    lc.mlp_elem_s += pace * memory_time_s(gpu, per * (q.fwd_mlp + q.bwd_mlp) / 3);
  }
  lc.attn_gemm_bwd_s = attn_bwd;
  lc.mlp_gemm_bwd_s = mlp_bwd;
  if (lc.tp_overlap) {
    // Split GEMMs (layer_cost.h): tp chunks each, FLOPs unchanged.
    lc.attn_gemm_s = t * lc.qkv_chunk_s + t * lc.proj_chunk_s;
    lc.mlp_gemm_s = t * lc.fc1_chunk_s + t * lc.fc2_chunk_s;
    lc.attn_gemm_bwd_s = t * lc.proj_dgrad_chunk_s + lc.proj_wgrad_s + lc.qkv_dgrad_s + lc.qkv_wgrad_s;
    lc.mlp_gemm_bwd_s = t * lc.fc2_dgrad_chunk_s + lc.fc2_wgrad_s + lc.fc1_dgrad_s + lc.fc1_wgrad_s;
  }
  if (p.recompute == Recompute::kFull) {
    lc.recompute_s = lc.fwd_s();
    lc.recompute_flops = lc.attn_gemm_flops + lc.attn_core_flops + lc.mlp_flops;
  } else if (p.recompute == Recompute::kSelectiveOp) {
    // torchtitan's op-level policy (layer_cost.h op_sac_split): the matmuls not saved (half
    // of each on average when the saved set alternates) and every elementwise op of the
    // forward again; the attention's output is saved, so the core is not re-run.
    for (const OpSacMm& mm : op_sac_split(m, p).mms) {
      const double s = fwd_time(T, mm.n, mm.k), flops = 2 * T * mm.n * mm.k;
      lc.recompute_s += mm.recompute_weight * s;
      lc.recompute_flops += mm.recompute_weight * flops;
    }
    lc.recompute_s += lc.attn_elem_s + lc.mlp_elem_s;
  } else if (p.recompute == Recompute::kSelective) {
    // Megatron-Core's recompute_modules (transformer_config.py; docs/model-reference.md
    // "Module recomputation"): each module's forward again before its backward.
    auto again = [&](double s, double flops) {
      lc.recompute_s += s;
      lc.recompute_flops += flops;
    };
    if (p.recomputes(RecomputeModule::kCoreAttn)) again(lc.attn_core_s, lc.attn_core_flops);
    if (p.recomputes(RecomputeModule::kLayernorm)) {
      // Output-discarding: the norms that are modules of their own (not fused into a
      // Transformer Engine LayerNormLinear) are re-run, read + write of the rank's tokens:
      // the pre-MLP norm of an MoE layer (the router is not fused) and MLA's input norm.
      const double norms = (moe ? 1.0 : 0.0) + (m.mla ? 1.0 : 0.0);
      again(pace * memory_time_s(gpu, norms * norm * kActBytes * T * h * replicated), 0);
    }
    if (m.mla && p.recomputes(RecomputeModule::kMlaUpProj)) {
      // Output-discarding: the q and kv up-projections and RoPE on q and k.
      const MlaSpec& a = *m.mla;
      double up_s = 0, up_flops = 0;
      auto up = [&](double nn, double kk) {
        up_s += fwd_time(T, nn, kk);
        up_flops += 2 * T * nn * kk;
      };
      if (a.q_lora_rank > 0) up(a_r * d.qk, static_cast<double>(a.q_lora_rank));
      up(a_r * (a.qk_nope_head_dim + a.v_head_dim), static_cast<double>(a.kv_lora_rank));
      const double rope = 2 * kActBytes * T * (a_r + 1) * static_cast<double>(a.qk_rope_head_dim);
      again(up_s + pace * memory_time_s(gpu, rope), up_flops);
    }
    // The MLP block again, with its TP and expert-parallel communication (layer_comm):
    // "mlp" on a dense layer, "moe" on an MoE layer (router, dispatch, experts, shared
    // experts, combine).
    if (moe ? p.recomputes(RecomputeModule::kMoe) : p.recomputes(RecomputeModule::kMlp)) {
      lc.recompute_block = true;
      again(lc.mlp_fwd_s(), lc.mlp_flops);
    } else if (moe) {
      if (p.recomputes(RecomputeModule::kMoeAct)) {
        again(pace * memory_time_s(gpu, kActBytes * act * expert_act_elem), 0);  // output-discarding
      }
      if (p.recomputes(RecomputeModule::kSharedExperts)) {
        again(lc.shared_gemm_s + pace * memory_time_s(gpu, kActBytes * act * shared_elem), shared_flops);
      }
    }
  }
  return lc;
}

DispatchPass allgather_dispatch(const LayerComm& cm, bool backward) {
  DispatchPass d;
  auto push = [&](CollKind k, double bytes, const char* what, bool after) {
    d.ops[static_cast<std::size_t>(d.n++)] = DispatchCollective{k, bytes, what, after};
  };
  if (!backward) {
    push(CollKind::kAllGather, cm.ep_bytes, "tokens", false);
    push(CollKind::kAllGather, cm.ep_map_bytes, "routing map", false);
    push(CollKind::kAllGather, cm.ep_probs_bytes, "probs", false);
    push(CollKind::kReduceScatter, cm.ep_bytes, "output", true);
  } else {
    push(CollKind::kAllGather, cm.ep_bytes, "output grad", false);
    push(CollKind::kReduceScatter, cm.ep_bytes, "tokens grad", true);
    push(CollKind::kReduceScatter, cm.ep_probs_bytes, "probs grad", true);
  }
  return d;
}

MergedA2a merged_a2a(const LayerCost& lc, const LayerComm& cm, double f) {
  MergedA2a out;
  const double a = cm.ep_a2a_s;
  const double beside[4] = {lc.attn_fwd_s() + cm.tp_attn_pass_s, lc.mlp_bwd_s() + lc.recompute_s + cm.tp_mlp_pass_s,
                            lc.mlp_fwd_s() + cm.tp_mlp_pass_s, lc.attn_bwd_s() + cm.tp_attn_pass_s};
  for (double w : beside) out.exposed += ring_overlap_exposed_s(a, 2, w, f);
  out.interference = 4 * f * a;
  return out;
}

double ring_overlap_exposed_s(double c, int n, double g, double f) {
  if (n < 2) return c;
  const double steps = n - 1;
  return steps * std::max(0.0, (1.0 - f) * c / steps - g);
}

LayerComm layer_comm(const ModelSpec& m, const ClusterSpec& c, const Plan& p, std::int64_t seq_len, bool moe,
                     const LayerCost& lc, CollectiveTimes* times) {
  LayerComm out;
  auto price = [&](CollKind kind, const GroupShape& g, double bytes) {
    return collective_time_s(c, times, kind, g, bytes);
  };
  const int gpn = c.gpus_per_node;
  const Placement pl = Placement::of(p, gpn);
  const double T = p.microbatch * static_cast<double>(seq_len) / p.cp;
  const double h = static_cast<double>(m.hidden_size);
  const bool sp = p.sequence_parallel && p.tp > 1;
  const double recompute_factor = p.recompute == Recompute::kFull ? 3.0 : 2.0;  // passes
  double tp_fwd = 0, cp_fwd = 0, ep_fwd = 0;                                    // the forward's exposure
  // Interference (LayerComm::interference_s): each overlapped collective charges f of itself
  // as slowed compute and exposes what is left of it beyond the compute beside it.
  const double f = overlap_interference(c.gpu);
  auto slowed = [&](double fwd, double bwd, double recomputed_block) {
    out.interference_fwd_s += f * fwd;
    out.interference_s += f * (fwd * (recompute_factor - 1) + bwd + recomputed_block);
  };
  // The MoE block's pair (with SP or folded experts): the expert-TP all-gather of the T_e k
  // dispatched rows after the all-to-all and their reduce-scatter before the combine, on the
  // expert-TP group (the TP group when etp = tp); none with etp = 1.
  double moe_pair = 0;
  if (moe && (sp || pl.folded()) && p.expert_tp() > 1 && !p.moe_allgather_dispatcher()) {
    const GroupShape ge = group_shape(pl.group_size(GroupKind::kEtp), pl.group_stride(GroupKind::kEtp), gpn);
    out.moe_tp_bytes = expert_tokens(p, T) * moe_routed_load(*m.moe) * m.moe->top_k * h * kActBytes;
    moe_pair =
        price(CollKind::kAllGather, ge, out.moe_tp_bytes) + price(CollKind::kReduceScatter, ge, out.moe_tp_bytes);
  }
  // One pass's TP collectives around the attention block and around the MLP (MoE) block;
  // under tp 1 only a folded expert-TP group's pair.
  double one = 0, mlp_pair = moe_pair;
  if (p.tp > 1) {
    const GroupShape g = group_shape(p.tp, pl.group_stride(GroupKind::kTp), gpn);
    out.tp_bytes = T * h * kActBytes;
    out.tp_allreduce_s = price(CollKind::kAllReduce, g, out.tp_bytes);
    out.tp_allgather_s = price(CollKind::kAllGather, g, out.tp_bytes);
    out.tp_reducescatter_s = price(CollKind::kReduceScatter, g, out.tp_bytes);
    // Megatron: 2 per pass (attention out-proj, FFN down-proj forward; QKV and FFN up-proj
    // input gradients backward); a recomputed forward repeats its 2.
    one = sp ? out.tp_allgather_s + out.tp_reducescatter_s : out.tp_allreduce_s;
    if (!moe || !sp) {
      mlp_pair = one;
      out.moe_tp_bytes = out.tp_bytes;  // an MoE block without SP: the all-reduce (etp = tp)
    }
  }
  out.tp_attn_pass_s = one;
  out.tp_mlp_pass_s = mlp_pair;
  out.tp_exposed_s = (one + mlp_pair) * recompute_factor + (lc.recompute_block ? mlp_pair : 0.0);
  tp_fwd = one + mlp_pair;
  if (p.tp > 1) {
    if (lc.tp_overlap) {
      // Transformer Engine userbuffers (docs/model-reference.md): forward AG|qkv and AG|fc1
      // ring exchange, RS|proj and RS|fc2 pipelined; backward AG of the output gradient
      // ring-exchanged with the dgrad of proj and fc2, RS of the input gradient in bulk
      // beside the wgrad of qkv and fc1.
      const int n = p.tp;
      const double ag = out.tp_allgather_s, rs = out.tp_reducescatter_s;
      out.tp_overlap_fwd_s = ring_overlap_exposed_s(ag, n, lc.qkv_chunk_s, f) +
                             ring_overlap_exposed_s(rs, n, lc.proj_chunk_s, f) +
                             ring_overlap_exposed_s(ag, n, lc.fc1_chunk_s, f) +
                             ring_overlap_exposed_s(rs, n, lc.fc2_chunk_s, f);
      out.tp_overlap_bwd_s =
          ring_overlap_exposed_s(ag, n, lc.fc2_dgrad_chunk_s, f) + std::max(0.0, (1 - f) * rs - lc.fc1_wgrad_s) +
          ring_overlap_exposed_s(ag, n, lc.proj_dgrad_chunk_s, f) + std::max(0.0, (1 - f) * rs - lc.qkv_wgrad_s);
      out.tp_exposed_s = out.tp_overlap_fwd_s * (recompute_factor - 1) + out.tp_overlap_bwd_s +
                         (lc.recompute_block ? mlp_pair : 0.0);  // the MLP block re-run unsplit
      tp_fwd = out.tp_overlap_fwd_s;
      slowed(2 * (ag + rs), 2 * (ag + rs), 0);
    }
  }
  if (p.cp > 1) {
    // Ring attention: cp-1 exchanges with a neighbour, overlapped with the attention of
    // the local chunks: exposed = (cp-1) * max(0, step - core/cp) per pass.
    const GroupShape g = group_shape(p.cp, pl.group_stride(GroupKind::kCp), gpn);
    const GroupShape pair{2, g.nodes > 1 ? 1 : 2, g.nodes > 1 ? 2 : 1};
    const HeadDims d = head_dims(m);
    out.cp_step_bytes = T * kv_heads_per_rank(m, p) * (d.qk + d.v) * kActBytes;
    out.cp_step_fwd_s = price(CollKind::kSendRecv, pair, out.cp_step_bytes);
    out.cp_step_bwd_s = price(CollKind::kSendRecv, pair, 2 * out.cp_step_bytes);
    const double steps = p.cp - 1;
    const double fwd = steps * std::max(0.0, (1 - f) * out.cp_step_fwd_s - lc.attn_core_s / p.cp);
    const double bwd = steps * std::max(0.0, (1 - f) * out.cp_step_bwd_s - lc.attn_core_bwd_s / p.cp);
    out.cp_exposed_s = fwd + bwd + (p.recompute == Recompute::kFull ? fwd : 0.0);
    cp_fwd = fwd;
    slowed(steps * out.cp_step_fwd_s, steps * out.cp_step_bwd_s, 0);
  }
  if (moe && p.moe_allgather_dispatcher() && p.expert_tp() * p.ep > 1) {
    // Megatron-Core's MoEAllGatherTokenDispatcher: every rank's tokens (with their routing
    // map, 1 byte per expert, and probabilities, 4) gathered over the expert-TP x EP group,
    // each rank computing its local experts' rows, the outputs reduce-scattered back; the
    // backward runs the transposes (the gradients of the tokens and probabilities
    // reduce-scattered, the output gradient gathered). No expert-TP pair of its own: the
    // gather already gives each expert-TP rank every token.
    const int n = p.expert_tp() * p.ep;
    const GroupShape g = group_shape(n, pl.group_stride(GroupKind::kEtpEp), gpn);
    const double gathered = (sp ? T / p.tp : T) * n;  // tokens
    out.ep_bytes = gathered * h * kActBytes;
    out.ep_map_bytes = gathered * m.moe->num_experts;        // 1 byte per expert
    out.ep_probs_bytes = gathered * m.moe->num_experts * 4;  // fp32
    auto pass = [&](bool backward) {
      double s = 0;
      const DispatchPass d = allgather_dispatch(out, backward);
      for (int i = 0; i < d.n; ++i) s += price(d.ops[i].kind, g, d.ops[i].bytes);
      return s;
    };
    const double fwd = pass(false), bwd = pass(true);
    out.ep_dispatch_fwd_s = fwd;
    out.ep_dispatch_bwd_s = bwd;
    out.ep_exposed_s = fwd * (recompute_factor - 1) + bwd + (lc.recompute_block ? fwd : 0.0);
    ep_fwd = fwd;
  } else if (moe && p.ep > 1) {
    const GroupShape g = group_shape(p.ep, pl.group_stride(GroupKind::kEp), gpn);
    const double tokens = sp ? T / p.tp : T;
    // The all-to-all ends when its busiest receiver has its rows: moe_routed_load x the mean
    // (padded to capacity: the padding rows travel too).
    if (p.moe_deepep_dispatcher()) {
      // DeepEP sends a token once per destination rank (and once per destination node over
      // the network), not once per routed copy.
      const EpRouting r = out.ep_routing =
          ep_routing(m.moe->num_experts, m.moe->top_k, p.ep, g.nodes, m.moe->expert_groups, m.moe->limited_groups);
      out.ep_bytes = tokens * r.ranks * moe_routed_load(*m.moe) * h * kActBytes;
      out.ep_rdma_per_byte = g.nodes > 1 ? r.nodes * (g.nodes - 1) / g.nodes / r.ranks : 0.0;
      out.ep_a2a_s = deepep_time_s(c, g, out.ep_bytes, out.ep_rdma_per_byte);
    } else {
      out.ep_bytes = tokens * m.moe->top_k * moe_routed_load(*m.moe) * h * kActBytes;
      out.ep_a2a_s = price(CollKind::kAllToAll, g, out.ep_bytes);
    }
    // Dispatch + combine per pass, and once more when the MoE block is recomputed.
    out.ep_exposed_s = 2 * out.ep_a2a_s * (recompute_factor + (lc.recompute_block ? 1 : 0));
    ep_fwd = 2 * out.ep_a2a_s;
    if (p.moe_shared_expert_overlap && lc.shared_gemm_s > 0) {
      // Megatron-Core moe_shared_expert_overlap (shared_experts.py): the shared experts run on
      // their own stream beside the pass's first all-to-all (the dispatch forward, the
      // combine's gradient backward), hiding it up to their GEMM time (backward: twice).
      const double a = out.ep_a2a_s;
      const double fwd = a + std::max(0.0, (1 - f) * a - lc.shared_gemm_s);
      const double bwd = a + std::max(0.0, (1 - f) * a - lc.shared_gemm_bwd_s);
      out.ep_exposed_s = fwd * (recompute_factor - 1) + bwd + (lc.recompute_block ? fwd : 0.0);
      ep_fwd = fwd;
      slowed(a, a, lc.recompute_block ? a : 0.0);
    }
  }
  out.exposed_fwd_s = tp_fwd + cp_fwd + ep_fwd;
  out.exposed_bwd_s = out.tp_exposed_s + out.cp_exposed_s + out.ep_exposed_s - out.exposed_fwd_s;
  return out;
}

}  // namespace stepcast

namespace stepcast {

LogitsCost logits_cost(const ModelSpec& m, const ClusterSpec& c, const Plan& p, std::int64_t seq_len) {
  LogitsCost out;
  const double T = p.microbatch * static_cast<double>(seq_len) / p.cp;
  const double Vr = static_cast<double>(m.vocab_size) / p.tp;
  const double h = static_cast<double>(m.hidden_size);
  const double pace = job_pace(c);
  // Megatron-Core's output layer is a plain ColumnParallelLinear, outside Transformer
  // Engine's FP8 autocast: an FP8 plan still runs it in 16 bits.
  const Precision prec = p.precision == Precision::kFp8 ? Precision::kBf16 : p.precision;
  const double g = pace * gemm_time_s(c.gpu, prec, T, Vr, h);
  // Its backward: the data gradient (T x Vr).(Vr x h) and the weight gradient (h x T).(T x Vr).
  const double g_bwd = pace * gemm_backward_s(c.gpu, prec, T, Vr, h);
  // Cross entropy: the stack's bytes per logit, forward and backward (Megatron-Core's fused
  // fp32 kernel: written, read for the softmax, gradient written, 12 B; eager PyTorch's
  // upcast, cross_entropy and downcast of the gradient move more, stacks.json).
  const double ce = pace * memory_time_s(c.gpu, stack_profile(p.stack).loss_traffic_bytes_per_logit * T * Vr);
  out.ce_s = ce;
  out.fwd_s = g + ce / 2;
  out.bwd_s = g_bwd + ce / 2;
  out.flops = 3 * 2.0 * T * Vr * h;
  return out;
}

MtpProjection mtp_projection_cost(const ModelSpec& m, const ClusterSpec& c, const Plan& p, std::int64_t seq_len) {
  MtpProjection out;
  const double T = p.microbatch * static_cast<double>(seq_len) / p.cp;
  const double h = static_cast<double>(m.hidden_size);
  out.fwd_s = job_pace(c) * gemm_time_s(c.gpu, p.precision, T, h / p.tp, 2 * h);
  out.bwd_s = job_pace(c) * gemm_backward_s(c.gpu, p.precision, T, h / p.tp, 2 * h);
  out.flops = 2 * T * (h / p.tp) * 2 * h;
  return out;
}

int offloaded_layers(double fraction, int layers) {
  return static_cast<int>(std::lround(std::clamp(fraction, 0.0, 1.0) * layers));
}

LayerOffload layer_offload(const ClusterSpec& c, const Plan& p, const LayerCost& lc, const LayerComm& cm,
                           double act_bytes, double weight_bytes) {
  LayerOffload o;
  const double link = c.host_link_GBps * 1e9 * c.host_efficiency;
  // Each pass as the layer runs it: compute, compute slowed by overlapped collectives, and
  // the exposed TP, CP and EP communication.
  o.fwd_s = lc.fwd_s() + cm.interference_fwd_s + cm.exposed_fwd_s;
  o.bwd_s = lc.bwd_s() + (cm.interference_s - cm.interference_fwd_s) + cm.exposed_bwd_s;
  if (p.offload_activations > 0) {
    o.act_bytes = act_bytes;
    o.act_s = act_bytes / link;
  }
  if (p.offload_weights > 0) {
    o.weight_bytes = weight_bytes;
    o.weight_s = weight_bytes / link;
  }
  return o;
}

double tied_embedding_grad_bytes(const ModelSpec& m, const Plan& p) {
  if (!m.tied_embeddings || p.pp < 2) return 0;
  return static_cast<double>(count_params(m).embedding_input) / p.tp * p.grad_bytes;
}

double first_stage_input_bytes(const ModelSpec& m, const Plan& p, double T) {
  const double mask = m.dropout ? T * static_cast<double>(m.hidden_size) / (p.sequence_parallel ? p.tp : 1) : 0.0;
  return 8.0 * T + mask;
}

namespace {

// A copy on the compute stream of `bytes_per_element` per element of a layer's rank
// parameters, at the job's pace (0 where nothing is copied).
double layer_copy_s(const ClusterSpec& c, double bytes_per_element, const LayerRankParams& layer) {
  const double bytes = bytes_per_element * (layer.dense + layer.expert);
  return bytes > 0 ? job_pace(c) * memory_time_s(c.gpu, bytes) : 0.0;
}

}  // namespace

double zero3_copy_out_s(const ClusterSpec& c, const Plan& p, const LayerRankParams& layer) {
  return layer_copy_s(c, stack_profile(p.stack).zero3_copy_out_bytes, layer);
}

double zero3_copy_in_s(const ClusterSpec& c, const Plan& p, const LayerRankParams& layer) {
  const double read = stack_profile(p.stack).zero3_copy_in_bytes;
  return read > 0 ? layer_copy_s(c, read + p.grad_bytes, layer) : 0.0;
}

double sp_grad_allreduce_bytes(const ModelSpec& m, const ParamCounts& c, const Plan& p, const RankParams& rp,
                               bool last_stage) {
  if (p.tp < 2) return 0;
  if (!p.sequence_parallel) {
    // Without SP only the QK norms' gradients are partial (each TP rank norms its own heads
    // with the one shared weight): Megatron all-reduces the parameters named q_layernorm and
    // k_layernorm then too.
    return rp.layers * static_cast<double>(c.qk_norms_per_layer) * p.grad_bytes;
  }
  // One row-parallel output bias (h) per biased projection, whole on every TP rank (params.cc).
  const double beta = row_parallel_bias(m);
  const double norms = static_cast<double>(c.norms_per_layer);
  const double dense_layer = norms + 2 * beta;  // the attention projection's and FC2's biases
  double moe_layer = 0;
  if (m.moe) moe_layer = norms + beta * (1 + m.moe->num_shared_experts) + static_cast<double>(c.router_per_layer);
  double elements = (rp.layers - rp.moe_layers) * dense_layer + rp.moe_layers * moe_layer;
  if (last_stage) {
    elements += static_cast<double>(c.final_norm);
    // Each multi-token prediction module: its three norms and one layer of the model's last kind.
    if (m.mtp_layers > 0) {
      elements += m.mtp_layers * (3.0 * static_cast<double>(c.final_norm) + (m.moe ? moe_layer : dense_layer));
    }
  }
  return elements * p.grad_bytes;
}

double host_optimizer_bytes_per_param(Optimizer optimizer) { return optimizer == Optimizer::kAdam ? 30.0 : 22.0; }

OptimizerStep optimizer_step(const ClusterSpec& c, const Plan& p, double params) {
  OptimizerStep o;
  const double f = std::clamp(p.offload_optimizer, 0.0, 1.0);
  const double per_param = (p.optimizer == Optimizer::kAdam ? 26.0 : 18.0) + p.grad_bytes;
  // The gradient pass before the update: the norm and clipping as the stack runs them, and
  // the fp16 loss scale's unscale and overflow check (models/data/stacks.json).
  const StackProfile& st = stack_profile(p.stack);
  const double clip = st.grad_clip_bytes + (p.precision == Precision::kFp16 ? st.fp16_unscale_bytes : 0.0);
  o.clip_s = job_pace(c) * memory_time_s(c.gpu, (1.0 - f) * params * clip);
  o.gpu_s = job_pace(c) * memory_time_s(c.gpu, (1.0 - f) * params * per_param) + o.clip_s;
  if (f <= 0) return o;
  // Down: the gradients; up: the updated 16-bit weights.
  const double link = c.host_link_GBps * 1e9 * c.host_efficiency;
  o.down_bytes = f * params * p.grad_bytes;
  o.up_bytes = f * params * 2.0;
  o.down_s = o.down_bytes / link;
  o.up_s = o.up_bytes / link;
  o.host_bytes = f * params * host_optimizer_bytes_per_param(p.optimizer);
  o.host_s = o.host_bytes / (c.host_memory_bandwidth_GBps * 1e9 * c.host_efficiency / c.gpus_per_node);
  return o;
}

double optimizer_time_s(const ClusterSpec& c, const Plan& p, double params) {
  return optimizer_step(c, p, params).time_s();
}

int grad_norm_allreduces(const Plan& p) {
  if (p.world() <= 1) return 0;
  const StackProfile& st = stack_profile(p.stack);
  return (st.grad_clip_bytes > 0 ? 1 : 0) + (p.precision == Precision::kFp16 && st.fp16_unscale_bytes > 0 ? 1 : 0);
}

double grad_norm_sync_s(const ClusterSpec& c, const Plan& p, CollectiveTimes* times) {
  const int n = grad_norm_allreduces(p);
  if (n == 0) return 0;
  const Placement pl = Placement::of(p, c.gpus_per_node);
  const GroupShape g =
      group_shape(pl.group_size(GroupKind::kWorld), pl.group_stride(GroupKind::kWorld), c.gpus_per_node);
  const double t = collective_time_s(c, times, CollKind::kAllReduce, g, kGradNormBytes);
  return n * SimTime::from_s(t).seconds();
}

double host_optimizer_time_s(const ClusterSpec& c, const Plan& p, double params) {
  return optimizer_step(c, p, params).host_part_s();
}

}  // namespace stepcast

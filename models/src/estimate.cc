#include "stepcast/models/estimate.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "stepcast/models/collectives.h"
#include "stepcast/models/compute.h"

namespace stepcast {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kWeightBytes = 2;            // bf16 weights (fp8 runs keep bf16 masters too)
constexpr double kActBytes = 2;               // 16-bit activations
constexpr double kContextBytes = 1.0 * kGiB;  // CUDA context + cuBLAS workspaces [U], measure
constexpr double kNcclBytes = 0.5 * kGiB;     // NCCL buffers when any group communicates [U]

double optimizer_state_bytes(const Plan& p) { return p.optimizer == Optimizer::kAdam ? 12 : 8; }

// Per-rank KV heads (replicated when tp > g).
double kv_heads_per_rank(const ModelSpec& m, const Plan& p) {
  return std::max(1.0, static_cast<double>(m.num_kv_heads) / p.tp);
}

struct HeadDims {
  double qk, v;
};
HeadDims head_dims(const ModelSpec& m) {
  if (m.mla) {
    return {static_cast<double>(m.mla->qk_nope_head_dim + m.mla->qk_rope_head_dim),
            static_cast<double>(m.mla->v_head_dim)};
  }
  return {static_cast<double>(m.head_dim), static_cast<double>(m.head_dim)};
}

// Compute time and executed FLOPs of one layer for one microbatch on one rank.
struct LayerCost {
  double fwd_s = 0, bwd_s = 0;          // incl. recomputation in bwd
  double attn_core_fwd_s = 0, attn_core_bwd_s = 0;
  double flops = 0;                     // executed, fwd + bwd + recompute
};

LayerCost layer_cost(const ModelSpec& m, const ClusterSpec& c, const Plan& p, double seq,
                     bool moe) {
  const GpuSpec& gpu = c.gpu;
  const Precision prec = p.precision;
  const double t = p.tp;
  const double T = p.microbatch * seq / p.cp;  // tokens per rank per microbatch
  const double h = static_cast<double>(m.hidden_size);
  const double a_r = m.num_attention_heads / t;
  const double g_r = kv_heads_per_rank(m, p);
  const HeadDims d = head_dims(m);
  const bool sp = p.sequence_parallel && p.tp > 1;
  LayerCost lc;
  double gemm_fwd = 0, gemm_flops = 0;
  auto gemm = [&](double mm, double nn, double kk) {
    if (mm <= 0 || nn <= 0 || kk <= 0) return;
    gemm_fwd += gemm_time_s(gpu, prec, mm, nn, kk);
    gemm_flops += 2 * mm * nn * kk;
  };
  if (m.mla) {
    const double attn_w = static_cast<double>(count_params(m).attention_per_layer) / t;
    gemm(T, attn_w / h, h);  // all MLA projections as one GEMM of the same size
  } else {
    gemm(T, a_r * d.qk + g_r * (d.qk + d.v), h);
    gemm(T, h, a_r * d.v);
  }
  double ffn_inner = 0;  // per-token FFN inner width on this rank (elementwise traffic)
  const double G = m.ffn_matrices;
  if (!moe) {
    const double F = static_cast<double>(m.ffn_hidden_size) / t;
    gemm(T, (G - 1) * F, h);
    gemm(T, h, F);
    ffn_inner = F;
  } else {
    const MoeSpec& e = *m.moe;
    gemm(T, e.num_experts, h);  // router
    const double local = static_cast<double>(e.num_experts) / p.ep;
    const double rows = T * e.top_k * p.ep / e.num_experts;  // tokens per local expert
    const double Fe = static_cast<double>(e.expert_ffn_hidden_size) / t;
    for (int i = 0; i < 1; ++i) {  // identical experts: cost one, scale by count
      const double before_t = gemm_fwd, before_f = gemm_flops;
      gemm(rows, (G - 1) * Fe, h);
      gemm(rows, h, Fe);
      gemm_fwd = before_t + (gemm_fwd - before_t) * local;
      gemm_flops = before_f + (gemm_flops - before_f) * local;
    }
    if (e.num_shared_experts > 0) {
      const double Fs = static_cast<double>(e.num_shared_experts) * e.shared_expert_ffn_hidden_size / t;
      gemm(T, (G - 1) * Fs, h);
      gemm(T, h, Fs);
      ffn_inner += Fs;
    }
    ffn_inner += e.top_k * Fe;
  }
  // Core attention, causal: each query sees (s+1)/2 keys on average (CP balanced).
  const double core_flops = 2.0 * a_r * (d.qk + d.v) * T * (seq + 1) / 2;
  const double peak16 = peak_flops(gpu, Precision::kBf16);
  lc.attn_core_fwd_s = core_flops / (gpu.attention_efficiency * peak16);
  double core_mem_fwd = 0;
  if (!p.flash_attention) {
    // Scores written, read by softmax, probabilities written and read by .V (2 bytes each).
    core_mem_fwd = memory_time_s(gpu, 4.0 * kActBytes * a_r * T * seq);
    lc.attn_core_fwd_s += core_mem_fwd;
  }
  const double core_bwd_factor = p.flash_attention ? 2.5 : 2.0;  // FA recomputes scores
  lc.attn_core_bwd_s = core_bwd_factor * lc.attn_core_fwd_s;
  // Memory-bound work per token: 2 norms (read+write), 2 residual adds (2 reads, 1 write),
  // activation function (G-1 inputs, 1 output), RoPE on q and k.
  const double replicated = sp ? 1.0 / t : 1.0;
  double elem = 10.0 * h * replicated + (G == 3 ? 3.0 : 2.0) * ffn_inner;
  if (m.position_embedding == PositionEmbedding::kRope) elem += 2.0 * (a_r + g_r) * d.qk;
  const double elem_fwd = memory_time_s(gpu, kActBytes * T * elem);

  const double fwd = gemm_fwd + lc.attn_core_fwd_s + elem_fwd;
  double bwd = 2 * gemm_fwd + lc.attn_core_bwd_s + 2 * elem_fwd;
  double flops = 3 * gemm_flops + core_flops * (1 + core_bwd_factor);
  if (p.recompute == Recompute::kFull) {
    bwd += fwd;
    flops += gemm_flops + core_flops;
  } else if (p.recompute == Recompute::kSelective && !p.flash_attention) {
    bwd += lc.attn_core_fwd_s;
    flops += core_flops;
  }
  lc.fwd_s = fwd;
  lc.bwd_s = bwd;
  lc.flops = flops;
  return lc;
}

int dense_layers_of(const ModelSpec& m) { return m.moe ? m.moe->num_dense_layers : m.num_layers; }

// Communication of one layer for one microbatch that sits on the critical path.
struct LayerComm {
  double tp = 0, cp = 0, ep = 0;
};

LayerComm layer_comm(const ModelSpec& m, const ClusterSpec& c, const Plan& p, double seq, bool moe,
                     const LayerCost& lc) {
  LayerComm out;
  const int gpn = c.gpus_per_node;
  const double T = p.microbatch * seq / p.cp;
  const double h = static_cast<double>(m.hidden_size);
  const bool sp = p.sequence_parallel && p.tp > 1;
  if (p.tp > 1) {
    const GroupShape g = group_shape(p.tp, 1, gpn);
    const double S = T * h * kActBytes;
    const double one = sp ? collective_cost(c, CollKind::kAllGather, g, S).time_s +
                                collective_cost(c, CollKind::kReduceScatter, g, S).time_s
                          : collective_cost(c, CollKind::kAllReduce, g, S).time_s;
    // Megatron: 2 in forward (attention out-proj, FFN down-proj), 2 in backward,
    // 2 more when the forward is recomputed.
    out.tp = one * (p.recompute == Recompute::kFull ? 6 : 4);
  }
  if (p.cp > 1) {
    // Ring attention: c-1 K/V exchanges with a neighbour, each hidden behind the
    // attention of one chunk; backward also returns dK, dV (twice the bytes).
    const GroupShape g = group_shape(p.cp, p.tp, gpn);
    const GroupShape pair{2, g.nodes > 1 ? 1 : 2, g.nodes > 1 ? 2 : 1};
    const HeadDims d = head_dims(m);
    const double bytes = T * kv_heads_per_rank(m, p) * (d.qk + d.v) * kActBytes;
    const double step = collective_cost(c, CollKind::kSendRecv, pair, bytes).time_s;
    const double step_b = collective_cost(c, CollKind::kSendRecv, pair, 2 * bytes).time_s;
    const double steps = p.cp - 1;
    out.cp = steps * (std::max(0.0, step - lc.attn_core_fwd_s / p.cp) +
                      std::max(0.0, step_b - lc.attn_core_bwd_s / p.cp));
    if (p.recompute == Recompute::kFull) out.cp += steps * std::max(0.0, step - lc.attn_core_fwd_s / p.cp);
  }
  if (moe && p.ep > 1) {
    const GroupShape g = group_shape(p.ep, p.tp * p.cp, gpn);
    const double tokens = sp ? T / p.tp : T;
    const double S = tokens * m.moe->top_k * h * kActBytes;
    const double one = collective_cost(c, CollKind::kAllToAll, g, S).time_s;
    out.ep = one * (p.recompute == Recompute::kFull ? 6 : 4);  // dispatch + combine, fwd + bwd
  }
  return out;
}

double activation_extras(const ModelSpec& m, const Plan& p, double seq, int stage, double inflight) {
  const double T = p.microbatch * seq / p.cp;
  double bytes = 0;
  if (stage == 0) bytes += 8.0 * T * inflight;  // token ids (int64)
  if (stage == p.pp - 1) {
    // Output layer and cross entropy (Megatron estimator): 4 T h (1 + V/h) / t, one microbatch.
    bytes += 4.0 * T * (static_cast<double>(m.hidden_size) + m.vocab_size) / p.tp;
  }
  return bytes;
}

}  // namespace

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
  // Per token, bytes (cost-models.md section 2.2, generalised Korthikanti counting):
  // not split by TP without SP: two norm inputs 4h, QKV input 2h, FFN input 2h, two
  // dropout masks (1 byte) 2h.
  const double replicated = (4 + 2 + 2 + 2 * drop) * h;
  const HeadDims d = head_dims(m);
  const double a_r = m.num_attention_heads / t;
  const double g_r = kv_heads_per_rank(m, p);
  // Split by TP: Q, K, V; out-proj input; FFN: G-1 activation inputs and the down-proj input.
  double split = kActBytes * (a_r * d.qk + g_r * (d.qk + d.v)) + kActBytes * a_r * d.v;
  const double G = m.ffn_matrices;
  if (!moe) {
    split += kActBytes * G * m.ffn_hidden_size / t;
  } else {
    const MoeSpec& e = *m.moe;
    split += kActBytes * G *
             (static_cast<double>(e.top_k) * e.expert_ffn_hidden_size +
              static_cast<double>(e.num_shared_experts) * e.shared_expert_ffn_hidden_size) / t;
    split += 2 * kActBytes * e.top_k * h / t;  // dispatch and combine buffers
  }
  // Core attention: the score matrix (softmax output 2, dropout mask 1, dropout output 2
  // bytes per score) unless FlashAttention or selective recomputation drops it;
  // FlashAttention keeps the fp32 log-sum-exp.
  if (p.flash_attention) {
    split += 4.0 * a_r;
  } else if (p.recompute != Recompute::kSelective) {
    split += (2 + 3 * drop) * a_r * seq;
  }
  return T * (replicated / (sp ? t : 1.0) + split);
}

double inflight_microbatches(const Plan& p, int stage) {
  const double m = static_cast<double>(p.accumulation());
  switch (p.schedule) {
    case Schedule::kGpipe: return m;
    case Schedule::kOneFOneB: return std::min<double>(p.pp - stage, m);
    case Schedule::kInterleaved: {
      const double v = p.virtual_stages;
      const double chunks = std::min(2.0 * (p.pp - stage - 1) + (v - 1) * p.pp + 1, m * v);
      return chunks / v;
    }
  }
  return m;
}

MemoryBreakdown stage_memory(const ModelSpec& m, const ClusterSpec& c, const Plan& p,
                             const Workload& w, int stage) {
  MemoryBreakdown mem;
  mem.stage = stage;
  const RankParams rp = rank_params(m, p, stage);
  const double nd = static_cast<double>(p.dp) * p.cp;
  const double nde = nd / p.ep;
  const double sharded = rp.dense / nd + rp.expert / nde;
  const double full = rp.dense + rp.expert;
  mem.params = (p.zero >= 3 ? sharded : full) * kWeightBytes;
  mem.grads = (p.zero >= 2 ? sharded : full) * p.grad_bytes;
  mem.optimizer = (p.zero >= 1 ? sharded : full) * optimizer_state_bytes(p);

  const double inflight = inflight_microbatches(p, stage);
  const int dense_total = dense_layers_of(m);
  // Dense layers come first: count this stage's dense and MoE layers.
  int dense_here = 0;
  const int chunks = p.pp * p.virtual_stages;
  for (int v = 0; v < p.virtual_stages; ++v) {
    const int chunk = stage + v * p.pp;
    const int n = chunk_layers(m.num_layers, chunks, chunk);
    const int first = chunk_first_layer(m.num_layers, chunks, chunk);
    dense_here += std::clamp(dense_total - first, 0, n);
  }
  const int moe_here = rp.layers - dense_here;
  const double a_dense = layer_activation_bytes(m, p, w.seq_len, false);
  const double a_moe = m.moe ? layer_activation_bytes(m, p, w.seq_len, true) : 0.0;
  mem.activations = inflight * (dense_here * a_dense + moe_here * a_moe) +
                    activation_extras(m, p, static_cast<double>(w.seq_len), stage, inflight);
  if (p.recompute == Recompute::kFull) {
    // Backward recomputes one layer at a time: its full activations are live once.
    Plan no_rc = p;
    no_rc.recompute = Recompute::kNone;
    mem.activations += layer_activation_bytes(m, no_rc, w.seq_len, moe_here > 0);
  }
  const bool communicates = p.tp > 1 || p.pp > 1 || p.dp > 1 || p.cp > 1 || p.ep > 1;
  mem.buffers = kContextBytes + (communicates ? kNcclBytes : 0.0);
  if (p.zero >= 3 && nd > 1) {
    // FSDP: current and prefetched unsharded layer, plus the current unsharded gradients.
    mem.buffers += rp.largest_layer * (2 * kWeightBytes + p.grad_bytes);
  }
  mem.total = mem.params + mem.grads + mem.optimizer + mem.activations + mem.buffers;
  mem.capacity = c.gpu.hbm_GiB * kGiB;
  mem.usable = mem.capacity * (1.0 - p.memory_headroom);
  mem.fits = mem.total <= mem.usable;
  return mem;
}

namespace {

struct Layers {
  LayerCost dense, moe;
  LayerComm dense_comm, moe_comm;
  double logits_fwd = 0, logits_bwd = 0, logits_flops = 0;
};

Layers layer_costs(const ModelSpec& m, const ClusterSpec& c, const Plan& p, const Workload& w) {
  Layers L;
  const double seq = static_cast<double>(w.seq_len);
  L.dense = layer_cost(m, c, p, seq, false);
  L.dense_comm = layer_comm(m, c, p, seq, false, L.dense);
  if (m.moe) {
    L.moe = layer_cost(m, c, p, seq, true);
    L.moe_comm = layer_comm(m, c, p, seq, true, L.moe);
  }
  const double T = p.microbatch * seq / p.cp;
  const double Vr = static_cast<double>(m.vocab_size) / p.tp;
  const double g = gemm_time_s(c.gpu, p.precision, T, Vr, static_cast<double>(m.hidden_size));
  // Cross entropy on fp32 logits: write, read for softmax, write gradient.
  const double ce = memory_time_s(c.gpu, 3 * 4.0 * T * Vr);
  L.logits_fwd = g + ce / 2;
  L.logits_bwd = 2 * g + ce / 2;
  L.logits_flops = 3 * 2.0 * T * Vr * static_cast<double>(m.hidden_size);
  return L;
}

StageTimes stage_times_with(const ModelSpec& m, const ClusterSpec& c, const Plan& p,
                            const Workload& w, int stage, const Layers& L, double* flops,
                            RankParams* rp_out) {
  StageTimes st;
  const RankParams rp = rank_params(m, p, stage);
  if (rp_out) *rp_out = rp;
  const int moe_n = rp.moe_layers, dense_n = rp.layers - rp.moe_layers;
  st.forward = dense_n * L.dense.fwd_s + moe_n * L.moe.fwd_s;
  st.backward = dense_n * L.dense.bwd_s + moe_n * L.moe.bwd_s;
  double fl = dense_n * L.dense.flops + moe_n * L.moe.flops;
  if (stage == p.pp - 1) {
    st.forward += L.logits_fwd;
    st.backward += L.logits_bwd;
    fl += L.logits_flops;
  }
  st.tp = dense_n * L.dense_comm.tp + moe_n * L.moe_comm.tp;
  st.cp = dense_n * L.dense_comm.cp + moe_n * L.moe_comm.cp;
  st.ep = moe_n * L.moe_comm.ep;
  const int gpn = c.gpus_per_node;
  const double seq = static_cast<double>(w.seq_len);
  const double T = p.microbatch * seq / p.cp;
  if (p.pp > 1) {
    // Activation forward and gradient backward per chunk boundary; 1/t each with SP.
    const double S = T * static_cast<double>(m.hidden_size) * kActBytes /
                     (p.sequence_parallel && p.tp > 1 ? p.tp : 1);
    const int stride = p.tp * p.cp * p.dp;
    const GroupShape g = group_shape(2, stride, gpn);
    const double one = collective_cost(c, CollKind::kSendRecv, g, S).time_s;
    st.pp = 2.0 * p.virtual_stages * one;
  }
  if (p.zero >= 3 && p.dp * p.cp > 1) {
    const GroupShape g = group_shape(p.dp * p.cp, p.tp, gpn);
    const double params = rp.dense + rp.expert;
    const double ag = collective_cost(c, CollKind::kAllGather, g, params * kWeightBytes).time_s;
    const double rs = collective_cost(c, CollKind::kReduceScatter, g, params * p.grad_bytes).time_s;
    const double layer_ag =
        collective_cost(c, CollKind::kAllGather, g, rp.largest_layer * kWeightBytes).time_s;
    // Prefetch hides each layer's gather behind the previous layer's compute; the first
    // gather of each pass is exposed.
    st.fsdp = std::max(layer_ag, ag - st.forward) + std::max(layer_ag, ag + rs - st.backward);
  }
  if (flops) *flops = fl;
  return st;
}

}  // namespace

StageTimes stage_times(const ModelSpec& m, const ClusterSpec& c, const Plan& p, const Workload& w,
                       int stage) {
  const Layers L = layer_costs(m, c, p, w);
  return stage_times_with(m, c, p, w, stage, L, nullptr, nullptr);
}

Estimate estimate(const ModelSpec& m, const ClusterSpec& c, const Plan& p, const Workload& w) {
  Estimate e;
  e.params = count_params(m);
  e.world = c.world();
  e.microbatches = p.accumulation();
  e.tokens_per_step = p.global_batch * w.seq_len;
  e.model_flops_per_step = token_flops(m, w.seq_len).training * static_cast<double>(e.tokens_per_step);
  const Layers L = layer_costs(m, c, p, w);
  const double mb = static_cast<double>(e.microbatches);
  const int gpn = c.gpus_per_node;
  const double nd = static_cast<double>(p.dp) * p.cp;

  double t_max = -1, t_sum = 0, hw_flops = 0;
  StageTimes slowest;
  double tail_best = -1, tail_dp = 0, tail_opt = 0;
  for (int s = 0; s < p.pp; ++s) {
    double fl = 0;
    RankParams rp;
    const StageTimes st = stage_times_with(m, c, p, w, s, L, &fl, &rp);
    hw_flops += fl * mb * p.tp * p.cp * p.dp;
    const double t = st.per_microbatch();
    t_sum += t;
    if (t > t_max) {
      t_max = t;
      slowest = st;
      e.slowest_stage = s;
    }
    // Data-parallel gradient synchronisation and optimizer after the last backward.
    double dp_time = 0;
    if (p.zero < 3 && nd > 1) {
      const GroupShape gd = group_shape(static_cast<int>(nd), p.tp, gpn);
      const int nde = static_cast<int>(nd) / p.ep;
      const GroupShape ge = group_shape(std::max(nde, 1), p.tp * p.ep, gpn);
      auto sync = [&](const GroupShape& g, double params) {
        if (params <= 0 || g.ranks <= 1) return 0.0;
        const double grad_bytes = params * p.grad_bytes;
        double t_grad = p.zero == 0 ? collective_cost(c, CollKind::kAllReduce, g, grad_bytes).time_s
                                    : collective_cost(c, CollKind::kReduceScatter, g, grad_bytes).time_s;
        if (p.overlap_grad_reduce) {
          const double bucket = std::min(grad_bytes, p.ddp_bucket_MiB * 1024 * 1024);
          const double t_bucket =
              p.zero == 0 ? collective_cost(c, CollKind::kAllReduce, g, bucket).time_s
                          : collective_cost(c, CollKind::kReduceScatter, g, bucket).time_s;
          t_grad = std::max(t_bucket, t_grad - st.backward);
        }
        double t_param = 0;
        if (p.zero >= 1) {
          t_param = collective_cost(c, CollKind::kAllGather, g, params * kWeightBytes).time_s;
          if (p.overlap_param_gather) t_param = std::max(0.0, t_param - st.forward);
        }
        return t_grad + t_param;
      };
      dp_time = sync(gd, rp.dense) + sync(ge, rp.expert);
    }
    // Stage s ends its last backward about s backward passes before stage 0 (1F1B drain).
    const double slack = s * st.backward / p.virtual_stages;
    const double dp_exposed = std::max(0.0, dp_time - slack);
    const double opt_params = p.zero >= 1 ? rp.dense / nd + rp.expert / (nd / p.ep) : rp.dense + rp.expert;
    const double per_param = (p.optimizer == Optimizer::kAdam ? 26.0 : 18.0) + p.grad_bytes;
    const double t_opt = memory_time_s(c.gpu, opt_params * per_param);
    if (dp_exposed + t_opt > tail_best) {
      tail_best = dp_exposed + t_opt;
      tail_dp = dp_exposed;
      tail_opt = t_opt;
    }
  }
  const double bubble = (t_sum - t_max) / p.virtual_stages;
  e.breakdown.compute = mb * (slowest.forward + slowest.backward);
  e.exposed.tp = mb * slowest.tp;
  e.exposed.cp = mb * slowest.cp;
  e.exposed.ep = mb * slowest.ep;
  e.exposed.pp = mb * slowest.pp;
  e.exposed.dp = mb * slowest.fsdp + tail_dp;
  e.breakdown.exposed_comm = e.exposed.tp + e.exposed.cp + e.exposed.ep + e.exposed.pp + e.exposed.dp;
  e.breakdown.bubble = bubble;
  e.breakdown.optimizer = tail_opt;
  e.breakdown.input = w.input_time_s;
  e.step_time_s = e.breakdown.compute + e.breakdown.exposed_comm + e.breakdown.bubble +
                  e.breakdown.wait + e.breakdown.optimizer + e.breakdown.input;
  e.tokens_per_s = static_cast<double>(e.tokens_per_step) / e.step_time_s;
  const double peak = peak_flops(c.gpu, p.precision) * static_cast<double>(e.world);
  e.mfu = e.model_flops_per_step / (e.step_time_s * peak);
  e.hardware_flops_per_step = hw_flops;
  e.hfu = hw_flops / (e.step_time_s * peak);

  // The worst rank's memory.
  for (int s = 0; s < p.pp; ++s) {
    MemoryBreakdown mem = stage_memory(m, c, p, w, s);
    if (s == 0 || mem.total > e.memory.total) e.memory = mem;
  }
  if (p.tp > c.gpus_per_node) {
    e.notes.push_back(fmt::format("TP group of {} spans {} nodes: its collectives use the NICs",
                                  p.tp, (p.tp + c.gpus_per_node - 1) / c.gpus_per_node));
  }
  if (!e.memory.fits) {
    e.notes.push_back(fmt::format(
        "does not fit: stage {} needs {:.1f} GiB, {:.1f} GiB usable ({:.0f}% headroom); short by {:.1f} GiB",
        e.memory.stage, e.memory.total / kGiB, e.memory.usable / kGiB, p.memory_headroom * 100,
        (e.memory.total - e.memory.usable) / kGiB));
  }
  return e;
}

}  // namespace stepcast

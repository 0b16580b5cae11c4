#include "stepcast/models/params.h"

#include <algorithm>

namespace stepcast {

ParamCounts count_params(const ModelSpec& m) {
  ParamCounts c;
  const std::int64_t h = m.hidden_size, a = m.num_attention_heads, g = m.num_kv_heads;
  const std::int64_t dh = m.head_dim, G = m.ffn_matrices, F = m.ffn_hidden_size, V = m.vocab_size;
  const std::int64_t norm = (m.norm == NormKind::kLayerNorm ? 2 : 1) * h;
  if (m.mla) {
    const MlaSpec& x = *m.mla;
    const std::int64_t qk = x.qk_nope_head_dim + x.qk_rope_head_dim;
    std::int64_t q = x.q_lora_rank > 0 ? h * x.q_lora_rank + x.q_lora_rank + x.q_lora_rank * a * qk
                                       : h * a * qk;
    c.attention_per_layer = q + h * (x.kv_lora_rank + x.qk_rope_head_dim) + x.kv_lora_rank +
                            x.kv_lora_rank * a * (x.qk_nope_head_dim + x.v_head_dim) +
                            a * x.v_head_dim * h;
  } else {
    c.attention_per_layer = h * a * dh + 2 * h * g * dh + a * dh * h;
    if (m.linear_bias) c.attention_per_layer += a * dh + 2 * g * dh + h;
  }
  c.norms_per_layer = 2 * norm;
  // Qwen3's q_norm and k_norm: one RMSNorm weight of d_h each (HF modeling_qwen3.py Qwen3Attention).
  if (has_qk_norm(m)) c.qk_norms_per_layer = 2 * dh;
  c.norms_per_layer += c.qk_norms_per_layer;
  c.dense_ffn_per_layer = G * h * F + (m.linear_bias ? F * (G - 1) + h : 0);
  c.dense_layers = m.num_layers;
  if (m.moe) {
    const MoeSpec& e = *m.moe;
    c.dense_layers = e.num_dense_layers;
    c.moe_layers = m.num_layers - e.num_dense_layers;
    // With linear biases (GPT-OSS) each expert carries its FFN's: F (G - 1) + h.
    const auto expert = [&](std::int64_t f) { return G * h * f + (m.linear_bias ? f * (G - 1) + h : 0); };
    c.expert_per_layer = std::int64_t{e.num_experts} * expert(e.expert_ffn_hidden_size);
    c.shared_per_layer = std::int64_t{e.num_shared_experts} * expert(e.shared_expert_ffn_hidden_size);
    c.router_per_layer = h * e.num_experts + (e.router_bias ? e.num_experts : 0);
  }
  c.embedding_input = V * h;
  c.output_projection = m.tied_embeddings ? 0 : V * h;
  c.position_embedding =
      m.position_embedding == PositionEmbedding::kLearned ? m.max_seq_len * h : 0;
  c.final_norm = norm;
  const std::int64_t common = c.attention_per_layer + c.norms_per_layer;
  const std::int64_t outside =
      c.embedding_input + c.output_projection + c.position_embedding + c.final_norm;
  const std::int64_t moe_layer = common + c.expert_per_layer + c.shared_per_layer + c.router_per_layer;
  c.total = c.dense_layers * (common + c.dense_ffn_per_layer) + c.moe_layers * moe_layer + outside;
  std::int64_t active_moe = moe_layer;
  if (m.moe) {
    active_moe = common + c.expert_per_layer / m.moe->num_experts * m.moe->top_k +
                 c.shared_per_layer + c.router_per_layer;
  }
  c.active = c.dense_layers * (common + c.dense_ffn_per_layer) + c.moe_layers * active_moe + outside;
  if (m.mtp_layers > 0) {
    c.mtp_extra_per_module = 2 * h * h + 3 * norm;
    const std::int64_t layer = m.moe ? moe_layer : common + c.dense_ffn_per_layer;
    c.mtp_total = m.mtp_layers * (c.mtp_extra_per_module + layer);
  }
  return c;
}

int chunk_layers(int num_layers, int chunks, int chunk) {
  const int base = num_layers / chunks;
  const int extra = num_layers % chunks;
  if (extra == 0) return base;
  // Middle chunks 1..chunks-2 first, then chunk 0, then the last one.
  int rank_in_order;
  if (chunk >= 1 && chunk <= chunks - 2) rank_in_order = chunk - 1;
  else if (chunk == 0) rank_in_order = chunks - 2;
  else rank_in_order = chunks - 1;
  if (chunks == 1) rank_in_order = 0;
  return base + (rank_in_order < extra ? 1 : 0);
}

int chunk_first_layer(int num_layers, int chunks, int chunk) {
  // The sum of chunk_layers over chunks 0..chunk-1 without the loop: each has `base`, and
  // the `extra` layers go to chunks 1..extra (middle chunks first), then to chunk 0 when
  // extra reaches chunks - 1 (the last chunk takes one only when all do, i.e. never).
  if (chunk <= 0 || chunks <= 1) return 0;
  const int base = num_layers / chunks;
  const int extra = num_layers % chunks;
  const int middle_before = std::max(0, std::min({chunk - 1, chunks - 2, extra}));
  const int chunk0_extra = chunks - 2 < extra ? 1 : 0;
  return chunk * base + middle_before + chunk0_extra;
}

namespace {
// Whether the plan's layout gives its chunks (the loader refuses one that does not; the
// planner may ask about other pp or v before it does: they take the even split).
bool has_layout(const Plan& p) {
  return !p.pipeline_layout.empty() &&
         p.pipeline_layout.size() == static_cast<std::size_t>(p.pp) * static_cast<std::size_t>(p.virtual_stages);
}
}  // namespace

int chunk_layers(const ModelSpec& m, const Plan& p, int chunk) {
  if (has_layout(p)) return p.pipeline_layout[static_cast<std::size_t>(chunk)];
  return chunk_layers(m.num_layers, p.pp * p.virtual_stages, chunk);
}

int chunk_first_layer(const ModelSpec& m, const Plan& p, int chunk) {
  if (!has_layout(p)) return chunk_first_layer(m.num_layers, p.pp * p.virtual_stages, chunk);
  int first = 0;
  for (int k = 0; k < chunk; ++k) first += p.pipeline_layout[static_cast<std::size_t>(k)];
  return first;
}

LayerRankParams layer_rank_params(const ModelSpec& m, const Plan& p, bool moe) {
  return layer_rank_params(m, count_params(m), p, moe);
}

LayerRankParams layer_rank_params(const ModelSpec& m, const ParamCounts& c, const Plan& p, bool moe) {
  const double t = p.tp;
  // With linear biases each row-parallel layer's output bias (h) is whole on every rank of
  // its TP group: Megatron-Core's RowParallelLinear allocates `bias` of output_size and adds
  // it after the reduction (megatron/core/tensor_parallel/layers.py) [V]; the column-parallel
  // biases are split with their matrices. `row_bias` is that part, split by t in the counts.
  const double row_bias = row_parallel_bias(m);
  const double replicated = 1.0 - 1.0 / t;  // what the split by t left out of a whole row bias
  // K and V projections: each rank holds max(g/t, 1) KV heads (replicated when t > g),
  // their biases (2 d_h per KV head) with them.
  double attn = static_cast<double>(c.attention_per_layer) / t + row_bias * replicated;
  if (!m.mla && p.tp > m.num_kv_heads) {
    const double kv_full = 2.0 * m.head_dim * (m.hidden_size + (m.linear_bias ? 1 : 0));  // one KV head, K and V
    attn += kv_full * (1.0 - static_cast<double>(m.num_kv_heads) / t);
  }
  LayerRankParams out;
  if (!moe) {
    out.dense = attn + c.norms_per_layer + c.dense_ffn_per_layer / t + row_bias * replicated;
  } else {
    // The router's weight (E x h) is whole on every TP rank: Megatron-Core's Router holds it as
    // one torch.nn.Parameter of shape (num_moe_experts, hidden_size), not a parallel linear
    // (megatron/core/transformer/moe/router.py) [V]; the shared experts are split as an MLP,
    // each one's output bias whole.
    const MoeSpec& e = *m.moe;
    out.dense = attn + c.norms_per_layer + c.shared_per_layer / t + e.num_shared_experts * row_bias * replicated +
                static_cast<double>(c.router_per_layer);
    // Each of the rank's E/e experts keeps its output bias whole over the expert TP group.
    const double te = p.expert_tp();
    out.expert = static_cast<double>(c.expert_per_layer) / (te * p.ep) +
                 static_cast<double>(e.num_experts) / p.ep * row_bias * (1.0 - 1.0 / te);
  }
  return out;
}

LayerRankParams mtp_rank_params(const ModelSpec& m, const ParamCounts& c, const Plan& p) {
  LayerRankParams r;
  if (m.mtp_layers <= 0) return r;
  const LayerRankParams last = layer_rank_params(m, c, p, m.moe.has_value());
  const double proj = 2.0 * static_cast<double>(m.hidden_size) * static_cast<double>(m.hidden_size);
  r.dense = m.mtp_layers * (proj / p.tp + (static_cast<double>(c.mtp_extra_per_module) - proj) + last.dense);
  r.expert = m.mtp_layers * last.expert;
  return r;
}

RankParams rank_params(const ModelSpec& m, const Plan& p, int stage) {
  return rank_params(m, count_params(m), p, stage);
}

RankParams rank_params(const ModelSpec& m, const ParamCounts& c, const Plan& p, int stage) {
  RankParams r;
  const double t = p.tp;
  const LayerRankParams dl = layer_rank_params(m, c, p, false);
  const LayerRankParams ml = m.moe ? layer_rank_params(m, c, p, true) : LayerRankParams{};
  const double dense_layer = dl.dense;
  const double moe_common = ml.dense;
  const double moe_expert = ml.expert;
  for (int v = 0; v < p.virtual_stages; ++v) {
    const int chunk = stage + v * p.pp;
    const int n = chunk_layers(m, p, chunk);
    const int first = chunk_first_layer(m, p, chunk);
    const int dense_end = std::clamp(c.dense_layers - first, 0, n);  // dense layers come first
    r.layers += n;
    r.moe_layers += n - dense_end;
    r.dense += dense_end * dense_layer + (n - dense_end) * moe_common;
    r.expert += (n - dense_end) * moe_expert;
    if (dense_end > 0) r.largest_layer = std::max(r.largest_layer, dense_layer);
    if (n - dense_end > 0) r.largest_layer = std::max(r.largest_layer, moe_common + moe_expert);
  }
  if (stage == 0) r.dense += c.embedding_input / t + c.position_embedding;
  if (stage == p.pp - 1) {
    const LayerRankParams mtp = mtp_rank_params(m, c, p);
    r.dense += mtp.dense;
    r.expert += mtp.expert;
  }
  if (stage == p.pp - 1) {
    r.dense += c.final_norm;
    if (p.pp == 1) r.dense += c.output_projection / t;
    else r.dense += (m.tied_embeddings ? c.embedding_input : c.output_projection) / t;
  }
  return r;
}

}  // namespace stepcast

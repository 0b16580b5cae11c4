// Parameter counts (docs/cost-model-sources.md section 1.1-1.2; docs/model-reference.md "Parameters").
#pragma once

#include <cstdint>

#include "stepcast/models/specs.h"

namespace stepcast {

struct ParamCounts {
  std::int64_t total = 0;               // every weight (excl. MTP modules)
  std::int64_t active = 0;              // per token: k routed + shared experts (MoE), else total
  std::int64_t attention_per_layer = 0; // projections (+ biases), MLA terms when MLA
  std::int64_t norms_per_layer = 0;     // two norms (+ the QK norms, qk_norms_per_layer)
  std::int64_t qk_norms_per_layer = 0;  // q_norm and k_norm: 2 d_h with has_qk_norm, else 0
  std::int64_t dense_ffn_per_layer = 0; // G*h*F (+ biases)
  std::int64_t expert_per_layer = 0;    // all routed experts of one MoE layer
  std::int64_t shared_per_layer = 0;    // shared experts of one MoE layer
  std::int64_t router_per_layer = 0;    // h*E (+ E bias)
  std::int64_t embedding_input = 0;     // V*h
  std::int64_t output_projection = 0;   // V*h when untied, else 0
  std::int64_t position_embedding = 0;  // max_seq_len*h when learned
  std::int64_t final_norm = 0;
  int dense_layers = 0;
  int moe_layers = 0;
  // One multi-token prediction module besides its transformer layer (counted as a layer of
  // the model's last kind): the 2h x h projection and its two input norms and output norm.
  std::int64_t mtp_extra_per_module = 0;
  std::int64_t mtp_total = 0;           // all modules, layers included (not in `total`)
};

ParamCounts count_params(const ModelSpec& model);

// Whether the model's attention norms each query and key head (model.qk_norm; MLA has its
// own latent norms instead).
inline bool has_qk_norm(const ModelSpec& m) { return m.qk_norm && !m.mla; }
// One row-parallel layer's output bias (the attention projection's, FC2's, an expert's FC2's):
// h with linear biases, else 0. Megatron-Core keeps it whole on every TP rank.
inline double row_parallel_bias(const ModelSpec& m) {
  return m.linear_bias && !m.mla ? static_cast<double>(m.hidden_size) : 0.0;
}

// Layers of model chunk `chunk` (0-based) when `num_layers` are split into `chunks`
// pipeline chunks: floor(L/chunks) each, the remainder going to the middle chunks first
// (chunks 1, 2, ...), so that the first and last chunks, which also hold the embedding
// and the output layer, get fewer (Llama 3 405B: 126 layers on 16 stages = 7, 8 x 14, 7).
int chunk_layers(int num_layers, int chunks, int chunk);
// Index of the first layer of `chunk`.
int chunk_first_layer(int num_layers, int chunks, int chunk);
// The same for the plan's pp x virtual_stages chunks: plan.pipeline_layout's split where the
// plan has one (Megatron-Core's pipeline_model_parallel_layout), else the even split above.
int chunk_layers(const ModelSpec& m, const Plan& p, int chunk);
int chunk_first_layer(const ModelSpec& m, const Plan& p, int chunk);

// Parameters held by one rank of pipeline stage `stage` (0-based), before ZeRO sharding.
// Dense (non-expert) weights are split by TP; routed experts by EP and expert TP (etp); the input
// embedding sits on the first stage and the output projection on the last (a tied
// embedding is also copied to the last stage when pp > 1, as Megatron does).
struct RankParams {
  double dense = 0;    // replicated across the dp x cp group
  double expert = 0;   // replicated across the expert-data-parallel group (Plan::edp)
  int layers = 0;
  int moe_layers = 0;
  double largest_layer = 0;  // one layer's weights on this rank (FSDP unit)
};
RankParams rank_params(const ModelSpec& model, const Plan& plan, int stage);
// The same with `counts` = count_params(model) already computed (estimate() asks per stage).
RankParams rank_params(const ModelSpec& model, const ParamCounts& counts, const Plan& plan, int stage);

// Parameters of one transformer layer held by one rank (TP, EP and KV replication applied).
struct LayerRankParams {
  double dense = 0;   // attention, norms, dense FFN or router + shared experts
  double expert = 0;  // this rank's routed experts
};
LayerRankParams layer_rank_params(const ModelSpec& model, const Plan& plan, bool moe_layer);
// The multi-token prediction modules on a last-stage rank: per module the projection
// (column-parallel over TP), its norms and one layer of the model's last kind; zero
// without MTP.
LayerRankParams mtp_rank_params(const ModelSpec& model, const ParamCounts& counts, const Plan& plan);
LayerRankParams layer_rank_params(const ModelSpec& model, const ParamCounts& counts, const Plan& plan,
                                  bool moe_layer);

}  // namespace stepcast

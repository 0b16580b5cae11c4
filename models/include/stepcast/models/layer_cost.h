// Cost of one transformer layer for one microbatch on one rank, split into the pieces
// the Program IR executes as separate ops. The closed form (estimate.h) sums the same
// pieces, so the event engine and the closed form price identical work.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "stepcast/models/attention.h"
#include "stepcast/models/collectives.h"
#include "stepcast/models/params.h"
#include "stepcast/models/specs.h"

namespace stepcast {

// KV heads one rank holds: g / tp, or 1 when tp > g (each head replicated).
double kv_heads_per_rank(const ModelSpec& model, const Plan& plan);

// T_e: the tokens one rank's expert tensor-parallel group processes per microbatch, for T
// tokens per rank before sequence parallelism: T/tp per rank (sequence parallel, or tp 1),
// gathered over etp ranks (T·etp/tp); T with tp > 1 without SP (etp = tp). Routed rows per
// rank are T_e·k.
double expert_tokens(const Plan& plan, double T);

// The busiest expert-parallel rank's routed rows over the balanced mean, which every
// expert-side term scales by (docs/model-reference.md "MoE load imbalance", "Token dropping
// and padding"): dropless (capacity_factor 0) the stated load_imbalance; padded to capacity
// exactly capacity_factor (every expert takes capacity_factor x the mean rows from each
// rank, real or padding); dropping without padding min(load_imbalance, capacity_factor),
// since no expert takes more than its capacity.
double moe_routed_load(const MoeSpec& moe);

// Bytes moved per element quantizing an FP8 GEMM operand under `recipe` (Transformer
// Engine's kernels; docs/model-reference.md §4.4): tensorwise 6 (an amax pass, then cast +
// transpose: read 2 + read 2, write 1 + 1), delayed 4 (the cast records the amax), blockwise
// 4 + 8/128 and mxfp8 4 + 2/32 (one pass writing both layouts and their scales).
double fp8_quant_bytes_per_element(Fp8Recipe recipe);

// Query-key and value head dimensions (MLA: d_nope + d_rope and d_v; else head_dim).
struct HeadDims {
  double qk = 0, v = 0;
};
HeadDims head_dims(const ModelSpec& model);

// torchtitan's op-level selective activation checkpointing (plan.recompute "selective_op",
// docs/model-reference.md "Op-level selective recomputation"): each block saves the output
// of every other matmul, counted across its forwards, so with an odd number per forward
// the saved set alternates between the odd-numbered (A) and even-numbered (B) matmuls.
// The matmuls of a dense (non-MLA) layer in execution order, as torchtitan's Llama runs them
// (wq, wk, wv, wo, then w1, w3, w2 for a gated FFN or fc1, fc2): per rank, M = the rank's
// tokens, N x K each; an output's bytes per token are 2 N.
struct OpSacMm {
  double n = 0, k = 0;
  double recompute_weight = 0;  // the share of backwards that recompute it
};
struct OpSacSplit {
  double saved_bytes_per_token = 0;  // the larger of the saved sets (memory's worst forward)
  std::vector<OpSacMm> mms;
};
OpSacSplit op_sac_split(const ModelSpec& model, const Plan& plan);

struct LayerCost {
  // Forward pieces, seconds.
  double attn_gemm_s = 0;       // QKV and output projections
  double attn_core_s = 0;       // Q.K^T, softmax, .V (causal kernels)
  double attn_elem_s = 0;       // norm, RoPE, residual (memory-bound)
  double mlp_gemm_s = 0;        // dense FFN, or router + shared experts + routed experts
  double mlp_elem_s = 0;        // norm, activation function, residual (+ moe_route_s)
  double moe_route_s = 0;       // MoE layers: router softmax/top-k, token permutation (in mlp_elem_s)
  double shared_gemm_s = 0;     // MoE layers: the shared experts' forward GEMMs (in mlp_gemm_s)
  double fp8_quant_bytes = 0;   // FP8: bytes moved quantizing GEMM operands, fwd + bwd (in *_elem_s)
  double core_bwd_factor = 2.5; // attention backward / forward FLOPs (FlashAttention recomputes)
  double attn_core_bwd_s = 0;   // the attention core's backward: core_bwd_factor x the forward's
                                // FLOPs at the backward's efficiency (+ the scores' traffic x it)
  AttentionEfficiency attn_eff; // the core's forward and backward efficiency (attention.h)
  // Executed FLOPs of the forward pieces.
  double attn_gemm_flops = 0, attn_core_flops = 0, mlp_flops = 0;
  // Backward GEMM seconds (data and weight gradients), each GEMM on its own shape: for a
  // forward (M x K).(K x N), the data gradient (M x N).(N x K) and the weight gradient
  // (K x M).(M x N) (twice the forward's FLOPs). With TP communication overlap see
  // `tp_overlap`.
  double attn_gemm_bwd_s = 0, mlp_gemm_bwd_s = 0;
  // The four dense GEMMs' backward halves (0 for MoE and MLA layers) and the shared
  // experts' backward (MoE layers, in mlp_gemm_bwd_s).
  double qkv_dgrad_s = 0, qkv_wgrad_s = 0, proj_dgrad_s = 0, proj_wgrad_s = 0;
  double fc1_dgrad_s = 0, fc1_wgrad_s = 0, fc2_dgrad_s = 0, fc2_wgrad_s = 0;
  double shared_gemm_bwd_s = 0;

  // The four GEMMs of a dense layer with standard attention (0 for MoE and MLA layers),
  // forward seconds and FLOPs, unsplit: qkv + proj = attn_gemm_s, fc1 + fc2 = mlp_gemm_s
  // (in that summation order). fc1 holds the G-1 up/gate matrices.
  double qkv_gemm_s = 0, proj_gemm_s = 0, fc1_gemm_s = 0, fc2_gemm_s = 0;
  double qkv_flops = 0, proj_flops = 0, fc1_flops = 0, fc2_flops = 0;
  // TP communication overlap (Plan::tp_comm_overlap; dense non-MLA layers with SP and
  // tp > 1). Each of the four GEMMs that meets a TP collective is split into tp chunks of
  // M/tp rows (`*_chunk_s`: one chunk, gemm_time_s on that shape), so
  //   forward:  attn_gemm_s = tp*qkv_chunk + tp*proj_chunk, mlp_gemm_s = tp*fc1_chunk + tp*fc2_chunk
  //   backward: the dgrad of proj / fc2 is split (paired with the all-gather of the output
  //             gradient), the rest is not: attn_gemm_bwd_s = tp*proj_dgrad_chunk +
  //             proj_wgrad + qkv_dgrad + qkv_wgrad, mlp_gemm_bwd_s = tp*fc2_dgrad_chunk +
  //             fc2_wgrad + fc1_dgrad + fc1_wgrad.
  // A dgrad chunk is 1/tp of the unsplit data gradient. docs/model-reference.md "TP
  // communication overlap".
  bool tp_overlap = false;
  int tp_chunks = 1;
  double qkv_chunk_s = 0, proj_chunk_s = 0, fc1_chunk_s = 0, fc2_chunk_s = 0;
  double proj_dgrad_chunk_s = 0, fc2_dgrad_chunk_s = 0;

  double attn_fwd_s() const { return attn_gemm_s + attn_core_s + attn_elem_s; }
  double mlp_fwd_s() const { return mlp_gemm_s + mlp_elem_s; }
  double fwd_s() const { return attn_fwd_s() + mlp_fwd_s(); }
  // Backward: GEMMs twice (data and weight gradients), attention core attn_core_bwd_s,
  // memory-bound work twice.
  double attn_bwd_s() const { return attn_gemm_bwd_s + attn_core_bwd_s + 2 * attn_elem_s; }
  double mlp_bwd_s() const { return mlp_gemm_bwd_s + 2 * mlp_elem_s; }
  // Extra forward work before the backward: the whole layer (full), the plan's modules
  // (selective: Plan::recompute_modules, by default the attention core), else nothing.
  double recompute_s = 0;
  double recompute_flops = 0;
  // Selective recomputation re-runs the MLP block ("mlp" on a dense layer, "moe" on an MoE
  // layer): mlp_fwd_s() of recompute_s, with the block's TP and all-to-all communication once
  // more (layer_comm).
  bool recompute_block = false;
  double bwd_s() const { return attn_bwd_s() + mlp_bwd_s() + recompute_s; }
  // fwd_s() + bwd_s() by kind of work: GEMMs, the attention core, memory-bound work (once
  // forward, twice backward), and recompute_s.
  double gemm_s() const { return attn_gemm_s + mlp_gemm_s + attn_gemm_bwd_s + mlp_gemm_bwd_s; }
  double attention_s() const { return attn_core_s + attn_core_bwd_s; }
  double memory_bound_s() const { return 3 * (attn_elem_s + mlp_elem_s); }
  double flops() const {
    return 3 * (attn_gemm_flops + mlp_flops) + (1 + core_bwd_factor) * attn_core_flops + recompute_flops;
  }
};

LayerCost layer_cost(const ModelSpec& model, const ClusterSpec& cluster, const Plan& plan,
                     std::int64_t seq_len, bool moe_layer);

// Elements of one layer's FP8 GEMM operands that a rank quantizes per microbatch of T
// tokens (T = microbatch x seq_len / cp): forward the GEMM inputs, backward the GEMM output
// gradients, for the attention and the MLP (or MoE) block (docs/model-reference.md "FP8
// quantization").
struct Fp8Elements {
  double fwd_attn = 0, bwd_attn = 0, fwd_mlp = 0, bwd_mlp = 0;
};
Fp8Elements fp8_quantized_elements(const ModelSpec& model, const Plan& plan, double T, bool moe_layer);

// Communication of one layer for one microbatch, per op (seconds when alone on the
// fabric) and bytes (nccl-tests sizes).
struct LayerComm {
  // Tensor parallel: per direction two all-reduces, or with SP two all-gather +
  // reduce-scatter pairs, each on `tp_bytes`. An MoE layer's second pair (with SP) is the
  // expert-TP all-gather of the dispatched tokens after the all-to-all and its reduce-scatter
  // before the combine (Megatron-Core's all-to-all dispatcher), on `moe_tp_bytes` = the
  // gathered T_e k h 16-bit rows, over the expert-TP group (GroupKind::kEtp: the TP group
  // when etp = tp; with folded experts etp ranks of its own, also under tp 1); 0 with etp 1.
  double tp_bytes = 0;
  double moe_tp_bytes = 0;
  double tp_allreduce_s = 0, tp_allgather_s = 0, tp_reducescatter_s = 0;
  // One pass's TP collectives around the attention block and around the MLP (MoE) block:
  // with SP the all-gather + reduce-scatter pair, else the all-reduce (0 without TP).
  double tp_attn_pass_s = 0, tp_mlp_pass_s = 0;
  // With TP communication overlap (LayerCost::tp_overlap), exposed seconds of each pass
  // (one layer, one microbatch): a collective of c seconds over n = tp ranks pipelined
  // with a GEMM split into n chunks of g seconds exposes (n-1) * max(0, (1-f) c/(n-1) - g);
  // one left alone beside an independent GEMM of G seconds ("bulk") max(0, (1-f) c - G);
  // f is the interference (interference_s below; 0 by default).
  //   forward (and a full recompute): AG|qkv, RS|proj, AG|fc1, RS|fc2, all pipelined;
  //   backward: AG of the output gradient | dgrad of proj and of fc2 (pipelined), RS of
  //             the input gradient beside the wgrad of qkv and of fc1 (bulk).
  double tp_overlap_fwd_s = 0, tp_overlap_bwd_s = 0;
  // Context parallel ring attention: cp-1 neighbour exchanges forward (K, V) and
  // backward (K, V and their gradients: twice the bytes).
  double cp_step_bytes = 0;
  double cp_step_fwd_s = 0, cp_step_bwd_s = 0;
  // Expert parallel: all-to-all dispatch and combine, each on `ep_bytes`. With the all-gather
  // dispatcher (Plan::moe_allgather_dispatcher) `ep_bytes` is the gathered tokens' size and
  // a pass's collectives on the expert-TP x EP group take ep_dispatch_fwd_s (the tokens',
  // routing map's and probabilities' all-gathers, the output's reduce-scatter) and
  // ep_dispatch_bwd_s (their transposes); ep_a2a_s is 0.
  // With DeepEP (Plan::moe_deepep_dispatcher) `ep_bytes` is the rows a rank receives, one per
  // token and destination rank, and `ep_rdma_per_byte` the share of them that crosses the
  // network (collectives.h deepep_time_s); ep_a2a_s is DeepEP's time.
  double ep_bytes = 0;
  double ep_a2a_s = 0;
  double ep_rdma_per_byte = 0;
  EpRouting ep_routing;                         // DeepEP: the expected destination ranks and nodes per token
  double ep_map_bytes = 0, ep_probs_bytes = 0;  // all-gather dispatcher: routing map, probabilities
  double ep_dispatch_fwd_s = 0, ep_dispatch_bwd_s = 0;
  // Exposed seconds per microbatch, as the closed form counts them.
  double tp_exposed_s = 0, cp_exposed_s = 0, ep_exposed_s = 0;
  // The same TP, CP and EP exposure of the forward pass, and of the backward with its
  // recomputation (exposed_fwd_s + exposed_bwd_s = the three above).
  double exposed_fwd_s = 0, exposed_bwd_s = 0;
  // Compute-communication interference (compute.h overlap_interference, f) of the
  // collectives that overlap this layer's compute: the TP collectives of tp_comm_overlap,
  // the CP ring beside the attention core, the all-to-all beside the overlapped shared
  // experts. A collective of c seconds beside w seconds of compute ends the pair
  // max(c, w + f c) after it starts (docs/model-reference.md 4.5a): f c is charged as
  // compute (slowed), max(0, (1 - f) c - w) as exposed communication. Seconds per layer:
  // one forward pass (`_fwd_s`), and per microbatch (`interference_s`: the forward, its full
  // recomputation, the backward and a recomputed MoE block). The data-parallel collectives'
  // interference is the step's (estimate.cc).
  double interference_fwd_s = 0, interference_s = 0;
};

// (n-1) * max(0, (1 - f) c/(n-1) - g): the exposed part of a collective of `c` seconds split
// over n-1 ring steps, each hidden behind one GEMM chunk of `g` seconds (n >= 2) that the
// step's transfer slows by f of the transfer (interference; 0: none). The slowed compute,
// f c, is the caller's to charge.
double ring_overlap_exposed_s(double c, int n, double g, double f = 0.0);

// `times`: a memo of `cluster`'s collectives to price them with (collective_time_s), or none.
LayerComm layer_comm(const ModelSpec& model, const ClusterSpec& cluster, const Plan& plan, std::int64_t seq_len,
                     bool moe_layer, const LayerCost& cost, CollectiveTimes* times = nullptr);

// The all-gather dispatcher's collectives of one pass of an MoE block (Megatron-Core's
// MoEAllGatherTokenDispatcher), in program order on the expert-TP x EP group: forward the
// tokens', routing map's and probabilities' all-gathers before the experts and the output's
// reduce-scatter after; backward the output gradient's all-gather before, the tokens' and
// probabilities' gradients reduce-scattered after. layer_comm sums their costs, the lowering
// emits them as ops.
struct DispatchCollective {
  CollKind kind = CollKind::kAllGather;
  double bytes = 0;
  const char* what = "";
  bool after_experts = false;
};
struct DispatchPass {
  std::array<DispatchCollective, 4> ops{};
  int n = 0;
};
DispatchPass allgather_dispatch(const LayerComm& comm, bool backward);

// All-to-all overlap (Plan::moe_a2a_overlap): one MoE layer of a merged step, a forward and
// a backward of it from two microbatches, its four all-to-alls (A = LayerComm::ep_a2a_s
// each) beside the other pass's compute blocks (with their TP collectives):
//   B combine | F attention, F dispatch | B experts (and the recomputed modules),
//   B dispatch | F experts,  F combine | B attention.
// Each pair ends max(A, w + f A) after it starts: `interference` = 4 f A slowed compute,
// `exposed` = sum of max(0, (1 - f) A - w) -- per microbatch, as ep_exposed_s.
struct MergedA2a {
  double exposed = 0, interference = 0;
};
MergedA2a merged_a2a(const LayerCost& cost, const LayerComm& comm, double f);

}  // namespace stepcast

namespace stepcast {

// Output layer and cross entropy of one microbatch on a last-stage rank.
struct LogitsCost {
  double fwd_s = 0, bwd_s = 0;
  double ce_s = 0;   // the cross entropy's memory-bound part of fwd_s + bwd_s (half each)
  double flops = 0;  // executed, fwd + bwd
};
LogitsCost logits_cost(const ModelSpec& model, const ClusterSpec& cluster, const Plan& plan,
                       std::int64_t seq_len);

// One multi-token prediction module's projection of the concatenated normalised hidden
// state and shifted-token embedding (2h -> h, column-parallel over TP), forward.
struct MtpProjection {
  double fwd_s = 0;
  double bwd_s = 0;  // data and weight gradients on their own shapes (gemm_backward_s)
  double flops = 0;  // forward
};
MtpProjection mtp_projection_cost(const ModelSpec& model, const ClusterSpec& cluster, const Plan& plan,
                                  std::int64_t seq_len);

// Offload (Plan::offload_*; docs/model-reference.md "Offload"). A fraction f of a stage's
// layers is offloaded whole: the stage's first round(f x layers) layers in model order.
int offloaded_layers(double fraction, int layers);
// Each offloaded layer moves, per microbatch, its activations to host memory during the
// forward and back during the backward (activation offload), and fetches its 16-bit weights
// for each pass (weight offload), over the GPU's host link at host efficiency. The transfers
// of a pass run beside the layer's pass as it runs (its compute, the compute slowed by the
// collectives it overlaps, its exposed TP, CP and EP communication: `comm`); the link
// carries each direction on its own copy engine, so the forward's activations out and
// weights in overlap each other, and the backward's activations and weights in follow each
// other:
//   forward  exposed = max(0, max(a, w) - fwd)      backward exposed = max(0, a + w - bwd)
// with a, w the transfers of the kinds offloaded for the layer (0 otherwise).
struct LayerOffload {
  double act_bytes = 0, weight_bytes = 0;
  double act_s = 0, weight_s = 0;  // one transfer of each over the host link
  double fwd_s = 0, bwd_s = 0;     // each pass of the layer: compute (slowed) + exposed TP/CP/EP
  double exposed_fwd(bool act, bool weight) const {
    return std::max(0.0, std::max(act ? act_s : 0.0, weight ? weight_s : 0.0) - fwd_s);
  }
  double exposed_bwd(bool act, bool weight) const {
    return std::max(0.0, (act ? act_s : 0.0) + (weight ? weight_s : 0.0) - bwd_s);
  }
};
LayerOffload layer_offload(const ClusterSpec& cluster, const Plan& plan, const LayerCost& cost, const LayerComm& comm,
                           double act_bytes, double weight_bytes);

// Tied input and output embeddings split across the pipeline (pp > 1): after the data-parallel
// reduction the first and the last stage all-reduce the embedding's gradients (Megatron-LM's
// finalize_model_grads _allreduce_word_embedding_grads; DeepSpeed's ReduceTiedGrads), the
// V h / t of a rank in the gradient type; between two ranks, one exchange each way. 0 when the
// embeddings are untied or pp = 1 (docs/model-reference.md 6, "Tied embeddings across the pipeline").
double tied_embedding_grad_bytes(const ModelSpec& model, const Plan& plan);

// What a first-stage rank holds per microbatch from its forward to its backward besides the
// layers' activations: the token ids (int64, 8 B per token) and, with the model's dropout,
// the embedding dropout's 1-byte mask over the T x h embedding output (split by t with
// sequence parallelism, which scatters the embedding before its dropout): Megatron's
// theoretical_memory_usage.py "Inputs to embedding" (8 s b) and "Dropout in embedding layer"
// (s b h) [V]. `T` the rank's tokens per microbatch (docs/model-reference.md 3.2).
double first_stage_input_bytes(const ModelSpec& model, const Plan& plan, double T);

// Sequence parallelism's replicated parameters (tp > 1): the norms, the row-parallel output
// biases and the MoE router are whole on every TP rank but each rank's gradient covers only
// its own s/t tokens, so after the data-parallel reduction Megatron-Core all-reduces their
// gradients over the TP group, coalesced into one buffer per step (finalize_model_grads.py
// _allreduce_layernorm_grads, every parameter marked `sequence_parallel`: Megatron's
// RowParallelLinear bias, FusedLayerNorm and Transformer Engine's norms, the Router's weight).
// The bytes of a stage's buffer (`rp` its rank_params, `last_stage` adding the final norm and
// the MTP modules) in the gradient type; 0 without sequence parallelism
// (docs/model-reference.md 6, "Sequence-parallel gradients").
double sp_grad_allreduce_bytes(const ModelSpec& model, const ParamCounts& counts, const Plan& plan,
                               const RankParams& rp, bool last_stage);

// The compute stream's copy after one ZeRO-3 / FSDP all-gather of a layer's `layer`
// parameters on this rank: the stack's zero3_copy_out_bytes per gathered element at the
// GPU's memory-bound rate (FSDP2's foreach_all_gather_copy_out; docs/model-reference.md 5.3).
double zero3_copy_out_s(const ClusterSpec& cluster, const Plan& plan, const LayerRankParams& layer);
// The compute stream's copy before one ZeRO-3 / FSDP reduce-scatter of a layer's `layer`
// gradients on this rank: the stack's zero3_copy_in_bytes read and plan.grad_bytes written
// per element, at the GPU's memory-bound rate (FSDP2's foreach_reduce_scatter_copy_in;
// docs/model-reference.md 5.3). 0 where the stack copies nothing.
double zero3_copy_in_s(const ClusterSpec& cluster, const Plan& plan, const LayerRankParams& layer);

// The optimizer step over `params` parameters on one rank: memory-bound (Adam reads the
// gradient, master weights, two moments and writes them back plus the 16-bit weights:
// 26 + grad bytes per parameter; SGD with momentum 18 + grad bytes). With optimizer offload
// the fraction f of them is updated by the host after the GPU's share (docs/model-reference.md
// "Offload"): gradients down and 16-bit weights up the host link, one after the other, and
// the host step at the GPU's share of the node's host memory bandwidth (28 + 2 bytes per
// Adam parameter), the transfers pipelined with the host step: max(down + up, host).
struct OptimizerStep {
  double gpu_s = 0;                                     // the GPU's share, clip_s included
  double clip_s = 0;                                    // of which the gradient norm, clip and fp16 unscale
  double down_bytes = 0, up_bytes = 0, host_bytes = 0;  // optimizer offload: link and host memory traffic
  double down_s = 0, up_s = 0, host_s = 0;
  double host_part_s() const { return std::max(down_s + up_s, host_s); }
  double time_s() const { return gpu_s + host_part_s(); }
};
OptimizerStep optimizer_step(const ClusterSpec& cluster, const Plan& plan, double params);
// optimizer_step(...).time_s() and .host_part_s() (0 without optimizer offload).
double optimizer_time_s(const ClusterSpec& cluster, const Plan& plan, double params);
// The gradient norm's reduction over every rank before the update: one all-reduce of an
// fp32 scalar for the norm and, in fp16, one for the overflow flag (Megatron-Core's
// found_inf, DeepSpeed's overflow check, the sharded GradScaler's found_inf); 0 on one rank.
// Every stack computes the norm (models/data/stacks.json grad_clip_bytes).
int grad_norm_allreduces(const Plan& plan);
inline constexpr double kGradNormBytes = 4;  // the all-reduced fp32 scalar
// Their time: grad_norm_allreduces x collective_cost(all-reduce, the world group, 4 bytes).
// `times`: as layer_comm's.
double grad_norm_sync_s(const ClusterSpec& cluster, const Plan& plan, CollectiveTimes* times = nullptr);
double host_optimizer_time_s(const ClusterSpec& cluster, const Plan& plan, double params);
// Bytes of host memory the host step moves per parameter: Adam reads the fp32 weight,
// gradient and two moments and writes the weight, the moments and the 16-bit copy
// (16 + 12 + 2); SGD with momentum 12 + 8 + 2.
double host_optimizer_bytes_per_param(Optimizer optimizer);

}  // namespace stepcast

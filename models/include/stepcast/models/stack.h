// Software-stack profiles (plan.stack): the implementation parameters of a framework, from
// models/data/stacks.json (every parameter with its source), and the first mechanism that
// depends on them, host dispatch per kernel (docs/model-reference.md section 4.3).
#pragma once

#include <map>
#include <string>

#include "stepcast/models/collectives.h"
#include "stepcast/models/names.h"
#include "stepcast/models/specs.h"

namespace stepcast {

// Host-device synchronisations in an MoE layer's forward, where the host waits for the GPU
// (its lead is lost, the GPU then idles for the next launch): kDispatcher one (Megatron-Core's
// dropless all-to-all dispatcher copies the token counts to the host before the all-to-all
// when ep > 1 or more than one local expert), kPerExpert one per local expert (an eager
// loop's torch.where per expert), kNone.
enum class MoeHostSync { kNone, kDispatcher, kPerExpert };
template <>
struct Names<MoeHostSync> {
  static constexpr std::array<NameEntry<MoeHostSync>, 3> kTable{{{MoeHostSync::kNone, "none"},
                                                                 {MoeHostSync::kDispatcher, "dispatcher"},
                                                                 {MoeHostSync::kPerExpert, "per_expert"}}};
};
// ZeRO-3 parameter fetch (zero3_fetch.h): kLayer gathers each layer's parameters one layer
// ahead on the data-parallel stream (FSDP units); kModuleSync fetches per module with a
// device synchronisation and a prefetch bucket, as DeepSpeed's 2021 stage-3 coordinator did.
enum class Zero3Fetch { kLayer, kModuleSync };
template <>
struct Names<Zero3Fetch> {
  static constexpr std::array<NameEntry<Zero3Fetch>, 2> kTable{
      {{Zero3Fetch::kLayer, "layer"}, {Zero3Fetch::kModuleSync, "module_sync"}}};
};
// How a kModuleSync stack gathers one weight (zero3_fetch.h Zero3GatherWork): kFlat, one
// all-gather into the weight's buffer; kSyncedList, as DeepSpeed 2021's _allgather_param: a
// zeroed buffer, a device synchronisation, then an all-gather into a list of one view per
// rank, which PyTorch's NCCL process group gathers flat and copies back view by view (and
// the gradient's reduce-scatter from a list of views, copied flat first).
enum class Zero3Gather { kFlat, kSyncedList };
template <>
struct Names<Zero3Gather> {
  static constexpr std::array<NameEntry<Zero3Gather>, 2> kTable{
      {{Zero3Gather::kFlat, "flat"}, {Zero3Gather::kSyncedList, "synced_list"}}};
};

// How ZeRO 1 and 2 reduce the gradients over the data-parallel group: a reduce-scatter to
// each rank's shard, or an all-reduce of the whole gradient (DeepSpeed's BF16_Optimizer under
// its pipeline engine); ZeRO 0 always all-reduces.
enum class GradReduce { kReduceScatter, kAllReduce };
template <>
struct Names<GradReduce> {
  static constexpr std::array<NameEntry<GradReduce>, 2> kTable{
      {{GradReduce::kReduceScatter, "reduce_scatter"}, {GradReduce::kAllReduce, "all_reduce"}}};
};

// The pipeline's steady-state transfers between neighbouring stages: batched, a send posted
// with the receive it waits for and both waited on together (Megatron's
// send_forward_recv_backward, one exchange), or separate, each send and each receive its
// own blocking transfer one after the other (DeepSpeed's pipeline engine: SendGrad,
// RecvActivation, SendActivation, RecvGrad instructions over synchronous p2p.send/recv).
enum class PipelineP2p { kBatched, kSeparate };
template <>
struct Names<PipelineP2p> {
  static constexpr std::array<NameEntry<PipelineP2p>, 2> kTable{
      {{PipelineP2p::kBatched, "batched"}, {PipelineP2p::kSeparate, "separate"}}};
};

struct StackProfile {
  std::string name;                     // the key, e.g. "fsdp2-eager"
  std::string display_name;
  std::string description;
  double host_us_per_kernel = 0;        // CPU time to dispatch one kernel, microseconds
  bool cuda_graphs = false;             // informational: a captured graph would remove the host cost
  // Kernels of one transformer layer's forward pass (per layer totals, both blocks).
  int qkv_gemms = 1;                    // GEMM launches for the Q, K, V projections
  int gated_fc1_gemms = 1;              // GEMM launches for gate + up of a gated FFN
  int rmsnorm_kernels = 2, layernorm_kernels = 2;
  int rope_kernels = 2;
  int gated_activation_kernels = 1, activation_kernels = 1;
  int residual_kernels = 2;
  int dropout_kernels = 0;              // per hidden dropout (two per layer) when model.dropout
  int attention_fwd_kernels = 1, attention_bwd_kernels = 3;
  double elementwise_bwd_per_fwd = 1;   // backward kernels per forward elementwise kernel
  // MoE experts: a grouped module (the activation applied once to all local experts' rows)
  // or a loop over the local experts; and whether each expert matrix's GEMM is launched once
  // per local expert (Transformer Engine's multi-stream cuBLAS grouped GEMM, eager loops) or
  // as one grouped kernel.
  bool moe_grouped_gemm = true;
  bool moe_gemm_per_expert = true;
  int router_kernels = 4;               // MoE routing elementwise kernels (forward)
  MoeHostSync moe_host_sync = MoeHostSync::kDispatcher;  // models/data/stacks.json moe_host_sync
  // HBM bytes one forward of an elementwise op moves per element of its 16-bit tensor (the
  // fused kernels' read 2 + write 2; eager PyTorch's decompositions move more): a norm, the
  // gated activation (per inner element), RoPE (per q or k element).
  double rmsnorm_bytes = 4, layernorm_bytes = 4;
  double gated_activation_bytes = 6;
  double rope_bytes = 4;
  // The loss's buffers per logit at their peak (the start of its backward): fp32 logits
  // and their gradient as the stack's cross entropy holds them.
  double loss_bytes_per_logit = 4;
  // HBM bytes the loss's kernels move per logit, forward and backward together (half priced
  // in each pass): 12 = fp32 logits written, read for the softmax, gradient written.
  double loss_traffic_bytes_per_logit = 12;
  // ZeRO-3 parameter fetch; the three element counts are kModuleSync's (zero3_fetch.h): the
  // prefetch bucket, the live-parameter limit under which it prefetches, and the reuse
  // distance under which a used weight stays gathered.
  Zero3Fetch zero3_fetch = Zero3Fetch::kLayer;
  Zero3Gather zero3_gather = Zero3Gather::kFlat;
  double zero3_prefetch_numel = 0, zero3_max_live_numel = 0, zero3_reuse_distance_numel = 0;
  // HBM bytes per gathered element that the compute stream moves after each ZeRO-3 / FSDP
  // all-gather (FSDP2's copy-out into the parameters: read 2 + write 2), 0 where the
  // parameters view the gathered buffer.
  double zero3_copy_out_bytes = 0;
  // HBM bytes per gradient element that the compute stream reads before each ZeRO-3 / FSDP
  // reduce-scatter, copying the layer's gradients into the reduce-scatter input (FSDP2's
  // copy-in: the 16-bit gradient, 2); the copy writes each element in the plan's gradient
  // type (grad_bytes). 0 where the stack reduces where the gradient lies or copies it on
  // another stream.
  double zero3_copy_in_bytes = 0;
  // Data parallelism (ZeRO 0 to 2): the gradient reduction's collective, whether the stack
  // can overlap it with the backward in buckets (plan.overlap_grad_reduce asks for it; without
  // it the gradients are reduced after the last microbatch), and whether the fp32 master
  // weights are sharded with the optimizer states under ZeRO 1 and 2 or kept whole.
  GradReduce grad_reduce = GradReduce::kReduceScatter;
  bool grad_reduce_overlap = true;
  bool master_weights_sharded = true;
  // Where the fp32 master copy of the weights lives: in the optimizer state beside 16-bit
  // model weights (Megatron-Core, DeepSpeed), or as the model's own fp32 parameters with
  // only Adam's moments in the optimizer (PyTorch FSDP); what a checkpoint's model and
  // optimizer parts hold (reliability.h state_bytes_per_param).
  bool master_in_optimizer = true;
  // Pipeline parallelism: how a 1F1B stage exchanges activations and gradients with a
  // neighbour (PipelineP2p above).
  PipelineP2p pipeline_p2p = PipelineP2p::kBatched;
  // The optimizer step's gradient pass: HBM bytes per parameter of the rank's optimizer
  // shard that the gradient norm and clipping move every step, and those the fp16 loss
  // scale's unscale and overflow check add (plan.precision fp16).
  double grad_clip_bytes = 4;
  double fp16_unscale_bytes = 8;
  // What the stack runs at all (the loader refuses the rest, quoting the parameter's source):
  // the highest ZeRO stage; the highest beside pipeline parallelism (-1: no pipeline
  // parallelism); whether it splits sequences over ranks (context parallelism).
  int max_zero = 3;
  int pipeline_max_zero = 3;
  bool context_parallel = true;
  // The fused attention kernel family the stack runs with FlashAttention on ("fa2", "cudnn",
  // "fa3"): its published figures (models/data/attention.json) price the core attention.
  std::string attention_kernel = "fa2";
  // FP8 (plan.precision fp8): whether the stack keeps each layer weight's FP8 copy and its
  // transpose from the first microbatch of a step to the last (Transformer Engine under
  // Megatron-Core's is_first_microbatch), or casts the weight again in every forward
  // (torchao's Float8Linear under torchtitan), so that no copy outlives its layer's pass.
  bool fp8_weight_cache = true;
  std::map<std::string, std::string> sources;       // parameter -> where it comes from
  std::map<std::string, std::string> verification;  // parameter -> V / S / D / U
};

// The profile of `stack` from the built-in presets (models/data/stacks.json).
const StackProfile& stack_profile(Stack stack);

// The plan's data-parallel gradient reduction (ZeRO 0 to 2) as its stack runs it: an
// all-reduce with ZeRO 0 or a stack that all-reduces, else a reduce-scatter; overlapped with
// the backward when the plan asks for it and the stack can.
CollKind dp_grad_collective(const Plan& plan);
bool dp_grad_overlapped(const Plan& plan);

// Transfers, one after the other, that one exchange between neighbouring pipeline stages
// takes in the plan's non-interleaved 1F1B steady state: 1 batched (the activation and the
// gradient cross at once), 2 separate (StackProfile::pipeline_p2p); 1 for other schedules.
int pipeline_exchange_transfers(const Plan& plan);

// Kernels of one layer (one microbatch, one rank) and their host dispatch time.
struct LayerKernels {
  double fwd = 0;          // forward kernels
  double bwd = 0;          // backward kernels, including recomputation
  double host_s = 0;       // (fwd + bwd) x host_us_per_kernel, seconds
};
// REQUIRES: a validated model and plan. docs/model-reference.md section 4.3 gives the count.
LayerKernels layer_kernels(const ModelSpec& model, const Plan& plan, bool moe_layer, const StackProfile& stack);

}  // namespace stepcast

// The closed-form step model: memory per rank and step time with its breakdown
// (docs/model-reference.md). This is the planner's fast path: no allocation beyond a
// few small vectors, about a microsecond per call.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "stepcast/models/band.h"
#include "stepcast/models/collectives.h"
#include "stepcast/models/params.h"
#include "stepcast/models/scenario.h"
#include "stepcast/models/specs.h"

namespace stepcast {

// Peak memory of one rank, bytes (docs/cost-model-sources.md section 2).
struct MemoryBreakdown {
  double params = 0;
  double grads = 0;
  double optimizer = 0;
  double activations = 0;
  double buffers = 0;       // CUDA context/workspaces, NCCL, FSDP gather units, offload staging
  double total = 0;
  double capacity = 0;      // hbm_GiB * 2^30
  double usable = 0;        // capacity * (1 - memory_headroom)
  double host = 0;          // offload: bytes this rank keeps in host memory
  double host_usable = 0;   // its share of the node's host memory (host_memory_GiB / gpus_per_node)
  bool fits = false;        // total <= usable and host <= host_usable
  int stage = 0;            // the pipeline stage this is for
  bool operator==(const MemoryBreakdown&) const = default;
};

// Activation bytes of one transformer layer for one microbatch on one rank.
// REQUIRES: a validated layout. `moe_layer` selects the expert FFN terms.
double layer_activation_bytes(const ModelSpec& model, const Plan& plan, std::int64_t seq_len,
                              bool moe_layer);

// Activation bytes of one multi-token prediction module for one microbatch on a last-stage
// rank (docs/model-reference.md §4.6): its layer's (the model's last kind) plus the
// projection's 2h input and the shifted-token embedding h, 16-bit, split by TP with SP.
double mtp_activation_bytes(const ModelSpec& model, const Plan& plan, std::int64_t seq_len);
// The output head's buffers for `tokens` tokens on one rank of the last stage: the final
// hidden state (4 B per element) and the loss's buffers per logit of the rank's V/tp
// vocabulary, as the plan's stack computes it (stack.h loss_bytes_per_logit).
double output_head_buffer_bytes(const ModelSpec& model, const Plan& plan, double tokens);

// Of the first `n` layers of pipeline stage `stage` (model order), how many are MoE layers.
int moe_layers_among_first(const ModelSpec& model, const Plan& plan, int stage, int n);

// Full recomputation by layer (specs.h recompute_num_layers, Megatron-Core's recompute_method
// "block"): whether layer `layer` (model order, 0-based) recomputes in full, i.e. it is among
// the first recompute_num_layers of its model chunk; every layer with recompute "full" and
// recompute_num_layers 0, none without "full".
bool recomputes_in_full(const ModelSpec& model, const Plan& plan, int layer);
// recompute_method "uniform" (Plan::recompute_group): the group of layer `layer` (model order),
// its first layer and its number of layers (G, or fewer for a chunk's last group); {layer, 1}
// for any other plan.
struct RecomputeGroup {
  int first = 0, count = 1;
};
RecomputeGroup recompute_group_of(const ModelSpec& model, const Plan& plan, int layer);
// Of pipeline stage `stage`'s layers, those that recompute in full, dense and MoE.
struct FullRecomputeLayers {
  int dense = 0, moe = 0;
  int total() const { return dense + moe; }
};
FullRecomputeLayers full_recompute_layers(const ModelSpec& model, const Plan& plan, int stage);

// Microbatch-equivalents of activations held at peak by pipeline stage `stage`
// (GPipe m; 1F1B min(p - stage, m); interleaved Megatron warm-up + 1, in chunks / v). With
// plan.moe_a2a_overlap: the warm-up's chunks (one forward more; stage_memory adds the layer
// a merged step holds beyond them).
double inflight_microbatches(const Plan& plan, int stage);

MemoryBreakdown stage_memory(const ModelSpec& model, const ClusterSpec& cluster, const Plan& plan,
                             const Workload& workload, int stage);
// Every stage's memory (stage_memory of each, in stage order) as estimate() computes it:
// the model's counts and the layers' activations once, and the part of the memory a stage's
// layers set once for the middle stages alike (same_middle_stage).
std::vector<MemoryBreakdown> stage_memories(const ModelSpec& model, const ClusterSpec& cluster, const Plan& plan,
                                            const Workload& workload);
// stage_memories of one plan as its recompute_num_layers varies (the planner's recomputation
// fitting asks for many counts of one layout): the model's counts, the layers' activations,
// each stage's parameters and which middle stages are alike, none of which depends on the
// count, computed once. at(n) equals stage_memories of the plan with recompute_num_layers n,
// bit for bit. Holds references to the model, cluster and workload: they must outlive it.
class StageMemoriesByCount {
 public:
  StageMemoriesByCount(const ModelSpec& model, const ClusterSpec& cluster, const Plan& plan, const Workload& workload);
  ~StageMemoriesByCount();
  StageMemoriesByCount(const StageMemoriesByCount&) = delete;
  StageMemoriesByCount& operator=(const StageMemoriesByCount&) = delete;

  std::vector<MemoryBreakdown> at(int recompute_num_layers) const;
  // Whether every stage fits (every at(n)[s].fits), and the worst stage's total
  // (the largest at(n)[s].total), without the vector.
  bool fits(int recompute_num_layers) const;
  double worst_total(int recompute_num_layers) const;

 private:
  struct Impl;
  std::unique_ptr<const Impl> impl_;
};

// Step-time parts of the slowest rank; they add up to step_time_s.
struct StepBreakdown {
  double compute = 0;
  double exposed_comm = 0;
  double bubble = 0;
  double wait = 0;
  double optimizer = 0;
  double input = 0;
  double host = 0;          // GPU idle waiting for the host: kernel dispatch (section 4.3) and
                            // offload transfers not hidden by the layers' compute
  // Of the parts above (an attribution, not added to the step): the MoE blocks' seconds --
  // the MoE layers' router, permutation and experts forward and backward, their exposed
  // all-to-alls and host stall (the band's MoE uncertainty, band.h StepParts::moe).
  double moe = 0;
  // Of the optimizer: the gradient norm, clipping and fp16 unscale before the update
  // (layer_cost.h OptimizerStep::clip_s).
  double optimizer_clip = 0;
  // Of the exposed data-parallel communication: the gradient norm's all-reduce over every
  // rank (layer_cost.h grad_norm_sync_s), a global synchronisation before the update.
  double grad_norm_sync = 0;
  // Of the exposed TP communication: sequence parallelism's replicated parameters' gradients
  // all-reduced over TP after the data-parallel reduction (layer_cost.h sp_grad_allreduce_bytes),
  // as far as the slowest tail exposes it.
  double sp_grad_sync = 0;
};
struct ExposedComm {
  double tp = 0, dp = 0, pp = 0, cp = 0, ep = 0;
};
// Compute by kind of work (seconds; they add up to the compute they split): the layers'
// GEMMs (forward, data and weight gradients), the attention core (forward and backward
// kernels, attention.h), memory-bound work (norms, activations, RoPE, residuals, dropout,
// MoE routing, FP8 quantization), recomputed forward work, the output head (logits and
// cross entropy, the multi-token prediction projections), and interference: compute slowed
// by the data-parallel collectives that overlap it (compute.h overlap_interference).
struct ComputeParts {
  double gemm = 0, attention = 0, memory_bound = 0, recompute = 0, output = 0, interference = 0;
  double total() const { return gemm + attention + memory_bound + recompute + output + interference; }
  bool operator==(const ComputeParts&) const = default;
};

// Per-microbatch times of one pipeline stage (seconds), the closed form's building block.
struct StageTimes {
  double forward = 0;        // compute of one microbatch forward
  double backward = 0;       // compute of one microbatch backward (incl. recomputation)
  double tp = 0, cp = 0, ep = 0, pp = 0, fsdp = 0;  // exposed communication per microbatch
  double pp_fill = 0;  // with p2p overlap: one chunk-boundary transfer (fill and drain latency)
  // ZeRO-3 with plan.fsdp_no_sync: what the last microbatch's reduce-scatters add once per
  // step (the others do none): exposed seconds and the compute they slow (interference).
  double fsdp_last = 0, fsdp_last_interference = 0;
  double host = 0;           // launch-bound stall of the stage's layers per microbatch (section 4.3)
  double offload = 0;        // exposed activation and weight offload transfers per microbatch
  double moe = 0;            // of the above, the MoE blocks per microbatch (StepBreakdown::moe)
  // ZeRO-3 fetched per module (zero3_fetch.h): the coordinator's device synchronisations and
  // the weights gathered per microbatch; the host's issue of each gather (kSyncedList).
  int zero3_syncs = 0, zero3_gathers = 0, zero3_issue_launches = 0;
  double zero3_issue_s = 0;
  ComputeParts parts;        // forward + backward split by kind of work
  double per_microbatch() const { return forward + backward + tp + cp + ep + pp + fsdp + host + offload; }
  bool operator==(const StageTimes&) const = default;
};
struct LayerCost;
struct StackProfile;
struct LayerComm;
// Host dispatch (docs/model-reference.md section 4.3): the host runs ahead of the GPU unless
// dispatching a layer's kernels (stack profile: kernels x host_us_per_kernel) takes longer
// than the GPU runs them (compute and the layer's exposed communication); the GPU then
// waits the difference, per layer and microbatch. Split between the forward and the
// backward (recomputation included) by their kernel counts: the event engine places the
// two parts after each pass of the layer (lower.cc), the closed form adds their sum.
struct HostStall {
  double fwd_s = 0, bwd_s = 0;
  double total_s() const { return fwd_s + bwd_s; }
};
// An MoE layer whose stack synchronises host and device in the forward (stack.h
// moe_host_sync) sets each pass's dispatch against that pass's GPU time, and adds one launch
// (host_us_per_kernel) after each synchronisation: the GPU waits for it.
HostStall host_stall(const ModelSpec& model, const Plan& plan, const LayerCost& lc, const LayerComm& cm, bool moe_layer);
// With plan.moe_a2a_overlap: the share of stage `stage`'s chunk passes that run in merged
// steps (the steady state's, (m v - warm-up) / m v); 0 without.
double merged_share(const Plan& plan, int stage);
// The host-device synchronisations of one MoE layer's forward under the stack (0 without MoE).
int moe_host_syncs(const ModelSpec& model, const Plan& plan, const StackProfile& stack);

StageTimes stage_times(const ModelSpec& model, const ClusterSpec& cluster, const Plan& plan,
                       const Workload& workload, int stage);
// Whether pipeline stages `s` and `r`, neither the first nor the last, take the same
// StageTimes by construction: chunk by chunk in model order they hold as many layers and as
// many dense layers and, with plan.moe_a2a_overlap, they have the same warm-up. That is all
// stage_times reads of a middle stage; the first and the last stage add the embedding, the
// output head and their pipeline ends. estimate() prices such stages once.
bool same_middle_stage(const ModelSpec& model, const Plan& plan, int s, int r);

struct Estimate {
  ParamCounts params;
  std::int64_t world = 0;
  std::int64_t microbatches = 0;        // per pipeline per step (m)
  std::int64_t tokens_per_step = 0;
  double model_flops_per_step = 0;      // MFU convention (compute.h kMfuConvention)
  double hardware_flops_per_step = 0;   // model FLOPs + requested recomputation (HFU, same convention)
  double executed_flops_per_step = 0;   // what the kernels run: causal attention, FlashAttention backward
  double step_time_s = 0;
  double tokens_per_s = 0;
  Band step_time_band;                  // p10-p90 (band.h: the error model)
  Band tokens_per_s_band;
  double mfu = 0;
  double hfu = 0;
  StepBreakdown breakdown;
  ComputeParts compute;                 // breakdown.compute split by kind of work
  ExposedComm exposed;
  MemoryBreakdown memory;               // the worst stage
  std::vector<StageState> stages;       // per pipeline stage (the planner's checkpoint cost)
  int slowest_stage = 0;
  double pace = 1.0;                    // job_pace(cluster): every GPU compute time x pace (compute.h)
  std::vector<std::string> notes;       // layout remarks (TP across nodes, ...)
};

// One stage's StageState from its rank's parameters and static memory.
StageState stage_state(const Plan& plan, const RankParams& rank, const MemoryBreakdown& memory);
// Every stage's StageState without an estimate (what estimate() leaves in Estimate::stages).
// REQUIRES: a validated layout.
std::vector<StageState> stage_states(const ModelSpec& model, const ClusterSpec& cluster, const Plan& plan,
                                     const Workload& workload);

// REQUIRES: a validated layout (layout_errors() empty).
// The band's parts of a step (band.h): the interference, which compute includes, apart
// (its constant has its own uncertainty).
StepParts step_parts(const StepBreakdown& breakdown, const ComputeParts& compute);

// Whether estimate() writes Estimate::notes, the layout's remarks for a report: formatting
// them is about 5 % of a planner search, which reads none of them.
enum class EstimateNotes { kWrite, kSkip };

// `times`, a memo of `cluster`'s collectives, prices them when given: a planner search keeps
// one across its layouts. A memo of another cluster object is not used; the outputs are the
// same with it and without.
Estimate estimate(const ModelSpec& model, const ClusterSpec& cluster, const Plan& plan, const Workload& workload,
                  EstimateNotes notes = EstimateNotes::kWrite, CollectiveTimes* times = nullptr);
inline Estimate estimate(const Scenario& s) {
  return estimate(s.model, s.cluster, s.plan, s.workload);
}

// What waiting for the job's slowest GPU costs (docs/model-reference.md section 4.5):
// `step_time_s` (the estimate on `cluster`) less the step on GPUs that all run at one
// speed (gpu_speed_sigma 0). 0 when the cluster has no spread. For reports, not the
// planner's search: it runs the closed form once more.
double slowest_gpu_cost_s(const ModelSpec& model, const ClusterSpec& cluster, const Plan& plan,
                          const Workload& workload, double step_time_s);

}  // namespace stepcast

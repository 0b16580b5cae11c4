// The shared vocabulary: what is trained (ModelSpec), on what (GpuSpec, ClusterSpec),
// how (Plan) and how much (Workload). Plain values, filled by the loaders in
// scenario.h / presets.h, which validate every field; code receiving a spec may assume
// the invariants the loader checks (documented per field below).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace stepcast {

struct MoeSpec {
  int num_experts = 0;                 // routed experts E >= 1
  int top_k = 1;                       // experts per token, 1 <= k <= E
  int num_shared_experts = 0;          // S_e
  std::int64_t expert_ffn_hidden_size = 0;         // F_e
  std::int64_t shared_expert_ffn_hidden_size = 0;  // F_s (0 -> F_e)
  int num_dense_layers = 0;            // the first layers keep a dense FFN of ffn_hidden_size
  // Token dropping (Megatron-Core moe_expert_capacity_factor; 0 = dropless): each expert
  // takes at most capacity_factor x the mean routed rows from each rank, the rest are
  // dropped; with pad_to_capacity (moe_pad_expert_input_to_capacity) every expert's input is
  // padded to exactly that capacity. moe_routed_load (layer_cost.h) turns both into the
  // busiest rank's rows (docs/model-reference.md "Token dropping and padding").
  double capacity_factor = 0;
  bool pad_to_capacity = false;
  bool router_bias = false;            // per-expert score bias (DeepSeek-V3)
  // Group-limited routing (DeepSeek-V3's n_group / topk_group; Megatron-Core
  // moe_router_num_groups / moe_router_group_topk): the experts form `expert_groups` equal
  // groups of consecutive experts, and each token chooses its top_k among the experts of
  // `limited_groups` of them. 0: no groups. Only the traffic of DeepEP's dispatcher depends
  // on it (collectives.h ep_routing).
  int expert_groups = 0;
  int limited_groups = 0;
  // The busiest rank's routed rows over the mean, per MoE layer and microbatch (>= 1; 1 =
  // tokens spread evenly, as the published recipes' benchmark runs force them). A stated
  // figure, not a model of the router: it sets the pace of each expert-parallel group
  // (docs/model-reference.md "MoE load imbalance").
  double load_imbalance = 1.0;
};

// Multi-head latent attention (DeepSeek-V2/V3), docs/cost-model-sources.md section 1.1.
struct MlaSpec {
  std::int64_t q_lora_rank = 0;  // 0: the q path is one h x a(d_n+d_r) matrix
  std::int64_t kv_lora_rank = 0;
  std::int64_t qk_nope_head_dim = 0;
  std::int64_t qk_rope_head_dim = 0;
  std::int64_t v_head_dim = 0;
};

enum class NormKind { kRmsNorm, kLayerNorm };
enum class PositionEmbedding { kRope, kLearned };

struct ModelSpec {
  std::string name;                    // preset key or the scenario's "name"
  std::string family;                  // "gpt", "llama", ... (informational)
  int num_layers = 0;                  // L (dense + MoE)
  std::int64_t hidden_size = 0;        // h
  int num_attention_heads = 0;         // a
  int num_kv_heads = 0;                // g, divides a
  std::int64_t head_dim = 0;           // d_h (default h / a)
  std::int64_t ffn_hidden_size = 0;    // F (dense FFN inner size)
  std::string ffn_activation = "swiglu";  // "swiglu" | "geglu" | "gelu" | "relu"
  int ffn_matrices = 3;                // G: 3 gated, 2 plain
  NormKind norm = NormKind::kRmsNorm;
  bool tied_embeddings = false;
  bool linear_bias = false;
  // A per-head RMSNorm on q and on k before RoPE (Qwen3's q_norm / k_norm, Megatron-Core's
  // qk_layernorm): 2 d_h weights per layer, its kernels and saved inputs (docs/model-reference.md).
  bool qk_norm = false;
  bool dropout = false;                // GPT-style dropout (activation memory, section 2.2)
  std::int64_t vocab_size = 0;         // V (use the padded size)
  PositionEmbedding position_embedding = PositionEmbedding::kRope;
  std::int64_t max_seq_len = 0;
  std::int64_t train_seq_len = 0;
  std::optional<MoeSpec> moe;
  std::optional<MlaSpec> mla;
  // Multi-token prediction modules (DeepSeek-V3: 1), each a projection of the concatenated
  // normalised hidden state and next-token embedding (2h -> h) feeding one more transformer
  // layer (an MoE layer when the model has experts) and the shared output head, on the last
  // pipeline stage (docs/model-reference.md "Multi-token prediction"). Not in params total.
  int mtp_layers = 0;
  // Sliding-window attention, as Megatron-Core's window_size / window_attn_skip_freq set it
  // (GPT-OSS, Gemma, Mistral): each query of a windowed layer attends the last
  // `sliding_window` keys, itself included; 0 = no window. window_attn_skip_freq N >= 2: the
  // layers whose 1-based number is a multiple of N keep full attention (GPT-OSS: 2, every
  // other layer); 0: every layer is windowed. windowed_layers() counts them.
  std::int64_t sliding_window = 0;
  int window_attn_skip_freq = 0;
  std::string source;                  // where the figures come from
  std::optional<std::int64_t> reference_params_total;  // params_total recorded in the preset
};

struct GpuSpec {
  std::string name;                    // preset key
  std::string display_name;
  std::string architecture;            // "ampere", "hopper", "blackwell", ...; "" = unknown
  double bf16_dense_tflops = 0;        // 1e12 FLOP/s, dense
  double fp16_dense_tflops = 0;
  double fp8_dense_tflops = 0;         // 0 = no FP8 tensor cores
  double hbm_GiB = 0;
  double hbm_bandwidth_GBps = 0;
  int sms = 0;                         // streaming multiprocessors (wave quantization); 0 = unknown
  double mamf_bf16_tflops = 0;         // measured maximum achievable matmul, 0 = unknown
  double mamf_fp8_tflops = 0;
  // FP8 GEMMs with a short inner dimension K run at K / (K + gemm_fp8_k_half) of the large-K
  // ceiling (a fixed cost per output tile; compute.h); 0 = no such term.
  double gemm_fp8_k_half = 0;
  // The same short-K factor for 16-bit GEMMs (bf16, fp16): K / (K + gemm_bf16_k_half); 0 = none.
  double gemm_bf16_k_half = 0;
  // The best bf16 GEMM rate of a short benchmark sweep (the MAMF convention, before a power
  // limit lowers the clock), where the ceiling above is another kind of figure (a sustained
  // rate, or a best row taken to large K); 0 = mamf_bf16_tflops is that figure. Compared
  // between a GPU and an attention table's reference GPU, both measured the same way, to
  // scale the table to a lower power limit (attention_power_cap_factor).
  double gemm_bf16_sweep_tflops = 0;
  double scaleup_bandwidth_per_direction_GBps = 0;
  int scaleup_domain_gpus = 0;
  double nic_Gbps_per_gpu = 0;
  double tdp_W = 0;  // the power limit its figures hold at; 0 = unknown
  // Achieved-efficiency model (docs/cost-model-sources.md section 6); see compute.h.
  double gemm_efficiency = 0;          // 0 = derive from mamf/peak
  // FlashAttention-class kernels, fwd and bwd, when stated (scenario, preset, calibration);
  // 0 = the published table of the GPU's architecture for the stack's kernel family, else
  // 0.6 (attention.h).
  double attention_efficiency = 0;
  double hbm_efficiency = 0.8;         // memory-bound kernels
  // How much slower compute runs while a collective overlaps it (NCCL's kernels hold SMs
  // and HBM bandwidth): 0.189 = +18.9 %, the mean over A100, H100, MI250 and MI210 of Lee
  // et al. 2025 (arXiv 2507.03114), the default; 0 turns it off. Priced for every
  // overlapped collective: data-parallel buckets and gathers, ZeRO-3 / FSDP, TP
  // (tp_comm_overlap), the CP ring, the all-to-all beside the shared experts and the
  // pipeline receives posted ahead (overlap_p2p_comm) (docs/model-reference.md 4.5a).
  double overlap_slowdown = 0.189;
  // GEMM tile used for tile quantization (compute.h); CPUs: small register tiles.
  int gemm_tile_m = 128, gemm_tile_n = 256;
  // Calibrated (calibration.h): seconds per operand byte added to every GEMM (0 = none).
  double gemm_s_per_byte = 0;
  std::string source;
};

// A calibrated collective (calibration.h): time = alpha + beta x bus bytes, where bus
// bytes = nccl-tests size x bus_factor(kind, n); replaces the alpha-beta prior of
// collective_cost() for groups of that scope.
enum class CollScope : std::uint8_t { kIntraNode, kInterNode };
struct CollectiveFit {
  int kind = 0;                        // CollKind (collectives.h)
  CollScope scope = CollScope::kIntraNode;
  double alpha_s = 0;
  double beta_s_per_byte = 0;
};

enum class Topology { kSingleSwitch, kFatTree, kRailOptimized };

// How ring and tree collectives (all-reduce, all-gather, reduce-scatter) are priced
// (docs/model-reference.md section 5.2): kNccl as NCCL's tuner prices them, per protocol (LL,
// LL128, Simple) with its own latencies, the fastest protocol and algorithm taken; kAlphaBeta
// with the cluster's per-hop latencies (intra_latency_us, inter_latency_us) and no protocols,
// for fabrics that are not NCCL's (the cpu_mpi executor's MPI ranks).
enum class CollectiveModel : std::uint8_t { kNccl, kAlphaBeta };

// The hosts' CPU vendor, which NCCL's tuner reads (src/graph/tuning.cc getNetOverhead and
// llMaxBws: an AMD host's network proxy costs 2 us per ring step where an Intel one costs 1,
// and LL's bandwidth caps across nodes are lower).
enum class HostCpu : std::uint8_t { kIntel, kAmd };

struct ClusterSpec {
  std::string name;                    // preset key or "custom"
  GpuSpec gpu;
  int nodes = 1;
  int gpus_per_node = 8;
  double intra_bandwidth_GBps = 0;     // per GPU per direction (scale-up)
  double intra_latency_us = 2.5;
  double intra_efficiency = 0.82;      // achieved/nominal busbw on the scale-up fabric
  double nic_Gbps = 0;                 // per NIC
  int nics_per_node = 0;
  double inter_latency_us = 5.0;
  double inter_efficiency = 0.9;       // achieved/nominal busbw on the scale-out fabric
  CollectiveModel collectives = CollectiveModel::kNccl;
  // Multiplies NCCL's tuner latencies (kNccl only); 1 = NCCL's own. The prediction bands
  // move it with the alpha latencies (docs/model-reference.md, Prediction bands).
  double nccl_latency_scale = 1.0;
  Topology topology = Topology::kFatTree;
  double oversubscription = 1.0;       // leaf uplink oversubscription (>= 1)
  int nodes_per_leaf = 16;
  double storage_write_GBps = 50;
  double storage_read_GBps = 100;
  // Fixed cost of one save besides its bytes, s: creating the generation's directory and
  // files, the renames and directory fsyncs of the commit, the manifest, removing the oldest
  // generation. 0 = not known [U]; `calibrate` measures it (docs/checkpoints.md).
  double storage_commit_s = 0;
  // Storage attached to each node (its own disk or NVMe) rather than reached over the
  // NICs: the node's NICs do not bound a checkpoint's write or read.
  bool storage_local = false;
  double host_memory_GiB = 2048;
  // The host side of offload (docs/model-reference.md "Offload"): each GPU's link to host
  // memory, GB/s per direction (PCIe Gen5 x16: 63; Gen4 x16: 31.5; GH200 NVLink-C2C: 450);
  // the node's host memory bandwidth, GB/s (CPU sockets x channels x DIMM rate), which the
  // node's GPUs share for host optimizer steps; and the fraction of both that transfers and
  // streaming kernels achieve [U].
  double host_link_GBps = 63;
  double host_memory_bandwidth_GBps = 614.4;
  double host_efficiency = 0.8;
  HostCpu host_cpu = HostCpu::kIntel;  // cluster "host": {"cpu": "intel" | "amd"}
  // GPU-to-GPU speed spread of a healthy cluster (relative 1-sigma of a GPU's sustained
  // speed, same SKU): a synchronous job runs at the pace of its slowest GPU (compute.h
  // job_pace). 0.0148 derives from Sinha et al., SC'22 (arXiv 2208.11035): 8 % average
  // variation across a cluster's GPUs, outliers excluded, read as the Tukey whisker range
  // of a normal spread, 2 x 2.698 sigma = 5.40 sigma [D]; docs/model-reference.md section 4.5.
  double gpu_speed_sigma = 0.0148;
  std::vector<CollectiveFit> collective_fits;  // from a calibration; empty = priors
  std::string source;

  int world() const { return nodes * gpus_per_node; }
  // Scale-out bandwidth available to one GPU, bytes/s (NICs shared evenly by the node's GPUs).
  double nic_bytes_per_s_per_gpu() const {
    return nic_Gbps * 1e9 / 8.0 * nics_per_node / gpus_per_node;
  }
};

enum class Schedule { kGpipe, kOneFOneB, kInterleaved };
// kSelectiveOp: torchtitan's op-level selective activation checkpointing (its default
// selective_ac_option "op"; docs/model-reference.md "Op-level selective recomputation").
enum class Recompute { kNone, kSelective, kFull, kSelectiveOp };
enum class RecomputeMethod { kBlock, kUniform };
// The modules selective recomputation re-runs (Megatron-Core recompute_modules, read with
// recompute_granularity "selective"; docs/model-reference.md "Module recomputation"). A bit
// each in Plan::recompute_modules.
enum class RecomputeModule { kCoreAttn, kLayernorm, kMlp, kMoeAct, kMoe, kSharedExperts, kMlaUpProj };
constexpr std::uint32_t module_bit(RecomputeModule m) { return 1u << static_cast<unsigned>(m); }
// Megatron-Core's default recompute_modules: the core attention alone.
constexpr std::uint32_t kDefaultRecomputeModules = module_bit(RecomputeModule::kCoreAttn);
enum class Precision { kBf16, kFp16, kFp8 };
// How an fp8 plan scales its FP8 operands (Transformer Engine's recipes; docs/model-reference.md
// §4.4): per tensor from the tensor's own amax ("tensorwise", Float8CurrentScaling: an amax
// pass, then cast + transpose), per tensor from the amax history ("delayed",
// DelayedScaling: the amax recorded inside the cast), per 1 x 128 / 128 x 128 block with fp32
// scales ("blockwise", Float8BlockScaling, Hopper) or per 32 elements with E8M0 scales
// ("mxfp8", MXFP8BlockScaling, Blackwell).
enum class Fp8Recipe : std::uint8_t { kTensorwise, kDelayed, kBlockwise, kMxfp8 };
enum class Optimizer { kAdam, kSgd };
// The software stack that runs the plan (docs/model-reference.md section 4.3): its
// implementation parameters are the profile of models/data/stacks.json (stack.h).
enum class Stack {
  kMegatronCore,
  kFsdp2Eager,
  kFsdp2Compile,
  kDeepspeedZero,
  kDeepspeedZero2021,
  kMegatronDeepspeed,
  kLlmFoundry,
  kFsdp2CompileLoss
};
enum class MoeDispatcher : std::uint8_t { kAllToAll, kAllGather, kDeepEp };

struct Plan {
  int tp = 1, pp = 1, dp = 1, cp = 1, ep = 1;
  // Expert tensor parallelism (Megatron-Core expert_tensor_parallel_size; 0 = tp, its
  // default there). Parallel folding (docs/model-reference.md "Parallel folding"): the ranks
  // of a pipeline stage, tp x cp x dp, are grouped twice -- attention by tp, cp, dp; the
  // expert layers by etp (innermost), ep, edp -- so ep may exceed dp. REQUIRES (loader):
  // etp is 1 or tp; etp x ep divides tp x cp x dp; etp != tp needs pp outermost and, with
  // tp > 1, sequence parallelism.
  int etp = 0;
  bool sequence_parallel = false;
  // Tensor-parallel communication overlap (Megatron-Core / Transformer Engine
  // tp_comm_overlap): with sequence parallelism the TP all-gathers and reduce-scatters of
  // dense layers are split into tp chunks and pipelined with their GEMMs
  // (docs/model-reference.md). REQUIRES (loader): sequence_parallel and tp > 1.
  bool tp_comm_overlap = false;
  Schedule schedule = Schedule::kOneFOneB;
  int virtual_stages = 1;
  // Decoder layers of each model chunk, pp x virtual_stages entries in chunk order (chunk k
  // runs on stage k % pp): Megatron-Core's pipeline_model_parallel_layout ("Et|(tt|)*30mL")
  // or its decoder_first/last_pipeline_num_layers written out. Empty: stepcast's even split
  // (chunk_layers in params.h). The embedding stays on chunk 0, the output layer and the
  // multi-token-prediction modules on the last chunk; either may hold no decoder layer
  // (docs/model-reference.md "Uneven pipeline split"). REQUIRES (loader): pp x
  // virtual_stages entries summing to num_layers, every middle chunk at least one layer.
  std::vector<int> pipeline_layout;
  int pipeline_layout_mtp = 0;         // "m" in a layout string: the MTP modules it places (loader check)
  // With the interleaved schedule: Megatron-Core's microbatch_group_size_per_vp_stage, the
  // microbatches each model chunk runs in a row before the next chunk's (its schedule table,
  // schedules.py get_schedule_table); 0 = pp, Megatron-Core's default. REQUIRES (loader):
  // pp <= group <= microbatches, and the last group (microbatches % group) 0 or >= pp.
  int microbatch_group = 0;
  int microbatch = 1;                  // sequences per microbatch per rank
  std::int64_t global_batch = 1;       // sequences per optimizer step
  int zero = 0;                        // 0 DDP, 1, 2, 3 (FSDP full shard)
  Recompute recompute = Recompute::kNone;
  // With recompute "selective": the modules re-run in the backward (module_bit set; Megatron-
  // Core's default, the core attention, when the scenario names none). Ignored otherwise.
  std::uint32_t recompute_modules = kDefaultRecomputeModules;
  // With recompute "full" and recompute_method "block" (the default): Megatron-Core's
  // recompute_num_layers N: the first N layers of each model chunk (each virtual pipeline
  // stage, or the stage's layers without interleaving) recompute in full, the others keep
  // their activations (docs/model-reference.md "Partial full recomputation"). 0: every
  // layer (recompute_method "uniform" with 1 layer per group). With recompute_method
  // "uniform": the layers per recomputed group (recompute_group()). REQUIRES (loader):
  // recompute "full", no offload, not DeepSpeed's per-module ZeRO-3 fetch.
  int recompute_num_layers = 0;
  // Megatron-Core's recompute_method with recompute "full": "block" (recompute_num_layers
  // per chunk recompute, one layer at a time) or "uniform" (every layer recomputes, in groups
  // of recompute_num_layers consecutive layers of a chunk: a group keeps only its first
  // layer's input and re-runs its whole forward before its backward; docs/model-reference.md
  // "Grouped full recomputation"). REQUIRES (loader): uniform with recompute "full", zero <= 2.
  RecomputeMethod recompute_method = RecomputeMethod::kBlock;
  Precision precision = Precision::kBf16;
  Fp8Recipe fp8_recipe = Fp8Recipe::kTensorwise;  // with precision fp8 (loader: else the default)
  bool replicate_kv_heads = false;    // tp > num_kv_heads: each KV head copied on tp/g ranks
  bool flash_attention = true;         // attention without the s^2 score matrix in memory
  int grad_bytes = 4;                  // gradient accumulation / reduction dtype (fp32 default)
  Optimizer optimizer = Optimizer::kAdam;
  double ddp_bucket_MiB = 25;
  bool overlap_grad_reduce = true;
  bool overlap_param_gather = false;
  // ZeRO-3 / FSDP with gradient accumulation: reduce-scatter the gradients in the last
  // microbatch only (PyTorch FSDP1 no_sync(), FSDP2 set_requires_gradient_sync(False) on
  // the others), holding the stage's unsharded gradients meanwhile; off, every microbatch's
  // backward reduce-scatters its layers' gradients (FSDP2's and DeepSpeed ZeRO-3's default).
  // REQUIRES (loader): zero == 3.
  bool fsdp_no_sync = false;
  // ZeRO-3 / FSDP: free each layer's gathered parameters after its forward and gather them
  // again for its backward (FSDP2 reshard_after_forward=True, the default; DeepSpeed ZeRO-3
  // likewise). false: keep the stage's gathered parameters from the forward to the backward
  // (FSDP2 reshard_after_forward=False): no backward gathers, the unsharded parameters in
  // memory. REQUIRES (loader): zero == 3 when false.
  bool reshard_after_forward = true;
  // Pipeline p2p overlap (Megatron-Core overlap_p2p_comm, on by default there; it applies
  // to the interleaved schedule only): the receive for the next schedule step is posted
  // before the current step computes, so its transfer hides behind that compute. Off, or
  // with 1F1B / GPipe, a stage receives only when it reaches the step (blocking exchange).
  bool overlap_p2p_comm = true;
  // MoE shared-expert overlap (Megatron-Core moe_shared_expert_overlap, off by default there):
  // the shared experts compute on their own stream beside each pass's first all-to-all.
  bool moe_shared_expert_overlap = false;
  // Expert-parallel all-to-all overlap (Megatron-Core overlap_moe_expert_parallel_comm,
  // Megatron-Bridge moe_a2a_overlap; off by default there): in the steady state the forward
  // of one microbatch chunk and the backward of another run merged, layer by layer, each
  // all-to-all of one beside a compute block of the other (combined 1F1B,
  // docs/model-reference.md "All-to-all overlap"); one more warm-up forward. REQUIRES
  // (loader, moe_a2a_overlap_problem): an MoE model, ep > 1, the interleaved schedule when
  // pp > 1, no full recomputation and no "moe" module recomputation, no shared-expert
  // overlap, the megatron-core stack; not expressed with zero 3, cp > 1 or offload.
  bool moe_a2a_overlap = false;
  // Megatron-Core's token dispatcher for the MoE layers (moe_token_dispatcher_type):
  // kAllToAll ("alltoall") sends each rank's routed copies to the experts' ranks with NCCL's
  // all-to-all; kAllGather ("allgather") gathers every token of the expert-TP x EP group to
  // each of its ranks and reduce-scatters the outputs back (docs/model-reference.md §5.3);
  // kDeepEp ("deepep": moe_token_dispatcher_type "flex" with moe_flex_dispatcher_backend
  // "deepep") sends each token once per destination rank with DeepEP's normal kernels, once
  // per destination node over the network (§5.11). REQUIRES (loader): allgather keeps neither
  // all-to-all overlap nor shared-expert overlap (Megatron-Core needs alltoall or flex for
  // both) and, with etp x ep > 1, tp innermost and pp outermost in the placement (its group is
  // a block of consecutive ranks); deepep needs etp 1.
  MoeDispatcher moe_dispatcher = MoeDispatcher::kAllToAll;
  bool moe_allgather_dispatcher() const { return moe_dispatcher == MoeDispatcher::kAllGather; }
  bool moe_deepep_dispatcher() const { return moe_dispatcher == MoeDispatcher::kDeepEp; }
  double memory_headroom = 0.05;       // fraction of HBM kept free (fragmentation), 0..0.9
  // Rank order, innermost first: dimensions t=0, c=1, d=2, p=3 ("tp-cp-ep-dp-pp").
  std::array<int, 4> placement = {0, 1, 2, 3};
  // The framework (plan.stack, default "megatron-core"): host dispatch cost per kernel and
  // kernel counts per layer come from its profile (stack.h).
  Stack stack = Stack::kMegatronCore;
  // The fused attention kernel family (plan.attention_kernel: "fa2", "cudnn", "fa3"; "" = the
  // stack's, StackProfile::attention_kernel): whose published figures price the core
  // attention with FlashAttention (attention.h).
  std::string attention_kernel;
  // Offload to host memory (docs/model-reference.md "Offload"), fractions 0..1:
  // optimizer: of this rank's optimizer states (fp32 master and moments), updated by the host
  //   (Megatron-Core optimizer_cpu_offload + optimizer_offload_fraction; DeepSpeed
  //   ZeRO-Offload is 1);
  // activations: of each stage's layers whose saved activations wait in host memory between
  //   their forward and backward (Megatron-Core cpu_offloading_num_layers / layers);
  // weights: of the rank's 16-bit layer weights kept in host memory and fetched for each
  //   pass (ZeRO-Infinity parameter offload; Transformer Engine cpu_offloading_weights).
  double offload_optimizer = 0;
  double offload_activations = 0;
  double offload_weights = 0;
  bool offloads() const { return offload_optimizer > 0 || offload_activations > 0 || offload_weights > 0; }

  // Whether selective recomputation re-runs module `m`.
  bool recomputes(RecomputeModule m) const {
    return recompute == Recompute::kSelective && (recompute_modules & module_bit(m)) != 0;
  }
  // Whether only some layers recompute in full (recompute_num_layers); the count per stage
  // is estimate.h full_recompute_layers.
  bool partial_full_recompute() const {
    return recompute == Recompute::kFull && recompute_method == RecomputeMethod::kBlock && recompute_num_layers > 0;
  }
  // The layers per recomputed group of recompute_method "uniform" (a model chunk's last
  // group may be shorter); 1 for every other plan (each layer recomputes, or keeps, alone).
  int recompute_group() const {
    return recompute == Recompute::kFull && recompute_method == RecomputeMethod::kUniform && recompute_num_layers > 1
               ? recompute_num_layers
               : 1;
  }
  // recompute_num_layers where it applies: the first N of "block", the group size G > 1 of
  // "uniform"; 0 when every layer recomputes alone or none recomputes in full.
  int recompute_count() const { return partial_full_recompute() || recompute_group() > 1 ? recompute_num_layers : 0; }
  // This plan without recomputation: what a layer costs and keeps when it does not recompute.
  Plan without_recompute() const {
    Plan q = *this;
    q.recompute = Recompute::kNone;
    q.recompute_num_layers = 0;
    q.recompute_method = RecomputeMethod::kBlock;
    return q;
  }

  int world() const { return tp * pp * dp * cp; }
  // The expert tensor-parallel width and the expert-data-parallel group size
  // edp = tp x cp x dp / (etp x ep): expert gradients are reduced, and with ZeRO sharded,
  // over edp ranks.
  int expert_tp() const { return etp > 0 ? etp : tp; }
  int edp() const { return tp * cp * dp / (expert_tp() * ep); }
  // Gradient-accumulation steps m = global_batch / (microbatch * dp).
  std::int64_t accumulation() const { return global_batch / (std::int64_t{microbatch} * dp); }
  // The interleaved schedule's microbatch group (microbatch_group, pp when unset).
  int vp_group() const { return microbatch_group > 0 ? microbatch_group : pp; }
  // ZeRO-3 with fsdp_no_sync and more than one microbatch: the reduce-scatters wait for the
  // last microbatch (one microbatch: nothing to defer, the default plan).
  bool defers_reduce_scatter() const { return fsdp_no_sync && zero >= 3 && accumulation() > 1; }
};

struct Workload {
  std::int64_t seq_len = 0;            // tokens per sequence
  double train_tokens = 0;             // whole training run, 0 = unknown
  double input_time_s = 0;             // host-side input time per step not hidden by prefetch
};

}  // namespace stepcast

// ZeRO-3 parameter fetch per module, as DeepSpeed's 2021 stage-3 coordinator ran it
// (docs/model-reference.md "ZeRO-3 fetch per module"; stack profile zero3_fetch
// "module_sync", models/data/stacks.json deepspeed-zero-2021).
//
// Each module with partitioned weights fetches them in its pre-forward (pre-backward) hook:
// an all-gather when they are not available, and when any of them was gathered or is in
// flight the coordinator synchronises the device (stream and torch.cuda.synchronize): the
// GPU drains, every gather and reduce-scatter issued so far completes, and the next kernel
// waits for the host to launch it. After the fetch, if nothing is in flight and fewer than
// `max_live` elements are gathered, it prefetches the next not-available weights of the
// recorded module trace until `prefetch` elements. After the module's use its weights are
// released unless their next use is within `reuse` elements of other modules' weights.
//
// The policy (zero3_coordinate) is shared by the closed form (zero3_time) and the event
// engine (lower.cc), which times the same ops independently.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "stepcast/models/layer_cost.h"
#include "stepcast/models/specs.h"

namespace stepcast {

struct StackProfile;

// Bytes of a gathered weight element: the 16-bit weights ZeRO-3 gathers.
inline constexpr double kZero3WeightBytes = 2;

// The roles of zero3_trace's uses (Zero3Use::role): each piece of a layer's forward (F),
// recomputed forward (R) and backward (B), the embedding's, the learned positions' and the
// output head's.
enum Zero3Role : int {
  kZ3EmbF,
  kZ3PosF,
  kZ3QF,
  kZ3PF,
  kZ3F1F,
  kZ3F2F,
  kZ3HeadF,
  kZ3HeadB,
  kZ3QR,
  kZ3PR,
  kZ3F1R,
  kZ3F2R,
  kZ3F2B,
  kZ3F1B,
  kZ3PB,
  kZ3QB,
  kZ3PosB,
  kZ3EmbB,
  kZ3Roles
};
using Zero3RoleSeconds = std::array<double, kZ3Roles>;

// One module hook in trace order: the weight it uses (an index into Zero3Trace::numel),
// the GPU seconds it runs until the next hook, and whether its weight's gradient is
// reduce-scattered after it (the weight's last backward use).
struct Zero3Use {
  int param = 0;
  double compute_s = 0;
  bool reduce = false;
  // Uses of one role have the same compute seconds (zero3_trace: the same piece of a layer's
  // forward, recomputation or backward); -1: a use of its own. Lets zero3_time time each
  // distinct stretch between synchronisations once.
  int role = -1;
};
struct Zero3Trace {
  std::vector<double> numel;  // elements of each partitioned weight
  std::vector<Zero3Use> uses;
  std::size_t forward_uses = 0;  // the first uses, the forward's; the rest are the backward's
};
// What the coordinator does at each hook: the weights it gathers on demand (exposed),
// whether it synchronises the device, and the weights it prefetches after the fetch. One
// flat list of weights for the whole trace (the closed form evaluates it per estimate).
struct Zero3Hooks {
  struct Hook {
    bool sync = false;
    std::uint32_t fetch = 0, prefetch = 0, end = 0;  // [fetch, prefetch) and [prefetch, end) in `params`
  };
  std::vector<Hook> hooks;
  std::vector<int> params;
  // The stretches between synchronisations, each from one synchronisation's hook (or the
  // trace's start) to the next's, which it ends with: `segments` holds their first hooks and
  // the trace's length; `segment_class` the stretch's class, equal for stretches of the same
  // uses' roles, weights' sizes, gathers and reduce-scatters, which time alike (zero3_time
  // times one of each class).
  std::vector<std::uint32_t> segments, segment_class;
  // Per class: how many stretches it has and its first stretch (an index into segment_class).
  std::vector<std::uint32_t> class_count, class_first;
  std::size_t size() const { return hooks.size(); }
  bool sync(std::size_t i) const { return hooks[i].sync; }
  std::span<const int> fetch(std::size_t i) const {
    return {params.data() + hooks[i].fetch, hooks[i].prefetch - hooks[i].fetch};
  }
  std::span<const int> prefetch(std::size_t i) const {
    return {params.data() + hooks[i].prefetch, hooks[i].end - hooks[i].prefetch};
  }
};
struct Zero3Policy {
  double prefetch_numel = 0, max_live_numel = 0, reuse_numel = 0;
};
Zero3Policy zero3_policy(const StackProfile& stack);
// REQUIRES: every use's param indexes `trace.numel`.
Zero3Hooks zero3_coordinate(const Zero3Trace& trace, const Zero3Policy& policy);

// The extra work of one weight's gather and reduce-scatter where the stack gathers as
// DeepSpeed 2021's _allgather_param (StackProfile::zero3_gather kSyncedList): a memset of
// the zeroed buffer (`memset_s`, on the data-parallel stream), a device synchronisation,
// then the host issues the shard's copy-in, the all-gather and one copy-back per rank
// (`issue_s` = (ranks + 2) launches) while the stream runs the gather and the copy-backs
// (`copy_s`: the whole weight read and written); the gradient's reduce-scatter first
// divides it by the world size and copies its per-rank views flat (`reduce_copy_s`: the
// gradient read and written twice). Memory-bound, so linear in the weight's elements.
struct Zero3GatherWork {
  double memset_s_per_elem = 0, copy_s_per_elem = 0, reduce_copy_s_per_elem = 0;
  int issue_launches = 0;  // ranks + 2
  double issue_s = 0;      // issue_launches x the stack's launch time
  double memset_s(double numel) const { return numel * memset_s_per_elem; }
  double copy_s(double numel) const { return numel * copy_s_per_elem; }
  double reduce_copy_s(double numel) const { return numel * reduce_copy_s_per_elem; }
};
// The work above on `gpu` for `ranks` ranks (16-bit weights, `grad_bytes` per gradient
// element) at `host_us` per launch.
Zero3GatherWork zero3_gather_work(const GpuSpec& gpu, double grad_bytes, int ranks, double host_us);

// The trace's wall time with every gather and reduce-scatter on one data-parallel stream,
// as the event engine runs the same ops: from each synchronisation the compute stream runs
// the uses' compute, each prefetched gather slowing it by f x its time (the interference),
// while the stream runs the prefetched gathers (from when they are issued) and each
// reduce-scatter once its use's compute is done; a synchronisation queues its on-demand
// gathers behind the stream's work, waits for both streams, then one launch (`launch_s`).
// With `list` (kSyncedList) every gather, on demand or prefetched, is a drain of the device
// after its memset, then the host's issue (the compute after it waits for the host) and the
// gather followed by its copy-backs on the stream, which end no earlier than the issue; each
// reduce-scatter also runs its copies. With `reduce_blocks` (plan.overlap_grad_reduce false:
// DeepSpeed's overlap_comm off, its reduction stream the compute stream) the compute waits
// for each reduce-scatter.
struct Zero3Timing {
  double total_s = 0;
  double compute_s = 0;       // the uses' compute, without interference
  double interference_s = 0;  // f x the prefetched gathers
  double interference_fwd_s = 0;  // the part of it prefetched in the forward's uses
  double host_s = 0;              // the compute stream waiting for the host: launches and issues
  int syncs = 0;                  // the coordinator's synchronisations
  int drains = 0;                 // kSyncedList: the synchronisations before each gather
  double exposed_s() const { return total_s - compute_s - interference_s; }
};
// REQUIRES: weights of one size have the same gather_s and reduce_s, and uses of one role
// the same compute seconds (one stretch per class is timed for all).
// With `role_s` each use of a role computes `role_s[role]` seconds instead of its compute_s
// (a trace of zero3_trace_shape, whose uses carry none).
Zero3Timing zero3_time(const Zero3Trace& trace, const Zero3Hooks& hooks, const std::vector<double>& gather_s,
                       const std::vector<double>& reduce_s, double f, double launch_s,
                       const Zero3GatherWork* list = nullptr, bool reduce_blocks = false,
                       const Zero3RoleSeconds* role_s = nullptr);

// Whether `plan` runs the per-module fetch: its stack's zero3_fetch is "module_sync", ZeRO-3
// across more than one rank, and a layout the trace below expresses (one pipeline stage, no
// tensor or context parallelism, dense layers with standard attention, no MTP, no offload,
// every gradient reduce-scattered per microbatch, parameters resharded after the forward).
// Other plans price ZeRO-3 per layer.
bool zero3_module_fetch(const ModelSpec& model, const Plan& plan);
// The first condition alone: the plan's stack fetches per module and ZeRO-3 shards across
// more than one rank (a plan the trace does not express is then priced per layer).
bool zero3_module_sync_stack(const Plan& plan);

// The weights of one microbatch's trace: the word embedding (0), the learned positions (1,
// when the model has them), each layer's QKV, output projection, FC1 (the gate and up
// matrices) and FC2, and an untied output head (last). Norms and biases are below DeepSpeed's persistence threshold
// (10^5 elements): they stay gathered and are not in the trace.
// The uses: the embedding, per layer QKV (norm, QKV GEMM, attention core), projection, FC1
// (norm, FC1 GEMM, activation), FC2, the output head (logits and loss); the backward in
// reverse, each layer's recomputed forward first under full recomputation; the embedding's
// backward last. `logits_fwd_s`, `logits_bwd_s`: the output head's compute.
// REQUIRES: zero3_module_fetch(model, plan).
Zero3Trace zero3_trace(const ModelSpec& model, const Plan& plan, const LayerCost& lc, double logits_fwd_s,
                       double logits_bwd_s);
// The trace's weights and uses without their compute (every compute_s 0; the roles say which
// piece each use is), and each role's compute seconds: zero3_trace is the two together.
Zero3Trace zero3_trace_shape(const ModelSpec& model, const Plan& plan);
Zero3RoleSeconds zero3_role_seconds(const Plan& plan, const LayerCost& lc, double logits_fwd_s, double logits_bwd_s);

// The trace's shape and the coordinator's hooks over it for `model` and `plan`, remembered
// per thread for the last few model shapes and policies (the planner prices many layouts of
// one model; the decisions depend only on the weights' sizes, the uses' order and the
// policy). The reference is valid until this thread's next call.
struct Zero3Schedule {
  Zero3Trace trace;  // zero3_trace_shape
  Zero3Hooks hooks;
};
const Zero3Schedule& zero3_schedule_cached(const ModelSpec& model, const Plan& plan, const Zero3Policy& policy);

}  // namespace stepcast

// The Program IR: one training step for every rank, shared by the simulator (sim/) and
// the executor. Ranks of one pipeline stage run the same op list, so a Program stores one
// RoleTemplate per stage; groups are symbolic (GroupKind) and resolved from a rank's
// coordinates (Placement). Built by lower() (lower.h).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "stepcast/models/collectives.h"
#include "stepcast/models/sim_time.h"
#include "stepcast/models/specs.h"

namespace stepcast {

enum class OpKind : std::uint8_t { kCompute, kCollective, kSend, kRecv, kAlloc, kFree };
// kHost: the GPU idle while the host dispatches a launch-bound layer's kernels (estimate.h
// host_stall); no device work. kInterference: the compute stream's delay while a
// collective overlaps it (Op::contends, Program::interference); no device
// work of its own.
// kHostOptimizer: the host's optimizer step under optimizer offload (layer_cost.h
// OptimizerStep), `bytes` of host memory traffic; the executor runs it on the CPU.
enum class ComputeClass : std::uint8_t {
  kGemm,
  kAttention,
  kElementwise,
  kOptimizer,
  kInput,
  kHost,
  kInterference,
  kHostOptimizer
};
// Which parallelism a communication op serves (the report's exposed_comm_s keys).
enum class CommClass : std::uint8_t { kNone, kTp, kDp, kPp, kCp, kEp };
// Symbolic groups. kDp is the data-parallel group including CP ranks (dense gradients,
// ZeRO/FSDP sharding, as Megatron); kEdp the expert-data-parallel group; kEtp the
// expert-tensor-parallel group (the TP group unless the experts are folded, etp != tp);
// kEtpEp the expert-TP x EP group of the all-gather dispatcher (Megatron-Core's
// tp_ep_group): etp x ep consecutive ranks (loader: tp innermost, pp outermost).
// kWorld: every rank, the group of the step's gradient-norm all-reduce (lower.cc
// finish_step; docs/model-reference.md section 6 "The gradient pass before the update"); the only
// group whose members run different stages' templates.
enum class GroupKind : std::uint8_t { kTp, kCp, kEp, kDp, kEdp, kPp, kEtp, kEtpEp, kWorld };
inline constexpr int kNumGroupKinds = 9;
inline constexpr std::array<GroupKind, kNumGroupKinds> kAllGroupKinds = {
    GroupKind::kTp, GroupKind::kCp,  GroupKind::kEp,    GroupKind::kDp,   GroupKind::kEdp,
    GroupKind::kPp, GroupKind::kEtp, GroupKind::kEtpEp, GroupKind::kWorld};
// Streams of a rank; ops on one stream run in program order, one at a time.
// kPpRecv: pipeline receives posted ahead of their step (Plan::overlap_p2p_comm); sends and
// blocking receives use kPp. kHostOut, kHostIn: the host link's two directions (offload,
// docs/model-reference.md "Offload"): a copy of `bytes` from the GPU to host memory, or back,
// as a compute op of fixed duration on that stream.
enum class Stream : std::uint8_t { kCompute, kTp, kCp, kEp, kDp, kPp, kPpRecv, kHostOut, kHostIn };
inline constexpr int kNumStreams = 9;

const char* to_string(OpKind k);
const char* to_string(ComputeClass c);
const char* to_string(CommClass c);
const char* to_string(GroupKind g);
const char* to_string(Stream s);

struct Op {
  OpKind kind = OpKind::kCompute;
  Stream stream = Stream::kCompute;
  ComputeClass cclass = ComputeClass::kGemm;
  CommClass comm = CommClass::kNone;
  CollKind coll = CollKind::kAllReduce;   // kCollective
  GroupKind group = GroupKind::kTp;       // kCollective
  // kCompute: the share of `flops` that is attention core work (Q.K^T, P.V, scored by the
  // attention efficiency); the rest are GEMMs. The executor runs each part as such.
  float core_fraction = 0;
  std::int32_t peer_stage = -1;           // kSend/kRecv: pipeline stage of the peer
  std::int32_t layer = -1;                // -1: not a layer op
  std::int32_t microbatch = -1;
  std::uint32_t name = 0;                 // index into Program::names
  std::uint32_t tag = 0;                  // kSend/kRecv: matches a send with its recv
  // kSend/kRecv: transfers of `bytes`, one after the other, that the exchange takes (2 where
  // the stack sends and receives separately: stack.h pipeline_exchange_transfers); the
  // simulator's transfer lasts that many. The executor moves `bytes` once.
  std::uint8_t transfers = 1;
  double flops = 0;                       // kCompute (executed FLOPs)
  double bytes = 0;                       // compute: bytes of its memory-bound part (included in
                                          // duration); comm: nccl-tests size; alloc/free
  SimTime duration;                       // kCompute: cost-model time; comm: set by the backend
  std::uint32_t dep_begin = 0, dep_count = 0;  // indices into RoleTemplate::deps
  // kInterference: the collective (same template, earlier) whose overlap it prices; its
  // duration is Program::interference x that collective's (set by the simulator).
  std::uint32_t contends = UINT32_MAX;
};

// The ops of one pipeline stage, in program order. `deps` holds, for each op, the ops
// (of the same template) that must finish before it starts, besides its stream
// predecessor.
struct RoleTemplate {
  int stage = 0;
  std::vector<Op> ops;
  std::vector<std::uint32_t> deps;
  double static_bytes = 0;  // memory allocated before the step (weights, grads, optimizer, buffers)
};

// Rank coordinates. Default order tp-cp-ep-dp-pp with TP innermost:
// rank = t + T*(c + C*(d + D*p)); `order` (Plan::placement) permutes the four dimensions,
// innermost first, with cp and dp adjacent. Expert groups: with etp = tp the flattened
// cp x dp index (in their order) is split into EP groups of E consecutive values (expert
// parallelism carved out of dp x cp); with etp != tp (parallel folding, pp outermost) the
// stage-local rank index i = rank mod (tp x cp x dp) is read as et + etp*(e + ep*ed), as
// Megatron-Core's expert rank generator ("tp-ep-dp-pp") does.
struct Coords {
  int t = 0, c = 0, d = 0, p = 0;
};

struct Placement {
  int tp = 1, cp = 1, dp = 1, pp = 1, ep = 1;
  int gpus_per_node = 8;
  std::array<int, 4> order = {0, 1, 2, 3};  // dimensions t=0, c=1, d=2, p=3, innermost first
  int etp = 0;                              // expert tensor parallelism; 0 = tp

  static Placement of(const Plan& plan, int gpus_per_node) {
    return Placement{plan.tp, plan.cp, plan.dp, plan.pp, plan.ep, gpus_per_node, plan.placement, plan.expert_tp()};
  }
  int expert_tp() const { return etp > 0 ? etp : tp; }
  // Parallel folding: expert groups laid over the stage's ranks independently of tp.
  bool folded() const { return expert_tp() != tp; }
  // Distance in ranks between neighbours along dimension `dim` (0..3).
  int stride(int dim) const;
  // Stride of the flattened cp x dp (data) index.
  int data_stride() const { return std::min(stride(1), stride(2)); }

  int world() const { return tp * cp * dp * pp; }
  Coords coords(int rank) const;
  int rank(const Coords& c) const;
  int node(int rank) const { return rank / gpus_per_node; }
  // Size and stride (in ranks) of a group kind, and the lowest rank of `rank`'s group.
  int group_size(GroupKind g) const;
  int group_stride(GroupKind g) const;
  int group_root(GroupKind g, int rank) const;
  // The i-th member (0-based, ascending) of `rank`'s group.
  int group_member(GroupKind g, int rank, int i) const;
  // The rank with the same t, c, d at pipeline stage `stage`.
  int stage_peer(int rank, int stage) const;
  // Two ranks at stages `a` and `b` with the same t, c, d (a pipeline send/recv): in one node
  // or across two.
  GroupShape stage_pair(int a, int b) const;
};

// Why expert groups cannot be laid over `pl`: ep x etp must divide tp x cp x dp; etp != tp
// needs pp outermost. `field` ("ep" or "etp") is empty when they can.
struct ExpertLayoutError {
  std::string field, message;
};
ExpertLayoutError expert_layout_error(const Placement& pl);

// For each op of `role`: its 1-based sequence number among the collectives of the same
// group kind in program order (0 for other ops) -- the "collective #k" of hang reports and
// traces, comparable across the members of a group.
std::vector<std::uint32_t> collective_sequence(const RoleTemplate& role);

struct Program {
  Placement placement;
  std::vector<RoleTemplate> roles;   // roles[s] = stage s
  std::vector<std::string> names;    // op names ("L3.attn.fwd mb2")
  std::int64_t tokens_per_step = 0;
  double model_flops_per_step = 0;
  double peak_flops_per_gpu = 0;
  // s / (1 + s), s = GpuSpec::overlap_slowdown: the compute time an overlapped collective of
  // duration C adds, per second of C (estimate.h overlap_interference).
  double interference = 0;
  // plan.moe_dispatcher "deepep": the EP group's all-to-alls are DeepEP's (collectives.h
  // deepep_time_s), `bytes` the rows a rank receives and this the share of them that crosses
  // the network. < 0: NCCL's all-to-all.
  double deepep_rdma_per_byte = -1;
  bool deepep(const Op& op) const {
    return deepep_rdma_per_byte >= 0 && op.coll == CollKind::kAllToAll && op.group == GroupKind::kEp;
  }

  int stage_of(int rank) const { return placement.coords(rank).p; }
  std::uint32_t intern(std::string name);
};

}  // namespace stepcast

// Alpha-beta collective costs (docs/cost-model-sources.md section 5; docs/model-reference.md
// "Collectives"). Sizes follow nccl-tests: `bytes` is the whole buffer of the
// operation -- count*sizeof(type) for all-reduce, broadcast and send/recv, and
// count*sizeof(type)*n (the gathered / scattered buffer) for all-gather,
// reduce-scatter and all-to-all.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "stepcast/models/specs.h"

namespace stepcast {

enum class CollKind : std::uint8_t { kAllReduce, kAllGather, kReduceScatter, kAllToAll, kBroadcast, kSendRecv };
enum class CollAlgo { kAuto, kRing, kTree, kHierarchical, kPairwise, kDirect };
// NCCL's protocols (ClusterSpec::collectives kNccl); kNone where none applies (the alpha-beta
// model, all-to-all, send/recv, the hierarchical what-ifs, a calibrated fit).
enum class NcclProto : std::uint8_t { kNone, kLL, kLL128, kSimple };

std::string_view to_string(CollKind kind);
std::string_view to_string(CollAlgo algo);
std::string_view to_string(NcclProto proto);

// Where a group's ranks sit: `ranks` in total over `nodes` nodes, `ranks_per_node` of them
// on each (ranks = ranks_per_node * nodes), or, for groups that do not line up with the
// nodes, on the node that holds the fewest (the worst group: group_shape).
struct GroupShape {
  int ranks = 1;
  int ranks_per_node = 1;
  int nodes = 1;
};

// Shape of a group of `size` ranks whose members are `stride` apart in rank order, on
// nodes of `gpus_per_node` (ranks fill nodes in order). Where the groups do not line up with
// the nodes (tp 3 on 8-GPU nodes), the shape of the worst group: the fewest members on one
// of its nodes, then the most nodes (docs/model-reference.md 5.1).
GroupShape group_shape(int size, int stride, int gpus_per_node);

struct CollectiveCost {
  double time_s = 0;
  CollAlgo algo = CollAlgo::kRing;
  NcclProto proto = NcclProto::kNone;
  double latency_s = 0;  // the part of time_s that does not depend on the links' bandwidth
  // The share of the links' bandwidth the algorithm and protocol achieve: time_s = latency_s
  // + (its bytes on the busiest link) / (link bandwidth x bw_share). The SimGrid backend's
  // flows carry their bytes / bw_share.
  double bw_share = 1;
  double algbw_GBps = 0;   // bytes / time / 1e9
  double busbw_GBps = 0;   // algbw * bus_factor
};

// nccl-tests bus-bandwidth factor: 2(n-1)/n for all-reduce, (n-1)/n for all-gather,
// reduce-scatter and all-to-all, 1 for broadcast and send/recv.
double bus_factor(CollKind kind, int n);

// Time of one collective of `bytes` on a group of shape `g`, alone on the fabric (no
// other traffic: leaf uplinks and their oversubscription are not a bottleneck for one
// group's ring; contention is the simgrid backend's job). kAuto picks the fastest
// algorithm available for the kind, as NCCL's tuner does; on a kNccl cluster the ring and
// tree are priced per protocol with NCCL's tuner latencies and bandwidth factors
// (nccl_ring_tree_cost) and the fastest (algorithm, protocol) is taken. Bandwidths: scale-up per GPU per
// direction x intra efficiency; scale-out per GPU (node NICs shared by its GPUs) x inter
// efficiency. A group with one rank costs 0; an algorithm not available for the kind
// (e.g. kTree inside one node) costs 0.
// `proto` other than kNone prices NCCL's ring and tree with that protocol only, as NCCL_PROTO
// forces it (the other algorithms and kAlphaBeta clusters have no protocol and ignore it).
CollectiveCost collective_cost(const ClusterSpec& cluster, CollKind kind, const GroupShape& g, double bytes,
                               CollAlgo algo = CollAlgo::kAuto, NcclProto proto = NcclProto::kNone);

// collective_cost(cluster, kind, g, bytes).time_s for one cluster, each distinct (kind, group
// shape, bytes) priced once: one estimate prices its middle stages' collectives again and
// again, and a planner search the same collectives across its layouts. The same function
// of the same inputs, so the times are collective_cost's, bit for bit. The cluster must
// outlive the memo and not change while it is used; one memo per thread.
class CollectiveTimes {
 public:
  explicit CollectiveTimes(const ClusterSpec& cluster) : cluster_(&cluster) {}
  CollectiveTimes(const CollectiveTimes&) = delete;
  CollectiveTimes& operator=(const CollectiveTimes&) = delete;
  const ClusterSpec& cluster() const { return *cluster_; }
  double time_s(CollKind kind, const GroupShape& g, double bytes);

 private:
  struct Entry {
    double bytes = 0, time_s = 0;
    int ranks = 0, ranks_per_node = 0, nodes = 0;
    CollKind kind{};
    bool used = false;
  };
  // Open addressing, a power of two long, at most half full: in inline_ while it holds one
  // estimate's own collectives (no allocation), then in heap_.
  static constexpr std::size_t kInline = 32;
  Entry* slot(CollKind kind, int ranks, int ranks_per_node, int nodes, double bytes);
  const ClusterSpec* cluster_;
  std::array<Entry, kInline> inline_{};
  std::vector<Entry> heap_;
  Entry* slots_ = inline_.data();
  std::size_t size_ = kInline, used_ = 0;
};

// collective_cost(cluster, kind, g, bytes).time_s, from `times` when it is `cluster`'s memo
// (a memo of another cluster object, or none, is not used).
double collective_time_s(const ClusterSpec& cluster, CollectiveTimes* times, CollKind kind, const GroupShape& g,
                         double bytes);

// The kinds NCCL's tuner prices per protocol (ring, and tree for the all-reduce): all-reduce,
// all-gather, reduce-scatter.
bool nccl_tuned_kind(CollKind kind);

// NCCL's tuner for one ring or tree collective (NVIDIA/nccl src/graph/tuning.cc, 2.19 to
// 2.28; docs/model-reference.md section 5.2): latency = base[algo][proto] + the steps' hardware
// latencies (ring: (steps - inter)·intra + inter·net; tree: 2·((q - 1)·intra + log2(N)·net)),
// time = latency + bus bytes / (B · share[algo][proto] · tree correction(size)), B the links'
// bandwidth as the alpha-beta model has it. `proto` kNone = the fastest protocol. Only for
// kRing (all-reduce, all-gather, reduce-scatter) and kTree (all-reduce on N > 1 nodes).
CollectiveCost nccl_ring_tree_cost(const ClusterSpec& cluster, CollKind kind, const GroupShape& g, double bytes,
                                   CollAlgo algo, NcclProto proto = NcclProto::kNone);

// Where one token's top_k routed copies go when `experts` experts are spread evenly over
// `ranks` ranks on `nodes` nodes, each token choosing top_k distinct experts uniformly: the
// expected number of distinct destination ranks and nodes (a bin of b of the E experts is
// missed with probability prod_{i<k} (E - b - i) / (E - i)). With group-limited routing
// (`groups` equal groups of consecutive experts, each token choosing `groups_per_token` of
// them uniformly, then its top_k among their experts; MoeSpec::expert_groups, limited_groups)
// a bin of whole groups, or within one group, is missed as docs/model-reference.md §5.11
// states; bins that straddle groups are counted as without the limit (more destinations).
struct EpRouting {
  double ranks = 0;
  double nodes = 0;
};
EpRouting ep_routing(int experts, int top_k, int ranks, int nodes, int groups = 0, int groups_per_token = 0);

// DeepEP's normal dispatch and combine kernels (deepseek-ai/DeepEP docs/legacy.md "Normal
// kernels with NVLink and RDMA forwarding"; docs/model-reference.md §5.11). `bytes` = the rows
// one rank receives, one per token and destination rank (its own rows included), as DeepEP's
// benchmark counts them; `rdma_per_byte` = the share of that sent through the NICs (a token
// crosses the network once per destination node other than its own, then is forwarded over
// NVLink). time = alpha + max(bytes / (eta_nv B_nv), rdma_per_byte bytes / (eta_rdma B_net)),
// with B_nv the scale-up bandwidth per GPU per direction, B_net the GPU's share of its node's
// NICs, alpha one latency of the slower fabric in use.
double deepep_time_s(const ClusterSpec& cluster, const GroupShape& g, double bytes, double rdma_per_byte);
// eta_nv: 153 GB/s of dispatch within 8 H800 (NVLink 400 GB/s both ways: 200 per direction).
inline constexpr double kDeepEpNvlinkEfficiency = 153.0 / 200.0;
// eta_rdma: 58 GB/s of dispatch at EP 32 (4 nodes) counted over every destination node, of
// which 3/4 leave the node, against the 400 Gb/s (50 GB/s) CX7 NIC per GPU.
inline constexpr double kDeepEpRdmaEfficiency = 58.0 * 3.0 / 4.0 / 50.0;

}  // namespace stepcast

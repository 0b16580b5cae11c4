// Alpha-beta collective costs (docs/cost-model-sources.md section 5; docs/model-reference.md
// "Collectives"). Sizes follow nccl-tests: `bytes` is the whole buffer of the
// operation -- count*sizeof(type) for all-reduce, broadcast and send/recv, and
// count*sizeof(type)*n (the gathered / scattered buffer) for all-gather,
// reduce-scatter and all-to-all.
#pragma once

#include <cstdint>
#include <string_view>

#include "stepcast/models/specs.h"

namespace stepcast {

enum class CollKind : std::uint8_t { kAllReduce, kAllGather, kReduceScatter, kAllToAll, kBroadcast, kSendRecv };
enum class CollAlgo { kAuto, kRing, kTree, kHierarchical, kPairwise, kDirect };

std::string_view to_string(CollKind kind);
std::string_view to_string(CollAlgo algo);

// Where a group's ranks sit: `ranks` in total, `ranks_per_node` of them on each of
// `nodes` nodes (ranks = ranks_per_node * nodes).
struct GroupShape {
  int ranks = 1;
  int ranks_per_node = 1;
  int nodes = 1;
};

// Shape of a group of `size` ranks whose members are `stride` apart in rank order, on
// nodes of `gpus_per_node` (ranks fill nodes in order).
GroupShape group_shape(int size, int stride, int gpus_per_node);

struct CollectiveCost {
  double time_s = 0;
  CollAlgo algo = CollAlgo::kRing;
  double algbw_GBps = 0;   // bytes / time / 1e9
  double busbw_GBps = 0;   // algbw * bus_factor
};

// nccl-tests bus-bandwidth factor: 2(n-1)/n for all-reduce, (n-1)/n for all-gather,
// reduce-scatter and all-to-all, 1 for broadcast and send/recv.
double bus_factor(CollKind kind, int n);

// Time of one collective of `bytes` on a group of shape `g`, alone on the fabric (no
// other traffic: leaf uplinks and their oversubscription are not a bottleneck for one
// group's ring; contention is the simgrid backend's job). kAuto picks the fastest
// algorithm available for the kind, as NCCL's tuner does. Bandwidths: scale-up per GPU per
// direction x intra efficiency; scale-out per GPU (node NICs shared by its GPUs) x inter
// efficiency. A group with one rank costs 0; an algorithm not available for the kind
// (e.g. kTree inside one node) costs 0.
CollectiveCost collective_cost(const ClusterSpec& cluster, CollKind kind, const GroupShape& g,
                               double bytes, CollAlgo algo = CollAlgo::kAuto);

}  // namespace stepcast

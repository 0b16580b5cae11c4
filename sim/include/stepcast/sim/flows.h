// How a collective becomes network flows (docs/network.md): the algorithm the alpha-beta
// model picks for the group's shape and size, decomposed into phases of point-to-point
// flows. A phase ends when all its flows end; the next phase then starts. The per-message
// latency of the algorithm is not a flow: it is added once, after the last phase.
#pragma once

#include <span>
#include <vector>

#include "stepcast/models/collectives.h"
#include "stepcast/models/sim_time.h"
#include "stepcast/models/specs.h"

namespace stepcast::sim {

struct Flow {
  int src = 0, dst = 0;  // ranks
  double bytes = 0;
};

struct FlowPlan {
  CollAlgo algo = CollAlgo::kRing;
  std::vector<std::vector<Flow>> phases;
  SimTime latency;  // the algorithm's alpha terms, added after the last phase
};

// `ranks` are the group's members in group order; consecutive members fill nodes of
// `gpus_per_node` in rank order. `bytes` follows nccl-tests (collectives.h).
// - ring (all-reduce, all-gather, reduce-scatter, broadcast; NCCL's tree for all-reduce is
//   decomposed as the ring, its latency kept): inside one node one ring; across nodes with
//   q members per node, q rings, ring c entering each node at its c-th member, so each
//   member's NIC carries one inter-node hop (NCCL's one ring per NIC);
// - hierarchical: a ring inside each node, rings across nodes per local index (rail),
//   and for all-reduce a closing ring inside each node;
// - pairwise all-to-all: a flow between every ordered pair; send/recv: one flow.
FlowPlan plan_flows(const ClusterSpec& cluster, CollKind kind, std::span<const int> ranks, double bytes,
                    CollAlgo algo = CollAlgo::kAuto);

}  // namespace stepcast::sim

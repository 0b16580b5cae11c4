#include "stepcast/models/collectives.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace stepcast {

std::string_view to_string(CollKind kind) {
  switch (kind) {
    case CollKind::kAllReduce: return "all_reduce";
    case CollKind::kAllGather: return "all_gather";
    case CollKind::kReduceScatter: return "reduce_scatter";
    case CollKind::kAllToAll: return "all_to_all";
    case CollKind::kBroadcast: return "broadcast";
    case CollKind::kSendRecv: return "send_recv";
  }
  return "?";
}

std::string_view to_string(CollAlgo algo) {
  switch (algo) {
    case CollAlgo::kAuto: return "auto";
    case CollAlgo::kRing: return "ring";
    case CollAlgo::kTree: return "tree";
    case CollAlgo::kHierarchical: return "hierarchical";
    case CollAlgo::kPairwise: return "pairwise";
    case CollAlgo::kDirect: return "direct";
  }
  return "?";
}

GroupShape group_shape(int size, int stride, int gpus_per_node) {
  GroupShape g;
  g.ranks = size;
  if (stride >= gpus_per_node) {
    g.ranks_per_node = 1;
  } else {
    // Members stride apart inside a node: gpus_per_node / stride of them share a node.
    g.ranks_per_node = std::max(1, std::min(size, gpus_per_node / stride));
  }
  g.nodes = (size + g.ranks_per_node - 1) / g.ranks_per_node;
  return g;
}

double bus_factor(CollKind kind, int n) {
  switch (kind) {
    case CollKind::kAllReduce: return 2.0 * (n - 1) / n;
    case CollKind::kAllGather:
    case CollKind::kReduceScatter:
    case CollKind::kAllToAll: return static_cast<double>(n - 1) / n;
    case CollKind::kBroadcast:
    case CollKind::kSendRecv: return 1.0;
  }
  return 1.0;
}

namespace {

struct Links {
  double nv = 0, net = 0;        // bytes/s per GPU
  double a_nv = 0, a_net = 0;    // seconds per message
};

Links links(const ClusterSpec& c) {
  Links l;
  l.nv = c.intra_bandwidth_GBps * 1e9 * c.intra_efficiency;
  l.net = c.nic_bytes_per_s_per_gpu() * c.inter_efficiency;
  l.a_nv = c.intra_latency_us * 1e-6;
  l.a_net = c.inter_latency_us * 1e-6;
  return l;
}

double ring_time(CollKind kind, const GroupShape& g, const Links& l, double S) {
  const int n = g.ranks;
  // Ring bottleneck: inside a node the scale-up link; across nodes each ring hop that
  // leaves a node uses one NIC, and the ranks_per_node rings run on as many NICs.
  const double bw = g.nodes == 1 ? l.nv : std::min(l.nv, l.net * g.ranks_per_node);
  const double hop_alpha = g.nodes == 1 ? l.a_nv
                                        : ((n - g.nodes) * l.a_nv + g.nodes * l.a_net) / n;
  const double steps = kind == CollKind::kAllReduce ? 2.0 * (n - 1) : (n - 1);
  const double volume = bus_factor(kind, n) * S;
  return steps * hop_alpha + volume / bw;
}

double tree_time(const GroupShape& g, const Links& l, double S) {
  // NCCL double binary tree all-reduce: latency grows with log2(nodes), intra-node chain;
  // bandwidth term ~ 2S/B (docs/cost-model-sources.md section 5.1).
  const double bw = g.nodes == 1 ? l.nv : std::min(l.nv, l.net * g.ranks_per_node);
  const double lat = 2.0 * (std::ceil(std::log2(std::max(g.nodes, 1))) * l.a_net +
                            (g.ranks_per_node - 1) * l.a_nv);
  return lat + 2.0 * S / bw;
}

double hierarchical_time(CollKind kind, const GroupShape& g, const Links& l, double S) {
  const double q = g.ranks_per_node, N = g.nodes;
  const double intra = (q - 1) / q * S / l.nv + (q - 1) * l.a_nv;
  switch (kind) {
    case CollKind::kAllReduce:  // RS in node, AR of S/q across nodes on q rails, AG in node
      return 2 * intra + 2 * (N - 1) / N * (S / q) / l.net + 2 * (N - 1) * l.a_net;
    case CollKind::kAllGather:
    case CollKind::kReduceScatter:  // across nodes on q rails (1/q each), then in node
      return intra + (N - 1) / (N * q) * S / l.net + (N - 1) * l.a_net;
    default:
      return std::numeric_limits<double>::infinity();
  }
}

}  // namespace

CollectiveCost collective_cost(const ClusterSpec& c, CollKind kind, const GroupShape& g,
                               double bytes, CollAlgo algo) {
  CollectiveCost out;
  const int n = g.ranks;
  if (kind != CollKind::kSendRecv && n <= 1) return out;
  if (bytes <= 0) return out;
  if (!c.collective_fits.empty()) {
    const CollScope scope = g.nodes > 1 ? CollScope::kInterNode : CollScope::kIntraNode;
    for (const CollectiveFit& f : c.collective_fits) {
      if (f.kind != static_cast<int>(kind) || f.scope != scope) continue;
      out.time_s = f.alpha_s + f.beta_s_per_byte * bytes * bus_factor(kind, std::max(n, 2));
      out.algo = CollAlgo::kAuto;
      out.algbw_GBps = bytes / out.time_s / 1e9;
      out.busbw_GBps = out.algbw_GBps * bus_factor(kind, std::max(n, 2));
      return out;
    }
  }
  const Links l = links(c);
  const double S = bytes;
  auto consider = [&](CollAlgo a, double t) {
    if (algo != CollAlgo::kAuto && algo != a) return;
    if (out.time_s == 0 || t < out.time_s) {
      out.time_s = t;
      out.algo = a;
    }
  };
  // NCCL has no hierarchical algorithm: priced only when asked for, as a what-if.
  auto what_if_hierarchical = [&] {
    if (algo == CollAlgo::kHierarchical && g.nodes > 1 && g.ranks_per_node > 1) {
      consider(CollAlgo::kHierarchical, hierarchical_time(kind, g, l, S));
    }
  };
  switch (kind) {
    case CollKind::kAllReduce:
      consider(CollAlgo::kRing, ring_time(kind, g, l, S));
      if (g.nodes > 1) consider(CollAlgo::kTree, tree_time(g, l, S));
      what_if_hierarchical();
      break;
    case CollKind::kAllGather:
    case CollKind::kReduceScatter:
      // NCCL runs all-gather and reduce-scatter as one ring over every rank ("Only disable
      // algo for Allreduce since others only have one", src/graph/tuning.cc): the tuner picks
      // among algorithms for the all-reduce alone.
      consider(CollAlgo::kRing, ring_time(kind, g, l, S));
      what_if_hierarchical();
      break;
    case CollKind::kAllToAll: {
      // Pairwise exchange: each rank sends S/n to every peer; node-local peers over the
      // scale-up fabric, remote peers through the rank's share of the node's NICs.
      const double chunk = S / n;
      const double local = (g.ranks_per_node - 1) * chunk / l.nv;
      const double remote = g.nodes > 1 ? (n - g.ranks_per_node) * chunk / l.net : 0.0;
      const double alpha = g.nodes > 1 ? l.a_net : l.a_nv;
      consider(CollAlgo::kPairwise, (n - 1) * alpha + std::max(local, remote));
      break;
    }
    case CollKind::kBroadcast: {
      // Pipelined ring broadcast: S crosses each hop once.
      const double bw = g.nodes == 1 ? l.nv : std::min(l.nv, l.net);
      consider(CollAlgo::kRing, (n - 1) * (g.nodes == 1 ? l.a_nv : l.a_net) + S / bw);
      break;
    }
    case CollKind::kSendRecv: {
      const bool inter = g.nodes > 1;
      consider(CollAlgo::kDirect, (inter ? l.a_net : l.a_nv) + S / (inter ? l.net : l.nv));
      break;
    }
  }
  if (out.time_s <= 0) return CollectiveCost{};  // algorithm not available for this kind
  out.algbw_GBps = S / out.time_s / 1e9;
  out.busbw_GBps = out.algbw_GBps * bus_factor(kind, std::max(n, 2));
  return out;
}

EpRouting ep_routing(int experts, int top_k, int ranks, int nodes, int groups, int groups_per_token) {
  EpRouting r;
  if (experts <= 0 || top_k <= 0 || ranks <= 0 || nodes <= 0) return r;
  // Probability that top_k distinct experts drawn from `pool` miss `bin` of them.
  auto missed_in = [top_k](double pool, double bin) {
    double p = 1;
    for (int i = 0; i < top_k; ++i) p *= std::max(0.0, pool - bin - i) / (pool - i);
    return p;
  };
  const bool limited = groups > 0 && groups_per_token > 0 && groups_per_token < groups && experts % groups == 0;
  const int group = limited ? experts / groups : 0;
  auto missed = [&](int bin) {
    if (!limited) return missed_in(experts, bin);
    const double pool = static_cast<double>(groups_per_token) * group;
    if (bin % group == 0) {
      // The bin holds c whole groups: j of them among the token's chosen groups
      // (hypergeometric), then its top_k miss those j groups' experts.
      const int c = bin / group;
      auto choose = [](int n, int k) {
        if (k < 0 || k > n) return 0.0;
        double x = 1;
        for (int i = 1; i <= k; ++i) x = x * (n - k + i) / i;
        return x;
      };
      double p = 0;
      for (int j = 0; j <= std::min(c, groups_per_token); ++j) {
        p += choose(c, j) * choose(groups - c, groups_per_token - j) / choose(groups, groups_per_token) *
             missed_in(pool, static_cast<double>(j) * group);
      }
      return p;
    }
    if (group % bin == 0) {
      // The bin lies within one group: missed when its group is not chosen, or chosen and
      // its experts are not.
      const double chosen = static_cast<double>(groups_per_token) / groups;
      return (1 - chosen) + chosen * missed_in(pool, bin);
    }
    return missed_in(experts, bin);
  };
  r.ranks = ranks * (1 - missed(experts / ranks));
  r.nodes = nodes * (1 - missed(experts / nodes));
  return r;
}

double deepep_time_s(const ClusterSpec& c, const GroupShape& g, double bytes, double rdma_per_byte) {
  if (g.ranks <= 1 || bytes <= 0) return 0;
  const double nv = bytes / (kDeepEpNvlinkEfficiency * c.intra_bandwidth_GBps * 1e9);
  const double net = g.nodes > 1 ? rdma_per_byte * bytes / (kDeepEpRdmaEfficiency * c.nic_bytes_per_s_per_gpu()) : 0.0;
  const double alpha = (g.nodes > 1 ? c.inter_latency_us : c.intra_latency_us) * 1e-6;
  return alpha + std::max(nv, net);
}

}  // namespace stepcast

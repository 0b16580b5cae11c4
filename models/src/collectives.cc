#include "stepcast/models/collectives.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>

namespace stepcast {

namespace {
// group_shape walks one period of an unaligned layout (lcm of its block and the node size);
// past this many ranks it keeps the aligned estimate.
constexpr std::int64_t kGroupShapePeriodLimit = 1 << 16;
}  // namespace

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

std::string_view to_string(NcclProto proto) {
  switch (proto) {
    case NcclProto::kNone: return "none";
    case NcclProto::kLL: return "LL";
    case NcclProto::kLL128: return "LL128";
    case NcclProto::kSimple: return "Simple";
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
    g.ranks_per_node = 1;  // members stride apart: each on a node of its own
    g.nodes = size;
    return g;
  }
  // The groups of a kind tile the ranks in blocks of stride x size, each block holding
  // `stride` groups whose members are `stride` apart (Placement's rank order).
  const std::int64_t gpn = std::max(1, gpus_per_node);
  const std::int64_t block = static_cast<std::int64_t>(std::max(1, stride)) * std::max(1, size);
  const bool tiles_nodes = block % gpn == 0 && gpn % stride == 0;  // every node holds gpn / stride of each group
  const bool inside_node = gpn % block == 0;                       // every group inside one node
  const std::int64_t period = tiles_nodes || inside_node ? 0 : std::lcm(block, gpn);
  if (size <= 1 || period == 0 || period > kGroupShapePeriodLimit) {
    // Members stride apart inside a node: gpus_per_node / stride of them share a node.
    g.ranks_per_node = std::max(1, std::min(size, gpus_per_node / stride));
    g.nodes = (size + g.ranks_per_node - 1) / g.ranks_per_node;
    return g;
  }
  // The groups do not line up with the nodes (tp 3 on 8-GPU nodes: ranks 6-8 straddle two
  // nodes). A synchronous step waits for the slowest group, so the shape is the worst one
  // over a period of the layout: the fewest members on one of its nodes (the ring's NIC
  // bottleneck, ring_tree_bw), then the most nodes.
  g.ranks_per_node = size;
  g.nodes = 1;
  for (std::int64_t first = 0; first < period; first += block) {
    for (int offset = 0; offset < stride; ++offset) {
      int nodes = 0, fewest = size, run = 0;
      std::int64_t node = -1;
      for (int i = 0; i < size; ++i) {
        const std::int64_t here = (first + offset + static_cast<std::int64_t>(i) * stride) / gpn;
        if (here != node) {
          if (run > 0) fewest = std::min(fewest, run);
          node = here;
          run = 0;
          ++nodes;
        }
        ++run;
      }
      fewest = std::min(fewest, run);
      if (fewest < g.ranks_per_node || (fewest == g.ranks_per_node && nodes > g.nodes)) {
        g.ranks_per_node = fewest;
        g.nodes = nodes;
      }
    }
  }
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

// NCCL's tuner, NVIDIA/nccl src/graph/tuning.cc as released in 2.19 to 2.28 [S]; indices
// [tree, ring][LL, LL128, Simple]; latencies in microseconds.
constexpr double kNcclBaseLatUs[2][3] = {{6.8, 14.0, 0.0}, {6.6, 14.0, 8.4}};
constexpr double kNcclNvlinkLatUs[2][3] = {{0.6, 1.25, 28.0}, {0.6, 1.9, 3.4}};
constexpr double kNcclNetLatUs[2][3] = {{5.0, 8.5, 28.0}, {2.7, 4.0, 14.0}};
// getNetOverhead: an inter-node ring launches every step through the network proxy, 1 us on
// an x86 Intel host, 2 on AMD, 3x that for Simple; the floor of a step's latency.
constexpr double kNcclNetOverheadUs[2] = {1.0, 2.0};  // [Intel, AMD]
// llMaxBws, GB/s of bus bandwidth for LL: one node of Ampere or Hopper GPUs 87.7; across 2
// nodes and across more, 39.0 and 20.4 on Intel hosts, 22.5 and 19.0 on AMD ones.
constexpr double kNcclLlMaxBusGBps[2][3] = {{87.7, 39.0, 20.4}, {87.7, 22.5, 19.0}};
// treeCorrectionFactor[proto][log2(bytes / 64)], 64 B to 256 MB: the tree's bandwidth at
// medium sizes.
constexpr double kNcclTreeCorrection[3][23] = {
    {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0},
    {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0},
    {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9}};
// ncclTopoGetAlgoTime: a multi-node ring all-reduce on Simple pays its latency 1.4x (Ampere and
// later; "plateau effect of ring") once each rank's share per channel reaches 64 B; stepcast
// does not model channels and takes NCCL's 16 default channels of a DGX-class node.
constexpr double kNcclRingPlateau = 1.4;
constexpr double kNcclPlateauBytesPerRank = 64.0 * 16;

int log2i(double x) {
  int l = 0;
  for (auto v = static_cast<std::uint64_t>(std::max(1.0, x)); v >>= 1;) ++l;
  return l;
}

struct Priced {
  double latency_s = 0, share = 1, time_s = 0;
};

// One (algorithm, protocol) as ncclTopoTuneModel and ncclTopoGetAlgoTime price it, on the
// links' bandwidth `bw` (bytes/s).
Priced nccl_priced(const ClusterSpec& c, CollKind kind, const GroupShape& g, double S, double bw, bool tree, int p) {
  const int n = g.ranks, N = g.nodes, q = g.ranks_per_node;
  const int a = tree ? 0 : 1;
  const bool ar = kind == CollKind::kAllReduce;
  double intra = kNcclNvlinkLatUs[a][p], inter = kNcclNetLatUs[a][p];
  double lat = kNcclBaseLatUs[a][p];
  Priced out;
  const int cpu = c.host_cpu == HostCpu::kAmd ? 1 : 0;
  const double ll_max = kNcclLlMaxBusGBps[cpu][N <= 2 ? N - 1 : 2] * 1e9;
  if (!tree) {
    const int steps = ar ? 2 * (n - 1) : n - 1;
    const int inter_steps = ar ? (N > 1 ? 2 * N : 0) : N - 1;
    if (N > 1) intra = std::max(intra, kNcclNetOverheadUs[cpu] * (p == 2 ? 3 : 1));
    // NCCL's count gives an all-reduce with one rank per node 2N network steps of 2(N - 1):
    // the intra-node steps are not let go below zero here.
    lat += std::max(0, steps - inter_steps) * intra + inter_steps * inter;
    if (p == 2 && ar && N > 1 && S / n >= kNcclPlateauBytesPerRank) lat *= kNcclRingPlateau;
    if (p == 0) out.share = std::min(ll_max / bw, N > 1 || ar ? 1.0 / 4.0 : 1.0 / 3.0);
    if (p == 1) out.share = q < 2 ? 0.7 : 0.92;
    out.latency_s = lat * 1e-6 * c.nccl_latency_scale;
    out.time_s = out.latency_s + bus_factor(kind, n) * S / (bw * out.share);
  } else {
    lat += 2.0 * ((q - 1) * intra + log2i(N) * inter);
    double share = 0.92;
    if (p == 0) share = std::min(share / 3.8, ll_max / bw);
    if (p == 1) share *= N == 1 ? 7.0 / 9.0 : 120.0 / 128.0;
    const int log_size = log2i(S / 64);
    if (log_size < 23) share *= kNcclTreeCorrection[p][log_size];
    out.share = share;
    out.latency_s = lat * 1e-6 * c.nccl_latency_scale;
    out.time_s = out.latency_s + 2.0 * S / (bw * out.share);
  }
  return out;
}

double ring_tree_bw(const GroupShape& g, const Links& l) {
  return g.nodes == 1 ? l.nv : std::min(l.nv, l.net * g.ranks_per_node);
}

double ring_time(CollKind kind, const GroupShape& g, const Links& l, double S) {
  const int n = g.ranks;
  // Ring bottleneck: inside a node the scale-up link; across nodes each ring hop that
  // leaves a node uses one NIC, and the ranks_per_node rings run on as many NICs.
  const double bw = ring_tree_bw(g, l);
  const double hop_alpha = g.nodes == 1 ? l.a_nv
                                        : ((n - g.nodes) * l.a_nv + g.nodes * l.a_net) / n;
  const double steps = kind == CollKind::kAllReduce ? 2.0 * (n - 1) : (n - 1);
  const double volume = bus_factor(kind, n) * S;
  return steps * hop_alpha + volume / bw;
}

double tree_time(const GroupShape& g, const Links& l, double S) {
  // NCCL double binary tree all-reduce: latency grows with log2(nodes), intra-node chain;
  // bandwidth term ~ 2S/B (docs/cost-model-sources.md section 5.1).
  const double bw = ring_tree_bw(g, l);
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

std::uint64_t collective_key_hash(CollKind kind, int ranks, int ranks_per_node, int nodes, double bytes) {
  const auto u = [](int x) { return static_cast<std::uint64_t>(static_cast<std::uint32_t>(x)); };
  std::uint64_t h = std::bit_cast<std::uint64_t>(bytes) ^ (u(ranks) << 11) ^ (u(ranks_per_node) << 27) ^
                    (u(nodes) << 37) ^ u(static_cast<int>(kind));
  h *= 0x9E3779B97F4A7C15ull;  // Fibonacci hashing's multiplier; its high bits mix every input bit
  return h ^ (h >> 32);
}

}  // namespace

CollectiveTimes::Entry* CollectiveTimes::slot(CollKind kind, int ranks, int ranks_per_node, int nodes, double bytes) {
  const std::size_t mask = size_ - 1;
  std::size_t i = static_cast<std::size_t>(collective_key_hash(kind, ranks, ranks_per_node, nodes, bytes)) & mask;
  for (;; i = (i + 1) & mask) {
    const Entry& e = slots_[i];
    if (!e.used || (e.bytes == bytes && e.kind == kind && e.ranks == ranks && e.ranks_per_node == ranks_per_node &&
                    e.nodes == nodes)) {
      return &slots_[i];
    }
  }
}

double CollectiveTimes::time_s(CollKind kind, const GroupShape& g, double bytes) {
  Entry* e = slot(kind, g.ranks, g.ranks_per_node, g.nodes, bytes);
  if (e->used) return e->time_s;
  const double t = collective_cost(*cluster_, kind, g, bytes).time_s;
  if (2 * (used_ + 1) > size_) {
    // Twice as long, every entry placed again.
    std::vector<Entry> bigger(2 * size_);
    const std::vector<Entry> old(slots_, slots_ + size_);
    heap_.swap(bigger);
    slots_ = heap_.data();
    size_ = heap_.size();
    for (const Entry& o : old) {
      if (o.used) *slot(o.kind, o.ranks, o.ranks_per_node, o.nodes, o.bytes) = o;
    }
    e = slot(kind, g.ranks, g.ranks_per_node, g.nodes, bytes);
  }
  *e = Entry{bytes, t, g.ranks, g.ranks_per_node, g.nodes, kind, true};
  ++used_;
  return t;
}

double collective_time_s(const ClusterSpec& cluster, CollectiveTimes* times, CollKind kind, const GroupShape& g,
                         double bytes) {
  return times != nullptr && &times->cluster() == &cluster ? times->time_s(kind, g, bytes)
                                                           : collective_cost(cluster, kind, g, bytes).time_s;
}

bool nccl_tuned_kind(CollKind kind) {
  return kind == CollKind::kAllReduce || kind == CollKind::kAllGather || kind == CollKind::kReduceScatter;
}

CollectiveCost nccl_ring_tree_cost(const ClusterSpec& c, CollKind kind, const GroupShape& g, double bytes,
                                   CollAlgo algo, NcclProto proto) {
  CollectiveCost out;
  const bool tree = algo == CollAlgo::kTree;
  if (!nccl_tuned_kind(kind) || (algo != CollAlgo::kRing && !tree) ||
      (tree && (kind != CollKind::kAllReduce || g.nodes < 2)) || g.ranks <= 1 || !(bytes > 0)) {
    return out;
  }
  const double bw = ring_tree_bw(g, links(c));
  for (int p = 0; p < 3; ++p) {
    const auto this_proto = static_cast<NcclProto>(p + 1);
    if (proto != NcclProto::kNone && proto != this_proto) continue;
    const Priced x = nccl_priced(c, kind, g, bytes, bw, tree, p);
    if (out.time_s == 0 || x.time_s < out.time_s) {
      out.time_s = x.time_s;
      out.algo = algo;
      out.proto = this_proto;
      out.latency_s = x.latency_s;
      out.bw_share = x.share;
    }
  }
  out.algbw_GBps = bytes / out.time_s / 1e9;
  out.busbw_GBps = out.algbw_GBps * bus_factor(kind, g.ranks);
  return out;
}

CollectiveCost collective_cost(const ClusterSpec& c, CollKind kind, const GroupShape& g, double bytes, CollAlgo algo,
                               NcclProto proto) {
  CollectiveCost out;
  const int n = g.ranks;
  if (kind != CollKind::kSendRecv && n <= 1) return out;
  if (bytes <= 0) return out;
  if (!c.collective_fits.empty()) {
    const CollScope scope = g.nodes > 1 ? CollScope::kInterNode : CollScope::kIntraNode;
    for (const CollectiveFit& f : c.collective_fits) {
      if (f.kind != static_cast<int>(kind) || f.scope != scope) continue;
      out.time_s = f.alpha_s + f.beta_s_per_byte * bytes * bus_factor(kind, std::max(n, 2));
      out.latency_s = f.alpha_s;
      out.algo = CollAlgo::kAuto;
      out.algbw_GBps = bytes / out.time_s / 1e9;
      out.busbw_GBps = out.algbw_GBps * bus_factor(kind, std::max(n, 2));
      return out;
    }
  }
  const Links l = links(c);
  const double S = bytes;
  const bool nccl = c.collectives == CollectiveModel::kNccl;
  // A candidate: its time, and the latency part of it (the time with unbounded links).
  auto consider = [&](CollAlgo a, double t, double latency) {
    if (algo != CollAlgo::kAuto && algo != a) return;
    if (out.time_s == 0 || t < out.time_s) {
      out = CollectiveCost{};
      out.time_s = t;
      out.algo = a;
      out.latency_s = latency;
    }
  };
  auto consider_nccl = [&](CollAlgo a) {
    if (algo != CollAlgo::kAuto && algo != a) return;
    const CollectiveCost x = nccl_ring_tree_cost(c, kind, g, S, a, proto);
    if (x.time_s > 0 && (out.time_s == 0 || x.time_s < out.time_s)) out = x;
  };
  // NCCL has no hierarchical algorithm: priced only when asked for, as a what-if.
  auto what_if_hierarchical = [&] {
    if (algo == CollAlgo::kHierarchical && g.nodes > 1 && g.ranks_per_node > 1) {
      consider(CollAlgo::kHierarchical, hierarchical_time(kind, g, l, S), hierarchical_time(kind, g, l, 0));
    }
  };
  switch (kind) {
    case CollKind::kAllReduce:
      if (nccl) {
        consider_nccl(CollAlgo::kRing);
        if (g.nodes > 1) consider_nccl(CollAlgo::kTree);
      } else {
        consider(CollAlgo::kRing, ring_time(kind, g, l, S), ring_time(kind, g, l, 0));
        if (g.nodes > 1) consider(CollAlgo::kTree, tree_time(g, l, S), tree_time(g, l, 0));
      }
      what_if_hierarchical();
      break;
    case CollKind::kAllGather:
    case CollKind::kReduceScatter:
      // NCCL runs all-gather and reduce-scatter as one ring over every rank ("Only disable
      // algo for Allreduce since others only have one", src/graph/tuning.cc): the tuner picks
      // among algorithms for the all-reduce alone.
      if (nccl) {
        consider_nccl(CollAlgo::kRing);
      } else {
        consider(CollAlgo::kRing, ring_time(kind, g, l, S), ring_time(kind, g, l, 0));
      }
      what_if_hierarchical();
      break;
    case CollKind::kAllToAll: {
      // Pairwise exchange: each rank sends S/n to every peer; node-local peers over the
      // scale-up fabric, remote peers through the rank's share of the node's NICs.
      const double chunk = S / n;
      const double local = (g.ranks_per_node - 1) * chunk / l.nv;
      const double remote = g.nodes > 1 ? (n - g.ranks_per_node) * chunk / l.net : 0.0;
      const double alpha = g.nodes > 1 ? l.a_net : l.a_nv;
      consider(CollAlgo::kPairwise, (n - 1) * alpha + std::max(local, remote), (n - 1) * alpha);
      break;
    }
    case CollKind::kBroadcast: {
      // Pipelined ring broadcast: S crosses each hop once.
      const double bw = g.nodes == 1 ? l.nv : std::min(l.nv, l.net);
      const double lat = (n - 1) * (g.nodes == 1 ? l.a_nv : l.a_net);
      consider(CollAlgo::kRing, lat + S / bw, lat);
      break;
    }
    case CollKind::kSendRecv: {
      const bool inter = g.nodes > 1;
      const double lat = inter ? l.a_net : l.a_nv;
      consider(CollAlgo::kDirect, lat + S / (inter ? l.net : l.nv), lat);
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

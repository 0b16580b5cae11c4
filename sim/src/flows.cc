#include "stepcast/sim/flows.h"

#include <algorithm>
#include <map>

namespace stepcast::sim {

namespace {

// Members grouped by node, in order of first appearance.
std::vector<std::vector<int>> by_node(const ClusterSpec& c, std::span<const int> ranks) {
  std::vector<std::vector<int>> nodes;
  std::map<int, std::size_t> index;
  for (int r : ranks) {
    const int node = r / c.gpus_per_node;
    auto [it, fresh] = index.emplace(node, nodes.size());
    if (fresh) nodes.emplace_back();
    nodes[it->second].push_back(r);
  }
  return nodes;
}

void ring(std::vector<Flow>& out, const std::vector<int>& order, double bytes) {
  const std::size_t n = order.size();
  if (n < 2 || bytes <= 0) return;
  for (std::size_t i = 0; i < n; ++i) out.push_back({order[i], order[(i + 1) % n], bytes});
}

}  // namespace

FlowPlan plan_flows(const ClusterSpec& c, CollKind kind, std::span<const int> ranks, double S, CollAlgo algo) {
  FlowPlan plan;
  const int n = static_cast<int>(ranks.size());
  const auto nodes = by_node(c, ranks);
  GroupShape g;
  g.ranks = n;
  g.nodes = static_cast<int>(nodes.size());
  g.ranks_per_node = std::max(1, n / std::max(1, g.nodes));
  const CollectiveCost cost = collective_cost(c, kind, g, S, algo);
  plan.algo = kind == CollKind::kSendRecv ? CollAlgo::kDirect : cost.algo;
  // Latency part: what the closed form prices beside the links' bandwidth (NCCL's protocol
  // latencies on a kNccl cluster, the per-hop alphas otherwise).
  plan.latency = SimTime::from_s(cost.latency_s);
  // The protocol's share of the links (LL, LL128, the tree's corrections): the flows carry
  // their bytes / share, so that alone on the fabric they take what the closed form prices.
  const double share = cost.bw_share > 0 ? cost.bw_share : 1.0;
  if (kind == CollKind::kSendRecv) {
    plan.phases.push_back({{ranks[0], ranks[1], S}});
    return plan;
  }
  if (n < 2) return plan;
  const double q = g.ranks_per_node, N = g.nodes;
  switch (plan.algo) {
    case CollAlgo::kPairwise: {
      std::vector<Flow> f;
      for (int a : ranks) {
        for (int b : ranks) {
          if (a != b) f.push_back({a, b, S / n});
        }
      }
      plan.phases.push_back(std::move(f));
      break;
    }
    case CollAlgo::kHierarchical: {
      std::vector<Flow> intra, inter;
      for (const auto& node : nodes) ring(intra, node, (q - 1) / q * S);
      // Rails: the x-th member of every node.
      const double inter_bytes = kind == CollKind::kAllReduce ? 2 * (N - 1) / N * (S / q) : (N - 1) / N * (S / q);
      for (std::size_t x = 0; x < static_cast<std::size_t>(q); ++x) {
        std::vector<int> rail;
        for (const auto& node : nodes) {
          if (x < node.size()) rail.push_back(node[x]);
        }
        ring(inter, rail, inter_bytes);
      }
      if (kind == CollKind::kAllReduce) {
        plan.phases.push_back(intra);
        plan.phases.push_back(std::move(inter));
        plan.phases.push_back(std::move(intra));
      } else {
        plan.phases.push_back(std::move(intra));
        plan.phases.push_back(std::move(inter));
      }
      break;
    }
    default: {  // ring (and tree, priced as the ring's bandwidth with the tree's latency)
      // NCCL's double binary tree moves about 2S per rank (docs/cost-model-sources.md section 5.1):
      // the ring's flows carry that volume so the bandwidth terms agree.
      const double volume = (kind == CollKind::kBroadcast   ? S
                             : plan.algo == CollAlgo::kTree ? 2 * S
                                                            : bus_factor(kind, n) * S) /
                            share;
      std::vector<Flow> f;
      if (nodes.size() == 1) {
        ring(f, nodes[0], volume);
      } else {
        const std::size_t rings = static_cast<std::size_t>(q);
        for (std::size_t cidx = 0; cidx < rings; ++cidx) {
          std::vector<int> order;
          for (const auto& node : nodes) {
            for (std::size_t k = 0; k < node.size(); ++k) order.push_back(node[(cidx + k) % node.size()]);
          }
          ring(f, order, volume / static_cast<double>(rings));
        }
      }
      plan.phases.push_back(std::move(f));
      break;
    }
  }
  return plan;
}

}  // namespace stepcast::sim

// SimGrid (S4U 3.32) implementation of the flow-level backend. Platform (docs/network.md):
// one host per GPU rank; per GPU a split-duplex NVLink link to the node's NVSwitch; per NIC
// a split-duplex link to its leaf switch; per leaf a split-duplex uplink to a non-blocking
// spine with (ports x NIC rate) / oversubscription. Routes are explicit (a full zone), for
// the rank pairs the Program uses. Latencies are zero on links: each algorithm's alpha terms
// are added after its flows (flows.h), so an isolated collective costs what the alpha-beta
// model says, and only bandwidth sharing differs.
//
// This file is the plugin libstepcast-simgrid.so (the only one that includes SimGrid); the
// host reaches it through the factory at the end (simgrid_plugin.h, simgrid_loader.cc).
#include "stepcast/sim/simgrid_backend.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>

#include <simgrid/s4u.hpp>

#include "stepcast/models/collectives.h"
#include "stepcast/sim/flows.h"
#include "simgrid_plugin.h"

namespace stepcast::sim {

namespace sg4 = simgrid::s4u;

namespace {

class SimgridBackend final : public NetworkBackend, public FlowNetwork {
 public:
  SimgridBackend(const ClusterSpec& cluster, const Program& program, const SimgridOptions& opt)
      : cluster_(cluster), analytic_(cluster), opt_(opt) {
    collect_pairs(program);
  }

  SimTime collective_time(const Program& p, const Op& op) override { return analytic_.collective_time(p, op); }
  SimTime p2p_time(const Program& p, const Op& op, int from, int to) override {
    return analytic_.p2p_time(p, op, from, to);
  }
  FlowNetwork* flows() override { return this; }

  bool handles(const Program& program, const Op& op, std::span<const int> ranks) override {
    // DeepEP's exchange is not NCCL's pairwise flows: the analytic model prices it.
    if (op.kind == OpKind::kCollective && program.deepep(op)) return false;
    // The gradient norm's all-reduce over every rank moves 4 bytes: latency, which the
    // analytic model's NCCL tuner prices; a flow plan would be thousands of empty flows.
    if (op.kind == OpKind::kCollective && op.group == GroupKind::kWorld) return false;
    if (opt_.intra_node_flows) return true;
    const int node = ranks[0] / cluster_.gpus_per_node;
    for (int r : ranks) {
      if (r / cluster_.gpus_per_node != node) return true;
    }
    return false;
  }

  void start(std::uint64_t handle, const Program&, const Op& op, std::span<const int> ranks, SimTime) override {
    const CollKind kind = op.kind == OpKind::kCollective ? op.coll : CollKind::kSendRecv;
    Transfer t;
    // A p2p exchange of `transfers` transfers one after the other: as many times the bytes.
    const double bytes = op.kind == OpKind::kCollective ? op.bytes : op.transfers * op.bytes;
    t.plan = plan_flows(cluster_, kind, ranks, bytes);
    transfers_.emplace(handle, std::move(t));
    start_phase(handle);
  }

  bool busy() const override { return !pending_.empty() || !instant_.empty(); }

  void advance(SimTime until, std::vector<std::pair<std::uint64_t, SimTime>>& done) override {
    if (!instant_.empty()) {  // transfers with nothing to move end now
      for (std::uint64_t h : instant_) finish(h, done);
      instant_.clear();
      return;
    }
    const double target = t0_ + until.seconds();
    if (pending_.empty()) {
      if (until.ns() < INT64_MAX && target > sg4::Engine::get_clock()) sg4::this_actor::sleep_until(target);
      return;
    }
    // Wait for flows until one transfer (all phases) ends or the clock reaches `until`.
    while (done.empty()) {
      if (pending_.empty()) {  // only instantaneous transfers are left
        for (std::uint64_t h : instant_) finish(h, done);
        instant_.clear();
        return;
      }
      const double timeout = until.ns() == INT64_MAX ? -1.0 : std::max(0.0, target - sg4::Engine::get_clock());
      ssize_t idx = sg4::Comm::wait_any_for(pending_, timeout);
      if (idx < 0) return;  // reached `until`
      while (idx >= 0) {
        const std::uint64_t h = owner_[static_cast<std::size_t>(idx)];
        pending_.erase(pending_.begin() + idx);
        owner_.erase(owner_.begin() + idx);
        Transfer& t = transfers_.at(h);
        if (--t.in_flight == 0) {
          ++t.phase;
          if (t.phase < t.plan.phases.size()) start_phase(h);
          else finish(h, done);
        }
        idx = pending_.empty() ? -1 : sg4::Comm::test_any(pending_);  // others ending at the same time
      }
    }
  }

  void run(const std::function<void()>& body) override {
    static int run_id = 0;  // SimGrid keeps one engine per process: unique names per run
    const std::string prefix = "r" + std::to_string(run_id++) + "_";
    std::vector<std::string> args = {"stepcast", "--cfg=network/model:CM02", "--cfg=network/crosstraffic:0"};
    // SimGrid's own log (configuration lines, warnings) only when asked for.
    if (std::getenv("STEPCAST_SIMGRID_LOG") == nullptr) args.emplace_back("--log=root.thres:critical");
#ifdef STEPCAST_SIMGRID_THREAD_CONTEXTS
    args.push_back("--cfg=contexts/factory:thread");  // AddressSanitizer cannot follow raw contexts
#endif
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    int argc = static_cast<int>(args.size());
    sg4::Engine engine(&argc, argv.data());
    build_platform(prefix);
    sg4::Actor::create(prefix + "engine", hosts_.front(), [this, &body] {
      t0_ = sg4::Engine::get_clock();
      body();
    });
    engine.run();
    hosts_.clear();
  }

 private:
  struct Transfer {
    FlowPlan plan;
    std::size_t phase = 0;
    std::size_t in_flight = 0;
  };

  void start_phase(std::uint64_t h) {
    Transfer& t = transfers_.at(h);
    while (t.phase < t.plan.phases.size()) {
      for (const Flow& f : t.plan.phases[t.phase]) {
        const auto bytes = static_cast<std::uint64_t>(std::llround(f.bytes));
        if (bytes == 0 || f.src == f.dst) continue;
        pending_.push_back(sg4::Comm::sendto_async(hosts_[static_cast<std::size_t>(f.src)],
                                                   hosts_[static_cast<std::size_t>(f.dst)], bytes));
        owner_.push_back(h);
        ++t.in_flight;
      }
      if (t.in_flight > 0) return;
      ++t.phase;  // an empty phase
    }
    instant_.push_back(h);
  }

  void finish(std::uint64_t h, std::vector<std::pair<std::uint64_t, SimTime>>& done) {
    const Transfer& t = transfers_.at(h);
    const SimTime now = SimTime::from_s(sg4::Engine::get_clock() - t0_);
    done.emplace_back(h, now + t.plan.latency);
    transfers_.erase(h);
  }

  // Every (src, dst) pair of ranks the Program's transfers use.
  void collect_pairs(const Program& program) {
    const Placement& pl = program.placement;
    std::set<std::tuple<int, int, int, double>> seen_ops;  // (stage, kind, group, bytes)
    for (const RoleTemplate& role : program.roles) {
      for (const Op& op : role.ops) {
        if (op.kind == OpKind::kCollective) {
          if (!seen_ops.insert({role.stage, static_cast<int>(op.coll), static_cast<int>(op.group), op.bytes}).second) continue;
          const int n = pl.group_size(op.group);
          if (n < 2) continue;
          std::set<int> roots;
          for (int r = 0; r < pl.world(); ++r) {
            if (pl.coords(r).p == role.stage) roots.insert(pl.group_root(op.group, r));
          }
          std::vector<int> members(static_cast<std::size_t>(n));
          for (int root : roots) {
            for (int k = 0; k < n; ++k) members[static_cast<std::size_t>(k)] = pl.group_member(op.group, root, k);
            if (!handles(program, op, members)) continue;
            const FlowPlan fp = plan_flows(cluster_, op.coll, members, op.bytes);
            for (const auto& phase : fp.phases) {
              for (const Flow& f : phase) pairs_.insert({f.src, f.dst});
            }
          }
        } else if (op.kind == OpKind::kSend) {
          for (int r = 0; r < pl.world(); ++r) {
            if (pl.coords(r).p == role.stage) pairs_.insert({r, pl.stage_peer(r, op.peer_stage)});
          }
        }
      }
    }
  }

  int leaf_of(int node, int nic) const {
    switch (cluster_.topology) {
      case Topology::kSingleSwitch: return 0;
      case Topology::kFatTree: return node / cluster_.nodes_per_leaf;
      case Topology::kRailOptimized: {
        // A rail leaf has the ports of a fat-tree leaf, all on one rail.
        const int nodes_per_rail_leaf = cluster_.nodes_per_leaf * cluster_.nics_per_node;
        const int groups = (cluster_.nodes + nodes_per_rail_leaf - 1) / nodes_per_rail_leaf;
        return nic * groups + node / nodes_per_rail_leaf;
      }
    }
    return 0;
  }

  void build_platform(const std::string& prefix) {
    const int world = cluster_.world();
    const int gpn = cluster_.gpus_per_node;
    auto* zone = sg4::create_full_zone(prefix + "cluster");
    const double nv_bw = cluster_.intra_bandwidth_GBps * 1e9 * cluster_.intra_efficiency;
    const double nic_bw = cluster_.nic_Gbps * 1e9 / 8 * cluster_.inter_efficiency;
    hosts_.clear();
    std::vector<sg4::Link*> nv(static_cast<std::size_t>(world));
    for (int r = 0; r < world; ++r) {
      hosts_.push_back(zone->create_host(prefix + "g" + std::to_string(r), 1e9));
      nv[static_cast<std::size_t>(r)] = zone->create_split_duplex_link(prefix + "nv" + std::to_string(r), nv_bw)
                                            ->set_latency(0)
                                            ->seal();
    }
    std::map<std::pair<int, int>, sg4::Link*> nic;  // (node, nic index)
    std::map<int, int> leaf_ports;
    for (int node = 0; node < cluster_.nodes; ++node) {
      for (int k = 0; k < cluster_.nics_per_node; ++k) {
        nic[{node, k}] = zone->create_split_duplex_link(
                                 prefix + "nic" + std::to_string(node) + "_" + std::to_string(k), nic_bw)
                             ->set_latency(0)
                             ->seal();
        ++leaf_ports[leaf_of(node, k)];
      }
    }
    std::map<int, sg4::Link*> up;
    if (cluster_.topology != Topology::kSingleSwitch) {
      for (const auto& [leaf, ports] : leaf_ports) {
        up[leaf] = zone->create_split_duplex_link(prefix + "leaf" + std::to_string(leaf),
                                                  ports * nic_bw / cluster_.oversubscription)
                       ->set_latency(0)
                       ->seal();
      }
    }
    using D = sg4::LinkInRoute::Direction;
    auto nic_of = [&](int r) { return (r % gpn) * cluster_.nics_per_node / gpn; };
    for (const auto& [a, b] : pairs_) {
      const int na = a / gpn, nb = b / gpn;
      std::vector<sg4::LinkInRoute> links;
      if (na == nb) {
        links = {{nv[static_cast<std::size_t>(a)], D::UP}, {nv[static_cast<std::size_t>(b)], D::DOWN}};
      } else {
        const int ka = nic_of(a), kb = nic_of(b);
        const int la = leaf_of(na, ka), lb = leaf_of(nb, kb);
        links.push_back({nic.at({na, ka}), D::UP});
        if (la != lb) {
          links.push_back({up.at(la), D::UP});
          links.push_back({up.at(lb), D::DOWN});
        }
        links.push_back({nic.at({nb, kb}), D::DOWN});
      }
      zone->add_route(hosts_[static_cast<std::size_t>(a)]->get_netpoint(),
                      hosts_[static_cast<std::size_t>(b)]->get_netpoint(), nullptr, nullptr, links, false);
    }
    zone->seal();
  }

  ClusterSpec cluster_;
  AnalyticBackend analytic_;
  SimgridOptions opt_;
  std::set<std::pair<int, int>> pairs_;
  std::vector<sg4::Host*> hosts_;
  std::vector<sg4::CommPtr> pending_;
  std::vector<std::uint64_t> owner_;
  std::vector<std::uint64_t> instant_;
  std::map<std::uint64_t, Transfer> transfers_;
  double t0_ = 0;
};

}  // namespace

}  // namespace stepcast::sim

// The plugin's one exported symbol (simgrid_plugin.h: SimgridPluginFactoryFn).
extern "C" __attribute__((visibility("default"))) stepcast::sim::NetworkBackend* stepcast_simgrid_create_backend(
    const stepcast::sim::SimgridPluginArgs* args) noexcept {
  using namespace stepcast::sim;
  const SimgridPluginArgs expected;
  if (args == nullptr || args->abi != expected.abi || args->sizeof_cluster != expected.sizeof_cluster ||
      args->sizeof_program != expected.sizeof_program || args->sizeof_options != expected.sizeof_options ||
      args->cluster == nullptr || args->program == nullptr || args->options == nullptr) {
    return nullptr;
  }
  try {
    return new SimgridBackend(*args->cluster, *args->program, *args->options);
  } catch (...) {
    return nullptr;
  }
}

// The simgrid backend: isolated collectives agree with the alpha-beta model (flows on an
// idle fabric move what the ring / hierarchical / pairwise formulas say); concurrent groups
// contend for oversubscribed uplinks by the factor derived by hand; rail-optimized and
// fat-tree fabrics differ where they should; output is deterministic.
#include "stepcast/sim/simgrid_backend.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "stepcast/models/collectives.h"
#include "stepcast/models/presets.h"
#include "stepcast/models/scenario.h"
#include "stepcast/sim/analysis.h"
#include "stepcast/sim/engine.h"
#include "stepcast/sim/flows.h"
#include "stepcast/sim/run.h"

namespace {

using namespace stepcast;

#define SKIP_WITHOUT_SIMGRID() \
  if (!sim::simgrid_available()) GTEST_SKIP() << "built without SimGrid"

// dgx-h100 nodes (8 GPUs, 450 GB/s x 0.82 NVLink, 8 x 400 Gb/s x 0.9 NICs).
ClusterSpec h100_cluster(int nodes, int gpus_per_node = 8) {
  ClusterSpec c = builtin_presets().clusters.at("dgx-h100");
  c.nodes = nodes;
  c.gpus_per_node = gpus_per_node;
  c.nics_per_node = gpus_per_node;
  return c;
}

// A one-op Program: every rank of a dp = world group runs one collective.
Program one_collective(const ClusterSpec& c, CollKind kind, double bytes) {
  Program p;
  p.placement = Placement{1, 1, c.world(), 1, 1, c.gpus_per_node};
  p.roles.resize(1);
  Op op;
  op.kind = OpKind::kCollective;
  op.stream = Stream::kDp;
  op.comm = CommClass::kDp;
  op.coll = kind;
  op.group = GroupKind::kDp;
  op.bytes = bytes;
  op.name = p.intern("collective");
  p.roles[0].ops.push_back(op);
  return p;
}

double flow_time(const ClusterSpec& c, CollKind kind, double bytes) {
  const Program p = one_collective(c, kind, bytes);
  sim::SimgridOptions o;
  o.intra_node_flows = true;
  auto backend = sim::make_simgrid_backend(c, p, o);  // through the plugin
  if (!backend) {
    ADD_FAILURE() << backend.error().message;
    return 0;
  }
  sim::EngineOptions eo;
  eo.full = true;
  const sim::SimOutput out = sim::simulate(p, **backend, eo);
  EXPECT_FALSE(out.deadlock);
  return out.timeline.step_end.back().seconds();
}

double analytic_time(const ClusterSpec& c, CollKind kind, double bytes) {
  return collective_cost(c, kind, group_shape(c.world(), 1, c.gpus_per_node), bytes).time_s;
}

struct Case {
  CollKind kind;
  int nodes, gpus_per_node;
};

TEST(Simgrid, IsolatedCollectivesAgreeWithTheAlphaBetaModelWithinFivePercent) {
  SKIP_WITHOUT_SIMGRID();
  // 64 MiB per collective: bandwidth-bound, so the comparison tests the flows (the alpha
  // terms are added identically by construction).
  const double S = 64.0 * 1024 * 1024;
  const Case cases[] = {
      // inside one node: 2, 4, 8 ranks
      {CollKind::kAllReduce, 1, 2}, {CollKind::kAllReduce, 1, 8}, {CollKind::kAllGather, 1, 4},
      {CollKind::kReduceScatter, 1, 8}, {CollKind::kAllToAll, 1, 8},
      // across nodes, one rank per node (rings over the NICs): 2, 16, 64 ranks
      {CollKind::kAllReduce, 2, 1}, {CollKind::kAllReduce, 16, 1}, {CollKind::kAllGather, 64, 1},
      {CollKind::kReduceScatter, 16, 1}, {CollKind::kAllToAll, 16, 1},
      // across nodes, 8 ranks per node: 16 and 64 ranks (ring per NIC, hierarchical)
      {CollKind::kAllReduce, 2, 8}, {CollKind::kAllReduce, 8, 8}, {CollKind::kAllGather, 8, 8},
      {CollKind::kReduceScatter, 2, 8}, {CollKind::kAllToAll, 2, 8}, {CollKind::kAllToAll, 8, 8}};
  for (const Case& k : cases) {
    const ClusterSpec c = h100_cluster(k.nodes, k.gpus_per_node);
    const double a = analytic_time(c, k.kind, S);
    const double f = flow_time(c, k.kind, S);
    EXPECT_NEAR(f / a, 1.0, 0.05) << to_string(k.kind) << " on " << k.nodes << " x " << k.gpus_per_node
                                  << ": simgrid " << f << " s, analytic " << a << " s";
  }
}

TEST(Simgrid, RingFlowsCarryTheBusVolumeOnEveryLink) {
  // All-reduce, 4 ranks in one node: one ring, each hop 2(n-1)/n * S = 1.5 S.
  const ClusterSpec c = h100_cluster(1, 4);
  const int ranks[] = {0, 1, 2, 3};
  const sim::FlowPlan fp = sim::plan_flows(c, CollKind::kAllReduce, ranks, 1e9);
  ASSERT_EQ(fp.phases.size(), 1u);
  ASSERT_EQ(fp.phases[0].size(), 4u);
  for (const sim::Flow& f : fp.phases[0]) {
    EXPECT_EQ(f.dst, (f.src + 1) % 4);
    EXPECT_DOUBLE_EQ(f.bytes, 1.5e9);
  }
  // Across 2 nodes with 2 members each: 2 rings (one per NIC), each member sends one
  // inter-node hop in exactly one of them.
  const ClusterSpec c2 = h100_cluster(2, 2);
  const sim::FlowPlan f2 = sim::plan_flows(c2, CollKind::kAllGather, ranks, 1e9, CollAlgo::kRing);
  int inter_from[4] = {};
  for (const sim::Flow& f : f2.phases[0]) {
    if (f.src / 2 != f.dst / 2) ++inter_from[f.src];
    EXPECT_DOUBLE_EQ(f.bytes, 0.75e9 / 2);  // (n-1)/n S split over 2 rings
  }
  for (int n : inter_from) EXPECT_EQ(n, 1);
}

// The contention scenario: 32 DGX H100 nodes, each its own leaf (ToR per node) with 2:1
// uplink oversubscription, TP8 inside nodes and DP32 across them, DDP without overlap (the
// whole all-reduce is exposed). Hand derivation: every DP ring (one per TP rank, 8 rings)
// has each hop crossing the spine, so each node's uplink carries 8 flows in each direction;
// its capacity is 8 NICs x B / 2 = 4 B, so each flow gets B / 2: the bandwidth part of the
// all-reduce takes twice as long; the latency part (2 (n-1) alpha) is unchanged.
const char* kContention = R"({
  "model": "llama3-8b",
  "cluster": { "preset": "dgx-h100", "nodes": 32,
               "inter_node": { "oversubscription": 2.0, "nodes_per_leaf": 1, "topology": "TOPO" } },
  "plan": { "tp": 8, "pp": 1, "dp": 32, "global_batch": 64, "zero": 0, "overlap_grad_reduce": false,
            "sequence_parallel": true },
  "workload": { "seq_len": 8192 } })";

sim::RunResult run(const std::string& text, const std::string& network) {
  auto s = parse_scenario(text);
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message);
  sim::RunOptions o;
  o.network = network;
  auto r = sim::run_scenario(*s, o);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return *r;
}

std::string with_topology(const char* topo) {
  std::string t = kContention;
  t.replace(t.find("TOPO"), 4, topo);
  return t;
}

TEST(Simgrid, OversubscribedUplinksDoubleTheBandwidthTimeOfDpRingsCrossingThem) {
  SKIP_WITHOUT_SIMGRID();
  const sim::RunResult a = run(with_topology("fat-tree"), "analytic");
  const sim::RunResult f = run(with_topology("fat-tree"), "simgrid");
  const auto& ca = a.summary.ranks[a.summary.critical];
  const auto& cf = f.summary.ranks[f.summary.critical];
  // Split the analytic DP time into latency and bandwidth: the DP group has 32 ranks, one
  // per node, ring all-reduce: latency 2 * 31 * 5 us.
  const double latency = 2 * 31 * 5e-6;
  const double bw = ca.dp - latency;
  ASSERT_GT(bw, 0.1);
  EXPECT_NEAR(cf.dp, latency + 2 * bw, 0.02 * cf.dp);
  EXPECT_NEAR(f.summary.step_time_s - a.summary.step_time_s, bw, 0.02 * bw);
  EXPECT_DOUBLE_EQ(cf.tp, ca.tp);  // TP stays inside the nodes
}

TEST(Simgrid, RailOptimizedFabricKeepsSameRailRingsOffTheSpine) {
  SKIP_WITHOUT_SIMGRID();
  // A rail leaf connects NIC r of nodes_per_leaf x 8 = 8 nodes: the DP ring of TP rank r
  // (all on rail r) crosses the spine only between rail groups (4 of 32 hops), far below
  // the uplink capacity: no contention, the analytic time.
  const sim::RunResult a = run(with_topology("rail-optimized"), "analytic");
  const sim::RunResult f = run(with_topology("rail-optimized"), "simgrid");
  EXPECT_NEAR(f.summary.step_time_s, a.summary.step_time_s, 1e-3 * a.summary.step_time_s);
}

TEST(Simgrid, TpAcrossNodesIsSlowerOnRailOptimizedThanOnFatTree) {
  SKIP_WITHOUT_SIMGRID();
  // TP16 over 2 nodes of one fat-tree leaf: the ring's inter-node hops go from local GPU
  // c-1 to local GPU c (rings enter each node at their own member), i.e. across rails. On
  // the fat tree both nodes share a leaf (no spine); on the rail-optimized fabric cross-rail
  // traffic goes through the 2:1 spine.
  const std::string base = R"({
    "model": {"preset": "llama3-8b"},
    "cluster": { "preset": "dgx-h100", "nodes": 4,
                 "inter_node": { "oversubscription": 2.0, "nodes_per_leaf": 2, "topology": "TOPO" } },
    "plan": { "tp": 16, "dp": 2, "replicate_kv_heads": true, "sequence_parallel": true, "global_batch": 2 },
    "workload": { "seq_len": 8192 } })";
  auto topo = [&](const char* t) {
    std::string s = base;
    s.replace(s.find("TOPO"), 4, t);
    return s;
  };
  const sim::RunResult fat = run(topo("fat-tree"), "simgrid");
  const sim::RunResult rail = run(topo("rail-optimized"), "simgrid");
  const auto& tf = fat.summary.ranks[fat.summary.critical];
  const auto& tr = rail.summary.ranks[rail.summary.critical];
  EXPECT_GT(tr.tp, 1.2 * tf.tp);
  EXPECT_GT(rail.summary.step_time_s, fat.summary.step_time_s);
}

TEST(Simgrid, ReportsAreByteIdenticalAcrossRuns) {
  SKIP_WITHOUT_SIMGRID();
  auto s = parse_scenario(with_topology("fat-tree"));
  ASSERT_TRUE(s.ok());
  std::string first;
  for (int i = 0; i < 2; ++i) {
    const sim::RunResult r = run(with_topology("fat-tree"), "simgrid");
    const std::string json = sim::simulate_report_json(*s, r.program, r.summary, r.full, 1) +
                             chrome_trace_json(r.program, r.out.timeline);
    if (i == 0) first = json;
    else EXPECT_EQ(json, first);
  }
}

// The plugin is looked for next to the executable first, then in ../lib/stepcast (where the
// build puts it: build/lib/stepcast, beside build/tests), then in the install directory.
TEST(SimgridPlugin, SearchesTheExecutablesDirectoryThenLibStepcastBesideIt) {
  SKIP_WITHOUT_SIMGRID();
  if (std::getenv("STEPCAST_PLUGIN_DIR") != nullptr) GTEST_SKIP() << "STEPCAST_PLUGIN_DIR overrides the search";
  namespace fs = std::filesystem;
  const fs::path exe_dir = fs::read_symlink("/proc/self/exe").parent_path();
  const std::vector<std::string> dirs = sim::plugin_search_dirs();
  ASSERT_GE(dirs.size(), 2u);
  EXPECT_EQ(dirs[0], exe_dir.lexically_normal().string());
  EXPECT_EQ(dirs[1], (exe_dir / ".." / "lib" / "stepcast").lexically_normal().string());
}

// STEPCAST_PLUGIN_DIR replaces the search; when the plugin is not there the error names
// every path tried and dlopen's reason. Run in a fresh process (the plugin is loaded once
// per process, and this process may have loaded it already).
TEST(SimgridPlugin, MissingPluginErrorNamesThePathsTried) {
  SKIP_WITHOUT_SIMGRID();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("STEPCAST_PLUGIN_DIR", "/nonexistent/stepcast-plugins", 1);
        const ClusterSpec c = h100_cluster(1, 2);
        const auto backend = sim::make_simgrid_backend(c, one_collective(c, CollKind::kAllReduce, 1e6));
        const std::string expected =
            "network \"simgrid\": cannot load libstepcast-simgrid.so (tried "
            "/nonexistent/stepcast-plugins/libstepcast-simgrid.so): "
            "/nonexistent/stepcast-plugins/libstepcast-simgrid.so: cannot open shared object file: "
            "No such file or directory";
        const std::string got = backend ? std::string("loaded") : backend.error().message;
        std::fprintf(stderr, "%s\n", got.c_str());
        std::exit(got == expected ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace

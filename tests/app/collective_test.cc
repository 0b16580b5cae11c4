// `collective` (app/collective.h): one collective priced by the model, checked by hand from
// the dgx-h100 preset (models/data/clusters.json: NVLink 450 GB/s per GPU per direction,
// alpha 2.5 us; 8 x 400 Gb/s NICs per node of 8 GPUs, alpha 5 us; efficiencies 0.82 / 0.9,
// specs.h), and the band rule of docs/model-reference.md 5.6.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include <nlohmann/json.hpp>

#include "stepcast/app/collective.h"
#include "stepcast/models/presets.h"

namespace {

using stepcast::CollAlgo;
using stepcast::CollKind;
using stepcast::app::CollectiveReport;
using stepcast::app::CollectiveRequest;
using stepcast::app::CollectiveRow;
using stepcast::app::parse_size_bytes;
using stepcast::app::run_collective;

constexpr double kGiB = 1073741824.0;

CollectiveReport run_ok(const CollectiveRequest& q) {
  auto r = run_collective(q);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? *r : CollectiveReport{};
}

CollectiveRequest all_reduce(std::int64_t bytes, int gpus) {
  CollectiveRequest q;
  q.kind = CollKind::kAllReduce;
  q.size_bytes = bytes;
  q.gpus = gpus;
  return q;
}

const CollectiveRow* find(const CollectiveReport& r, CollAlgo a) {
  for (const CollectiveRow& row : r.algorithms) {
    if (row.algo == a) return &row;
  }
  return nullptr;
}

TEST(Collective, PresetNumbersAreThoseTheHandCalculationsUse) {
  const auto& c = stepcast::builtin_presets().clusters.at("dgx-h100");
  EXPECT_EQ(c.gpus_per_node, 8);
  EXPECT_EQ(c.intra_bandwidth_GBps, 450);
  EXPECT_EQ(c.intra_latency_us, 2.5);
  EXPECT_EQ(c.intra_efficiency, 0.82);
  EXPECT_EQ(c.inter_latency_us, 5.0);
  EXPECT_EQ(c.inter_efficiency, 0.9);
  EXPECT_EQ(c.nic_Gbps, 400);
  EXPECT_EQ(c.nics_per_node, 8);
}

TEST(Collective, RingAllReduceInOneNodeMatchesTheHandCalculation) {
  // 8 GPUs in one node, S = 1 GiB, ring, priced as NCCL's tuner (src/graph/tuning.cc) prices
  // it: Simple, base 8.4 us + 14 steps x 3.4 us over NVLink, on the whole link:
  //   56e-6 + 1.75 x 1073741824 / (450e9 x 0.82) = 56e-6 + 5.092271...e-3 s.
  // LL128 (14 + 14 x 1.9 = 40.6 us at 0.92 of the link, 5.576 ms) and LL (a quarter, capped
  // at 87.7 GB/s: 21.4 ms) are slower at this size.
  CollectiveRequest q = all_reduce(std::int64_t{1} << 30, 8);
  q.algo = CollAlgo::kRing;
  const CollectiveReport r = run_ok(q);
  ASSERT_EQ(r.algorithms.size(), 1u);
  const CollectiveRow& row = r.algorithms[0];
  const double t = (8.4 + 14 * 3.4) * 1e-6 + 1.75 * kGiB / (450e9 * 0.82);
  EXPECT_EQ(row.proto, stepcast::NcclProto::kSimple);
  EXPECT_NEAR(row.time_s, t, 1e-12);
  EXPECT_NEAR(row.time_s, 5.148271e-3, 1e-9);
  // algbw = S / t; busbw = algbw x 2(n-1)/n = algbw x 1.75.
  EXPECT_NEAR(row.algbw_GBps, kGiB / t / 1e9, 1e-9);
  EXPECT_NEAR(row.busbw_GBps / row.algbw_GBps, 2.0 * 7 / 8, 1e-12);
  EXPECT_EQ(r.bus_factor, 1.75);
  // Placement: one node of 8, contiguous.
  EXPECT_EQ(r.shape.ranks, 8);
  EXPECT_EQ(r.shape.ranks_per_node, 8);
  EXPECT_EQ(r.shape.nodes, 1);
  // In one node ring is the only all-reduce the model has, so auto picks it.
  EXPECT_EQ(r.auto_algo, CollAlgo::kRing);
  EXPECT_TRUE(row.is_auto);
}

TEST(Collective, BandIsTheModelAtTheCornersOfTheInputRanges) {
  // Same case. Low corner: latencies x 0.5, intra_efficiency 0.82 + 0.05; high corner:
  // latencies x 2, 0.82 - 0.05 (one node: inter_efficiency does not enter). Simple at both.
  CollectiveRequest q = all_reduce(std::int64_t{1} << 30, 8);
  q.algo = CollAlgo::kRing;
  const CollectiveReport r = run_ok(q);
  const CollectiveRow& row = r.algorithms.at(0);
  EXPECT_NEAR(row.band_low_s, 0.5 * 56e-6 + 1.75 * kGiB / (450e9 * 0.87), 1e-12);
  EXPECT_NEAR(row.band_high_s, 2 * 56e-6 + 1.75 * kGiB / (450e9 * 0.77), 1e-12);
  EXPECT_NEAR(r.band.intra_low, 0.77, 1e-12);
  EXPECT_NEAR(r.band.intra_high, 0.87, 1e-12);
  EXPECT_NEAR(r.band.inter_low, 0.80, 1e-12);
  EXPECT_NEAR(r.band.inter_high, 1.00, 1e-12);
  EXPECT_EQ(r.band.alpha_low, 0.5);
  EXPECT_EQ(r.band.alpha_high, 2.0);
}

TEST(Collective, BandContainsThePointEstimateForEveryKindAndSize) {
  for (CollKind k : {CollKind::kAllReduce, CollKind::kAllGather, CollKind::kReduceScatter, CollKind::kAllToAll,
                     CollKind::kBroadcast, CollKind::kSendRecv}) {
    for (std::int64_t bytes : {std::int64_t{8}, std::int64_t{1} << 20, std::int64_t{1} << 32}) {
      CollectiveRequest q = all_reduce(bytes, 64);
      q.kind = k;
      q.sweep = bytes >= 8;
      const CollectiveReport r = run_ok(q);
      ASSERT_FALSE(r.algorithms.empty());
      for (const auto* rows : {&r.algorithms, &r.sweep}) {
        for (const CollectiveRow& row : *rows) {
          EXPECT_LE(row.band_low_s, row.time_s) << to_string(k) << " " << row.size_bytes;
          EXPECT_GE(row.band_high_s, row.time_s) << to_string(k) << " " << row.size_bytes;
          EXPECT_LT(row.band_low_s, row.band_high_s) << to_string(k) << " " << row.size_bytes;
        }
      }
    }
  }
}

TEST(Collective, SixtyFourGpusListEveryAllReduceAndAutoPicksTheFastest) {
  // 64 GPUs contiguous on dgx-h100: 8 per node on 8 nodes. The model has ring, tree and
  // hierarchical all-reduce across nodes; auto is the smallest time of the three.
  for (std::int64_t bytes : {std::int64_t{1} << 10, std::int64_t{1} << 20, std::int64_t{1} << 30}) {
    const CollectiveReport r = run_ok(all_reduce(bytes, 64));
    EXPECT_EQ(r.shape.ranks_per_node, 8);
    EXPECT_EQ(r.shape.nodes, 8);
    EXPECT_EQ(r.cluster.nodes, 8);
    ASSERT_EQ(r.algorithms.size(), 3u);
    EXPECT_EQ(r.algorithms[0].algo, CollAlgo::kRing);
    EXPECT_EQ(r.algorithms[1].algo, CollAlgo::kTree);
    EXPECT_EQ(r.algorithms[2].algo, CollAlgo::kHierarchical);
    const CollectiveRow* fastest = &r.algorithms[0];
    int marked = 0;
    for (const CollectiveRow& row : r.algorithms) {
      if (row.time_s < fastest->time_s) fastest = &row;
      marked += row.is_auto ? 1 : 0;
    }
    EXPECT_EQ(marked, 1);
    EXPECT_EQ(r.auto_algo, fastest->algo) << bytes;
    EXPECT_TRUE(fastest->is_auto);
  }
  // 1 GiB by hand: B_nv = 369e9, B_net = 8 x 400e9/8 / 8 x 0.9 = 45e9 B/s per GPU, the ring
  // over nodes at min(B_nv, 8 B_net) = 360e9. NCCL's tuner: 126 ring steps, 16 of them across
  // nodes (2N), 110 over NVLink.
  //   ring Simple (8.4 + 110 x 3.4 + 16 x 14) us x 1.4 (plateau) + (126/64) S / 360e9 = 6.721 ms;
  //   ring LL128  (14 + 110 x 1.9 + 16 x 4) us + (126/64) S / (0.92 x 360e9) = 6.670 ms;
  //   tree Simple 2 (7 x 28 + 3 x 28) us + 2 S / (0.92 x 360e9) = 7.044 ms;
  //   tree LL128  (14 + 2 (7 x 1.25 + 3 x 8.5)) us + 2 S / (0.92 x 120/128 x 360e9) = 6.999 ms.
  const CollectiveReport r = run_ok(all_reduce(std::int64_t{1} << 30, 64));
  const double ring_simple = (8.4 + 110 * 3.4 + 16 * 14) * 1.4e-6 + 126.0 / 64 * kGiB / 360e9;
  const double ring_ll128 = (14 + 110 * 1.9 + 16 * 4) * 1e-6 + 126.0 / 64 * kGiB / (0.92 * 360e9);
  const double tree_simple = 2 * (7 * 28 + 3 * 28) * 1e-6 + 2 * kGiB / (0.92 * 360e9);
  const double tree_ll128 = (14 + 2 * (7 * 1.25 + 3 * 8.5)) * 1e-6 + 2 * kGiB / (0.92 * 120 / 128 * 360e9);
  EXPECT_NEAR(find(r, CollAlgo::kRing)->time_s, std::min(ring_simple, ring_ll128), 1e-12);
  EXPECT_EQ(find(r, CollAlgo::kRing)->proto, stepcast::NcclProto::kLL128);
  EXPECT_NEAR(find(r, CollAlgo::kTree)->time_s, std::min(tree_simple, tree_ll128), 1e-12);
  EXPECT_EQ(find(r, CollAlgo::kTree)->proto, stepcast::NcclProto::kLL128);
  EXPECT_NEAR(find(r, CollAlgo::kRing)->time_s, 6.6696e-3, 0.0001e-3);
  EXPECT_EQ(find(r, CollAlgo::kHierarchical)->proto, stepcast::NcclProto::kNone);
  // Hierarchical: 2 [7/8 S / 369e9 + 7 x 2.5e-6] + 2 x 7/8 x (S/8) / 45e9 + 14 x 5e-6.
  EXPECT_NEAR(find(r, CollAlgo::kHierarchical)->time_s,
              2 * (0.875 * kGiB / 369e9 + 7 * 2.5e-6) + 2 * 0.875 * (kGiB / 8) / 45e9 + 14 * 5e-6, 1e-12);
}

TEST(Collective, StridedGroupSpansOneRankPerNode) {
  // A DP group of 8 ranks 8 apart: one rank on each of 8 nodes; hierarchical needs q > 1.
  CollectiveRequest q = all_reduce(std::int64_t{1} << 30, 8);
  q.stride = 8;
  const CollectiveReport r = run_ok(q);
  EXPECT_EQ(r.shape.ranks_per_node, 1);
  EXPECT_EQ(r.shape.nodes, 8);
  EXPECT_EQ(r.cluster.nodes, 8);  // GPUs 0, 8, ..., 56 span 57 GPUs = 8 nodes
  ASSERT_EQ(r.algorithms.size(), 2u);
  EXPECT_EQ(r.algorithms[1].algo, CollAlgo::kTree);
}

TEST(Collective, SweepDoublesFromEightBytesUpToTheSize) {
  CollectiveRequest q = all_reduce(std::int64_t{1} << 20, 64);
  q.sweep = true;
  const CollectiveReport r = run_ok(q);
  // 8 = 2^3 ... 2^20: 18 rows.
  ASSERT_EQ(r.sweep.size(), 18u);
  for (std::size_t i = 0; i < r.sweep.size(); ++i) {
    EXPECT_EQ(r.sweep[i].size_bytes, std::int64_t{8} << i);
    EXPECT_TRUE(r.sweep[i].is_auto);  // no --algo: the algorithm auto picks at each size
  }
  EXPECT_EQ(r.sweep.back().algo, r.auto_algo);
  EXPECT_EQ(r.sweep.back().time_s, find(r, r.auto_algo)->time_s);
  // A size that is no power of two stops below it, as nccl-tests -f 2: 8 ... 512 for 1000.
  q.size_bytes = 1000;
  EXPECT_EQ(run_ok(q).sweep.size(), 7u);
  // With --algo the sweep keeps that algorithm.
  q.algo = CollAlgo::kTree;
  for (const CollectiveRow& row : run_ok(q).sweep) EXPECT_EQ(row.algo, CollAlgo::kTree);
}

TEST(Collective, BusFactorsAreTheNcclTestsOnes) {
  auto factor = [](CollKind k, int n) {
    CollectiveRequest q = all_reduce(std::int64_t{1} << 20, n);
    q.kind = k;
    const CollectiveReport r = run_ok(q);
    const CollectiveRow& row = r.algorithms.at(0);
    EXPECT_NEAR(row.busbw_GBps / row.algbw_GBps, r.bus_factor, 1e-12);
    EXPECT_NEAR(row.algbw_GBps, (1 << 20) / row.time_s / 1e9, 1e-9);
    return r.bus_factor;
  };
  EXPECT_EQ(factor(CollKind::kAllReduce, 16), 2.0 * 15 / 16);
  EXPECT_EQ(factor(CollKind::kAllGather, 16), 15.0 / 16);
  EXPECT_EQ(factor(CollKind::kReduceScatter, 16), 15.0 / 16);
  EXPECT_EQ(factor(CollKind::kAllToAll, 16), 15.0 / 16);
  EXPECT_EQ(factor(CollKind::kBroadcast, 16), 1.0);
  EXPECT_EQ(factor(CollKind::kSendRecv, 2), 1.0);
}

TEST(Collective, SendRecvAcrossNodesWithStride) {
  // Two ranks 8 apart: different nodes; t = alpha_net + S / B_net = 5e-6 + S / 45e9.
  CollectiveRequest q = all_reduce(std::int64_t{1} << 30, 0);
  q.kind = CollKind::kSendRecv;
  q.stride = 8;
  const CollectiveReport r = run_ok(q);
  ASSERT_EQ(r.algorithms.size(), 1u);
  EXPECT_EQ(r.algorithms[0].algo, CollAlgo::kDirect);
  EXPECT_NEAR(r.algorithms[0].time_s, 5e-6 + kGiB / 45e9, 1e-12);
}

TEST(Collective, ParsesSizesWithBinaryAndDecimalPrefixes) {
  EXPECT_EQ(*parse_size_bytes("1GiB"), std::int64_t{1} << 30);
  EXPECT_EQ(*parse_size_bytes("512MiB"), std::int64_t{512} << 20);
  EXPECT_EQ(*parse_size_bytes("1GB"), 1'000'000'000);
  EXPECT_EQ(*parse_size_bytes("4KiB"), 4096);
  EXPECT_EQ(*parse_size_bytes("4kB"), 4000);
  EXPECT_EQ(*parse_size_bytes("64K"), 65536);  // one letter: binary, as nccl-tests
  EXPECT_EQ(*parse_size_bytes("1G"), std::int64_t{1} << 30);
  EXPECT_EQ(*parse_size_bytes("1e9"), 1'000'000'000);
  EXPECT_EQ(*parse_size_bytes("1048576"), 1048576);
  EXPECT_EQ(*parse_size_bytes("8B"), 8);
  EXPECT_EQ(*parse_size_bytes("1.5KiB"), 1536);
  EXPECT_EQ(*parse_size_bytes("1TiB"), std::int64_t{1} << 40);
  for (const char* bad : {"", "GiB", "1XB", "-1", "0", "1.3K", "1e-3", "1e300", "2PiB", "1 GiB", "abc", "1e", "nan"}) {
    auto r = parse_size_bytes(bad);
    EXPECT_FALSE(r.ok()) << bad;
  }
  EXPECT_EQ(parse_size_bytes("1XB").error().message,
            "expected a size in bytes such as 1GiB, 512MiB, 1GB, 64K, 1e9 or 1048576, got \"1XB\" (units: B; KiB, "
            "MiB, GiB, TiB and K, M, G = powers of 1024; KB, MB, GB, TB = powers of 1000)");
}

TEST(Collective, BadRequestsNameTheArgument) {
  auto message = [](const CollectiveRequest& q) {
    auto r = run_collective(q);
    return r.ok() ? std::string("ok") : r.error().message;
  };
  EXPECT_EQ(message(all_reduce(1 << 20, 1)).rfind("--gpus: all_reduce needs 2 to", 0), 0u);
  EXPECT_EQ(message(all_reduce(1 << 20, 0)), "--gpus: required for all_reduce (the ranks in the group)");
  CollectiveRequest q = all_reduce(1 << 20, 8);
  q.cluster = "dgx-h10";
  EXPECT_EQ(message(q).rfind("--cluster: unknown cluster preset \"dgx-h10\" (did you mean", 0), 0u) << message(q);
  q = all_reduce(1 << 20, 8);
  q.algo = CollAlgo::kTree;
  EXPECT_EQ(message(q).rfind("--algo: tree is not available for all_reduce", 0), 0u) << message(q);
  q = all_reduce(4, 8);
  q.sweep = true;
  EXPECT_EQ(message(q).rfind("SIZE: --sweep", 0), 0u) << message(q);
  q = all_reduce(1 << 20, 8);
  q.stride = 0;
  EXPECT_EQ(message(q).rfind("--stride:", 0), 0u) << message(q);
}

TEST(Collective, ForcedProtocolIsPricedWithItsOwnLatenciesAndLinkShare) {
  // all_gather of 1 MB (10^6 B) on 32 GPUs = 4 nodes of 8, ring, NCCL_PROTO=Simple: 31 steps,
  // 3 of them between nodes; base 8.4 us + 28 x 3.4 us (NVLink) + 3 x 14.0 us (network)
  // = 145.6 us (the proxy's floor on Intel hosts, 3 x 1 us, is below NVLink's 3.4 us). The
  // ring's slowest link is the network: a node's 8 x 400 Gb/s NICs (one per channel) x 0.9
  // = 360 GB/s for (n-1)/n of the bytes: 31/32 x 10^6 / 360e9 = 2.69 us. 148.29 us in all.
  CollectiveRequest q;
  q.kind = CollKind::kAllGather;
  q.size_bytes = 1000000;
  q.gpus = 32;
  q.algo = CollAlgo::kRing;
  q.proto = stepcast::NcclProto::kSimple;
  const CollectiveReport r = run_ok(q);
  ASSERT_EQ(r.algorithms.size(), 1u);
  const CollectiveRow& simple = r.algorithms[0];
  const double t = (8.4 + 28 * 3.4 + 3 * 14.0) * 1e-6 + 31.0 / 32.0 * 1e6 / (8 * 50e9 * 0.9);
  EXPECT_EQ(simple.proto, stepcast::NcclProto::kSimple);
  EXPECT_NEAR(simple.time_s, t, 1e-12);
  EXPECT_NEAR(simple.time_s, 148.29e-6, 0.01e-6);
  EXPECT_LE(simple.band_low_s, simple.time_s);
  EXPECT_GE(simple.band_high_s, simple.time_s);
  EXPECT_EQ(r.forced_proto, stepcast::NcclProto::kSimple);
  EXPECT_NE(stepcast::app::collective_text(r).find("on its Simple protocol only, as NCCL_PROTO=Simple forces it"),
            std::string::npos);
  EXPECT_EQ(nlohmann::json::parse(stepcast::app::collective_json(r))["forced_protocol"], "Simple");

  // Unforced, the tuner takes the fastest protocol: at 1 MB that is not Simple, and no forced
  // protocol is faster than it.
  q.proto.reset();
  const CollectiveReport best = run_ok(q);
  ASSERT_EQ(best.algorithms.size(), 1u);
  EXPECT_NE(best.algorithms[0].proto, stepcast::NcclProto::kSimple);
  EXPECT_LT(best.algorithms[0].time_s, simple.time_s);
  EXPECT_TRUE(nlohmann::json::parse(stepcast::app::collective_json(best))["forced_protocol"].is_null());
  for (auto p : {stepcast::NcclProto::kLL, stepcast::NcclProto::kLL128, stepcast::NcclProto::kSimple}) {
    q.proto = p;
    const CollectiveReport forced = run_ok(q);
    EXPECT_EQ(forced.algorithms[0].proto, p);
    EXPECT_GE(forced.algorithms[0].time_s, best.algorithms[0].time_s);
    if (p == best.algorithms[0].proto) {
      EXPECT_EQ(forced.algorithms[0].time_s, best.algorithms[0].time_s);
    }
  }
}

// The sweep's `*` is what auto runs under the forced protocol too. 256 MiB over 64 H100: the
// tuner's pick is the tree on LL128; on Simple alone the ring is faster (2.317 against 2.361 ms),
// so the sweep's last row, auto at 256 MiB, is the ring and is marked.
TEST(Collective, ForcedProtocolSweepMarksWhatAutoRunsOnThatProtocol) {
  CollectiveRequest q = all_reduce(std::int64_t{256} << 20, 64);
  EXPECT_EQ(run_ok(q).auto_algo, CollAlgo::kTree);
  q.proto = stepcast::NcclProto::kSimple;
  q.sweep = true;
  const CollectiveReport r = run_ok(q);
  ASSERT_EQ(r.auto_algo, CollAlgo::kRing);
  const CollectiveRow* ring = find(r, CollAlgo::kRing);
  const CollectiveRow* tree = find(r, CollAlgo::kTree);
  ASSERT_TRUE(ring != nullptr && tree != nullptr);
  EXPECT_LT(ring->time_s, tree->time_s);
  ASSERT_FALSE(r.sweep.empty());
  EXPECT_EQ(r.sweep.back().size_bytes, q.size_bytes);
  EXPECT_EQ(r.sweep.back().algo, CollAlgo::kRing);
  EXPECT_EQ(r.sweep.back().proto, stepcast::NcclProto::kSimple);
  EXPECT_TRUE(r.sweep.back().is_auto);
  EXPECT_EQ(r.sweep.back().time_s, ring->time_s);
  for (const CollectiveRow& row : r.sweep) EXPECT_TRUE(row.is_auto) << row.size_bytes;
}

TEST(Collective, ForcedProtocolNeedsNcclsTunerAndAKindItPrices) {
  auto message = [](const CollectiveRequest& q) {
    auto r = run_collective(q);
    return r.ok() ? std::string("ok") : r.error().message;
  };
  CollectiveRequest q = all_reduce(1 << 20, 8);
  q.proto = stepcast::NcclProto::kLL;
  EXPECT_EQ(message(q), "ok");
  q.kind = CollKind::kAllToAll;
  EXPECT_EQ(message(q).rfind("--proto: NCCL's tuner prices protocols for all_reduce, all_gather and "
                             "reduce_scatter, not all_to_all",
                             0),
            0u)
      << message(q);
  q = all_reduce(1 << 20, 8);
  q.proto = stepcast::NcclProto::kLL;
  q.cluster = "cpu-host";
  EXPECT_EQ(message(q).rfind("--proto: the cluster prices its collectives with per-hop alphas", 0), 0u) << message(q);
  EXPECT_EQ(*stepcast::app::parse_nccl_proto("ll128"), stepcast::NcclProto::kLL128);
  EXPECT_EQ(*stepcast::app::parse_nccl_proto("SIMPLE"), stepcast::NcclProto::kSimple);
  EXPECT_EQ(*stepcast::app::parse_nccl_proto("LL"), stepcast::NcclProto::kLL);
  EXPECT_EQ(stepcast::app::parse_nccl_proto("LL64").error().message,
            "unknown protocol \"LL64\" (NCCL's protocols: LL, LL128, Simple)");
}

// The plan's groups of scenarios/llama3-70b-64xh100.json (tp 8, pp 4, dp 2, cp 1, ep 1; in
// Megatron's order tp is innermost): TP = 8 consecutive GPUs, DP = 2 GPUs 8 apart.
TEST(Collective, ThePlansGroupsSetTheRanksAndTheStride) {
  const std::string file = std::string(STEPCAST_SOURCE_DIR) + "/scenarios/llama3-70b-64xh100.json";
  auto s = stepcast::app::load(stepcast::app::ScenarioInput::file(file));
  ASSERT_TRUE(s.ok());
  const auto groups = stepcast::app::plan_groups(*s);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].kind, stepcast::GroupKind::kTp);
  EXPECT_EQ(groups[0].ranks, 8);
  EXPECT_EQ(groups[0].stride, 1);
  EXPECT_EQ(groups[1].kind, stepcast::GroupKind::kDp);
  EXPECT_EQ(groups[1].ranks, 2);
  EXPECT_EQ(groups[1].stride, 8);

  CollectiveRequest q;
  q.kind = CollKind::kReduceScatter;
  q.size_bytes = std::int64_t{1} << 30;
  q.cluster_file = stepcast::app::ScenarioInput::file(file);
  q.group = stepcast::GroupKind::kDp;
  const CollectiveReport r = run_ok(q);
  EXPECT_EQ(r.ranks, 2);
  EXPECT_EQ(r.stride, 8);
  EXPECT_EQ(r.shape.nodes, 2);
  EXPECT_EQ(r.shape.ranks_per_node, 1);
  EXPECT_NE(stepcast::app::collective_text(r).find("2 ranks stride 8 (the plan's dp group): 1 per node on 2 nodes"),
            std::string::npos);
  EXPECT_EQ(nlohmann::json::parse(stepcast::app::collective_json(r))["placement"]["group"], "dp");
  // The same group given by hand prices the same.
  CollectiveRequest by_hand = q;
  by_hand.group.reset();
  by_hand.gpus = 2;
  by_hand.stride = 8;
  const CollectiveReport h = run_ok(by_hand);
  ASSERT_EQ(h.algorithms.size(), r.algorithms.size());
  EXPECT_EQ(h.algorithms[0].time_s, r.algorithms[0].time_s);
  EXPECT_TRUE(nlohmann::json::parse(stepcast::app::collective_json(h))["placement"]["group"].is_null());

  auto message = [](const CollectiveRequest& x) {
    auto res = run_collective(x);
    return res.ok() ? std::string("ok") : res.error().message;
  };
  CollectiveRequest bad = q;
  bad.group = stepcast::GroupKind::kEp;
  EXPECT_EQ(message(bad), "--group: the plan's ep group has one rank (tp 8, cp 1, ep 1, dp 2)");
  bad = q;
  bad.gpus = 4;
  EXPECT_EQ(message(bad).rfind("--group: sets the group's GPUs and stride", 0), 0u);
  bad = q;
  bad.cluster_file.reset();
  EXPECT_EQ(message(bad), "--group: needs --cluster-file (a scenario whose plan has the group)");
  EXPECT_EQ(*stepcast::app::parse_plan_group("cp"), stepcast::GroupKind::kCp);
  EXPECT_EQ(stepcast::app::parse_plan_group("pp").error().message,
            "unknown group \"pp\" (the plan's groups: tp, cp, ep, dp)");
}

TEST(Collective, JsonCarriesTheReportsNumbers) {
  CollectiveRequest q = all_reduce(std::int64_t{1} << 30, 64);
  q.sweep = true;
  const CollectiveReport r = run_ok(q);
  const auto j = nlohmann::json::parse(stepcast::app::collective_json(r));
  EXPECT_EQ(j["format"], 1);
  EXPECT_EQ(j["kind"], "all_reduce");
  EXPECT_EQ(j["size_bytes"], std::int64_t{1} << 30);
  EXPECT_EQ(j["placement"]["nodes"], 8);
  ASSERT_EQ(j["algorithms"].size(), r.algorithms.size());
  for (std::size_t i = 0; i < r.algorithms.size(); ++i) {
    EXPECT_EQ(j["algorithms"][i]["time_us"].get<double>(), r.algorithms[i].time_s * 1e6);
    EXPECT_EQ(j["algorithms"][i]["busbw_GBps"].get<double>(), r.algorithms[i].busbw_GBps);
    EXPECT_EQ(j["algorithms"][i]["band_us"]["low"].get<double>(), r.algorithms[i].band_low_s * 1e6);
  }
  EXPECT_EQ(j["sweep"].size(), r.sweep.size());
  EXPECT_EQ(j["auto"], std::string(to_string(r.auto_algo)));
}

}  // namespace

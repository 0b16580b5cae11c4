// ZeRO-3 fetch per module as DeepSpeed's 2021 stage-3 coordinator ran it (zero3_fetch.h,
// docs/model-reference.md "ZeRO-3 fetch per module"): the coordinator's decisions and the
// trace's time by hand, the rule on two GPT shapes, and where the plan takes it.
#include <gtest/gtest.h>

#include <algorithm>
#include <span>
#include <string>
#include <vector>

#include "stepcast/models/estimate.h"
#include "stepcast/models/layer_cost.h"
#include "stepcast/models/params.h"
#include "stepcast/models/presets.h"
#include "stepcast/models/scenario.h"
#include "stepcast/models/stack.h"
#include "stepcast/models/zero3_fetch.h"

namespace stepcast {
namespace {

// Three weights of 10, 30 and 60 elements used forward (0, 1, 2) and backward (2, 1, 0),
// prefetch bucket 50, live limit 1000, reuse distance 50. By hand, following DeepSpeed's
// fetch_sub_module / prefetch_next_sub_modules / release_sub_module:
//   use 0 (w0): not available: gathered on demand, synchronise; nothing in flight, so
//     prefetch from the trace: w1 (30 < 50, go on), w2 (90: stop). Release w0: its next use
//     is use 5, 30 + 60 + 60 + 30 = 180 elements away (>= 50).
//   use 1 (w1): in flight: synchronise (w1, w2 gathered); prefetch: w2 and w1 are available,
//     w0 is not: w0 (10, the trace ends). Release w1: next use 120 elements away.
//   use 2 (w2): available, no synchronisation; w0 is in flight, so no prefetch. Kept: its
//     backward is the very next use (distance 0 < 50).
//   use 3 (w2): available; released (no later use).
//   use 4 (w1): not available: gathered on demand, synchronise (w0 completes too).
//   use 5 (w0): available (prefetched at use 1).
Zero3Trace toy() {
  Zero3Trace t;
  t.numel = {10, 30, 60};
  t.uses = {{0, 1, false}, {1, 2, false}, {2, 3, false}, {2, 4, true}, {1, 5, true}, {0, 6, true}};
  return t;
}

TEST(Zero3Fetch, CoordinatorFetchesPrefetchesAndReleasesAsDeepSpeedByHand) {
  const Zero3Hooks h = zero3_coordinate(toy(), Zero3Policy{50, 1000, 50});
  ASSERT_EQ(h.size(), 6u);
  auto list = [](std::span<const int> s) { return std::vector<int>(s.begin(), s.end()); };
  const std::vector<bool> sync = {true, true, false, false, true, false};
  const std::vector<std::vector<int>> fetch = {{0}, {}, {}, {}, {1}, {}};
  const std::vector<std::vector<int>> prefetch = {{1, 2}, {0}, {}, {}, {}, {}};
  for (std::size_t i = 0; i < h.size(); ++i) {
    EXPECT_EQ(h.sync(i), sync[i]) << i;
    EXPECT_EQ(list(h.fetch(i)), fetch[i]) << i;
    EXPECT_EQ(list(h.prefetch(i)), prefetch[i]) << i;
  }
  // A reuse limit above 180 keeps every weight gathered from the forward to the backward:
  // use 1 still waits for its prefetched w1, and then nothing is fetched again.
  const Zero3Hooks keep = zero3_coordinate(toy(), Zero3Policy{50, 1000, 1000});
  EXPECT_TRUE(keep.sync(0));
  EXPECT_TRUE(keep.sync(1));
  EXPECT_TRUE(keep.prefetch(1).empty());
  for (std::size_t i = 2; i < keep.size(); ++i) EXPECT_FALSE(keep.sync(i)) << i;
  // Under the live limit only: with 10 elements allowed, use 0's prefetch does not happen
  // and every use of w1 and w2 is fetched on demand.
  const Zero3Hooks tight = zero3_coordinate(toy(), Zero3Policy{50, 10, 50});
  EXPECT_TRUE(tight.prefetch(0).empty());
  EXPECT_EQ(list(tight.fetch(1)), std::vector<int>{1});
  EXPECT_EQ(list(tight.fetch(2)), std::vector<int>{2});
}

TEST(Zero3Fetch, TraceTimeBySegmentsByHand) {
  // Gathers numel / 10 s (1, 3, 6), reduce-scatters numel / 20 s (0.5, 1.5, 3), f = 0.1,
  // one launch 0.5 s after each synchronisation. Clocks from each synchronisation (compute
  // cc, data-parallel stream sc):
  //   use 0: fetch w0, sc 1 -> drain max(0, 1) + 0.5 = 1.5. Prefetch w1: sc 3, cc 0.3; w2:
  //          sc 9, cc 0.9; compute 1: cc 1.9.
  //   use 1: drain max(1.9, 9) + 0.5 = 9.5 (11.0). Prefetch w0: sc 1, cc 0.1; compute 2: cc 2.1.
  //   use 2: cc 5.1. use 3: cc 9.1, reduce w2 after it: sc 9.1 + 3 = 12.1.
  //   use 4: fetch w1 behind it: sc 15.1; drain 15.1 + 0.5 = 15.6 (26.6). compute 5: cc 5,
  //          reduce w1: sc 6.5.
  //   use 5: compute 6: cc 11, reduce w0: sc 11.5. End: max(11, 11.5) = 11.5 -> 38.1.
  // With the first use alone the forward's, its prefetches (w1, w2) are the forward's
  // interference: 0.1 x (3 + 6).
  Zero3Trace t = toy();
  t.forward_uses = 1;
  const Zero3Hooks h = zero3_coordinate(t, Zero3Policy{50, 1000, 50});
  const Zero3Timing z = zero3_time(t, h, {1, 3, 6}, {0.5, 1.5, 3}, 0.1, 0.5);
  EXPECT_NEAR(z.interference_fwd_s, 0.1 * (3 + 6), 1e-12);
  EXPECT_NEAR(z.total_s, 38.1, 1e-12);
  EXPECT_NEAR(z.compute_s, 21.0, 1e-12);
  EXPECT_NEAR(z.interference_s, 0.1 * (3 + 6 + 1), 1e-12);
  EXPECT_EQ(z.syncs, 3);
  EXPECT_NEAR(z.exposed_s(), 38.1 - 21 - 1, 1e-12);
}

TEST(Zero3Fetch, BlockingReduceScattersDelayTheComputeByHand) {
  // The walk above with the compute waiting for each reduce-scatter (overlap_grad_reduce
  // false): use 3's reduce of w2 ends at 12.1 and the compute waits for it, so use 4's
  // synchronisation is unchanged (15.6, 26.6); compute 5 ends at 5, w1's reduce at 6.5, and
  // compute 6 now starts there: 12.5, then w0's reduce: 13.0 -> 39.6 (38.1 overlapped).
  Zero3Trace t = toy();
  t.forward_uses = 1;
  const Zero3Hooks h = zero3_coordinate(t, Zero3Policy{50, 1000, 50});
  const Zero3Timing z = zero3_time(t, h, {1, 3, 6}, {0.5, 1.5, 3}, 0.1, 0.5, nullptr, true);
  EXPECT_NEAR(z.total_s, 39.6, 1e-12);
  EXPECT_NEAR(z.compute_s, 21.0, 1e-12);
  EXPECT_EQ(z.syncs, 3);
}

TEST(Zero3Fetch, SyncedListGathersDrainTheDeviceAndWaitForTheHostByHand) {
  // The toy trace as above, each gather as DeepSpeed 2021's _allgather_param: memsets
  // numel / 100 s (0.1, 0.3, 0.6), copy-backs numel / 50 s (0.2, 0.6, 1.2), the host's issue
  // 2 s, the reduce-scatters' copies numel / 200 s (0.05, 0.15, 0.3). Clocks (compute cc,
  // stream sc, host hc) from each drain or synchronisation:
  //   use 0: fetch w0: drain max(0, 0 + 0.1) = 0.1; sc max(1, 2) + 0.2 = 2.2, hc 2; the
  //          synchronisation: host 2, max(2, 2.2) + 0.5 = 2.7 (2.8). Prefetch w1: drain 0.3
  //          (3.1); sc max(3, 2) + 0.6 = 3.6; host 2, cc 2 + 0.3 = 2.3. Prefetch w2: drain
  //          max(2.3, 3.6 + 0.6) = 4.2 (7.3); sc 6 + 1.2 = 7.2; host 2, cc 2.6; compute: 3.6.
  //   use 1: synchronise max(3.6, 7.2) + 0.5 = 7.7 (15.0). Prefetch w0: drain 0.1 (15.1);
  //          sc 2.2; host 2, cc 2.1; compute 2: 4.1. use 2: 7.1. use 3: 11.1, reduce w2:
  //          sc 11.1 + 3 + 0.3 = 14.4.
  //   use 4: fetch w1: drain max(11.1, 14.4 + 0.3) = 14.7 (29.8); sc 3.6, host 2; the
  //          synchronisation: max(2, 3.6) + 0.5 = 4.1 (33.9). compute 5: 5, reduce w1: sc
  //          5 + 1.5 + 0.15 = 6.65.
  //   use 5: compute 6: 11, reduce w0: sc 11 + 0.55 = 11.55. End: 11.55 -> 45.45.
  // Host: five issues (2 s each) and three launches (0.5 s each) = 11.5.
  Zero3Trace t = toy();
  t.forward_uses = 1;
  const Zero3Hooks h = zero3_coordinate(t, Zero3Policy{50, 1000, 50});
  Zero3GatherWork w;
  w.memset_s_per_elem = 1.0 / 100;
  w.copy_s_per_elem = 1.0 / 50;
  w.reduce_copy_s_per_elem = 1.0 / 200;
  w.issue_s = 2;
  const Zero3Timing z = zero3_time(t, h, {1, 3, 6}, {0.5, 1.5, 3}, 0.1, 0.5, &w);
  EXPECT_NEAR(z.total_s, 45.45, 1e-12);
  EXPECT_NEAR(z.host_s, 11.5, 1e-12);
  EXPECT_EQ(z.syncs, 3);
  EXPECT_EQ(z.drains, 5);
  EXPECT_NEAR(z.compute_s, 21.0, 1e-12);
  EXPECT_NEAR(z.interference_s, 0.1 * (3 + 6 + 1), 1e-12);
  EXPECT_NEAR(z.interference_fwd_s, 0.1 * (3 + 6), 1e-12);
}

TEST(Zero3Fetch, SyncedListWorkIsTheBuffersTrafficAndOneLaunchPerRank) {
  // GPT-3's FC1 weight (4h x h = 603,979,776 elements) on an A100
  // (2039 GB/s at 0.8): memset 2 bytes per element, copy-back 4 (read and write), the
  // gradient's division and flat copy 4 x 2 bytes; 384 ranks: 386 launches of 10 us.
  const GpuSpec& a100 = builtin_presets().gpus.at("a100-sxm-80gb");
  const double n = 4.0 * 12288 * 12288;
  const Zero3GatherWork w = zero3_gather_work(a100, 2, 384, 10);
  const double bw = 2039e9 * 0.8;  // the A100 80GB's HBM2e at stepcast's 0.8 efficiency
  EXPECT_NEAR(a100.hbm_bandwidth_GBps * a100.hbm_efficiency, 2039 * 0.8, 1.0);
  EXPECT_NEAR(w.memset_s(n), 2 * 603979776.0 / bw, 1e-12);
  EXPECT_NEAR(w.copy_s(n), 4 * 603979776.0 / bw, 1e-12);
  EXPECT_NEAR(w.reduce_copy_s(n), 8 * 603979776.0 / bw, 1e-12);
  EXPECT_EQ(w.issue_launches, 386);
  EXPECT_NEAR(w.issue_s, 386 * 10e-6, 1e-15);
}

// GPT-3 175B under DeepSpeed's 2021 ZeRO-3 over 384 ranks, microbatch 4 (the Narayanan et
// al. record's layout).
Plan gpt3_zero3(Recompute rc) {
  Plan p;
  p.dp = 384;
  p.zero = 3;
  p.microbatch = 4;
  p.recompute = rc;
  p.stack = Stack::kDeepspeedZero2021;
  return p;
}

TEST(Zero3Fetch, TimingEachClassOfStretchOnceEqualsTimingEveryStretch) {
  // zero3_time times one stretch between synchronisations per class (Zero3Hooks::
  // segment_class) and counts the rest; the same hooks without their stretches are timed
  // stretch by stretch. GPT-3 175B on 384 A100s, flat and synced list gathers.
  const ModelSpec& m = builtin_presets().models.at("gpt3-175b");
  const ClusterSpec& c = builtin_presets().clusters.at("dgx-a100");
  for (Recompute rc : {Recompute::kNone, Recompute::kFull}) {
    const Plan p = gpt3_zero3(rc);
    const LayerCost lc = layer_cost(m, c, p, 2048, false);
    const Zero3Trace t = zero3_trace(m, p, lc, 1e-3, 2e-3);
    const Zero3Hooks h = zero3_coordinate(t, zero3_policy(stack_profile(p.stack)));
    Zero3Hooks every = h;
    every.segments.clear();
    every.segment_class.clear();
    std::vector<double> gather, reduce;
    for (double n : t.numel) {
      gather.push_back(n * 2 / 180e9);
      reduce.push_back(n * 2 / 170e9);
    }
    const Zero3GatherWork w = zero3_gather_work(c.gpu, 2, 384, 10);
    std::uint32_t classes = 0;
    for (std::uint32_t k : h.segment_class) classes = std::max(classes, k + 1);
    EXPECT_LT(classes, 40u) << "96 layers' stretches fall into a few classes";
    for (const Zero3GatherWork* list : {static_cast<const Zero3GatherWork*>(nullptr), &w}) {
      const Zero3Timing a = zero3_time(t, h, gather, reduce, 0.16, 10e-6, list);
      const Zero3Timing b = zero3_time(t, every, gather, reduce, 0.16, 10e-6, list);
      EXPECT_NEAR(a.total_s, b.total_s, 1e-9 * b.total_s);
      EXPECT_NEAR(a.compute_s, b.compute_s, 1e-9 * b.compute_s);
      EXPECT_NEAR(a.interference_s, b.interference_s, 1e-9 * b.interference_s);
      EXPECT_NEAR(a.interference_fwd_s, b.interference_fwd_s, 1e-9 * b.interference_fwd_s);
      EXPECT_NEAR(a.host_s, b.host_s, 1e-9 * b.host_s);
      EXPECT_EQ(a.syncs, b.syncs);
      EXPECT_EQ(a.drains, b.drains);
      EXPECT_GT(a.syncs, 96 * 4);
    }
  }
}

// The trace carries the layer's work as LayerCost prices it, split at the module hooks: its
// uses add up to the layers' forward and backward (recomputation included) and the output
// head's, in every recomputation mode; its weights are the layer's parameters
// (params.cc) less the norms and biases that stay gathered: for GPT-3 (h 12288, F = 4h, linear
// biases, LayerNorm) 3h + h + 4h + h of biases and 2 x 2h of norms, 13h.

TEST(Zero3Fetch, TraceCarriesTheLayersWorkAndWeights) {
  const ModelSpec& m = builtin_presets().models.at("gpt3-175b");
  const ClusterSpec& c = builtin_presets().clusters.at("dgx-a100");
  for (Recompute rc : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
    const Plan p = gpt3_zero3(rc);
    const LayerCost lc = layer_cost(m, c, p, 2048, false);
    const Zero3Trace t = zero3_trace(m, p, lc, 1e-3, 2e-3);
    double fwd = 0, all = 0;
    for (std::size_t i = 0; i < t.uses.size(); ++i) {
      all += t.uses[i].compute_s;
      if (i < t.forward_uses) fwd += t.uses[i].compute_s;
    }
    const double L = m.num_layers;
    EXPECT_NEAR(fwd, L * lc.fwd_s() + 1e-3, 1e-9 * fwd) << static_cast<int>(rc);
    EXPECT_NEAR(all, L * (lc.fwd_s() + lc.bwd_s()) + 3e-3, 1e-9 * all) << static_cast<int>(rc);
    const double h = static_cast<double>(m.hidden_size);
    const double layer = t.numel[2] + t.numel[3] + t.numel[4] + t.numel[5];  // 0 embedding, 1 learned positions
    EXPECT_DOUBLE_EQ(layer_rank_params(m, p, false).dense - layer, 13 * h);
  }
}

// The coordinator on layer `l` of a GPT shape: its forward's and its backward's
// synchronisations.
struct LayerSyncs {
  int fwd = 0, bwd = 0;
  std::vector<int> bwd_modules;  // modules (0 QKV .. 3 FC2) whose backward use synchronises
};
LayerSyncs layer_syncs(const ModelSpec& m, const Plan& p, int l) {
  const LayerCost lc = layer_cost(m, builtin_presets().clusters.at("dgx-a100"), p, 2048, false);
  const Zero3Trace t = zero3_trace(m, p, lc, 1e-3, 2e-3);
  const Zero3Hooks h = zero3_coordinate(t, zero3_policy(stack_profile(p.stack)));
  const int pos = m.position_embedding == PositionEmbedding::kLearned ? 1 : 0;
  const int first = 1 + pos + 4 * l;  // the layer's forward uses
  LayerSyncs r;
  for (int k = 0; k < 4; ++k) r.fwd += h.sync(static_cast<std::size_t>(first + k));
  // Backward: head (2 uses) after the forward's last, then per layer from the last one.
  const int per = p.recompute == Recompute::kFull ? 8 : 4;
  const int bwd = static_cast<int>(t.forward_uses) + 1 + per * (m.num_layers - 1 - l);
  for (int k = 0; k < per; ++k) {
    const bool s = h.sync(static_cast<std::size_t>(bwd + k));
    r.bwd += s;
    if (s && k >= per - 4) r.bwd_modules.push_back(3 - (k - (per - 4)));
  }
  return r;
}

TEST(Zero3Fetch, DeepSpeed2021OnGpt3FetchesEachModuleAndRegathersAfterRecomputation) {
  // GPT-3 175B (h 12288): QKV 453M, projection 151M, FC1 and FC2 604M elements, each over the
  // 50M prefetch bucket, so every module's fetch synchronises and prefetches the next one:
  // 4 per layer forward. Under full recomputation the backward re-runs the layer's forward
  // (4 more) and then: FC2 is kept (used again at once, distance 0), FC1 is not (2 x 604M of
  // FC2 between its uses, over the 1e9 reuse limit), nor the projection and QKV: 3.
  const ModelSpec& m = builtin_presets().models.at("gpt3-175b");
  const Plan p = gpt3_zero3(Recompute::kFull);
  ASSERT_TRUE(zero3_module_fetch(m, p));
  const LayerSyncs s = layer_syncs(m, p, 48);
  EXPECT_EQ(s.fwd, 4);
  EXPECT_EQ(s.bwd, 4 + 3);
  EXPECT_EQ(s.bwd_modules, (std::vector<int>{2, 1, 0}));
}

TEST(Zero3Fetch, DeepSpeed2021OnGpt13bPrefetchesALayerPerSynchronisation) {
  // GPT 1.3B (h 2048, F 8192): QKV 12.6M, projection 4.2M, FC1 and FC2 16.8M elements. At the
  // QKV's synchronisation the 50M bucket takes the next layer's four weights (12.6 + 4.2 +
  // 16.8 = 33.6M, then 50.3M: stop), so one synchronisation per layer. Without recomputation
  // a layer's weights are used again in its backward after the later layers' forward and
  // backward and the tied head's two uses (103M each): kept while 2 x 50.3M per later layer
  // + 206M stays under 1e9, i.e. for the last 7 layers (17..23; 7 x 100.7 + 206 = 911M).
  // Layer 20 synchronises nowhere in its backward; layer 4's weights are re-gathered, all
  // four prefetched at layer 5's synchronisation (16.8 + 16.8 + 4.2 + 12.6 = 50.4M) and
  // waited for at its FC2, the first of its backward uses: one.
  // The shipped GPT 1.3B scenario's model.
  const Result<Scenario> sc = load_scenario_file(STEPCAST_SOURCE_DIR "/scenarios/gpt-1.3b-ddp-16xh100.json");
  ASSERT_TRUE(sc.ok()) << sc.error().message;
  const ModelSpec& m = sc->model;
  Plan p;
  p.dp = 16;
  p.zero = 3;
  p.microbatch = 2;
  p.stack = Stack::kDeepspeedZero2021;
  ASSERT_TRUE(zero3_module_fetch(m, p));
  const LayerSyncs late = layer_syncs(m, p, 20), early = layer_syncs(m, p, 4);
  EXPECT_EQ(late.fwd, 1);
  EXPECT_EQ(late.bwd, 0);
  EXPECT_EQ(early.fwd, 1);
  EXPECT_EQ(early.bwd, 1);
  EXPECT_EQ(early.bwd_modules, std::vector<int>{3});
  // The stack's other plans price ZeRO-3 per layer: tensor parallelism, or another stack.
  p.tp = 2;
  EXPECT_FALSE(zero3_module_fetch(m, p));
  p.tp = 1;
  p.stack = Stack::kDeepspeedZero;
  EXPECT_FALSE(zero3_module_fetch(m, p));
}

// A plan on the 2021 stack that the per-module trace does not express is priced per layer,
// and the estimate says so.
TEST(Zero3Fetch, PlansOutsideThePerModuleTraceSayTheyArePricedPerLayer) {
  Result<Scenario> sc = load_scenario_file(STEPCAST_SOURCE_DIR "/scenarios/gpt-1.3b-ddp-16xh100.json");
  ASSERT_TRUE(sc.ok()) << sc.error().message;
  Scenario s = *sc;
  s.plan.zero = 3;
  s.plan.stack = Stack::kDeepspeedZero2021;
  auto noted = [](const Estimate& e) {
    for (const std::string& n : e.notes) {
      if (n.rfind("ZeRO-3 priced per layer: deepspeed-zero-2021's per-module fetch", 0) == 0) return true;
    }
    return false;
  };
  EXPECT_FALSE(noted(estimate(s)));
  s.plan.tp = 2;
  s.plan.dp = 8;
  EXPECT_TRUE(noted(estimate(s)));
  // The layer model's step: what deepspeed-zero (zero3_fetch "layer") gives for the same plan.
  Scenario layer = s;
  layer.plan.stack = Stack::kDeepspeedZero;
  EXPECT_DOUBLE_EQ(estimate(s).step_time_s, estimate(layer).step_time_s);
}

// The estimate times the cached shape of the trace with each role's seconds
// (zero3_schedule_cached, zero3_role_seconds); lower.cc and the tests above time the trace
// with its uses' own seconds (zero3_trace). The two must agree, and the cache must hand each
// model shape, recomputation and policy its own schedule (a stale entry would time another
// model's trace).
TEST(Zero3Fetch, CachedScheduleTimedByRoleEqualsTheTraceWithItsOwnSeconds) {
  const ClusterSpec& c = builtin_presets().clusters.at("dgx-a100");
  const Zero3GatherWork w = zero3_gather_work(c.gpu, 2, 384, 10);
  const ModelSpec& gpt3 = builtin_presets().models.at("gpt3-175b");
  ModelSpec half = gpt3;  // another shape: half the layers, a narrower FFN
  half.num_layers = 48;
  half.ffn_hidden_size = 2 * half.hidden_size;
  // The third is a hit on the first's entry.
  for (const ModelSpec* mp : {&gpt3, static_cast<const ModelSpec*>(&half), &gpt3}) {
    const ModelSpec& m = *mp;
    const int layers = m.num_layers;  // names the case in a failure
    for (Recompute rc : {Recompute::kNone, Recompute::kFull, Recompute::kSelective}) {
      const Plan p = gpt3_zero3(rc);
      const Zero3Policy policy = zero3_policy(stack_profile(p.stack));
      const LayerCost lc = layer_cost(m, c, p, 2048, false);
      const Zero3Trace t = zero3_trace(m, p, lc, 1e-3, 2e-3);
      const Zero3Hooks h = zero3_coordinate(t, policy);
      const Zero3Schedule& s = zero3_schedule_cached(m, p, policy);
      ASSERT_EQ(s.trace.uses.size(), t.uses.size()) << layers;
      ASSERT_EQ(s.trace.numel, t.numel) << layers;
      ASSERT_EQ(s.hooks.params, h.params) << layers;
      std::vector<double> gather, reduce;
      for (double n : t.numel) {
        gather.push_back(n * 2 / 180e9);
        reduce.push_back(n * 2 / 170e9);
      }
      const Zero3RoleSeconds r = zero3_role_seconds(p, lc, 1e-3, 2e-3);
      const Zero3Timing a = zero3_time(t, h, gather, reduce, 0.16, 10e-6, &w);
      const Zero3Timing b = zero3_time(s.trace, s.hooks, gather, reduce, 0.16, 10e-6, &w, false, &r);
      EXPECT_NEAR(a.total_s, b.total_s, 1e-9 * a.total_s) << layers;
      EXPECT_NEAR(a.compute_s, b.compute_s, 1e-9 * a.compute_s) << layers;
      EXPECT_NEAR(a.host_s, b.host_s, 1e-9 * a.host_s) << layers;
      EXPECT_EQ(a.syncs, b.syncs) << layers;
      EXPECT_GT(b.compute_s, 0.5 * m.num_layers * (lc.fwd_s() + lc.bwd_s())) << layers;
    }
  }
}

}  // namespace
}  // namespace stepcast

// The closed-form step model: pipeline bubbles (docs/cost-model-sources.md section 3), the step-time
// breakdown, MFU (section 7) and the shipped Llama-3-70B scenario as a sanity check.
#include "stepcast/models/estimate.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <string>

#include "stepcast/models/collectives.h"
#include "stepcast/models/compute.h"
#include "stepcast/models/layer_cost.h"
#include "stepcast/models/params.h"
#include "stepcast/models/presets.h"
#include "stepcast/models/program.h"
#include "stepcast/models/report.h"
#include "stepcast/models/scenario.h"

namespace stepcast {
namespace {

void expect_rel(double actual, double expected, double rel) {
  EXPECT_NEAR(actual, expected, rel * std::max(expected, -expected));
}

// One node of 4 H100 on an ideal scale-up fabric: infinite bandwidth and zero latency,
// so every collective and point-to-point transfer costs exactly 0 s.
ClusterSpec free_comm_node() {
  ClusterSpec c;
  c.name = "ideal";
  c.gpu = builtin_presets().gpus.at("h100-sxm");
  c.nodes = 1;
  c.gpus_per_node = 4;
  c.intra_bandwidth_GBps = std::numeric_limits<double>::infinity();
  c.intra_latency_us = 0;
  c.nic_Gbps = std::numeric_limits<double>::infinity();
  c.nics_per_node = 4;
  c.inter_latency_us = 0;
  return c;
}

// Llama-3-8B (32 layers) without an output layer (vocab 0): every pipeline stage of 8
// layers does identical work, the "balanced stages" of section 3.
ModelSpec balanced_model() {
  ModelSpec m = builtin_presets().models.at("llama3-8b");
  m.vocab_size = 0;
  return m;
}

Plan pipeline_plan(Schedule s, int v, std::int64_t m) {
  Plan p;
  p.pp = 4;
  p.schedule = s;
  p.virtual_stages = v;
  p.microbatch = 1;
  p.global_batch = m;  // dp = 1: m = global_batch
  return p;
}

const Workload kWorkload{4096, 0, 0};

TEST(Bubble, BalancedStagesWithFreeCommunicationAreIdentical) {
  const ModelSpec m = balanced_model();
  const ClusterSpec c = free_comm_node();
  const Plan p = pipeline_plan(Schedule::kOneFOneB, 1, 8);
  const StageTimes s0 = stage_times(m, c, p, kWorkload, 0);
  ASSERT_GT(s0.forward, 0);
  ASSERT_GT(s0.backward, s0.forward);
  // Free fabric: the boundary send/recv costs 0, so a stage's time is its compute.
  EXPECT_EQ(s0.pp, 0.0);
  EXPECT_EQ(s0.per_microbatch(), s0.forward + s0.backward);
  for (int s = 1; s < 4; ++s) {
    const StageTimes st = stage_times(m, c, p, kWorkload, s);
    EXPECT_EQ(st.forward, s0.forward) << "stage " << s;
    EXPECT_EQ(st.backward, s0.backward) << "stage " << s;
  }
}

TEST(Bubble, GpipeAnd1F1BStepIsMPlusPMinus1TimesStageTime) {
  // Section 3: T = (m + p - 1)(t_f + t_b) for GPipe and 1F1B with balanced stages and
  // free communication, so the idle share of the step is (p-1)/(m+p-1). Here p = 4,
  // m = 8: T = 11 (t_f + t_b), bubble 3/11. The optimizer step follows the pipeline.
  const ModelSpec m = balanced_model();
  const ClusterSpec c = free_comm_node();
  for (const Schedule sched : {Schedule::kGpipe, Schedule::kOneFOneB}) {
    const Plan p = pipeline_plan(sched, 1, 8);
    const StageTimes st = stage_times(m, c, p, kWorkload, 0);
    const double t = st.forward + st.backward;
    const Estimate e = estimate(m, c, p, kWorkload);
    EXPECT_EQ(e.microbatches, 8);
    EXPECT_EQ(e.breakdown.exposed_comm, 0.0);
    expect_rel(e.step_time_s - e.breakdown.optimizer, (8 + 4 - 1) * t, 1e-12);
    expect_rel(e.breakdown.compute, 8 * t, 1e-12);
    expect_rel(e.breakdown.bubble, 3 * t, 1e-12);
    expect_rel(e.breakdown.bubble / (e.step_time_s - e.breakdown.optimizer), 3.0 / 11, 1e-12);
  }
}

TEST(Bubble, InterleavedBubbleIsPMinus1OverVStageTimes) {
  // Interleaved 1F1B with v chunks per stage: bubble (p-1)/v * t, t = the whole stage's
  // (all v chunks') time per microbatch (section 3: (p-1)/(v m) of the ideal m t).
  // p = 4, v = 2, m = 8: T = (8 + 3/2) t, bubble 1.5 t.
  const ModelSpec m = balanced_model();
  const ClusterSpec c = free_comm_node();
  const Plan p = pipeline_plan(Schedule::kInterleaved, 2, 8);
  const StageTimes st = stage_times(m, c, p, kWorkload, 0);
  // The stage still holds 32/4 = 8 layers (2 chunks of 4), so t equals the 1F1B stage time.
  const StageTimes plain = stage_times(m, c, pipeline_plan(Schedule::kOneFOneB, 1, 8), kWorkload, 0);
  expect_rel(st.forward + st.backward, plain.forward + plain.backward, 1e-12);
  const double t = st.forward + st.backward;
  const Estimate e = estimate(m, c, p, kWorkload);
  expect_rel(e.breakdown.bubble, 3.0 / 2 * t, 1e-12);
  expect_rel(e.step_time_s - e.breakdown.optimizer, (8 + 3.0 / 2) * t, 1e-12);
}

// Pipeline p2p overlap (Plan::overlap_p2p_comm, interleaved only): each receive is posted
// a step ahead and hides behind one chunk of the other direction. Per microbatch, with
// `one` the transfer of one chunk boundary, F, B the stage's forward/backward compute and
// f the interference factor:
//   blocking: 2 v one;  overlapped: v max(0, (1 - f) one - B/v) + v max(0, (1 - f) one - F/v),
// plus one transfer per stage boundary on the fill and drain path, 2 (p - 1) one per step.
TEST(PipelineP2pOverlap, ReceivesHideBehindOneChunkAndOnlyTheFillPathRemains) {
  const ModelSpec m = balanced_model();
  ClusterSpec c = free_comm_node();
  c.intra_bandwidth_GBps = 400;  // real transfers: 4096 tokens x 4096 x 2 B = 32 MiB each
  Plan on = pipeline_plan(Schedule::kInterleaved, 2, 8);
  Plan off = on;
  off.overlap_p2p_comm = false;
  const StageTimes a = stage_times(m, c, on, kWorkload, 1);
  const StageTimes b = stage_times(m, c, off, kWorkload, 1);
  // One transfer: 33,554,432 B at 400 GB/s x the scale-up efficiency (0.82), no latency
  // on this node: 102.3 us. Blocking: 2 v = 4 of them per microbatch.
  const double one = 33554432.0 / (400e9 * c.intra_efficiency);
  expect_rel(b.pp, 4 * one, 1e-12);
  // A chunk (4 layers of Llama-3-8B, 4096 tokens) computes for milliseconds: all hidden.
  ASSERT_GT(a.forward / 2, one);
  EXPECT_EQ(a.pp, 0.0);
  EXPECT_DOUBLE_EQ(a.pp_fill, one);
  // Interference (model-reference 4.5a): each overlapped receive's transfer slows the chunk
  // beside it by f one, f = s / (1 + s) with the H100's s = 0.189. Stage 1 receives 2
  // activations and 2 gradients per microbatch (v = 2); stage 0 no activation into the
  // model's first chunk (3), the last stage no gradient into its last (3). Blocking
  // receives do not overlap compute: nothing.
  const double f = 0.189 / 1.189;
  expect_rel(a.parts.interference, 4 * f * one, 1e-12);
  expect_rel(a.forward + a.backward - (b.forward + b.backward), 4 * f * one, 1e-9);
  EXPECT_EQ(b.parts.interference, 0.0);
  expect_rel(stage_times(m, c, on, kWorkload, 0).parts.interference, 3 * f * one, 1e-12);
  expect_rel(stage_times(m, c, on, kWorkload, 3).parts.interference, 3 * f * one, 1e-12);
  const Estimate ea = estimate(m, c, on, kWorkload);
  const Estimate eb = estimate(m, c, off, kWorkload);
  expect_rel(ea.exposed.pp, 2.0 * 3 * one, 1e-12);  // 2 (p - 1) transfers
  expect_rel(eb.exposed.pp, 8 * 4 * one, 1e-12);    // m 2 v transfers
  // A slow link (one longer than a chunk): overlap saves exactly the compute it hides
  // behind, f + b per microbatch (their interference included: (1 - f) one of each of the 4
  // transfers stays exposed beyond the chunk, f one is the slowed chunk).
  c.intra_bandwidth_GBps = 0.5;
  const StageTimes sa = stage_times(m, c, on, kWorkload, 1);
  const StageTimes sb = stage_times(m, c, off, kWorkload, 1);
  ASSERT_GT(sb.pp / 4, sa.backward / 2);
  expect_rel(sb.pp - sa.pp, sa.forward + sa.backward, 1e-9);
  // 1F1B has no look-ahead receive: the flag changes nothing there.
  Plan f1 = pipeline_plan(Schedule::kOneFOneB, 1, 8);
  const double blocking = stage_times(m, c, f1, kWorkload, 1).pp;
  f1.overlap_p2p_comm = false;
  EXPECT_EQ(stage_times(m, c, f1, kWorkload, 1).pp, blocking);
}

TEST(Bubble, MoreMicrobatchesShrinkTheBubbleShare) {
  // (p-1)/(m+p-1) for p = 4: m = 4 -> 3/7, m = 16 -> 3/19, m = 64 -> 3/67.
  const ModelSpec m = balanced_model();
  const ClusterSpec c = free_comm_node();
  for (const std::int64_t mb : {4, 16, 64}) {
    const Estimate e = estimate(m, c, pipeline_plan(Schedule::kOneFOneB, 1, mb), kWorkload);
    expect_rel(e.breakdown.bubble / (e.step_time_s - e.breakdown.optimizer),
               3.0 / static_cast<double>(mb + 3), 1e-12);
  }
}

std::string shipped_scenario_path() {
  // tests/models/estimate_test.cc -> <repo>/scenarios/llama3-70b-64xh100.json
  const std::filesystem::path repo =
      std::filesystem::path(STEPCAST_SOURCE_DIR);
  return (repo / "scenarios" / "llama3-70b-64xh100.json").string();
}

Scenario shipped_scenario() {
  Result<Scenario> r = load_scenario_file(shipped_scenario_path());
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? r.value() : Scenario{};
}

TEST(Estimate, ShippedLlama3_70bOn64H100FitsWithPlausibleMfu) {
  const Scenario s = shipped_scenario();
  ASSERT_EQ(s.plan.world(), 64);
  const Estimate e = estimate(s);
  EXPECT_TRUE(e.memory.fits) << e.memory.total / (1 << 30) << " GiB";
  // Sanity range, not an oracle: large dense runs on H100 report 38-43 % MFU (Llama 3
  // 405B, section 6.3) and A100 runs up to 52-54 %; a model at 64 GPUs with TP inside a
  // node should land between 30 % and 60 %.
  EXPECT_GT(e.mfu, 0.3);
  EXPECT_LT(e.mfu, 0.6);
  // The scenario's own "expect", the same range as step time: 2.524e17 model FLOPs per step
  // on 64 x 989.4 TFLOP/s at 60 % and 30 % MFU.
  EXPECT_NEAR(e.model_flops_per_step, 2.524e17, 0.001e17);
  EXPECT_GT(e.step_time_s, 2.524e17 / (0.6 * 64 * 989.4e12));  // 6.64 s
  EXPECT_LT(e.step_time_s, 2.524e17 / (0.3 * 64 * 989.4e12));  // 13.29 s
}

// DeepSeek-V3 (the shipped scenario's model and cluster) over `pp` stages of one chunk each,
// plain 1F1B with dp = ep = `dp`: the even split of its layers, no all-to-all overlap.
Scenario deepseek_over(int pp, int dp) {
  auto r = load_scenario_file(std::string(STEPCAST_SOURCE_DIR) + "/scenarios/deepseek-v3-ep64-1024xh100.json");
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  if (!r.ok()) return Scenario{};
  Scenario ds = r.value();
  ds.plan.pp = pp;
  ds.plan.dp = dp;
  ds.plan.ep = dp;
  ds.plan.virtual_stages = 1;
  ds.plan.schedule = Schedule::kOneFOneB;
  ds.plan.pipeline_layout.clear();
  ds.plan.pipeline_layout_mtp = 0;
  ds.plan.moe_a2a_overlap = false;
  return ds;
}

// The planner's search skips the notes (EstimateNotes::kSkip): everything else is the same
// estimate. On the shipped layout that does not fit, the default writes "does not fit".
TEST(Estimate, SkippingTheNotesChangesNothingElse) {
  const auto s = load_scenario_file(std::string(STEPCAST_SOURCE_DIR) + "/scenarios/llama3-8b-1xh100-nofit.json");
  ASSERT_TRUE(s.ok()) << s.error().message;
  const Estimate with = estimate(s->model, s->cluster, s->plan, s->workload);
  const Estimate without = estimate(s->model, s->cluster, s->plan, s->workload, EstimateNotes::kSkip);
  ASSERT_FALSE(with.memory.fits);
  ASSERT_FALSE(with.notes.empty());
  EXPECT_NE(with.notes.back().find("does not fit"), std::string::npos);
  EXPECT_TRUE(without.notes.empty());
  EXPECT_EQ(with.step_time_s, without.step_time_s);
  EXPECT_EQ(with.memory.total, without.memory.total);
  EXPECT_EQ(with.memory.fits, without.memory.fits);
  EXPECT_EQ(with.mfu, without.mfu);
  EXPECT_EQ(with.step_time_band.p10, without.step_time_band.p10);
  EXPECT_EQ(with.step_time_band.p90, without.step_time_band.p90);
  ASSERT_EQ(with.stages.size(), without.stages.size());
  EXPECT_EQ(with.stages[0].params_bytes, without.stages[0].params_bytes);
}

// estimate() prices a middle stage once for the middle stages like it (same_middle_stage):
// their times, and the part of their memory their layers set. Priced each on its own
// (stage_times), every pair it calls alike has the same times, field by field; the pairs it
// tells apart by their chunks' layers, their dense layers or their warm-up take different
// times, so each of the three belongs in the comparison. And the estimate's stages, and
// stage_memories', are each stage priced on its own: its memory (stage_memory), its state and
// the slowest stage.
TEST(Estimate, MiddleStagesAlikeTakeTheSameTimes) {
  const auto load = [](const std::string& file) {
    auto r = load_scenario_file(std::string(STEPCAST_SOURCE_DIR) + "/scenarios/" + file);
    EXPECT_TRUE(r.ok()) << file << ": " << (r.ok() ? "" : r.error().message);
    return r.ok() ? r.value() : Scenario{};
  };
  struct Counts {
    int alike = 0, differ = 0;
  };
  const auto compare = [](const Scenario& sc) {
    Counts n;
    const Plan& p = sc.plan;
    const Estimate e = estimate(sc.model, sc.cluster, p, sc.workload);
    EXPECT_EQ(e.stages.size(), static_cast<std::size_t>(p.pp));
    const std::vector<MemoryBreakdown> all = stage_memories(sc.model, sc.cluster, p, sc.workload);
    EXPECT_EQ(all.size(), static_cast<std::size_t>(p.pp));
    MemoryBreakdown worst;
    int slowest = 0;
    double t_max = -1;
    for (int s = 0; s < p.pp && static_cast<std::size_t>(s) < std::min(e.stages.size(), all.size()); ++s) {
      const MemoryBreakdown mem = stage_memory(sc.model, sc.cluster, p, sc.workload, s);
      EXPECT_TRUE(all[static_cast<std::size_t>(s)] == mem) << "stage " << s;
      EXPECT_TRUE(e.stages[static_cast<std::size_t>(s)] == stage_state(p, rank_params(sc.model, p, s), mem))
          << "stage " << s;
      if (s == 0 || mem.total > worst.total) worst = mem;
      if (const double t = stage_times(sc.model, sc.cluster, p, sc.workload, s).per_microbatch(); t > t_max) {
        t_max = t;
        slowest = s;
      }
    }
    EXPECT_TRUE(e.memory == worst) << e.memory.total << " B against stage " << worst.stage << "'s " << worst.total;
    EXPECT_EQ(e.slowest_stage, slowest);
    for (int s = 1; s < p.pp - 1; ++s) {
      const StageTimes a = stage_times(sc.model, sc.cluster, p, sc.workload, s);
      for (int r = s + 1; r < p.pp - 1; ++r) {
        const StageTimes b = stage_times(sc.model, sc.cluster, p, sc.workload, r);
        if (same_middle_stage(sc.model, p, s, r)) {
          ++n.alike;
          EXPECT_TRUE(a == b) << "stages " << s << " and " << r << ": " << a.per_microbatch() << " s against "
                              << b.per_microbatch() << " s";
        } else if (!(a == b)) {
          ++n.differ;
        }
      }
    }
    return n;
  };
  // Llama 3 405B, pp 16 x v 2: 126 layers in 32 chunks, the first and the last of 3 layers,
  // the others of 4: the 14 middle stages are alike (91 pairs).
  const Scenario l405 = load("plan/llama3-405b-16384xh100.json");
  ASSERT_EQ(l405.plan.pp, 16);
  EXPECT_EQ(compare(l405).alike, 91);
  // Llama 3 70B over 6 stages: 80 layers, 14 on stages 1 and 2 (the middle ones take the
  // extra layers first), 13 on the others: stages 1 and 3 are not alike, and differ.
  Scenario pp6 = shipped_scenario();
  pp6.plan.pp = 6;
  pp6.plan.dp = 1;
  pp6.cluster.nodes = 6;
  ASSERT_EQ(chunk_layers(pp6.model, pp6.plan, 1), 14);
  ASSERT_EQ(chunk_layers(pp6.model, pp6.plan, 3), 13);
  const Counts a = compare(pp6);
  EXPECT_EQ(a.alike, 2);   // stages 1-2 and 3-4
  EXPECT_EQ(a.differ, 4);  // each of 1 and 2 against each of 3 and 4
  // The ends are never alike.
  EXPECT_FALSE(same_middle_stage(l405.model, l405.plan, 0, 1));
  EXPECT_FALSE(same_middle_stage(l405.model, l405.plan, 14, 15));
  // DeepSeek-V3 over 32 stages of one chunk: layer 0 on stage 0, then two layers a stage, so
  // stage 1 holds the dense layers 1 and 2 and stage 2 the MoE layers 3 and 4: as many layers,
  // not alike, and their times differ.
  const Scenario ds = deepseek_over(32, 16);
  ASSERT_EQ(chunk_layers(ds.model, ds.plan, 1), 2);
  ASSERT_EQ(chunk_layers(ds.model, ds.plan, 2), 2);
  EXPECT_FALSE(same_middle_stage(ds.model, ds.plan, 1, 2));
  EXPECT_FALSE(stage_times(ds.model, ds.cluster, ds.plan, ds.workload, 1) ==
               stage_times(ds.model, ds.cluster, ds.plan, ds.workload, 2));
  EXPECT_TRUE(same_middle_stage(ds.model, ds.plan, 2, 3));
  const Counts b = compare(ds);
  EXPECT_GT(b.alike, 0);
  // Qwen3-235B-A22B with the all-to-all overlap: 94 layers in 32 chunks, and each stage's
  // warm-up, hence its share of merged steps, is its own. Stages 2 and 3 hold as many layers
  // chunk by chunk but are not alike, and their times differ.
  const Scenario q = load("qwen3-235b-a22b-folded-256xh100.json");
  ASSERT_TRUE(q.plan.moe_a2a_overlap);
  for (int v = 0; v < q.plan.virtual_stages; ++v) {
    ASSERT_EQ(chunk_layers(q.model, q.plan, 2 + v * q.plan.pp), chunk_layers(q.model, q.plan, 3 + v * q.plan.pp));
  }
  EXPECT_FALSE(same_middle_stage(q.model, q.plan, 2, 3));
  EXPECT_FALSE(stage_times(q.model, q.cluster, q.plan, q.workload, 2) ==
               stage_times(q.model, q.cluster, q.plan, q.workload, 3));
  Scenario q_plain = q;
  q_plain.plan.moe_a2a_overlap = false;
  EXPECT_TRUE(same_middle_stage(q_plain.model, q_plain.plan, 2, 3));
  EXPECT_TRUE(stage_times(q_plain.model, q_plain.cluster, q_plain.plan, q_plain.workload, 2) ==
              stage_times(q_plain.model, q_plain.cluster, q_plain.plan, q_plain.workload, 3));
  compare(q);
  // Full recomputation of the first 2 layers of each chunk (recompute_num_layers) on the
  // 70B over 4 stages of 3 chunks (80 layers in 12 chunks of 6 or 7).
  Scenario l70 = shipped_scenario();
  l70.plan.schedule = Schedule::kInterleaved;
  l70.plan.virtual_stages = 3;
  l70.plan.recompute = Recompute::kFull;
  l70.plan.recompute_num_layers = 2;
  compare(l70);
  // Activation and weight offload (whole layers, each stage's first ones) over the 6 stages.
  Scenario off = pp6;
  off.plan.offload_activations = 0.5;
  off.plan.offload_weights = 0.25;
  EXPECT_EQ(compare(off).alike, 2);
}

// StageMemoriesByCount: the planner's recomputation fitting asks one layout's memory for many
// recompute_num_layers; every count gives what stage_memories gives for the plan with that
// count, whole struct by whole struct, for "block" (the first N of each chunk) and "uniform"
// (groups of N), on stages alike and not, with dense and MoE layers and with offload.
TEST(Estimate, StageMemoriesByCountAreStageMemoriesOfEachCount) {
  const auto same_for_every_count = [](const Scenario& sc, RecomputeMethod method) {
    Plan p = sc.plan;
    p.recompute = Recompute::kFull;
    p.recompute_method = method;
    const StageMemoriesByCount by_count(sc.model, sc.cluster, p, sc.workload);
    int most = 0;
    for (int k = 0; k < p.pp * p.virtual_stages; ++k) most = std::max(most, chunk_layers(sc.model, p, k));
    int checked = 0;
    for (int n = 0; n <= most; ++n) {
      Plan q = p;
      q.recompute_num_layers = n;
      const std::vector<MemoryBreakdown> want = stage_memories(sc.model, sc.cluster, q, sc.workload);
      const std::vector<MemoryBreakdown> got = by_count.at(n);
      EXPECT_TRUE(got == want) << "recompute_num_layers " << n;
      double worst = 0;
      bool fit = true;
      for (const MemoryBreakdown& mem : want) worst = std::max(worst, mem.total), fit = fit && mem.fits;
      EXPECT_EQ(by_count.worst_total(n), worst) << "recompute_num_layers " << n;
      EXPECT_EQ(by_count.fits(n), fit) << "recompute_num_layers " << n;
      ++checked;
    }
    return checked;
  };
  // The 70B over 6 stages (14 and 13 layers): counts 0..14 of each method.
  Scenario pp6 = shipped_scenario();
  pp6.plan.pp = 6;
  pp6.plan.dp = 1;
  pp6.cluster.nodes = 6;
  EXPECT_EQ(same_for_every_count(pp6, RecomputeMethod::kBlock), 15);
  EXPECT_EQ(same_for_every_count(pp6, RecomputeMethod::kUniform), 15);
  // The counts change the memory: the fewest recomputed layers keep the most.
  Plan block = pp6.plan;
  block.recompute = Recompute::kFull;
  const StageMemoriesByCount by_count(pp6.model, pp6.cluster, block, pp6.workload);
  EXPECT_GT(by_count.worst_total(1), by_count.worst_total(0));
  // With activation offload over the same stages, and DeepSeek-V3's dense first layers over
  // 16 stages.
  Scenario off = pp6;
  off.plan.offload_activations = 0.5;
  same_for_every_count(off, RecomputeMethod::kBlock);
  const Scenario ds = deepseek_over(16, 32);
  EXPECT_EQ(same_for_every_count(ds, RecomputeMethod::kBlock), 5);
  EXPECT_EQ(same_for_every_count(ds, RecomputeMethod::kUniform), 5);
}

// A planner search hands estimate() one CollectiveTimes for all its layouts: the estimates
// are those without it, whatever the memo already holds from other layouts.
TEST(Estimate, ACollectiveMemoSharedAcrossLayoutsChangesNothing) {
  const Scenario s = shipped_scenario();
  CollectiveTimes times(s.cluster);
  int compared = 0;
  for (int tp : {1, 2, 4, 8}) {
    for (int pp : {1, 2, 4}) {
      Plan p = s.plan;
      p.tp = tp;
      p.pp = pp;
      p.dp = 64 / (tp * pp);
      p.virtual_stages = 1;
      p.schedule = Schedule::kOneFOneB;
      p.sequence_parallel = tp > 1;
      p.recompute = Recompute::kFull;
      if (!layout_errors(s.model, s.cluster, p, s.workload).empty()) continue;
      const Estimate alone = estimate(s.model, s.cluster, p, s.workload);
      const Estimate shared = estimate(s.model, s.cluster, p, s.workload, EstimateNotes::kWrite, &times);
      EXPECT_EQ(shared.step_time_s, alone.step_time_s) << "tp " << tp << " pp " << pp;
      EXPECT_EQ(shared.exposed.dp, alone.exposed.dp) << "tp " << tp << " pp " << pp;
      EXPECT_EQ(shared.exposed.tp, alone.exposed.tp) << "tp " << tp << " pp " << pp;
      EXPECT_EQ(shared.exposed.pp, alone.exposed.pp) << "tp " << tp << " pp " << pp;
      EXPECT_TRUE(shared.memory == alone.memory) << "tp " << tp << " pp " << pp;
      EXPECT_EQ(shared.notes, alone.notes);
      ++compared;
    }
  }
  EXPECT_GE(compared, 8);
  // A memo of another cluster object is not used (the estimate prices with its own).
  ClusterSpec slower = s.cluster;
  slower.inter_efficiency /= 2;
  CollectiveTimes other(slower);
  EXPECT_EQ(estimate(s.model, s.cluster, s.plan, s.workload, EstimateNotes::kWrite, &other).step_time_s,
            estimate(s).step_time_s);
}

TEST(Estimate, BreakdownPartsAddUpToStepTime) {
  const Estimate e = estimate(shipped_scenario());
  const StepBreakdown& b = e.breakdown;
  expect_rel(b.compute + b.exposed_comm + b.bubble + b.wait + b.optimizer + b.input, e.step_time_s,
             1e-12);
  expect_rel(e.exposed.tp + e.exposed.dp + e.exposed.pp + e.exposed.cp + e.exposed.ep,
             b.exposed_comm, 1e-12);
  // TP8 inside a node and PP across nodes both communicate on the critical path.
  EXPECT_GT(e.exposed.tp, 0);
  EXPECT_GT(e.exposed.pp, 0);
  EXPECT_GT(b.bubble, 0);
}

// The compute split by kind of work (estimate.h ComputeParts) adds up to the compute, and
// its parts are the layers' pieces: on the shipped 70B plan (TP8 PP4, 32 microbatches of
// 8192 tokens, the slowest stage the last: 20 layers and the output head) the attention
// core is cuDNN's at 8192 tokens by hand, 2 a_r (d_qk + d_v) T (s+1)/2 FLOPs per layer
// forward at 529 TFLOP/s and 2.5 times them backward at 518 (models/data/attention.json).
// With full recomputation the recomputed part is the layers' forward again.
TEST(Estimate, ComputeByKindOfWorkAddsUpAndTheAttentionCoreByHand) {
  Scenario s = shipped_scenario();
  Estimate e = estimate(s);
  ASSERT_EQ(e.slowest_stage, 3);
  expect_rel(e.compute.total(), e.breakdown.compute, 1e-12);
  const double flops = 2.0 * 8 * (128 + 128) * 8192 * (8192 + 1) / 2.0;
  const double core = flops / 529e12 + 2.5 * flops / 518e12;
  expect_rel(e.compute.attention, job_pace(s.cluster) * 32 * 20 * core, 1e-9);
  EXPECT_EQ(e.compute.recompute, 0.0);
  const LogitsCost lg = logits_cost(s.model, s.cluster, s.plan, 8192);
  expect_rel(e.compute.output, 32 * (lg.fwd_s + lg.bwd_s), 1e-12);
  EXPECT_GT(e.compute.gemm, 0.75 * e.breakdown.compute);  // a 70B layer is GEMM-bound
  s.plan.recompute = Recompute::kFull;
  e = estimate(s);
  expect_rel(e.compute.total(), e.breakdown.compute, 1e-12);
  const LayerCost lc = layer_cost(s.model, s.cluster, s.plan, 8192, false);
  expect_rel(e.compute.recompute, 32 * 20 * lc.fwd_s(), 1e-12);
}

// Partial full recomputation (plan.recompute_num_layers, Megatron-Core recompute_method
// "block"): on the shipped layout (20 layers a stage, 32 microbatches) with 5 layers
// recomputed per stage, by hand from the per-layer costs: the recomputation is 5 layers'
// forward per microbatch, the backward and the exposed TP are those of 5 recomputing and 15
// keeping layers (the second method: the same stage priced with every and with no layer
// recomputing), and the activations are 5 layers' inputs and 15 layers' full activations per
// microbatch in flight, with no recomputed layer live beyond the kept ones it follows.
TEST(Estimate, PartialFullRecomputationRecomputesTheFirstLayersOfEachStage) {
  Scenario s = shipped_scenario();
  s.cluster.gpu.overlap_slowdown = 0;  // interference is per pass; the count check stays exact
  Plan none = s.plan, full = s.plan, part = s.plan;
  none.recompute = Recompute::kNone;
  full.recompute = part.recompute = Recompute::kFull;
  part.recompute_num_layers = 5;
  const ModelSpec& m = s.model;
  const ClusterSpec& c = s.cluster;
  const Workload& w = s.workload;
  s.plan = part;
  const Estimate e = estimate(s);
  const LayerCost lc = layer_cost(m, c, full, w.seq_len, false);
  expect_rel(e.compute.recompute, 32 * 5 * lc.fwd_s(), 1e-12);
  for (int st = 0; st < 4; ++st) {
    ASSERT_EQ(full_recompute_layers(m, part, st).total(), 5);
    const StageTimes tn = stage_times(m, c, none, w, st), tf = stage_times(m, c, full, w, st);
    const StageTimes tp = stage_times(m, c, part, w, st);
    expect_rel(tp.backward, tn.backward + 5 * lc.fwd_s(), 1e-12);
    expect_rel(tp.forward, tn.forward, 1e-12);
    expect_rel(tp.tp, tn.tp + 5.0 / 20 * (tf.tp - tn.tp), 1e-12);
    // Memory: 5 inputs and 15 whole layers per microbatch in flight.
    const double inflight = inflight_microbatches(part, st);
    const double a_in = layer_activation_bytes(m, full, w.seq_len, false);
    const double a_all = layer_activation_bytes(m, none, w.seq_len, false);
    const MemoryBreakdown mp = stage_memory(m, c, part, w, st), mf = stage_memory(m, c, full, w, st);
    // Full recomputation holds 20 inputs and one layer's whole activations live.
    expect_rel(mp.activations - mf.activations, inflight * 15 * (a_all - a_in) - a_all, 1e-9);
  }
  // HFU counts a quarter of full recomputation's extra forward.
  Scenario sf = s;
  sf.plan = full;
  const Estimate ef = estimate(sf);
  const double extra_full = ef.hardware_flops_per_step - ef.model_flops_per_step;
  expect_rel(e.hardware_flops_per_step - e.model_flops_per_step, extra_full / 4, 1e-12);
  // More layers than a stage has: every layer, as recompute "full".
  s.plan.recompute_num_layers = 20;
  expect_rel(estimate(s).step_time_s, ef.step_time_s, 1e-12);
  expect_rel(estimate(s).memory.total, ef.memory.total, 1e-12);
  s.plan.recompute_num_layers = 64;
  expect_rel(estimate(s).step_time_s, ef.step_time_s, 1e-12);
  // Between none and full, the step grows and the memory falls with the count.
  Scenario sn = s;
  sn.plan = none;
  double last_step = estimate(sn).step_time_s, last_mem = estimate(sn).memory.total;
  for (int n : {1, 5, 10, 19, 20}) {
    s.plan.recompute_num_layers = n;
    const Estimate en = estimate(s);
    EXPECT_GT(en.step_time_s, last_step) << n;
    EXPECT_LT(en.memory.total, last_mem) << n;
    last_step = en.step_time_s;
    last_mem = en.memory.total;
  }
}

// Grouped full recomputation (plan.recompute_method "uniform", Megatron-Core's
// _checkpointed_forward: groups of recompute_num_layers consecutive layers of a chunk, each
// checkpointing its first layer's input): on the shipped layout (20 layers a stage) every
// layer recomputes, so the time is full recomputation's; the memory by hand. Groups of 4:
// 5 inputs per microbatch in flight instead of 20, and while the last group recomputes, its 4
// layers' whole activations are live (the other groups' inputs still held). Groups of 8 on
// 20 layers: 8, 8 and 4, three inputs; the largest group live, less the last group's input,
// freed before the first groups recompute (the 4-layer group, recomputed first, holds
// less: 4 whole layers against 8 less one input).
TEST(Estimate, UniformRecomputationKeepsOneInputPerGroupAndHoldsTheLargestGroupLive) {
  Scenario s = shipped_scenario();
  Plan full = s.plan, none = s.plan;
  full.recompute = Recompute::kFull;
  none.recompute = Recompute::kNone;
  const ModelSpec& m = s.model;
  const ClusterSpec& c = s.cluster;
  const Workload& w = s.workload;
  const double a_in = layer_activation_bytes(m, full, w.seq_len, false);
  const double a_all = layer_activation_bytes(m, none, w.seq_len, false);
  const Estimate ef = estimate(m, c, full, w);
  for (const int g : {4, 8}) {
    Plan u = full;
    u.recompute_method = RecomputeMethod::kUniform;
    u.recompute_num_layers = g;
    ASSERT_EQ(u.recompute_group(), g);
    ASSERT_FALSE(u.partial_full_recompute());
    const Estimate e = estimate(m, c, u, w);
    // Every layer re-runs its forward once: the time, the FLOPs and the count are full's.
    expect_rel(e.step_time_s, ef.step_time_s, 1e-12);
    expect_rel(e.hardware_flops_per_step, ef.hardware_flops_per_step, 1e-12);
    for (int st = 0; st < 4; ++st) {
      EXPECT_EQ(full_recompute_layers(m, u, st).total(), 20);
      const double inflight = inflight_microbatches(u, st);
      const MemoryBreakdown mu = stage_memory(m, c, u, w, st), mf = stage_memory(m, c, full, w, st);
      // Full: 20 inputs per microbatch in flight and one whole layer live.
      const double groups = g == 4 ? 5 : 3;
      const double live = g == 4 ? 4 * a_all : 8 * a_all - a_in;
      expect_rel(mu.activations - mf.activations, inflight * (groups - 20) * a_in + live - a_all, 1e-9);
    }
  }
  // The group of a layer: chunks of 20 layers, groups of 8 from each chunk's first layer.
  Plan u = full;
  u.recompute_method = RecomputeMethod::kUniform;
  u.recompute_num_layers = 8;
  EXPECT_EQ(recompute_group_of(m, u, 0).first, 0);
  EXPECT_EQ(recompute_group_of(m, u, 17).first, 16);
  EXPECT_EQ(recompute_group_of(m, u, 17).count, 4);
  EXPECT_EQ(recompute_group_of(m, u, 21).first, 20);  // stage 1 starts a group
  EXPECT_EQ(recompute_group_of(m, u, 21).count, 8);
  // One layer per group is recompute "full" itself, byte for byte.
  u.recompute_num_layers = 1;
  EXPECT_EQ(u.recompute_group(), 1);
  expect_rel(estimate(m, c, u, w).memory.total, ef.memory.total, 1e-15);
}

TEST(Estimate, PipelineStepIsMMinus1SlowestStagesPlusOneOfEach) {
  // Unbalanced stages (the last one also computes the logits): the pipeline part of the
  // step is (m - 1) t_max + sum_s t_s, with t_s = stage_times(s).per_microbatch() (compute
  // and the communication exposed per microbatch); it reduces to (m + p - 1) t when all
  // t_s are equal. The data-parallel tail (ZeRO-1 reduce-scatter / all-gather, exposed.dp,
  // no FSDP term) and the optimizer follow it.
  // Without interference: the overlapped buckets' slowed compute is part of the tail too
  // (Engine.OverlappedBucketsSlowTheBackwardByTheirInterference).
  Scenario s = shipped_scenario();
  s.cluster.gpu.overlap_slowdown = 0;
  ASSERT_EQ(s.plan.zero, 1);
  const Estimate e = estimate(s);
  const int p = s.plan.pp;
  double t_max = 0, t_sum = 0;
  for (int st = 0; st < p; ++st) {
    const double t = stage_times(s.model, s.cluster, s.plan, s.workload, st).per_microbatch();
    t_max = std::max(t_max, t);
    t_sum += t;
  }
  // The last stage is the slowest: it adds the output layer to 20 identical layers.
  EXPECT_EQ(e.slowest_stage, p - 1);
  const double m = static_cast<double>(e.microbatches);
  expect_rel(e.step_time_s - e.breakdown.optimizer - e.breakdown.input - e.exposed.dp - e.breakdown.sp_grad_sync,
             (m - 1) * t_max + t_sum, 1e-12);
}

// The overlapped gradient buckets slow each stage's last backward (model-reference 4.5a:
// f x the reduce-scatters that overlap it, all buckets but the last), and the last
// microbatch's backward runs from the last stage to the first, each stage waiting for the
// next one's gradient: every stage's slowed compute lies on the drain, not only the slowest
// stage's (the engine's interference ops sit between the layers' backward ops). On the
// shipped 70B plan (TP8 PP4 DP2, 1F1B) with 1 GiB buckets, larger than any stage's first
// layer and embedding, every bucket is 1 GiB and stage s slows by
//   int_s = f (RS(4 P_s) - RS(1 GiB)),  P_s its parameters, fp32 gradients,
// RS priced on the DP group (2 ranks at stride TP = 8: one on each of two nodes). The
// slowest stage's (the last) is its compute; the other three's are its wait (bubble).
TEST(Estimate, EveryStagesSlowedLastBackwardLiesOnTheDrain) {
  Scenario s = shipped_scenario();
  s.plan.ddp_bucket_MiB = 1024;
  ASSERT_TRUE(s.plan.overlap_grad_reduce);
  ASSERT_EQ(s.plan.zero, 1);
  Scenario off = s;
  off.cluster.gpu.overlap_slowdown = 0;
  const Estimate e = estimate(s), e0 = estimate(off);
  ASSERT_EQ(e.slowest_stage, 3);
  const double f = overlap_interference(s.cluster.gpu);
  ASSERT_GT(f, 0.1);
  const GroupShape dp = group_shape(2, 8, 8);
  const double gib = 1024.0 * 1024 * 1024;
  const double rs_bucket = collective_cost(s.cluster, CollKind::kReduceScatter, dp, gib).time_s;
  double others = 0, slowest = 0;
  for (int st = 0; st < 4; ++st) {
    const double bytes = 4.0 * rank_params(s.model, s.plan, st).dense;
    ASSERT_GT(bytes, 4 * gib);  // every stage holds several buckets
    const double slowed = f * (collective_cost(s.cluster, CollKind::kReduceScatter, dp, bytes).time_s - rs_bucket);
    (st == 3 ? slowest : others) += slowed;
  }
  expect_rel(e.breakdown.compute - e0.breakdown.compute, slowest, 1e-9);
  expect_rel(e.compute.interference - e0.compute.interference, slowest, 1e-9);
  expect_rel(e.breakdown.bubble - e0.breakdown.bubble, others, 1e-9);
  EXPECT_GT(others, 2 * slowest);  // three stages' worth on the drain
}

TEST(Estimate, MfuIsModelFlopsOverStepTimesWorldTimesPeak) {
  const Scenario s = shipped_scenario();
  const Estimate e = estimate(s);
  // 64 sequences of 8192 tokens = 524,288 tokens per step.
  EXPECT_EQ(e.tokens_per_step, 524'288);
  // Model FLOPs = 481,434,796,032 per token (flops_test) x 524,288 tokens.
  expect_rel(e.model_flops_per_step, 481'434'796'032.0 * 524'288, 1e-12);
  expect_rel(e.model_flops_per_step,
             token_flops(s.model, 8192).training * static_cast<double>(e.tokens_per_step), 1e-12);
  // MFU = model FLOPs / (step time x 64 GPUs x 989.4e12 FLOP/s bf16 dense).
  EXPECT_EQ(e.world, 64);
  expect_rel(e.mfu, e.model_flops_per_step / (e.step_time_s * 64 * 989.4e12), 1e-12);
  expect_rel(e.tokens_per_s, 524'288 / e.step_time_s, 1e-12);
}

TEST(Estimate, DoublingDataParallelAtFixedGlobalBatchHalvesMicrobatches) {
  // m = global_batch / (microbatch x dp): 64 / (1 x 2) = 32; dp 4 on 16 nodes: 16.
  Scenario s = shipped_scenario();
  EXPECT_EQ(estimate(s).microbatches, 32);
  s.plan.dp = 4;
  s.cluster.nodes = 16;
  const Estimate e = estimate(s);
  EXPECT_EQ(e.microbatches, 16);
  EXPECT_EQ(e.world, 128);
  EXPECT_EQ(e.tokens_per_step, 524'288);  // same global batch
}

// TP communication overlap, one dense Llama-3-70B layer on 8 H100 (tp 8, SP, 8,192 tokens
// per microbatch), by hand from the primitives (docs/model-reference.md "TP communication
// overlap"). Each TP collective moves T h 2 = 8192 x 8192 x 2 bytes within the node: c_ag,
// c_rs seconds (collective_cost). The GEMMs split into 8 chunks of 1,024 rows:
//   qkv  (1024 x 1280) . (1280 x 8192)^T: N = 64/8 x 128 + 1 x 2 x 128 = 1,280, K = 8,192
//   proj (1024 x 1024) -> 8,192:           N = 8,192, K = 64/8 x 128 = 1,024
//   fc1  N = 2 x 28,672 / 8 = 7,168, K = 8,192;  fc2  N = 8,192, K = 28,672 / 8 = 3,584
// exposed per ring collective = 7 max(0, c/7 - g_chunk); bulk RS = max(0, c_rs - g_full).
// forward  = ring(ag, qkv) + ring(rs, proj) + ring(ag, fc1) + ring(rs, fc2)
// backward = ring(ag, fc2) + bulk(rs, fc1 full) + ring(ag, proj) + bulk(rs, qkv full)
// With FlashAttention selective recomputation adds no pass: exposed = forward + backward.
TEST(TpCommOverlap, OneLayerExposedTimeByHand) {
  const ModelSpec& m = builtin_presets().models.at("llama3-70b");
  ClusterSpec c = builtin_presets().clusters.at("dgx-h100");
  c.nodes = 8;
  c.gpu.overlap_slowdown = 0;  // interference: the next test
  Plan p;
  p.tp = 8, p.pp = 4, p.dp = 2, p.sequence_parallel = true, p.tp_comm_overlap = true;
  p.global_batch = 64;
  const double T = 8192, h = 8192;
  const GroupShape g = group_shape(8, 1, 8);
  const double c_ag = collective_cost(c, CollKind::kAllGather, g, T * h * 2).time_s;
  const double c_rs = collective_cost(c, CollKind::kReduceScatter, g, T * h * 2).time_s;
  // Every GPU time at the pace of the slowest of the 64 GPUs (model-reference §4.5).
  const double pace = 1 + 0.0148 * expected_max_standard_normal(64);
  ASSERT_DOUBLE_EQ(job_pace(c), pace);
  auto gemm = [&](double mm, double nn, double kk) { return pace * gemm_time_s(c.gpu, Precision::kBf16, mm, nn, kk); };
  const double qkv = gemm(1024, 1280, 8192), proj = gemm(1024, 8192, 1024);
  const double fc1 = gemm(1024, 7168, 8192), fc2 = gemm(1024, 8192, 3584);
  auto ring = [](double coll, double chunk) { return 7 * std::max(0.0, coll / 7 - chunk); };
  const double fwd = ring(c_ag, qkv) + ring(c_rs, proj) + ring(c_ag, fc1) + ring(c_rs, fc2);
  // Backward: the dgrad chunks of fc2 and proj (1/8 of the data gradient, M x K output:
  // 8192 x 3584 and 8192 x 1024, inner 8192) ring-exchanged with the all-gathers; the
  // reduce-scatters beside the wgrads of fc1 and qkv (K x N output, inner M = T).
  const double bwd = ring(c_ag, gemm(8192, 3584, 8192) / 8) + std::max(0.0, c_rs - gemm(8192, 7168, 8192)) +
                     ring(c_ag, gemm(8192, 1024, 8192) / 8) + std::max(0.0, c_rs - gemm(8192, 1280, 8192));
  const LayerCost lc = layer_cost(m, c, p, 8192, false);
  ASSERT_TRUE(lc.tp_overlap);
  const LayerComm cm = layer_comm(m, c, p, 8192, false, lc);
  EXPECT_DOUBLE_EQ(cm.tp_overlap_fwd_s, fwd);
  EXPECT_DOUBLE_EQ(cm.tp_overlap_bwd_s, bwd);
  EXPECT_DOUBLE_EQ(cm.tp_exposed_s, fwd + bwd);
  // Against the unoverlapped layer: 2 (AG + RS) per pass, 2 passes; and the split GEMMs
  // cost 8 chunks each in the forward.
  EXPECT_LT(cm.tp_exposed_s, 0.25 * 4 * (c_ag + c_rs));
  EXPECT_DOUBLE_EQ(lc.attn_gemm_s, 8 * qkv + 8 * proj);
  EXPECT_DOUBLE_EQ(lc.mlp_gemm_s, 8 * fc1 + 8 * fc2);
  // Overlap off: the unsplit totals, all collectives exposed. The backward runs each GEMM's
  // data gradient (M x K output, inner N) and weight gradient (K x N output, inner M).
  p.tp_comm_overlap = false;
  const LayerCost off = layer_cost(m, c, p, 8192, false);
  EXPECT_EQ(off.attn_gemm_s, gemm(8192, 1280, 8192) + gemm(8192, 8192, 1024));
  EXPECT_DOUBLE_EQ(off.attn_gemm_bwd_s,
                   gemm(8192, 8192, 1280) + gemm(8192, 1280, 8192) + gemm(8192, 1024, 8192) + gemm(1024, 8192, 8192));
  EXPECT_EQ(layer_comm(m, c, p, 8192, false, off).tp_exposed_s, 2 * (c_ag + c_rs) * 2);
  // MoE layers keep their TP collectives exposed.
  const ModelSpec& mix = builtin_presets().models.at("mixtral-8x7b");
  Plan q = p;
  q.tp_comm_overlap = true;
  EXPECT_FALSE(layer_cost(mix, c, q, 8192, true).tp_overlap);
}

// Compute-communication interference of the overlapped TP collectives (model-reference
// 4.5a), the same layer as above with s = 0.189 (Lee et al. 2025's mean): a collective of
// c seconds beside w seconds of compute ends the pair max(c, w + f c) after it starts,
// f = s / (1 + s): f c is charged as slowed compute and max(0, (1 - f) c - w) stays exposed.
// Per ring step c/7 beside one chunk; the bulk RS beside the whole wgrad. Each pass
// overlaps 2 all-gathers and 2 reduce-scatters.
TEST(TpCommOverlap, InterferenceOfTheOverlappedCollectivesByHand) {
  const ModelSpec& m = builtin_presets().models.at("llama3-70b");
  ClusterSpec c = builtin_presets().clusters.at("dgx-h100");
  c.nodes = 8;
  c.gpu.overlap_slowdown = 0.189;
  Plan p;
  p.tp = 8, p.pp = 4, p.dp = 2, p.sequence_parallel = true, p.tp_comm_overlap = true;
  p.global_batch = 64;
  const double T = 8192, h = 8192, f = 0.189 / 1.189;
  const GroupShape g = group_shape(8, 1, 8);
  const double c_ag = collective_cost(c, CollKind::kAllGather, g, T * h * 2).time_s;
  const double c_rs = collective_cost(c, CollKind::kReduceScatter, g, T * h * 2).time_s;
  const double pace = job_pace(c);
  auto gemm = [&](double mm, double nn, double kk) { return pace * gemm_time_s(c.gpu, Precision::kBf16, mm, nn, kk); };
  const double qkv = gemm(1024, 1280, 8192), proj = gemm(1024, 8192, 1024);
  const double fc1 = gemm(1024, 7168, 8192), fc2 = gemm(1024, 8192, 3584);
  auto ring = [&](double coll, double chunk) { return 7 * std::max(0.0, (1 - f) * coll / 7 - chunk); };
  auto bulk = [&](double coll, double w) { return std::max(0.0, (1 - f) * coll - w); };
  const double fwd = ring(c_ag, qkv) + ring(c_rs, proj) + ring(c_ag, fc1) + ring(c_rs, fc2);
  // Backward: each ring step beside 1/8 of a data gradient (fc2's and proj's, as the test
  // above), each bulk reduce-scatter beside a weight gradient.
  const double bwd = ring(c_ag, gemm(8192, 3584, 8192) / 8) + bulk(c_rs, gemm(8192, 7168, 8192)) +
                     ring(c_ag, gemm(8192, 1024, 8192) / 8) + bulk(c_rs, gemm(8192, 1280, 8192));
  const double per_pass = f * 2 * (c_ag + c_rs);
  const LayerCost lc = layer_cost(m, c, p, 8192, false);
  const LayerComm cm = layer_comm(m, c, p, 8192, false, lc);
  EXPECT_DOUBLE_EQ(cm.tp_overlap_fwd_s, fwd);
  EXPECT_DOUBLE_EQ(cm.tp_overlap_bwd_s, bwd);
  EXPECT_DOUBLE_EQ(cm.interference_fwd_s, per_pass);
  EXPECT_DOUBLE_EQ(cm.interference_s, 2 * per_pass);
  ClusterSpec quiet = c;
  quiet.gpu.overlap_slowdown = 0;
  const LayerComm off = layer_comm(m, quiet, p, 8192, false, lc);
  EXPECT_EQ(off.interference_s, 0.0);
  // Slowed compute plus exposed TP is never less than the exposed TP without interference.
  EXPECT_GE(cm.interference_s + cm.tp_exposed_s, off.tp_exposed_s);
  // The step: 80 layers over 4 stages, 20 per stage, 64 / 2 = 32 microbatches; the closed
  // form charges the interference as compute (gradient reduction not overlapped here, so
  // that the TP collectives alone slow it).
  p.overlap_grad_reduce = false;
  const Workload w{8192, 0, 0};
  const Estimate on = estimate(m, c, p, w), base = estimate(m, quiet, p, w);
  EXPECT_NEAR(on.compute.interference, 32 * 20 * 2 * per_pass, 1e-9);
  EXPECT_NEAR(on.breakdown.compute - base.breakdown.compute, on.compute.interference, 1e-9);

  // Context parallelism: the ring's cp-1 = 1 exchange beside 1/cp of the attention core,
  // forward (K, V) and backward (twice the bytes).
  Plan q;
  q.tp = 4, q.cp = 2, q.dp = 2, q.sequence_parallel = true, q.global_batch = 16;
  const ModelSpec& m8 = builtin_presets().models.at("llama3-8b");
  ClusterSpec c2 = c;
  c2.nodes = 2;
  const LayerCost l8 = layer_cost(m8, c2, q, 8192, false);
  const LayerComm k8 = layer_comm(m8, c2, q, 8192, false, l8);
  ASSERT_GT(k8.cp_step_fwd_s, 0.0);
  EXPECT_DOUBLE_EQ(k8.interference_fwd_s, f * k8.cp_step_fwd_s);
  EXPECT_DOUBLE_EQ(k8.interference_s, f * (k8.cp_step_fwd_s + k8.cp_step_bwd_s));
  EXPECT_DOUBLE_EQ(k8.cp_exposed_s, std::max(0.0, (1 - f) * k8.cp_step_fwd_s - l8.attn_core_s / 2) +
                                        std::max(0.0, (1 - f) * k8.cp_step_bwd_s - l8.attn_core_bwd_s / 2));
}

}  // namespace
}  // namespace stepcast

namespace stepcast {
namespace {

// Mixtral 8x7B on tp 2 with sequence parallelism, ep 8: experts split by TP (etp 2, each
// rank all T tokens at half width) or folded (etp 1, each rank its T/2 tokens at full
// width). Counted by hand: h = 4096, F_e = 14336, E = 8, k = 2, T = 4096 tokens.
TEST(MoeLayer, FoldedExpertsDoTheSameFlopsOnHalfTheRowsAtFullWidth) {
  const ModelSpec& m = builtin_presets().models.at("mixtral-8x7b");
  ClusterSpec c = builtin_presets().clusters.at("dgx-h100");
  c.nodes = 2;
  Plan p;
  p.tp = 2;
  p.dp = 8;
  p.ep = 8;
  p.sequence_parallel = true;
  const double h = 4096, Fe = 14336, E = 8, T = 4096, T_in = T / 2;
  const double router = 2 * T_in * E * h;
  // Unfolded: rows per expert T*k*ep/E = 8192, width F_e/2; one local expert.
  const LayerCost unfolded = layer_cost(m, c, p, 4096, true);
  const double expert_unfolded = 2 * 8192 * (2 * Fe / 2) * h + 2 * 8192 * h * (Fe / 2);
  EXPECT_DOUBLE_EQ(unfolded.mlp_flops, router + expert_unfolded);
  // Folded: rows (T/2)*k*ep/E = 4096, width F_e.
  p.etp = 1;
  const LayerCost folded = layer_cost(m, c, p, 4096, true);
  const double expert_folded = 2 * 4096 * (2 * Fe) * h + 2 * 4096 * h * Fe;
  EXPECT_DOUBLE_EQ(folded.mlp_flops, router + expert_folded);
  EXPECT_DOUBLE_EQ(expert_folded, expert_unfolded);
  // The experts' activation traffic follows the rank's rows: T k F_e / t per rank either way.
  EXPECT_DOUBLE_EQ(folded.mlp_elem_s, unfolded.mlp_elem_s);
  // The MoE block's TP pair: with etp = tp = 2 the expert-TP all-gather / reduce-scatter of
  // the dispatched rows, T k h x 2 bytes = 4096 x 2 x 4096 x 2 = 67,108,864; folded, none:
  // only the attention block's pair on T h x 2 = 33,554,432 bytes remains.
  Plan q = p;
  q.etp = 0;
  const LayerComm cu = layer_comm(m, c, q, 4096, true, unfolded);
  const LayerComm cf = layer_comm(m, c, p, 4096, true, folded);
  EXPECT_DOUBLE_EQ(cu.moe_tp_bytes, 67'108'864.0);
  EXPECT_DOUBLE_EQ(cf.moe_tp_bytes, 0.0);
  EXPECT_DOUBLE_EQ(cf.tp_bytes, 33'554'432.0);
  const double pair = cf.tp_allgather_s + cf.tp_reducescatter_s;
  EXPECT_NEAR(cf.tp_exposed_s, 2 * pair, 1e-15);  // forward and backward, attention only
  EXPECT_GT(cu.tp_exposed_s, 2 * (pair + pair));   // the MoE pair moves twice the bytes
}

// Parallel folding with an expert-TP group of its own (Megatron-Core's alltoall dispatcher:
// all-to-all over EP, then gather_from_sequence_parallel_region over the expert-TP group).
// Mixtral 8x7B, T = 4096 tokens per microbatch, h = 4096, F_e = 14336, E = 8, k = 2.
TEST(MoeLayer, ExpertTensorParallelGroupOfItsOwnByHand) {
  const ModelSpec& m = builtin_presets().models.at("mixtral-8x7b");
  ClusterSpec c = builtin_presets().clusters.at("dgx-h100");
  c.nodes = 1;
  const double h = 4096, Fe = 14336, E = 8, k = 2, T = 4096;
  // tp 2 with SP, dp 4, ep 2, etp 4 (wider than tp): each rank's T/2 tokens, gathered over
  // 4 ranks: T_e = 8192; rows per expert T_e k ep / E = 4096 on E / ep = 4 local experts,
  // each matrix split 4 ways (F_e / 4 = 3584).
  Plan p;
  p.tp = 2;
  p.dp = 4;
  p.ep = 2;
  p.etp = 4;
  p.sequence_parallel = true;
  EXPECT_DOUBLE_EQ(expert_tokens(p, T), 8192.0);
  const LayerCost lc = layer_cost(m, c, p, 4096, true);
  const double router = 2 * (T / 2) * E * h;
  const double experts = 4 * (2 * 4096 * (2 * 3584) * h + 2 * 4096 * h * 3584);
  EXPECT_DOUBLE_EQ(lc.mlp_flops, router + experts);
  // The rank's share of the layer's expert work either way: (T / tp) k x 3 matrices x 2 h F_e.
  EXPECT_DOUBLE_EQ(experts, (T / 2) * k * 3 * 2 * h * Fe);
  // The MoE pair moves the gathered rows, T_e k h x 2 bytes = 8192 x 2 x 4096 x 2, over the 4
  // consecutive ranks of the expert-TP group (one node), not the tp = 2 group.
  const LayerComm cm = layer_comm(m, c, p, 4096, true, lc);
  EXPECT_DOUBLE_EQ(cm.moe_tp_bytes, 134'217'728.0);
  const GroupShape etp4 = group_shape(4, 1, 8);
  const double moe_pair = collective_cost(c, CollKind::kAllGather, etp4, 134'217'728.0).time_s +
                          collective_cost(c, CollKind::kReduceScatter, etp4, 134'217'728.0).time_s;
  EXPECT_DOUBLE_EQ(cm.tp_mlp_pass_s, moe_pair);
  const GroupShape tp2 = group_shape(2, 1, 8);
  EXPECT_NE(moe_pair, collective_cost(c, CollKind::kAllGather, tp2, 134'217'728.0).time_s +
                          collective_cost(c, CollKind::kReduceScatter, tp2, 134'217'728.0).time_s);
  const double attn_pair = cm.tp_allgather_s + cm.tp_reducescatter_s;
  EXPECT_NEAR(cm.tp_exposed_s, 2 * (attn_pair + moe_pair), 1e-15);  // forward and backward
  // tp 1, dp 8, ep 4, etp 2: no attention TP, T_e = 2T = 8192, rows per expert 8192 x 2 x 4 /
  // 8 = 8192 on 2 local experts at F_e / 2; the pair alone on an expert-TP pair of ranks.
  Plan q;
  q.dp = 8;
  q.ep = 4;
  q.etp = 2;
  EXPECT_DOUBLE_EQ(expert_tokens(q, T), 8192.0);
  const LayerCost lq = layer_cost(m, c, q, 4096, true);
  EXPECT_DOUBLE_EQ(lq.mlp_flops, 2 * T * E * h + 2 * (2 * 8192 * (2 * 7168) * h + 2 * 8192 * h * 7168));
  const LayerComm cq = layer_comm(m, c, q, 4096, true, lq);
  EXPECT_DOUBLE_EQ(cq.moe_tp_bytes, 8192 * 2 * 4096 * 2.0);
  const GroupShape etp2 = group_shape(2, 1, 8);
  const double pair2 = collective_cost(c, CollKind::kAllGather, etp2, cq.moe_tp_bytes).time_s +
                       collective_cost(c, CollKind::kReduceScatter, etp2, cq.moe_tp_bytes).time_s;
  EXPECT_EQ(cq.tp_attn_pass_s, 0.0);
  EXPECT_DOUBLE_EQ(cq.tp_mlp_pass_s, pair2);
  EXPECT_NEAR(cq.tp_exposed_s, 2 * pair2, 1e-15);
  // Its activation memory holds the gathered fc1 input: T_e k h x 2 bytes more per layer than
  // the same experts unsplit (etp 1: T k h x 2), besides equal expert activations.
  Plan q1 = q;
  q1.etp = 1;
  EXPECT_NEAR(layer_activation_bytes(m, q, 4096, true) - layer_activation_bytes(m, q1, 4096, true),
              2.0 * (8192 - 4096) * k * h, 1.0);
}

// Megatron-Core's all-gather dispatcher (MoEAllGatherTokenDispatcher): Mixtral on tp 2 (SP),
// dp 4, ep 4 (etp = tp): each rank's T/2 = 2048 tokens gathered over the expert-TP x EP group
// of 8 consecutive ranks (one node): 16,384 tokens, 16384 x 4096 x 2 = 134,217,728 bytes,
// with the routing map (1 byte per expert: 131,072) and probabilities (4: 524,288); the
// output reduce-scattered back. Backward: the output gradient gathered, the tokens' and
// probabilities' gradients reduce-scattered. No expert-TP pair of its own.
TEST(MoeLayer, AllGatherDispatcherByHand) {
  const ModelSpec& m = builtin_presets().models.at("mixtral-8x7b");
  ClusterSpec c = builtin_presets().clusters.at("dgx-h100");
  c.nodes = 1;
  Plan p;
  p.tp = 2;
  p.dp = 4;
  p.ep = 4;
  p.sequence_parallel = true;
  p.moe_dispatcher = MoeDispatcher::kAllGather;
  const LayerCost lc = layer_cost(m, c, p, 4096, true);
  const LayerComm cm = layer_comm(m, c, p, 4096, true, lc);
  EXPECT_DOUBLE_EQ(cm.ep_bytes, 134'217'728.0);
  const GroupShape g8 = group_shape(8, 1, 8);
  auto t = [&](CollKind k, double bytes) { return collective_cost(c, k, g8, bytes).time_s; };
  const double fwd = t(CollKind::kAllGather, 134'217'728.0) + t(CollKind::kAllGather, 131'072.0) +
                     t(CollKind::kAllGather, 524'288.0) + t(CollKind::kReduceScatter, 134'217'728.0);
  const double bwd = t(CollKind::kReduceScatter, 134'217'728.0) + t(CollKind::kReduceScatter, 524'288.0) +
                     t(CollKind::kAllGather, 134'217'728.0);
  EXPECT_DOUBLE_EQ(cm.ep_dispatch_fwd_s, fwd);
  EXPECT_DOUBLE_EQ(cm.ep_dispatch_bwd_s, bwd);
  EXPECT_NEAR(cm.ep_exposed_s, fwd + bwd, 1e-15);
  EXPECT_EQ(cm.ep_a2a_s, 0.0);
  // The MoE block has no expert-TP pair: only the attention block's TP pair remains.
  EXPECT_EQ(cm.moe_tp_bytes, 0.0);
  EXPECT_NEAR(cm.tp_exposed_s, 2 * (cm.tp_allgather_s + cm.tp_reducescatter_s), 1e-15);
  // The experts' rows are the all-to-all dispatcher's: the same FLOPs.
  Plan a = p;
  a.moe_dispatcher = MoeDispatcher::kAllToAll;
  EXPECT_DOUBLE_EQ(layer_cost(m, c, a, 4096, true).mlp_flops, lc.mlp_flops);
  // With full recomputation the forward's collectives run twice.
  p.recompute = Recompute::kFull;
  const LayerComm full = layer_comm(m, c, p, 4096, true, layer_cost(m, c, p, 4096, true));
  EXPECT_NEAR(full.ep_exposed_s, 2 * fwd + bwd, 1e-15);
}

// DeepEP's dispatcher on Qwen3-30B-A3B, ep 8 in one node: a token's 8 of 128 experts miss a
// rank's 16 with probability (112/128)(111/127)...(105/121) = 1440882009/4332432280, so it
// reaches 8 (1 - that) = 5.3394 ranks, not 8: each rank receives 4096 x 5.3394 rows of
// 2048 x 2 bytes = 89.58 MB, over NVLink at DeepEP's 153/200 of 450 GB/s, plus one hop's
// latency; dispatch and combine per pass.
TEST(MoeLayer, DeepEpDispatcherByHand) {
  const ModelSpec& m = builtin_presets().models.at("qwen3-30b-a3b");
  ClusterSpec c = builtin_presets().clusters.at("dgx-h100");
  c.nodes = 1;
  Plan p;
  p.dp = 8;
  p.ep = 8;
  p.moe_dispatcher = MoeDispatcher::kDeepEp;
  const LayerCost lc = layer_cost(m, c, p, 4096, true);
  const LayerComm cm = layer_comm(m, c, p, 4096, true, lc);
  const double ranks = 8 * (1 - 1440882009.0 / 4332432280.0);
  EXPECT_NEAR(cm.ep_bytes, 4096 * ranks * 2048 * 2, 1e-6);
  EXPECT_NEAR(cm.ep_bytes, 89'579'543.93, 0.01);
  EXPECT_EQ(cm.ep_rdma_per_byte, 0.0);
  const double a2a = c.intra_latency_us * 1e-6 + cm.ep_bytes / (153.0 / 200.0 * 450e9);
  EXPECT_NEAR(cm.ep_a2a_s, a2a, 1e-15);
  EXPECT_NEAR(cm.ep_exposed_s, 4 * a2a, 1e-15);
  // NCCL's all-to-all moves every routed copy: 8 per token.
  Plan nccl = p;
  nccl.moe_dispatcher = MoeDispatcher::kAllToAll;
  EXPECT_DOUBLE_EQ(layer_comm(m, c, nccl, 4096, true, lc).ep_bytes, 4096 * 8 * 2048 * 2.0);
  // The estimate says so.
  p.global_batch = 64;
  Workload w;
  w.seq_len = 4096;
  const Estimate e = estimate(m, c, p, w);
  EXPECT_NE(std::find(e.notes.begin(), e.notes.end(),
                      "DeepEP dispatcher: a token's 8 routed copies reach 5.34 of 8 ranks, sent once per rank "
                      "(docs/model-reference.md 5.11)"),
            e.notes.end());
}

// The all-to-all dispatcher's memory traffic (Megatron-Core token_dispatcher.py), counted by
// hand for one rank and microbatch, forward: permute reads and writes T_in k h elements,
// unpermute reads T_in k h and writes T_in h, two sorts by expert read and write T_e k h
// each when a rank holds more than one expert; the router's softmax/top-k 3 fp32 passes
// over T_in x E scores.
TEST(MoeLayer, RoutingTrafficByHand) {
  const ModelSpec& m = builtin_presets().models.at("mixtral-8x7b");
  const ClusterSpec c = builtin_presets().clusters.at("dgx-h100");
  Plan p;
  p.dp = 8;
  p.ep = 8;  // one local expert: no sort
  const double h = 4096, k = 2, E = 8, T = 4096;
  const double bw = c.gpu.hbm_bandwidth_GBps * 1e9 * c.gpu.hbm_efficiency;
  const double one_expert = 2 * T * (3 * k * h + h) + 12 * E * T;  // 234,881,024 + 393,216 bytes
  EXPECT_DOUBLE_EQ(one_expert, 235'274'240.0);
  EXPECT_NEAR(layer_cost(m, c, p, 4096, true).moe_route_s, job_pace(c) * one_expert / bw, 1e-15);
  // ep 2: four local experts, T_e = T: + 2 sorts x 2 (read + write) x T k h elements.
  p.ep = 2;
  const double sorted = one_expert + 2 * 2 * 2 * T * k * h;
  EXPECT_NEAR(layer_cost(m, c, p, 4096, true).moe_route_s, job_pace(c) * sorted / bw, 1e-15);
  // It is part of the MLP block's memory-bound time, and dense layers have none.
  const LayerCost lc = layer_cost(m, c, p, 4096, true);
  EXPECT_GT(lc.mlp_elem_s, lc.moe_route_s);
  EXPECT_EQ(layer_cost(m, c, p, 4096, false).moe_route_s, 0.0);
}

}  // namespace
}  // namespace stepcast

namespace stepcast {
namespace {

// FP8 operand quantization, counted by hand for one Llama-3-70B layer on tp 4 with sequence
// parallelism, T = 8192 tokens (h 8192, a_r 16, g_r 2, head dim 128, F/t 7168):
//   forward attention: QKV input 2048 x 8192 (SP shard) + out-proj input 8192 x 2048
//     = 33,554,432; backward: QKV output gradient 8192 x (16 x 128 + 2 x 256) + out-proj
//     output gradient 2048 x 8192 = 37,748,736;
//   forward MLP: fc1 input 16,777,216 + fc2 input 8192 x 7168 = 75,497,472; backward: fc1
//     output gradient 8192 x 2 x 7168 + fc2 output gradient 16,777,216 = 134,217,728.
// At 6 bytes per element that traffic is memory-bound time of the layer, and the output
// layer stays 16-bit.
TEST(Fp8, QuantizedOperandsOfOneLayerByHand) {
  const ModelSpec& m = builtin_presets().models.at("llama3-70b");
  ClusterSpec c = builtin_presets().clusters.at("dgx-h100");
  c.nodes = 4;
  Plan p;
  p.tp = 4;
  p.sequence_parallel = true;
  p.precision = Precision::kFp8;
  const Fp8Elements q = fp8_quantized_elements(m, p, 8192, false);
  EXPECT_DOUBLE_EQ(q.fwd_attn, 33'554'432.0);
  EXPECT_DOUBLE_EQ(q.bwd_attn, 37'748'736.0);
  EXPECT_DOUBLE_EQ(q.fwd_mlp, 75'497'472.0);
  EXPECT_DOUBLE_EQ(q.bwd_mlp, 134'217'728.0);
  const LayerCost fp8 = layer_cost(m, c, p, 8192, false);
  EXPECT_DOUBLE_EQ(fp8.fp8_quant_bytes, 6.0 * (33'554'432.0 + 37'748'736.0 + 75'497'472.0 + 134'217'728.0));
  Plan bf = p;
  bf.precision = Precision::kBf16;
  const LayerCost b = layer_cost(m, c, bf, 8192, false);
  const double bw = c.gpu.hbm_bandwidth_GBps * 1e9 * c.gpu.hbm_efficiency;
  // A third of each block's traffic on the forward (the backward is charged twice that).
  EXPECT_NEAR(fp8.attn_elem_s - b.attn_elem_s, job_pace(c) * 6.0 * (33'554'432.0 + 37'748'736.0) / 3 / bw, 1e-15);
  EXPECT_NEAR(fp8.mlp_elem_s - b.mlp_elem_s, job_pace(c) * 6.0 * (75'497'472.0 + 134'217'728.0) / 3 / bw, 1e-15);
  EXPECT_EQ(logits_cost(m, c, p, 8192).fwd_s, logits_cost(m, c, bf, 8192).fwd_s);

  // The other recipes quantize in one pass (plan.fp8_recipe, Transformer Engine's kernels):
  // delayed scaling's cast + transpose 2 + 1 + 1 = 4 B per element; blockwise adds fp32
  // scales per 128 elements in both layouts, 4 + 8/128 = 4.0625; MXFP8 E8M0 scales per 32,
  // 4 + 2/32 = 4.0625. The same 281,018,368 elements: the figures docs/model-reference.md
  // §4.4 prints, 1.686 GB at 6 B, 1.124 GB at 4 and 1.142 GB at 4.0625.
  const double elements = 33'554'432.0 + 37'748'736.0 + 75'497'472.0 + 134'217'728.0;
  EXPECT_NEAR(fp8.fp8_quant_bytes, 1.686e9, 1e6);
  struct Case {
    Fp8Recipe recipe;
    double per, documented_bytes;
  };
  for (const Case& k : {Case{Fp8Recipe::kDelayed, 4.0, 1.124e9}, Case{Fp8Recipe::kBlockwise, 4.0625, 1.142e9},
                        Case{Fp8Recipe::kMxfp8, 4.0625, 1.142e9}}) {
    Plan r = p;
    r.fp8_recipe = k.recipe;
    const LayerCost lc = layer_cost(m, c, r, 8192, false);
    EXPECT_DOUBLE_EQ(lc.fp8_quant_bytes, k.per * elements) << to_string(k.recipe);
    EXPECT_NEAR(lc.fp8_quant_bytes, k.documented_bytes, 1e6) << to_string(k.recipe);
    EXPECT_NEAR(lc.mlp_elem_s - b.mlp_elem_s, job_pace(c) * k.per * (75'497'472.0 + 134'217'728.0) / 3 / bw, 1e-15);
    EXPECT_EQ(lc.mlp_gemm_s, fp8.mlp_gemm_s);  // the GEMMs run at the same FP8 rate
  }
}

}  // namespace
}  // namespace stepcast

namespace stepcast {
namespace {

// The host optimizer step (docs/model-reference.md §3.5) on a DGX H100 for P parameters:
// gradients down (4 B) and 16-bit weights up (2 B) at 63 GB/s x 0.8, Adam on the host at
// the GPU's share of 614.4 GB/s x 0.8 / 8 GPUs = 61.44 GB/s, 30 B per parameter; the two
// pipelined (max); the GPU's share (26 + 4 B at HBM 3350 GB/s x 0.8) before it.
TEST(Offload, OptimizerStepOnTheHostByHand) {
  const ClusterSpec c = builtin_presets().clusters.at("dgx-h100");
  Plan p;
  const double P = 8.8e9;
  const double host = std::max(P * 6 / (63e9 * 0.8), P * 30 / 61.44e9);  // 4.297 s (host-bound)
  EXPECT_NEAR(host, 4.296875, 1e-9);
  p.offload_optimizer = 1;
  // Its parts: 4 B of gradient down and 2 B of weights up per parameter, one after the
  // other, beside the host's 30 B; nothing on the GPU.
  const OptimizerStep o = optimizer_step(c, p, P);
  EXPECT_EQ(o.gpu_s, 0.0);
  EXPECT_DOUBLE_EQ(o.down_bytes, 4 * P);
  EXPECT_DOUBLE_EQ(o.up_bytes, 2 * P);
  EXPECT_DOUBLE_EQ(o.host_bytes, 30 * P);
  EXPECT_NEAR(o.down_s + o.up_s, P * 6 / (63e9 * 0.8), 1e-12);
  EXPECT_NEAR(o.host_s, P * 30 / 61.44e9, 1e-12);
  EXPECT_NEAR(optimizer_time_s(c, p, P), host, 1e-12 * host);
  EXPECT_NEAR(host_optimizer_time_s(c, p, P), host, 1e-12 * host);
  p.offload_optimizer = 0.5;
  // The GPU's half: Adam 26 + 4 B, and Megatron's gradient norm reads the 4 B gradient again.
  const double gpu = job_pace(c) * 0.5 * P * 34 / (3350e9 * 0.8);
  EXPECT_NEAR(optimizer_time_s(c, p, P), gpu + host / 2, 1e-12 * host);
  p.offload_optimizer = 0;
  EXPECT_EQ(host_optimizer_time_s(c, p, P), 0.0);
}

// The gradient pass before the update (models/data/stacks.json grad_clip_bytes,
// fp16_unscale_bytes), per parameter of the shard, by hand on one DGX H100 GPU (HBM 3350 GB/s
// x 0.8): Megatron's norm reads the fp32 main gradient (4 B) and scales it only when the
// norm exceeds the threshold (not priced); PyTorch's clip_grad_norm_ multiplies on every
// step (4 + 8 B); DeepSpeed reads its 16-bit gradient for the norm, copies it to fp32 and
// multiplies it on every step (2 + 6 + 8 B). fp16 adds Megatron's unscale (8 B) or
// DeepSpeed's overflow check (2 B).
TEST(Optimizer, GradientNormAndClipBytesPerStackByHand) {
  const ClusterSpec c = builtin_presets().clusters.at("dgx-h100");
  const double P = 1e9, bw = 3350e9 * 0.8, pace = job_pace(c);
  struct Want {
    Stack stack;
    Precision precision;
    double clip;
  };
  for (const Want& w :
       {Want{Stack::kMegatronCore, Precision::kBf16, 4}, Want{Stack::kMegatronCore, Precision::kFp16, 12},
        Want{Stack::kFsdp2Eager, Precision::kBf16, 12}, Want{Stack::kLlmFoundry, Precision::kBf16, 12},
        Want{Stack::kDeepspeedZero, Precision::kBf16, 16}, Want{Stack::kDeepspeedZero, Precision::kFp16, 18},
        Want{Stack::kMegatronDeepspeed, Precision::kBf16, 4}}) {
    Plan p;
    p.stack = w.stack;
    p.precision = w.precision;
    const OptimizerStep o = optimizer_step(c, p, P);
    EXPECT_NEAR(o.clip_s, pace * P * w.clip / bw, 1e-12) << to_string(w.stack);
    EXPECT_NEAR(o.gpu_s, pace * P * (26 + 4 + w.clip) / bw, 1e-12) << to_string(w.stack);
  }
  // With optimizer offload the GPU norms its own share (the host's pass is not priced).
  Plan half;
  half.offload_optimizer = 0.5;
  EXPECT_NEAR(optimizer_step(c, half, P).clip_s, pace * 0.5 * P * 4 / bw, 1e-12);
}

// The estimate attributes the gradient pass inside its optimizer part: on the shipped 70B
// plan (megatron-core, bf16, no offload) it is 4 of the stage's 26 + 4 + 4 bytes per
// parameter; text and JSON show it.
TEST(Optimizer, TheEstimateShowsTheGradientPassInsideTheOptimizerStep) {
  const Result<Scenario> s =
      load_scenario_file(std::string(STEPCAST_SOURCE_DIR) + "/scenarios/llama3-70b-64xh100.json");
  ASSERT_TRUE(s.ok());
  const Estimate e = estimate(*s);
  ASSERT_GT(e.breakdown.optimizer, 0.0);
  // The norm's pass is that of the stage that reaches the norm's all-reduce last, the rest of
  // the update that of the stage with the longest: stages whose parameters differ by the
  // embedding's share of a layer (3.7e-7 of the ratio here).
  EXPECT_NEAR(e.breakdown.optimizer_clip / e.breakdown.optimizer, 4.0 / 34.0, 1e-5);
  EXPECT_NE(estimate_report_text(*s, e).find("    gradient norm/clip"), std::string::npos);
  EXPECT_DOUBLE_EQ(estimate_report_value(*s, e)["optimizer_s"]["gradient_clip"].get<double>(),
                   e.breakdown.optimizer_clip);
}

// A layer's offload transfers hide behind its own compute of that pass; only the excess is
// exposed. On a host link of 1 GB/s (efficiency 1) a layer whose activations take far longer
// than its compute exposes nearly all of them. Offloaded both ways, the forward's
// activations out (2 s) and weights in (0.4 s) take the link's two directions at once, the
// backward's activations and weights both come in, one after the other (2.4 s).
TEST(Offload, LayerTransfersExposeOnlyWhatTheirComputeDoesNotHide) {
  const ModelSpec& m = builtin_presets().models.at("llama3-8b");
  ClusterSpec c = builtin_presets().clusters.at("dgx-h100");
  c.host_link_GBps = 1;
  c.host_efficiency = 1;
  Plan p;
  p.offload_activations = 1;
  p.offload_weights = 1;
  const LayerCost lc = layer_cost(m, c, p, 4096, false);
  const LayerComm none;  // one GPU: no TP, CP or EP communication beside the compute
  const LayerOffload o = layer_offload(c, p, lc, none, 2e9, 0.4e9);  // 2 s and 0.4 s over the link
  EXPECT_NEAR(o.exposed_fwd(true, false), 2.0 - lc.fwd_s(), 1e-12);
  EXPECT_NEAR(o.exposed_bwd(true, false), 2.0 - lc.bwd_s(), 1e-12);
  EXPECT_NEAR(o.exposed_fwd(false, true), 0.4 - lc.fwd_s(), 1e-12);
  EXPECT_NEAR(o.exposed_fwd(true, true), 2.0 - lc.fwd_s(), 1e-12);
  EXPECT_NEAR(o.exposed_bwd(true, true), 2.4 - lc.bwd_s(), 1e-12);
  EXPECT_EQ(o.exposed_fwd(false, false) + o.exposed_bwd(false, false), 0.0);
  c.host_link_GBps = 1e6;  // a fast link: everything hidden
  const LayerOffload fast = layer_offload(c, p, lc, none, 2e9, 0.4e9);
  EXPECT_EQ(fast.exposed_fwd(true, true) + fast.exposed_bwd(true, true), 0.0);
  EXPECT_EQ(offloaded_layers(0.5, 32), 16);
  EXPECT_EQ(offloaded_layers(0.3, 10), 3);
}

}  // namespace
}  // namespace stepcast

namespace stepcast {
namespace {

// Dropout's time (docs/model-reference.md §4.2), GPT-3 175B (h 12288, 96 heads, s 2048) on
// a DGX A100, one sequence, tp 8 without sequence parallelism, no FlashAttention. The
// attention probabilities' dropout reads them (2 B), writes the dropped copy (2 B) and a
// bool mask (1 B): 5 B per score, 96/8 heads x 2048 x 2048 scores per rank. Each of the two
// fused bias-dropout-adds also writes a 1-byte mask per hidden element (replicated on every
// TP rank without SP): 2048 x 12288 B in each block.
TEST(Dropout, AttentionAndResidualDropoutTrafficByHand) {
  ModelSpec m = builtin_presets().models.at("gpt3-175b");
  const ClusterSpec c = builtin_presets().clusters.at("dgx-a100");
  Plan p;
  p.tp = 8;
  p.flash_attention = false;
  m.dropout = false;
  const LayerCost off = layer_cost(m, c, p, 2048, false);
  m.dropout = true;
  const LayerCost on = layer_cost(m, c, p, 2048, false);
  const double bw = c.gpu.hbm_bandwidth_GBps * 1e9 * c.gpu.hbm_efficiency;
  const double pace = job_pace(c);
  const double scores = 12.0 * 2048 * 2048;
  EXPECT_NEAR(on.attn_core_s - off.attn_core_s, pace * 5 * scores / bw, 1e-15);
  EXPECT_NEAR(on.attn_elem_s - off.attn_elem_s, pace * 2048.0 * 12288 / bw, 1e-15);
  EXPECT_NEAR(on.mlp_elem_s - off.mlp_elem_s, pace * 2048.0 * 12288 / bw, 1e-15);
  EXPECT_EQ(on.attn_core_flops, off.attn_core_flops);
  // FlashAttention drops inside its kernel: only the residual masks remain.
  p.flash_attention = true;
  m.dropout = false;
  const LayerCost fa_off = layer_cost(m, c, p, 2048, false);
  m.dropout = true;
  const LayerCost fa_on = layer_cost(m, c, p, 2048, false);
  EXPECT_EQ(fa_on.attn_core_s, fa_off.attn_core_s);
  EXPECT_NEAR(fa_on.attn_elem_s - fa_off.attn_elem_s, pace * 2048.0 * 12288 / bw, 1e-15);
}

}  // namespace
}  // namespace stepcast

namespace stepcast {
namespace {

// Module recomputation by hand (docs/model-reference.md "Module recomputation"):
// Qwen3-30B-A3B (h 2048, 32/4 heads of 128, 128 experts top-8 of inner size 768, SwiGLU), one
// 4096-token sequence per rank, tp 1, ep 8, bf16, FlashAttention, on one DGX H100. Per token
// of an MoE layer without recomputation: norm inputs 4h + QKV input 2h + router input 2h =
// 16,384; Q, K, V 2 x (32 x 128 + 4 x 256) = 10,240; the QK norms' inputs 2 x (32 + 4) x 128
// = 9,216; attention output 2 x 4096 = 8,192; experts (fc1 output 2 x 2 + fc2 input 2) x 8 x
// 768 = 36,864; dispatched tokens 2 x 8 x 2048 = 32,768; log-sum-exp 4 x 32 = 128: 113,792 bytes.
TEST(RecomputeModules, MoeLayerMemoryAndTimeByHand) {
  const ModelSpec& m = builtin_presets().models.at("qwen3-30b-a3b");
  ClusterSpec c = builtin_presets().clusters.at("dgx-h100");
  c.nodes = 1;
  Plan p;
  p.dp = 8;
  p.ep = 8;
  const double T = 4096;
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, p, 4096, true), T * 113'792);
  const LayerCost none = layer_cost(m, c, p, 4096, true);
  const LayerComm none_comm = layer_comm(m, c, p, 4096, true, none);
  EXPECT_EQ(none.recompute_s, 0.0);
  p.recompute = Recompute::kSelective;
  auto with = [&](std::initializer_list<RecomputeModule> mods) {
    Plan q = p;
    q.recompute_modules = 0;
    for (RecomputeModule x : mods) q.recompute_modules |= module_bit(x);
    return q;
  };
  const double bw = c.gpu.hbm_bandwidth_GBps * 1e9 * c.gpu.hbm_efficiency;
  const double pace = job_pace(c);
  // moe_act: the routed experts' activation output (2 x 8 x 768 = 12,288 B per token) is
  // discarded and re-made: read gate and up, write the product, 3 x 2 B x 8 x 768 per token.
  const Plan act = with({RecomputeModule::kMoeAct});
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, act, 4096, true), T * (113'792 - 12'288));
  EXPECT_NEAR(layer_cost(m, c, act, 4096, true).recompute_s, pace * 3 * 2 * T * 8 * 768 / bw, 1e-15);
  // layernorm: the pre-MLP norm's output, the router's 2 B x h input, is discarded and re-made
  // (read + write 2 B x h per token); QKV's norm is fused into its GEMM and stays.
  const Plan ln = with({RecomputeModule::kLayernorm});
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, ln, 4096, true), T * (113'792 - 4'096));
  EXPECT_NEAR(layer_cost(m, c, ln, 4096, true).recompute_s, pace * 2 * 2 * T * 2048 / bw, 1e-15);
  // moe: the whole block again (its forward, FLOPs and one more dispatch + combine); it keeps
  // only its input, the router's: experts 36,864 and dispatched tokens 32,768 B per token go.
  const Plan moe = with({RecomputeModule::kMoe});
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, moe, 4096, true), T * (113'792 - 36'864 - 32'768));
  const LayerCost lc = layer_cost(m, c, moe, 4096, true);
  EXPECT_TRUE(lc.recompute_block);
  EXPECT_DOUBLE_EQ(lc.recompute_s, none.mlp_fwd_s());
  EXPECT_DOUBLE_EQ(lc.recompute_flops, none.mlp_flops);
  const LayerComm comm = layer_comm(m, c, moe, 4096, true, lc);
  EXPECT_NEAR(comm.ep_exposed_s - none_comm.ep_exposed_s, 2 * none_comm.ep_a2a_s, 1e-15);
  // core_attn with FlashAttention: its forward again; it frees only the log-sum-exp.
  const Plan core = with({RecomputeModule::kCoreAttn});
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, core, 4096, true), T * (113'792 - 128));
  EXPECT_DOUBLE_EQ(layer_cost(m, c, core, 4096, true).recompute_s, none.attn_core_s);
  // HFU counts the recomputed forward: moe adds the router and 8 routed experts' FLOPs per
  // token on all 48 layers, 2 x 2048 x (128 + 3 x 8 x 768).
  Scenario s;
  s.model = m;
  s.cluster = c;
  s.plan = moe;
  s.plan.global_batch = 8;
  s.workload.seq_len = 4096;
  const Estimate e = estimate(s);
  EXPECT_NEAR(e.hardware_flops_per_step - e.model_flops_per_step,
              48 * 2.0 * 2048 * (128 + 3 * 8 * 768) * 8 * 4096, 1e-6 * e.model_flops_per_step);
}

// DeepSeek-V3's recipe modules (mla_up_proj, mlp) by hand, tp 2 with SP, bf16: mla_up_proj
// frees the up-projected Q, K, V of the rank's 64 heads, 2 x (64 x 192 + 64 x (192 + 128)) =
// 65,536 B per token, and re-runs the q and kv up-projections (T x 64*192 x 1536 and
// T x 64*(128+128) x 512 GEMMs); mlp frees a dense layer's fc1 input (2 x h / 2 with SP) and
// its FFN activations (fc1 output 2 x 2 + fc2 input 2, x 18,432 / 2 per token).
TEST(RecomputeModules, MlaUpProjAndDenseMlpByHand) {
  ModelSpec m = builtin_presets().models.at("deepseek-v3");
  ClusterSpec c = builtin_presets().clusters.at("dgx-h100");
  Plan p;
  p.tp = 2;
  p.sequence_parallel = true;
  p.dp = 4;
  p.ep = 8;
  p.etp = 1;
  const double T = 4096;
  const double dense = layer_activation_bytes(m, p, 4096, false);
  const double moe = layer_activation_bytes(m, p, 4096, true);
  const LayerCost none = layer_cost(m, c, p, 4096, false);
  p.recompute = Recompute::kSelective;
  p.recompute_modules = module_bit(RecomputeModule::kMlaUpProj) | module_bit(RecomputeModule::kMlp);
  EXPECT_DOUBLE_EQ(dense - layer_activation_bytes(m, p, 4096, false),
                   T * (65'536 + 2.0 * 7168 / 2 + 6.0 * 18'432 / 2));
  EXPECT_DOUBLE_EQ(moe - layer_activation_bytes(m, p, 4096, true), T * 65'536);
  const LayerCost lc = layer_cost(m, c, p, 4096, false);
  const double up_flops = 2 * T * (64 * 192 * 1536.0 + 64 * 256 * 512.0);
  EXPECT_DOUBLE_EQ(lc.recompute_flops, up_flops + none.mlp_flops);
  EXPECT_TRUE(lc.recompute_block);
  const double up_s = job_pace(c) * (gemm_time_s(c.gpu, Precision::kBf16, T, 64 * 192, 1536) +
                                     gemm_time_s(c.gpu, Precision::kBf16, T, 64 * 256, 512));
  const double rope = job_pace(c) * 2 * 2 * T * 65 * 64 / (c.gpu.hbm_bandwidth_GBps * 1e9 * c.gpu.hbm_efficiency);
  EXPECT_NEAR(lc.recompute_s, up_s + rope + none.mlp_fwd_s(), 1e-12);
}

}  // namespace
}  // namespace stepcast

namespace stepcast {
namespace {

// torchtitan's op-level selective recomputation ("selective_op") by hand on a Llama-3-8B layer
// (h 4096, 32/8 heads of 128, F 14336), 8192 tokens, tp 1. Its 7 matmuls (wq 4096, wk 1024,
// wv 1024, wo 4096, w1 14336, w3 14336, w2 4096 outputs per token) alternate between saving
// the odd-numbered (wq, wv, w1, w2: 23,552 elements) and the even-numbered (wk, wo, w3:
// 19,456); memory takes the larger: per token 2 x 4096 (the block's input) + 2 x 23,552 +
// 2 x 4096 (the attention's output) + 4 x 32 (its log-sum-exp) = 63,616 bytes. The backward
// recomputes each matmul half the time (on average half of the forward's GEMM FLOPs) and
// every elementwise op; the HFU counts those FLOPs on all 32 layers.
TEST(SelectiveOp, TorchtitanLayerMemoryAndTimeByHand) {
  const ModelSpec& m = builtin_presets().models.at("llama3-8b");
  const ClusterSpec c = builtin_presets().clusters.at("dgx-h100");
  Plan p;
  p.stack = Stack::kFsdp2Eager;
  const LayerCost none = layer_cost(m, c, p, 8192, false);
  p.recompute = Recompute::kSelectiveOp;
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, p, 8192, false), 8192.0 * 63'616);
  const LayerCost lc = layer_cost(m, c, p, 8192, false);
  EXPECT_DOUBLE_EQ(lc.recompute_flops, none.attn_gemm_flops / 2 + none.mlp_flops / 2);
  double gemms = 0;
  for (const auto& [n, k] : std::vector<std::pair<double, double>>{
           {4096, 4096}, {1024, 4096}, {1024, 4096}, {4096, 4096}, {14336, 4096}, {14336, 4096}, {4096, 14336}}) {
    gemms += job_pace(c) * gemm_time_s(c.gpu, Precision::kBf16, 8192, n, k);
  }
  EXPECT_NEAR(lc.recompute_s, gemms / 2 + none.attn_elem_s + none.mlp_elem_s, 1e-12);
  Scenario s;
  s.model = m;
  s.cluster = c;
  s.cluster.nodes = 1;
  s.plan = p;
  s.plan.dp = 8;
  s.plan.zero = 3;
  s.plan.global_batch = 8;
  s.workload.seq_len = 8192;
  const Estimate e = estimate(s);
  const double per_token = 32 * 0.5 * 2 * 4096.0 * (4096 + 1024 + 1024 + 4096 + 3 * 14336);
  EXPECT_NEAR(e.hardware_flops_per_step - e.model_flops_per_step, per_token * 8 * 8192, 1e-9 * e.model_flops_per_step);
}

// A QK norm under torchtitan's op-level policy (docs/model-reference.md 3.7): the norm's
// input is the q (k) matmul's output, which the policy saves or recomputes with the matmul,
// so what a layer keeps is unchanged; the norms re-run with the other elementwise ops, and a
// layer's recomputed activations (the transient around its backward) hold their inputs:
// 2 B x (32 + 8) heads x 128 per token for Llama-3-8B's shape at tp 1.
TEST(SelectiveOp, QkNormsAreRecomputedNotSaved) {
  const ClusterSpec c = builtin_presets().clusters.at("dgx-h100");
  const ModelSpec base = builtin_presets().models.at("llama3-8b");
  ModelSpec qk = base;
  qk.qk_norm = true;
  Plan none;
  none.stack = Stack::kFsdp2Eager;
  Plan op = none;
  op.recompute = Recompute::kSelectiveOp;
  EXPECT_DOUBLE_EQ(layer_activation_bytes(qk, op, 8192, false), layer_activation_bytes(base, op, 8192, false));
  EXPECT_DOUBLE_EQ(layer_activation_bytes(qk, none, 8192, false) - layer_activation_bytes(base, none, 8192, false),
                   8192.0 * 2 * (32 + 8) * 128);
  const LayerCost with = layer_cost(qk, c, op, 8192, false), without = layer_cost(base, c, op, 8192, false);
  EXPECT_GT(with.attn_elem_s, without.attn_elem_s);
  EXPECT_NEAR(with.recompute_s - without.recompute_s, with.attn_elem_s - without.attn_elem_s, 1e-15);
}

}  // namespace
}  // namespace stepcast

namespace stepcast {
namespace {

// MoE load imbalance by hand (model.moe.load_imbalance, docs/model-reference.md "MoE load
// imbalance"): Qwen3-30B-A3B as above (one 4096-token sequence per rank, tp 1, ep 8), the
// busiest rank receiving 1.25 x the mean routed rows. Its 16 local experts each see
// 4096 x 8 x 8 / 128 x 1.25 = 2560 rows; the all-to-all moves 1.25 x the balanced bytes;
// the dispatched tokens and the experts' activations (32,768 + 36,864 B per token
// balanced) are 1.25 x on that rank; attention is unchanged.
TEST(MoeLayer, LoadImbalanceSetsTheBusiestRanksPaceByHand) {
  ModelSpec m = builtin_presets().models.at("qwen3-30b-a3b");
  ClusterSpec c = builtin_presets().clusters.at("dgx-h100");
  c.nodes = 1;
  Plan p;
  p.dp = 8;
  p.ep = 8;
  const LayerCost even = layer_cost(m, c, p, 4096, true);
  const LayerComm even_comm = layer_comm(m, c, p, 4096, true, even);
  const double even_bytes = layer_activation_bytes(m, p, 4096, true);
  m.moe->load_imbalance = 1.25;
  const LayerCost busy = layer_cost(m, c, p, 4096, true);
  const LayerComm busy_comm = layer_comm(m, c, p, 4096, true, busy);
  const double router = job_pace(c) * gemm_time_s(c.gpu, Precision::kBf16, 4096, 128, 2048);
  const double expert = job_pace(c) * (gemm_time_s(c.gpu, Precision::kBf16, 2560, 2 * 768, 2048) +
                                       gemm_time_s(c.gpu, Precision::kBf16, 2560, 2048, 768));
  EXPECT_NEAR(busy.mlp_gemm_s, router + 16 * expert, 1e-12);
  EXPECT_DOUBLE_EQ(busy_comm.ep_bytes, 1.25 * even_comm.ep_bytes);
  EXPECT_DOUBLE_EQ(busy_comm.ep_bytes, 4096.0 * 8 * 1.25 * 2048 * 2);
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, p, 4096, true) - even_bytes, 4096.0 * 0.25 * (32'768 + 36'864));
  EXPECT_EQ(busy.attn_gemm_s, even.attn_gemm_s);
  EXPECT_EQ(busy.attn_core_s, even.attn_core_s);
}

// Token dropping and padding by hand (Megatron-Core moe_utils.py topk_softmax_with_capacity:
// each expert takes at most capacity = ceil(T k / E x capacity_factor) rows from each rank;
// with moe_pad_expert_input_to_capacity exactly that many). The same Qwen3-30B-A3B layer
// (4096 tokens per rank, ep 8, 16 local experts, 256 balanced rows per expert from each of
// the 8 ranks = 2048):
//   padded to capacity_factor 1.25, whatever the router does: 320 x 8 = 2560 rows per expert,
//     and the all-to-all carries the padding: 4096 x 8 x 1.25 x 2048 x 2 B;
//   dropping at 1.25 without padding, the busiest rank at 1.5 x the mean: capped at 2560;
//   dropping at 1.25, the busiest at 1.1: below the cap, 2252.8 rows;
//   padded to 0.5 (half the tokens dropped): 1024 rows.
TEST(MoeLayer, TokenDroppingAndPaddingSetTheExpertsRowsByHand) {
  const ModelSpec base = builtin_presets().models.at("qwen3-30b-a3b");
  ClusterSpec c = builtin_presets().clusters.at("dgx-h100");
  c.nodes = 1;
  Plan p;
  p.dp = 8;
  p.ep = 8;
  const double router = job_pace(c) * gemm_time_s(c.gpu, Precision::kBf16, 4096, 128, 2048);
  auto expert_rows = [&](double rows) {
    return router + 16 * job_pace(c) *
                        (gemm_time_s(c.gpu, Precision::kBf16, rows, 2 * 768, 2048) +
                         gemm_time_s(c.gpu, Precision::kBf16, rows, 2048, 768));
  };
  auto with = [&](double cf, bool pad, double imbalance) {
    ModelSpec m = base;
    m.moe->capacity_factor = cf;
    m.moe->pad_to_capacity = pad;
    m.moe->load_imbalance = imbalance;
    return m;
  };
  const double even_act = layer_activation_bytes(base, p, 4096, true);

  const ModelSpec padded = with(1.25, true, 1.0);
  EXPECT_DOUBLE_EQ(moe_routed_load(*padded.moe), 1.25);
  const LayerCost pc = layer_cost(padded, c, p, 4096, true);
  EXPECT_NEAR(pc.mlp_gemm_s, expert_rows(2560), 1e-12);
  EXPECT_DOUBLE_EQ(layer_comm(padded, c, p, 4096, true, pc).ep_bytes, 4096.0 * 8 * 1.25 * 2048 * 2);
  // The padded rows are held like real ones: 0.25 x (32,768 + 36,864) B per token more.
  EXPECT_DOUBLE_EQ(layer_activation_bytes(padded, p, 4096, true) - even_act, 4096.0 * 0.25 * (32'768 + 36'864));

  EXPECT_NEAR(layer_cost(with(1.25, false, 1.5), c, p, 4096, true).mlp_gemm_s, expert_rows(2560), 1e-12);
  EXPECT_NEAR(layer_cost(with(1.25, false, 1.1), c, p, 4096, true).mlp_gemm_s, expert_rows(2252.8), 1e-12);
  EXPECT_NEAR(layer_cost(with(0.5, true, 1.0), c, p, 4096, true).mlp_gemm_s, expert_rows(1024), 1e-12);
  // Dropless (capacity_factor 0) keeps the stated imbalance; padding to 1.0 is the balanced layer.
  EXPECT_DOUBLE_EQ(moe_routed_load(*with(0, false, 1.3).moe), 1.3);
  const LayerCost one = layer_cost(with(1.0, true, 1.4), c, p, 4096, true);
  EXPECT_EQ(one.mlp_gemm_s, layer_cost(base, c, p, 4096, true).mlp_gemm_s);
  // Attention does not change.
  EXPECT_EQ(pc.attn_gemm_s, layer_cost(base, c, p, 4096, true).attn_gemm_s);

  // The estimate says what the cap does: at 1.0 with the busiest rank at 1.2, that rank's
  // experts run the balanced rows and drop 1 - 1/1.2 = 16.7 % of its routed rows.
  const auto loaded =
      load_scenario_file(std::string(STEPCAST_SOURCE_DIR) + "/scenarios/qwen3-30b-a3b-ep8-16xh100.json");
  ASSERT_TRUE(loaded.ok());
  Scenario s = *loaded;
  s.model.moe->capacity_factor = 1.0;
  s.model.moe->load_imbalance = 1.2;
  const Estimate e = estimate(s);
  EXPECT_NE(std::find(e.notes.begin(), e.notes.end(),
                      "token dropping at capacity factor 1: the busiest rank's experts run 1 x the balanced rows, "
                      "dropping 16.7% of its routed rows (load_imbalance 1.2) (docs/model-reference.md 4.2)"),
            e.notes.end());
}

// Sequence parallelism keeps the norms (and row-parallel biases, routers) whole on every TP
// rank while each rank's gradient covers only its s/t tokens: once per step, after the
// data-parallel reduction, their gradients are all-reduced over the TP group (Megatron-Core
// finalize_model_grads, _allreduce_layernorm_grads). By hand on Llama 3 8B, tp 8, pp 1 on
// one DGX H100: 32 layers x 2 RMSNorms x 4096 + the final norm 4096 = 266,240 fp32
// gradients, 1,064,960 B; with one stage nothing hides it, so the step carries the whole
// all-reduce, and without SP neither the bytes nor the time.
TEST(Estimate, SequenceParallelGradientsAreAllReducedOverTpOncePerStep) {
  Scenario s;
  s.model = builtin_presets().models.at("llama3-8b");
  s.cluster = builtin_presets().clusters.at("dgx-h100");
  s.cluster.nodes = 1;
  s.plan.tp = 8;
  s.plan.sequence_parallel = true;
  s.plan.global_batch = 4;
  s.workload.seq_len = 4096;
  const RankParams rp = rank_params(s.model, s.plan, 0);
  EXPECT_DOUBLE_EQ(sp_grad_allreduce_bytes(s.model, count_params(s.model), s.plan, rp, true), 1'064'960.0);
  // Without the last stage's final norm: 1,048,576 B.
  EXPECT_DOUBLE_EQ(sp_grad_allreduce_bytes(s.model, count_params(s.model), s.plan, rp, false), 1'048'576.0);
  const GroupShape tp8 = group_shape(8, 1, 8);
  const double t_ar = collective_cost(s.cluster, CollKind::kAllReduce, tp8, 1'064'960.0).time_s;
  ASSERT_GT(t_ar, 0);
  const Estimate e = estimate(s);
  EXPECT_DOUBLE_EQ(e.breakdown.sp_grad_sync, t_ar);
  Scenario no_sp = s;
  no_sp.plan.sequence_parallel = false;
  EXPECT_EQ(sp_grad_allreduce_bytes(no_sp.model, count_params(no_sp.model), no_sp.plan, rp, true), 0.0);
  EXPECT_EQ(estimate(no_sp).breakdown.sp_grad_sync, 0.0);
  // A biased GPT layer adds its two row-parallel output biases (h each) to its two
  // LayerNorms (gain and bias, 2h each): 6h per layer. GPT-3 175B, 96 layers, fp32: 96 x 6
  // x 12288 x 4 B, and the final LayerNorm 2h x 4 B on the last stage.
  const ModelSpec& gpt = builtin_presets().models.at("gpt3-175b");
  const RankParams gp = rank_params(gpt, s.plan, 0);
  EXPECT_DOUBLE_EQ(sp_grad_allreduce_bytes(gpt, count_params(gpt), s.plan, gp, true),
                   (96.0 * 6 * 12288 + 2 * 12288) * 4);
}

// Qwen3's per-head RMSNorm on q and k (model.qk_norm; Hugging Face modeling_qwen3_moe.py
// q_norm, k_norm = RMSNorm(head_dim)), by hand on Qwen3-30B-A3B (a 32, g 4, d_h 128, 48
// layers) at tp 1, 4096 tokens, megatron-core (fused RMSNorm: 4 B per element):
TEST(QkNorm, Qwen3sQkNormsByHand) {
  const ModelSpec& q = builtin_presets().models.at("qwen3-30b-a3b");
  ASSERT_TRUE(q.qk_norm);
  ModelSpec plain = q;
  plain.qk_norm = false;
  // Parameters: 2 x 128 per layer, 12,288 in all (the checkpoint's 30,532,122,624).
  EXPECT_EQ(count_params(q).total - count_params(plain).total, 12'288);
  EXPECT_EQ(count_params(q).total, 30'532'122'624);
  ClusterSpec c = builtin_presets().clusters.at("dgx-h100");
  c.nodes = 2;
  Plan p;
  p.dp = 2;
  p.ep = 8;
  p.global_batch = 16;
  const std::int64_t s = 4096;
  const double T = 4096, heads = 32 + 4, dh = 128;
  // Memory-bound: the norm reads and writes each q and k element once: 4 B x T x 36 x 128.
  const double extra = job_pace(c) * memory_time_s(c.gpu, 4.0 * T * heads * dh);
  EXPECT_NEAR(layer_cost(q, c, p, s, true).attn_elem_s - layer_cost(plain, c, p, s, true).attn_elem_s, extra, 1e-12);
  // The QK norm is an RMSNorm whatever the model's own norm: in eager PyTorch (fsdp2-eager,
  // the composite RMSNorm's 36 B per element; its one-kernel LayerNorm moves 4) on a
  // LayerNorm model, 36 B x T x 36 x 128.
  ModelSpec ln = q, ln_plain = plain;
  ln.norm = ln_plain.norm = NormKind::kLayerNorm;
  Plan eager = p;
  eager.stack = Stack::kFsdp2Eager;
  EXPECT_NEAR(layer_cost(ln, c, eager, s, true).attn_elem_s - layer_cost(ln_plain, c, eager, s, true).attn_elem_s,
              job_pace(c) * memory_time_s(c.gpu, 36.0 * T * heads * dh), 1e-12);
  // Saved for the backward: the norms' 16-bit inputs, 2 B x T x 36 x 128 = 37,748,736 B a layer.
  EXPECT_DOUBLE_EQ(layer_activation_bytes(q, p, s, true) - layer_activation_bytes(plain, p, s, true),
                   2.0 * T * heads * dh);
  // Without sequence parallelism, at tp 2, each rank norms its own heads with the one weight:
  // the 24 layers of a stage all-reduce 24 x 2 x 128 fp32 gradients = 24,576 B over TP.
  Plan t2 = p;
  t2.tp = 2;
  t2.pp = 2;
  const RankParams rp = rank_params(q, t2, 0);
  EXPECT_DOUBLE_EQ(sp_grad_allreduce_bytes(q, count_params(q), t2, rp, false), 24.0 * 2 * 128 * 4);
  EXPECT_EQ(sp_grad_allreduce_bytes(plain, count_params(plain), t2, rp, false), 0.0);
}

}  // namespace
}  // namespace stepcast

// The reliability inputs (models/reliability.h): the failure-model presets against the
// published counts they come from, the checkpoint cost model against hand arithmetic, the
// interval formulas against Daly's own examples, and the loader's messages for the
// `faults` and `checkpoint` sections (whole strings, STYLE.md habit 8).
#include "stepcast/models/reliability.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <string_view>

#include "stepcast/models/estimate.h"
#include "stepcast/models/names.h"
#include "stepcast/models/presets.h"
#include "stepcast/models/scenario.h"

namespace stepcast {
namespace {

// ---------------------------------------------------------------------------------------
// Failure presets. Oracle: the Llama 3 paper's counts (Table 5; research anchors B.3) over
// a 54-day window = 1,296 h on 16,384 GPUs in 2,048 nodes, 2 nodes per ToR switch.

constexpr double kWindowH = 54 * 24;                   // 1,296 h
constexpr double kGpuHours = 16384 * kWindowH;         // 21,233,664 GPU-h
constexpr double kNodeHours = 2048 * kWindowH;         // 2,654,208 node-h
constexpr double kSwitchHours = 2048 / 2 * kWindowH;   // 1,327,104 switch-h

const FailureSpec& preset(const std::string& name) {
  const auto& all = builtin_presets().failures;
  auto it = all.find(name);
  EXPECT_NE(it, all.end()) << name;
  static const FailureSpec kNone;
  return it == all.end() ? kNone : it->second;
}

TEST(FailurePresets, Llama3RatesAreTheCountsOverTheExposure) {
  const FailureSpec& f = preset("llama3-405b");
  // GPU 148 + 72 + 19 + 17 + 6 + 6 = 268.
  EXPECT_DOUBLE_EQ(f.component(FailureCause::kGpu).rate_per_unit_h, (148 + 72 + 19 + 17 + 6 + 6) / kGpuHours);
  // Host 53 = maintenance 32 + NIC 7 + SSD 3 + PSU 3 + chassis 2 + IO board 2 + CPU 2 +
  // memory 2; the NIC's 7 are their own cause.
  EXPECT_DOUBLE_EQ(f.component(FailureCause::kHost).rate_per_unit_h, (32 + 3 + 3 + 2 + 2 + 2 + 2) / kNodeHours);
  EXPECT_DOUBLE_EQ(f.component(FailureCause::kNic).rate_per_unit_h, 7 / kNodeHours);
  EXPECT_DOUBLE_EQ(f.component(FailureCause::kSwitch).rate_per_unit_h, 35 / kSwitchHours);
  // Software 63 = bugs 54 + NCCL watchdog 7 + dependency 2.
  EXPECT_DOUBLE_EQ(f.component(FailureCause::kSoftware).rate_per_unit_h, (54 + 7 + 2) / kNodeHours);
  EXPECT_EQ(f.nodes_per_switch, 2);
  EXPECT_NE(f.source.find("2407.21783"), std::string::npos);
}

TEST(FailurePresets, Llama3JobMtbfOn16384GpusIs1296HoursOver419) {
  ClusterSpec c;
  c.nodes = 2048;
  c.gpus_per_node = 8;
  const FailureSpec& f = preset("llama3-405b");
  EXPECT_NEAR(job_failure_rate_per_h(f, c), 419 / kWindowH, 1e-12);
  EXPECT_NEAR(1 / job_failure_rate_per_h(f, c), 3.0930787589498805, 1e-9);  // 1296 / 419 h
  // Units: 16,384 GPUs, 2,048 nodes, 1,024 switches; a switch failure downs 2 nodes.
  EXPECT_EQ(failure_units(f, c, FailureCause::kGpu), 16384);
  EXPECT_EQ(failure_units(f, c, FailureCause::kHost), 2048);
  EXPECT_EQ(failure_units(f, c, FailureCause::kSwitch), 1024);
  EXPECT_EQ(failure_nodes_down(f, c, FailureCause::kSwitch), 2);
  EXPECT_EQ(failure_nodes_down(f, c, FailureCause::kSoftware), 0);
  EXPECT_EQ(failure_nodes_down(f, c, FailureCause::kGpu), 1);
}

TEST(FailurePresets, OptCloudIsTwoNodeLossesPerDayOn124Nodes) {
  const FailureSpec& f = preset("opt-175b-cloud");
  EXPECT_DOUBLE_EQ(f.component(FailureCause::kHost).rate_per_unit_h, 2.0 / (124 * 24));
  EXPECT_EQ(f.spare_nodes, 12);  // "a pool of 12 buffer nodes"
  ClusterSpec c;
  c.nodes = 124;
  EXPECT_NEAR(job_failure_rate_per_h(f, c) * 24, 2.0, 1e-12);
  EXPECT_NE(f.source.find("metaseq"), std::string::npos);
}

// ---------------------------------------------------------------------------------------
// Interval formulas. Oracle: Daly (2006) section 5 examples (delta = 5 min; M = 24 h, 6 h,
// 15 min -> 117, 57, 9.1 min; docs/cost-model-sources.md section 8) and hand arithmetic.

TEST(IntervalFormulas, DalyReproducesThePapersExamples) {
  EXPECT_NEAR(daly_interval_s(300, 24 * 3600) / 60, 117, 0.5);
  EXPECT_NEAR(daly_interval_s(300, 6 * 3600) / 60, 57, 0.5);
  EXPECT_NEAR(daly_interval_s(300, 15 * 60) / 60, 9.1, 0.05);
  // delta >= 2M: checkpoint every M.
  EXPECT_EQ(daly_interval_s(100, 50), 50);
}

TEST(IntervalFormulas, YoungIsSqrtTwoDeltaM) {
  // docs/cost-model-sources.md worked example: M = 3.1 h, delta = 60 s -> 1156 s... sqrt(2 x 60 x 11160).
  EXPECT_NEAR(young_interval_s(60, 3.1 * 3600), std::sqrt(2.0 * 60 * 11160), 1e-9);
  EXPECT_NEAR(young_interval_s(60, 3.1 * 3600), 1157.2, 0.1);
}

TEST(IntervalFormulas, DalyWallTimeByHand) {
  // T_s = 100 h, tau = 1 h, delta = 0.1 h, R = 0.2 h, M = 10 h:
  // T_w = 10 e^0.02 (e^0.11 - 1) 100 = 10 x 1.0202013 x 0.1162781 x 100 = 118.6273 h.
  EXPECT_NEAR(daly_wall_time_s(100, 1, 0.1, 0.2, 10), 118.6273, 1e-3);
  // No failures in the limit M -> infinity: T_w -> T_s (1 + delta / tau).
  EXPECT_NEAR(daly_wall_time_s(100, 1, 0.1, 0.2, 1e9), 110.0, 1e-5);
}

// ---------------------------------------------------------------------------------------
// Checkpoint cost. Case: Llama-3-8B (8,030,261,248 parameters, the preset's recorded total)
// on 2 DGX H100 nodes, DP16 with ZeRO-1, storage 50 GB/s write (the dgx-h100 preset),
// 8 x 400 Gb/s NICs per node = 400 GB/s, one GPU's share 50 GB/s, 2048 GiB host memory.

constexpr double kParams = 8'030'261'248;

Scenario llama8b_zero1(std::string_view more_cluster = "") {
  std::string text = R"({"format": 1, "model": "llama3-8b",
      "cluster": {"preset": "dgx-h100", "nodes": 2)";
  text += more_cluster;
  text += R"(}, "plan": {"tp": 1, "pp": 1, "dp": 16, "zero": 1, "global_batch": 64},
      "workload": {"seq_len": 4096}})";
  auto r = parse_scenario(text);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? *r : Scenario{};
}

CheckpointCost cost_of(const Scenario& s, const CheckpointSpec& spec) {
  return checkpoint_cost(s.model, s.cluster, s.plan, s.workload, spec);
}

// The planner prices a layout's checkpoint from its estimate's stages (Estimate::stages),
// which the estimate fills from the memory it computed anyway; the standalone cost computes
// every stage's parameters and memory again. Both must agree, field by field, on layouts
// whose stages differ (embedding and output stages, MoE with MTP, ZeRO-3, folded EP).
TEST(CheckpointCost, FromTheEstimatesStagesEqualsTheStandaloneCost) {
  const char* files[] = {"deepseek-v3-ep64-1024xh100.json", "llama3-70b-64xh100.json", "llama3-8b-fsdp-16xh100.json",
                         "qwen3-235b-a22b-folded-256xh100.json", "llama3-70b-interleaved-64xh100.json"};
  for (const char* file : files) {
    SCOPED_TRACE(file);
    auto loaded = load_scenario_file(std::string(STEPCAST_SOURCE_DIR) + "/scenarios/" + file);
    ASSERT_TRUE(loaded.ok()) << loaded.error().message;
    const Scenario& s = *loaded;
    const Estimate e = estimate(s);
    ASSERT_EQ(e.stages.size(), static_cast<std::size_t>(s.plan.pp));
    for (bool sharded : {true, false}) {
      CheckpointSpec spec;
      spec.sharded = sharded;
      spec.mode = CheckpointMode::kAsync;
      const CheckpointCost a = checkpoint_cost(s.model, s.cluster, s.plan, s.workload, spec);
      const CheckpointCost b = checkpoint_cost(s.cluster, s.plan, spec, e.stages);
      EXPECT_EQ(a.part_bytes, b.part_bytes);
      EXPECT_EQ(a.total_bytes, b.total_bytes);
      EXPECT_EQ(a.rank_write_bytes, b.rank_write_bytes);
      EXPECT_EQ(a.rank_state_bytes, b.rank_state_bytes);
      EXPECT_EQ(a.node_staging_bytes, b.node_staging_bytes);
      EXPECT_EQ(a.write_s, b.write_s);
      EXPECT_EQ(a.snapshot_s, b.snapshot_s);
      EXPECT_EQ(a.restore_s, b.restore_s);
      EXPECT_EQ(a.async, b.async);
    }
  }
  // The stages' figures by hand on Llama-3-8B, DP16 with ZeRO-1 on one stage: the rank
  // writes 1/16 of the parameters, holds its 2 B weights of every parameter and 12 B of
  // optimizer state for 1/16 of them.
  const Scenario z1 = llama8b_zero1();
  const Estimate e = estimate(z1);
  ASSERT_EQ(e.stages.size(), 1U);
  EXPECT_DOUBLE_EQ(e.stages[0].write_params, kParams / 16);
  EXPECT_DOUBLE_EQ(e.stages[0].params_bytes, 2 * kParams);
  EXPECT_DOUBLE_EQ(e.stages[0].optimizer_bytes, 12 * kParams / 16);
}

TEST(CheckpointCost, BytesAreEachPartOnceWhateverTheReplication) {
  const CheckpointCost k = cost_of(llama8b_zero1(), CheckpointSpec{});
  // Weights bf16 2 B/param, optimizer fp32 master + 2 Adam moments 12 B/param, both once
  // although 16 data-parallel ranks hold the weights.
  EXPECT_DOUBLE_EQ(k.part_bytes[0], 2 * kParams);
  EXPECT_DOUBLE_EQ(k.part_bytes[1], 12 * kParams);
  // Small parts: RNG 16 KiB x 16 ranks, sampler 4 KiB x 16 DP ranks, scheduler 1 KiB,
  // scaler 1 KiB, step 8 B, config 64 KiB.
  EXPECT_DOUBLE_EQ(k.part_bytes[4], 16384.0 * 16);
  EXPECT_DOUBLE_EQ(k.part_bytes[5], 4096.0 * 16);
  EXPECT_DOUBLE_EQ(k.total_bytes, 14 * kParams + 16384.0 * 16 + 4096.0 * 16 + 1024 + 1024 + 8 + 65536);
  EXPECT_DOUBLE_EQ(k.total_bytes, 112'424'052'744.0);
}

// FSDP2 keeps the sharded parameters in fp32 and its optimizer holds only Adam's moments
// (MixedPrecisionPolicy: "the optimizer step uses the sharded parameter in the original
// dtype"): model 4 B/param, optimizer 8 B/param, 12 B in all, against 2 + 12 for
// Megatron-Core, which keeps a bf16 model beside the fp32 master in its optimizer.
TEST(CheckpointCost, Fsdp2SavesFp32WeightsAndOnlyTheMoments) {
  Scenario s = llama8b_zero1();
  s.plan.stack = Stack::kFsdp2Eager;
  const CheckpointCost k = cost_of(s, CheckpointSpec{});
  EXPECT_DOUBLE_EQ(k.part_bytes[0], 4 * kParams);
  EXPECT_DOUBLE_EQ(k.part_bytes[1], 8 * kParams);
  EXPECT_DOUBLE_EQ(k.total_bytes, 12 * kParams + 16384.0 * 16 + 4096.0 * 16 + 1024 + 1024 + 8 + 65536);
  EXPECT_FALSE(state_bytes_per_param(s.plan).master_in_optimizer);
  s.plan.optimizer = Optimizer::kSgd;  // momentum only
  EXPECT_DOUBLE_EQ(cost_of(s, CheckpointSpec{}).part_bytes[1], 4 * kParams);
  s.plan.stack = Stack::kDeepspeedZero;  // master + momentum in the optimizer part
  EXPECT_DOUBLE_EQ(cost_of(s, CheckpointSpec{}).part_bytes[1], 8 * kParams);
  EXPECT_TRUE(state_bytes_per_param(s.plan).master_in_optimizer);
  // Every stack by its profile: the PyTorch FSDP ones (FSDP2's MixedPrecisionPolicy, FSDP1's
  // fp32 flat parameter under Composer) save fp32 weights and Adam's moments, 4 + 8 B; the
  // Megatron and DeepSpeed ones bf16 weights and master + moments, 2 + 12 B.
  s.plan.optimizer = Optimizer::kAdam;
  for (const Stack st :
       {Stack::kFsdp2Eager, Stack::kFsdp2Compile, Stack::kFsdp2CompileLoss, Stack::kLlmFoundry, Stack::kMegatronCore,
        Stack::kDeepspeedZero, Stack::kDeepspeedZero2021, Stack::kMegatronDeepspeed}) {
    s.plan.stack = st;
    const bool fsdp = st == Stack::kFsdp2Eager || st == Stack::kFsdp2Compile || st == Stack::kFsdp2CompileLoss ||
                      st == Stack::kLlmFoundry;
    SCOPED_TRACE(name_of(st));
    const CheckpointCost c = cost_of(s, CheckpointSpec{});
    EXPECT_DOUBLE_EQ(c.part_bytes[0], (fsdp ? 4 : 2) * kParams);
    EXPECT_DOUBLE_EQ(c.part_bytes[1], (fsdp ? 8 : 12) * kParams);
  }
}

TEST(CheckpointCost, ShardedWriteIsBoundByTheSharedStorage) {
  const CheckpointCost k = cost_of(llama8b_zero1(), CheckpointSpec{});
  // Each rank writes 1/16 of the weights and optimizer state (14 B x 501,891,328 params)
  // + its RNG; rank 0 also the once-per-job parts and a sampler: 7,026,566,664 B.
  EXPECT_DOUBLE_EQ(k.rank_write_bytes, 7'026'566'664.0);
  EXPECT_DOUBLE_EQ(k.node_write_bytes, 8 * 7'026'566'664.0);
  // Storage: 112.42 GB / 50 GB/s = 2.2485 s; a node: 56.2 GB / 400 GB/s = 0.14 s.
  EXPECT_NEAR(k.write_s, 112'424'052'744.0 / 50e9, 1e-12);
  EXPECT_STREQ(k.write_bound, "storage");
  EXPECT_FALSE(k.async);
  EXPECT_DOUBLE_EQ(k.pause_s, k.write_s);
  EXPECT_EQ(k.background_s, 0);
}

TEST(CheckpointCost, FastStorageMakesTheNodeNicsTheBound) {
  const CheckpointCost k = cost_of(llama8b_zero1(R"(, "storage": {"write_GBps": 1000})"), CheckpointSpec{});
  // 112.4 GB / 1000 GB/s = 0.112 s < 56.2 GB / 400 GB/s = 0.1405 s.
  EXPECT_NEAR(k.write_s, 8 * 7'026'566'664.0 / 400e9, 1e-12);
  EXPECT_STREQ(k.write_bound, "node NICs");
}

// Storage on the node itself: the NICs carry no checkpoint bytes, so 1000 GB/s of storage
// is the bound (112.4 GB / 1000 GB/s = 0.1124 s, below the NICs' 0.1405 s).
TEST(CheckpointCost, LocalStorageIsNotBoundByTheNics) {
  const CheckpointCost k =
      cost_of(llama8b_zero1(R"(, "storage": {"write_GBps": 1000, "read_GBps": 1000, "local": true})"), CheckpointSpec{});
  EXPECT_NEAR(k.write_s, 112'424'052'744.0 / 1000e9, 1e-12);
  EXPECT_STREQ(k.write_bound, "storage");
  EXPECT_EQ(k.node_Bps, 0.0);
}

// The fixed cost of a save (cluster.storage.commit_s, measured by calibrate) adds to the
// write once, whatever the bytes: 2.2485 s + 0.25 s. An async save pauses for its snapshot
// and the commit of the previous save (the collective and the manifest); its shard files
// are written in the background.
TEST(CheckpointCost, TheCommitCostAddsOncePerSave) {
  const CheckpointCost k = cost_of(llama8b_zero1(R"(, "storage": {"commit_s": 0.25})"), CheckpointSpec{});
  EXPECT_EQ(k.commit_s, 0.25);
  EXPECT_NEAR(k.write_s, 112'424'052'744.0 / 50e9 + 0.25, 1e-12);
  EXPECT_DOUBLE_EQ(k.pause_s, k.write_s);
  CheckpointSpec spec;
  spec.mode = CheckpointMode::kAsync;
  const CheckpointCost a = cost_of(llama8b_zero1(R"(, "storage": {"commit_s": 0.25})"), spec);
  EXPECT_NEAR(a.pause_s, 22'083'306'504.0 / 25e9 + 0.25, 1e-12);
  EXPECT_NEAR(a.background_s, 112'424'052'744.0 / 50e9, 1e-12);
}

TEST(CheckpointCost, GatherToRankZeroIsBoundByOneGpusNicShare) {
  CheckpointSpec spec;
  spec.sharded = false;
  spec.write_GBps = 100;  // storage faster than rank 0's 50 GB/s share of the node's NICs
  const CheckpointCost k = cost_of(llama8b_zero1(), spec);
  EXPECT_NEAR(k.write_s, 112'424'052'744.0 / 50e9, 1e-12);
  EXPECT_STREQ(k.write_bound, "rank-0 NIC");
  EXPECT_DOUBLE_EQ(k.rank_write_bytes, k.total_bytes);
}

TEST(CheckpointCost, AsyncPausesForTheSnapshotWhenTheStagingFits) {
  CheckpointSpec spec;
  spec.mode = CheckpointMode::kAsync;
  const CheckpointCost k = cost_of(llama8b_zero1(), spec);
  // A ZeRO-1 rank holds all bf16 weights (16.06 GB) and 1/16 of the optimizer state
  // (6.02 GB) + small parts: 22,083,306,504 B; at 25 GB/s: 0.8833 s. Staging per node
  // 8 x that = 164.5 GiB of 2048 GiB.
  EXPECT_DOUBLE_EQ(k.rank_state_bytes, 22'083'306'504.0);
  EXPECT_NEAR(k.snapshot_s, 22'083'306'504.0 / 25e9, 1e-12);
  EXPECT_DOUBLE_EQ(k.node_staging_bytes, 8 * 22'083'306'504.0);
  EXPECT_TRUE(k.staging_fits);
  EXPECT_TRUE(k.async);
  EXPECT_DOUBLE_EQ(k.pause_s, k.snapshot_s);
  EXPECT_DOUBLE_EQ(k.background_s, k.write_s);
}

TEST(CheckpointCost, AsyncFallsBackToSyncWhenTheStagingDoesNotFit) {
  CheckpointSpec spec;
  spec.mode = CheckpointMode::kAsync;
  // 164.5 GiB of staging per node > 128 GiB of host memory.
  const CheckpointCost k = cost_of(llama8b_zero1(R"(, "host_memory_GiB": 128)"), spec);
  EXPECT_FALSE(k.staging_fits);
  EXPECT_FALSE(k.async);
  EXPECT_DOUBLE_EQ(k.pause_s, k.write_s);
  EXPECT_EQ(k.background_s, 0);
}

TEST(CheckpointCost, ContentsDecideWhatIsWritten) {
  CheckpointSpec spec;
  spec.contents = {StatePart::kModel, StatePart::kStep};
  const CheckpointCost k = cost_of(llama8b_zero1(), spec);
  EXPECT_DOUBLE_EQ(k.part_bytes[1], 0);
  EXPECT_DOUBLE_EQ(k.total_bytes, 2 * kParams + 8);
  EXPECT_TRUE(spec.saves(StatePart::kModel));
  EXPECT_FALSE(spec.saves(StatePart::kOptimizer));
}

TEST(CheckpointCost, RestoreReadsOnceThenBroadcastsToReplicas) {
  const CheckpointCost k = cost_of(llama8b_zero1(), CheckpointSpec{});
  // Read 112.42 GB at 100 GB/s (the preset's read rate); then each rank receives what it
  // holds beyond its own share, (22,083,306,504 - 7,026,566,664) B, at its 50 GB/s.
  EXPECT_NEAR(k.restore_s, 112'424'052'744.0 / 100e9 + (22'083'306'504.0 - 7'026'566'664.0) / 50e9, 1e-9);
  // Resharding exchanges a rank's whole state once more at 50 GB/s.
  EXPECT_NEAR(k.reshard_s, 22'083'306'504.0 / 50e9, 1e-12);
}

// ---------------------------------------------------------------------------------------
// The loader: `faults` and `checkpoint`.

std::string with(std::string_view more) {
  std::string s = R"({"format": 1, "model": "llama3-70b", "cluster": {"preset": "dgx-h100", "nodes": 8},
                      "plan": {"tp": 8, "pp": 4, "dp": 2})";
  s += more;
  return s + "}";
}

std::string load_error(std::string_view text) {
  const Result<Scenario> r = parse_scenario(text);
  return r.ok() ? "(loaded without error)" : r.error().message;
}

Scenario load_ok(std::string_view text) {
  Result<Scenario> r = parse_scenario(text);
  if (!r.ok()) {
    ADD_FAILURE() << r.error().message;
    return Scenario{};
  }
  return std::move(r).value();
}

TEST(ReliabilityLoader, APresetNameGivesThePreset) {
  const Scenario s = load_ok(with(R"(, "faults": {"failures": "llama3-405b"})"));
  ASSERT_TRUE(s.faults.failures.has_value());
  EXPECT_EQ(s.faults.failures->name, "llama3-405b");
  EXPECT_EQ(s.faults.failures->component(FailureCause::kGpu).rate_per_unit_h,
            preset("llama3-405b").component(FailureCause::kGpu).rate_per_unit_h);
  EXPECT_FALSE(s.checkpoint.has_value());
}

TEST(ReliabilityLoader, OverridesApplyOnTopOfThePreset) {
  const Scenario s = load_ok(with(R"(, "faults": {"failures": {"preset": "llama3-405b", "spare_nodes": 0,
      "gpu": {"lifetime": "weibull", "weibull_shape": 0.7}, "detection_s": 30}})"));
  const FailureSpec& f = *s.faults.failures;
  EXPECT_EQ(f.spare_nodes, 0);
  const ComponentFailures& gpu = f.component(FailureCause::kGpu);
  EXPECT_EQ(gpu.lifetime, Lifetime::kWeibull);
  EXPECT_EQ(gpu.weibull_shape, 0.7);
  EXPECT_EQ(gpu.rate_per_unit_h, preset("llama3-405b").component(FailureCause::kGpu).rate_per_unit_h);
  // The model-wide default changes; components with their own detection keep it.
  EXPECT_EQ(f.detection_of(FailureCause::kGpu), 60);
  EXPECT_EQ(f.detection_of(FailureCause::kSwitch), 600);
}

TEST(ReliabilityLoader, AFullObjectAndACheckpointSection) {
  const Scenario s = load_ok(with(R"(, "faults": {"failures": {"software": {"rate_per_node_h": 0.01},
      "reschedule_s": 10, "init_s": 20}},
      "checkpoint": {"interval_steps": 50, "mode": "async", "sharded": false,
                     "contents": ["model", "optimizer", "rng"], "storage": {"write_GBps": 80},
                     "d2h_GBps": 12})"));
  const FailureSpec& f = *s.faults.failures;
  EXPECT_EQ(f.name, "custom");
  EXPECT_EQ(f.component(FailureCause::kSoftware).rate_per_unit_h, 0.01);
  EXPECT_EQ(f.component(FailureCause::kGpu).rate_per_unit_h, 0);
  EXPECT_EQ(f.reschedule_s, 10);
  ASSERT_TRUE(s.checkpoint.has_value());
  const CheckpointSpec& c = *s.checkpoint;
  EXPECT_EQ(c.interval_steps, 50);
  EXPECT_FALSE(c.interval_s.has_value());
  EXPECT_EQ(c.mode, CheckpointMode::kAsync);
  EXPECT_FALSE(c.sharded);
  ASSERT_EQ(c.contents.size(), 3u);
  EXPECT_EQ(c.contents[2], StatePart::kRng);
  EXPECT_EQ(c.write_GBps, 80);
  EXPECT_FALSE(c.read_GBps.has_value());
  EXPECT_EQ(c.d2h_GBps, 12);
}

TEST(ReliabilityLoader, UnknownPresetSuggestsTheClosest) {
  EXPECT_EQ(load_error(with(R"(, "faults": {"failures": "llama3-450b"})")),
            "faults.failures: unknown failure model preset \"llama3-450b\"; did you mean "
            "\"llama3-405b\"? (stepcast presets lists them)");
}

TEST(ReliabilityLoader, StragglersAndCrashAreReadBesideFailures) {
  // faults.stragglers must be a list; a crash needs a rank and a moment (sim/perturb_test.cc
  // covers the rest of the perturbation loader).
  EXPECT_EQ(load_error(with(R"(, "faults": {"crash": {}, "stragglers": {"rank": 3}})")),
            "faults.stragglers: expected a list of objects, got {\"rank\":3}\n"
            "faults.crash.rank: required\n"
            "faults.crash: give \"at_op\" (an op index of the rank's program, see the trace) or \"at_time_s\"");
}

TEST(ReliabilityLoader, UnknownFaultsKeySuggestsFailures) {
  EXPECT_EQ(load_error(with(R"(, "faults": {"failure": "llama3-405b"})")),
            "faults.failure: unknown key; did you mean \"failures\"?");
}

TEST(ReliabilityLoader, TheRateKeyNamesItsUnit) {
  EXPECT_EQ(load_error(with(R"(, "faults": {"failures": {"gpu": {"rate_per_node_h": 1e-5}}})")),
            "faults.failures.gpu.rate_per_node_h: unknown key; did you mean \"rate_per_gpu_h\"?\n"
            "faults.failures: every component's rate is 0: give a preset or at least one rate, e.g. "
            "\"gpu\": {\"rate_per_gpu_h\": 1.3e-5}");
}

TEST(ReliabilityLoader, BadComponentValuesNameTheirField) {
  EXPECT_EQ(load_error(with(R"(, "faults": {"failures": {"preset": "llama3-405b",
      "gpu": {"lifetime": "weibul"}, "host": {"rate_per_node_h": -1},
      "nic": {"weibull_shape": 2}, "switch": 3, "nodes_per_switch": 0}})")),
            "faults.failures.gpu.lifetime: \"weibul\" is not one of \"exponential\", \"weibull\"; did you "
            "mean \"weibull\"?\n"
            "faults.failures.host.rate_per_node_h: -1 is out of range (0 to 1)\n"
            "faults.failures.nic.weibull_shape: only used with \"lifetime\": \"weibull\"\n"
            "faults.failures.switch: expected an object, got 3\n"
            "faults.failures.nodes_per_switch: 0 is out of range (1 to 1000000)");
}

TEST(ReliabilityLoader, CheckpointIntervalIsOneOfTwoForms) {
  EXPECT_EQ(load_error(with(R"(, "checkpoint": {"interval_s": 600, "interval_steps": 100})")),
            "checkpoint: give interval_s or interval_steps, not both");
  EXPECT_EQ(load_error(with(R"(, "checkpoint": {"interval_s": 0})")),
            "checkpoint.interval_s: expected a positive number, got 0");
}

TEST(ReliabilityLoader, CheckpointModeAndContentsAreChecked) {
  EXPECT_EQ(load_error(with(R"(, "checkpoint": {"mode": "asnyc", "contents": ["model", "optimiser", 7, "model"]})")),
            "checkpoint.mode: \"asnyc\" is not one of \"sync\", \"async\"; did you mean \"async\"?\n"
            "checkpoint.contents[1]: \"optimiser\" is not one of \"model\", \"optimizer\", \"lr_scheduler\", "
            "\"grad_scaler\", \"rng\", \"data_sampler\", \"step\", \"config\"; did you mean \"optimizer\"?\n"
            "checkpoint.contents[2]: expected a string, got 7\n"
            "checkpoint.contents[3]: \"model\" is listed twice");
  EXPECT_EQ(load_error(with(R"(, "checkpoint": {"contents": []})")),
            "checkpoint.contents: empty: list at least one of \"model\", \"optimizer\", \"lr_scheduler\", "
            "\"grad_scaler\", \"rng\", \"data_sampler\", \"step\", \"config\"");
}

TEST(ReliabilityLoader, CheckpointStorageAndUnknownKeys) {
  EXPECT_EQ(load_error(with(R"(, "checkpoint": {"storage": {"write_GBps": 0, "read_gbps": 5}, "shardd": true})")),
            "checkpoint.storage.write_GBps: expected a positive number, got 0\n"
            "checkpoint.storage.read_gbps: unknown key; did you mean \"read_GBps\"?\n"
            "checkpoint.shardd: unknown key; did you mean \"sharded\"?");
}

TEST(ReliabilityLoader, CalibrationMustBeAPathOrAnObject) {
  EXPECT_EQ(load_error(with(R"(, "calibration": 3)")),
            "calibration: expected a file path or an object, got 3");
}

}  // namespace
}  // namespace stepcast

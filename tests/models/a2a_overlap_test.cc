// Expert-parallel all-to-all overlap (plan.moe_a2a_overlap; docs/model-reference.md "All-to-
// all overlap"): the loader's rules as Megatron-Core states them, the schedule's extra warm-up
// forward, and the closed form's merged steps by hand.
#include <gtest/gtest.h>

#include <string>

#include "stepcast/models/compute.h"
#include "stepcast/models/estimate.h"
#include "stepcast/models/layer_cost.h"
#include "stepcast/models/lower.h"
#include "stepcast/models/scenario.h"

namespace stepcast {
namespace {

// Qwen3-30B-A3B cut to 8 layers (all MoE: 128 experts, top-8) on one DGX H100: ep 8 folded
// over dp 8, microbatch 2 of 4,096 tokens, m = 64 / (2 x 8) = 4.
std::string qwen_cut(const std::string& plan_extra, const std::string& cluster_extra = "") {
  return R"({"name": "qwen3 cut", "model": {"preset": "qwen3-30b-a3b", "num_layers": 8},
             "cluster": {"preset": "dgx-h100", "nodes": 1)" +
         cluster_extra + R"(},
             "plan": {"tp": 1, "pp": 1, "dp": 8, "ep": 8, "microbatch": 2, "global_batch": 64, "zero": 1)" +
         plan_extra + R"(},
             "workload": {"seq_len": 4096}})";
}

std::string load_error(const std::string& text) {
  const Result<Scenario> r = parse_scenario(text);
  return r.ok() ? "(loaded without error)" : r.error().message;
}

Scenario load(const std::string& text) {
  Result<Scenario> r = parse_scenario(text);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? std::move(r).value() : Scenario{};
}

// Megatron-Core (transformer_config.py, overlap_moe_expert_parallel_comm): expert parallelism,
// the interleaved schedule with pipelining, no full recomputation, no recomputed "moe" block,
// no shared-expert overlap; and what stepcast does not express.
TEST(MoeA2aOverlap, LoaderRulesNameTheField) {
  const std::string on = R"(, "moe_a2a_overlap": true)";
  EXPECT_TRUE(load(qwen_cut(on)).plan.moe_a2a_overlap);
  EXPECT_EQ(load_error(qwen_cut(R"(, "moe_a2a_overlap": "yes")")),
            "plan.moe_a2a_overlap: expected true or false, got \"yes\"");
  const std::string p = "plan.moe_a2a_overlap: ";
  EXPECT_EQ(load_error(R"({"model": "llama3-8b", "cluster": {"preset": "dgx-h100", "nodes": 1},
                           "plan": {"dp": 8, "global_batch": 8, "moe_a2a_overlap": true}, "workload": {"seq_len": 4096}})"),
            p + "needs a mixture-of-experts model (llama3-8b has no moe)");
  EXPECT_EQ(load_error(qwen_cut(on).replace(qwen_cut(on).find("\"ep\": 8"), 7, "\"ep\": 1")),
            p + "needs expert parallelism (ep > 1, got 1): it overlaps the expert-parallel all-to-alls");
  EXPECT_EQ(load_error(qwen_cut(on + R"(, "recompute": "full")")),
            p + "cannot be combined with full recomputation (Megatron-Core refuses it)");
  EXPECT_EQ(load_error(qwen_cut(on + R"(, "recompute": "selective", "recompute_modules": ["moe"])")),
            p + "cannot be combined with recompute_modules \"moe\" (the recomputed MoE block re-runs the dispatch)");
  EXPECT_EQ(load_error(qwen_cut(on + R"(, "moe_shared_expert_overlap": true)")),
            p + "cannot be combined with plan.moe_shared_expert_overlap (Megatron-Core refuses it)");
  EXPECT_EQ(load_error(qwen_cut(on + R"(, "stack": "fsdp2-eager")")),
            p + "is Megatron-Core's (plan.stack \"megatron-core\", got \"fsdp2-eager\")");
  EXPECT_EQ(load_error(qwen_cut(on).replace(qwen_cut(on).find("\"zero\": 1"), 9, "\"zero\": 3")),
            p + "with zero 3 is not expressed");
  // Pipelining needs virtual stages (Megatron-Core: "virtual_pipeline_model_parallel_size must
  // be specified when pipeline_model_parallel_size > 1").
  const std::string pp2 = R"({"model": {"preset": "qwen3-30b-a3b", "num_layers": 8},
      "cluster": {"preset": "dgx-h100", "nodes": 2},
      "plan": {"pp": 2, "dp": 8, "ep": 8, "global_batch": 16, "moe_a2a_overlap": true)";
  EXPECT_EQ(load_error(pp2 + R"(}, "workload": {"seq_len": 4096}})"),
            p + "with pp = 2 needs the interleaved schedule (Megatron-Core requires virtual pipeline stages)");
  EXPECT_TRUE(load(pp2 + R"(, "schedule": "interleaved", "virtual_stages": 2}, "workload": {"seq_len": 4096}})")
                  .plan.moe_a2a_overlap);
}

std::string order(const std::vector<ScheduleStep>& steps) {
  std::string s;
  for (const ScheduleStep& x : steps) {
    if (!s.empty()) s += ' ';
    s += (x.forward ? "F" : "B") + std::to_string(x.microbatch) + "c" + std::to_string(x.chunk);
  }
  return s;
}

// One more warm-up forward, so that a merged step's forward and backward are of different
// microbatches (Megatron-Core schedules.py get_pp_rank_microbatches; without pipelining,
// combined_1f1b.py: "mb0 forward, then mb0 backward + mb1 forward, ...").
TEST(MoeA2aOverlap, ScheduleWarmsUpWithOneMoreForward) {
  Plan p;
  p.global_batch = 4;
  p.moe_a2a_overlap = true;
  EXPECT_EQ(schedule_warmup(p, 0), 1);
  EXPECT_EQ(order(pipeline_schedule(p, 0)), "F0c0 F1c0 B0c0 F2c0 B1c0 F3c0 B2c0 B3c0");
  // p = 2, v = 2, m = 4, stage 1 (the order of lower_test's InterleavedFollowsMegatronChunkOrder):
  // 2 + 1 = 3 warm-up forwards; without the extra one the first pair was F0c1 B0c1, the same
  // microbatch's last chunk twice.
  p.pp = 2;
  p.schedule = Schedule::kInterleaved;
  p.virtual_stages = 2;
  EXPECT_EQ(schedule_warmup(p, 1), 3);
  EXPECT_EQ(order(pipeline_schedule(p, 1)),
            "F0c0 F1c0 F0c1 "
            "F1c1 B0c1 F2c0 B1c1 F3c0 B0c0 F2c1 B1c0 F3c1 B2c1 "
            "B3c1 B2c0 B3c0");
  // Stage 0: 4 + 1 = 5 (capped at m v = 8).
  EXPECT_EQ(schedule_warmup(p, 0), 5);
  EXPECT_DOUBLE_EQ(merged_share(p, 0), 3.0 / 8);
  EXPECT_DOUBLE_EQ(merged_share(p, 1), 5.0 / 8);
  p.moe_a2a_overlap = false;
  EXPECT_EQ(merged_share(p, 1), 0.0);
}

// The closed form on the cut: m = 4 microbatches, one warm-up forward, so r = 3/4 of each
// layer's passes run merged. A merged MoE layer runs its four all-to-alls (A each) beside
// the other pass's blocks: f A slowed compute each, max(0, (1 - f) A - block) exposed.
TEST(MoeA2aOverlap, MergedStepsHideTheAllToAllsByHand) {
  const double f = 0.189 / 1.189;
  const double r = 0.75;
  {
    // NVLink all-to-alls shorter than every block beside them: all hidden. Per microbatch
    // the exposed all-to-all is the unmerged quarter's 4 A per layer, 8 layers; the
    // interference 4 f A per merged layer.
    const Scenario off = load(qwen_cut(""));
    const Scenario on = load(qwen_cut(R"(, "moe_a2a_overlap": true)"));
    const LayerCost lc = layer_cost(on.model, on.cluster, on.plan, 4096, true);
    const LayerComm cm = layer_comm(on.model, on.cluster, on.plan, 4096, true, lc);
    const double a = cm.ep_a2a_s;
    ASSERT_GT(a, 0.0);
    EXPECT_NEAR(cm.ep_exposed_s, 4 * a, 1e-15);
    for (double block : {lc.attn_fwd_s(), lc.attn_bwd_s(), lc.mlp_fwd_s(), lc.mlp_bwd_s()})
      ASSERT_GT(block, (1 - f) * a);
    const StageTimes s0 = stage_times(off.model, off.cluster, off.plan, off.workload, 0);
    const StageTimes s1 = stage_times(on.model, on.cluster, on.plan, on.workload, 0);
    EXPECT_NEAR(s0.ep, 8 * 4 * a, 1e-12);
    EXPECT_NEAR(s1.ep, 8 * (1 - r) * 4 * a, 1e-12);
    EXPECT_NEAR(s1.parts.interference - s0.parts.interference, 8 * r * 4 * f * a, 1e-12);
    EXPECT_NEAR(s1.forward - s0.forward, 8 * r * 2 * f * a, 1e-12);
    EXPECT_NEAR(s1.backward - s0.backward, 8 * r * 2 * f * a, 1e-12);
    // The step: the hidden all-to-alls less their interference, m = 4 microbatches.
    const Estimate e0 = estimate(off.model, off.cluster, off.plan, off.workload);
    const Estimate e1 = estimate(on.model, on.cluster, on.plan, on.workload);
    EXPECT_NEAR(e0.step_time_s - e1.step_time_s, 4 * 8 * r * 4 * (1 - f) * a, 2e-3 * e0.step_time_s);
  }
  {
    // A slow fabric (NVLink at 5 GB/s): every all-to-all outlasts the block beside it, so a
    // merged layer exposes 4 (1 - f) A less the four blocks, the whole layer's compute: the
    // merged steps save exactly that compute per layer, the all-to-alls remain.
    const std::string slow = R"(, "intra_node": {"bandwidth_GBps": 5})";
    const Scenario off = load(qwen_cut("", slow));
    const Scenario on = load(qwen_cut(R"(, "moe_a2a_overlap": true)", slow));
    const LayerCost lc = layer_cost(on.model, on.cluster, on.plan, 4096, true);
    const LayerComm cm = layer_comm(on.model, on.cluster, on.plan, 4096, true, lc);
    const double a = cm.ep_a2a_s;
    for (double block : {lc.attn_fwd_s(), lc.attn_bwd_s(), lc.mlp_fwd_s(), lc.mlp_bwd_s()})
      ASSERT_LT(block, (1 - f) * a);
    const StageTimes s0 = stage_times(off.model, off.cluster, off.plan, off.workload, 0);
    const StageTimes s1 = stage_times(on.model, on.cluster, on.plan, on.workload, 0);
    const double layer = lc.fwd_s() + lc.bwd_s();
    EXPECT_NEAR(s1.ep, 8 * ((1 - r) * 4 * a + r * (4 * (1 - f) * a - layer)), 1e-9);
    EXPECT_NEAR((s0.ep + s0.forward + s0.backward) - (s1.ep + s1.forward + s1.backward), 8 * r * layer, 1e-9);
  }
}

// Memory: the extra warm-up forward holds one more chunk's activations where it is not the
// whole schedule, and a merged step one layer beyond them (its forward allocates layer by
// layer while its backward frees); on the last stage that layer coincides with the output
// head's buffer, which the merged backward frees first.
TEST(MoeA2aOverlap, MemoryOfTheExtraForwardAndTheMergedLayer) {
  const std::string text = R"({"model": {"preset": "qwen3-30b-a3b", "num_layers": 8},
      "cluster": {"preset": "dgx-h100", "nodes": 2},
      "plan": {"pp": 2, "dp": 8, "ep": 8, "microbatch": 1, "global_batch": 64, "schedule": "interleaved",
               "virtual_stages": 2, "zero": 1)";
  const Scenario off = load(text + R"(}, "workload": {"seq_len": 4096}})");
  const Scenario on = load(text + R"(, "moe_a2a_overlap": true}, "workload": {"seq_len": 4096}})");
  // m = 64 / 8 = 8, v = 2: stage 0 holds 2(p - 1) + (v - 1) p + 1 = 5 chunks without; with,
  // 2(p - 1) + (v - 1) p + 1 = 5 warm-up chunks, the merged step's layer and its microbatch's
  // token ids (4,096 x 8 B).
  EXPECT_DOUBLE_EQ(inflight_microbatches(off.plan, 0), 5.0 / 2);
  EXPECT_DOUBLE_EQ(inflight_microbatches(on.plan, 0), 5.0 / 2);
  const double layer = layer_activation_bytes(on.model, on.plan, 4096, true);
  const MemoryBreakdown m0 = stage_memory(off.model, off.cluster, off.plan, off.workload, 0);
  const MemoryBreakdown m1 = stage_memory(on.model, on.cluster, on.plan, on.workload, 0);
  EXPECT_NEAR(m1.activations - m0.activations, layer + 4096 * 8, 1.0);
  // Stage 1: 2 + 1 = 3 chunks (warm-up 2 + 1 without overlap: the same count), and the
  // output head's buffer is larger than a layer: no more.
  EXPECT_DOUBLE_EQ(inflight_microbatches(on.plan, 1), 3.0 / 2);
  EXPECT_NEAR(stage_memory(on.model, on.cluster, on.plan, on.workload, 1).activations,
              stage_memory(off.model, off.cluster, off.plan, off.workload, 1).activations, 1.0);
}

}  // namespace
}  // namespace stepcast

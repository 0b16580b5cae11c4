// lower(): the Program IR of one training step. Pipeline orders written out by hand
// (Megatron-LM's 1F1B and interleaved 1F1B), and structural invariants every Program must
// keep: sends matched by recvs, memory balanced, the number of TP / EP collectives per
// layer and microbatch, and gradient buckets that cover exactly the stage's gradients.
#include "stepcast/models/lower.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <array>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "stepcast/models/params.h"
#include "stepcast/models/presets.h"
#include "stepcast/models/program.h"
#include "stepcast/models/scenario.h"

namespace stepcast {
namespace {

const ClusterSpec& dgx_h100() { return builtin_presets().clusters.at("dgx-h100"); }
const ModelSpec& preset_model(const char* name) { return builtin_presets().models.at(name); }

// "F3" / "B0" (chunk 0) or "F3c1" (chunk 1) per step: the schedule as one readable string.
std::string order(const std::vector<ScheduleStep>& steps, bool with_chunks) {
  std::string out;
  for (const ScheduleStep& s : steps) {
    if (!out.empty()) out += ' ';
    out += (s.forward ? "F" : "B") + std::to_string(s.microbatch);
    if (with_chunks) out += "c" + std::to_string(s.chunk);
  }
  return out;
}

Plan pipeline(Schedule s, int pp, int v, std::int64_t m) {
  Plan p;
  p.pp = pp;
  p.schedule = s;
  p.virtual_stages = v;
  p.global_batch = m;  // microbatch 1, dp 1: m = global_batch
  return p;
}

TEST(PipelineSchedule, OneFOneBStageZeroWarmsUpWithPMinus1Forwards) {
  // p = 4, m = 8, stage 0: min(p - 0 - 1, m) = 3 warm-up forwards, then 5 forward/backward
  // pairs (F3 B0 ... F7 B4), then the 3 cool-down backwards.
  EXPECT_EQ(order(pipeline_schedule(pipeline(Schedule::kOneFOneB, 4, 1, 8), 0), false),
            "F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7");
}

TEST(PipelineSchedule, OneFOneBLastStageAlternatesFromTheStart) {
  // p = 4, m = 8, stage 3: min(4 - 3 - 1, 8) = 0 warm-up forwards: F and B alternate.
  EXPECT_EQ(order(pipeline_schedule(pipeline(Schedule::kOneFOneB, 4, 1, 8), 3), false),
            "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7");
}

TEST(PipelineSchedule, GpipeRunsAllForwardsThenAllBackwards) {
  EXPECT_EQ(order(pipeline_schedule(pipeline(Schedule::kGpipe, 4, 1, 4), 2), false),
            "F0 F1 F2 F3 B0 B1 B2 B3");
}

TEST(PipelineSchedule, InterleavedFollowsMegatronChunkOrder) {
  // p = 2, v = 2, m = 4: 8 chunk-microbatches per stage. Megatron-LM: the k-th forward
  // runs chunk (k / p) mod v on microbatch (k / (p v)) p + k mod p; the k-th backward runs
  // chunk v - 1 - (k / p) mod v. Forwards:  (0,c0) (1,c0) (0,c1) (1,c1) (2,c0) (3,c0) (2,c1) (3,c1);
  // backwards: (0,c1) (1,c1) (0,c0) (1,c0) (2,c1) (3,c1) (2,c0) (3,c0).
  const Plan p = pipeline(Schedule::kInterleaved, 2, 2, 4);
  // Stage 0: warm-up min(2(p - 0 - 1) + (v - 1) p, m v) = min(2 + 2, 8) = 4 forwards,
  // then 4 forward/backward pairs, then 4 backwards.
  EXPECT_EQ(order(pipeline_schedule(p, 0), true),
            "F0c0 F1c0 F0c1 F1c1 "
            "F2c0 B0c1 F3c0 B1c1 F2c1 B0c0 F3c1 B1c0 "
            "B2c1 B3c1 B2c0 B3c0");
  // Stage 1: warm-up min(0 + 2, 8) = 2 forwards, 6 pairs, 2 backwards.
  EXPECT_EQ(order(pipeline_schedule(p, 1), true),
            "F0c0 F1c0 "
            "F0c1 B0c1 F1c1 B1c1 F2c0 B0c0 F3c0 B1c0 F2c1 B2c1 F3c1 B3c1 "
            "B2c0 B3c0");
}

TEST(PipelineSchedule, InterleavedMicrobatchGroupsFollowMegatronCoresScheduleTable) {
  // Megatron-Core's own example (schedules.py get_schedule_table's docstring, "PP2 N3M5 with
  // VP2"): 5 microbatches in groups of 3, 2 chunks.
  //   virtual_microbatch_id | 0 1 2 3 4 5 6 7 8 9
  //   microbatch_id         | 0 1 2 0 1 2 3 4 3 4
  //   model_chunk_id        | 0 0 0 1 1 1 0 0 1 1
  Plan p = pipeline(Schedule::kInterleaved, 2, 2, 5);
  p.microbatch_group = 3;
  EXPECT_EQ(order(interleaved_table(p), true), "F0c0 F1c0 F2c0 F0c1 F1c1 F2c1 F3c0 F4c0 F3c1 F4c1");
  // Warm-up (get_pp_rank_microbatches): 2 (pp - rank - 1) + (v - 1) x 3: 5 on stage 0, 3 on
  // stage 1; the k-th backward takes the k-th entry's microbatch on chunk v - 1 - chunk.
  EXPECT_EQ(schedule_warmup(p, 0), 5);
  EXPECT_EQ(schedule_warmup(p, 1), 3);
  EXPECT_EQ(order(pipeline_schedule(p, 1), true),
            "F0c0 F1c0 F2c0 "
            "F0c1 B0c1 F1c1 B1c1 F2c1 B2c1 F3c0 B0c0 F4c0 B1c0 F3c1 B2c0 F4c1 B3c1 "
            "B4c1 B3c0 B4c0");
  // With the default group (pp) the table is the closed formula of InterleavedFollowsMegatron-
  // ChunkOrder: microbatch (k / (p v)) p + k mod p, chunk (k / p) mod v.
  const Plan q = pipeline(Schedule::kInterleaved, 4, 3, 8);
  const std::vector<ScheduleStep> table = interleaved_table(q);
  ASSERT_EQ(table.size(), 24U);
  for (int k = 0; k < 24; ++k) {
    EXPECT_EQ(table[static_cast<std::size_t>(k)].microbatch, (k / 12) * 4 + k % 4) << k;
    EXPECT_EQ(table[static_cast<std::size_t>(k)].chunk, (k / 4) % 3) << k;
  }
}

TEST(PipelineSchedule, MicrobatchGroupsThatRunAreMegatronCoresChecks) {
  // pp <= g <= m, and m % g == 0 or m % g >= pp (schedules.py, the two errors it raises).
  EXPECT_TRUE(microbatch_group_runs(2, 5, 3));    // 5 % 3 = 2 >= 2
  EXPECT_FALSE(microbatch_group_runs(2, 5, 2));   // 5 % 2 = 1 < 2
  EXPECT_TRUE(microbatch_group_runs(2, 5, 5));    // one group
  EXPECT_FALSE(microbatch_group_runs(2, 5, 6));   // more than m
  EXPECT_FALSE(microbatch_group_runs(4, 10, 3));  // fewer than pp
  EXPECT_TRUE(microbatch_group_runs(4, 10, 5));   // 10 % 5 = 0
  EXPECT_TRUE(microbatch_group_runs(4, 10, 6));   // 10 % 6 = 4
  EXPECT_EQ(smallest_microbatch_group(4, 8), 4);  // a multiple of pp: Megatron-Core's default
  EXPECT_EQ(smallest_microbatch_group(4, 10), 5);
  EXPECT_EQ(smallest_microbatch_group(4, 6), 6);  // 6 % 4 = 2 and 6 % 5 = 1 fall short
  EXPECT_EQ(smallest_microbatch_group(8, 13), 13);
  EXPECT_EQ(smallest_microbatch_group(4, 3), 0);  // fewer microbatches than stages
}

// --- structure of lowered Programs ---------------------------------------------------

struct Layout {
  const char* label;
  ModelSpec model;
  ClusterSpec cluster;
  Plan plan;
  Workload workload;
};

ClusterSpec nodes(int n) {
  ClusterSpec c = dgx_h100();
  c.nodes = n;
  return c;
}

Plan base_plan(int tp, int pp, int dp, std::int64_t global_batch) {
  Plan p;
  p.tp = tp;
  p.pp = pp;
  p.dp = dp;
  p.global_batch = global_batch;
  return p;
}

// Layouts covering every schedule, ZeRO stage 3, full recomputation, CP and EP. Each
// passes layout_errors() (checked below), as lower() requires.
std::vector<Layout> layouts() {
  std::vector<Layout> out;
  const Workload w{2048, 0, 0};
  {
    Plan p = base_plan(2, 4, 2, 16);
    p.sequence_parallel = true;
    p.zero = 1;
    out.push_back({"1f1b tp2 pp4 dp2 sp zero1", preset_model("llama3-8b"), nodes(2), p, w});
  }
  {
    Plan p = base_plan(2, 4, 1, 8);
    p.schedule = Schedule::kGpipe;
    p.recompute = Recompute::kFull;
    out.push_back({"gpipe tp2 pp4 full recompute", preset_model("llama3-8b"), nodes(1), p, w});
  }
  {
    Plan p = base_plan(1, 4, 2, 16);
    p.schedule = Schedule::kInterleaved;
    p.virtual_stages = 2;
    p.overlap_grad_reduce = true;
    out.push_back({"interleaved pp4 v2 dp2", preset_model("llama3-8b"), nodes(1), p, w});
  }
  {
    Plan p = base_plan(1, 2, 4, 20);  // 5 microbatches in groups of 3
    p.schedule = Schedule::kInterleaved;
    p.virtual_stages = 2;
    p.microbatch_group = 3;
    out.push_back({"interleaved pp2 v2 dp4 m5 groups of 3", preset_model("llama3-8b"), nodes(1), p, w});
  }
  {
    Plan p = base_plan(1, 2, 4, 8);
    p.zero = 3;
    out.push_back({"zero3 pp2 dp4", preset_model("llama3-8b"), nodes(1), p, w});
  }
  {
    Plan p = base_plan(2, 2, 1, 4);
    p.cp = 2;
    p.overlap_grad_reduce = false;
    out.push_back({"cp2 tp2 pp2 no overlap", preset_model("llama3-8b"), nodes(1), p, w});
  }
  {
    Plan p = base_plan(1, 2, 4, 8);
    p.ep = 4;
    p.recompute = Recompute::kFull;
    out.push_back({"moe ep4 pp2 dp4 full recompute", preset_model("mixtral-8x7b"), nodes(1), p, w});
  }
  return out;
}

TEST(Lower, TestLayoutsAreValid) {
  for (const Layout& l : layouts()) {
    EXPECT_TRUE(layout_errors(l.model, l.cluster, l.plan, l.workload).empty()) << l.label;
  }
}

TEST(Lower, EverySendHasOneMatchingRecvAndViceVersa) {
  // A send of stage s to stage t with tag x is received by stage t's recv from s with tag
  // x: the multisets of (from, to, tag) of sends and of recvs are equal, and no key
  // repeats (one transfer per tag).
  for (const Layout& l : layouts()) {
    const Program prog = lower(l.model, l.cluster, l.plan, l.workload);
    std::map<std::tuple<int, int, std::uint32_t>, int> sends, recvs;
    for (const RoleTemplate& r : prog.roles) {
      for (const Op& op : r.ops) {
        if (op.kind == OpKind::kSend) ++sends[{r.stage, op.peer_stage, op.tag}];
        if (op.kind == OpKind::kRecv) ++recvs[{op.peer_stage, r.stage, op.tag}];
      }
    }
    EXPECT_EQ(sends, recvs) << l.label;
    for (const auto& [key, n] : sends) EXPECT_EQ(n, 1) << l.label;
    // Per boundary and microbatch one activation forward and one gradient backward
    // (2 per model-chunk boundary): 2 m (p v - 1) transfers in all.
    const std::int64_t m = l.plan.accumulation();
    EXPECT_EQ(static_cast<std::int64_t>(sends.size()),
              2 * m * (l.plan.pp * l.plan.virtual_stages - 1))
        << l.label;
  }
}

TEST(Lower, EveryAllocIsFreedWithinTheStep) {
  // Each stage's allocations and frees balance to zero over the step: the sizes freed are
  // exactly the sizes allocated (as multisets, so also their sums).
  for (const Layout& l : layouts()) {
    const Program prog = lower(l.model, l.cluster, l.plan, l.workload);
    for (const RoleTemplate& r : prog.roles) {
      std::vector<double> allocs, frees;
      for (const Op& op : r.ops) {
        if (op.kind == OpKind::kAlloc) allocs.push_back(op.bytes);
        if (op.kind == OpKind::kFree) frees.push_back(op.bytes);
      }
      std::sort(allocs.begin(), allocs.end());
      std::sort(frees.begin(), frees.end());
      EXPECT_FALSE(allocs.empty()) << l.label << " stage " << r.stage;
      EXPECT_EQ(allocs, frees) << l.label << " stage " << r.stage;
      double balance = 0;
      for (std::size_t i = 0; i < allocs.size(); ++i) balance += allocs[i] - frees[i];
      EXPECT_EQ(balance, 0.0) << l.label << " stage " << r.stage;
    }
  }
}

TEST(Lower, DependenciesPointToEarlierOpsOfTheSameTemplate) {
  // lower() emits ops in a valid program order: every dependency precedes its op.
  for (const Layout& l : layouts()) {
    const Program prog = lower(l.model, l.cluster, l.plan, l.workload);
    for (const RoleTemplate& r : prog.roles) {
      for (std::uint32_t i = 0; i < r.ops.size(); ++i) {
        const Op& op = r.ops[i];
        for (std::uint32_t k = 0; k < op.dep_count; ++k) {
          EXPECT_LT(r.deps[op.dep_begin + k], i) << l.label << " " << prog.names[op.name];
        }
      }
    }
  }
}

// Collectives of `group` per (layer, microbatch) and pass letter (the name's second word:
// F forward, B backward, R recomputation).
std::map<std::tuple<int, int, char>, int> collectives_per_layer(const Program& prog, GroupKind group) {
  std::map<std::tuple<int, int, char>, int> n;
  for (const RoleTemplate& r : prog.roles) {
    for (const Op& op : r.ops) {
      if (op.kind != OpKind::kCollective || op.group != group || op.layer < 0) continue;
      const std::string& name = prog.names[op.name];
      const char pass = name[name.find(' ') + 1];
      ++n[{op.layer, op.microbatch, pass}];
    }
  }
  return n;
}

TEST(Lower, TensorParallelHasTwoAllReducesPerPassWithoutSp) {
  // Megatron: forward all-reduces after the attention output projection and the FFN down
  // projection; backward after the QKV and FFN up projections' input gradients. So 2 per
  // pass per layer per microbatch, and a fully recomputed forward repeats its 2.
  Plan p = base_plan(2, 2, 1, 4);
  const ModelSpec& m = preset_model("llama3-8b");
  const Workload w{2048, 0, 0};
  for (const Recompute rc : {Recompute::kNone, Recompute::kFull}) {
    p.recompute = rc;
    const Program prog = lower(m, nodes(1), p, w);
    const auto n = collectives_per_layer(prog, GroupKind::kTp);
    // 32 layers x 4 microbatches x (2 or 3) passes.
    EXPECT_EQ(n.size(), 32u * 4 * (rc == Recompute::kFull ? 3 : 2));
    for (const auto& [key, count] : n) {
      EXPECT_EQ(count, 2) << "layer " << std::get<0>(key) << " mb " << std::get<1>(key) << " pass "
                          << std::get<2>(key);
    }
    for (const RoleTemplate& r : prog.roles) {
      for (const Op& op : r.ops) {
        if (op.group == GroupKind::kTp && op.kind == OpKind::kCollective) {
          EXPECT_EQ(op.coll, CollKind::kAllReduce);
        }
      }
    }
  }
}

TEST(Lower, TensorParallelHasFourCollectivesPerPassWithSp) {
  // Sequence parallelism replaces each all-reduce by an all-gather before the block and a
  // reduce-scatter after it: 2 blocks x 2 = 4 per pass, half of each kind.
  Plan p = base_plan(2, 2, 1, 4);
  p.sequence_parallel = true;
  const Program prog = lower(preset_model("llama3-8b"), nodes(1), p, Workload{2048, 0, 0});
  const auto n = collectives_per_layer(prog, GroupKind::kTp);
  EXPECT_EQ(n.size(), 32u * 4 * 2);
  for (const auto& [key, count] : n) EXPECT_EQ(count, 4);
  int ag = 0, rs = 0;
  for (const RoleTemplate& r : prog.roles) {
    int step_ar = 0;
    for (const Op& op : r.ops) {
      if (op.kind != OpKind::kCollective || op.group != GroupKind::kTp) continue;
      ag += op.coll == CollKind::kAllGather;
      rs += op.coll == CollKind::kReduceScatter;
      if (op.layer < 0) {
        // Once per step, after the data-parallel reduction: the replicated norms' fp32
        // gradients all-reduced over TP (finalize_model_grads). Llama 3 8B, 16 layers a
        // stage: 16 x 2 RMSNorms x 4096 x 4 B = 524,288 B; the last stage adds the final
        // norm, 4096 x 4 B: 540,672 B.
        ++step_ar;
        EXPECT_EQ(op.coll, CollKind::kAllReduce);
        EXPECT_EQ(prog.names[op.name], "tp.ar sequence-parallel grads");
        EXPECT_DOUBLE_EQ(op.bytes, r.stage == 1 ? 540'672.0 : 524'288.0);
      }
    }
    EXPECT_EQ(step_ar, 1) << "stage " << r.stage;
  }
  EXPECT_EQ(ag, 32 * 4 * 2 * 2);
  EXPECT_EQ(rs, 32 * 4 * 2 * 2);
  // Without sequence parallelism each rank's norm gradients cover every token: no all-reduce.
  p.sequence_parallel = false;
  for (const RoleTemplate& r : lower(preset_model("llama3-8b"), nodes(1), p, Workload{2048, 0, 0}).roles) {
    for (const Op& op : r.ops)
      EXPECT_FALSE(op.kind == OpKind::kCollective && op.group == GroupKind::kTp && op.layer < 0);
  }
}

TEST(Lower, ExpertParallelHasFourAllToAllsPerMoeLayerAndSixWithFullRecompute) {
  // Dispatch and combine per pass: forward 2, backward 2 (the gradients travel back), a
  // recomputed forward 2 more. Dense layers (the first one here) have none.
  ModelSpec m = preset_model("mixtral-8x7b");
  m.moe->num_dense_layers = 1;
  Plan p = base_plan(1, 2, 4, 8);
  p.ep = 4;
  for (const Recompute rc : {Recompute::kNone, Recompute::kFull}) {
    p.recompute = rc;
    const Program prog = lower(m, nodes(1), p, Workload{2048, 0, 0});
    std::map<std::pair<int, int>, int> per_layer;
    for (const RoleTemplate& r : prog.roles) {
      for (const Op& op : r.ops) {
        if (op.kind != OpKind::kCollective || op.group != GroupKind::kEp) continue;
        EXPECT_EQ(op.coll, CollKind::kAllToAll);
        ++per_layer[{op.layer, op.microbatch}];
      }
    }
    // 31 MoE layers x 2 microbatches per rank (8 / dp 4).
    EXPECT_EQ(per_layer.size(), 31u * 2);
    for (const auto& [key, count] : per_layer) {
      EXPECT_GE(key.first, 1) << "dense layer 0 has no all-to-all";
      EXPECT_EQ(count, rc == Recompute::kFull ? 6 : 4) << "layer " << key.first;
    }
  }
}

// Bytes of the data-parallel gradient reductions of one stage: the bucketed (or single)
// all-reduces / reduce-scatters over the DP group (dense) and the expert-DP group.
struct GradBytes {
  double dense = 0, expert = 0;
};
GradBytes gradient_reduction_bytes(const Program& prog, int stage) {
  GradBytes g;
  for (const Op& op : prog.roles[static_cast<std::size_t>(stage)].ops) {
    if (op.kind != OpKind::kCollective || op.comm != CommClass::kDp) continue;
    if (op.coll != CollKind::kAllReduce && op.coll != CollKind::kReduceScatter) continue;
    if (op.group == GroupKind::kWorld) continue;  // the gradient norm's scalar, not gradients
    (op.group == GroupKind::kEdp ? g.expert : g.dense) += op.bytes;
  }
  return g;
}

TEST(Lower, GradientBucketsAddUpToTheStageGradients) {
  // The buckets of the last backward (or the single reduction without overlap, or the
  // per-layer FSDP reduce-scatters of every microbatch) cover each gradient exactly once
  // per reduction: dense bytes = rank_params(stage).dense x grad_bytes (embedding on
  // stage 0, output layer and final norm on the last), expert bytes likewise.
  const Workload w{2048, 0, 0};
  struct Case {
    const char* label;
    ModelSpec model;
    Plan plan;
  };
  std::vector<Case> cases;
  {
    Plan p = base_plan(2, 2, 1, 8);  // dp 1 but cp 2: the DP group is dp x cp = 2
    p.cp = 2;
    cases.push_back({"ddp overlapped, cp2", preset_model("llama3-8b"), p});
    p.overlap_grad_reduce = false;
    cases.push_back({"ddp one reduction, cp2", preset_model("llama3-8b"), p});
  }
  {
    Plan p = base_plan(1, 2, 4, 8);
    p.schedule = Schedule::kInterleaved;
    p.virtual_stages = 2;
    p.zero = 2;
    p.ddp_bucket_MiB = 5;  // many buckets per chunk
    cases.push_back({"interleaved zero2 small buckets", preset_model("llama3-8b"), p});
    ModelSpec tied = preset_model("llama3-8b");
    tied.tied_embeddings = true;
    cases.push_back({"interleaved zero2 tied embeddings", tied, p});
  }
  {
    Plan p = base_plan(1, 2, 4, 8);
    p.ep = 2;
    cases.push_back({"moe ep2 dense and expert buckets", preset_model("mixtral-8x7b"), p});
  }
  for (const Case& c : cases) {
    ASSERT_TRUE(layout_errors(c.model, nodes(1), c.plan, w).empty()) << c.label;
    const Program prog = lower(c.model, nodes(1), c.plan, w);
    for (int s = 0; s < c.plan.pp; ++s) {
      const RankParams rp = rank_params(c.model, c.plan, s);
      const GradBytes g = gradient_reduction_bytes(prog, s);
      ASSERT_GT(rp.dense, 0);
      EXPECT_DOUBLE_EQ(g.dense, rp.dense * c.plan.grad_bytes) << c.label << " stage " << s;
      EXPECT_DOUBLE_EQ(g.expert, rp.expert * c.plan.grad_bytes) << c.label << " stage " << s;
    }
  }
  // FSDP reduces every microbatch's gradients layer by layer: m x the layers' bytes
  // (the embedding and output layer are outside the per-layer units).
  Plan p = base_plan(1, 2, 4, 8);
  p.zero = 3;
  const ModelSpec& m = preset_model("llama3-8b");
  const Program prog = lower(m, nodes(1), p, w);
  const LayerRankParams lp = layer_rank_params(m, p, false);
  for (int s = 0; s < 2; ++s) {
    const GradBytes g = gradient_reduction_bytes(prog, s);
    // 16 layers per stage, m = 8 / 4 = 2 microbatches.
    EXPECT_DOUBLE_EQ(g.dense, 2.0 * 16 * lp.dense * p.grad_bytes) << "stage " << s;
  }
}

TEST(Lower, FsdpBackwardPrefetchGatherPrecedesThePreviousLayersReduceScatter) {
  // The DP stream runs in program order. With at most two gathered layers, the backward
  // gather of layer i - 1 must come before the reduce-scatter of layer i on that stream,
  // or it waits for layer i's whole backward (no prefetch). Stage 1 (layers 16..31),
  // first backward (microbatch 0): ag L31, ag L30, rs L31, ag L29, rs L30, ...
  Plan p = base_plan(1, 2, 4, 8);
  p.zero = 3;
  const Program prog = lower(preset_model("llama3-8b"), nodes(1), p, Workload{2048, 0, 0});
  std::vector<std::string> dp_stream;
  for (const Op& op : prog.roles[1].ops) {
    const std::string& name = prog.names[op.name];
    if (op.stream == Stream::kDp && name.find(" B mb0 ") != std::string::npos) dp_stream.push_back(name);
    if (op.stream == Stream::kDp && name.rfind("fsdp.rs mb0 ", 0) == 0) dp_stream.push_back(name);
  }
  ASSERT_GE(dp_stream.size(), 6u);
  const std::vector<std::string> first6(dp_stream.begin(), dp_stream.begin() + 6);
  EXPECT_EQ(first6, (std::vector<std::string>{"fsdp.ag B mb0 L31", "fsdp.ag B mb0 L30", "fsdp.rs mb0 L31",
                                              "fsdp.ag B mb0 L29", "fsdp.rs mb0 L30", "fsdp.ag B mb0 L28"}));
  EXPECT_EQ(dp_stream.back(), "fsdp.rs mb0 L16");
  EXPECT_EQ(dp_stream.size(), 32u);  // 16 gathers and 16 reduce-scatters
}

}  // namespace
}  // namespace stepcast

// --- Placement orders (Plan::placement) ------------------------------------------------

namespace {

stepcast::Placement placement(int tp, int cp, int dp, int pp, int ep, std::array<int, 4> order) {
  stepcast::Placement pl{tp, cp, dp, pp, ep, 8, order};
  return pl;
}

// The members of rank r's group of kind g, ascending.
std::vector<int> group_members(const stepcast::Placement& pl, stepcast::GroupKind g, int r) {
  std::vector<int> out;
  for (int i = 0; i < pl.group_size(g); ++i) out.push_back(pl.group_member(g, r, i));
  return out;
}

}  // namespace

// Every order is a bijection between ranks and coordinates, and group members share the
// coordinates their group does not span.
TEST(Placement, EveryOrderIsABijectionAndGroupsHoldTheRightRanks) {
  const std::array<std::array<int, 4>, 4> orders = {{{0, 1, 2, 3}, {1, 2, 0, 3}, {3, 0, 2, 1}, {2, 1, 3, 0}}};
  for (const auto& order : orders) {
    const stepcast::Placement pl = placement(2, 2, 4, 3, 4, order);
    std::vector<int> seen(static_cast<std::size_t>(pl.world()), 0);
    for (int r = 0; r < pl.world(); ++r) {
      const stepcast::Coords c = pl.coords(r);
      ASSERT_EQ(pl.rank(c), r);
      ++seen[static_cast<std::size_t>(r)];
      // TP group: same c, d, p; t = 0..tp-1 in ascending order.
      for (int i = 0; i < pl.tp; ++i) {
        const stepcast::Coords m = pl.coords(pl.group_member(stepcast::GroupKind::kTp, r, i));
        EXPECT_EQ(m.t, i);
        EXPECT_EQ(m.c, c.c);
        EXPECT_EQ(m.d, c.d);
        EXPECT_EQ(m.p, c.p);
      }
      // DP group (cp x dp): same t and p, all cp*dp data coordinates exactly once.
      std::set<std::pair<int, int>> data;
      for (int i = 0; i < pl.group_size(stepcast::GroupKind::kDp); ++i) {
        const stepcast::Coords m = pl.coords(pl.group_member(stepcast::GroupKind::kDp, r, i));
        EXPECT_EQ(m.t, c.t);
        EXPECT_EQ(m.p, c.p);
        data.insert({m.c, m.d});
      }
      EXPECT_EQ(data.size(), static_cast<std::size_t>(pl.cp * pl.dp));
      // EP groups partition the DP group; the rank is a member of its own EP group.
      bool found = false;
      for (int i = 0; i < pl.ep; ++i) found |= pl.group_member(stepcast::GroupKind::kEp, r, i) == r;
      EXPECT_TRUE(found);
      EXPECT_EQ(pl.coords(pl.stage_peer(r, 2)).p, 2);
    }
  }
}

TEST(Placement, LoaderRejectsOrdersThatAreNotPermutationsOrSplitCpFromDp) {
  const std::string head = R"({"model":"llama3-8b","cluster":"dgx-h100","plan":{"tp":2,"dp":4,"placement":)";
  auto r = stepcast::parse_scenario(head + R"("tp-dp-pp"}})");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message,
            "plan.placement: \"tp-dp-pp\" must name tp, cp, dp and pp once each, innermost first, e.g. "
            "\"tp-cp-ep-dp-pp\"");
  r = stepcast::parse_scenario(head + R"("cp-tp-dp-pp"}})");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message,
            "plan.placement: \"cp-tp-dp-pp\": cp and dp must be adjacent (data-parallel and expert groups span both)");
  r = stepcast::parse_scenario(head + R"("dp-ep-cp-tp-pp"}})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->plan.placement, (std::array<int, 4>{2, 1, 0, 3}));
}

// Parallel folding (Plan::etp): expert groups laid over the stage's ranks as Megatron-Core's
// expert rank generator does, et + etp * (e + ep * ed), independently of the attention tp.
TEST(Placement, FoldedExpertGroupsSpanTensorParallelRanks) {
  // tp 2, dp 4, pp 2 (16 ranks, 8 per stage), ep 4, etp 1: edp = 2 * 4 / (1 * 4) = 2.
  stepcast::Placement pl = placement(2, 1, 4, 2, 4, {0, 1, 2, 3});
  pl.etp = 1;
  ASSERT_TRUE(pl.folded());
  EXPECT_EQ(stepcast::expert_layout_error(pl).field, "");
  EXPECT_EQ(pl.group_size(stepcast::GroupKind::kEp), 4);
  EXPECT_EQ(pl.group_size(stepcast::GroupKind::kEdp), 2);
  auto members = [&](stepcast::GroupKind g, int r) { return group_members(pl, g, r); };
  // Stage 0: EP groups {0,1,2,3} and {4,5,6,7} (each holds both TP ranks of two DP
  // replicas); EDP pairs {0,4}, {1,5}, ... Stage 1 the same shifted by 8.
  EXPECT_EQ(members(stepcast::GroupKind::kEp, 2), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(members(stepcast::GroupKind::kEp, 6), (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(members(stepcast::GroupKind::kEp, 13), (std::vector<int>{12, 13, 14, 15}));
  EXPECT_EQ(members(stepcast::GroupKind::kEdp, 5), (std::vector<int>{1, 5}));
  EXPECT_EQ(members(stepcast::GroupKind::kEdp, 11), (std::vector<int>{11, 15}));
  // The attention groups are unchanged: TP {4,5}, DP {1,3,5,7}.
  EXPECT_EQ(members(stepcast::GroupKind::kTp, 5), (std::vector<int>{4, 5}));
  EXPECT_EQ(members(stepcast::GroupKind::kDp, 5), (std::vector<int>{1, 3, 5, 7}));
  // ep 8 > dp 4: one EP group per stage, no expert data parallelism.
  pl.ep = 8;
  EXPECT_EQ(members(stepcast::GroupKind::kEp, 9), (std::vector<int>{8, 9, 10, 11, 12, 13, 14, 15}));
  EXPECT_EQ(pl.group_size(stepcast::GroupKind::kEdp), 1);
  // Unfolded (etp = tp) ep 8 is not carved out of dp 4; folded with pp not outermost is refused.
  pl.etp = 2;
  EXPECT_EQ(stepcast::expert_layout_error(pl).message,
            "8 does not divide dp x cp (4 x 1): experts are sharded across data-parallel ranks");
  pl.etp = 1;
  pl.order = {0, 1, 3, 2};
  EXPECT_EQ(stepcast::expert_layout_error(pl).message,
            "1 != tp 2 (parallel folding) needs pp outermost in the placement");
}

// An expert-TP group of its own (etp neither 1 nor tp): etp consecutive ranks of the stage,
// the innermost digit of et + etp * (e + ep * ed); unfolded (etp = tp) it is the TP group.
TEST(Placement, ExpertTensorParallelGroupsAreTheInnermostRanksOfTheStage) {
  // tp 2, dp 4, pp 2 (8 ranks per stage), etp 4, ep 2: edp = 2 * 4 / (4 * 2) = 1.
  stepcast::Placement pl = placement(2, 1, 4, 2, 2, {0, 1, 2, 3});
  pl.etp = 4;
  ASSERT_TRUE(pl.folded());
  EXPECT_EQ(stepcast::expert_layout_error(pl).field, "");
  auto members = [&](stepcast::GroupKind g, int r) { return group_members(pl, g, r); };
  // Rank 13 = stage 1, stage-local 5 = et 1 + 4 * (e 1): ETP {12..15}, EP {9, 13}.
  EXPECT_EQ(members(stepcast::GroupKind::kEtp, 13), (std::vector<int>{12, 13, 14, 15}));
  EXPECT_EQ(members(stepcast::GroupKind::kEtp, 2), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(members(stepcast::GroupKind::kEp, 13), (std::vector<int>{9, 13}));
  EXPECT_EQ(members(stepcast::GroupKind::kEdp, 13), (std::vector<int>{13}));
  // The attention TP group stays {12, 13}.
  EXPECT_EQ(members(stepcast::GroupKind::kTp, 13), (std::vector<int>{12, 13}));
  // tp 1, dp 8, etp 2, ep 4: ETP pairs {0,1}, {2,3}, ...; EP {1, 3, 5, 7} for rank 5.
  stepcast::Placement one = placement(1, 1, 8, 1, 4, {0, 1, 2, 3});
  one.etp = 2;
  EXPECT_EQ(stepcast::expert_layout_error(one).field, "");
  EXPECT_EQ(one.group_root(stepcast::GroupKind::kEtp, 5), 4);
  EXPECT_EQ(one.group_size(stepcast::GroupKind::kEtp), 2);
  EXPECT_EQ(one.group_root(stepcast::GroupKind::kEp, 5), 1);
  EXPECT_EQ(one.group_stride(stepcast::GroupKind::kEp), 2);
  // Unfolded (etp = tp = 2, placement dp innermost): the TP group, stride 4.
  stepcast::Placement un = placement(2, 1, 4, 1, 2, {2, 1, 0, 3});
  un.etp = 2;
  ASSERT_FALSE(un.folded());
  for (int r = 0; r < 8; ++r) {
    EXPECT_EQ(un.group_root(stepcast::GroupKind::kEtp, r), un.group_root(stepcast::GroupKind::kTp, r)) << r;
  }
  EXPECT_EQ(un.group_stride(stepcast::GroupKind::kEtp), 4);
}

TEST(Lower, FoldedExpertTensorParallelPairRunsOnTheExpertGroup) {
  // Mixtral (32 MoE layers) on tp 2 (SP), pp 2, dp 4, ep 2, etp 4, 8 microbatches per stage:
  // each MoE block's all-gather before the experts and reduce-scatter after, forward and
  // backward, on the expert-TP group (etp.ag / etp.rs), of T_e k h x 2 bytes, T_e = 4096 x
  // 4 / 2 = 8192: 8192 x 2 x 4096 x 2 = 134,217,728. The attention block keeps its tp pair
  // on T h x 2 / ... = 4096 x 4096 x 2 bytes.
  auto r = stepcast::parse_scenario(
      R"({"model":"mixtral-8x7b","cluster":{"preset":"dgx-h100","nodes":2},"plan":{"tp":2,"pp":2,"dp":4,"ep":2,)"
      R"("etp":4,"sequence_parallel":true,"global_batch":32},"workload":{"seq_len":4096}})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  const stepcast::Program prog = stepcast::lower(r->model, r->cluster, r->plan, r->workload);
  for (const stepcast::RoleTemplate& role : prog.roles) {
    int etp = 0, tp = 0;
    for (const stepcast::Op& op : role.ops) {
      if (op.kind != stepcast::OpKind::kCollective) continue;
      if (op.group == stepcast::GroupKind::kEtp) {
        ++etp;
        EXPECT_DOUBLE_EQ(op.bytes, 134'217'728.0);
        EXPECT_EQ(op.stream, stepcast::Stream::kTp);
        EXPECT_EQ(op.comm, stepcast::CommClass::kTp);
        EXPECT_EQ(prog.names[op.name].rfind("etp.", 0), 0u) << prog.names[op.name];
      } else if (op.group == stepcast::GroupKind::kTp && op.layer >= 0) {
        ++tp;
        EXPECT_DOUBLE_EQ(op.bytes, 4096.0 * 4096 * 2) << prog.names[op.name];
      } else if (op.group == stepcast::GroupKind::kTp) {
        // Once per step: the norms' and the routers' fp32 gradients over TP, 16 layers x
        // (2 x 4096 + 8 x 4096) x 4 B = 2,621,440 B; the last stage's final norm 16,384 B more.
        EXPECT_DOUBLE_EQ(op.bytes, role.stage == 1 ? 2'637'824.0 : 2'621'440.0) << prog.names[op.name];
      }
    }
    EXPECT_EQ(etp, 16 * 8 * 4) << "stage " << role.stage;  // 16 layers x 8 microbatches x 4
    EXPECT_EQ(tp, 16 * 8 * 4) << "stage " << role.stage;   // the attention block's
  }
}

TEST(Lower, AllGatherDispatcherRunsOnTheExpertTpTimesEpBlock) {
  // Mixtral (32 MoE layers) on tp 2 (SP), pp 2, dp 4, ep 4, 8 microbatches per stage: per MoE
  // block forward the tokens', routing map's and probabilities' all-gathers and the output's
  // reduce-scatter, backward the output gradient's all-gather and two reduce-scatters, on
  // the block of tp x ep = 8 consecutive ranks; no all-to-all, no expert-TP pair.
  auto r = stepcast::parse_scenario(
      R"({"model":"mixtral-8x7b","cluster":{"preset":"dgx-h100","nodes":2},"plan":{"tp":2,"pp":2,"dp":4,"ep":4,)"
      R"("sequence_parallel":true,"global_batch":32,"moe_dispatcher":"allgather"},"workload":{"seq_len":4096}})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  const stepcast::Program prog = stepcast::lower(r->model, r->cluster, r->plan, r->workload);
  EXPECT_EQ(prog.placement.group_root(stepcast::GroupKind::kEtpEp, 13), 8);
  EXPECT_EQ(prog.placement.group_size(stepcast::GroupKind::kEtpEp), 8);
  for (const stepcast::RoleTemplate& role : prog.roles) {
    int ag = 0, rs = 0, a2a = 0;
    for (const stepcast::Op& op : role.ops) {
      if (op.kind != stepcast::OpKind::kCollective) continue;
      a2a += op.coll == stepcast::CollKind::kAllToAll;
      if (op.group != stepcast::GroupKind::kEtpEp) continue;
      EXPECT_EQ(op.stream, stepcast::Stream::kEp);
      EXPECT_EQ(op.comm, stepcast::CommClass::kEp);
      ag += op.coll == stepcast::CollKind::kAllGather;
      rs += op.coll == stepcast::CollKind::kReduceScatter;
    }
    EXPECT_EQ(a2a, 0);
    EXPECT_EQ(ag, 16 * 8 * (3 + 1)) << "stage " << role.stage;  // 16 layers x 8 microbatches
    EXPECT_EQ(rs, 16 * 8 * (1 + 2)) << "stage " << role.stage;
  }
  // Megatron-Core's rules and stepcast's block, each named.
  auto err = [](const std::string& plan) {
    auto s = stepcast::parse_scenario(R"({"model":"mixtral-8x7b","cluster":{"preset":"dgx-h100","nodes":2},"plan":)" +
                                      plan + "}");
    return s.ok() ? std::string("(ok)") : s.error().message;
  };
  EXPECT_EQ(err(R"({"dp":16,"ep":8,"moe_dispatcher":"allgather","moe_shared_expert_overlap":true})"),
            "plan.moe_shared_expert_overlap: needs moe_dispatcher \"alltoall\" or \"deepep\" (Megatron-Core: alltoall "
            "or flex)");
  EXPECT_EQ(err(R"({"dp":16,"ep":8,"moe_dispatcher":"allgather","moe_a2a_overlap":true})"),
            "plan.moe_a2a_overlap: needs moe_dispatcher \"alltoall\" or \"deepep\" (Megatron-Core: alltoall or flex)");
  EXPECT_EQ(err(R"({"tp":2,"dp":8,"ep":4,"moe_dispatcher":"allgather"})"),
            "plan.moe_dispatcher: \"allgather\" with tp > 1 needs sequence_parallel (Megatron-Core requires it for MoE "
            "with tensor parallelism)");
  EXPECT_EQ(
      err(R"({"tp":2,"dp":8,"ep":4,"sequence_parallel":true,"moe_dispatcher":"allgather","placement":"cp-dp-tp-pp"})"),
      "plan.moe_dispatcher: \"allgather\" needs tp innermost and pp outermost in the placement (its expert-TP x "
      "EP group is a block of consecutive ranks)");
  EXPECT_EQ(err(R"({"dp":16,"moe_dispatcher":"gather"})").rfind("plan.moe_dispatcher: ", 0), 0u);
  auto dense = stepcast::parse_scenario(
      R"({"model":"llama3-8b","cluster":"dgx-h100","plan":{"dp":8,"moe_dispatcher":"allgather"}})");
  ASSERT_FALSE(dense.ok());
  EXPECT_EQ(dense.error().message,
            "plan.moe_dispatcher: \"allgather\" needs a mixture-of-experts model (llama3-8b has no moe)");
  // DeepEP: an MoE model and expert-TP 1; the overlaps Megatron-Core runs with flex are kept.
  EXPECT_EQ(err(R"({"tp":2,"dp":8,"ep":4,"etp":2,"sequence_parallel":true,"moe_dispatcher":"deepep"})"),
            "plan.moe_dispatcher: \"deepep\" needs etp 1 (got 2): stepcast prices DeepEP's expert-parallel exchange "
            "alone");
  EXPECT_EQ(err(R"({"dp":16,"ep":8,"moe_dispatcher":"deepep","moe_shared_expert_overlap":true})"), "(ok)");
  auto dense_deepep = stepcast::parse_scenario(
      R"({"model":"llama3-8b","cluster":"dgx-h100","plan":{"dp":8,"moe_dispatcher":"deepep"}})");
  ASSERT_FALSE(dense_deepep.ok());
  EXPECT_EQ(dense_deepep.error().message,
            "plan.moe_dispatcher: \"deepep\" needs a mixture-of-experts model (llama3-8b has no moe)");
}

TEST(Placement, LoaderAcceptsFoldedExpertLayoutsAsMegatronCoreStatesThem) {
  // ep 8 > dp 4 on one node (tp 2): only folded, with etp 1 (as Qwen3-235B-A22B's H100
  // recipe runs tp 2, ep 32 over dp 16).
  const std::string head = R"({"model":"mixtral-8x7b","cluster":"dgx-h100","plan":{"tp":2,"dp":4,"ep":8,)";
  auto r = stepcast::parse_scenario(head + R"("etp":1,"sequence_parallel":true}})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->plan.expert_tp(), 1);
  EXPECT_EQ(r->plan.edp(), 1);
  r = stepcast::parse_scenario(head + R"("sequence_parallel":true}})");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message,
            "plan.ep: 8 does not divide dp x cp (4 x 1): experts are sharded across data-parallel ranks");
  r = stepcast::parse_scenario(head + R"("etp":1}})");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message,
            "plan.etp: 1 != tp 2 needs sequence_parallel (Megatron-Core requires it for MoE with tensor parallelism)");
  r = stepcast::parse_scenario(head + R"("etp":4,"sequence_parallel":true}})");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message,
            "plan.ep: etp x ep = 4 x 8 does not divide tp x cp x dp = 8 (the ranks of a pipeline stage)");
  // Any expert-TP width whose etp x ep divides the stage's ranks: wider than tp (4 > 2) and,
  // with tp 1, an expert-TP group of its own.
  const std::string ep2 = R"({"model":"mixtral-8x7b","cluster":"dgx-h100","plan":{"tp":2,"dp":4,"ep":2,)";
  r = stepcast::parse_scenario(ep2 + R"("etp":4,"sequence_parallel":true}})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->plan.expert_tp(), 4);
  EXPECT_EQ(r->plan.edp(), 1);
  r = stepcast::parse_scenario(R"({"model":"mixtral-8x7b","cluster":"dgx-h100","plan":{"dp":8,"ep":4,"etp":2}})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->plan.edp(), 1);
  r = stepcast::parse_scenario(head + R"("etp":1,"sequence_parallel":true,"placement":"tp-pp-cp-dp"}})");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "plan.etp: 1 != tp 2 (parallel folding) needs pp outermost in the placement");
  r = stepcast::parse_scenario(
      R"({"model":"llama3-8b","cluster":"dgx-h100","plan":{"tp":2,"dp":4,"etp":1,"sequence_parallel":true}})");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "plan.etp: 1 needs a mixture-of-experts model (llama3-8b has no moe)");
}

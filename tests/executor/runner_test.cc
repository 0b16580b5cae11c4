// The runner on the in-memory fake communicator (threads) and the cpu device: every op of
// the Program runs, collectives carry exact data, corruption is caught, and the measured
// timeline has the simulator's shape.
#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>

#include "stepcast/executor/cpu_device.h"
#include "stepcast/executor/fake_comm.h"
#include "stepcast/executor/launch.h"
#include "stepcast/executor/op_work.h"
#include "stepcast/executor/runner.h"
#include "stepcast/executor/scale_down.h"
#include "stepcast/models/layer_cost.h"
#include "stepcast/models/lower.h"
#include "stepcast/models/params.h"
#include "stepcast/models/presets.h"
#include "stepcast/models/scenario.h"
#include "stepcast/models/stack.h"
#include "stepcast/models/zero3_fetch.h"

namespace stepcast::exec {
namespace {

Scenario load(const std::string& name) {
  auto s = load_scenario_file(std::string(STEPCAST_SOURCE_DIR) + "/scenarios/execute/" + name);
  if (!s.ok()) throw std::runtime_error(s.error().message);
  return *s;
}

ExecContext context(const Scenario& s) { return ExecContext{s.model, s.cluster, s.plan, s.workload}; }

// Wraps a communicator and adds 1 to element 0 of every `every`-th collective result.
class Corrupting final : public Communicator {
 public:
  Corrupting(std::unique_ptr<Communicator> inner, int every) : in_(std::move(inner)), every_(every) {}
  int rank() const override { return in_->rank(); }
  int world() const override { return in_->world(); }
  std::string describe() const override { return "corrupting " + in_->describe(); }
  CommGroup create_group(int color) override { return in_->create_group(color); }
  EventPtr collective(Device& d, Stream s, CollKind k, const CommGroup& g, const Buffer& send,
                      const Buffer& recv) override {
    EventPtr e = in_->collective(d, s, k, g, send, recv);
    if (++n_ % every_ == 0) {
      e->wait();
      static_cast<float*>(recv.data)[0] += 1.0f;
    }
    return e;
  }
  EventPtr send(Device& d, Stream s, int p, std::uint32_t t, const Buffer& b) override { return in_->send(d, s, p, t, b); }
  EventPtr recv(Device& d, Stream s, int p, std::uint32_t t, const Buffer& b) override { return in_->recv(d, s, p, t, b); }
  void barrier() override { in_->barrier(); }
  std::vector<std::string> gather(const std::string& m) override { return in_->gather(m); }
  double max_all(double x) override { return in_->max_all(x); }

 private:
  std::unique_ptr<Communicator> in_;
  int every_;
  int n_ = 0;
};

std::vector<RankResult> run_all(const Scenario& s, const RunOptions& o, int corrupt_every = 0) {
  const Program prog = lower(s.model, s.cluster, s.plan, s.workload);
  const ExecContext ctx = context(s);
  const int n = prog.placement.world();
  FakeWorld world(n);
  std::vector<RankResult> out(static_cast<std::size_t>(n));
  std::vector<std::thread> threads;
  std::vector<std::unique_ptr<Communicator>> comms;
  for (int r = 0; r < n; ++r) {
    std::unique_ptr<Communicator> c = world.communicator(r);
    if (corrupt_every > 0) c = std::make_unique<Corrupting>(std::move(c), corrupt_every);
    comms.push_back(std::move(c));
  }
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      auto dev = make_cpu_device();
      out[static_cast<std::size_t>(r)] = run_rank(prog, ctx, *dev, *comms[static_cast<std::size_t>(r)], o);
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

void expect_every_op_measured(const Scenario& s, const std::vector<RankResult>& res, int steps) {
  const Program prog = lower(s.model, s.cluster, s.plan, s.workload);
  for (const RankResult& r : res) {
    const RoleTemplate& role = prog.roles[static_cast<std::size_t>(r.timeline.stage)];
    for (int step = 0; step < steps; ++step) {
      std::set<std::uint32_t> seen;
      for (const Span& sp : r.timeline.spans) {
        if (sp.step == step) seen.insert(sp.op);
        EXPECT_LE(sp.post, sp.end);
      }
      EXPECT_EQ(seen.size(), role.ops.size()) << "rank " << r.timeline.rank << " step " << step;
    }
    EXPECT_EQ(r.step_s.size(), static_cast<std::size_t>(steps));
    EXPECT_EQ(r.wrong_elements, 0) << (r.errors.empty() ? "" : r.errors[0]);
  }
}

// One step of `s` on the fake world, every op measured and every element verified.
std::vector<RankResult> run_one_step(const Scenario& s) {
  RunOptions o;
  o.warmup = 0;
  o.steps = 1;
  auto res = run_all(s, o);
  expect_every_op_measured(s, res, 1);
  return res;
}

TEST(Runner, Tp2Dp2RunsEveryOpAndCollectivesVerify) {
  const Scenario s = load("cpu-tp2dp2.json");
  RunOptions o;
  o.warmup = 0;
  o.steps = 2;
  const auto res = run_all(s, o);
  ASSERT_EQ(res.size(), 4u);
  expect_every_op_measured(s, res, 2);
  // Each rank all-reduces activations in its TP pair and gradients in its DP pair: data
  // were checked element by element.
  for (const RankResult& r : res) EXPECT_GT(r.verified_elements, 100'000);
}

TEST(Runner, Pp2OneFOneBMatchesSendsWithRecvs) {
  const Scenario s = load("cpu-pp2-1f1b.json");
  RunOptions o;
  o.warmup = 1;
  o.steps = 1;
  const auto res = run_all(s, o);
  expect_every_op_measured(s, res, 1);
  // Stage 1 receives 4 activations and stage 0 receives 4 gradients of T x h f32 each:
  // 4 x 256 x 256 elements at least (plus the DP all-reduces).
  for (const RankResult& r : res) EXPECT_GE(r.verified_elements, 4 * 256 * 256);
}

// One step of the 2-stage, 2-chunk interleaved `s` (cpu-pp2-1f1b.json's model) after
// `warmup` steps, every op measured. Chunks 0..3, stage 0 holding 0 and 2, stage 1 holding 1
// and 3: each stage receives 3 boundary transfers per microbatch (stage 0: activations into
// chunk 2, gradients into chunks 0 and 2) of T x h = 256 x 256 f32, all verified.
void expect_interleaved_transfers_verify(const Scenario& s, int warmup, int microbatches) {
  RunOptions o;
  o.warmup = warmup;
  o.steps = 1;
  const auto res = run_all(s, o);
  expect_every_op_measured(s, res, 1);
  for (const RankResult& r : res) EXPECT_GE(r.verified_elements, 3 * microbatches * 256 * 256);
}

// The interleaved schedule posts each receive a step ahead on its own stream
// (Plan::overlap_p2p_comm): the runner executes the same Program, every transfer verifies.
TEST(Runner, InterleavedLookAheadReceivesVerify) {
  Scenario s = load("cpu-pp2-1f1b.json");
  s.plan.schedule = Schedule::kInterleaved;
  s.plan.virtual_stages = 2;
  ASSERT_TRUE(s.plan.overlap_p2p_comm);
  const Program prog = lower(s.model, s.cluster, s.plan, s.workload);
  int ahead = 0;
  for (const RoleTemplate& role : prog.roles) {
    for (const Op& op : role.ops) ahead += op.kind == OpKind::kRecv && op.stream == Stream::kPpRecv;
  }
  ASSERT_GT(ahead, 0);
  expect_interleaved_transfers_verify(s, 1, 4);
}

// Microbatches that pp does not divide, in one of Megatron-Core's microbatch groups
// (plan.microbatch_group_size_per_vp_stage): 5 microbatches per rank in groups of 3 run the
// schedule table's order (lower.h interleaved_table) without a deadlock, every transfer
// verified (3 boundary transfers per microbatch and stage, for 5 microbatches).
TEST(Runner, InterleavedMicrobatchGroupsRunAndVerify) {
  Scenario s = load("cpu-pp2-1f1b.json");
  s.plan.schedule = Schedule::kInterleaved;
  s.plan.virtual_stages = 2;
  s.plan.global_batch = 10;
  s.plan.microbatch_group = 3;
  ASSERT_TRUE(layout_errors(s.model, s.cluster, s.plan, s.workload).empty());
  expect_interleaved_transfers_verify(s, 0, 5);
}

TEST(Runner, ContextParallelRingExchangesVerify) {
  // The TP2 x DP2 model as CP2 x DP2: each attention block's ring op runs cp - 1 = 1
  // exchange with the CP neighbour, whose seeded data arrive exactly.
  Scenario s = load("cpu-tp2dp2.json");
  s.plan.tp = 1;
  s.plan.cp = 2;
  RunOptions o;
  o.warmup = 0;
  o.steps = 1;
  const auto res = run_all(s, o);
  expect_every_op_measured(s, res, 1);
  const Program prog = lower(s.model, s.cluster, s.plan, s.workload);
  int rings = 0;
  for (const Op& op : prog.roles[0].ops) rings += op.kind == OpKind::kCompute && op.stream == Stream::kCp;
  EXPECT_EQ(rings, 4 * 4 * 2);  // 4 layers x 4 microbatches x (forward, backward)
}

// The TP2 x DP2 model with MoE layers (8 experts, top-2) and ep 4 > dp 2: expert
// parallelism folded over all 4 ranks of the stage (etp 1), as Megatron-Core's parallel
// folding runs it.
Scenario folded_moe() {
  Scenario s = load("cpu-tp2dp2.json");
  MoeSpec moe;
  moe.num_experts = 8;
  moe.top_k = 2;
  moe.expert_ffn_hidden_size = 384;
  s.model.moe = moe;
  s.plan.ep = 4;
  s.plan.etp = 1;
  s.plan.sequence_parallel = true;
  return s;
}

// Runs `s` for one step on the fake backend after checking that stage 0's collectives on
// group `g` number `expected` and that every rank of the 4-rank stage is in the group of rank 0.
std::vector<RankResult> run_checking_group(const Scenario& s, GroupKind g, int expected) {
  EXPECT_TRUE(layout_errors(s.model, s.cluster, s.plan, s.workload).empty());
  const Program prog = lower(s.model, s.cluster, s.plan, s.workload);
  for (int r = 0; r < 4; ++r) EXPECT_EQ(prog.placement.group_root(g, r), 0);
  int n = 0;
  for (const Op& op : prog.roles[0].ops) n += op.kind == OpKind::kCollective && op.group == g;
  EXPECT_EQ(n, expected);
  RunOptions o;
  o.warmup = 0;
  o.steps = 1;
  auto res = run_all(s, o);
  expect_every_op_measured(s, res, 1);
  return res;
}

TEST(Runner, FoldedExpertAllToAllsSpanTensorParallelRanksAndVerify) {
  // Each MoE layer's dispatch and combine all-to-alls (forward and backward) run in the one
  // EP group {0, 1, 2, 3}, seeded data verified element by element.
  // 4 layers x 4 microbatches x (dispatch, combine) x (forward, backward)
  const auto res = run_checking_group(folded_moe(), GroupKind::kEp, 4 * 4 * 4);
  // Per rank the all-to-alls alone carry 64 x (T/tp) k h = 64 x 128 x 2 x 256 f32 elements.
  for (const RankResult& r : res) EXPECT_GE(r.verified_elements, 64 * 128 * 2 * 256);
}

TEST(Runner, ExpertTensorParallelGroupOfItsOwnGathersAndVerifies) {
  // The same model with each expert split 4 ways over the whole stage (etp 4 > tp 2, ep 1):
  // each MoE block's gather of the dispatched rows and its reduce-scatter, forward and
  // backward, run in the one expert-TP group {0, 1, 2, 3}, seeded data verified.
  Scenario s = folded_moe();
  s.plan.ep = 1;
  s.plan.etp = 4;
  // 4 layers x 4 microbatches x (gather, scatter) x (forward, backward)
  const auto res = run_checking_group(s, GroupKind::kEtp, 4 * 4 * 4);
  // T_e k h = (256 x 4 / 2) x 2 x 256 16-bit elements per collective, 131,072 f32 words: each
  // gather checks all of them, each reduce-scatter its quarter, 32 of each.
  for (const RankResult& r : res) {
    EXPECT_EQ(r.wrong_elements, 0);
    EXPECT_GE(r.verified_elements, 32 * (131'072 + 131'072 / 4));
  }
}

TEST(Runner, AllGatherDispatcherGathersOverTheExpertBlockAndVerifies) {
  // The same model with Megatron-Core's all-gather dispatcher at ep 2 (etp = tp = 2): each
  // MoE block gathers its tokens, routing map and probabilities over the 4 ranks of the
  // tp x ep block and reduce-scatters its output (backward: one gather, two reduce-scatters),
  // every delivered element checked.
  Scenario s = folded_moe();
  s.plan.ep = 2;
  s.plan.etp = 0;
  s.plan.moe_dispatcher = MoeDispatcher::kAllGather;
  // 4 layers x 4 microbatches x (4 forward + 3 backward)
  const auto res = run_checking_group(s, GroupKind::kEtpEp, 4 * 4 * 7);
  // By hand, f32 words each rank checks per layer and microbatch: the T/tp = 128 tokens of 4
  // ranks gathered, 512 x 256 x 2 bytes = 65,536 words (forward tokens, backward output
  // gradient), reduce-scattered a quarter each (output, tokens gradient: 16,384); the routing
  // map 512 x 8 bytes = 1,024 words gathered, the probabilities 512 x 8 x 4 = 4,096 gathered
  // and their gradient's quarter, 1,024. The other collectives add to it.
  const std::int64_t dispatcher = 2 * 65'536 + 2 * 16'384 + 1'024 + 4'096 + 1'024;
  for (const RankResult& r : res) {
    EXPECT_EQ(r.wrong_elements, 0);
    EXPECT_GE(r.verified_elements, 4 * 4 * dispatcher);
  }
}

TEST(Runner, DeepEpDispatcherRunsItsDeduplicatedAllToAllsAndVerifies) {
  // With DeepEP's dispatcher the program's all-to-alls carry the rows each rank receives,
  // one per token and destination rank: a token's 2 of 8 experts miss one of the 4 ranks
  // (2 experts each) with probability C(6,2)/C(8,2) = 15/28, so it reaches 4 x 13/28 = 13/7
  // ranks, not 2. The executor runs them as all-to-alls of that size (DeepEP itself is not
  // linked): 128 x 13/7 x 256 x 2 bytes = 30,427 f32 words, 7,606 per peer, 30,424 checked,
  // against 128 x 2 x 256 x 2 / 4 = 32,768 for NCCL's; 4 layers x 4 microbatches x 4 of them.
  Scenario s = folded_moe();
  s.plan.moe_dispatcher = MoeDispatcher::kDeepEp;
  const auto res = run_checking_group(s, GroupKind::kEp, 4 * 4 * 4);
  Scenario nccl = s;
  nccl.plan.moe_dispatcher = MoeDispatcher::kAllToAll;
  RunOptions o;
  o.warmup = 0;
  o.steps = 1;
  const auto base = run_all(nccl, o);
  ASSERT_EQ(res.size(), base.size());
  for (std::size_t r = 0; r < res.size(); ++r) {
    EXPECT_EQ(res[r].wrong_elements, 0);
    EXPECT_EQ(base[r].verified_elements - res[r].verified_elements, 64 * (32'768 - 30'424));
  }
}

TEST(Runner, RecomputedMoeBlocksRunTheirAllToAllsAgainAndVerify) {
  // As above, with selective recomputation of the MoE blocks (recompute_modules ["moe"]):
  // before each layer's backward the executor runs the block's forward again, its dispatch
  // and combine all-to-alls included: 6 per layer and microbatch instead of 4, each verified.
  Scenario s = folded_moe();
  s.plan.recompute = Recompute::kSelective;
  s.plan.recompute_modules = module_bit(RecomputeModule::kMoe);
  ASSERT_TRUE(layout_errors(s.model, s.cluster, s.plan, s.workload).empty());
  const Program prog = lower(s.model, s.cluster, s.plan, s.workload);
  int a2a = 0;
  for (const Op& op : prog.roles[0].ops) a2a += op.kind == OpKind::kCollective && op.group == GroupKind::kEp;
  EXPECT_EQ(a2a, 4 * 4 * 6);  // 4 layers x 4 microbatches x (dispatch, combine) x (forward, recompute, backward)
  RunOptions o;
  o.warmup = 0;
  o.steps = 1;
  const auto res = run_all(s, o);
  expect_every_op_measured(s, res, 1);
  // Against no recomputation, each rank verifies exactly the 32 more all-to-alls: (T/tp) k h
  // = 128 x 2 x 256 16-bit elements each, carried as 128 x 2 x 256 x 2 / 4 f32 words.
  Scenario none = s;
  none.plan.recompute = Recompute::kNone;
  const auto base = run_all(none, o);
  ASSERT_EQ(res.size(), base.size());
  for (std::size_t r = 0; r < res.size(); ++r) {
    EXPECT_EQ(res[r].wrong_elements, 0);
    EXPECT_EQ(res[r].verified_elements - base[r].verified_elements, 32 * (128 * 2 * 256 * 2 / 4));
  }
}

TEST(Runner, PartialFullRecomputationRerunsTheFirstLayersOnlyAndVerifies) {
  // recompute "full" with recompute_num_layers 1 (Megatron-Core's "block"): of the stage's 4
  // layers only the first re-runs its forward, its TP all-gather and reduce-scatter and its
  // all-to-alls included, before its backward: 4 all-to-alls per layer and microbatch, 6 on
  // layer 0. The layers' collectives are alike, so each rank verifies, beyond no
  // recomputation, exactly a quarter of what full recomputation of all 4 layers adds, and at
  // least layer 0's 8 more all-to-alls (2 in each of 4 microbatches, sized as above).
  Scenario s = folded_moe();
  s.plan.recompute = Recompute::kFull;
  s.plan.recompute_num_layers = 1;
  ASSERT_TRUE(layout_errors(s.model, s.cluster, s.plan, s.workload).empty());
  ASSERT_EQ(s.plan.pp, 1);
  const Program prog = lower(s.model, s.cluster, s.plan, s.workload);
  int a2a = 0;
  for (const Op& op : prog.roles[0].ops) a2a += op.kind == OpKind::kCollective && op.group == GroupKind::kEp;
  EXPECT_EQ(a2a, 4 * 4 * 4 + 4 * 2);
  RunOptions o;
  o.warmup = 0;
  o.steps = 1;
  const auto part = run_all(s, o);
  expect_every_op_measured(s, part, 1);
  Scenario none = s, full = s;
  none.plan.recompute = Recompute::kNone;
  none.plan.recompute_num_layers = full.plan.recompute_num_layers = 0;
  const auto base = run_all(none, o), all = run_all(full, o);
  ASSERT_EQ(part.size(), base.size());
  ASSERT_EQ(all.size(), base.size());
  for (std::size_t r = 0; r < part.size(); ++r) {
    EXPECT_EQ(part[r].wrong_elements, 0);
    const std::int64_t extra = part[r].verified_elements - base[r].verified_elements;
    EXPECT_EQ(all[r].verified_elements - base[r].verified_elements, 4 * extra);
    EXPECT_GE(extra, 8 * (128 * 2 * 256 * 2 / 4));
  }
}

TEST(Runner, UniformRecomputationRerunsEachGroupBeforeItsBackwardAndVerifies) {
  // recompute "full" with recompute_method "uniform" in groups of 2: every one of the stage's
  // 4 layers re-runs its forward once, so each rank verifies exactly what full recomputation
  // (groups of 1) does, its collectives in the new order. In the program, layers 3 and 2
  // re-run their forwards (2 then 3) before layer 3's backward, and the group's first layer
  // alone keeps an input: half the inputs of groups of 1.
  Scenario s = folded_moe();
  s.plan.recompute = Recompute::kFull;
  s.plan.recompute_method = RecomputeMethod::kUniform;
  s.plan.recompute_num_layers = 2;
  ASSERT_TRUE(layout_errors(s.model, s.cluster, s.plan, s.workload).empty());
  ASSERT_EQ(s.plan.pp, 1);
  const Program prog = lower(s.model, s.cluster, s.plan, s.workload);
  std::vector<std::string> order;  // the first microbatch's recompute buffers and backward-start ops
  for (const Op& op : prog.roles[0].ops) {
    const std::string& name = prog.names[op.name];
    if (name.rfind("alloc recompute mb0 ", 0) == 0 || name.rfind("free act mb0 ", 0) == 0) order.push_back(name);
  }
  const std::vector<std::string> want = {"alloc recompute mb0 L2", "alloc recompute mb0 L3", "free act mb0 L3",
                                         "free act mb0 L2",        "alloc recompute mb0 L0", "alloc recompute mb0 L1",
                                         "free act mb0 L1",        "free act mb0 L0"};
  EXPECT_EQ(order, want);
  RunOptions o;
  o.warmup = 0;
  o.steps = 1;
  const auto grouped = run_all(s, o);
  expect_every_op_measured(s, grouped, 1);
  Scenario alone = s;
  alone.plan.recompute_num_layers = 1;
  const auto each = run_all(alone, o);
  ASSERT_EQ(grouped.size(), each.size());
  for (std::size_t r = 0; r < grouped.size(); ++r) {
    EXPECT_EQ(grouped[r].wrong_elements, 0);
    EXPECT_EQ(grouped[r].verified_elements, each[r].verified_elements);
  }
}

TEST(Runner, MergedStepsRunTheirOverlappedAllToAllsAndVerify) {
  // With Megatron-Core's all-to-all overlap (plan.moe_a2a_overlap) the program interleaves a
  // forward and a backward chunk layer by layer in its merged steps, each all-to-all on the EP
  // stream beside the other pass's block (docs/model-reference.md 5.8). The executor runs the
  // same all-to-alls, in the new order on every member of the EP group: all measured, every
  // element verified, as many as without the overlap.
  Scenario s = folded_moe();
  s.plan.moe_a2a_overlap = true;
  ASSERT_TRUE(layout_errors(s.model, s.cluster, s.plan, s.workload).empty());
  const Program prog = lower(s.model, s.cluster, s.plan, s.workload);
  int a2a = 0, overlapped = 0;
  for (const Op& op : prog.roles[0].ops) {
    if (op.kind != OpKind::kCollective || op.group != GroupKind::kEp) continue;
    ++a2a;
    overlapped += prog.names[op.name].find("(overlapped)") != std::string::npos;
  }
  EXPECT_EQ(a2a, 4 * 4 * 4);
  EXPECT_EQ(overlapped, 3 * 4 * 4);  // m = 4: one forward alone, three merged steps, one backward
  RunOptions o;
  o.warmup = 0;
  o.steps = 1;
  const auto res = run_all(s, o);
  expect_every_op_measured(s, res, 1);
  Scenario plain = s;
  plain.plan.moe_a2a_overlap = false;
  const auto base = run_all(plain, o);
  ASSERT_EQ(res.size(), base.size());
  for (std::size_t r = 0; r < res.size(); ++r) {
    EXPECT_EQ(res[r].wrong_elements, 0);
    EXPECT_EQ(res[r].verified_elements, base[r].verified_elements);
  }
}

TEST(Runner, DeepSpeed2021FetchPerModuleRunsItsGathersAndVerifies) {
  // ZeRO-3 as DeepSpeed's 2021 coordinator ran it (docs/model-reference.md 5.9): each
  // module's weights all-gathered on demand or prefetched, a device synchronisation at each
  // fetch, each weight's gradient reduce-scattered after its last backward use. The executor
  // runs the program's gathers and reduce-scatters over the 4 data-parallel ranks, all
  // measured and verified: as many as the coordinator's decisions, per microbatch.
  Scenario s = load("cpu-tp2dp2.json");
  s.plan.tp = 1;
  s.plan.dp = 4;
  s.plan.zero = 3;
  s.plan.stack = Stack::kDeepspeedZero2021;
  ASSERT_TRUE(layout_errors(s.model, s.cluster, s.plan, s.workload).empty());
  ASSERT_TRUE(zero3_module_fetch(s.model, s.plan));
  const Program prog = lower(s.model, s.cluster, s.plan, s.workload);
  const LayerCost lc = layer_cost(s.model, s.cluster, s.plan, s.workload.seq_len, false);
  const LogitsCost lg = logits_cost(s.model, s.cluster, s.plan, s.workload.seq_len);
  const Zero3Trace t = zero3_trace(s.model, s.plan, lc, lg.fwd_s, lg.bwd_s);
  const Zero3Hooks h = zero3_coordinate(t, zero3_policy(stack_profile(s.plan.stack)));
  int ag = 0, rs = 0;
  for (const Op& op : prog.roles[0].ops) {
    if (op.kind != OpKind::kCollective || op.group != GroupKind::kDp) continue;
    ag += op.coll == CollKind::kAllGather;
    rs += op.coll == CollKind::kReduceScatter;
  }
  const int m = static_cast<int>(s.plan.global_batch / (s.plan.microbatch * s.plan.dp));
  EXPECT_EQ(ag, m * static_cast<int>(h.params.size()));
  EXPECT_EQ(rs, m * static_cast<int>(t.numel.size()));
  for (const RankResult& r : run_one_step(s)) {
    EXPECT_EQ(r.wrong_elements, 0);
    EXPECT_GT(r.verified_elements, 0);
  }
}

TEST(Runner, OffloadedLayersCopyTheirBytesOverTheHostLink) {
  // Activation and weight offload (docs/model-reference.md "Offload"): each offloaded layer's
  // transfers are copies on the host link's two directions, which the executor runs as such
  // (a copy between device and host memory of the op's bytes), each measured.
  Scenario s = load("cpu-tp2dp2.json");
  s.plan.offload_activations = 0.5;
  s.plan.offload_weights = 0.5;
  ASSERT_TRUE(layout_errors(s.model, s.cluster, s.plan, s.workload).empty());
  const Program prog = lower(s.model, s.cluster, s.plan, s.workload);
  std::set<std::uint32_t> copies;
  double out_bytes = 0, in_bytes = 0;
  const RoleTemplate& role = prog.roles[0];
  for (std::uint32_t i = 0; i < role.ops.size(); ++i) {
    const Op& op = role.ops[i];
    if (op.stream != Stream::kHostOut && op.stream != Stream::kHostIn) continue;
    copies.insert(i);
    (op.stream == Stream::kHostOut ? out_bytes : in_bytes) += op.bytes;
  }
  // 2 of the 4 layers offloaded both ways, m = 8 / (1 x 2) = 4 microbatches: per microbatch
  // 2 activation copies out; 2 weight copies in the forward, 2 + 2 in the backward.
  ASSERT_EQ(copies.size(), 4u * (2 + 2 + 4));
  EXPECT_GT(out_bytes, 0);
  EXPECT_GT(in_bytes, out_bytes);
  for (const RankResult& r : run_one_step(s)) {
    int measured = 0;
    for (const Span& sp : r.timeline.spans) measured += copies.count(sp.op) > 0 && sp.end > sp.begin;
    EXPECT_EQ(measured, static_cast<int>(copies.size())) << "rank " << r.timeline.rank;
  }
}

TEST(Runner, OptimizerOffloadRunsTheHostStepBesideItsCopies) {
  // Optimizer offload (layer_cost.h OptimizerStep): after the GPU's share, the gradients go
  // down and the 16-bit weights up the host link while the host runs Adam over its share of
  // the parameters; the executor runs all three (host_optimizer.h) and measures them.
  Scenario s = load("cpu-tp2dp2.json");
  s.plan.offload_optimizer = 0.5;
  ASSERT_TRUE(layout_errors(s.model, s.cluster, s.plan, s.workload).empty());
  const Program prog = lower(s.model, s.cluster, s.plan, s.workload);
  const RoleTemplate& role = prog.roles[0];
  std::set<std::uint32_t> host_ops;
  double host_elements = 0, down = 0, up = 0;
  for (std::uint32_t i = 0; i < role.ops.size(); ++i) {
    const Op& op = role.ops[i];
    const OpWork w = op_work(context(s), op);
    if (w.kind == OpWork::Kind::kHostStep) {
      host_ops.insert(i);
      host_elements += w.elements;
      EXPECT_TRUE(w.adam);
    } else if (op.layer < 0 && w.kind == OpWork::Kind::kHostCopy) {
      host_ops.insert(i);
      (w.to_host ? down : up) += w.bytes;
    }
  }
  // The optimizer's parameters on a rank (ZeRO 1 over dp 2 unless the scenario says 0),
  // half of them on the host: as many elements, 4 B of gradient down and 2 B up each.
  const RankParams rp = rank_params(s.model, s.plan, 0);
  const double params =
      s.plan.zero >= 1 ? rp.dense / (s.plan.dp * s.plan.cp) + rp.expert / s.plan.edp() : rp.dense + rp.expert;
  ASSERT_EQ(host_ops.size(), 3u);
  EXPECT_NEAR(host_elements, params / 2, 1e-6 * params);
  EXPECT_NEAR(down, params / 2 * s.plan.grad_bytes, 1e-6 * params);
  EXPECT_NEAR(up, params / 2 * 2, 1e-6 * params);
  for (const RankResult& r : run_one_step(s)) {
    int measured = 0;
    for (const Span& sp : r.timeline.spans) measured += host_ops.count(sp.op) > 0 && sp.end > sp.begin;
    EXPECT_EQ(measured, 3) << "rank " << r.timeline.rank;
  }
}

TEST(Runner, TiedEmbeddingGradientsAreExchangedAndVerify) {
  // Tied embeddings on a 2-stage pipeline (layer_cost.h tied_embedding_grad_bytes): the two
  // end stages exchange V h / t x 4 bytes each way after their backward; the executor runs
  // the exchange as a send and a receive between the stage peers, and every received element
  // is the sender's seeded pattern.
  Scenario s = load("cpu-pp2-1f1b.json");
  s.model.tied_embeddings = true;
  const double bytes = static_cast<double>(s.model.vocab_size) * s.model.hidden_size / s.plan.tp * 4;
  ASSERT_DOUBLE_EQ(tied_embedding_grad_bytes(s.model, s.plan), bytes);
  const Program prog = lower(s.model, s.cluster, s.plan, s.workload);
  for (const RoleTemplate& role : prog.roles) {
    int n = 0;
    for (const Op& op : role.ops) n += (op.kind == OpKind::kSend || op.kind == OpKind::kRecv) && op.bytes == bytes;
    EXPECT_EQ(n, 2);
  }
  for (const RankResult& r : run_one_step(s)) {
    EXPECT_EQ(r.wrong_elements, 0) << "rank " << r.timeline.rank;
    EXPECT_GT(r.verified_elements, 0) << "rank " << r.timeline.rank;
  }
}

TEST(Runner, CorruptedCollectivesAreCounted) {
  const Scenario s = load("cpu-tp2dp2.json");
  RunOptions o;
  o.warmup = 0;
  o.steps = 1;
  const auto res = run_all(s, o, /*corrupt_every=*/5);
  std::int64_t wrong = 0;
  for (const RankResult& r : res) wrong += r.wrong_elements;
  EXPECT_GT(wrong, 0);
  bool message = false;
  for (const RankResult& r : res) {
    for (const std::string& e : r.errors) message |= e.find("elements wrong, first at 0: got") != std::string::npos;
  }
  EXPECT_TRUE(message);
}

TEST(Runner, MergedTimelineStartsCollectivesAtTheLastArrival) {
  const Scenario s = load("cpu-tp2dp2.json");
  RunOptions o;
  o.warmup = 0;
  o.steps = 1;
  auto res = run_all(s, o);
  std::vector<RankTimeline> ranks;
  for (auto& r : res) ranks.push_back(r.timeline);
  const Program prog = lower(s.model, s.cluster, s.plan, s.workload);
  const Timeline t = merge_timelines(prog, ranks);
  ASSERT_EQ(t.ranks.size(), 4u);
  ASSERT_EQ(t.step_end.size(), 1u);
  // For each collective the begin is the latest post over its group's members.
  const RankTimeline& r0 = t.ranks[0];
  const RankTimeline& r1 = t.ranks[1];  // rank 0's TP partner
  int checked = 0;
  for (const Span& a : r0.spans) {
    const Op& op = prog.roles[0].ops[a.op];
    if (op.kind != OpKind::kCollective || op.group != GroupKind::kTp) continue;
    for (const Span& b : r1.spans) {
      if (b.op != a.op) continue;
      EXPECT_EQ(a.begin, std::min(a.end, std::max(a.post, b.post)));
      ++checked;
    }
  }
  EXPECT_GT(checked, 10);
  EXPECT_FALSE(chrome_trace_json(prog, t).empty());
}

TEST(Runner, WrongWorldSizeIsAClearError) {
  const Scenario s = load("cpu-tp2dp2.json");
  const Program prog = lower(s.model, s.cluster, s.plan, s.workload);
  FakeWorld world(1);
  auto comm = world.communicator(0);
  auto dev = make_cpu_device();
  try {
    (void)run_rank(prog, context(s), *dev, *comm, RunOptions{});
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "the plan needs 4 ranks (tp 2 x cp 1 x dp 2 x pp 1) but 1 were launched");
  }
}

TEST(ScaleDown, KeepsStructureAndHeadDim) {
  const ModelSpec& m = builtin_presets().models.at("llama3-70b");
  // Llama-3-70B / 8 for tp = 8, pp x v = 4: 64 heads / 8 = 8, 8 KV heads / 8 = 1, head_dim
  // 128 -> hidden 8 x 128 = 1024; FFN 28672 / 8 = 3584; vocabulary 128256 / 8 = 16032;
  // 80 layers / 8 = 10 (>= 4).
  const ModelSpec s = scale_down(m, 8, 4, 8);
  EXPECT_EQ(s.num_attention_heads, 8);
  EXPECT_EQ(s.num_kv_heads, 1);
  EXPECT_EQ(s.head_dim, 128);
  EXPECT_EQ(s.hidden_size, 1024);
  EXPECT_EQ(s.ffn_hidden_size, 3584);
  EXPECT_EQ(s.vocab_size, 16032);
  EXPECT_EQ(s.num_layers, 10);
  // Floors: heads never below tp, layers never below pp x v.
  const ModelSpec t = scale_down(m, 64, 16, 16);
  EXPECT_EQ(t.num_attention_heads, 16);
  EXPECT_EQ(t.num_layers, 16);
  EXPECT_THROW((void)scale_down(m, 0, 1, 1), std::invalid_argument);
}

TEST(OpWork, PartsFollowTheLoweredAnnotations) {
  const Scenario s = load("cpu-tp2dp2.json");
  const Program prog = lower(s.model, s.cluster, s.plan, s.workload);
  const ExecContext ctx = context(s);
  // T = 256 tokens, h = 256: every GEMM part has m = 256, k = 256; an attention op's parts
  // add up to its FLOPs (2mnk rounds n to an integer), its core part to core_fraction.
  int attention_ops = 0;
  for (const Op& op : prog.roles[0].ops) {
    if (op.kind != OpKind::kCompute || op.stream != Stream::kCompute) continue;
    const OpWork w = op_work(ctx, op);
    if (op.cclass == ComputeClass::kAttention) {
      ++attention_ops;
      ASSERT_TRUE(w.has_gemm && w.has_attention);
      EXPECT_EQ(w.gemm.m, 256);
      EXPECT_EQ(w.gemm.k, 256);
      EXPECT_NEAR(w.gemm.flops() + w.attention.flops(), op.flops, 0.02 * op.flops);
      EXPECT_NEAR(w.attention.flops(), op.flops * op.core_fraction, 0.02 * op.flops * op.core_fraction);
      EXPECT_GT(w.bytes, 0);  // norms, RoPE, residuals
    }
  }
  EXPECT_EQ(attention_ops, 4 * 4 * 2);  // 4 layers x 4 microbatches x (forward, backward)
}

TEST(Launch, ReadsMpiSlurmAndTorchrunVariables) {
  auto env = [](std::map<std::string, std::string> m) {
    return [m](const char* k) -> const char* {
      auto it = m.find(k);
      return it == m.end() ? nullptr : it->second.c_str();
    };
  };
  LaunchInfo a = detect_launch(env({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "16"}, {"SLURM_LOCALID", "1"}}));
  EXPECT_EQ(a.rank, 5);
  EXPECT_EQ(a.world, 16);
  EXPECT_EQ(a.local_rank, 1);
  EXPECT_EQ(a.source, "Slurm");
  LaunchInfo b = detect_launch(env({{"RANK", "3"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "3"}}));
  EXPECT_EQ(b.source, "torchrun");
  EXPECT_EQ(b.rank, 3);
  // Open MPI wins over torchrun variables left in the environment.
  LaunchInfo c = detect_launch(env({{"RANK", "3"}, {"WORLD_SIZE", "8"}, {"OMPI_COMM_WORLD_RANK", "1"},
                                    {"OMPI_COMM_WORLD_SIZE", "2"}}));
  EXPECT_EQ(c.source, "Open MPI");
  EXPECT_EQ(c.world, 2);
  EXPECT_EQ(detect_launch(env({})).world, 1);
  try {
    (void)detect_launch(env({{"RANK", "8"}, {"WORLD_SIZE", "8"}}));
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "RANK: 8 is not below WORLD_SIZE (8)");
  }
  try {
    (void)detect_launch(env({{"RANK", "x"}, {"WORLD_SIZE", "8"}}));
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "RANK: \"x\" is not an integer >= 0");
  }
}

}  // namespace
}  // namespace stepcast::exec

// The reshard read plan (models/reshard.h) against hand calculations on the shipped tiny
// CPU scenario: what each new rank reads, from how many old shards, and how long.
#include <gtest/gtest.h>

#include "stepcast/models/params.h"
#include "stepcast/models/reshard.h"
#include "stepcast/models/scenario.h"

namespace stepcast {
namespace {

Scenario tiny() {
  auto s = load_scenario_file(std::string(STEPCAST_SOURCE_DIR) + "/scenarios/execute/cpu-tp2dp2.json");
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message);
  return *s;
}

TEST(Reshard, ParsesLayoutsAndNamesBadKeys) {
  Plan old;
  old.tp = 2;
  old.dp = 4;
  auto p = parse_reshard_layout("tp=1,dp=2,zero=1", old);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->tp, 1);
  EXPECT_EQ(p->dp, 2);
  EXPECT_EQ(p->zero, 1);
  // gpus=N derives dp from the other dimensions: 8 GPUs / (tp 2) = dp 4.
  auto g = parse_reshard_layout("gpus=8", old);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->dp, 4);
  EXPECT_NE(parse_reshard_layout("tq=2", old).error().message.find("\"tq\" is not a layout key"), std::string::npos);
  EXPECT_NE(parse_reshard_layout("tp=-1", old).error().message.find("tp: \"-1\" is not a positive integer"),
            std::string::npos);
  EXPECT_NE(parse_reshard_layout("gpus=7", old).error().message.find("not a multiple of tp x pp x cp = 2"),
            std::string::npos);
  EXPECT_NE(parse_reshard_layout("tp", old).error().message.find("not key=value"), std::string::npos);
}

TEST(Reshard, Tp2Dp2ToTp1Dp2ReadsTheWholeModelFromBothTensorSlices) {
  const Scenario s = tiny();   // tp2 x dp2, zero 0, one stage
  Plan to = s.plan;
  to.tp = 1;
  to.dp = 2;
  to.zero = 1;
  CheckpointSpec spec;   // every part
  ClusterSpec c = s.cluster;
  const ReshardPlan r = reshard_plan(s.model, c, s.plan, to, s.workload, spec);
  // Hand calculation: P = every weight of the model (one stage, tp 1 holds all of it).
  const double P = static_cast<double>(count_params(s.model).total);
  ASSERT_EQ(r.reads.size(), 1u);   // one stage x one tensor slice
  const ReshardRead& rd = r.reads[0];
  EXPECT_EQ(rd.ranks, (std::vector<int>{0, 1}));
  EXPECT_DOUBLE_EQ(rd.model_bytes, 2.0 * P);              // bf16 weights
  EXPECT_DOUBLE_EQ(rd.optimizer_bytes, 12.0 * P / 2.0);   // ZeRO-1 over dp 2: half of 12 B/param
  EXPECT_EQ(rd.old_tp, (std::vector<int>{0, 1}));         // both old column halves
  EXPECT_EQ(rd.old_stages, (std::vector<int>{0}));
  // Each of the old slices was written in 2 parts (dp 2 replicas deduplicate): 2 x 2 files.
  EXPECT_EQ(rd.files, 4);
  // Storage-bound on a one-node host: the two ranks' bytes over the read bandwidth.
  const double other0 = checkpoint_rank_other_bytes(spec, true), other1 = checkpoint_rank_other_bytes(spec, false);
  EXPECT_DOUBLE_EQ(r.total_read_bytes, 2 * (8.0 * P) + other0 + other1);
  EXPECT_DOUBLE_EQ(r.storage_s, r.total_read_bytes / (c.storage_read_GBps * 1e9));
  EXPECT_GE(r.restore_s, r.storage_s);
}

TEST(Reshard, ModelOnlyCheckpointReadsNoOptimizer) {
  const Scenario s = tiny();
  Plan to = s.plan;
  to.tp = 2;
  to.dp = 1;
  CheckpointSpec spec;
  spec.contents = {StatePart::kModel};
  const ReshardPlan r = reshard_plan(s.model, s.cluster, s.plan, to, s.workload, spec);
  ASSERT_EQ(r.reads.size(), 2u);
  for (const ReshardRead& rd : r.reads) {
    EXPECT_EQ(rd.optimizer_bytes, 0.0);
    EXPECT_EQ(rd.other_bytes, 0.0);
    // Same tensor split: tp index t reads only old tp index t.
    EXPECT_EQ(rd.old_tp, (std::vector<int>{rd.tp_index}));
  }
}

}  // namespace
}  // namespace stepcast

// The enum name tables of stepcast/models/names.h: every value prints and parses back to
// itself, no two values share a name, and the "one of" lists follow table order.
#include "stepcast/models/names.h"

#include <set>
#include <string>

#include <gtest/gtest.h>

namespace stepcast {
namespace {

// Oracle: the table itself. Each entry's name parses to its value and its value prints as
// its name; names are pairwise distinct and values are pairwise distinct.
template <class E>
void expect_round_trip_and_unique() {
  std::set<std::string> names;
  std::set<int> values;
  for (const auto& e : Names<E>::kTable) {
    EXPECT_EQ(to_string(e.value), e.name);
    EXPECT_EQ(name_of(e.value), e.name);
    const std::optional<E> back = parse_name<E>(e.name);
    ASSERT_TRUE(back.has_value()) << e.name;
    EXPECT_EQ(*back, e.value) << e.name;
    EXPECT_TRUE(names.insert(e.name).second) << "duplicate name " << e.name;
    EXPECT_TRUE(values.insert(static_cast<int>(e.value)).second) << "duplicate value for " << e.name;
  }
  EXPECT_EQ(names_of<E>().size(), Names<E>::kTable.size());
  EXPECT_FALSE(parse_name<E>("").has_value());
  EXPECT_FALSE(parse_name<E>("?").has_value());
}

TEST(Names, EveryScheduleRoundTripsAndNamesAreUnique) { expect_round_trip_and_unique<Schedule>(); }
TEST(Names, EveryRecomputeRoundTripsAndNamesAreUnique) { expect_round_trip_and_unique<Recompute>(); }
TEST(Names, EveryRecomputeModuleRoundTripsAndNamesAreUnique) { expect_round_trip_and_unique<RecomputeModule>(); }
TEST(Names, EveryPrecisionRoundTripsAndNamesAreUnique) { expect_round_trip_and_unique<Precision>(); }
TEST(Names, EveryCheckpointModeRoundTripsAndNamesAreUnique) { expect_round_trip_and_unique<CheckpointMode>(); }
TEST(Names, EveryLifetimeRoundTripsAndNamesAreUnique) { expect_round_trip_and_unique<Lifetime>(); }
TEST(Names, EveryFailureCauseRoundTripsAndNamesAreUnique) { expect_round_trip_and_unique<FailureCause>(); }
TEST(Names, EveryObjectiveRoundTripsAndNamesAreUnique) { expect_round_trip_and_unique<Objective>(); }

// Each value enumerator is listed: the tables cover the enums (last enumerator + 1 entries).
TEST(Names, TablesCoverEveryEnumerator) {
  EXPECT_EQ(Names<Schedule>::kTable.size(), static_cast<std::size_t>(Schedule::kInterleaved) + 1);
  EXPECT_EQ(Names<Recompute>::kTable.size(), static_cast<std::size_t>(Recompute::kSelectiveOp) + 1);
  EXPECT_EQ(Names<RecomputeModule>::kTable.size(), static_cast<std::size_t>(RecomputeModule::kMlaUpProj) + 1);
  EXPECT_EQ(Names<Precision>::kTable.size(), static_cast<std::size_t>(Precision::kFp8) + 1);
  EXPECT_EQ(Names<CheckpointMode>::kTable.size(), static_cast<std::size_t>(CheckpointMode::kAsync) + 1);
  EXPECT_EQ(Names<Lifetime>::kTable.size(), static_cast<std::size_t>(Lifetime::kWeibull) + 1);
  EXPECT_EQ(Names<FailureCause>::kTable.size(), kAllFailureCauses.size());
  EXPECT_EQ(Names<Objective>::kTable.size(), static_cast<std::size_t>(Objective::kCost) + 1);
}

// The spellings of the scenario files and reports (docs/interfaces.md), pinned.
TEST(Names, SpellingsMatchTheFileFormat) {
  EXPECT_EQ(quoted_names<Schedule>(), "\"gpipe\", \"1f1b\", \"interleaved\"");
  EXPECT_EQ(quoted_names<Recompute>(), "\"none\", \"selective\", \"full\", \"selective_op\"");
  EXPECT_EQ(quoted_names<RecomputeModule>(),
            "\"core_attn\", \"layernorm\", \"mlp\", \"moe_act\", \"moe\", \"shared_experts\", \"mla_up_proj\"");
  EXPECT_EQ(quoted_names<Precision>(), "\"bf16\", \"fp16\", \"fp8\"");
  EXPECT_EQ(quoted_names<CheckpointMode>(), "\"sync\", \"async\"");
  EXPECT_EQ(quoted_names<Lifetime>(), "\"exponential\", \"weibull\"");
  EXPECT_EQ(quoted_names<FailureCause>(), "\"gpu\", \"host\", \"nic\", \"switch\", \"software\"");
  EXPECT_EQ(quoted_names<Objective>(), "\"time_to_train\", \"tokens_per_s\", \"cost\"");
  EXPECT_STREQ(failure_cause_name(FailureCause::kSwitch), "switch");
  EXPECT_STREQ(failure_unit_name(FailureCause::kGpu), "GPU");
  EXPECT_STREQ(failure_unit_name(FailureCause::kSoftware), "node");
  EXPECT_STREQ(failure_rate_key(FailureCause::kGpu), "rate_per_gpu_h");
  EXPECT_STREQ(failure_rate_key(FailureCause::kNic), "rate_per_node_h");
  EXPECT_STREQ(failure_rate_key(FailureCause::kSwitch), "rate_per_switch_h");
  EXPECT_STREQ(objective_name(Objective::kTokensPerS), "tokens_per_s");
}

}  // namespace
}  // namespace stepcast

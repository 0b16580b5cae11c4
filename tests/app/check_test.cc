// `check` combines typed reports through their fields (app/fields.h): the dotted names of
// each report's JSON value. Oracles: hand-built JSON and the estimate report itself.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "stepcast/app/check.h"
#include "stepcast/app/estimate.h"
#include "stepcast/app/fields.h"

namespace stepcast::app {
namespace {

TEST(Fields, FlattenObjectsIntoDottedNamesAndKeepArraysAsValues) {
  const auto j = nlohmann::ordered_json::parse(
      R"({"step_time_s": 2.5, "breakdown_s": {"compute": 2, "wait": {"dp": 0.5}}, "ranks": [1, 2], "fits": true})");
  const Fields f = Fields::of(j);
  EXPECT_EQ(f.names(), (std::vector<std::string>{"breakdown_s.compute", "breakdown_s.wait.dp", "fits", "ranks",
                                                 "step_time_s"}));
  EXPECT_EQ(*f.find("breakdown_s.wait.dp"), 0.5);
  EXPECT_EQ(*f.find("ranks"), nlohmann::json::parse("[1, 2]"));
  EXPECT_EQ(f.find("breakdown_s"), nullptr);  // objects are not values
}

TEST(Fields, MergeKeepsOrReplaces) {
  Fields a, b;
  a.set("x", 1);
  b.set("x", 2);
  b.set("y", 3);
  Fields keep = a;
  keep.merge(b, /*replace=*/false);
  EXPECT_EQ(*keep.find("x"), 1);
  EXPECT_EQ(*keep.find("y"), 3);
  a.merge(b);
  EXPECT_EQ(*a.find("x"), 2);
}

TEST(Fields, TheEstimateReportDeclaresItsFieldsByPrintingThem) {
  auto r = run_estimate({ScenarioInput::file(std::string(STEPCAST_SOURCE_DIR) + "/scenarios/llama3-70b-64xh100.json")});
  ASSERT_TRUE(r.ok()) << r.error().message;
  const Fields f = estimate_fields(*r);
  const auto printed = nlohmann::json::parse(estimate_json(*r));
  EXPECT_EQ(*f.find("step_time_s"), printed["step_time_s"]);
  EXPECT_EQ(*f.find("memory_bytes.total"), printed["memory_bytes"]["total"]);
  EXPECT_EQ(*f.find("fits"), printed["fits"]);
}

class CheckFiles : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(testing::TempDir()) /
           ("stepcast_check_" + std::string(testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    return (dir_ / name).string();
  }
  std::filesystem::path dir_;
};

// The estimate of this layout (closed form) and the simulation agree on `fits` and on the
// world; a range on the simulated step and a list of allowed values are both checked.
const char* kScenario = R"({"format": 1, "model": "llama3-8b",
  "cluster": {"preset": "dgx-h100", "nodes": 2},
  "plan": {"tp": 1, "pp": 1, "zero": 1, "microbatch": 1, "global_batch": 16}, "workload": {"seq_len": 4096},
  "expect": {"fits": true, "world": [8, 16], "step_time_s": {"min": 0.01, "max": 100}, "params_active": {"min": 1e9}}})";

TEST_F(CheckFiles, ExpectationsOfSeveralReportsHoldTogether) {
  const std::string path = write("ok.json", kScenario);
  auto r = run_check(CheckRequest{{path}, {}});
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->scenarios.size(), 1u);
  EXPECT_EQ(r->scenarios[0].status, CheckStatus::kPass) << r->scenarios[0].detail;
  EXPECT_EQ(r->passed, 1);
}

TEST_F(CheckFiles, AMissIsAFailWithTheValue) {
  std::string text = kScenario;
  text.replace(text.find(R"("world": [8, 16])"), 16, R"("world": 64)");
  const std::string path = write("miss.json", text);
  auto r = run_check(CheckRequest{{path}, {}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->scenarios[0].status, CheckStatus::kFail);
  EXPECT_EQ(r->scenarios[0].detail, "world = 16, expected 64");
}

TEST_F(CheckFiles, AFolderWithoutScenariosIsAnInputError) {
  std::filesystem::create_directory(dir_ / "empty");
  auto r = run_check(CheckRequest{{(dir_ / "empty").string()}, {}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, (dir_ / "empty").string() + ": no scenario files (*.json) in the folder");
}

TEST_F(CheckFiles, ProgressIsReportedPerScenario) {
  write("a.json", kScenario);
  write("b.json", R"({"format": 1})");  // an error row, still counted
  std::vector<std::int64_t> seen;
  auto r = run_check(CheckRequest{{dir_.string()}, [&](std::int64_t done, std::int64_t total) {
                                    EXPECT_EQ(total, 2);
                                    seen.push_back(done);
                                  }});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(seen, (std::vector<std::int64_t>{0, 1, 2}));
  EXPECT_EQ(r->passed, 1);
  EXPECT_EQ(r->errors, 1);
}

}  // namespace
}  // namespace stepcast::app

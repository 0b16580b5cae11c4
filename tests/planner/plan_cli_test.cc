// `stepcast plan` as a user runs it: exit codes and whole error messages (exit 2 on bad
// input), byte-identical reports for 1 and N threads, no progress bar when stderr is not a
// terminal, the CSV of every ranked layout.
#include <gtest/gtest.h>

#include "../cli/cli_runner.h"
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace {

namespace fs = std::filesystem;

const std::string kShipped = std::string(STEPCAST_SOURCE_DIR) + "/scenarios/plan/llama3-70b-64xh100.json";

using stepcast::testing_support::Outcome;
using stepcast::testing_support::read_file;

class PlanCli : public stepcast::testing_support::CliRunner {
 protected:
  void expect_input_error(const Outcome& r, const std::string& message) {
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err, "stepcast: error: " + message + "\n");
  }
};

TEST_F(PlanCli, SameReportWithOneAndTwoThreadsAndNoProgressBarWhenPiped) {
  const Outcome one = run({"plan", kShipped, "--json", "--threads", "1"});
  const Outcome two = run({"plan", kShipped, "--json", "--threads", "2"});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_EQ(one.out, two.out);
  EXPECT_EQ(one.err, "");  // stderr is a file here: no bar
  const auto j = nlohmann::json::parse(one.out);
  EXPECT_EQ(j["format"], 1);
  EXPECT_EQ(j["ranked"].size(), 20u);
  EXPECT_EQ(j["ranked"][0]["layout"], j["best_layout"]);
  const Outcome text1 = run({"plan", kShipped, "--threads", "1"});
  const Outcome text2 = run({"plan", kShipped, "--threads", "2"});
  EXPECT_EQ(text1.out, text2.out);
  EXPECT_EQ(text1.out.rfind("stepcast plan: plan: llama3-70b on 64 x H100\n", 0), 0u);
}

TEST_F(PlanCli, CsvHoldsEveryRankedLayout) {
  const std::string csv = (dir_ / "ranked.csv").string();
  const Outcome r = run({"plan", kShipped, "--json", "--csv", csv});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const std::string text = read_file(csv);
  std::size_t lines = 0;
  for (char c : text) lines += c == '\n';
  EXPECT_EQ(lines, j["plan_feasible"].get<std::size_t>() + 1);
  EXPECT_EQ(text.rfind("rank,layout,gpus,tp,pp,dp,cp,ep,sp,", 0), 0u);
  EXPECT_NE(text.find("\n1,\"" + j["best_layout"].get<std::string>() + "\",64,"), std::string::npos);
}

TEST_F(PlanCli, ExplainPrintsRankOrRejection) {
  const Outcome ok = run({"plan", kShipped, "--explain", "tp=8,pp=4,dp=2,sp=true,zero=1,recompute=selective"});
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_EQ(ok.out.rfind("Layout     tp=8,pp=4,dp=2,cp=1,ep=1,sp=true,schedule=1f1b,v=1,mb=1,gb=64,zero=1,recompute=none on 64 GPUs\n", 0), 0u)
      << ok.out;
  EXPECT_NE(ok.out.find("\nRank       "), std::string::npos);
  const Outcome bad = run({"plan", kShipped, "--explain", "tp=16"});
  ASSERT_EQ(bad.exit_code, 0) << bad.err;
  EXPECT_NE(bad.out.find("\nRejected   tp does not divide the attention or KV heads (counted as \"tp_heads\")\n"),
            std::string::npos)
      << bad.out;
}

TEST_F(PlanCli, BadInputExitsTwoWithTheMessage) {
  expect_input_error(run({"plan", kShipped, "--threads", "-5"}),
                     "--threads: -5 is out of range (0 to 1024; 0 = one per core)");
  expect_input_error(run({"plan", kShipped, "--top-k", "5000"}), "--resimulate: 5000 is out of range (0 to 1000)");
  expect_input_error(run({"plan", kShipped, "--explain", "tp=8,pq=4"}),
                     "--explain: \"tp=8,pq=4\": unknown key \"pq\"; did you mean \"pp\"? (keys: tp, pp, dp, cp, ep, "
                     "etp, sp, tpo, a2a, dispatcher, schedule, v, microbatch_group_size_per_vp_stage, mb, gb, zero, "
                     "recompute, recompute_num_layers, "
                     "recompute_method, recompute_modules, stack, gpus, "
                     "offload_optimizer, "
                     "offload_activations, offload_weights)");
  const std::string bad = write("bad.json", R"({"model": "llama3-8b", "cluster": "dgx-h100",
      "search": {"global_batch": [64], "tp": [1, "2"]}})");
  expect_input_error(run({"plan", bad}), bad + ": search.tp[1]: expected an integer, got \"2\"");
  const std::string no_plan = write("no_plan.json", R"({"model": "llama3-8b", "cluster": "dgx-h100",
      "search": {"global_batch": [64]}})");
  // Planning needs no plan; estimating does.
  EXPECT_EQ(run({"plan", no_plan}).exit_code, 0);
  expect_input_error(run({"estimate", no_plan}), no_plan + ": plan: required: an object with tp, pp, dp, ...");
  expect_input_error(run({"plan", (dir_ / "missing.json").string()}),
                     (dir_ / "missing.json").string() + ": no such file or directory");
}

}  // namespace

// `stepcast gemm` through the built binary: bad inputs exit 2 with a message naming the
// argument; the JSON report parses, carries the numbers the text prints, and is the same
// on every run.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_runner.h"

namespace {

using stepcast::testing_support::Outcome;

using GemmCli = stepcast::testing_support::CliRunner;

TEST_F(GemmCli, BadInputsExitTwoNamingTheArgument) {
  expect_input_error(run({"gemm", "0", "8192", "8192"}), "M: expected 1 to 1073741824");
  expect_input_error(run({"gemm", "8192", "-1", "8192"}), "N: expected 1 to");
  expect_input_error(run({"gemm", "8192", "8192", "8192", "--gpu", "h1000"}), "--gpu: unknown GPU preset \"h1000\"");
  expect_input_error(run({"gemm", "8192", "8192", "8192", "--precision", "int8"}),
                     "--precision: unknown precision \"int8\" (bf16, fp16, fp8)");
  const std::string missing = (dir_ / "missing.json").string();
  expect_input_error(run({"gemm", "8192", "8192", "8192", "--cluster-file", missing}), missing);
  // CLI11 converts M: its message names the argument too.
  const Outcome word = run({"gemm", "eight", "8192", "8192"});
  expect_input_error(word, "");
  EXPECT_NE(word.err.find("eight"), std::string::npos) << word.err;
  // Too few dimensions: a usage error.
  const Outcome two = run({"gemm", "8192", "8192"});
  EXPECT_EQ(two.exit_code, 2) << two.err;
}

TEST_F(GemmCli, JsonParsesCarriesTheTextsNumbersAndIsDeterministic) {
  const std::vector<std::string> args{"gemm", "512", "4096", "8192", "--gpu", "h200-sxm", "--backward"};
  const Outcome text = run(args);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  std::vector<std::string> json_args = args;
  json_args.push_back("--json");
  const Outcome a = run(json_args), b = run(json_args);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  const nlohmann::json j = nlohmann::json::parse(a.out);
  ASSERT_EQ(j["passes"].size(), 3u);
  // The forward: 4 x 16 = 64 tiles of 128 x 256 split K 2 ways; the text prints the same
  // time (us, one decimal) and cut.
  EXPECT_EQ(j["passes"][0]["k_slices"], 2.0);
  EXPECT_EQ(j["passes"][0]["tiles"], 64.0);
  const std::string time_line = "  time       " + [&] {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.1f us", j["passes"][0]["time_s"].get<double>() * 1e6);
    return std::string(buf);
  }();
  EXPECT_NE(text.out.find(time_line), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("K split 2 ways (4096 each), 128 units in 1 wave(s)"), std::string::npos) << text.out;
  EXPECT_FALSE(j.contains("sweep"));
}

TEST_F(GemmCli, AgainstTheExecutorsBenchFile) {
  const std::string bench = std::string(STEPCAST_SOURCE_DIR) + "/docs/data/executor-gpu/bench-gemm.json";
  const Outcome r = run({"gemm", "--against", bench, "--gpu", "h200-sxm", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["against"]["rows"].size(), 15u);
  EXPECT_TRUE(j["passes"].empty());
  expect_input_error(run({"gemm", "--against", (dir_ / "missing.json").string()}), "--against: ");
  expect_input_error(run({"gemm"}), "M N K: required");
}

TEST_F(GemmCli, SweepAddsTheMCurve) {
  const Outcome r = run({"gemm", "256", "8192", "8192", "--gpu", "h200-sxm", "--sweep", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["sweep"].size(), 3u);
  EXPECT_EQ(j["sweep"][0]["m"], 64);
  EXPECT_EQ(j["sweep"][2]["m"], 256);
  EXPECT_EQ(j["sweep"][2]["time_s"], j["passes"][0]["time_s"]);
}

}  // namespace

// The command-line behaviours of the restructured CLI (issue 14): exit codes in --help,
// checked output (a full disk is exit 1, never a truncated file), refused non-regular
// input files, `check`'s field names, broken links, notes about derived defaults.
#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "cli_runner.h"

namespace stepcast {
namespace {

using testing_support::Outcome;

class CliOutput : public testing_support::CliRunner {};

const std::string kScenario = std::string(STEPCAST_SOURCE_DIR) + "/scenarios/llama3-70b-64xh100.json";

TEST_F(CliOutput, HelpListsTheExitCodes) {
  const Outcome r = run({"--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("Exit codes: 0 success; 1 a check or run failed, a problem was found, or an output could "
                       "not be written; 2 bad input or usage."),
            std::string::npos)
      << r.out;
}

TEST_F(CliOutput, AFullDiskIsAFailedRunWithAMessage) {
  // /dev/full accepts the open and fails every write with ENOSPC.
  const Outcome r = run_shell("estimate " + testing_support::quoted(kScenario) + " --json > /dev/full");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "stepcast: error: standard output: cannot write (No space left on device)\n");
}

TEST_F(CliOutput, AFailedTraceWriteLeavesNoFileBehind) {
  const std::string target = (dir_ / "missing-dir" / "trace.json").string();
  const Outcome r = run({"simulate", kScenario, "--trace", target});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err.rfind("stepcast: error: --trace: " + target + ": cannot write (No such file or directory)", 0), 0u)
      << r.err;
  EXPECT_FALSE(std::filesystem::exists(target));
}

TEST_F(CliOutput, ATraceIsWrittenWhole) {
  const std::string target = (dir_ / "trace.json").string();
  const Outcome r = run({"simulate", kScenario, "--trace", target});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(nlohmann::json::accept(testing_support::read_file(target)));
  // Only the trace is left in the folder: the temporary file was renamed over it.
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir_)) {
    if (e.path().filename().string().rfind(".trace.json", 0) == 0) ++files;
  }
  EXPECT_EQ(files, 0);
}

TEST_F(CliOutput, DevicesAndPipesAreRefusedAsInput) {
  EXPECT_EQ(run({"estimate", "/dev/zero"}).err, "stepcast: error: /dev/zero: not a regular file (a pipe, device or socket)\n");
  const std::string fifo = (dir_ / "fifo.json").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const Outcome r = run({"estimate", fifo});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "stepcast: error: " + fifo + ": not a regular file (a pipe, device or socket)\n");
  const Outcome c = run({"compare", "/dev/zero", "/dev/zero"});
  EXPECT_EQ(c.exit_code, 2);
  EXPECT_EQ(c.err, "stepcast: error: /dev/zero: not a regular file (a pipe, device or socket)\n");
}

TEST_F(CliOutput, CheckNamesAnUnknownExpectationWithTheClosestField) {
  const std::string path = write("typo.json", R"({"format": 1, "model": "llama3-70b",
    "cluster": {"preset": "dgx-h100", "nodes": 8},
    "plan": {"tp": 8, "pp": 4, "microbatch": 1, "global_batch": 64}, "workload": {"seq_len": 8192},
    "expect": {"step_time": {"max": 100}}})");
  const Outcome r = run({"check", path});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "FAIL  " + path +
                       ": expect.step_time: not a field of this scenario's reports; did you mean \"step_time_s\"?\n"
                       "0 passed, 1 failed\n");
}

TEST_F(CliOutput, CheckRefusesABrokenScenarioLink) {
  std::filesystem::create_directory(dir_ / "scenarios");
  std::filesystem::create_symlink(dir_ / "nowhere.json", dir_ / "scenarios" / "gone.json");
  const Outcome r = run({"check", (dir_ / "scenarios").string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "stepcast: error: " + (dir_ / "scenarios" / "gone.json").string() + ": a broken symbolic link\n");
}

TEST_F(CliOutput, CheckJsonListsEveryScenario) {
  const Outcome r = run({"check", kScenario, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["passed"], 1);
  EXPECT_EQ(j["scenarios"][0]["status"], "pass");
}

TEST_F(CliOutput, ADerivedGlobalBatchIsSaid) {
  // 64 GPUs, tp 8 x pp 4 -> dp 2; without plan.global_batch the batch is microbatch x dp = 1 x 2 = 2.
  const std::string path = write("nogb.json", R"({"format": 1, "model": "llama3-70b",
    "cluster": {"preset": "dgx-h100", "nodes": 8},
    "plan": {"tp": 8, "pp": 4, "microbatch": 1}, "workload": {"seq_len": 8192}})");
  const Outcome r = run({"estimate", path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("note: plan.global_batch is not given: it is taken as microbatch x dp = 1 x 2 = 2 sequences, "
                       "so it changes with the GPU count"),
            std::string::npos)
      << r.out;
}

TEST_F(CliOutput, TopKHasAClearerName) {
  const std::string plan = std::string(STEPCAST_SOURCE_DIR) + "/scenarios/plan/llama3-70b-64xh100.json";
  const Outcome help = run({"plan", "--help"});
  EXPECT_NE(help.out.find("--resimulate"), std::string::npos);
  EXPECT_EQ(run({"plan", plan, "--resimulate", "5000"}).err,
            "stepcast: error: --resimulate: 5000 is out of range (0 to 1000)\n");
}

}  // namespace
}  // namespace stepcast

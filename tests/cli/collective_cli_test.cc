// `stepcast collective` through the built binary: bad inputs exit 2 with a message naming the
// argument; the JSON report parses and carries the numbers the text prints.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_runner.h"

namespace {

using stepcast::testing_support::Outcome;

using CollectiveCli = stepcast::testing_support::CliRunner;

TEST_F(CollectiveCli, BadInputsExitTwoNamingTheArgument) {
  expect_input_error(run({"collective", "all_reduce", "1XB", "--gpus", "8"}), "SIZE: expected a size in bytes");
  expect_input_error(run({"collective", "all_reduce", "0", "--gpus", "8"}), "SIZE: expected a size from 1 B");
  expect_input_error(run({"collective", "all_reduce", "1.3K", "--gpus", "8"}), "SIZE: \"1.3K\" is not a whole");
  expect_input_error(run({"collective", "all_reduce", "4", "--gpus", "8", "--sweep"}), "SIZE: --sweep runs from 8 B");
  expect_input_error(run({"collective", "allreduce", "1GiB", "--gpus", "8"}),
                     "KIND: unknown collective \"allreduce\" (kinds: all_reduce,");
  expect_input_error(run({"collective", "all_reduce", "1GiB", "--gpus", "8", "--algo", "rng"}),
                     "--algo: unknown algorithm \"rng\"");
  expect_input_error(run({"collective", "all_reduce", "1GiB", "--gpus", "8", "--algo", "tree"}),
                     "--algo: tree is not available for all_reduce");
  expect_input_error(run({"collective", "all_reduce", "1GiB", "--gpus", "1"}), "--gpus: all_reduce needs 2 to");
  expect_input_error(run({"collective", "all_reduce", "1GiB", "--gpus", "-4"}), "--gpus: all_reduce needs 2 to");
  // 0 given is out of range, not "not given" (the use case's sentinel).
  expect_input_error(run({"collective", "all_reduce", "1GiB", "--gpus", "0"}), "--gpus: all_reduce needs 2 to");
  expect_input_error(run({"collective", "send_recv", "1GiB", "--gpus", "0"}), "--gpus: send_recv needs 1 to");
  expect_input_error(run({"collective", "all_reduce", "1GiB"}), "--gpus: required for all_reduce");
  expect_input_error(run({"collective", "all_reduce", "1GiB", "--gpus", "8", "--stride", "0"}), "--stride: expected");
  expect_input_error(run({"collective", "all_reduce", "1GiB", "--gpus", "8", "--cluster", "dgx-h1000"}),
                     "--cluster: unknown cluster preset \"dgx-h1000\" (did you mean \"dgx-h100\"?)");
  expect_input_error(run({"collective", "all_reduce", "1GiB", "--gpus", "8", "--proto", "LL64"}),
                     "--proto: unknown protocol \"LL64\" (NCCL's protocols: LL, LL128, Simple)");
  expect_input_error(run({"collective", "send_recv", "1GiB", "--proto", "LL"}),
                     "--proto: NCCL's tuner prices protocols for all_reduce");
  expect_input_error(run({"collective", "all_reduce", "1GiB", "--gpus", "4", "--cluster", "cpu-host", "--proto", "LL"}),
                     "--proto: the cluster prices its collectives with per-hop alphas");
  const std::string scenario = std::string(STEPCAST_SOURCE_DIR) + "/scenarios/llama3-70b-64xh100.json";
  expect_input_error(run({"collective", "all_reduce", "1GiB", "--cluster-file", scenario, "--group", "xp"}),
                     "--group: unknown group \"xp\"");
  expect_input_error(run({"collective", "all_reduce", "1GiB", "--cluster-file", scenario, "--group", "ep"}),
                     "--group: the plan's ep group has one rank");
  expect_input_error(run({"collective", "all_reduce", "1GiB", "--group", "tp"}), "--group: needs --cluster-file");
  // CLI11 converts --gpus: its message names the option too.
  const Outcome word = run({"collective", "all_reduce", "1GiB", "--gpus", "eight"});
  expect_input_error(word, "");
  EXPECT_NE(word.err.find("--gpus = eight"), std::string::npos) << word.err;
  const std::string missing = (dir_ / "missing.json").string();
  expect_input_error(run({"collective", "all_reduce", "1GiB", "--gpus", "8", "--cluster-file", missing}), missing);
}

TEST_F(CollectiveCli, SendRecvNeedsNoGroup) {
  const Outcome r = run({"collective", "send_recv", "1GiB", "--gpus", "1"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("direct *"), std::string::npos) << r.out;
}

TEST_F(CollectiveCli, ClusterFileTakesTheScenariosCluster) {
  // The shipped 64 x H100 scenario: dgx-h100 with 8 nodes; 128 ranks do not fit.
  const std::string scenario = std::string(STEPCAST_SOURCE_DIR) + "/scenarios/llama3-70b-64xh100.json";
  const Outcome ok = run({"collective", "all_reduce", "1GiB", "--gpus", "64", "--cluster-file", scenario, "--json"});
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_EQ(nlohmann::json::parse(ok.out)["placement"]["nodes"], 8);
  expect_input_error(run({"collective", "all_reduce", "1GiB", "--gpus", "128", "--cluster-file", scenario}),
                     "--gpus: 128 ranks 1 apart span 128 GPUs (16 nodes)");
}

// The text rows "  NAME[ *]  time  algbw  busbw   low - high" as numbers, by algorithm name.
struct TextRow {
  std::string algo, protocol;
  double time_us = 0, algbw = 0, busbw = 0, low = 0, high = 0;
  bool is_auto = false;
};

std::vector<TextRow> algorithm_rows(const std::string& text) {
  std::vector<TextRow> rows;
  std::istringstream in(text);
  std::string line;
  bool in_table = false;
  while (std::getline(in, line)) {
    if (line.rfind("  algorithm", 0) == 0) {
      in_table = true;
      continue;
    }
    if (!in_table) continue;
    if (line.rfind("  * =", 0) == 0) break;
    std::istringstream f(line);
    TextRow r;
    std::string tok, dash;
    f >> r.algo >> tok;
    if (!tok.empty() && tok.front() == '(') {  // NCCL's protocol: "ring (LL128)"
      r.protocol = tok.substr(1, tok.size() - 2);
      f >> tok;
    }
    if (tok == "*") {
      r.is_auto = true;
      f >> tok;
    }
    r.time_us = std::stod(tok);
    f >> r.algbw >> r.busbw >> r.low >> dash >> r.high;
    rows.push_back(r);
  }
  return rows;
}

TEST_F(CollectiveCli, JsonParsesAndCarriesTheNumbersOfTheText) {
  const std::vector<std::string> args{"collective", "all_reduce", "1GiB", "--gpus", "64", "--cluster", "dgx-h100",
                                      "--sweep"};
  const Outcome text = run(args);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  std::vector<std::string> json_args = args;
  json_args.push_back("--json");
  const Outcome json = run(json_args);
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const auto j = nlohmann::json::parse(json.out);
  EXPECT_EQ(j["format"], 1);
  EXPECT_EQ(j["sweep"].size(), 28u);  // 8 B = 2^3 ... 1 GiB = 2^30

  const std::vector<TextRow> rows = algorithm_rows(text.out);
  ASSERT_EQ(rows.size(), j["algorithms"].size()) << text.out;
  ASSERT_EQ(rows.size(), 3u);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& a = j["algorithms"][i];
    EXPECT_EQ(rows[i].algo, a["algo"].get<std::string>());
    EXPECT_EQ(rows[i].protocol, a["protocol"].is_null() ? "" : a["protocol"].get<std::string>());
    EXPECT_EQ(rows[i].is_auto, a["auto"].get<bool>());
    // The text prints two decimals: the same number, rounded.
    EXPECT_NEAR(rows[i].time_us, a["time_us"].get<double>(), 0.0051);
    EXPECT_NEAR(rows[i].algbw, a["algbw_GBps"].get<double>(), 0.0051);
    EXPECT_NEAR(rows[i].busbw, a["busbw_GBps"].get<double>(), 0.0051);
    EXPECT_NEAR(rows[i].low, a["band_us"]["low"].get<double>(), 0.0051);
    EXPECT_NEAR(rows[i].high, a["band_us"]["high"].get<double>(), 0.0051);
    EXPECT_NEAR(a["busbw_GBps"].get<double>() / a["algbw_GBps"].get<double>(), 2.0 * 63 / 64, 1e-12);
    if (rows[i].is_auto) {
      EXPECT_EQ(j["auto"], rows[i].algo);
    }
  }
  EXPECT_NE(text.out.find("band: from input uncertainty (not a statistical interval)"), std::string::npos);
  EXPECT_NE(text.out.find("placement: 64 ranks contiguous (stride 1): 8 per node on 8 nodes of 8 GPUs"),
            std::string::npos)
      << text.out;
  // Byte-identical across runs.
  EXPECT_EQ(run(json_args).out, json.out);
}

}  // namespace

// The built `stepcast` binary, run as a user would (docs/interfaces.md "Command
// line"): exit code 0 success, 2 bad input or usage with "stepcast: error: " on stderr;
// `--json` reports carry the fields of docs/interfaces.md "Report" and are byte-identical
// across runs and across key orders of the scenario (STYLE.md habit 12).
#include <gtest/gtest.h>

#include "cli_runner.h"
#include <unistd.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace {

namespace fs = std::filesystem;

const std::string kShipped = std::string(STEPCAST_SOURCE_DIR) + "/scenarios/llama3-70b-64xh100.json";

using stepcast::testing_support::Outcome;
using stepcast::testing_support::read_file;

class Cli : public stepcast::testing_support::CliRunner {
 protected:
  // Bad input: exit 2, nothing on stdout, and stderr starts with the error prefix.
  void expect_input_error(const Outcome& r) {
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err.rfind("stepcast: error: ", 0), 0u) << r.err;
  }
};

// ---------------------------------------------------------------------------------------
// Bad input and usage: exit 2 with a message naming the problem.

TEST_F(Cli, EmptyFileExitsTwo) {
  const std::string path = write("empty.json", "");
  const Outcome r = run({"estimate", path});
  expect_input_error(r);
  EXPECT_EQ(r.err, "stepcast: error: " + path + ": empty document: expected a JSON object\n");
}

TEST_F(Cli, BinaryGarbageFileExitsTwo) {
  // Bytes 0..255 from a fixed linear congruential sequence, NULs included (x = 0 first).
  std::string bytes;
  unsigned x = 0;
  for (int i = 0; i < 4096; ++i) {
    bytes += static_cast<char>(x >> 24);
    x = x * 1664525u + 1013904223u;
  }
  ASSERT_NE(bytes.find('\0'), std::string::npos);
  const std::string path = write("garbage.bin", bytes);
  const Outcome r = run({"estimate", path});
  expect_input_error(r);
  // The first byte is a NUL.
  EXPECT_EQ(r.err, "stepcast: error: " + path +
                       ": invalid JSON: NUL byte at line 1, column 1 (is this a binary file?)\n");
}

TEST_F(Cli, TruncatedJsonExitsTwo) {
  // The shipped scenario cut just before "virtual_stages", the 5th character of line 11
  // (after 4 spaces of indentation): the input ends where a key was expected.
  const std::string text = read_file(kShipped);
  const auto cut = text.find("\"virtual_stages\"");
  ASSERT_NE(cut, std::string::npos);
  const std::string path = write("truncated.json", text.substr(0, cut));
  const Outcome r = run({"estimate", path});
  expect_input_error(r);
  EXPECT_EQ(r.err, "stepcast: error: " + path +
                       ": invalid JSON: parse error at line 11, column 5: syntax error while "
                       "parsing object key - unexpected end of input; expected string literal\n");
}

TEST_F(Cli, TenThousandLevelsOfNestingExitTwoWithoutCrashing) {
  const std::string path =
      write("deep.json", std::string(10'000, '[') + std::string(10'000, ']'));
  const Outcome r = run({"estimate", path});
  expect_input_error(r);
  EXPECT_EQ(r.err,
            "stepcast: error: " + path + ": invalid JSON: nesting deeper than 64 levels at line 1\n");
}

TEST_F(Cli, MissingFileExitsTwo) {
  const std::string path = (dir_ / "absent.json").string();
  const Outcome r = run({"estimate", path});
  expect_input_error(r);
  EXPECT_EQ(r.err, "stepcast: error: " + path + ": no such file or directory\n");
}

TEST_F(Cli, DirectoryExitsTwo) {
  const Outcome r = run({"estimate", dir_.string()});
  expect_input_error(r);
  EXPECT_EQ(r.err, "stepcast: error: " + dir_.string() + ": is a directory\n");
}

TEST_F(Cli, InvalidScenarioNamesEveryProblemOnItsOwnLine) {
  const std::string path = write("bad.json", R"({"format": 1})");
  const Outcome r = run({"estimate", path});
  expect_input_error(r);
  EXPECT_EQ(r.err, "stepcast: error: " + path + ": model: required: a preset name or an object\n" +
                       path + ": cluster: required: a preset name or an object\n" + path +
                       ": plan: required: an object with tp, pp, dp, ...\n");
}

TEST_F(Cli, UnknownSubcommandExitsTwo) {
  const Outcome r = run({"estimat", kShipped});
  expect_input_error(r);
  EXPECT_EQ(r.err.rfind("stepcast: error: unknown command \"estimat\" (commands: ", 0), 0u)
      << r.err;
  EXPECT_NE(r.err.find("estimate"), std::string::npos) << r.err;
}

TEST_F(Cli, MissingScenarioArgumentExitsTwo) {
  const Outcome r = run({"estimate"});
  expect_input_error(r);
  EXPECT_EQ(r.err,
            "stepcast: error: SCENARIO is required\nRun with --help for more information.\n");
}

TEST_F(Cli, UnknownOptionExitsTwo) {
  const Outcome r = run({"estimate", kShipped, "--bogus"});
  expect_input_error(r);
  EXPECT_EQ(r.err,
            "stepcast: error: The following argument was not expected: --bogus\n"
            "Run with --help for more information.\n");
}

TEST_F(Cli, NoCommandExitsTwo) {
  const Outcome r = run({});
  expect_input_error(r);
}

// ---------------------------------------------------------------------------------------
// Success.

TEST_F(Cli, PresetsListsTheBuiltInNames) {
  const Outcome r = run({"presets"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  for (const char* name : {"llama3-70b", "deepseek-v3", "h100-sxm", "dgx-b200"}) {
    EXPECT_NE(r.out.find(name), std::string::npos) << name;
  }
}

TEST_F(Cli, PresetsJsonIsValidJsonWithTheModels) {
  const Outcome r = run({"presets", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  EXPECT_EQ(j.at("format"), 1);
  ASSERT_TRUE(j.at("models").contains("llama3-70b"));
  // docs/cost-model-sources.md section 1.6: 70,553,706,496.
  EXPECT_EQ(j["models"]["llama3-70b"]["params_total"], 70'553'706'496);
  EXPECT_EQ(j["clusters"]["dgx-h100"]["gpus_per_node"], 8);
}

TEST_F(Cli, PresetsListsTheSoftwareStacksWithTheirSources) {
  const Outcome r = run({"presets"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* name : {"megatron-core", "fsdp2-eager", "fsdp2-compile", "deepspeed-zero"}) {
    EXPECT_NE(r.out.find(name), std::string::npos) << name;
  }
  const Outcome j = run({"presets", "--json"});
  ASSERT_EQ(j.exit_code, 0) << j.err;
  const auto v = nlohmann::json::parse(j.out);
  ASSERT_TRUE(v.at("stacks").contains("fsdp2-eager"));
  EXPECT_GT(v["stacks"]["fsdp2-eager"]["host_us_per_kernel"].get<double>(), 0.0);
  EXPECT_FALSE(v.dump().find("sources") == std::string::npos) << "every stack parameter carries its sources";
  // Every sourced parameter is printed beside its source, in every stack.
  for (const auto& [name, st] : v["stacks"].items()) {
    ASSERT_TRUE(st.contains("sources")) << name;
    for (const auto& [key, source] : st["sources"].items()) EXPECT_TRUE(st.contains(key)) << name << ": " << key;
  }
  EXPECT_EQ(v["stacks"]["llm-foundry"]["pipeline_max_zero"], -1);
  EXPECT_EQ(v["stacks"]["llm-foundry"]["context_parallel"], false);
  EXPECT_EQ(v["stacks"]["megatron-deepspeed"]["max_zero"], 1);
  EXPECT_EQ(v["stacks"]["fsdp2-eager"]["master_in_optimizer"], false);
}

// The attention kernel tables (models/data/attention.json): each stack names its family,
// and the FlashAttention-3 paper's H100 figures come out as published (FlashAttention-2
// at 8k tokens: 333 TFLOP/s causal forward, 318 backward).
TEST_F(Cli, PresetsListTheAttentionKernelTablesWithTheirSource) {
  const Outcome r = run({"presets"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Attention kernels on hopper"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("333/318"), std::string::npos) << r.out;
  const Outcome j = run({"presets", "--json"});
  ASSERT_EQ(j.exit_code, 0) << j.err;
  const auto v = nlohmann::json::parse(j.out);
  EXPECT_EQ(v["stacks"]["megatron-core"]["attention_kernel"], "cudnn");
  EXPECT_EQ(v["stacks"]["fsdp2-eager"]["attention_kernel"], "sdpa-flash");
  EXPECT_EQ(v["stacks"]["fsdp2-eager"]["loss_traffic_bytes_per_logit"], 46);
  // The per-module ZeRO-3 stack names how it gathers; the per-layer stacks have no such key.
  EXPECT_EQ(v["stacks"]["deepspeed-zero-2021"]["zero3_gather"], "synced_list");
  EXPECT_FALSE(v["stacks"]["deepspeed-zero"].contains("zero3_gather"));
  const auto& hopper = v.at("attention").at("hopper");
  EXPECT_EQ(hopper["seq"][4], 8192);
  EXPECT_EQ(hopper["kernels"]["fa2"]["fwd_causal_tflops"][4], 333);
  EXPECT_EQ(hopper["kernels"]["fa2"]["bwd_tflops"][4], 318);
  EXPECT_NE(hopper["source"].get<std::string>().find("FlashAttention-3"), std::string::npos);
  // The families measured here carry their own source (transcribed from microbench.json:
  // SDPA's flash backend at 8192 tokens, causal forward 314.2 and backward 267.9 TFLOP/s).
  EXPECT_EQ(hopper["kernels"]["sdpa-flash"]["fwd_causal_tflops"][4], 314.2);
  EXPECT_EQ(hopper["kernels"]["sdpa-flash"]["bwd_tflops"][4], 267.9);
  EXPECT_NE(hopper["kernels"]["sdpa-flash"]["source"].get<std::string>().find("MEASURED"), std::string::npos);
  EXPECT_FALSE(hopper["kernels"]["fa2"].contains("source"));
  EXPECT_NE(r.out.find("314.2/267.9"), std::string::npos) << r.out;
}

TEST_F(Cli, UnknownStackExitsTwoNamingTheFieldAndTheClosestName) {
  const std::string path = write("stack.json", R"({"format": 1, "model": "llama3-8b",
    "cluster": {"preset": "dgx-h100", "nodes": 1},
    "plan": {"tp": 1, "pp": 1, "dp": 8, "global_batch": 8, "stack": "fsdp2-eagr"},
    "workload": {"seq_len": 4096}})");
  const Outcome r = run({"estimate", path});
  expect_input_error(r);
  EXPECT_EQ(r.err, "stepcast: error: " + path +
                       ": plan.stack: \"fsdp2-eagr\" is not one of \"megatron-core\", \"fsdp2-eager\", "
                       "\"fsdp2-compile\", \"deepspeed-zero\", \"deepspeed-zero-2021\", \"megatron-deepspeed\", "
                       "\"llm-foundry\", \"fsdp2-compile-loss\"; did you mean \"fsdp2-eager\"?\n");
}

TEST_F(Cli, EstimatePrintsTheTextReport) {
  const Outcome r = run({"estimate", kShipped});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(r.out.rfind("stepcast estimate: llama3-70b, 64 x H100\n", 0), 0u) << r.out;
}

// simulate names the pace of the job's slowest GPU (docs/model-reference.md 4.5): 64 GPUs
// at the default spread, 1 + 0.0148 x E[max of 64 normals] (Blom: Phi^-1(63.625/64.25) = 2.3367).
TEST_F(Cli, SimulateNamesThePaceOfTheSlowestGpu) {
  const Outcome r = run({"simulate", kShipped, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_NEAR(j.at("gpu_pace").get<double>(), 1 + 0.0148 * 2.3367, 0.0148 * 0.0001);
  const Outcome t = run({"simulate", kShipped});
  EXPECT_NE(t.out.find("the pace of the slowest of 64 GPUs"), std::string::npos) << t.out;
}

TEST_F(Cli, EstimateJsonHasTheReportFieldsOfInterfacesMd) {
  const Outcome r = run({"estimate", kShipped, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  const auto j = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(j.is_object()) << r.out;
  for (const char* key : {"format", "scenario", "world", "params_total", "tokens_per_step",
                          "model_flops_per_step", "step_time_s", "tokens_per_s", "mfu",
                          "breakdown_s", "exposed_comm_s", "memory_bytes", "fits"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  for (const char* key : {"compute", "exposed_comm", "bubble", "wait", "optimizer", "input"}) {
    EXPECT_TRUE(j["breakdown_s"].contains(key)) << "breakdown_s." << key;
  }
  for (const char* key : {"tp", "dp", "pp", "cp", "ep"}) {
    EXPECT_TRUE(j["exposed_comm_s"].contains(key)) << "exposed_comm_s." << key;
  }
  for (const char* key :
       {"params", "grads", "optimizer", "activations", "buffers", "total", "capacity"}) {
    EXPECT_TRUE(j["memory_bytes"].contains(key)) << "memory_bytes." << key;
  }
  EXPECT_EQ(j["format"], 1);
  EXPECT_EQ(j["scenario"], "llama3-70b, 64 x H100");
  // 8 nodes x 8 GPUs; tp 8 x pp 4 x dp 2.
  EXPECT_EQ(j["world"], 64);
  // docs/cost-model-sources.md section 1.6.
  EXPECT_EQ(j["params_total"], 70'553'706'496);
  // global_batch 64 x seq_len 8192.
  EXPECT_EQ(j["tokens_per_step"], 524'288);
  EXPECT_TRUE(j["fits"].is_boolean());
}

TEST_F(Cli, EstimateBreakdownAddsUpToTheStepTime) {
  const Outcome r = run({"estimate", kShipped, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  double sum = 0;
  for (const auto& [key, part] : j.at("breakdown_s").items()) {
    EXPECT_GE(part.get<double>(), 0.0) << key;
    sum += part.get<double>();
  }
  const double step = j.at("step_time_s").get<double>();
  ASSERT_GT(step, 0.0);
  // docs/interfaces.md: the parts add up to step_time_s; six doubles summed in another order
  // differ by a few ulps at most.
  EXPECT_LE(std::abs(sum - step), 1e-9 * step) << "sum " << sum << " step " << step;
}

// ---------------------------------------------------------------------------------------
// Determinism.

TEST_F(Cli, EstimateJsonIsByteIdenticalAcrossRuns) {
  const Outcome a = run({"estimate", kShipped, "--json"});
  const Outcome b = run({"estimate", kShipped, "--json"});
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.err;
  ASSERT_FALSE(a.out.empty());
  EXPECT_EQ(a.out, b.out);
}

// The same document with every object's keys in reverse order.
nlohmann::ordered_json reversed_keys(const nlohmann::ordered_json& v) {
  if (v.is_object()) {
    nlohmann::ordered_json out = nlohmann::ordered_json::object();
    std::vector<std::string> keys;
    for (const auto& [k, _] : v.items()) keys.push_back(k);
    for (auto it = keys.rbegin(); it != keys.rend(); ++it) out[*it] = reversed_keys(v.at(*it));
    return out;
  }
  if (v.is_array()) {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (const auto& e : v) out.push_back(reversed_keys(e));
    return out;
  }
  return v;
}

TEST_F(Cli, EstimateJsonDoesNotDependOnKeyOrder) {
  const auto original = nlohmann::ordered_json::parse(read_file(kShipped), nullptr,
                                                      /*allow_exceptions=*/true,
                                                      /*ignore_comments=*/true);
  const auto permuted = reversed_keys(original);
  // The permutation is real: "format" comes first in the shipped file and last here.
  ASSERT_EQ(original.begin().key(), "format");
  ASSERT_EQ(std::prev(permuted.end()).key(), "format");
  const std::string path = write("permuted.json", permuted.dump(2));
  const Outcome a = run({"estimate", kShipped, "--json"});
  const Outcome b = run({"estimate", path, "--json"});
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_EQ(a.out, b.out);
}

// ---------------------------------------------------------------------------------------
// `stepcast checkpoint` (docs/reliability.md).

// Llama-3-8B on 2 nodes with the llama3-405b failure preset and 10x its software rate;
// 1e11 tokens of 262,144 per step = 381,470 steps.
const char* const kReliabilityScenario = R"({"format": 1, "name": "8b reliability", "model": "llama3-8b",
    "cluster": {"preset": "dgx-h100", "nodes": 2},
    "plan": {"tp": 1, "pp": 1, "dp": 16, "zero": 1, "global_batch": 64},
    "workload": {"seq_len": 4096, "train_tokens": 1e11},
    "faults": {"failures": {"preset": "llama3-405b", "software": {"rate_per_node_h": 2.3735894097222223e-04}}},
    "checkpoint": {"interval_steps": 500},
    "seed": 3})";

TEST_F(Cli, CheckpointWithoutAFailureModelExitsTwoNamingTheField) {
  const Outcome r = run({"checkpoint", kShipped});
  expect_input_error(r);
  EXPECT_EQ(r.err, "stepcast: error: " + kShipped +
                       ": faults.failures: required: the failure model, e.g. \"faults\": {\"failures\": "
                       "\"llama3-405b\"} (stepcast presets lists them)\n");
}

TEST_F(Cli, CheckpointRunsOutOfRangeExitsTwo) {
  const Outcome r = run({"checkpoint", write("s.json", kReliabilityScenario), "--runs", "0"});
  expect_input_error(r);
  EXPECT_EQ(r.err, "stepcast: error: --runs: 0 is out of range (1 to 10000)\n");
}

TEST_F(Cli, CheckpointJsonIsDeterministicAndHasTheCampaignFields) {
  const std::string path = write("s.json", kReliabilityScenario);
  const std::string csv = (dir_ / "sweep.csv").string();
  const Outcome a = run({"checkpoint", path, "--json", "--runs", "8", "--csv", csv});
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.err, "");
  // Byte-identical across runs and across key orders of the scenario.
  const auto permuted = reversed_keys(nlohmann::ordered_json::parse(kReliabilityScenario));
  const Outcome b = run({"checkpoint", write("p.json", permuted.dump()), "--json", "--runs", "8"});
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_EQ(a.out, b.out);
  const auto j = nlohmann::json::parse(a.out);
  EXPECT_EQ(j.at("steps_total"), 381470);
  EXPECT_EQ(j.at("runs"), 8);
  // Job failure rate per hour: 16 GPUs x 1.2621e-5 + 2 nodes x (1.7331e-5 host + 2.637e-6
  // NIC + 2.3736e-4 software) + 1 switch x 2.6373e-5 = 7.3437e-4 -> MTBF 1,361.7 h.
  const double rate = 16 * 1.2621467496141975e-05 +
                      2 * (1.7330970293209876e-05 + 2.6373215663580245e-06 + 2.3735894097222223e-04) +
                      2.6373215663580245e-05;
  EXPECT_NEAR(j.at("job_mtbf_h").get<double>(), 1 / rate, 1e-9);
  // The scenario's own interval is what `check` reports.
  EXPECT_EQ(j.at("checkpoint_interval_steps"), 500);
  EXPECT_EQ(j.at("configured").at("interval_steps"), 500);
  for (const char* k : {"goodput", "goodput_p10", "goodput_p90"}) {
    EXPECT_GT(j.at(k).get<double>(), 0.5) << k;
    EXPECT_LE(j.at(k).get<double>(), 1.0) << k;
  }
  EXPECT_TRUE(j.at("recommendation").at("mode") == "sync" || j.at("recommendation").at("mode") == "async");
  // The CSV: a header and one row per sweep point of both modes.
  const std::string rows = read_file(csv);
  EXPECT_EQ(rows.rfind("mode,interval_steps,interval_s,goodput_mean,", 0), 0u) << rows;
  const std::size_t lines = static_cast<std::size_t>(std::count(rows.begin(), rows.end(), '\n'));
  EXPECT_EQ(lines, 1 + j["modes"]["sync"]["sweep"].size() + j["modes"]["async"]["sweep"].size());
}

// The step band `checkpoint` plans around is the one `simulate` reports for the same step.
TEST_F(Cli, CheckpointStepBandIsSimulatesBand) {
  const std::string path = write("s.json", kReliabilityScenario);
  const Outcome c = run({"checkpoint", path, "--json", "--runs", "2"});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  const Outcome s = run({"simulate", path, "--json", "--steps", "1"});
  ASSERT_EQ(s.exit_code, 0) << s.err;
  const auto cj = nlohmann::json::parse(c.out);
  const auto sj = nlohmann::json::parse(s.out);
  EXPECT_DOUBLE_EQ(cj.at("step_time_s").get<double>(), sj.at("step_time_s").get<double>());
  EXPECT_DOUBLE_EQ(cj.at("step_time_band_s").at("p10").get<double>(),
                   sj.at("step_time_band_s").at("p10").get<double>());
  EXPECT_DOUBLE_EQ(cj.at("step_time_band_s").at("p90").get<double>(),
                   sj.at("step_time_band_s").at("p90").get<double>());
  const auto& band = cj.at("time_to_train_band_h");
  EXPECT_LT(band.at("p10").get<double>(), cj.at("time_to_train_h").get<double>());
  EXPECT_GT(band.at("p90").get<double>(), cj.at("time_to_train_h").get<double>());
}

TEST_F(Cli, CheckpointPrintsTheReadableReport) {
  const Outcome r = run({"checkpoint", write("s.json", kReliabilityScenario), "--runs", "4"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("stepcast checkpoint: 8b reliability (seed 3, 4 runs per interval)\n", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("\nRecommendation: "), std::string::npos) << r.out;
}

// ---------------------------------------------------------------------------------------
// validate: the shipped validation file predicts (exit 0, --json parseable); a bad file or
// an unusable --scenarios directory exits 2 naming the file and the field.

const std::string kValidationRuns = std::string(STEPCAST_SOURCE_DIR) + "/docs/data/validation-runs.json";

TEST_F(Cli, ValidateShippedFileExitsZero) {
  const Outcome r = run({"validate", kValidationRuns});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(r.out.rfind("stepcast validate: predicted vs measured training runs\n", 0), 0u) << r.out;
}

TEST_F(Cli, ValidateJsonIsParseableWithEveryRecord) {
  const Outcome r = run({"validate", kValidationRuns, "--json", "--scenarios", (dir_ / "sc").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["command"], "validate");
  EXPECT_EQ(j["records"].size(), 16u);  // the shipped file's records
  EXPECT_TRUE(j["summary"]["median_abs_error"].is_number());
  EXPECT_TRUE(fs::exists(dir_ / "sc" / "narayanan2021_t1_1p7B.json"));
}

TEST_F(Cli, ValidateBadFieldExitsTwoNamingIt) {
  const std::string path = write("runs.json", R"({"records": [{"id": "x", "model": {"layers": 2, "hidden": "x",
      "heads": 2, "vocab": 8, "seq_len": 8}, "hardware": {"gpu": "A100", "gpus_total": 8},
      "layout": {"tp": 1, "pp": 1, "global_batch": 8}, "measured": {}}]})");
  const Outcome r = run({"validate", path});
  expect_input_error(r);
  EXPECT_EQ(r.err, "stepcast: error: " + path + ": records[0].model.hidden: expected a positive integer, got \"x\"\n");
}

TEST_F(Cli, ValidateUnwritableScenarioDirExitsTwo) {
  const std::string blocker = write("blocker", "x");
  const Outcome r = run({"validate", kValidationRuns, "--scenarios", blocker});
  expect_input_error(r);
  EXPECT_EQ(r.err.rfind("stepcast: error: scenario_dir " + blocker + ": cannot create directory (", 0), 0u) << r.err;
}

}  // namespace

namespace {

// ---------------------------------------------------------------------------------------
// The executor's commands: bad input is caught before any rank starts (exit 2).

class ExecutorCli : public stepcast::testing_support::CliRunner {};

const std::string kExecScenario = std::string(STEPCAST_SOURCE_DIR) + "/scenarios/execute/cpu-tp2dp2.json";

TEST_F(ExecutorCli, ExecuteRejectsBadOptions) {
  Outcome r = run({"execute", kExecScenario, "--steps", "0"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "stepcast: error: --steps: 0 must be at least 1\n");
  r = run({"execute", kExecScenario, "--scale-down", "0"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "stepcast: error: --scale-down: 0 must be at least 1\n");
  r = run({"execute", kExecScenario, "--backend", "tpu"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "stepcast: error: --backend: \"tpu\" is not a backend (cpu_mpi, cuda_nccl)\n");
}

TEST_F(ExecutorCli, ExecuteReportsScenarioErrorsBeforeStarting) {
  const Outcome bad = run({"execute", write("bad.json", "{\"format\": 1}")});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("model: required"), std::string::npos) << bad.err;
}

TEST_F(ExecutorCli, BenchRejectsUnknownBenchmarkAndSizes) {
  Outcome r = run({"bench", "matmul"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "stepcast: error: bench: \"matmul\" is not a benchmark (gemm, collectives)\n");
  r = run({"bench", "collectives", "--min-bytes", "4096", "--max-bytes", "1024"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "stepcast: error: --min-bytes/--max-bytes: need 0 < min-bytes <= max-bytes\n");
  r = run({"bench", "gemm", "--gpu", "h100"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "stepcast: error: --gpu: unknown GPU preset \"h100\"\n");
}

TEST_F(ExecutorCli, CalibrateRejectsMissingAndForeignFiles) {
  Outcome r = run({"calibrate"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "stepcast: error: calibrate: give measured runs (MEASURED.json) or --bench files\n");
  const std::string missing = (std::filesystem::path(testing::TempDir()) / "no-such-measured.json").string();
  r = run({"calibrate", missing});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "stepcast: error: " + missing + ": no such file or directory\n");
  const std::string foreign = write("scenario.json", "{\"format\": 1, \"kind\": \"something else\"}");
  r = run({"calibrate", foreign});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "stepcast: error: " + foreign + ": kind: not a stepcast measurement (written by `stepcast execute`)\n");
  r = run({"calibrate", "--bench", foreign});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "stepcast: error: " + foreign +
                       ": kind: not a stepcast bench file (written by `stepcast bench ... --json FILE`)\n");
  const std::string garbage = write("garbage.json", "{\"kind\": \"stepcast-measurement\", \"scenario\": 3}");
  r = run({"calibrate", garbage});
  EXPECT_EQ(r.exit_code, 2);
  // Every problem at its JSON path, one line each (tests/cli/executor_cli_test.cc has more).
  EXPECT_EQ(r.err.rfind("stepcast: error: " + garbage + ": format: missing (required)\n" + garbage +
                            ": scenario: expected a string, got 3\n",
                        0),
            0u)
      << r.err;
}

}  // namespace

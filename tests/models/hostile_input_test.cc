// Hostile inputs: values and shapes no real scenario has, chosen to break a naive loader
// (infinite step times, memory blow-ups, minutes of work, millions of error lines, deep
// nesting, files that never end). Each must be a clean input error naming the field, in
// bounded time. The oracle of every message is the loader's contract (scenario.h,
// json_reader.h) and the limits documented in docs/scenarios.md "Limits"; each test
// asserts the whole message.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <string_view>

#include "stepcast/models/calibration.h"
#include "stepcast/models/estimate.h"
#include "stepcast/models/layer_cost.h"
#include "stepcast/models/report.h"
#include "stepcast/models/scenario.h"

namespace stepcast {
namespace {

// llama3-8b on 2 DGX H100 nodes (16 GPUs), plain data parallelism.
std::string scenario(std::string_view model, std::string_view cluster, std::string_view more = "") {
  std::string s = R"({"format": 1, "model": )";
  s += model;
  s += R"(, "cluster": )";
  s += cluster;
  s += R"(, "plan": {"tp": 1, "pp": 1, "dp": 16, "zero": 1, "global_batch": 64})";
  s += more;
  s += "}";
  return s;
}
constexpr std::string_view kLlama8b = R"("llama3-8b")";
constexpr std::string_view kH100x2 = R"({"preset": "dgx-h100", "nodes": 2})";

std::string load_error(std::string_view text) {
  const Result<Scenario> r = parse_scenario(text);
  if (r.ok()) return "(loaded without error)";
  return r.error().message;
}

// A custom GPU: the H100 preset with one field replaced.
std::string h100_with(std::string_view field) {
  std::string c = R"({"preset": "dgx-h100", "nodes": 2, "gpu": {"preset": "h100-sxm", )";
  c += field;
  c += "}}";
  return c;
}


std::size_t lines_of(const std::string& s) { return static_cast<std::size_t>(std::count(s.begin(), s.end(), '\n')) + 1; }

// ---------------------------------------------------------------------------------------
// Physical ranges (docs/scenarios.md "Limits").

TEST(HostileInput, AGpuOfABillionthTflopIsOutsideThePhysicalRange) {
  // 1e-9 TFLOP/s made every compute op last ~1e13 s: an infinite step time. The range is
  // 0.001 to 100000 TFLOP/s.
  EXPECT_EQ(load_error(scenario(kLlama8b, h100_with(R"("bf16_dense_tflops": 1e-9)"))),
            "cluster.gpu.bf16_dense_tflops: 1e-09 is outside the physical range (0.001 to 100000 TFLOP/s)");
  EXPECT_EQ(load_error(scenario(kLlama8b, h100_with(R"("bf16_dense_tflops": 1e9)"))),
            "cluster.gpu.bf16_dense_tflops: 1000000000 is outside the physical range (0.001 to 100000 TFLOP/s)");
  // Zero and negatives keep the reader's message.
  EXPECT_EQ(load_error(scenario(kLlama8b, h100_with(R"("bf16_dense_tflops": 0)"))),
            "cluster.gpu.bf16_dense_tflops: expected a positive number, got 0");
}

TEST(HostileInput, MemoryLinksAndEfficienciesHavePhysicalRanges) {
  EXPECT_EQ(load_error(scenario(kLlama8b, h100_with(R"("hbm_GiB": 1e-6)"))),
            "cluster.gpu.hbm_GiB: 1e-06 is outside the physical range (0.1 to 100000 GiB)");
  EXPECT_EQ(load_error(scenario(kLlama8b, h100_with(R"("hbm_bandwidth_GBps": 0.001)"))),
            "cluster.gpu.hbm_bandwidth_GBps: 0.001 is outside the physical range (0.1 to 1000000 GB/s)");
  EXPECT_EQ(load_error(scenario(kLlama8b, h100_with(R"("gemm_efficiency": 1e-300)"))),
            "cluster.gpu.gemm_efficiency: 1e-300 is outside the physical range (0.01 to 1 of the peak)");
  EXPECT_EQ(load_error(scenario(kLlama8b, R"({"preset": "dgx-h100", "nodes": 2,
                                              "intra_node": {"bandwidth_GBps": 1e-5, "latency_us": 1e6},
                                              "inter_node": {"nic_Gbps": 1e-3},
                                              "storage": {"write_GBps": 1e-9}})")),
            "cluster.intra_node.bandwidth_GBps: 1e-05 is outside the physical range (0.01 to 1000000 GB/s)\n"
            "cluster.intra_node.latency_us: 1000000 is out of range (0 to 100000)\n"
            "cluster.inter_node.nic_Gbps: 0.001 is outside the physical range (0.1 to 10000000 Gb/s)\n"
            "cluster.storage.write_GBps: 1e-09 is outside the physical range (0.001 to 1000000 GB/s)");
  EXPECT_EQ(load_error(scenario(kLlama8b, kH100x2, R"(, "checkpoint": {"d2h_GBps": 1e-7})")),
            "checkpoint.d2h_GBps: 1e-07 is outside the physical range (0.001 to 1000000 GB/s)");
}

TEST(HostileInput, AStepTimeBeyondAMillionSecondsIsRefused) {
  // Every field in range, together absurd: Llama-3-405B on 16 GPUs of 0.001 TFLOP/s at 1 %
  // GEMM efficiency. One step is 6 x 405e9 params x 262,144 tokens = 6.4e17 FLOPs over
  // 16 x 1e9 x 0.01 FLOP/s = about 4e9 s (the exact figure is the closed form's).
  // The closed form takes the GEMM rate from mamf_bf16_tflops (measured) when the GPU
  // gives one: both are set to the bottom of the range.
  const std::string text = scenario(
      R"("llama3-405b")",
      h100_with(R"("bf16_dense_tflops": 0.001, "mamf_bf16_tflops": 0.001, "gemm_efficiency": 0.01)"));
  const std::string msg = load_error(text);
  EXPECT_EQ(msg.rfind("the estimated step time is ", 0), 0u) << msg;
  EXPECT_NE(msg.find(" s, more than the 1e+06 s stepcast simulates (check the model size, the GPU's rates and "
                     "efficiencies, and the calibration)"),
            std::string::npos)
      << msg;
}

TEST(HostileInput, ReportsNeverPrintANonFiniteNumber) {
  // The guard behind the physical ranges: an estimate with an infinite or NaN number is an
  // internal error naming the quantity, never "inf", "nan" or a JSON null.
  auto s = parse_scenario(scenario(kLlama8b, kH100x2));
  ASSERT_TRUE(s.ok()) << s.error().message;
  Estimate e = estimate(*s);
  EXPECT_FALSE(estimate_report_error(e).has_value());
  e.step_time_s = std::numeric_limits<double>::infinity();
  ASSERT_TRUE(estimate_report_error(e).has_value());
  EXPECT_EQ(estimate_report_error(e)->message,
            "internal error: the estimate's step_time_s is inf (not a finite number); please report this scenario");
  e = estimate(*s);
  e.memory.activations = std::nan("");
  ASSERT_TRUE(estimate_report_error(e).has_value());
  EXPECT_EQ(estimate_report_error(e)->message,
            "internal error: the estimate's memory_bytes.activations is nan (not a finite number); please report "
            "this scenario");
  // A loaded scenario passes: its JSON report holds no null (nlohmann writes a non-finite
  // number as null) and its text no "inf" or "nan" number.
  const std::string json = estimate_report_json(*s, estimate(*s));
  EXPECT_EQ(json.find(": null"), std::string::npos) << json;
  const std::string text = estimate_report_text(*s, estimate(*s));
  EXPECT_EQ(text.find(" inf"), std::string::npos) << text;
  EXPECT_EQ(text.find(" nan"), std::string::npos) << text;
}

// ---------------------------------------------------------------------------------------
// Sizes that blew up.

TEST(HostileInput, HundredThousandLayersIsAnInputError) {
  // 100,000 layers ended in std::bad_alloc after 12 s and 1.2 GB (lowering builds ops per
  // layer). The limit is 1,000 layers, about 8x the deepest model trained so far.
  EXPECT_EQ(load_error(scenario(R"({"preset": "llama3-8b", "num_layers": 100000})", kH100x2)),
            "model.num_layers: 100000 is out of range (1 to 1000)");
  // 1,000 layers of Llama-3-8B's width load. (Speed is measured in bench/, not here.)
  auto s = parse_scenario(scenario(R"({"preset": "llama3-8b", "num_layers": 1000})", kH100x2));
  ASSERT_TRUE(s.ok()) << s.error().message;
}

// `n` stragglers, each slowing rank 0 by 1 %.
std::string stragglers(std::size_t n) {
  std::string list;
  list.reserve(n * 48);
  for (std::size_t i = 0; i < n; ++i) {
    if (i) list += ", ";
    list += R"({"kind": "slowdown", "ranks": [0], "factor": 1.01})";
  }
  return R"(, "faults": {"stragglers": [)" + list + "]}";
}

TEST(HostileInput, AMillionStragglersIsAnInputErrorAndAThousandLoadFast) {
  // One million entries ran past 60 s in `estimate`; the cap is 1,000 stragglers.
  // (Empty entries: the cap is checked before any entry is read. The reader parses the 3 MB
  // in well under a second; its old callback parser was quadratic in the array length.)
  std::string empty = R"(, "faults": {"stragglers": [{})";
  for (int i = 1; i < 1'000'000; ++i) empty += ",{}";
  empty += "]}";
  // (Speed is measured in bench/, not in timed unit tests.)
  EXPECT_EQ(load_error(scenario(kLlama8b, kH100x2, empty)),
            "faults.stragglers: 1000000 entries, more than the 1000 stepcast supports");
  auto s = parse_scenario(scenario(kLlama8b, kH100x2, stragglers(1000)));
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->faults.perturb.stragglers.size(), 1000u);
  EXPECT_FALSE(estimate_report_text(*s, estimate(*s)).empty());
}

// ---------------------------------------------------------------------------------------
// Error lists are capped (json_reader.h kMaxDiagnosticLines = 20, then a count).

TEST(HostileInput, AHugeBadArrayGivesTwentyLinesAndACount) {
  // 100,001 ranks: over the list cap, one line.
  std::string ranks = "[0";
  for (int i = 0; i < 100'000; ++i) ranks += ",0";
  ranks += "]";
  EXPECT_EQ(load_error(scenario(kLlama8b, kH100x2,
                                R"(, "faults": {"stragglers": [{"kind": "slowdown", "factor": 2, "ranks": )" + ranks +
                                    "}]}")),
            "faults.stragglers[0].ranks: 100001 entries, more than the 100000 stepcast supports\n"
            "faults.stragglers[0]: a slowdown needs \"ranks\" or \"nodes\"");
  // 50,000 strings: each a type error, reported 20 times and counted, with the straggler's
  // own "needs ranks" (none was read): 50,001 problems.
  std::string bad = "[\"x\"";
  for (int i = 1; i < 50'000; ++i) bad += ",\"x\"";
  bad += "]";
  std::string msg = load_error(scenario(kLlama8b, kH100x2,
                                        R"(, "faults": {"stragglers": [{"kind": "slowdown", "factor": 2, "ranks": )" +
                                            bad + "}]}"));
  EXPECT_EQ(lines_of(msg), 21u) << msg.substr(0, 2000);
  EXPECT_EQ(msg.substr(0, msg.find('\n')), "faults.stragglers[0].ranks[0]: expected a non-negative integer, got \"x\"");
  EXPECT_EQ(msg.substr(msg.rfind('\n') + 1), "... and 49981 more problems (the first 20 are listed)");
}

TEST(HostileInput, LayoutAndFaultErrorListsAreCappedToo) {
  // 50,000 valid ranks outside the 16-GPU cluster: the loader's second pass (after the
  // layout is known, scenario.cc) lists them through the same cap.
  std::string ranks = "[99";
  for (int i = 1; i < 50'000; ++i) ranks += ",99";
  ranks += "]";
  const std::string msg = load_error(scenario(
      kLlama8b, kH100x2, R"(, "faults": {"stragglers": [{"kind": "slowdown", "factor": 2, "ranks": )" + ranks + "}]}"));
  EXPECT_EQ(lines_of(msg), 21u) << msg.substr(0, 2000);
  EXPECT_EQ(msg.substr(0, msg.find('\n')),
            "faults.stragglers[0].ranks[0]: rank 99 is outside the cluster (16 GPUs)");
  EXPECT_EQ(msg.substr(msg.rfind('\n') + 1), "... and 49980 more problems (the first 20 are listed)");
}

TEST(HostileInput, CalibrationErrorListsAreCapped) {
  std::string colls = "[1";
  for (int i = 1; i < 500; ++i) colls += ",1";
  colls += "]";
  const auto c = parse_calibration(R"({"format": 1, "collectives": )" + colls + "}", "fit.json");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(lines_of(c.error().message), 21u);
  EXPECT_EQ(c.error().message.substr(0, c.error().message.find('\n')),
            "fit.json.collectives[0]: expected an object, got 1");
  std::string many = "[{}";
  for (int i = 1; i < 1001; ++i) many += ",{}";
  many += "]";
  const auto d = parse_calibration(R"({"format": 1, "collectives": )" + many + "}", "fit.json");
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error().message, "fit.json.collectives: 1001 entries, more than the 1000 stepcast supports");
}

TEST(HostileInput, CalibrationFiguresHavePhysicalRanges) {
  const auto c = parse_calibration(R"({"format": 1, "compute": {"gemm": {"efficiency": 1e-12}},
      "collectives": [{"kind": "all_reduce", "scope": "intra_node", "alpha_s": 5, "beta_s_per_byte": 0.5}]})",
                                   "fit.json");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().message,
            "fit.json.compute.gemm.efficiency: 1e-12 is outside the physical range (0 = not measured, or 0.01 to 10)\n"
            "fit.json.collectives[0].alpha_s: 5 is out of range (0 to 1)\n"
            "fit.json.collectives[0].beta_s_per_byte: 0.5 is out of range (0 to 1e-06)");
}

// The checkpoint section of a calibration: a round trip through calibration_json, the
// storage figures applied to the cluster, and the physical range of a rate.
TEST(HostileInput, CalibrationCheckpointRatesRoundTripApplyAndHaveRanges) {
  Calibration cal;
  cal.checkpoint.write_GBps = 0.25;
  cal.checkpoint.read_GBps = 1.5;
  cal.checkpoint.snapshot_GBps = 3;
  cal.checkpoint.commit_s = 0.015;
  cal.checkpoint.saves = 4;
  const auto back = parse_calibration(calibration_json(cal), "fit.json");
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->checkpoint.write_GBps, 0.25);
  EXPECT_EQ(back->checkpoint.read_GBps, 1.5);
  EXPECT_EQ(back->checkpoint.snapshot_GBps, 3.0);
  EXPECT_EQ(back->checkpoint.commit_s, 0.015);
  EXPECT_EQ(back->checkpoint.saves, 4);
  ClusterSpec c;
  c.storage_write_GBps = 100;
  c.storage_read_GBps = 200;
  apply_calibration(*back, c);
  EXPECT_EQ(c.storage_write_GBps, 0.25);
  EXPECT_EQ(c.storage_read_GBps, 1.5);
  EXPECT_EQ(c.storage_commit_s, 0.015);
  CheckpointSpec spec;   // d2h_GBps 25 by default: the measured snapshot rate replaces it
  apply_calibration(*back, spec);
  EXPECT_EQ(spec.d2h_GBps, 3.0);
  const auto bad = parse_calibration(
      R"({"format": 1, "checkpoint": {"write_GBps": 1e-7, "read_GBps": -1, "commit_s": -0.5}})", "fit.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message,
            "fit.json.checkpoint.write_GBps: 1e-07 GB/s is below 1 MB/s (0 = not measured)\n"
            "fit.json.checkpoint.read_GBps: -1 is out of range (0 to 100000)\n"
            "fit.json.checkpoint.commit_s: -0.5 is out of range (0 to 3600)");
}

// The host rates of a calibration (optimizer offload): a round trip, applied as the
// measured effective rates (divided by host_efficiency 0.8; the optimizer rate one GPU's
// share of 8), and their physical range.
TEST(HostileInput, CalibrationHostRatesRoundTripApplyAndHaveRanges) {
  Calibration cal;
  cal.host_rates.link_GBps = 20;
  cal.host_rates.link.points = 6;
  cal.host_rates.optimizer_GBps = 40;
  cal.host_rates.optimizer.points = 2;
  const auto back = parse_calibration(calibration_json(cal), "fit.json");
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->host_rates.link_GBps, 20.0);
  EXPECT_EQ(back->host_rates.link.points, 6);
  EXPECT_EQ(back->host_rates.optimizer_GBps, 40.0);
  EXPECT_EQ(back->host_rates.optimizer.points, 2);
  ClusterSpec c;
  c.host_efficiency = 0.8;
  c.gpus_per_node = 8;
  apply_calibration(*back, c);
  EXPECT_DOUBLE_EQ(c.host_link_GBps, 25.0);
  EXPECT_DOUBLE_EQ(c.host_memory_bandwidth_GBps, 400.0);
  // The model's host step on the calibrated cluster runs at the measured 40 GB/s.
  Plan p;
  p.offload_optimizer = 1;
  EXPECT_NEAR(optimizer_step(c, p, 1e9).host_s, 30e9 / 40e9, 1e-12);
  EXPECT_NEAR(optimizer_step(c, p, 1e9).down_s, 4e9 / 20e9, 1e-12);
  const auto bad =
      parse_calibration(R"({"format": 1, "host_rates": {"link_GBps": 1e-7, "optimizer_GBps": -1}})", "fit.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message,
            "fit.json.host_rates.link_GBps: 1e-07 GB/s is below 1 MB/s (0 = not measured)\n"
            "fit.json.host_rates.optimizer_GBps: -1 is out of range (0 to 100000)");
  EXPECT_EQ(parse_calibration(R"({"format": 1, "host_rates": 3})", "fit.json").error().message,
            "fit.json.host_rates: expected an object, got 3");
}

// ---------------------------------------------------------------------------------------
// Calibration files that crashed or hung the loader.

class CalibrationFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("stepcast_hostile_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string with_calibration(const std::string& path) {
    return scenario(kLlama8b, kH100x2, R"(, "calibration": ")" + path + "\"");
  }
  std::filesystem::path dir_;
};

TEST_F(CalibrationFile, DeeplyNestedJsonIsAnInputError) {
  // 100,000 nested arrays crashed the recursive parser (SIGSEGV) before the reader's
  // depth guard (json_reader.h kMaxDepth = 64).
  const std::filesystem::path p = dir_ / "deep.json";
  std::ofstream(p) << R"({"format": 1, "collectives": )" << std::string(100'000, '[') << std::string(100'000, ']')
                   << "}";
  EXPECT_EQ(load_error(with_calibration(p.string())),
            "calibration (" + p.string() + "): invalid JSON: nesting deeper than 64 levels at line 1");
}

TEST_F(CalibrationFile, AFifoIsRefusedWithoutReadingIt) {
  // A FIFO with no writer would block the open forever; /dev/zero would never end.
  const std::filesystem::path p = dir_ / "fifo.json";
  ASSERT_EQ(::mkfifo(p.c_str(), 0600), 0);
  EXPECT_EQ(load_error(with_calibration(p.string())),
            "calibration: " + p.string() + ": not a regular file (a pipe, device or socket)");
}

TEST_F(CalibrationFile, DevZeroIsRefused) {
  EXPECT_EQ(load_error(with_calibration("/dev/zero")),
            "calibration: /dev/zero: not a regular file (a pipe, device or socket)");
}

}  // namespace
}  // namespace stepcast

// The executor's commands as a user meets them: bad measurement and bench files given to
// `calibrate` (and a bad measurement given to `compare`) are refused with messages that
// name the file, the JSON path and the reason; benchmark sizes that cannot fit are refused
// before anything is allocated; a missing plugin is named with where it was looked for.
// Each expected message is the whole stderr.
#include <sys/stat.h>

#include <cstdlib>
#include <string>

#include "cli_runner.h"

namespace stepcast {
namespace {

using testing_support::CliRunner;

const std::string kScenario = std::string(STEPCAST_SOURCE_DIR) + "/scenarios/execute/cpu-tp2dp2.json";

// A well-formed measured.json (two spans of rank 0); `patch` replaces `from` with `to`.
std::string measurement(const std::string& from = "", const std::string& to = "") {
  std::string s = R"({
 "format": 1, "kind": "stepcast-measurement", "scenario": ")" + kScenario + R"(",
 "scale_down": 1, "backend": "cpu_mpi", "device": "d", "communicator": "c", "host": "h",
 "ranks": 4, "warmup": 1, "steps": 1, "step_time_s": [0.5], "step_time_median_s": 0.5,
 "predicted_step_time_s": 0.4,
 "verification": {"elements": 10, "wrong": 0, "errors": []},
 "memory": {"peak_bytes": [0], "predicted_peak_bytes": [1]},
 "timeline": [{"rank": 0, "stage": 0, "step_end": [100], "spans_columns": "op, step, stream, post_ns, begin_ns, end_ns",
               "spans": [[0, 0, 0, 0, 0, 10], [1, 0, 0, 10, 10, 20]]}]
})";
  if (!from.empty()) s.replace(s.find(from), from.size(), to);
  return s;
}

std::string bench_file(const std::string& from = "", const std::string& to = "") {
  std::string s = R"({"format": 1, "kind": "stepcast-bench", "bench": "gemm", "device": "d", "communicator": "c",
 "ranks": 1, "results": [{"m": 64, "n": 64, "k": 64, "time_s": 1e-5, "tflops": 0.05},
                         {"collective": "all_reduce", "bytes": 1024, "count": 256, "ranks": 2, "inter_node": false,
                          "time_s": 1e-5, "algbw_GBps": 0.1, "busbw_GBps": 0.1, "wrong": 0}]})";
  if (!from.empty()) s.replace(s.find(from), from.size(), to);
  return s;
}

std::string deep(int levels) { return std::string(static_cast<std::size_t>(levels), '[') + std::string(static_cast<std::size_t>(levels), ']'); }

using ExecutorCli = CliRunner;

TEST_F(ExecutorCli, CalibrateNamesTheJsonPathOfAWrongTypeInAMeasurement) {
  const std::string p = write("measured.json", measurement("[1, 0, 0, 10, 10, 20]", R"([1, 0, 0, 10, "x", 20])"));
  const auto r = run({"calibrate", p});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "stepcast: error: " + p + ": timeline[0].spans[1].begin_ns: expected a non-negative integer, got \"x\"\n");
  EXPECT_EQ(r.out, "");
}

TEST_F(ExecutorCli, APredictionBandIsReadAndAnInvertedOneIsNamed) {
  const std::string with_band = measurement("\"predicted_step_time_s\": 0.4,",
                                            "\"predicted_step_time_s\": 0.4, \"predicted_step_time_band_s\": "
                                            "{\"p10\": 0.35, \"p90\": 0.47},");
  const std::string ok = write("measured.json", with_band);
  const auto good = run({"compare", kScenario, ok});
  EXPECT_EQ(good.exit_code, 0) << good.err;
  std::string inverted = with_band;
  const std::string p10 = "\"p10\": 0.35";
  inverted.replace(inverted.find(p10), p10.size(), "\"p10\": 0.55");
  const std::string bad = write("inverted.json", inverted);
  const auto r = run({"calibrate", bad});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "stepcast: error: " + bad + ": predicted_step_time_band_s.p10: 0.55 is above p90 (0.47)\n");
}

TEST_F(ExecutorCli, CalibrateListsEveryWrongFieldOfAMeasurement) {
  std::string text = measurement("\"steps\": 1,", "\"steps\": \"one\",");
  text.replace(text.find("\"rank\": 0,"), 10, "\"rank\": -1,");
  text.replace(text.find("\"wrong\": 0"), 10, "\"wrong\": 0.5");
  const std::string p = write("measured.json", text);
  const auto r = run({"calibrate", p});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "stepcast: error: " + p + ": steps: expected an integer, got \"one\"\n" + p +
                       ": verification.wrong: expected an integer, got 0.5\n" + p +
                       ": timeline[0].rank: -1 is out of range (0 to 2147483647)\n");
}

TEST_F(ExecutorCli, CalibrateNamesMissingFieldsOfAMeasurement) {
  std::string text = measurement("\"steps\": 1, ", "");
  text.replace(text.find("\"spans\": ["), std::string("\"spans\": [[0, 0, 0, 0, 0, 10], [1, 0, 0, 10, 10, 20]]").size(),
               "\"spanz\": []");
  const std::string p = write("measured.json", text);
  const auto r = run({"calibrate", p});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "stepcast: error: " + p + ": steps: missing (required)\n" + p +
                       ": timeline[0].spans: missing (required)\n" + p +
                       ": timeline[0].spanz: unknown key; did you mean \"spans\"?\n");
}

TEST_F(ExecutorCli, CalibrateRefusesMalformedAndDeeplyNestedMeasurements) {
  const std::string cut = write("cut.json", measurement().substr(0, 120));
  auto r = run({"calibrate", cut});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err.rfind("stepcast: error: " + cut + ": invalid JSON: ", 0), 0u) << r.err;
  const std::string nested = write("deep.json", measurement("\"errors\": []", "\"errors\": " + deep(100)));
  r = run({"calibrate", nested});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "stepcast: error: " + nested + ": invalid JSON: nesting deeper than 64 levels at line 6\n");
}

TEST_F(ExecutorCli, CalibrateRefusesFifosAndDevicesInsteadOfReadingForever) {
  const std::string fifo = (dir_ / "fifo.json").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto r = run({"calibrate", fifo});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "stepcast: error: " + fifo + ": not a regular file (a pipe, device or socket)\n");
  r = run({"calibrate", "/dev/zero"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "stepcast: error: /dev/zero: not a regular file (a pipe, device or socket)\n");
  r = run({"calibrate", "--bench", "/dev/zero"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "stepcast: error: /dev/zero: not a regular file (a pipe, device or socket)\n");
  r = run({"calibrate", "--bench", fifo});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "stepcast: error: " + fifo + ": not a regular file (a pipe, device or socket)\n");
}

TEST_F(ExecutorCli, CalibrateNamesTheJsonPathOfBadBenchFiles) {
  auto p = write("gemm.json", bench_file("\"time_s\": 1e-5, \"tflops\"", "\"time_s\": \"fast\", \"tflops\""));
  auto r = run({"calibrate", "--bench", p});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "stepcast: error: " + p + ": results[0].time_s: expected a positive number, got \"fast\"\n");
  // A zero time would make the point's rates infinite (found by the bench fuzz target).
  p = write("zero.json", bench_file("\"time_s\": 1e-5, \"tflops\"", "\"time_s\": 0, \"tflops\""));
  r = run({"calibrate", "--bench", p});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "stepcast: error: " + p + ": results[0].time_s: expected a positive number, got 0\n");
  p = write("coll.json", bench_file("\"collective\": \"all_reduce\"", "\"collective\": \"allreduce\""));
  r = run({"calibrate", "--bench", p});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err.rfind("stepcast: error: " + p + ": results[1].collective: ", 0), 0u) << r.err;
  p = write("missing.json", bench_file("\"inter_node\": false,", ""));
  r = run({"calibrate", "--bench", p});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "stepcast: error: " + p + ": results[1].inter_node: missing (required)\n");
  p = write("cut.json", bench_file().substr(0, 40));
  r = run({"calibrate", "--bench", p});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err.rfind("stepcast: error: " + p + ": invalid JSON: ", 0), 0u) << r.err;
  p = write("deep.json", bench_file("\"ranks\": 1,", "\"x\": " + deep(70) + ", \"ranks\": 1,"));
  r = run({"calibrate", "--bench", p});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "stepcast: error: " + p + ": invalid JSON: nesting deeper than 64 levels at line 2\n");
}

TEST_F(ExecutorCli, CompareNamesTheJsonPathOfABadMeasurement) {
  const std::string p = write("measured.json", measurement("\"step_end\": [100]", "\"step_end\": [\"late\"]"));
  const auto r = run({"compare", p, kScenario});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "stepcast: error: " + p + ": timeline[0].step_end[0]: expected a non-negative integer, got \"late\"\n");
}

// Oracle for the need: f32 on the cpu, 2.5e14 elements; send + receive buffers 2e15 bytes
// plus three float copies for the check 3e15 bytes: 5e15 bytes = 5e+06 GB on one rank.
TEST_F(ExecutorCli, BenchRefusesCollectiveSizesThatCannotFit) {
  const auto r = run({"bench", "collectives", "--max-bytes", "1e15"});
  EXPECT_EQ(r.exit_code, 2);
  const std::string head =
      "stepcast: error: --max-bytes: 1e+15 needs about 5e+06 GB of host memory (1 rank on this node, each with send "
      "and receive buffers and the check's copies), more than the ";
  EXPECT_EQ(r.err.rfind(head, 0), 0u) << r.err;
  EXPECT_EQ(r.err.substr(r.err.size() - 11), " available\n") << r.err;
}

TEST_F(ExecutorCli, BenchRefusesGemmSizesBeyondTheCap) {
  const auto r = run({"bench", "gemm", "--max-size", "1000000000"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "stepcast: error: --max-size: 1000000000 is out of range (64 to 65536)\n");
}

TEST_F(ExecutorCli, AMissingPluginIsNamedWithWhereItWasLookedFor) {
  ::setenv("STEPCAST_PLUGIN_DIR", "/nonexistent-stepcast-plugins", 1);
  const auto r = run({"bench", "gemm", "--max-size", "64"});
  ::unsetenv("STEPCAST_PLUGIN_DIR");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "stepcast: error: --backend cpu_mpi: cannot load libstepcast-mpi.so (tried "
            "/nonexistent-stepcast-plugins/libstepcast-mpi.so): /nonexistent-stepcast-plugins/libstepcast-mpi.so: "
            "cannot open shared object file: No such file or directory (configure with -DSTEPCAST_WITH_MPI=ON, or set "
            "STEPCAST_PLUGIN_DIR)\n");
}

TEST_F(ExecutorCli, AnUnknownBackendIsAnInputError) {
  const auto r = run({"execute", kScenario, "--backend", "tpu"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "stepcast: error: --backend: \"tpu\" is not a backend (cpu_mpi, cuda_nccl)\n");
}

// `execute --train`, `--resume-check` and `checkpoint --reshard-to`: bad input is refused
// with the field named and exit code 2, before any rank starts or any file is written.
TEST_F(ExecutorCli, TrainRefusesLayoutsItCannotRunNamingTheField) {
  const std::string pp = std::string(STEPCAST_SOURCE_DIR) + "/scenarios/execute/cpu-pp2-1f1b.json";
  auto r = run({"execute", "--train", pp});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("plan.pp"), std::string::npos) << r.err;
  r = run({"execute", "--train", kScenario, "--layout", "tp=3"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "stepcast: error: plan.tp: 3 does not divide model.num_attention_heads (4)\n");
  r = run({"execute", "--train", kScenario, "--layout", "tq=1"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "stepcast: error: --layout: \"tq\" is not a layout key (tp, pp, dp, cp, ep, etp, zero, gpus)\n");
  r = run({"execute", "--train", kScenario, "--omit", "rng,weights"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "stepcast: error: --omit: \"weights\" is not a part of the training state (model, optimizer, scheduler, "
            "grad_scaler, rng, sampler, step, config)\n");
  r = run({"execute", "--train", kScenario, "--crash", "shard-sideways"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err.rfind("stepcast: error: --crash: crash point 'shard-sideways'", 0), 0U) << r.err;
  EXPECT_NE(r.err.find("unknown point 'shard-sideways'"), std::string::npos) << r.err;
  r = run({"execute", "--train", kScenario, "--steps", "0"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "stepcast: error: --steps: 0 must be at least 1\n");
  r = run({"execute", kScenario, "--resume-check", "0"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "stepcast: error: --resume-check: 0 must be at least 1\n");
}

TEST_F(ExecutorCli, ReshardToRefusesAnImpossibleLayout) {
  const std::string s = std::string(STEPCAST_SOURCE_DIR) + "/scenarios/llama3-70b-64xh100.json";
  auto r = run({"checkpoint", s, "--reshard-to", "tp=3"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--reshard-to: plan.tp"), std::string::npos) << r.err;
  r = run({"checkpoint", s, "--reshard-to", "gpus=32"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("To         32 GPUs"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace stepcast

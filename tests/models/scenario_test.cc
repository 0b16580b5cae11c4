// The scenario loader (docs/interfaces.md "Scenario"): what it accepts, and for
// what it rejects, the whole message. The oracle of every message is the loader's
// contract (scenario.h): one line per problem, each naming the JSON path and the reason
// in the style `plan.tp: 3 does not divide num_attention_heads (64)`; the numbers in a
// message are the preset figures of models/data/*.json, quoted in each test.
#include "stepcast/models/names.h"
#include "stepcast/models/scenario.h"
#include "stepcast/models/collectives.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

namespace stepcast {
namespace {

// llama3-70b: 80 layers, 64 attention heads, 8 KV heads, max_seq_len 8192.
constexpr std::string_view kLlama70b = R"("llama3-70b")";
// 8 DGX H100 nodes of 8 GPUs: 64 GPUs.
constexpr std::string_view kH100x8 = R"({"preset": "dgx-h100", "nodes": 8})";
// A plan that fits both: 8 x 4 x 1 x 2 = 64.
constexpr std::string_view kPlan = R"({"tp": 8, "pp": 4, "dp": 2})";

// A format-1 scenario; `more` is appended inside the top-level object (", key: value").
std::string scenario(std::string_view model, std::string_view cluster, std::string_view plan,
                     std::string_view more = "") {
  std::string s = R"({"format": 1, "model": )";
  s += model;
  s += R"(, "cluster": )";
  s += cluster;
  s += R"(, "plan": )";
  s += plan;
  s += more;
  s += "}";
  return s;
}
std::string llama70b_plan(std::string_view plan, std::string_view more = "") {
  return scenario(kLlama70b, kH100x8, plan, more);
}

// The loader's message, or a marker that can never equal one when the text loads.
std::string load_error(std::string_view text) {
  const Result<Scenario> r = parse_scenario(text);
  if (r.ok()) return "(loaded without error)";
  return r.error().message;
}

Scenario load_ok(std::string_view text) {
  Result<Scenario> r = parse_scenario(text);
  if (!r.ok()) {
    ADD_FAILURE() << "unexpected error:\n" << r.error().message;
    return Scenario{};
  }
  return std::move(r).value();
}

// ---------------------------------------------------------------------------------------
// The text is not a JSON object.

TEST(ScenarioErrors, SyntaxErrorNamesLineAndColumn) {
  // The ':' after "model" is missing; the parser stops at the end of the unexpected
  // string "llama3-70b", which spans columns 11 to 22 of line 3.
  EXPECT_EQ(load_error("{\n  \"format\": 1,\n  \"model\" \"llama3-70b\"\n}"),
            "invalid JSON: parse error at line 3, column 22: syntax error while parsing object "
            "separator - unexpected string literal; expected ':'");
}

TEST(ScenarioErrors, TruncatedDocumentIsAnUnexpectedEnd) {
  // The input ends after its 31 characters, where a key was expected (column 32).
  EXPECT_EQ(load_error(R"({"format": 1, "plan": {"tp": 8,)"),
            "invalid JSON: parse error at line 1, column 32: syntax error while parsing object "
            "key - unexpected end of input; expected string literal");
}

TEST(ScenarioErrors, TrailingCommaIsASyntaxError) {
  EXPECT_EQ(load_error(R"({"format": 1,})"),
            "invalid JSON: parse error at line 1, column 14: syntax error while parsing object "
            "key - unexpected '}'; expected string literal");
}

TEST(ScenarioErrors, EmptyTextIsAnEmptyDocument) {
  EXPECT_EQ(load_error(""), "empty document: expected a JSON object");
}

TEST(ScenarioErrors, WhitespaceOnlyIsAnEmptyDocument) {
  EXPECT_EQ(load_error(" \n\t\r\n  "), "empty document: expected a JSON object");
}

TEST(ScenarioErrors, CommentsOnlyAreAnEmptyDocument) {
  EXPECT_EQ(load_error("// nothing here\n/* nor\n here */\n"),
            "empty document: expected a JSON object");
}

TEST(ScenarioErrors, BinaryGarbageWithNulBytesIsCalledBinary) {
  // The first bytes of a PNG file: the first NUL follows "\x89PNG\r\n\x1a\n", so it is the
  // first byte of line 3.
  const std::string png("\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\x01\0", 20);
  EXPECT_EQ(load_error(png), "invalid JSON: NUL byte at line 3, column 1 (is this a binary file?)");
}

TEST(ScenarioErrors, NulAfterAValidDocumentIsNotTheEndOfInput) {
  // nlohmann's lexer reads NUL as the end of input and would load this, dropping the rest.
  const std::string text = llama70b_plan(kPlan) + std::string("\0garbage", 8);
  EXPECT_EQ(load_error(text), "invalid JSON: NUL byte at line 1, column " +
                                  std::to_string(llama70b_plan(kPlan).size() + 1) +
                                  " (is this a binary file?)");
}

TEST(ScenarioErrors, BinaryGarbageIsQuotedPrintably) {
  // Bytes that are not UTF-8; the parser quotes the one it stopped at (0x89), and the
  // message shows it as \x89 rather than as a raw byte.
  EXPECT_EQ(load_error("\x89\xff\xfe\x01garbage"),
            "invalid JSON: parse error at line 1, column 1: syntax error while parsing value - "
            "invalid literal; last read: '\\x89'");
}

TEST(ScenarioErrors, ControlCharacterInAStringIsQuotedAsCodePoint) {
  // A raw tab (the 12th character) inside a string is not JSON; the parser names it <U+0009>.
  EXPECT_EQ(load_error("{\"name\": \"a\tb\"}"),
            "invalid JSON: parse error at line 1, column 12: syntax error while parsing value - "
            "invalid string: control character U+0009 (HT) must be escaped to \\u0009 or \\t; "
            "last read: '\"a<U+0009>'");
}

TEST(ScenarioErrors, QkNormMustBeABooleanNamedByItsField) {
  EXPECT_EQ(load_error(R"({"model": {"preset": "qwen3-30b-a3b", "qk_norm": "yes"}, "cluster": "dgx-h100",)"
                       R"( "plan": {"ep": 8}})"),
            "model.qk_norm: expected true or false, got \"yes\"");
}

TEST(ScenarioErrors, TopLevelArrayIsNotAScenario) {
  EXPECT_EQ(load_error(R"([1, 2, 3])"), "expected a JSON object at the top level, got [1,2,3]");
}

TEST(ScenarioErrors, TopLevelStringIsNotAScenario) {
  EXPECT_EQ(load_error(R"("llama3-70b")"),
            "expected a JSON object at the top level, got \"llama3-70b\"");
}

TEST(ScenarioErrors, TenThousandNestedArraysAreRejectedWithoutRecursion) {
  // A scenario is 4 levels deep; the prescan stops at level 65 before the recursive parser
  // (and the recursive destructor of nlohmann::json) could exhaust the stack.
  const std::string deep = std::string(10'000, '[') + std::string(10'000, ']');
  EXPECT_EQ(load_error(deep), "invalid JSON: nesting deeper than 64 levels at line 1");
}

TEST(ScenarioErrors, TenThousandNestedObjectsInsideAFieldAreRejected) {
  std::string deep = "{\n\"format\": 1,\n\"expect\": ";
  for (int i = 0; i < 10'000; ++i) deep += "{\"a\": ";
  deep += "1";
  deep += std::string(10'000, '}');
  deep += "}";
  // The outer object is level 1, so level 65 is the 64th "{" of the expect value, on line 3.
  EXPECT_EQ(load_error(deep), "invalid JSON: nesting deeper than 64 levels at line 3");
}

TEST(ScenarioErrors, BracketsInStringsAndCommentsDoNotCountAsNesting) {
  // 100 '[' inside a string and 100 '{' inside a comment: the document is 2 levels deep,
  // so the loader gets past the prescan and reports the real problem.
  const std::string text = "{\"name\": \"" + std::string(100, '[') + "\", /* " +
                           std::string(100, '{') + " */ \"format\": 2}";
  EXPECT_EQ(load_error(text),
            "format: 2 is not supported (this stepcast reads format 1)\n"
            "model: required: a preset name or an object\n"
            "cluster: required: a preset name or an object\n"
            "plan: required: an object with tp, pp, dp, ...");
}

TEST(ScenarioErrors, NumberBeyondADoubleIsReportedAtItsField) {
  // JSON has no infinity; 1e400 overflows a double, and the parser refuses it.
  EXPECT_EQ(load_error(llama70b_plan(R"({"tp": 1e400})")),
            "plan.tp: 1e400 is beyond the range of a number (about 1.8e308)");
}

TEST(ScenarioErrors, NegativeNumberBeyondADoubleIsReportedAtItsArrayElement) {
  EXPECT_EQ(load_error(llama70b_plan(kPlan, R"(, "expect": {"mfu": [0.1, -1e999]})")),
            "expect.mfu[1]: -1e999 is beyond the range of a number (about 1.8e308)");
}

TEST(ScenarioErrors, InfinityAndNanLiteralsAreNotJson) {
  EXPECT_EQ(load_error(R"({"seed": Infinity})"),
            "invalid JSON: parse error at line 1, column 10: syntax error while parsing value - "
            "invalid literal; last read: '\"seed\": I'");
  EXPECT_EQ(load_error(R"({"seed": NaN})"),
            "invalid JSON: parse error at line 1, column 10: syntax error while parsing value - "
            "invalid literal; last read: '\"seed\": N'");
}

TEST(ScenarioErrors, DuplicateKeyIsAnErrorNotASilentOverride) {
  // nlohmann keeps the last value; the loader reports the repetition instead.
  EXPECT_EQ(load_error(llama70b_plan(R"({"tp": 8, "pp": 4, "tp": 2})")),
            "plan.tp: duplicate key (each key may appear once)");
}

// ---------------------------------------------------------------------------------------
// Unknown names, with "did you mean".

TEST(ScenarioErrors, UnknownTopLevelKeySuggestsTheClosest) {
  EXPECT_EQ(load_error(llama70b_plan(kPlan, R"(, "workloads": {"seq_len": 8192})")),
            "workloads: unknown key; did you mean \"workload\"?");
}

TEST(ScenarioErrors, UnknownPlanKeySuggestsTheClosest) {
  EXPECT_EQ(load_error(llama70b_plan(R"({"tpp": 8, "pp": 4, "dp": 2})")),
            "plan.tpp: unknown key; did you mean \"tp\"?");
}

TEST(ScenarioErrors, UnknownKeyFarFromAnyGetsNoSuggestion) {
  EXPECT_EQ(load_error(llama70b_plan(R"({"tp": 8, "pp": 4, "dp": 2, "banana": 1})")),
            "plan.banana: unknown key");
}

TEST(ScenarioErrors, UnknownModelPresetSuggestsTheClosest) {
  EXPECT_EQ(load_error(scenario(R"("llama3-70")", kH100x8, kPlan)),
            "model: unknown model preset \"llama3-70\"; did you mean \"llama3-70b\"? (stepcast "
            "presets lists them)");
}

TEST(ScenarioErrors, UnknownClusterPresetSuggestsTheClosest) {
  // "dgx-h900" is one edit from dgx-h100 and dgx-h200; the first in key order wins.
  EXPECT_EQ(load_error(scenario(kLlama70b, R"({"preset": "dgx-h900", "nodes": 8})", kPlan)),
            "cluster.preset: unknown cluster preset \"dgx-h900\"; did you mean \"dgx-h100\"? "
            "(stepcast presets lists them)");
}

TEST(ScenarioErrors, UnknownClusterPresetFarFromAnyGetsNoSuggestion) {
  EXPECT_EQ(load_error(scenario(kLlama70b, R"("tpu-v5p-pod")", kPlan)),
            "cluster: unknown cluster preset \"tpu-v5p-pod\" (stepcast presets lists them)");
}

TEST(ScenarioErrors, UnknownGpuInsideAClusterSuggestsItsCompletion) {
  // "h100" is 2 edits from "b200" but the start of only "h100-sxm".
  EXPECT_EQ(load_error(scenario(kLlama70b, R"({"gpu": "h100", "nodes": 8})", kPlan)),
            "cluster.gpu: unknown gpu preset \"h100\"; did you mean \"h100-sxm\"? (stepcast "
            "presets lists them)");
}

TEST(ScenarioErrors, NewlineInAPresetNameCannotSplitTheMessage) {
  // The JSON string "llama3\n70b" holds a newline; one problem stays one line.
  EXPECT_EQ(load_error(scenario(R"("llama3\n70b")", kH100x8, kPlan)),
            "model: unknown model preset \"llama3\\n70b\"; did you mean \"llama3-70b\"? "
            "(stepcast presets lists them)");
}

// ---------------------------------------------------------------------------------------
// Wrong types and out-of-range values.

TEST(ScenarioErrors, StringWhereANumberIsExpected) {
  EXPECT_EQ(load_error(llama70b_plan(R"({"tp": "8", "pp": 4, "dp": 2})")),
            "plan.tp: expected an integer, got \"8\"");
}

TEST(ScenarioErrors, StringWithUnitWhereAPositiveNumberIsExpected) {
  const std::string cluster =
      R"({"preset": "dgx-h100", "nodes": 8, "inter_node": {"nic_Gbps": "400G"}})";
  EXPECT_EQ(load_error(scenario(kLlama70b, cluster, kPlan)),
            "cluster.inter_node.nic_Gbps: expected a positive number, got \"400G\"");
}

TEST(ScenarioErrors, NumberWhereABooleanIsExpected) {
  EXPECT_EQ(load_error(llama70b_plan(R"({"tp": 8, "pp": 4, "dp": 2, "sequence_parallel": 1})")),
            "plan.sequence_parallel: expected true or false, got 1");
  // TP communication overlap needs SP and tp > 1 (the overlapped collectives are SP's).
  EXPECT_EQ(load_error(llama70b_plan(R"({"tp": 8, "pp": 4, "dp": 2, "tp_comm_overlap": true})")),
            "plan.tp_comm_overlap: needs tensor parallelism with sequence parallelism (tp = 8, "
            "sequence_parallel = false); it overlaps the sequence-parallel all-gathers and reduce-scatters "
            "with the GEMMs");
  EXPECT_EQ(load_error(llama70b_plan(R"({"tp": 1, "pp": 8, "dp": 8, "sequence_parallel": true, "tp_comm_overlap": true})")),
            "plan.tp_comm_overlap: needs tensor parallelism with sequence parallelism (tp = 1, "
            "sequence_parallel = true); it overlaps the sequence-parallel all-gathers and reduce-scatters "
            "with the GEMMs");
  EXPECT_EQ(load_error(llama70b_plan(R"({"tp": 8, "pp": 4, "dp": 2, "sequence_parallel": true, "tp_comm_overlap": "yes"})")),
            "plan.tp_comm_overlap: expected true or false, got \"yes\"");
}

TEST(ScenarioErrors, ArrayWhereAnObjectIsExpected) {
  EXPECT_EQ(load_error(llama70b_plan("[8, 4, 2]")), "plan: expected an object, got [8,4,2]");
  EXPECT_EQ(load_error(scenario(kLlama70b, R"({"preset": "dgx-h100", "intra_node": [450]})",
                                kPlan)),
            "cluster.intra_node: expected an object, got [450]");
}

TEST(ScenarioErrors, LongValueIsShortenedAtACharacterBoundary) {
  // A value is quoted up to 37 bytes then "...". "\"a" is 2 bytes and each "é" 2 more, so
  // byte 37 is the second half of the 18th "é": the cut moves back to keep 17 whole ones.
  std::string long_value = "a";
  for (int i = 0; i < 30; ++i) long_value += "\u00e9";
  std::string shown = "\"a";
  for (int i = 0; i < 17; ++i) shown += "\xc3\xa9";
  EXPECT_EQ(load_error(llama70b_plan(R"({"tp": ")" + long_value + R"(", "pp": 4, "dp": 2})")),
            "plan.tp: expected an integer, got " + shown + "...");
}

TEST(ScenarioErrors, NumberWhereAModelIsExpected) {
  EXPECT_EQ(load_error(scenario("70", kH100x8, kPlan)),
            "model: expected a model preset name or an object, got 70");
}

TEST(ScenarioErrors, NegativeHiddenSizeIsOutOfRange) {
  EXPECT_EQ(load_error(scenario(R"({"preset": "llama3-70b", "hidden_size": -1})", kH100x8, kPlan)),
            "model.hidden_size: -1 is out of range (1 to 10000000)");
}

TEST(ScenarioErrors, SlidingWindowFieldsAreCheckedByName) {
  EXPECT_EQ(load_error(scenario(R"({"preset": "llama3-70b", "sliding_window": 0})", kH100x8, kPlan)),
            "model.sliding_window: 0 is out of range (1 to 100000000)");
  EXPECT_EQ(load_error(scenario(R"({"preset": "llama3-70b", "sliding_window": 4096, "window_attn_skip_freq": 1})",
                                kH100x8, kPlan)),
            "model.window_attn_skip_freq: 1 would keep every layer at full attention; give 0 (every layer "
            "windowed) or N >= 2 (layers numbered N, 2N, ... keep full attention), or drop sliding_window");
  EXPECT_EQ(load_error(scenario(R"({"preset": "llama3-70b", "window_attn_skip_freq": 2})", kH100x8, kPlan)),
            "model.window_attn_skip_freq: given without sliding_window (the window's size in tokens)");
  EXPECT_EQ(load_error(scenario(R"({"preset": "llama3-70b", "window_attn_skip_freq": -2})", kH100x8, kPlan)),
            "model.window_attn_skip_freq: -2 is out of range (0 to 1000)");
  // A preset's window is turned off by null, and a scenario may give one to any model.
  const Scenario off = load_ok(scenario(R"({"preset": "gpt-oss-120b", "sliding_window": null})",
                                        R"({"preset": "dgx-h100", "nodes": 8})", R"({"tp": 1, "pp": 4, "ep": 8})"));
  EXPECT_EQ(off.model.sliding_window, 0);
  const Scenario on = load_ok(scenario(R"({"preset": "llama3-70b", "sliding_window": 4096})", kH100x8, kPlan));
  EXPECT_EQ(on.model.sliding_window, 4096);
  EXPECT_EQ(on.model.window_attn_skip_freq, 0);
}

TEST(ScenarioErrors, NegativeNodeCountIsOutOfRange) {
  EXPECT_EQ(load_error(scenario(kLlama70b, R"({"preset": "dgx-h100", "nodes": -2})", kPlan)),
            "cluster.nodes: -2 is out of range (1 to 1000000)");
}

TEST(ScenarioErrors, ZeroTensorParallelismIsOutOfRange) {
  EXPECT_EQ(load_error(llama70b_plan(R"({"tp": 0, "pp": 4, "dp": 2})")),
            "plan.tp: 0 is out of range (1 to 1000000)");
}

TEST(ScenarioErrors, ZeroGpuThroughputIsNotPositive) {
  const std::string cluster = R"({"preset": "dgx-h100", "nodes": 8,
      "gpu": {"preset": "h100-sxm", "bf16_dense_tflops": 0}})";
  EXPECT_EQ(load_error(scenario(kLlama70b, cluster, kPlan)),
            "cluster.gpu.bf16_dense_tflops: expected a positive number, got 0");
}

TEST(ScenarioErrors, FractionalTensorParallelismIsNotAnInteger) {
  EXPECT_EQ(load_error(llama70b_plan(R"({"tp": 2.5, "pp": 4, "dp": 2})")),
            "plan.tp: expected an integer, got 2.5");
}

TEST(ScenarioErrors, AbsurdNodeCountIsOutOfRange) {
  // 1e15 is a JSON float; it is integral, so the range is what fails.
  EXPECT_EQ(load_error(scenario(kLlama70b, R"({"preset": "dgx-h100", "nodes": 1e15})", kPlan)),
            "cluster.nodes: 1000000000000000 is out of range (1 to 1000000)");
}

TEST(ScenarioErrors, AbsurdGlobalBatchIsOutOfRange) {
  EXPECT_EQ(load_error(llama70b_plan(R"({"tp": 8, "pp": 4, "dp": 2, "global_batch": 1e12})")),
            "plan.global_batch: 1000000000000 is out of range (1 to 1000000000)");
}

TEST(ScenarioErrors, SeedOfTwoToThe63IsOutOfRangeNotWrapped) {
  // 9223372036854775808.0 = 2^63 is one past INT64_MAX; converting it would be undefined
  // (it used to wrap to -9223372036854775808 in the message). As a double it prints in
  // shortest round-trip form.
  EXPECT_EQ(load_error(llama70b_plan(kPlan, R"(, "seed": 9223372036854775808.0)")),
            "seed: 9.223372036854776e+18 is out of range (0 to 9223372036854775807)");
}

TEST(ScenarioErrors, UnsignedSeedAboveInt64IsOutOfRange) {
  EXPECT_EQ(load_error(llama70b_plan(kPlan, R"(, "seed": 18446744073709551615)")),
            "seed: 18446744073709551615 is out of range (0 to 9223372036854775807)");
}

TEST(ScenarioErrors, DerivedGlobalBatchHasTheSameRangeAsAGivenOne) {
  // dp = 1000000 nodes x 1024 GPUs = 1024000000; x microbatch 1000000 = 1.024e15 sequences,
  // whose tokens per step would overflow int64 at seq_len 16384.
  EXPECT_EQ(load_error(scenario(R"("llama3-8b")",
                                R"({"preset": "dgx-h100", "nodes": 1000000, "gpus_per_node": 1024})",
                                R"({"tp": 1, "microbatch": 1000000})")),
            "plan.global_batch: not given, and microbatch x dp = 1000000 x 1024000000 = "
            "1024000000000000 is out of range (1 to 1000000000)");
}

TEST(ScenarioErrors, AbsurdModelIsRejectedBeforeItsParameterCountOverflows) {
  // Every size within its own range, but per layer Q, K, V, O = 4 x h x a x d_h = 4e12
  // and the FFN 3 x h x F = 3e12: 1000 layers hold about 7e15 parameters.
  const std::string model = R"({"num_layers": 1000, "hidden_size": 1000000,
      "num_attention_heads": 1000, "ffn_hidden_size": 1000000, "vocab_size": 1000,
      "max_seq_len": 1000})";
  EXPECT_EQ(load_error(scenario(model, R"("dgx-h100")", R"({"tp": 8})")),
            "model: about 7e+15 parameters, more than the 1e+15 stepcast supports");
}

TEST(ScenarioErrors, UnknownScheduleListsTheChoices) {
  EXPECT_EQ(load_error(llama70b_plan(R"({"tp": 8, "pp": 4, "dp": 2, "schedule": "1f1")"
                                     R"(})")),
            "plan.schedule: \"1f1\" is not one of \"gpipe\", \"1f1b\", \"interleaved\"; did you "
            "mean \"1f1b\"?");
}

// ---------------------------------------------------------------------------------------
// Layouts that do not fit the model or the cluster.

TEST(ScenarioErrors, TpMustDivideAttentionHeads) {
  // 3 nodes = 24 GPUs = 3 x 1 x 1 x 8, so only the head split is wrong: 64 % 3 = 1.
  EXPECT_EQ(load_error(scenario(kLlama70b, R"({"preset": "dgx-h100", "nodes": 3})",
                                R"({"tp": 3, "dp": 8})")),
            "plan.tp: 3 does not divide num_attention_heads (64)");
}

TEST(ScenarioErrors, TpAboveKvHeadsNeedsReplicationToBeSaid) {
  // 16 divides 64 heads but not 8 KV heads; 16 / 8 = 2 ranks would hold each KV head.
  EXPECT_EQ(load_error(scenario(kLlama70b, R"({"preset": "dgx-h100", "nodes": 2})",
                                R"({"tp": 16, "dp": 1})")),
            "plan.tp: 16 does not divide num_kv_heads (8); set plan.replicate_kv_heads to true to "
            "replicate each KV head on 2 ranks");
}

TEST(ScenarioErrors, TpNotAMultipleOfKvHeadsCannotBeReplicated) {
  // 24 heads in 6 KV groups: tp 4 divides 24 but neither divides nor is a multiple of 6,
  // so replication does not help.
  const std::string model = R"({"num_layers": 4, "hidden_size": 3072,
      "num_attention_heads": 24, "num_kv_heads": 6, "vocab_size": 32000, "max_seq_len": 4096})";
  EXPECT_EQ(load_error(scenario(model, R"({"preset": "dgx-h100"})",
                                R"({"tp": 4, "dp": 2, "replicate_kv_heads": true})")),
            "plan.tp: 4 does not divide num_kv_heads (6)");
}

TEST(ScenarioErrors, PipelineChunksMustNotExceedLayers) {
  // 8 stages x 16 virtual stages = 128 chunks > 80 layers; 8 x 8 x 1 x 1 = 64 GPUs and
  // 8 microbatches (a multiple of pp) keep the rest valid.
  EXPECT_EQ(load_error(llama70b_plan(R"({"tp": 8, "pp": 8, "dp": 1, "schedule": "interleaved",
                                         "virtual_stages": 16, "global_batch": 8})")),
            "plan.pp: 8 stages x 16 virtual stages = 128 model chunks exceed num_layers (80)");
}

TEST(ScenarioErrors, InterleavedNeedsVirtualStages) {
  // 64 / (1 x 2) = 32 microbatches, a multiple of pp 4.
  EXPECT_EQ(load_error(llama70b_plan(R"({"tp": 8, "pp": 4, "dp": 2, "schedule": "interleaved",
                                         "global_batch": 64})")),
            "plan.schedule: \"interleaved\" needs virtual_stages >= 2 (got 1)");
}

TEST(ScenarioErrors, InterleavedNeedsAPipeline) {
  EXPECT_EQ(load_error(llama70b_plan(R"({"tp": 8, "pp": 1, "dp": 8, "schedule": "interleaved",
                                         "virtual_stages": 2})")),
            "plan.schedule: \"interleaved\" needs pp >= 2 (got 1)");
}

TEST(ScenarioErrors, VirtualStagesNeedTheInterleavedSchedule) {
  EXPECT_EQ(load_error(llama70b_plan(R"({"tp": 8, "pp": 4, "dp": 2, "virtual_stages": 2})")),
            "plan.virtual_stages: 2 needs schedule \"interleaved\"");
}

TEST(ScenarioErrors, WorldMustEqualTheClusterGpus) {
  EXPECT_EQ(load_error(llama70b_plan(R"({"tp": 8, "pp": 4, "dp": 4})")),
            "plan: tp x pp x cp x dp = 8 x 4 x 1 x 4 = 128, but the cluster has 64 GPUs "
            "(8 nodes x 8)");
}

TEST(ScenarioErrors, AbsurdDegreesAreReportedWithoutOverflow) {
  // 10^6 to the 4th is 10^24, beyond int64 (about 9.2e18): the product is shown as a
  // double instead of a wrapped integer. Every other check fails too, in order.
  EXPECT_EQ(load_error(llama70b_plan(
                R"({"tp": 1000000, "pp": 1000000, "cp": 1000000, "dp": 1000000})")),
            "plan.tp: 1000000 does not divide num_attention_heads (64)\n"
            "plan.pp: 1000000 stages x 1 virtual stages = 1000000 model chunks exceed "
            "num_layers (80)\n"
            "plan: tp x pp x cp x dp = 1000000 x 1000000 x 1000000 x 1000000 = 1e+24, but the "
            "cluster has 64 GPUs (8 nodes x 8)\n"
            "plan.cp: 1000000 does not divide workload.seq_len (8192)");
}

TEST(ScenarioErrors, OmittedDpMustBeDerivable) {
  // 64 GPUs / (8 x 3 x 1) is not whole.
  EXPECT_EQ(load_error(llama70b_plan(R"({"tp": 8, "pp": 3})")),
            "plan: tp x pp x cp = 8 x 3 x 1 = 24 does not divide the cluster's 64 GPUs "
            "(8 nodes x 8)");
}

TEST(ScenarioErrors, GlobalBatchMustDivideByMicrobatchTimesDp) {
  EXPECT_EQ(load_error(llama70b_plan(
                R"({"tp": 8, "pp": 4, "dp": 2, "microbatch": 2, "global_batch": 6})")),
            "plan.global_batch: 6 is not divisible by microbatch x dp = 2 x 2 = 4");
}

TEST(ScenarioErrors, InterleavedMicrobatchCountMustBeAMultipleOfPpOrRunInGroups) {
  // 10 / (1 x 2) = 5 microbatches; 5 is not a multiple of 4 stages. Megatron-Core runs them
  // only in one group of 5 (5 % 4 = 1 and groups of 4 leave 1 < pp): the message names it.
  EXPECT_EQ(load_error(llama70b_plan(R"({"tp": 8, "pp": 4, "dp": 2, "schedule": "interleaved",
                                         "virtual_stages": 2, "global_batch": 10})")),
            "plan.global_batch: interleaved 1F1B needs the microbatch count (5) to be a multiple "
            "of pp (4), or plan.microbatch_group_size_per_vp_stage set so that the last group has none or "
            "at least pp microbatches (e.g. 5)");
  const Scenario ok = load_ok(llama70b_plan(R"({"tp": 8, "pp": 4, "dp": 2, "schedule": "interleaved",
      "virtual_stages": 2, "global_batch": 10, "microbatch_group_size_per_vp_stage": 5})"));
  EXPECT_EQ(ok.plan.microbatch_group, 5);
  EXPECT_EQ(ok.plan.vp_group(), 5);
  // 3 microbatches: fewer than the 4 stages, whatever the group.
  EXPECT_EQ(load_error(llama70b_plan(R"({"tp": 8, "pp": 4, "dp": 2, "schedule": "interleaved",
                                         "virtual_stages": 2, "global_batch": 6})")),
            "plan.global_batch: interleaved 1F1B needs at least pp (4) microbatches per step, got 3");
  // 10 microbatches (global batch 20) in groups of 3 (< pp), of 11 (> m), of 4 (leaves 2 < pp).
  EXPECT_EQ(load_error(llama70b_plan(R"({"tp": 8, "pp": 4, "dp": 2, "schedule": "interleaved",
      "virtual_stages": 2, "global_batch": 20, "microbatch_group_size_per_vp_stage": 3})")),
            "plan.microbatch_group_size_per_vp_stage: 3 is outside [pp, microbatches] = [4, 10] (Megatron-Core's "
            "interleaved schedule)");
  EXPECT_EQ(load_error(llama70b_plan(R"({"tp": 8, "pp": 4, "dp": 2, "schedule": "interleaved",
      "virtual_stages": 2, "global_batch": 20, "microbatch_group_size_per_vp_stage": 11})")),
            "plan.microbatch_group_size_per_vp_stage: 11 is outside [pp, microbatches] = [4, 10] (Megatron-Core's "
            "interleaved schedule)");
  EXPECT_EQ(load_error(llama70b_plan(R"({"tp": 8, "pp": 4, "dp": 2, "schedule": "interleaved",
      "virtual_stages": 2, "global_batch": 20, "microbatch_group_size_per_vp_stage": 4})")),
            "plan.microbatch_group_size_per_vp_stage: 4 leaves a last group of 2 microbatches (10 % 4), fewer than pp "
            "(4); Megatron-Core refuses it (dependency bubbles); 5 would run");
  // Without interleaving the field has no meaning; zero and negative counts are range errors.
  EXPECT_EQ(load_error(llama70b_plan(R"({"tp": 8, "pp": 4, "dp": 2, "global_batch": 20,
      "microbatch_group_size_per_vp_stage": 5})")),
            "plan.microbatch_group_size_per_vp_stage: 5 applies to schedule \"interleaved\" only");
  EXPECT_NE(load_error(llama70b_plan(R"({"tp": 8, "pp": 4, "dp": 2, "schedule": "interleaved",
      "virtual_stages": 2, "global_batch": 20, "microbatch_group_size_per_vp_stage": -5})"))
                .find("plan.microbatch_group_size_per_vp_stage"),
            std::string::npos);
}

TEST(ScenarioErrors, ExpertParallelismNeedsAnMoeModel) {
  EXPECT_EQ(load_error(llama70b_plan(R"({"tp": 8, "pp": 4, "dp": 2, "ep": 2})")),
            "plan.ep: 2 needs a mixture-of-experts model (llama3-70b has no moe)");
}

TEST(ScenarioErrors, ExpertParallelismMustDivideExperts) {
  // mixtral-8x7b: 8 experts, 32 heads, 8 KV heads. 3 nodes = 24 = 8 x 1 x 1 x 3, and
  // ep 3 divides dp x cp = 3, so only 8 % 3 fails.
  EXPECT_EQ(load_error(scenario(R"("mixtral-8x7b")", R"({"preset": "dgx-h100", "nodes": 3})",
                                R"({"tp": 8, "dp": 3, "ep": 3})")),
            "plan.ep: 3 does not divide moe.num_experts (8)");
}

TEST(ScenarioErrors, ExpertParallelismMustDivideDpTimesCp) {
  // 8 = 4 x 1 x 1 x 2; ep 4 divides 8 experts but not dp x cp = 2.
  EXPECT_EQ(load_error(scenario(R"("mixtral-8x7b")", R"("dgx-h100")",
                                R"({"tp": 4, "dp": 2, "ep": 4})")),
            "plan.ep: 4 does not divide dp x cp (2 x 1): experts are sharded across "
            "data-parallel ranks");
}

TEST(ScenarioErrors, EpErrorNamesAModelWhoseNameHoldsANewlinePrintably) {
  const std::string model = R"({"preset": "llama3-8b", "name": "my\nmodel"})";
  EXPECT_EQ(load_error(scenario(model, R"("dgx-h100")", R"({"tp": 1, "dp": 8, "ep": 2})")),
            "plan.ep: 2 needs a mixture-of-experts model (my\\nmodel has no moe)");
}

TEST(ScenarioErrors, ContextParallelismMustDivideSeqLen) {
  EXPECT_EQ(load_error(llama70b_plan(R"({"tp": 8, "pp": 4, "cp": 2, "dp": 1})",
                                     R"(, "workload": {"seq_len": 8191})")),
            "plan.cp: 2 does not divide workload.seq_len (8191)");
}

TEST(ScenarioErrors, SeqLenMustNotExceedTheModelMaximum) {
  EXPECT_EQ(load_error(llama70b_plan(kPlan, R"(, "workload": {"seq_len": 16384})")),
            "workload.seq_len: 16384 exceeds the model's max_seq_len (8192)");
}

TEST(ScenarioErrors, Fp8NeedsFp8TensorCores) {
  // a100-sxm-80gb has fp8_dense_tflops null (Ampere has no FP8 tensor cores).
  EXPECT_EQ(load_error(scenario(kLlama70b, R"({"preset": "dgx-a100", "nodes": 8})",
                                R"({"tp": 8, "pp": 4, "dp": 2, "precision": "fp8"})")),
            "plan.precision: \"fp8\" needs FP8 tensor cores; gpu a100-sxm-80gb has none");
}

// ---------------------------------------------------------------------------------------
// Sections and versions this stepcast does not read.

TEST(ScenarioErrors, FormatTwoIsNotSupported) {
  std::string text = llama70b_plan(kPlan);
  text.replace(text.find("\"format\": 1"), 11, "\"format\": 2");
  EXPECT_EQ(load_error(text), "format: 2 is not supported (this stepcast reads format 1)");
}

TEST(ScenarioErrors, CalibrationFileMissingOrMalformed) {
  // parse_scenario without a base directory: the path is taken as given.
  EXPECT_EQ(load_error(llama70b_plan(
                kPlan, R"(, "calibration": "/nonexistent/fit.json", "faults": {}, "checkpoint": {})")),
            "calibration: /nonexistent/fit.json: no such file or directory");
  EXPECT_EQ(load_error(llama70b_plan(kPlan, R"(, "calibration": {"format": 2, "compute": {"gemm": {"efficiency": 15}}})")),
            "calibration.format: 2 is not supported (this stepcast reads format 1)\n"
            "calibration.compute.gemm.efficiency: 15 is out of range (0 to 10)");
}

TEST(ScenarioCalibration, ObjectAppliesToTheCluster) {
  auto s = parse_scenario(llama70b_plan(kPlan, R"(, "calibration": {"format": 1, "kind": "stepcast-calibration",
      "compute": {"gemm": {"efficiency": 0.5}, "memory": {"efficiency": 0.7}},
      "collectives": [{"kind": "all_reduce", "scope": "intra_node", "alpha_s": 1e-5, "beta_s_per_byte": 2e-12}]})"));
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_DOUBLE_EQ(s->cluster.gpu.gemm_efficiency, 0.5);
  EXPECT_DOUBLE_EQ(s->cluster.gpu.hbm_efficiency, 0.7);
  // A TP8 all-reduce of 1 MB inside a node now costs alpha + beta x 2(n-1)/n x S.
  const double t = collective_cost(s->cluster, CollKind::kAllReduce, GroupShape{8, 8, 1}, 1e6).time_s;
  EXPECT_NEAR(t, 1e-5 + 2e-12 * 1e6 * 2 * 7 / 8.0, 1e-15);
  // Scopes without a fit keep the alpha-beta prior: two nodes are not 1e-5 + ...
  const double inter = collective_cost(s->cluster, CollKind::kAllReduce, GroupShape{16, 8, 2}, 1e6).time_s;
  EXPECT_GT(std::abs(inter - (1e-5 + 2e-12 * 1e6 * 2 * 15 / 16.0)), 1e-7);
}

TEST(ScenarioErrors, NetworkMustBeAnalyticOrSimgrid) {
  EXPECT_EQ(load_error(llama70b_plan(kPlan, R"(, "network": "flow")")),
            "network: \"flow\" is not one of \"analytic\", \"simgrid\"");
}

// The names are checked by `stepcast check` against the fields its reports declare
// (tests/cli: CheckNamesAnUnknownExpectationWithTheClosestField); the loader checks shapes.
TEST(ScenarioErrors, ExpectNamesAreLeftToCheck) {
  auto s = parse_scenario(llama70b_plan(kPlan, R"(, "expect": {"step_time": {"max": 9}})"));
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->expect_json, R"({"step_time":{"max":9}})");
}

TEST(ScenarioErrors, ExpectRangeMinMustNotExceedMax) {
  EXPECT_EQ(load_error(llama70b_plan(kPlan,
                                     R"(, "expect": {"step_time_s": {"min": 9, "max": 5}})")),
            "expect.step_time_s: min 9 exceeds max 5");
}

TEST(ScenarioErrors, ExpectRangeNeedsABound) {
  EXPECT_EQ(load_error(llama70b_plan(kPlan, R"(, "expect": {"mfu": {"mn": 0.3}})")),
            "expect.mfu.mn: unknown key; did you mean \"min\"?\n"
            "expect.mfu: a range needs \"min\" and/or \"max\"");
}

// ---------------------------------------------------------------------------------------
// Custom models.

TEST(ScenarioErrors, FullCustomModelNamesEveryMissingField) {
  EXPECT_EQ(load_error(scenario(R"({"hidden_size": 4096})", R"("dgx-h100")", R"({"tp": 8})")),
            "model.num_layers: required (or give \"preset\")\n"
            "model.num_attention_heads: required (or give \"preset\")\n"
            "model.vocab_size: required (or give \"preset\")\n"
            "model.max_seq_len: required (or give \"preset\")");
}

TEST(ScenarioErrors, KvHeadsMustDivideAttentionHeads) {
  EXPECT_EQ(load_error(scenario(R"({"preset": "llama3-8b", "num_kv_heads": 6})", R"("dgx-h100")",
                                R"({"tp": 1, "dp": 8})")),
            "model.num_kv_heads: 6 does not divide num_attention_heads (32)");
}

TEST(ScenarioErrors, HeadsMustDivideHiddenSizeWhenHeadDimIsDerived) {
  // head_dim defaults to h / a; 4096 / 3 is not whole (it used to round down to 1365).
  const std::string model = R"({"num_layers": 2, "hidden_size": 4096, "num_attention_heads": 3,
      "vocab_size": 32000, "max_seq_len": 2048})";
  EXPECT_EQ(load_error(scenario(model, R"("dgx-h100")", R"({"tp": 1, "dp": 8})")),
            "model.num_attention_heads: 3 does not divide hidden_size (4096); give head_dim "
            "explicitly");
}

TEST(ScenarioErrors, MoeTopKMustNotExceedExperts) {
  EXPECT_EQ(load_error(scenario(R"({"preset": "mixtral-8x7b", "moe": {"top_k": 9}})",
                                R"("dgx-h100")", R"({"tp": 8})")),
            "model.moe.top_k: 9 exceeds num_experts (8)");
}

TEST(ScenarioErrors, MoeRouterGroupsAreWholeAndHoldTheTopK) {
  auto err = [](const std::string& moe) {
    return load_error(scenario(R"({"preset": "mixtral-8x7b", "moe": )" + moe + "}", R"("dgx-h100")", R"({"tp": 8})"));
  };
  EXPECT_EQ(err(R"({"expert_groups": 3})"), "model.moe.expert_groups: 3 does not divide num_experts (8)");
  EXPECT_EQ(err(R"({"limited_groups": 2})"),
            "model.moe.limited_groups: needs expert_groups (the groups it chooses among)");
  EXPECT_EQ(err(R"({"expert_groups": 4, "limited_groups": 5})"),
            "model.moe.limited_groups: 5 exceeds expert_groups (4)");
  EXPECT_EQ(err(R"({"expert_groups": 8, "limited_groups": 1})"),
            "model.moe.top_k: 2 exceeds the 1 experts of limited_groups (1) groups");
  EXPECT_EQ(err(R"({"expert_groups": 4, "limited_groups": 2})"), "(loaded without error)");
}

TEST(ScenarioErrors, NewMoeSectionNeedsExpertCountAndSize) {
  EXPECT_EQ(load_error(scenario(R"({"preset": "llama3-8b", "moe": {"top_k": 2}})",
                                R"("dgx-h100")", R"({"tp": 8})")),
            "model.moe.num_experts: required\n"
            "model.moe.expert_ffn_hidden_size: required");
}

// ---------------------------------------------------------------------------------------
// Several problems at once: every one is reported, one line each, in the order the
// loader reads them (top-level fields, model, cluster, plan in reading order, workload,
// then unknown keys of an object when it is finished: top-level ones last).

TEST(ScenarioErrors, SeveralProblemsAreAllReportedOneLineEachInOrder) {
  const std::string text = R"({
    "format": 1,
    "model": {"preset": "llama3-70b", "num_layers": 0},
    "cluster": {"preset": "dgx-h100", "nodes": "8"},
    "plan": {"tpp": 8, "pp": 0, "sequence_parallel": "yes", "schedule": "1f1", "zero": 4},
    "workload": {"seq_len": -1},
    "sed": 1
  })";
  EXPECT_EQ(load_error(text),
            "model.num_layers: 0 is out of range (1 to 1000)\n"
            "cluster.nodes: expected an integer, got \"8\"\n"
            "plan.pp: 0 is out of range (1 to 1000000)\n"
            "plan.sequence_parallel: expected true or false, got \"yes\"\n"
            "plan.schedule: \"1f1\" is not one of \"gpipe\", \"1f1b\", \"interleaved\"; did you "
            "mean \"1f1b\"?\n"
            "plan.zero: 4 is out of range (0 to 3)\n"
            "plan.tpp: unknown key; did you mean \"tp\"?\n"
            "workload.seq_len: -1 is out of range (1 to 100000000)\n"
            "sed: unknown key; did you mean \"seed\"?");
}

TEST(ScenarioErrors, MissingSectionsAreEachNamed) {
  EXPECT_EQ(load_error(R"({"format": 1})"),
            "model: required: a preset name or an object\n"
            "cluster: required: a preset name or an object\n"
            "plan: required: an object with tp, pp, dp, ...");
}

// ---------------------------------------------------------------------------------------
// load_scenario_file: messages carry the path.

class ScenarioFileTest : public testing::Test {
 protected:
  void SetUp() override {
    const auto* info = testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::path(testing::TempDir()) /
           (std::string("stepcast_scenario_") + info->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }
  std::filesystem::path dir_;
};

TEST_F(ScenarioFileTest, MissingFileIsNamed) {
  const std::string path = (dir_ / "absent.json").string();
  const Result<Scenario> r = load_scenario_file(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, path + ": no such file or directory");
}

TEST_F(ScenarioFileTest, DirectoryIsNamedAsSuch) {
  // It used to read as an empty document ("<path>: empty document: expected a JSON object").
  const Result<Scenario> r = load_scenario_file(dir_.string());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, dir_.string() + ": is a directory");
}

TEST_F(ScenarioFileTest, EveryLineOfAMessageIsPrefixedWithThePath) {
  const std::string path = write("bad.json", R"({"format": 1})");
  const Result<Scenario> r = load_scenario_file(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, path + ": model: required: a preset name or an object\n" + path +
                                   ": cluster: required: a preset name or an object\n" + path +
                                   ": plan: required: an object with tp, pp, dp, ...");
}

TEST_F(ScenarioFileTest, EmptyFileIsAnEmptyDocument) {
  const std::string path = write("empty.json", "");
  const Result<Scenario> r = load_scenario_file(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, path + ": empty document: expected a JSON object");
}

TEST(ScenarioFile, ShippedScenarioLoads) {
  const std::filesystem::path root = STEPCAST_SOURCE_DIR;  // the repository root (tests/CMakeLists.txt)
  const Result<Scenario> r = load_scenario_file((root / "scenarios/llama3-70b-64xh100.json").string());
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->name, "llama3-70b, 64 x H100");
  EXPECT_EQ(r->model.name, "llama3-70b");
  EXPECT_EQ(r->cluster.world(), 64);
  EXPECT_EQ(r->plan.world(), 64);
  EXPECT_EQ(r->plan.global_batch, 64);
  EXPECT_EQ(r->workload.seq_len, 8192);
  EXPECT_EQ(r->seed, 1u);
  // The expect object is kept compact, keys in nlohmann's (sorted) order.
  EXPECT_EQ(r->expect_json, R"({"fits":true,"step_time_s":{"max":13.3,"min":6.6}})");
}

// ---------------------------------------------------------------------------------------
// Valid inputs.

TEST(ScenarioLoads, ModelAndClusterByPresetName) {
  const Scenario s = load_ok(scenario(kLlama70b, R"("dgx-h100")", R"({"tp": 8, "dp": 1})"));
  // llama3-70b and dgx-h100 as in models/data/*.json; a preset cluster has 1 node.
  EXPECT_EQ(s.model.name, "llama3-70b");
  EXPECT_EQ(s.model.num_layers, 80);
  EXPECT_EQ(s.model.hidden_size, 8192);
  EXPECT_EQ(s.model.num_kv_heads, 8);
  EXPECT_EQ(s.cluster.name, "dgx-h100");
  EXPECT_EQ(s.cluster.gpu.name, "h100-sxm");
  EXPECT_EQ(s.cluster.nodes, 1);
  EXPECT_EQ(s.cluster.gpus_per_node, 8);
  EXPECT_EQ(s.cluster.intra_bandwidth_GBps, 450);
  // Defaults: workload.seq_len = the model's train_seq_len; name from model and cluster.
  EXPECT_EQ(s.workload.seq_len, 8192);
  EXPECT_EQ(s.name, "llama3-70b on 8 x h100-sxm");
  EXPECT_EQ(s.network, "analytic");
  EXPECT_EQ(s.expect_json, "");
}

TEST(ScenarioLoads, PresetWithOverridesKeepsTheRest) {
  const Scenario s = load_ok(scenario(R"({"preset": "llama3-70b", "num_layers": 40})",
                                      R"({"preset": "dgx-h100", "nodes": 8,
                                          "inter_node": {"nic_Gbps": 200}})",
                                      kPlan));
  EXPECT_EQ(s.model.num_layers, 40);
  EXPECT_EQ(s.model.hidden_size, 8192);
  EXPECT_EQ(s.model.num_attention_heads, 64);
  EXPECT_EQ(s.model.num_kv_heads, 8);
  EXPECT_EQ(s.model.head_dim, 128);
  EXPECT_EQ(s.cluster.nodes, 8);
  EXPECT_EQ(s.cluster.nic_Gbps, 200);
  EXPECT_EQ(s.cluster.nics_per_node, 8);
}

TEST(ScenarioLoads, FullCustomModelTakesTheFamilyDefaults) {
  const std::string model = R"({"num_layers": 4, "hidden_size": 1024,
      "num_attention_heads": 16, "vocab_size": 32000, "max_seq_len": 2048})";
  const Scenario s = load_ok(scenario(model, R"("dgx-h100")", R"({"tp": 8})"));
  EXPECT_EQ(s.model.name, "custom");
  // head_dim = h / a = 1024 / 16; num_kv_heads = a (multi-head attention).
  EXPECT_EQ(s.model.head_dim, 64);
  EXPECT_EQ(s.model.num_kv_heads, 16);
  // swiglu is the default activation: 3 matrices, F = 2/3 * 4h rounded up to 256:
  // 8 * 1024 / 3 = 2730 -> 2816.
  EXPECT_EQ(s.model.ffn_matrices, 3);
  EXPECT_EQ(s.model.ffn_hidden_size, 2816);
  // train_seq_len defaults to max_seq_len, and the workload's seq_len to that.
  EXPECT_EQ(s.model.train_seq_len, 2048);
  EXPECT_EQ(s.workload.seq_len, 2048);
  EXPECT_FALSE(s.model.moe.has_value());
}

TEST(ScenarioLoads, CommentsOfBothKindsAreIgnored) {
  const Scenario s = load_ok(R"(// a line comment before the document
{
  /* a block comment
     over two lines */
  "format": 1,           // trailing line comment
  "model": "llama3-70b", /* inline */ "cluster": {"preset": "dgx-h100", "nodes": 8},
  "plan": {"tp": 8, "pp": 4, "dp": 2 /* , "ep": 2 is commented out */}
}
// and one after it)");
  EXPECT_EQ(s.plan.ep, 1);
  EXPECT_EQ(s.plan.world(), 64);
}

TEST(ScenarioLoads, OmittedDpIsDerivedFromTheWorld) {
  // 64 GPUs / (tp 8 x pp 4 x cp 1) = 2.
  const Scenario s = load_ok(llama70b_plan(R"({"tp": 8, "pp": 4})"));
  EXPECT_EQ(s.plan.dp, 2);
}

TEST(ScenarioLoads, OmittedGlobalBatchIsMicrobatchTimesDp) {
  // dp = 64 / (8 x 4) = 2; global_batch = 2 x 2 = 4, i.e. one accumulation step.
  const Scenario s = load_ok(llama70b_plan(R"({"tp": 8, "pp": 4, "microbatch": 2})"));
  EXPECT_EQ(s.plan.global_batch, 4);
  EXPECT_EQ(s.plan.accumulation(), 1);
}

TEST(ScenarioLoads, TpAboveKvHeadsLoadsWhenReplicationIsRequested) {
  const Scenario s = load_ok(scenario(kLlama70b, R"({"preset": "dgx-h100", "nodes": 2})",
                                      R"({"tp": 16, "replicate_kv_heads": true})"));
  EXPECT_EQ(s.plan.tp, 16);
  EXPECT_TRUE(s.plan.replicate_kv_heads);
}

TEST(ScenarioLoads, InterleavedWithVirtualStagesAndAMultipleOfPpMicrobatches) {
  // 64 / (1 x 2) = 32 microbatches = 8 x pp; 4 x 2 = 8 chunks of 10 layers.
  const Scenario s = load_ok(llama70b_plan(R"({"tp": 8, "pp": 4, "dp": 2,
      "schedule": "interleaved", "virtual_stages": 2, "global_batch": 64})"));
  EXPECT_EQ(s.plan.schedule, Schedule::kInterleaved);
  EXPECT_EQ(s.plan.virtual_stages, 2);
  EXPECT_EQ(s.plan.accumulation(), 32);
}

TEST(ScenarioLoads, ExpertParallelismOnAnMoeModel) {
  // mixtral-8x7b on 8 GPUs: tp 2 x dp 4; ep 4 divides 8 experts and dp x cp = 4.
  const Scenario s =
      load_ok(scenario(R"("mixtral-8x7b")", R"("dgx-h100")", R"({"tp": 2, "ep": 4})"));
  EXPECT_EQ(s.plan.dp, 4);
  EXPECT_EQ(s.plan.ep, 4);
  ASSERT_TRUE(s.model.moe.has_value());
  EXPECT_EQ(s.model.moe->num_experts, 8);
}

}  // namespace
}  // namespace stepcast

namespace stepcast {
namespace {

TEST(ScenarioErrors, OffloadFractionsAndHostFiguresAreChecked) {
  EXPECT_EQ(load_error(scenario(R"("llama3-8b")", R"("dgx-h100")", R"({"tp": 1, "dp": 8, "offload_optimizer": 1.5})")),
            "plan.offload_optimizer: 1.5 is out of range (0 to 1)");
  EXPECT_EQ(load_error(scenario(R"("llama3-8b")", R"("dgx-h100")",
                                R"({"tp": 1, "dp": 8, "zero": 3, "offload_weights": 0.5})")),
            "plan.offload_weights: 0.5 with zero 3 is not expressed (stepcast offloads whole replicated layer weights; "
            "ZeRO-3 shards them)");
  EXPECT_EQ(load_error(scenario(R"("llama3-8b")", R"({"preset": "dgx-h100", "host": {"link_GBps": -3}})",
                                R"({"tp": 1, "dp": 8})")),
            "cluster.host.link_GBps: expected a positive number, got -3");
  // The presets' host figures: PCIe Gen5 x16 and 2 x 8 DDR5-4800 channels (dgx-h100).
  const Scenario s = load_ok(scenario(R"("llama3-8b")", R"("dgx-h100")", R"({"tp": 1, "dp": 8})"));
  EXPECT_DOUBLE_EQ(s.cluster.host_link_GBps, 63.0);
  EXPECT_DOUBLE_EQ(s.cluster.host_memory_bandwidth_GBps, 2 * 8 * 38.4);
}

}  // namespace
}  // namespace stepcast

namespace stepcast {
namespace {

// plan.recompute_num_layers (Megatron-Core recompute_method "block"): read with recompute
// "full"; elsewhere, with offload or with DeepSpeed's per-module ZeRO-3 fetch it is an error
// naming the field.
TEST(ScenarioErrors, RecomputeNumLayersNamesTheFieldAndTheRule) {
  const Scenario ok = load_ok(llama70b_plan(R"({"tp": 8, "pp": 4, "dp": 2, "recompute": "full",
                                               "recompute_num_layers": 5})"));
  EXPECT_EQ(ok.plan.recompute_num_layers, 5);
  EXPECT_TRUE(ok.plan.partial_full_recompute());
  EXPECT_EQ(recompute_text(ok.plan), "full:5/chunk");
  EXPECT_FALSE(
      load_ok(llama70b_plan(R"({"tp": 8, "pp": 4, "dp": 2, "recompute": "full"})")).plan.partial_full_recompute());
  EXPECT_EQ(load_error(llama70b_plan(R"({"tp": 8, "pp": 4, "dp": 2, "recompute_num_layers": 5})")),
            "plan.recompute_num_layers: applies to recompute \"full\" (Megatron-Core recompute_method \"block\"), "
            "not \"none\"");
  EXPECT_EQ(
      load_error(llama70b_plan(R"({"tp": 8, "pp": 4, "dp": 2, "recompute": "full", "recompute_num_layers": -1})")),
      "plan.recompute_num_layers: -1 is out of range (0 to 100000)");
  EXPECT_EQ(
      load_error(llama70b_plan(R"({"tp": 8, "pp": 4, "dp": 2, "recompute": "full", "recompute_num_layers": 2.5})")),
      "plan.recompute_num_layers: expected an integer, got 2.5");
  EXPECT_EQ(load_error(llama70b_plan(R"({"tp": 8, "pp": 4, "dp": 2, "recompute": "full", "recompute_num_layers": 4,
                                        "offload_activations": 0.5})")),
            "plan.recompute_num_layers: 4 with offload is not expressed (both choose a stage's first layers; use one "
            "of them)");
}

// plan.recompute_method (Megatron-Core's): "block" (the default) or "uniform", read with
// recompute "full"; "uniform" groups of several layers beside offload, zero 3 or the merged
// all-to-all step are errors naming the field.
TEST(ScenarioErrors, RecomputeMethodNamesTheFieldAndTheRule) {
  const Scenario ok = load_ok(llama70b_plan(R"({"tp": 8, "pp": 4, "dp": 2, "recompute": "full",
                                               "recompute_method": "uniform", "recompute_num_layers": 4})"));
  EXPECT_EQ(ok.plan.recompute_method, RecomputeMethod::kUniform);
  EXPECT_EQ(ok.plan.recompute_group(), 4);
  EXPECT_FALSE(ok.plan.partial_full_recompute());
  EXPECT_EQ(recompute_text(ok.plan), "full:uniform4");
  const Scenario block = load_ok(llama70b_plan(R"({"tp": 8, "pp": 4, "dp": 2, "recompute": "full",
                                                  "recompute_method": "block", "recompute_num_layers": 4})"));
  EXPECT_TRUE(block.plan.partial_full_recompute());
  EXPECT_EQ(block.plan.recompute_group(), 1);
  EXPECT_EQ(load_error(llama70b_plan(R"({"tp": 8, "pp": 4, "dp": 2, "recompute": "full",
                                        "recompute_method": "uniformly"})")),
            "plan.recompute_method: \"uniformly\" is not one of \"block\", \"uniform\"; did you mean \"uniform\"?");
  EXPECT_EQ(load_error(llama70b_plan(R"({"tp": 8, "pp": 4, "dp": 2, "recompute": "selective",
                                        "recompute_method": "uniform"})")),
            "plan.recompute_method: applies to recompute \"full\" (Megatron-Core recompute_granularity \"full\"), not "
            "\"selective\"");
  EXPECT_EQ(load_error(llama70b_plan(R"({"tp": 8, "pp": 4, "dp": 2, "recompute": "full", "recompute_method": "uniform",
                                        "recompute_num_layers": 2, "offload_activations": 0.5})")),
            "plan.recompute_method: \"uniform\" with groups of 2 layers and offload is not expressed (offload moves "
            "single layers' activations; use recompute_num_layers 1)");
  EXPECT_EQ(load_error(llama70b_plan(R"({"tp": 8, "pp": 4, "dp": 2, "zero": 3, "recompute": "full",
                                        "recompute_method": "uniform", "recompute_num_layers": 2})")),
            "plan.recompute_method: \"uniform\" with groups of 2 layers beside zero 3 is not expressed (stepcast "
            "gathers ZeRO-3 weights layer by layer in the backward; use recompute_num_layers 1 or zero <= 2)");
  // One layer per group is every layer alone: accepted with zero 3.
  EXPECT_EQ(load_ok(llama70b_plan(R"({"tp": 8, "pp": 4, "dp": 2, "zero": 3, "recompute": "full",
                                     "recompute_method": "uniform", "recompute_num_layers": 1})"))
                .plan.recompute_group(),
            1);
}

// plan.recompute_modules (Megatron-Core recompute_modules): read with recompute "selective";
// the messages name the field, and Megatron-Core's rules and modules the model lacks are errors.
TEST(ScenarioErrors, RecomputeModulesNameTheFieldAndTheRule) {
  const Scenario ok = load_ok(llama70b_plan(R"({"tp": 8, "pp": 4, "dp": 2, "recompute": "selective",
                                               "recompute_modules": ["mlp", "core_attn"]})"));
  EXPECT_EQ(ok.plan.recompute_modules,
            module_bit(RecomputeModule::kCoreAttn) | module_bit(RecomputeModule::kMlp));
  EXPECT_EQ(recompute_text(ok.plan), "selective:core_attn,mlp");
  EXPECT_EQ(load_ok(llama70b_plan(R"({"tp": 8, "pp": 4, "dp": 2, "recompute": "selective"})")).plan.recompute_modules,
            module_bit(RecomputeModule::kCoreAttn));  // Megatron-Core's default
  EXPECT_EQ(load_error(llama70b_plan(R"({"tp": 8, "pp": 4, "dp": 2, "recompute_modules": ["mlp"]})")),
            "plan.recompute_modules: applies to recompute \"selective\" (Megatron-Core "
            "recompute_granularity), not \"none\"");
  EXPECT_EQ(load_error(llama70b_plan(R"({"tp": 8, "pp": 4, "dp": 2, "recompute": "selective",
                                        "recompute_modules": ["mpl"]})")),
            "plan.recompute_modules[0]: \"mpl\" is not one of \"core_attn\", \"layernorm\", \"mlp\", \"moe_act\", "
            "\"moe\", \"shared_experts\", \"mla_up_proj\"; did you mean \"mlp\"?");
  EXPECT_EQ(load_error(llama70b_plan(R"({"tp": 8, "pp": 4, "dp": 2, "recompute": "selective",
                                        "recompute_modules": ["mla_up_proj", "moe"]})")),
            "plan.recompute_modules: \"moe\" needs a mixture-of-experts model (llama3-70b has no moe)\n"
            "plan.recompute_modules: \"mla_up_proj\" needs multi-head latent attention (llama3-70b has no mla)");
  const std::string qwen = R"({"preset": "qwen3-30b-a3b"})";
  EXPECT_EQ(load_error(scenario(qwen, R"({"preset": "dgx-h100", "nodes": 1})",
                                R"({"dp": 8, "ep": 8, "recompute": "selective", "recompute_modules": ["mlp"]})")),
            "plan.recompute_modules: \"mlp\" recomputes dense MLP layers; every layer of qwen3-30b-a3b is MoE "
            "(use \"moe\" or \"moe_act\")");
  EXPECT_EQ(load_error(scenario(qwen, R"({"preset": "dgx-h100", "nodes": 1})",
                                R"({"dp": 8, "ep": 8, "recompute": "selective", "recompute_modules": ["shared_experts"]})")),
            "plan.recompute_modules: \"shared_experts\" needs shared experts (qwen3-30b-a3b has none)");
  EXPECT_EQ(load_error(scenario(R"({"preset": "deepseek-v3", "num_layers": 8})", R"({"preset": "dgx-h100", "nodes": 4})",
                                R"({"tp": 2, "pp": 2, "dp": 8, "ep": 16, "etp": 1, "sequence_parallel": true,
                                    "moe_shared_expert_overlap": true, "recompute": "selective",
                                    "recompute_modules": ["shared_experts"]})")),
            "plan.recompute_modules: \"shared_experts\" cannot be combined with plan.moe_shared_expert_overlap "
            "(Megatron-Core refuses it)");
  EXPECT_EQ(load_error(scenario(qwen, R"({"preset": "dgx-h100", "nodes": 1})",
                                R"({"dp": 8, "ep": 8, "recompute": "selective_op"})")),
            "plan.recompute: \"selective_op\" (torchtitan's op-level policy) is expressed for dense layers without "
            "MLA; qwen3-30b-a3b has MoE layers");
  // Qwen3-30B-A3B on one DGX H100 (dp 8, ep 8 unless `plan` says otherwise) with `moe` over
  // the preset's MoE fields.
  const auto qwen_moe = [](const std::string& moe, const std::string& plan = R"({"dp": 8, "ep": 8})") {
    return scenario(R"({"preset": "qwen3-30b-a3b", "moe": )" + moe + "}", R"({"preset": "dgx-h100", "nodes": 1})",
                    plan);
  };
  // model.moe.load_imbalance: the busiest rank's routed rows over the mean, at least 1.
  EXPECT_EQ(load_error(qwen_moe(R"({"load_imbalance": 0.5})")),
            "model.moe.load_imbalance: 0.5 is out of range (1 to 100)");
  EXPECT_EQ(load_ok(qwen_moe(R"({"load_imbalance": 1.3})")).model.moe->load_imbalance, 1.3);
  // Token dropping (Megatron-Core transformer_config.py): padding needs a capacity, and only
  // the alltoall dispatcher drops tokens.
  EXPECT_EQ(load_error(qwen_moe(R"({"pad_to_capacity": true})")),
            "model.moe.pad_to_capacity: needs capacity_factor (the capacity it pads to)");
  EXPECT_EQ(load_error(qwen_moe(R"({"capacity_factor": 1.0})", R"({"dp": 8, "ep": 8, "moe_dispatcher": "deepep"})")),
            "model.moe.capacity_factor: token dropping needs plan.moe_dispatcher \"alltoall\" (got \"deepep\"; "
            "Megatron-Core drops tokens only in its alltoall dispatcher)");
  EXPECT_EQ(load_error(qwen_moe(R"({"capacity_factor": -1})")),
            "model.moe.capacity_factor: -1 is out of range (0 to 1000)");
  // plan.fp8_recipe: with precision fp8 only; MXFP8 on Blackwell only (Transformer Engine's
  // MXFP8BlockScaling).
  EXPECT_EQ(load_error(scenario(kLlama70b, R"({"preset": "dgx-h100", "nodes": 8})",
                                R"({"tp": 8, "pp": 4, "dp": 2, "fp8_recipe": "delayed"})")),
            "plan.fp8_recipe: \"delayed\" applies to precision \"fp8\" (got \"bf16\")");
  EXPECT_EQ(load_error(scenario(kLlama70b, R"({"preset": "dgx-h100", "nodes": 8})",
                                R"({"tp": 8, "pp": 4, "dp": 2, "precision": "fp8", "fp8_recipe": "mxfp8"})")),
            "plan.fp8_recipe: \"mxfp8\" needs a Blackwell GPU (gpu h100-sxm is hopper)");
  EXPECT_EQ(load_error(scenario(kLlama70b, R"({"preset": "dgx-h100", "nodes": 8})",
                                R"({"tp": 8, "pp": 4, "dp": 2, "precision": "fp8", "fp8_recipe": "mx"})"))
                .rfind("plan.fp8_recipe: ", 0),
            0u);
  EXPECT_EQ(load_ok(scenario(kLlama70b, R"({"preset": "dgx-b200", "nodes": 8})",
                             R"({"tp": 8, "pp": 4, "dp": 2, "precision": "fp8", "fp8_recipe": "mxfp8"})"))
                .plan.fp8_recipe,
            Fp8Recipe::kMxfp8);
  const Scenario padded = load_ok(qwen_moe(R"({"capacity_factor": 1.25, "pad_to_capacity": true})"));
  EXPECT_EQ(padded.model.moe->capacity_factor, 1.25);
  EXPECT_TRUE(padded.model.moe->pad_to_capacity);
}

TEST(ScenarioErrors, OverlapSlowdownIsAFractionFromZero) {
  // cluster.gpu.overlap_slowdown (specs.h): 0 (the default, off) is valid; a negative
  // slowdown is not.
  const auto with = [](const char* value) {
    return scenario(kLlama70b,
                    std::string(R"({"preset": "dgx-h100", "nodes": 8, "gpu": {"preset": "h100-sxm", "overlap_slowdown": )") +
                        value + "}}",
                    kPlan);
  };
  auto s = parse_scenario(with("0.189"));
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_DOUBLE_EQ(s->cluster.gpu.overlap_slowdown, 0.189);
  auto zero = parse_scenario(with("0"));
  ASSERT_TRUE(zero.ok()) << zero.error().message;
  EXPECT_EQ(zero->cluster.gpu.overlap_slowdown, 0.0);
  EXPECT_EQ(load_error(with("-0.1")),
            "cluster.gpu.overlap_slowdown: -0.1 is out of range (0 to 4)");
}

TEST(ScenarioErrors, GpuPowerLimitAndFp8ShortKAreCheckedAndRead) {
  // cluster.gpu.tdp_W (the power limit a GPU's figures hold at) and gemm_fp8_k_half (FP8's
  // short-K factor, docs/model-reference.md 4.1): a GPU object may set them; 0 turns the
  // short-K factor off, a negative one or a zero power limit is refused, naming the field.
  const auto with = [](const char* fields) {
    return scenario(kLlama70b,
                    std::string(R"({"preset": "dgx-h100", "nodes": 8, "gpu": {"preset": "h100-sxm", )") + fields + "}}",
                    kPlan);
  };
  auto s = parse_scenario(with(R"("gemm_fp8_k_half": 0, "tdp_W": 500)"));
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->cluster.gpu.gemm_fp8_k_half, 0.0);
  EXPECT_EQ(s->cluster.gpu.tdp_W, 500.0);
  auto preset = parse_scenario(with(R"("hbm_GiB": 80)"));
  ASSERT_TRUE(preset.ok()) << preset.error().message;
  EXPECT_EQ(preset->cluster.gpu.gemm_fp8_k_half, 370.0);  // the h100-sxm preset's (measured on the H200)
  EXPECT_EQ(load_error(with(R"("gemm_fp8_k_half": -5)")),
            "cluster.gpu.gemm_fp8_k_half: -5 is out of range (0 to 1000000)");
  EXPECT_EQ(load_error(with(R"("tdp_W": 0)")), "cluster.gpu.tdp_W: expected a positive number, got 0");
}

TEST(ScenarioErrors, FsdpNoSyncNeedsZero3) {
  // plan.fsdp_no_sync (specs.h) defers ZeRO-3's reduce-scatters to the last microbatch; with
  // ZeRO 0-2 there is nothing to defer.
  EXPECT_EQ(load_error(llama70b_plan(R"({"tp": 8, "pp": 4, "dp": 2, "zero": 1, "fsdp_no_sync": true})")),
            "plan.fsdp_no_sync: applies to ZeRO-3 / FSDP (zero 3), got zero 1; with ZeRO 0-2 the gradients are "
            "reduced once per step already");
  EXPECT_EQ(load_error(llama70b_plan(R"({"tp": 8, "pp": 4, "dp": 2, "zero": 3, "fsdp_no_sync": 1})")),
            "plan.fsdp_no_sync: expected true or false, got 1");
  auto s = parse_scenario(llama70b_plan(R"({"tp": 8, "pp": 4, "dp": 2, "zero": 3, "fsdp_no_sync": true})"));
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_TRUE(s->plan.fsdp_no_sync);
}

TEST(ScenarioErrors, KeepingGatheredParametersNeedsZero3) {
  // plan.reshard_after_forward false keeps ZeRO-3's gathered parameters for the backward;
  // with ZeRO 0-2 nothing is gathered.
  EXPECT_EQ(load_error(llama70b_plan(R"({"tp": 8, "pp": 4, "dp": 2, "zero": 2, "reshard_after_forward": false})")),
            "plan.reshard_after_forward: false applies to ZeRO-3 / FSDP (zero 3), got zero 2; with ZeRO 0-2 the "
            "parameters are not sharded");
  auto s = parse_scenario(llama70b_plan(R"({"tp": 8, "pp": 4, "dp": 2, "zero": 3, "reshard_after_forward": false})"));
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_FALSE(s->plan.reshard_after_forward);
}

}  // namespace
}  // namespace stepcast

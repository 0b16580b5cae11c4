// `validate` as a use case: the record -> scenario rules on hand-written records, which
// records are errors and which are rows that say why, whole error messages for bad input,
// and the shipped validation file. Oracles: hand calculations in the comments.
#include "stepcast/app/validate.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "stepcast/models/band.h"
#include "stepcast/models/estimate.h"
#include "stepcast/models/json_reader.h"
#include "stepcast/models/names.h"
#include "stepcast/models/params.h"
#include "stepcast/models/scenario.h"

namespace {

using nlohmann::json;
using stepcast::app::run_validate;
using stepcast::app::run_validate_text;
using stepcast::app::validate_json;
using stepcast::app::validate_text;
using stepcast::app::ValidationRow;
namespace reader = stepcast::reader;

class ValidateTest : public testing::Test {
 protected:
  void SetUp() override {
    const auto* info = testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::path(testing::TempDir()) /
           (std::string("stepcast_validate_") + info->name() + "_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& text) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }
  // A file whose records are `records` (a JSON array text).
  std::string file_of(const std::string& records) {
    return write("runs.json", "{\"format\": 1, \"records\": " + records + "}");
  }
  // The error message of validating `path` ("" when it succeeded).
  static std::string error_of(const std::string& path) {
    auto r = run_validate({path, ""});
    return r.ok() ? std::string() : r.error().message;
  }

  std::filesystem::path dir_;
};

// A hand-written GPT record; `patch` (a JSON object) is merged into it first.
std::string record(const json& patch = json::object()) {
  json r = json::parse(R"j({
    "id": "hand",
    "source": {"title": "hand-written"},
    "model": {"name": "GPT test", "layers": 4, "hidden": 1024, "heads": 16, "vocab": 50000, "seq_len": 2048},
    "hardware": {"gpu": "A100-SXM4-80GB", "gpus_total": 16, "gpus_per_node": 8, "interconnect": "DGX"},
    "layout": {"tp": 2, "pp": 2, "virtual_stages": 2, "microbatch": 2, "global_batch": 64,
               "schedule": "interleaved 1F1B", "recompute": "selective", "zero_fsdp": "ZeRO-1",
               "precision": "BF16"},
    "measured": {"tflops_per_gpu": 100, "flop_accounting": "72*B*L*s*h^2*(1 + s/(6h) + v/(12*h*L))"},
    "notes": "anything"
  })j");
  r.merge_patch(patch);
  return r.dump();
}

TEST_F(ValidateTest, HandWrittenRecordFollowsTheRules) {
  auto rep = run_validate({file_of("[" + record() + "]"), ""});
  ASSERT_TRUE(rep.ok()) << rep.error().message;
  ASSERT_EQ(rep->rows.size(), 1u);
  const ValidationRow& row = rep->rows[0];
  // dp = 16 GPUs / (tp 2 x pp 2) = 4; two chunks per stage; ZeRO-1 from "ZeRO-1".
  EXPECT_EQ(row.layout, "tp2 pp2 dp4 v2 z1 mb2 gbs64");
  const json sc = json::parse(row.scenario_json);
  EXPECT_EQ(sc["cluster"], json::parse(R"j({"preset": "dgx-a100", "nodes": 2})j"));  // 16 GPUs / 8 per node
  const json& plan = sc["plan"];
  EXPECT_FALSE(plan.contains("dp"));  // derived by the loader from the GPU count
  EXPECT_EQ(plan["schedule"], "interleaved");
  EXPECT_EQ(plan["virtual_stages"], 2);
  EXPECT_EQ(plan["microbatch"], 2);
  EXPECT_EQ(plan["global_batch"], 64);
  EXPECT_EQ(plan["zero"], 1);
  EXPECT_EQ(plan["recompute"], "selective");
  EXPECT_EQ(plan["precision"], "bf16");
  EXPECT_EQ(plan["sequence_parallel"], false);
  EXPECT_EQ(plan["flash_attention"], false);  // not stated, A100: off
  const json& model = sc["model"];
  EXPECT_EQ(model["family"], "gpt");
  EXPECT_EQ(model["num_kv_heads"], 16);       // not given: heads
  EXPECT_EQ(model["ffn_hidden_size"], 4096);  // not given: 4 x 1024
  // 50000 padded to a multiple of 128 x tp = 256: ceil(50000 / 256) = 196; 196 x 256 = 50176.
  EXPECT_EQ(model["vocab_size"], 50176);
  EXPECT_EQ(row.assumptions,
            (std::vector<std::string>{"kv_heads not given: multi-head attention (kv_heads = heads)",
                                      "ffn_hidden not given: 4 x hidden", "sequence_parallel not stated: off",
                                      "FlashAttention not stated: off (fused softmax with the s x s scores in memory)",
                                      "vocab 50000 padded to 50176 (Megatron: multiple of 128 x tp)"}));
  // Korthikanti eq. 7 (named by the record): 72 B s l h^2 (1 + s/6h + V/12lh) with B 64,
  // s 2048, l 4, h 1024, V 50176: 72 x 64 x 2048 x 4 x 1024^2 = 39,582,418,599,936;
  // s/6h = 1/3, V/12lh = 50176/49152 = 49/48, so the factor is 113/48;
  // 39,582,418,599,936 x 113 / 48 = 93,183,610,454,016.
  EXPECT_EQ(row.accounting_flops_per_step, 93'183'610'454'016.0);
  ASSERT_TRUE(row.predicted);
  EXPECT_TRUE(row.feasible) << row.reason;
  EXPECT_EQ(row.metric, "TFLOP/s/GPU");
  // Predicted TFLOP/s per GPU = accounting FLOPs / (predicted step x 16 GPUs) / 1e12.
  EXPECT_NEAR(row.predicted_value * 1e12 * row.predicted_iteration_s * 16, 93'183'610'454'016.0, 1e3);
  EXPECT_DOUBLE_EQ(row.throughput_error(), (row.predicted_value - 100) / 100);
  EXPECT_EQ(rep->compared, 1);
}

TEST_F(ValidateTest, DescriptionsMapByDocumentedRules) {
  // A Llama on an H100 with a stated 96 GB at 2.4 TB/s, FSDP2, no schedule (pp 1), tokens/s.
  auto rep = run_validate({file_of("[" + record(json::parse(R"j({
    "model": {"name": "Llama 3.1 8B", "kv_heads": 8, "ffn_hidden": 14336, "vocab": 128000},
    "hardware": {"gpu": "H100 (96GB HBM2e, 2.4 TB/s, 500 W cap; SXM-class)", "gpus_total": 8},
    "layout": {"tp": 1, "pp": 1, "virtual_stages": null, "global_batch": 16, "schedule": null,
               "zero_fsdp": "FSDP2 (fully sharded)", "recompute": "selective activation checkpointing",
               "techniques": "FSDP"},
    "measured": {"tflops_per_gpu": null, "flop_accounting": null, "tokens_per_s_per_gpu": 5000,
                 "peak_memory_gib": 50}
  })j")) + "]"), ""});
  ASSERT_TRUE(rep.ok()) << rep.error().message;
  const ValidationRow& row = rep->rows[0];
  const json sc = json::parse(row.scenario_json);
  // "500 W cap": the H100 preset measured at that power limit (h100-sxm-500w), with the
  // stated capacity and bandwidth.
  EXPECT_EQ(sc["cluster"], json::parse(R"j({"preset": "dgx-h100", "nodes": 1,
      "gpu": {"preset": "h100-sxm-500w", "hbm_GiB": 96.0, "hbm_bandwidth_GBps": 2400.0}})j"));
  EXPECT_TRUE(std::any_of(row.assumptions.begin(), row.assumptions.end(), [](const std::string& a) {
    return a.find("a 500 W power limit: preset h100-sxm-500w") != std::string::npos;
  }));
  EXPECT_EQ(sc["model"]["family"], "llama");
  EXPECT_EQ(sc["model"]["ffn_matrices"], 3);
  EXPECT_EQ(sc["plan"]["zero"], 3);
  EXPECT_EQ(sc["plan"]["schedule"], "1f1b");
  EXPECT_EQ(sc["plan"]["flash_attention"], true);  // not stated, Hopper: on
  EXPECT_EQ(sc["plan"]["recompute"], "selective_op");  // FSDP2: torchtitan's op-level policy
  EXPECT_EQ(row.layout, "tp1 pp1 dp8 z3 mb2 gbs16");
  EXPECT_EQ(row.metric, "tokens/s/GPU");
  ASSERT_TRUE(row.predicted);
  // tokens/s per GPU = 16 sequences x 2048 tokens / predicted step / 8 GPUs.
  EXPECT_DOUBLE_EQ(row.predicted_value, 16.0 * 2048 / row.predicted_iteration_s / 8);
  ASSERT_TRUE(row.has_memory_error());
  EXPECT_DOUBLE_EQ(row.memory_error(), (row.memory_total_bytes / (1024.0 * 1024 * 1024) - 50) / 50);
  EXPECT_EQ(rep->memory_compared, 1);
}

// A stated power limit picks the GPU preset measured at it; a limit without such a preset
// keeps the rated preset's ceilings and says they are optimistic; no limit, no change.
TEST_F(ValidateTest, AStatedPowerLimitPicksThePresetMeasuredAtIt) {
  auto gpu_of = [&](const std::string& description, std::vector<std::string>* assumptions) {
    const json patch = {{"hardware", {{"gpu", description}, {"gpus_total", 8}}}};
    auto rep = run_validate({file_of("[" + record(patch) + "]"), ""});
    EXPECT_TRUE(rep.ok()) << rep.error().message;
    if (!rep.ok()) return json();
    *assumptions = rep->rows[0].assumptions;
    return json::parse(rep->rows[0].scenario_json)["cluster"].value("gpu", json());
  };
  auto says = [](const std::vector<std::string>& as, const std::string& text) {
    return std::any_of(as.begin(), as.end(), [&](const std::string& a) { return a.find(text) != std::string::npos; });
  };
  std::vector<std::string> as;
  EXPECT_EQ(gpu_of("H100 SXM5 80GB, 500W", &as), json::parse(R"j({"preset": "h100-sxm-500w"})j"));
  EXPECT_TRUE(says(as,
                   "a 500 W power limit: preset h100-sxm-500w (its GEMM ceilings measured at 500 W; h100-sxm "
                   "is rated 700 W)"));
  EXPECT_EQ(gpu_of("H100 SXM5 80GB, 400 W cap", &as), json());  // the dgx-h100 cluster's own h100-sxm
  EXPECT_TRUE(says(as,
                   "a 400 W power limit, no preset measured at it: h100-sxm's ceilings, measured at its 700 W "
                   "(optimistic)"));
  EXPECT_EQ(gpu_of("H100 SXM5 80GB", &as), json());
  EXPECT_FALSE(says(as, "power limit"));
}

// DeepSpeed ZeRO-3 records (docs/validation.md "Software stack"): the DeepSpeed of the
// record's year -- the first 20xx in its id or source title; 2021 or earlier runs the
// stage-3 coordinator of that year (deepspeed-zero-2021, with that year's overlap_comm
// default: off) -- with 16-bit gradients.
TEST_F(ValidateTest, DeepSpeedZero3RecordsRunTheDeepSpeedOfTheirYear) {
  auto stack_of = [&](const std::string& id, const std::string& title) {
    const json patch = {{"id", id},
                        {"source", {{"title", title}}},
                        {"layout",
                         {{"tp", 1},
                          {"pp", 1},
                          {"virtual_stages", nullptr},
                          {"schedule", nullptr},
                          {"zero_fsdp", "ZeRO-3 (DeepSpeed), no model parallelism"}}}};
    auto rep = run_validate({file_of("[" + record(patch) + "]"), ""});
    EXPECT_TRUE(rep.ok()) << rep.error().message;
    if (!rep.ok()) return std::string();
    const json sc = json::parse(rep->rows[0].scenario_json);
    EXPECT_EQ(sc["plan"]["grad_dtype"], "bf16") << id;  // 16-bit gradients
    // DeepSpeed 2021's overlap_comm default, false: the reduce-scatters on the compute
    // stream; later DeepSpeed overlaps them (stepcast's default).
    const bool v2021 = sc["plan"]["stack"] == "deepspeed-zero-2021";
    EXPECT_EQ(sc["plan"].value("overlap_grad_reduce", true), !v2021) << id;
    return sc["plan"]["stack"].get<std::string>();
  };
  EXPECT_EQ(stack_of("narayanan2021_zero3", "Efficient Large-Scale Language Model Training, SC'21"),
            "deepspeed-zero-2021");
  EXPECT_EQ(stack_of("hand", "A DeepSpeed study (2020)"), "deepspeed-zero-2021");
  EXPECT_EQ(stack_of("hand2024", "DeepSpeed ZeRO-3 today"), "deepspeed-zero");
  EXPECT_EQ(stack_of("hand", "undated"), "deepspeed-zero");
}

// DeepSpeed's pipeline engine (ZeRO 0 or 1), its BF16Optimizer or Megatron-DeepSpeed named in
// the source or layout: megatron-deepspeed; with ZeRO-3 DeepSpeed stays deepspeed-zero; none
// of them named: megatron-core.
TEST_F(ValidateTest, DeepSpeedPipelineEngineRecordsRunMegatronDeepspeed) {
  auto stack_of = [&](const std::string& title, const json& zero, const json& schedule) {
    const json patch = {{"source", {{"title", title}}}, {"layout", {{"zero_fsdp", zero}, {"schedule", schedule}}}};
    auto rep = run_validate({file_of("[" + record(patch) + "]"), ""});
    EXPECT_TRUE(rep.ok()) << rep.error().message;
    if (!rep.ok()) return std::string();
    return json::parse(rep->rows[0].scenario_json)["plan"]["stack"].get<std::string>();
  };
  EXPECT_EQ(stack_of("BLOOM", "ZeRO-1 (DeepSpeed BF16Optimizer)", "DeepSpeed pipeline engine"), "megatron-deepspeed");
  EXPECT_EQ(stack_of("a Megatron-DeepSpeed run", nullptr, nullptr), "megatron-deepspeed");
  EXPECT_EQ(stack_of("a run", "ZeRO-3 (DeepSpeed)", "DeepSpeed pipeline engine"), "deepspeed-zero");
  EXPECT_EQ(stack_of("a Megatron-LM run", nullptr, nullptr), "megatron-core");
}

// PyTorch FSDP's sharding strategies are ZeRO stages (FULL_SHARD and HYBRID_SHARD 3,
// SHARD_GRAD_OP 2, NO_SHARD 0); a record naming Composer or LLM Foundry runs llm-foundry, one
// naming PyTorch FSDP (not FSDP2, not Megatron's) with ZeRO 2 or 3 runs fsdp2-eager; only the
// Megatron stacks pad the vocabulary.
TEST_F(ValidateTest, PyTorchFsdpRecordsRunAPyTorchStack) {
  struct Got {
    std::string stack;
    int zero = -1;
    std::int64_t vocab = 0;
    std::vector<std::string> assumptions;
  };
  auto run = [&](const std::string& title, const json& zero, const json& techniques) {
    const json patch = {{"source", {{"title", title}}},
                        {"layout",
                         {{"tp", 1},
                          {"pp", 1},
                          {"virtual_stages", nullptr},
                          {"schedule", nullptr},
                          {"zero_fsdp", zero},
                          {"techniques", techniques}}}};
    auto rep = run_validate({file_of("[" + record(patch) + "]"), ""});
    EXPECT_TRUE(rep.ok()) << rep.error().message;
    if (!rep.ok()) return Got{};
    const json sc = json::parse(rep->rows[0].scenario_json);
    return Got{sc["plan"]["stack"], sc["plan"]["zero"], sc["model"]["vocab_size"], rep->rows[0].assumptions};
  };
  const Got foundry = run("MosaicML LLM Foundry, MPT Training Benchmarks", "FULL_SHARD", nullptr);
  EXPECT_EQ(foundry.stack, "llm-foundry");
  EXPECT_EQ(foundry.zero, 3);
  EXPECT_EQ(foundry.vocab, 50000);  // not padded: 50000 is not a multiple of 128
  EXPECT_EQ(run("a run", "FULL_SHARD", "Composer").stack, "llm-foundry");
  const Got fsdp1 = run("a run", "PyTorch FSDP FULL_SHARD", nullptr);
  EXPECT_EQ(fsdp1.stack, "fsdp2-eager");
  EXPECT_EQ(fsdp1.zero, 3);
  EXPECT_EQ(fsdp1.vocab, 50000);
  const Got grad_op = run("a run", "SHARD_GRAD_OP", "PyTorch FSDP");
  EXPECT_EQ(grad_op.stack, "fsdp2-eager");
  EXPECT_EQ(grad_op.zero, 2);
  const Got hybrid = run("a run", "HYBRID_SHARD", "PyTorch FSDP");
  EXPECT_EQ(hybrid.zero, 3);
  EXPECT_NE(std::find(hybrid.assumptions.begin(), hybrid.assumptions.end(),
                      "zero_fsdp HYBRID_SHARD: priced as FULL_SHARD over the whole data-parallel group (stepcast has "
                      "no hybrid sharding group; the real all-gathers stay inside a node)"),
            hybrid.assumptions.end());
  const Got no_shard = run("a run", "NO_SHARD", "PyTorch FSDP");
  EXPECT_EQ(no_shard.zero, 0);
  EXPECT_EQ(no_shard.stack, "megatron-core");  // unsharded: the common assumption
  // Megatron's own FSDP and Megatron-Bridge's "FSDP=0" stay megatron-core, padded (tp 1: 128).
  const Got megatron_fsdp = run("a Megatron-LM run", "Megatron-FSDP (ZeRO-3)", nullptr);
  EXPECT_EQ(megatron_fsdp.stack, "megatron-core");
  EXPECT_EQ(megatron_fsdp.vocab, 50048);  // ceil(50000 / 128) = 391; 391 x 128 = 50048
  EXPECT_EQ(run("Megatron-Bridge", "no FSDP (FSDP=0 in table: DDP)", nullptr).stack, "megatron-core");
}

// zero_fsdp names a ZeRO stage however the record spells it ("ZeRO Stage-2", "zero_stage=3",
// "ZeRO (stage 1)", 0..3 as a number); HSDP, torchtitan's hybrid sharding, is ZeRO 3 with the
// HYBRID_SHARD assumption, as PyTorch FSDP's HYBRID_SHARD; a stage number inside a word
// ("ZeRO-30") is not a stage.
TEST_F(ValidateTest, ZeroStagesAreReadHoweverTheRecordSpellsThem) {
  auto zero_of = [&](const json& zero, std::vector<std::string>* assumptions = nullptr) {
    const json patch = {{"layout", {{"zero_fsdp", zero}}}};
    auto rep = run_validate({file_of("[" + record(patch) + "]"), ""});
    EXPECT_TRUE(rep.ok()) << rep.error().message;
    if (!rep.ok()) return -1;
    if (assumptions) *assumptions = rep->rows[0].assumptions;
    return json::parse(rep->rows[0].scenario_json)["plan"]["zero"].get<int>();
  };
  EXPECT_EQ(zero_of("ZeRO-3"), 3);
  EXPECT_EQ(zero_of("ZeRO Stage-2"), 2);
  EXPECT_EQ(zero_of("DeepSpeed zero_stage=3"), 3);
  EXPECT_EQ(zero_of("ZeRO (stage 1)"), 1);
  EXPECT_EQ(zero_of("ZeRO stage 0 (DDP)"), 0);
  EXPECT_EQ(zero_of("ZeRO++ (hpZ, qwZ)"), 3);
  EXPECT_EQ(zero_of("Zero Redundancy Optimizer, stage 2"), 2);
  EXPECT_EQ(zero_of("DeepSpeed stage-3"), 3);
  EXPECT_EQ(zero_of(2), 2);
  EXPECT_EQ(zero_of(0), 0);
  std::vector<std::string> said;
  EXPECT_EQ(zero_of("ZeRO-30", &said), 0);
  EXPECT_NE(std::find(said.begin(), said.end(), "zero_fsdp \"ZeRO-30\" not recognised: ZeRO 0"), said.end());
  for (const char* hybrid : {"HSDP (2 replicas x 4 shards)", "FSDP2 HSDP", "hybrid sharding (HYBRID_SHARD)"}) {
    SCOPED_TRACE(hybrid);
    EXPECT_EQ(zero_of(hybrid, &said), 3);
    EXPECT_NE(std::find(said.begin(), said.end(),
                        "zero_fsdp HYBRID_SHARD: priced as FULL_SHARD over the whole data-parallel group (stepcast "
                        "has no hybrid sharding group; the real all-gathers stay inside a node)"),
              said.end());
  }
}

// model.dropout: a probability (0 is off) or a yes/no flag, over the family's default (GPT on,
// Llama off); anything else names the field.
TEST_F(ValidateTest, DropoutIsReadAsAProbabilityOrAFlag) {
  auto dropout_of = [&](const json& name, const json& value) {
    const json patch = {{"model", {{"name", name}, {"dropout", value}}}};
    auto rep = run_validate({file_of("[" + record(patch) + "]"), ""});
    EXPECT_TRUE(rep.ok()) << rep.error().message;
    if (!rep.ok()) return json();
    return json::parse(rep->rows[0].scenario_json)["model"]["dropout"];
  };
  EXPECT_EQ(dropout_of("GPT test", nullptr), true);     // GPT family default
  EXPECT_EQ(dropout_of("Llama 3 8B", nullptr), false);  // Llama family default
  EXPECT_EQ(dropout_of("GPT test", 0.0), false);
  EXPECT_EQ(dropout_of("GPT test", 0), false);
  EXPECT_EQ(dropout_of("GPT test", "no"), false);
  EXPECT_EQ(dropout_of("GPT test", false), false);
  EXPECT_EQ(dropout_of("Llama 3 8B", 0.1), true);
  EXPECT_EQ(dropout_of("Llama 3 8B", "yes"), true);
  auto rep = run_validate({file_of("[" + record({{"model", {{"dropout", 0.0}}}}) + "]"), ""});
  ASSERT_TRUE(rep.ok()) << rep.error().message;
  const auto& a = rep->rows[0].assumptions;
  EXPECT_NE(std::find(a.begin(), a.end(), "dropout 0: off (no dropout kernels or masks)"), a.end());
  const std::string certain = file_of("[" + record({{"model", {{"dropout", 1.5}}}}) + "]");
  EXPECT_EQ(error_of(certain),
            certain + ": records[0].model.dropout: expected a probability in [0, 1) or true/false, got 1.5");
  EXPECT_NE(error_of(file_of("[" + record({{"model", {{"dropout", "maybe"}}}}) + "]")).find("records[0].model.dropout"),
            std::string::npos);
  EXPECT_NE(error_of(file_of("[" + record({{"model", {{"dropout", -0.1}}}}) + "]")).find("records[0].model.dropout"),
            std::string::npos);
}

// plan.fp8_recipe from the precision's words (docs/validation.md): Megatron-Bridge's FP8-MX
// and MXFP8 -> mxfp8, blockwise -> blockwise, delayed -> delayed, FP8-CS and torchao's
// tensorwise -> tensorwise (left out of the plan: the default); FP8 alone -> tensorwise with
// an assumption that says the scaling was not stated.
TEST_F(ValidateTest, Fp8RecipeIsReadFromThePrecision) {
  auto recipe_of = [&](const char* gpu, const char* precision, std::vector<std::string>* assumptions = nullptr) {
    const json patch = {{"hardware", {{"gpu", gpu}}}, {"layout", {{"precision", precision}}}};
    auto rep = run_validate({file_of("[" + record(patch) + "]"), ""});
    EXPECT_TRUE(rep.ok()) << rep.error().message;
    if (!rep.ok()) return std::string("<error>");
    if (assumptions) *assumptions = rep->rows[0].assumptions;
    const json plan = json::parse(rep->rows[0].scenario_json)["plan"];
    EXPECT_EQ(plan["precision"], "fp8") << precision;
    return plan.contains("fp8_recipe") ? plan["fp8_recipe"].get<std::string>() : std::string("tensorwise");
  };
  EXPECT_EQ(recipe_of("B200", "FP8-MX"), "mxfp8");
  EXPECT_EQ(recipe_of("B200", "MXFP8"), "mxfp8");
  EXPECT_EQ(recipe_of("H100-SXM", "FP8 blockwise"), "blockwise");
  EXPECT_EQ(recipe_of("H100-SXM", "fp8_sc"), "blockwise");
  EXPECT_EQ(recipe_of("H100-SXM", "FP8 delayed scaling"), "delayed");
  EXPECT_EQ(recipe_of("H100-SXM", "FP8-CS"), "tensorwise");
  EXPECT_EQ(recipe_of("H100-SXM", "Float8 (torchao, dynamic tensorwise scaling)"), "tensorwise");
  std::vector<std::string> a;
  EXPECT_EQ(recipe_of("H100-SXM", "FP8", &a), "tensorwise");
  EXPECT_NE(std::find(a.begin(), a.end(),
                      "fp8 scaling not stated in precision \"FP8\": tensorwise (Transformer Engine's current scaling)"),
            a.end());
  EXPECT_EQ(recipe_of("B200", "FP8-MX", &a), "mxfp8");
  EXPECT_NE(std::find(a.begin(), a.end(), "fp8_recipe from precision \"FP8-MX\": mxfp8"), a.end());
}

// hardware.interconnect: NICs per node and their speed replace the preset's where the text
// states them (docs/validation.md); anything else keeps the preset (dgx-a100: 8 x 200 Gb/s).
TEST_F(ValidateTest, InterconnectDescriptionsSetTheNics) {
  struct Case {
    const char* text;
    json inter_node;  // null: the preset's
  };
  const Case cases[] = {
      {"Jean Zay: 8x A100-80GB per node, NVLink (4 inter-GPU links), 4x Omni-Path 100 Gb/s links per node",
       {{"nic_Gbps", 100.0}, {"nics_per_node", 4}}},
      {"DGX A100 nodes, 8x 200 Gb/s HDR InfiniBand HCAs per node (+2 for storage)", nullptr},
      {"eight 200G NICs per server wired multi-rail", nullptr},
      {"two 100G NICs per server", {{"nic_Gbps", 100.0}, {"nics_per_node", 2}}},
      {"backend RDMA 400 Gb/s per GPU", {{"nic_Gbps", 400.0}, {"nics_per_node", 8}}},
      {"DGX (NIC configuration not stated on page)", nullptr},
      {"12345x 100 Gb/s", nullptr},  // no count of five digits: not read
      {"8 x 400 Gbps InfiniBand per node", {{"nic_Gbps", 400.0}, {"nics_per_node", 8}}},
      {"4x HDR InfiniBand (Slingshot on the login nodes)", {{"nic_Gbps", 200.0}, {"nics_per_node", 4}}},
      {"4 x NDR", {{"nic_Gbps", 400.0}, {"nics_per_node", 4}}},
      {"RoCE 100 Gbit/s x 4", {{"nic_Gbps", 100.0}, {"nics_per_node", 4}}},
      {"8x H100 80GB per node", nullptr},  // GB is memory, not a link rate
  };
  for (const Case& c : cases) {
    json patch = json::object();
    patch["hardware"]["interconnect"] = c.text;
    auto rep = run_validate({file_of("[" + record(patch) + "]"), ""});
    ASSERT_TRUE(rep.ok()) << rep.error().message;
    const ValidationRow& row = rep->rows[0];
    ASSERT_TRUE(row.predicted) << c.text << ": " << row.reason;
    const json sc = json::parse(row.scenario_json);
    if (c.inter_node.is_null()) {
      EXPECT_FALSE(sc["cluster"].contains("inter_node")) << c.text;
    } else {
      EXPECT_EQ(sc["cluster"]["inter_node"], c.inter_node) << c.text;
      const bool said = std::any_of(row.assumptions.begin(), row.assumptions.end(), [](const std::string& a) {
        return a.rfind("interconnect ", 0) == 0 && a.find("NICs per node (preset dgx-a100: 8 x 200 Gb/s)") != std::string::npos;
      });
      EXPECT_TRUE(said) << c.text;
    }
  }
}

// A GB200 contains "b200" in its name: it runs on the B200 preset on purpose, in 8-GPU
// nodes whatever tray or rack size the record states, and says so; a GB300 (Blackwell Ultra,
// another GPU) is not predicted.
TEST_F(ValidateTest, AGb200RecordIsPricedAsTheB200AndSaysSo) {
  const std::string gb200 = record(json::parse(R"j({"id": "gb200", "hardware": {"gpu": "NVIDIA GB200 (DGX-GB200 NVL72)",
      "gpus_total": 16, "gpus_per_node": 72}})j"));
  const std::string gb300 = record(json::parse(R"j({"id": "gb300", "hardware": {"gpu": "DGX-GB300"}})j"));
  auto rep = run_validate({file_of("[" + gb200 + "," + gb300 + "]"), ""});
  ASSERT_TRUE(rep.ok()) << rep.error().message;
  ASSERT_EQ(rep->rows.size(), 2u);
  const ValidationRow& row = rep->rows[0];
  ASSERT_TRUE(row.predicted) << row.reason;
  const json sc = json::parse(row.scenario_json);
  EXPECT_EQ(sc["cluster"]["preset"], "dgx-b200");
  EXPECT_EQ(sc["cluster"]["nodes"], 2);
  const bool said = std::any_of(row.assumptions.begin(), row.assumptions.end(), [](const std::string& a) {
    return a.find("a GB200 priced as the B200 on dgx-b200 nodes of 8 GPUs") != std::string::npos;
  });
  EXPECT_TRUE(said);
  EXPECT_FALSE(rep->rows[1].predicted);
  EXPECT_EQ(rep->rows[1].reason,
            "no cluster preset for gpu \"DGX-GB300\" (known: SXM A100, H100, H200, B200; A800 and H800 as A100 and "
            "H100 with their NVLink; "
            "GH200 as H100; GB200 as B200)");
}

// A 1F1B schedule stated with virtual stages is Megatron's interleaved 1F1B (its 1F1B over
// virtual stages); an unrecognised schedule with virtual stages keeps them, interleaved. A
// precision naming FP8 beside 16-bit ("BF16 with FP8 GEMMs") is FP8 unless it says FP8 is off;
// FP4 is priced as FP8 and says so.
TEST_F(ValidateTest, SchedulesWithVirtualStagesAndMixedPrecisionsAreReadAsMeant) {
  struct Got {
    std::string schedule, precision;
    int v = 0;
    std::vector<std::string> said;
  };
  auto run = [&](const json& layout) {
    auto rep = run_validate({file_of("[" + record({{"layout", layout}}) + "]"), ""});
    EXPECT_TRUE(rep.ok()) << rep.error().message;
    if (!rep.ok()) return Got{};
    const json plan = json::parse(rep->rows[0].scenario_json)["plan"];
    return Got{plan["schedule"], plan["precision"], plan.value("virtual_stages", 1), rep->rows[0].assumptions};
  };
  const auto has = [](const Got& g, const std::string& a) {
    return std::find(g.said.begin(), g.said.end(), a) != g.said.end();
  };
  const Got one_f = run({{"schedule", "1F1B"}, {"virtual_stages", 2}});
  EXPECT_EQ(one_f.schedule, "interleaved");
  EXPECT_EQ(one_f.v, 2);
  EXPECT_TRUE(has(one_f, "schedule \"1F1B\" with virtual_stages 2: Megatron's interleaved 1F1B"));
  const Got plain = run({{"schedule", "1F1B"}, {"virtual_stages", nullptr}});
  EXPECT_EQ(plain.schedule, "1f1b");
  const Got dual = run({{"schedule", "DualPipe"}, {"virtual_stages", 2}});
  EXPECT_EQ(dual.schedule, "interleaved");
  EXPECT_TRUE(has(dual, "schedule \"DualPipe\" not recognised; virtual_stages 2: Megatron's interleaved 1F1B"));
  EXPECT_EQ(run({{"schedule", "DualPipe"}, {"virtual_stages", nullptr}}).schedule, "1f1b");
  EXPECT_EQ(run({{"precision", "BF16 with FP8 GEMMs"}}).precision, "fp8");
  EXPECT_EQ(run({{"precision", "BF16 (no FP8)"}}).precision, "bf16");
  EXPECT_EQ(run({{"precision", "bfloat16"}}).precision, "bf16");
  const Got fp4 = run({{"precision", "NVFP4"}});
  EXPECT_EQ(fp4.precision, "fp8");
  EXPECT_TRUE(has(fp4, "precision \"NVFP4\": FP4 GEMMs are not modelled, priced as FP8 (errs slow)"));
  // 40 / (2 x 4) = 5 microbatches on pp 2: the run ran, so Megatron-Core ran them in groups
  // it accepts; the smallest is 3 (groups of 2 leave 1 < pp; 5 % 3 = 2).
  auto grouped = run_validate({file_of("[" + record({{"layout", {{"global_batch", 40}}}}) + "]"), ""});
  ASSERT_TRUE(grouped.ok()) << grouped.error().message;
  EXPECT_TRUE(grouped->rows[0].reason.empty()) << grouped->rows[0].reason;
  EXPECT_EQ(json::parse(grouped->rows[0].scenario_json)["plan"]["microbatch_group_size_per_vp_stage"], 3);
  const auto& said = grouped->rows[0].assumptions;
  EXPECT_NE(std::find(said.begin(), said.end(),
                      "microbatch_group_size_per_vp_stage not stated, 5 microbatches not a multiple of pp 2: 3, the "
                      "smallest group Megatron-Core's interleaved schedule runs them in"),
            said.end());
  // Stated, it is read (a group of 5: one group).
  auto stated = run_validate(
      {file_of("[" + record({{"layout", {{"global_batch", 40}, {"microbatch_group_size_per_vp_stage", 5}}}}) + "]"),
       ""});
  ASSERT_TRUE(stated.ok()) << stated.error().message;
  EXPECT_EQ(json::parse(stated->rows[0].scenario_json)["plan"]["microbatch_group_size_per_vp_stage"], 5);
}

// Megatron's recompute_method: "block" with a layer count recomputes that many layers of each
// pipeline chunk in full (plan.recompute_num_layers), so its prediction lies between no and
// full recomputation; "uniform" is full recomputation in groups of its count
// (plan.recompute_method), a block without a count is full recomputation, and
// "checkpointing per block" is not the method.
TEST_F(ValidateTest, BlockRecomputationKeepsItsLayerCount) {
  struct Got {
    std::string recompute;
    int layers = 0;
    double predicted = 0;
    std::vector<std::string> said;
  };
  auto run = [&](const std::string& recompute) {
    const json patch = {{"model", {{"layers", 16}}}, {"layout", {{"recompute", recompute}}}};
    auto rep = run_validate({file_of("[" + record(patch) + "]"), ""});
    EXPECT_TRUE(rep.ok()) << rep.error().message;
    if (!rep.ok()) return Got{};
    const json plan = json::parse(rep->rows[0].scenario_json)["plan"];
    return Got{plan["recompute"], plan.value("recompute_num_layers", 0), rep->rows[0].predicted_value,
               rep->rows[0].assumptions};
  };
  const Got block = run("full, block, 2 layers");
  EXPECT_EQ(block.recompute, "full");
  EXPECT_EQ(block.layers, 2);
  EXPECT_NE(std::find(block.said.begin(), block.said.end(),
                      "recompute \"full, block, 2 layers\": full for the first 2 layers of each pipeline chunk, the "
                      "others keep their activations (Megatron-Core recompute_method \"block\": "
                      "plan.recompute_num_layers)"),
            block.said.end());
  const Got none = run("none"), full = run("full");
  EXPECT_GT(block.predicted, full.predicted);  // 2 of each chunk's 4 layers recompute
  EXPECT_LT(block.predicted, none.predicted);
  EXPECT_EQ(run("recompute_method block, recompute_num_layers 3").layers, 3);
  EXPECT_EQ(run("block 1").layers, 1);
  // "uniform" with 2 layers: every layer recomputes (the time full's), in groups of 2
  // (plan.recompute_method); with one layer per group it is "full" itself.
  const Got uniform = run("full (uniform, 2 layers)");
  EXPECT_EQ(uniform.recompute, "full");
  EXPECT_EQ(uniform.layers, 2);
  EXPECT_DOUBLE_EQ(uniform.predicted, full.predicted);
  EXPECT_NE(std::find(uniform.said.begin(), uniform.said.end(),
                      "recompute \"full (uniform, 2 layers)\": full, every layer, in groups of 2 layers of each "
                      "pipeline chunk that keep one input each (Megatron-Core recompute_method \"uniform\": "
                      "plan.recompute_method, plan.recompute_num_layers)"),
            uniform.said.end());
  const Got one = run("recompute_method uniform, recompute_num_layers 1");
  EXPECT_EQ(one.layers, 0);
  EXPECT_DOUBLE_EQ(one.predicted, full.predicted);
  const Got per_block = run("activation checkpointing of every transformer block");
  EXPECT_EQ(per_block.recompute, "full");
  EXPECT_EQ(per_block.layers, 0);
}

// A measured quantity may carry a unit that restates it, a k or M multiplier, or (MFU) a
// percent sign; each is read and printed. Lower-case m is not mega, and a percent sign on
// another quantity is an error naming the field.
TEST_F(ValidateTest, MeasuredQuantitiesWithUnitsAreReadAsNumbers) {
  auto run = [&](const json& measured) {
    json patch = {{"measured", {{"tflops_per_gpu", nullptr}, {"flop_accounting", nullptr}}}};
    patch["measured"].update(measured);
    return run_validate({file_of("[" + record(patch) + "]"), ""});
  };
  auto rep = run({{"tokens_per_s_per_gpu", "1.6k tokens/s"}});
  ASSERT_TRUE(rep.ok()) << rep.error().message;
  EXPECT_DOUBLE_EQ(rep->rows[0].measured_value, 1600);
  EXPECT_NE(std::find(rep->rows[0].assumptions.begin(), rep->rows[0].assumptions.end(),
                      "tokens_per_s_per_gpu \"1.6k tokens/s\": 1600 (a number written as text)"),
            rep->rows[0].assumptions.end());
  rep = run({{"mfu", "41.2%"}});
  ASSERT_TRUE(rep.ok()) << rep.error().message;
  EXPECT_DOUBLE_EQ(rep->rows[0].measured_mfu, 0.412);
  rep = run({{"tokens_per_s", "2.5M"}});
  ASSERT_TRUE(rep.ok()) << rep.error().message;
  EXPECT_DOUBLE_EQ(rep->rows[0].measured_value, 2.5e6);
  for (const json& bad : {json{{"tokens_per_s", "25m"}}, json{{"tokens_per_s", "50%"}}}) {
    SCOPED_TRACE(bad.dump());
    rep = run(bad);
    ASSERT_FALSE(rep.ok());
    EXPECT_NE(rep.error().message.find("records[0].measured.tokens_per_s: expected a positive number"),
              std::string::npos)
        << rep.error().message;
  }
}

// A count's thousands separators must group three digits each, all the same character:
// "5,0000" and "1,234_567" are not counts, and the field is named.
TEST_F(ValidateTest, ACountWithMisplacedSeparatorsIsAnErrorNamingTheField) {
  for (const char* bad : {"5,0000", "1,234_567", ",500", "50,00"}) {
    SCOPED_TRACE(bad);
    auto rep = run_validate({file_of("[" + record({{"model", {{"vocab", bad}}}}) + "]"), ""});
    ASSERT_FALSE(rep.ok());
    EXPECT_NE(rep.error().message.find("records[0].model.vocab: expected a positive integer"), std::string::npos)
        << rep.error().message;
  }
}

// A dense model of a named gated-FFN family (OLMo, Gemma, Phi-3, ...) or of no named family with
// an FFN narrower than 3.75 x hidden runs the Llama block (SwiGLU: 3 matrices); a GELU FFN is 4 x
// hidden, and a model named GPT keeps the GPT family.
TEST_F(ValidateTest, GatedFfnModelsRunTheLlamaBlock) {
  auto family = [&](const json& model, std::vector<std::string>* said = nullptr) {
    auto rep = run_validate({file_of("[" + record({{"model", model}}) + "]"), ""});
    EXPECT_TRUE(rep.ok()) << rep.error().message;
    if (!rep.ok()) return std::string();
    if (said) *said = rep->rows[0].assumptions;
    const json sc = json::parse(rep->rows[0].scenario_json);
    return sc["model"]["ffn_matrices"] == 3 ? std::string("llama") : std::string("gpt");
  };
  EXPECT_EQ(family({{"name", "OLMo 7B"}}), "llama");
  EXPECT_EQ(family({{"name", "Gemma 2 9B"}}), "llama");
  std::vector<std::string> said;
  EXPECT_EQ(family({{"name", "a 7B model"}, {"ffn_hidden", 2816}}, &said), "llama");  // 2816 / 1024 = 2.75
  EXPECT_NE(std::find(said.begin(), said.end(),
                      "ffn_hidden 2816 = 2.75 x hidden, a gated FFN's width (a GELU FFN's is 4 x hidden): Llama "
                      "architecture (RMSNorm, SwiGLU FFN with 3 matrices, RoPE, no linear biases, untied embeddings, "
                      "no dropout)"),
            said.end());
  EXPECT_EQ(family({{"name", "a 7B model"}, {"ffn_hidden", 4096}}), "gpt");
  EXPECT_EQ(family({{"name", "Falcon 40B"}, {"ffn_hidden", 4096}}), "gpt");
  EXPECT_EQ(family({{"name", "GPT test"}, {"ffn_hidden", 2816}}), "gpt");
}

// The NVL cards are PCIe boards (paired by NVLink bridges), not the SXM servers of the presets:
// not predicted, as "PCIe" parts are; "NVLink" and a GB200 NVL72 rack are not such cards.
TEST_F(ValidateTest, NvlCardsArePcieBoardsNotSxmServers) {
  auto predicted = [&](const char* gpu) {
    const json patch = {{"hardware", {{"gpu", gpu}}}};
    auto rep = run_validate({file_of("[" + record(patch) + "]"), ""});
    EXPECT_TRUE(rep.ok()) << rep.error().message;
    return rep.ok() && rep->rows[0].predicted;
  };
  EXPECT_FALSE(predicted("H100 NVL 94GB"));
  EXPECT_FALSE(predicted("NVIDIA H200 NVL"));
  EXPECT_FALSE(predicted("A100 PCIe 80GB"));
  EXPECT_TRUE(predicted("H100 SXM5 80GB (NVLink 4, NVSwitch)"));
  EXPECT_TRUE(predicted("NVIDIA GB200 NVL72"));
}

TEST_F(ValidateTest, UnexpressibleRecordsAreRowsNotErrors) {
  const std::string moe = record(json::parse(R"j({"id": "moe", "model": {"moe": "128 experts, top-8"},
      "layout": {"ep": 2}})j"));
  const std::string tpu = record(json::parse(R"j({"id": "tpu", "hardware": {"gpu": "TPU v4"}})j"));
  const std::string odd = record(json::parse(R"j({"id": "odd", "layout": {"schedule": "zigzag",
      "precision": "tf32-ish", "recompute": "per recipe", "zero_fsdp": "whatever"}})j"));
  auto rep = run_validate({file_of("[" + moe + "," + tpu + "," + odd + "]"), ""});
  ASSERT_TRUE(rep.ok()) << rep.error().message;
  ASSERT_EQ(rep->rows.size(), 3u);
  EXPECT_FALSE(rep->rows[0].predicted);
  EXPECT_EQ(rep->rows[0].reason,
            "mixture-of-experts model (model.moe \"128 experts, top-8\") without the expert FFN width (\"expert "
            "intermediate F\")");
  EXPECT_EQ(rep->rows[1].reason,
            "no cluster preset for gpu \"TPU v4\" (known: SXM A100, H100, H200, B200; A800 and H800 as A100 and H100 "
            "with their NVLink; "
            "GH200 as H100; GB200 as B200)");
  const ValidationRow& r = rep->rows[2];
  EXPECT_TRUE(r.feasible) << r.reason;
  const auto has = [&](const std::string& a) {
    return std::find(r.assumptions.begin(), r.assumptions.end(), a) != r.assumptions.end();
  };
  EXPECT_TRUE(has("schedule \"zigzag\" not recognised; virtual_stages 2: Megatron's interleaved 1F1B"));
  EXPECT_TRUE(has("precision \"tf32-ish\" not recognised: bf16"));
  EXPECT_TRUE(has("recompute \"per recipe\" not recognised: none"));
  EXPECT_TRUE(has("zero_fsdp \"whatever\" not recognised: ZeRO 0"));
  EXPECT_EQ(rep->compared, 1);  // only the predicted row enters the mean
}

// The MoE rule reads the description's counts; the Megatron-Bridge rule applies the
// performance scripts' settings (docs/validation.md).
TEST_F(ValidateTest, MoeDescriptionsAndMegatronBridgeRecipesMapByDocumentedRules) {
  const std::string moe = record(json::parse(R"j({"id": "moe",
      "source": {"title": "NVIDIA NeMo Megatron-Bridge performance summary"},
      "model": {"name": "Qwen3 tiny", "ffn_hidden": null,
                "moe": "first 1 layers dense; 16 routed experts, top-4, expert intermediate 512, 2 shared experts"},
      "hardware": {"gpu": "H100-SXM5-80GB"},
      "layout": {"tp": 2, "pp": 1, "virtual_stages": null, "ep": 4, "schedule": null, "zero_fsdp": "no FSDP (FSDP=0)",
                 "precision": "FP8-CS"}})j"));
  auto rep = run_validate({file_of("[" + moe + "]"), ""});
  ASSERT_TRUE(rep.ok()) << rep.error().message;
  const ValidationRow& row = rep->rows[0];
  ASSERT_TRUE(row.predicted) << row.reason;
  const json sc = json::parse(row.scenario_json);
  EXPECT_EQ(sc["model"]["moe"], json::parse(R"j({"num_experts": 16, "top_k": 4, "expert_ffn_hidden_size": 512,
      "num_shared_experts": 2, "shared_expert_ffn_hidden_size": 512, "num_dense_layers": 1})j"));
  EXPECT_EQ(sc["model"]["ffn_hidden_size"], 512);  // no dense width stated: the expert's
  EXPECT_EQ(sc["plan"]["zero"], 1);
  EXPECT_EQ(sc["plan"]["grad_dtype"], "bf16");
  EXPECT_EQ(sc["plan"]["tp_comm_overlap"], true);  // tp 2 with sequence parallelism (H100)
  const auto has = [&](const std::string& prefix) {
    return std::any_of(row.assumptions.begin(), row.assumptions.end(),
                       [&](const std::string& a) { return a.rfind(prefix, 0) == 0; });
  };
  EXPECT_TRUE(has("Megatron-Bridge performance recipe (scripts/performance): distributed optimizer (ZeRO 1"));
  EXPECT_TRUE(has("moe \"first 1 layers dense; 16 routed expe...: 16 experts, top-4, expert FFN 512, 2 shared (FFN "
                  "512), 1 leading dense layers"));
}

// The MoE description may quote the models' configuration names, Megatron-Core's or Hugging
// Face's, or shorthand ("E=", "k=", "+ 2 shared", "first layer dense"): each reads as the same
// counts as the prose.
TEST_F(ValidateTest, MoeDescriptionsMayQuoteConfigurationNames) {
  auto moe_of = [&](const char* desc) {
    const json patch = {{"model", {{"name", "Qwen3 tiny"}, {"ffn_hidden", nullptr}, {"moe", desc}}},
                        {"layout", {{"ep", 4}}}};
    auto rep = run_validate({file_of("[" + record(patch) + "]"), ""});
    EXPECT_TRUE(rep.ok()) << rep.error().message;
    if (!rep.ok() || !rep->rows[0].predicted) return json();
    return json::parse(rep->rows[0].scenario_json)["model"]["moe"];
  };
  const json plain = json::parse(R"j({"num_experts": 16, "top_k": 4, "expert_ffn_hidden_size": 512,
      "num_shared_experts": 0, "shared_expert_ffn_hidden_size": 0, "num_dense_layers": 0})j");
  EXPECT_EQ(moe_of("16 experts, top-4, expert FFN 512"), plain);
  EXPECT_EQ(moe_of("num_experts=16, moe_router_topk=4, moe_ffn_hidden_size=512"), plain);
  EXPECT_EQ(moe_of("n_routed_experts: 16, num_experts_per_tok: 4, moe_intermediate_size: 512"), plain);
  EXPECT_EQ(moe_of("E=16, k=4, moe intermediate 512"), plain);
  EXPECT_EQ(moe_of("16 routed experts + 2 shared, topk 4, expert intermediate size 512, first layer dense"),
            json::parse(R"j({"num_experts": 16, "top_k": 4, "expert_ffn_hidden_size": 512, "num_shared_experts": 2,
                "shared_expert_ffn_hidden_size": 512, "num_dense_layers": 1})j"));
  // Megatron-Core gives the shared experts' total width alone: one shared expert of it.
  EXPECT_EQ(moe_of("num_experts 16, top-4, moe_ffn_hidden_size 512, moe_shared_expert_intermediate_size 1024, "
                   "first_k_dense_replace 1"),
            json::parse(R"j({"num_experts": 16, "top_k": 4, "expert_ffn_hidden_size": 512, "num_shared_experts": 1,
                "shared_expert_ffn_hidden_size": 1024, "num_dense_layers": 1})j"));
}

// Token dropping in the MoE description: a stated capacity factor (padded where the text
// says pad), "token drop" alone as Megatron-Bridge's apply_moe_token_drop (1.0, padded),
// "dropless" or nothing dropless; dropping runs the alltoall dispatcher whatever else the
// record names (Megatron-Core drops tokens in no other), and the assumption says so.
TEST_F(ValidateTest, TokenDroppingIsReadFromTheMoeDescription) {
  auto run = [&](const char* desc, const json& dispatcher = nullptr) {
    json layout = {{"ep", 4}};
    if (!dispatcher.is_null()) layout["moe_dispatcher"] = dispatcher;
    const json patch = {{"model", {{"name", "Qwen3 tiny"}, {"moe", desc}}}, {"layout", layout}};
    auto rep = run_validate({file_of("[" + record(patch) + "]"), ""});
    EXPECT_TRUE(rep.ok()) << rep.error().message;
    return rep.ok() ? rep->rows[0] : ValidationRow{};
  };
  auto moe_of = [&](const ValidationRow& row) { return json::parse(row.scenario_json)["model"]["moe"]; };
  const char* base = "16 experts, top-4, expert FFN 512";
  EXPECT_FALSE(moe_of(run(base)).contains("capacity_factor"));
  EXPECT_FALSE(moe_of(run("16 experts, top-4, expert FFN 512, dropless")).contains("capacity_factor"));
  const json padded = moe_of(run("16 experts, top-4, expert FFN 512, capacity factor 1.25, padded to capacity"));
  EXPECT_EQ(padded["capacity_factor"], 1.25);
  EXPECT_EQ(padded["pad_to_capacity"], true);
  const json dropping = moe_of(run("16 experts, top-4, expert FFN 512, moe_expert_capacity_factor=2"));
  EXPECT_EQ(dropping["capacity_factor"], 2.0);
  EXPECT_FALSE(dropping.contains("pad_to_capacity"));
  const ValidationRow drop = run("16 experts, top-4, expert FFN 512, token drop", "DeepEP");
  EXPECT_EQ(moe_of(drop)["capacity_factor"], 1.0);
  EXPECT_EQ(moe_of(drop)["pad_to_capacity"], true);
  EXPECT_FALSE(json::parse(drop.scenario_json)["plan"].contains("moe_dispatcher"));  // alltoall, the default
  const auto has = [&](const ValidationRow& row, const std::string& text) {
    return std::any_of(row.assumptions.begin(), row.assumptions.end(),
                       [&](const std::string& a) { return a.find(text) != std::string::npos; });
  };
  EXPECT_TRUE(has(drop, "moe_dispatcher deepep: token dropping runs the alltoall dispatcher"));
  EXPECT_TRUE(has(drop,
                  "token dropping without a stated capacity: capacity factor 1, padded (Megatron-Bridge's "
                  "apply_moe_token_drop)"));
  EXPECT_TRUE(drop.predicted) << drop.reason;
}

// layout.moe_dispatcher maps to plan.moe_dispatcher by name; HybridEP, which stepcast does not
// model, and a name it does not know are priced as NCCL's all-to-all and say so; a record
// that does not state one gets the all-to-all and the assumption printed.
TEST_F(ValidateTest, MoeDispatcherIsReadByNameOrPricedAsTheAllToAll) {
  const auto moe_record = [](const std::string& id, const json& dispatcher) {
    json layout = {{"tp", 1}, {"ep", 4}, {"zero_fsdp", "ZeRO-1"}};
    if (!dispatcher.is_null()) layout["moe_dispatcher"] = dispatcher;
    return record(json{{"id", id},
                       {"model", {{"name", "Qwen3 tiny"}, {"moe", "8 routed experts, top-2, expert intermediate 512"}}},
                       {"layout", layout}});
  };
  const std::string path = file_of("[" + moe_record("deepep", "DeepEP (flex)") + "," +
                                   moe_record("hybrid", "HybridEP") + "," + moe_record("gather", "allgather") + "," +
                                   moe_record("odd", "pigeons") + "," + moe_record("none", nullptr) + "]");
  auto rep = run_validate({path, ""});
  ASSERT_TRUE(rep.ok()) << rep.error().message;
  ASSERT_EQ(rep->rows.size(), 5u);
  const auto dispatcher_of = [&](std::size_t i) {
    const json plan = json::parse(rep->rows[i].scenario_json)["plan"];
    return plan.contains("moe_dispatcher") ? plan["moe_dispatcher"].get<std::string>() : std::string("alltoall");
  };
  const auto has = [&](std::size_t i, const std::string& line) {
    const auto& a = rep->rows[i].assumptions;
    return std::find(a.begin(), a.end(), line) != a.end();
  };
  EXPECT_EQ(dispatcher_of(0), "deepep");
  EXPECT_TRUE(has(0, "moe_dispatcher \"DeepEP (flex)\": deepep"));
  EXPECT_EQ(dispatcher_of(1), "alltoall");
  EXPECT_TRUE(has(1, "moe_dispatcher \"HybridEP\": HybridEP is not modelled, priced as NCCL's all-to-all"));
  EXPECT_EQ(dispatcher_of(2), "allgather");
  EXPECT_EQ(dispatcher_of(3), "alltoall");
  EXPECT_TRUE(has(3, "moe_dispatcher \"pigeons\" not recognised: NCCL's all-to-all"));
  EXPECT_EQ(dispatcher_of(4), "alltoall");
  EXPECT_TRUE(has(4, "moe_dispatcher not stated: NCCL's all-to-all (Megatron-Core's alltoall dispatcher)"));
  for (const ValidationRow& r : rep->rows) EXPECT_TRUE(r.predicted) << r.id << ": " << r.reason;
}

// layout.etp, layout.moe_a2a_overlap and the recompute_modules a "selective" description
// names reach the plan; the scenario loader's own rules then apply (Megatron-Core refuses
// the all-to-all overlap with full recomputation: not predicted, with its reason).
TEST_F(ValidateTest, FoldingOverlapAndRecomputeModulesReachThePlan) {
  const auto moe_record = [](const std::string& id, const json& layout) {
    json l = {{"tp", 2}, {"pp", 2}, {"ep", 8}, {"zero_fsdp", "ZeRO-1"}, {"sequence_parallel", true}};
    l.update(layout);
    return record(
        json{{"id", id},
             {"model", {{"name", "Qwen3 tiny"}, {"moe", "16 routed experts, top-2, expert intermediate 512"}}},
             {"layout", l}});
  };
  const std::string folded =
      moe_record("folded", {{"etp", 1}, {"moe_a2a_overlap", true}, {"recompute", "selective: moe_act, layernorm"}});
  const std::string refused = moe_record("refused", {{"etp", 1}, {"moe_a2a_overlap", true}, {"recompute", "full"}});
  const std::string plain = moe_record("plain", {{"ep", 4}, {"recompute", "selective"}});
  auto rep = run_validate({file_of("[" + folded + "," + refused + "," + plain + "]"), ""});
  ASSERT_TRUE(rep.ok()) << rep.error().message;
  ASSERT_EQ(rep->rows.size(), 3u);
  // 16 GPUs, tp 2 x pp 2: dp 4, so ep 8 needs the folding etp 1 (ep 8 divides tp x dp = 8).
  const ValidationRow& f = rep->rows[0];
  ASSERT_TRUE(f.predicted) << f.reason;
  const json fp = json::parse(f.scenario_json)["plan"];
  EXPECT_EQ(fp["etp"], 1);
  EXPECT_EQ(fp["ep"], 8);
  EXPECT_EQ(fp["moe_a2a_overlap"], true);
  EXPECT_EQ(fp["recompute"], "selective");
  EXPECT_EQ(fp["recompute_modules"], json::parse(R"(["moe_act", "layernorm"])"));
  EXPECT_NE(std::find(f.assumptions.begin(), f.assumptions.end(),
                      "recompute \"selective: moe_act, layernorm\": selective, recompute_modules moe_act, layernorm"),
            f.assumptions.end());
  EXPECT_FALSE(rep->rows[1].predicted);
  EXPECT_NE(rep->rows[1].reason.find("plan.moe_a2a_overlap"), std::string::npos) << rep->rows[1].reason;
  const json pp = json::parse(rep->rows[2].scenario_json)["plan"];
  EXPECT_FALSE(pp.contains("etp"));
  EXPECT_FALSE(pp.contains("moe_a2a_overlap"));
  EXPECT_FALSE(pp.contains("recompute_modules"));  // Megatron's default selective: the attention core
  EXPECT_EQ(pp["recompute"], "selective");
}

// A row is inside its band when the step its measured throughput implies -- predicted step x
// predicted / measured throughput -- lies between the prediction's p10 and p90.
TEST(ValidationRowBand, TheMeasuredThroughputsStepAgainstTheBandByHand) {
  ValidationRow r;
  r.feasible = true;
  r.predicted_iteration_s = 10.0;
  r.band_p10_s = 9.0;
  r.band_p90_s = 12.0;
  r.predicted_value = 100.0;
  r.measured_value = 90.0;  // implies 10 x 100 / 90 = 11.1 s
  EXPECT_TRUE(r.in_band());
  r.measured_value = 80.0;  // 12.5 s: slower than p90
  EXPECT_FALSE(r.in_band());
  r.measured_value = 112.0;  // 8.93 s: faster than p10
  EXPECT_FALSE(r.in_band());
  r.measured_value = 111.0;  // 9.01 s
  EXPECT_TRUE(r.in_band());
}

TEST_F(ValidateTest, InconsistentRecordsAreErrors) {
  const std::string kv = record(json::parse(R"j({"model": {"kv_heads": 3}})j"));
  const std::string ga = record(json::parse(R"j({"id": "ga", "layout": {"grad_accum": 4}})j"));
  const std::string path = file_of("[" + kv + "," + ga + "," + record() + "]");
  // grad_accum: 64 / (2 x 4) = 8, not 4. records[0] and records[2] are both "hand".
  EXPECT_EQ(error_of(path), path + ": records[0].model.kv_heads: 3 does not divide heads (16)\n" + path +
                                ": records[1].layout.grad_accum: 4 does not match global_batch / (microbatch x dp) "
                                "= 64 / (2 x 4)\n" +
                                path + ": records[2].id: \"hand\" repeats records[0].id");
}

TEST_F(ValidateTest, SlidingWindowFieldsAreReadOrNamed) {
  const std::string one =
      record(json::parse(R"j({"id": "one", "model": {"sliding_window": 256, "window_attn_skip_freq": 1}})j"));
  const std::string bare = record(json::parse(R"j({"id": "bare", "model": {"window_attn_skip_freq": 2}})j"));
  const std::string path = file_of("[" + one + "," + bare + "]");
  EXPECT_EQ(error_of(path), path +
                                ": records[0].model.window_attn_skip_freq: expected 0 (every layer windowed) or "
                                "an integer from 2 to 1000 (layers numbered N, 2N, ... keep full attention), got 1\n" +
                                path +
                                ": records[1].model.window_attn_skip_freq: given without sliding_window (the "
                                "window's size in tokens)");
  // A window on every third layer's neighbours reaches the scenario, with the assumption printed.
  const std::string ok_path =
      file_of("[" + record(json::parse(R"j({"model": {"sliding_window": 256, "window_attn_skip_freq": 3}})j")) + "]");
  auto rep = run_validate({ok_path, ""});
  ASSERT_TRUE(rep.ok()) << rep.error().message;
  const json sc = json::parse(rep->rows.at(0).scenario_json);
  EXPECT_EQ(sc["model"]["sliding_window"], 256);
  EXPECT_EQ(sc["model"]["window_attn_skip_freq"], 3);
  const auto& a = rep->rows.at(0).assumptions;
  EXPECT_NE(std::find(a.begin(), a.end(),
                      "sliding_window 256: each query of a windowed layer attends the last 256 keys; layers numbered "
                      "3, 6, ... keep full attention (window_attn_skip_freq 3)"),
            a.end());
}

// Records written by hand for runs stepcast has not seen are messy: counts as text, yes/no
// words, a degree or the batch left out, only an MFU or model TFLOP/s measured, an export GPU,
// a Mixtral. Each gets a documented rule and a printed assumption (docs/validation.md), not a
// rejection of the whole file.
TEST_F(ValidateTest, MessyRecordsGetARulePrintedNotARejection) {
  const std::string text = record(json::parse(R"j({"id": "text", "model": {"vocab": "50,000"},
      "layout": {"tp": "2", "pp": " 2", "microbatch": "2",
      "global_batch": "64", "sequence_parallel": "yes", "recompute": true, "zero_fsdp": 2},
      "measured": {"tflops_per_gpu": "1,000.5"}})j"));
  // merge_patch: null removes a key, so these records leave tp, pp and the batch out.
  const std::string unstated = record(json::parse(R"j({"id": "unstated", "layout": {"tp": null, "pp": null,
      "virtual_stages": null, "schedule": null, "global_batch": null, "recompute": "activation checkpointing"}})j"));
  const std::string piped = record(json::parse(R"j({"id": "piped", "layout": {"global_batch": null}})j"));
  const std::string mfu = record(json::parse(R"j({"id": "mfu", "measured": {"tflops_per_gpu": null,
      "flop_accounting": null, "mfu": 45}})j"));
  const std::string model_tflops = record(json::parse(R"j({"id": "model_tflops", "measured": {"tflops_per_gpu": null,
      "flop_accounting": null, "model_tflops_per_gpu": 100}})j"));
  const std::string h800 = record(json::parse(R"j({"id": "h800", "hardware": {"gpu": "NVIDIA H800 SXM5 80GB"}})j"));
  const std::string mixtral = record(json::parse(R"j({"id": "mixtral", "model": {"name": "Mixtral tiny",
      "kv_heads": 8, "ffn_hidden": 3584, "moe": "8 experts, top-2"}, "layout": {"ep": 2}})j"));
  const std::string nemo = record(json::parse(R"j({"id": "nemo",
      "source": {"title": "NVIDIA NeMo Framework performance summary (24.12)"},
      "hardware": {"gpu": "H100-SXM5-80GB"}, "layout": {"zero_fsdp": null, "precision": "FP8"}})j"));
  const std::string nemo_moe = record(json::parse(R"j({"id": "nemo_moe",
      "source": {"title": "NVIDIA NeMo Framework performance summary (24.12)"},
      "model": {"name": "Mixtral tiny", "kv_heads": 8, "ffn_hidden": 3584, "moe": "8 experts, top-2", "seq_len": "2k"},
      "hardware": {"gpu": "H100-SXM5-80GB"}, "layout": {"ep": 2, "zero_fsdp": null}})j"));
  const std::string derived = record(json::parse(R"j({"id": "derived", "hardware": {"gpus_total": null},
      "layout": {"dp": 4}})j"));
  const std::string four = record(json::parse(R"j({"id": "four", "hardware": {"gpus_total": 4,
      "gpus_per_node": null}})j"));
  const std::string six_n = record(json::parse(R"j({"id": "six_n", "model": {"params": 2e9},
      "measured": {"flop_accounting": "6ND"}})j"));
  const std::string palm = record(json::parse(R"j({"id": "palm", "model": {"params": 2e9},
      "measured": {"flop_accounting": "PaLM: 6N + 12*L*H*Q*T per token"}})j"));
  auto rep = run_validate(
      {file_of("[" + text + "," + unstated + "," + piped + "," + mfu + "," + model_tflops + "," + h800 + "," + mixtral +
               "," + nemo + "," + six_n + "," + palm + "," + nemo_moe + "," + derived + "," + four + "]"),
       ""});
  ASSERT_TRUE(rep.ok()) << rep.error().message;
  ASSERT_EQ(rep->rows.size(), 13u);
  const auto has = [](const ValidationRow& r, const std::string& a) {
    return std::find(r.assumptions.begin(), r.assumptions.end(), a) != r.assumptions.end();
  };

  const ValidationRow& t = rep->rows[0];
  EXPECT_EQ(t.layout, "tp2 pp2 dp4 v2 z2 mb2 gbs64");  // 16 GPUs / (2 x 2); zero_fsdp 2: ZeRO 2
  EXPECT_DOUBLE_EQ(t.measured_value, 1000.5);
  EXPECT_TRUE(has(t, "tflops_per_gpu \"1,000.5\": 1000.5 (a number written as text)"));
  EXPECT_TRUE(has(t, "tp \"2\": 2 (a count written as text)"));
  EXPECT_TRUE(has(t, "pp \" 2\": 2 (a count written as text)"));
  EXPECT_TRUE(has(t, "vocab \"50,000\": 50000 (a count written as text)"));
  EXPECT_TRUE(has(t, "sequence_parallel \"yes\": true"));
  EXPECT_TRUE(has(t, "recompute true: full"));
  json sc = json::parse(t.scenario_json);
  EXPECT_EQ(sc["plan"]["sequence_parallel"], true);
  EXPECT_EQ(sc["plan"]["recompute"], "full");

  // No tp, pp or batch: 1, 1, and one microbatch of 2 per rank on dp = 16 GPUs: 32 sequences.
  const ValidationRow& u = rep->rows[1];
  EXPECT_EQ(u.layout, "tp1 pp1 dp16 z1 mb2 gbs32");
  EXPECT_TRUE(has(u, "tp not stated: 1"));
  EXPECT_TRUE(has(u, "pp not stated: 1"));
  EXPECT_TRUE(has(u,
                  "global_batch not stated: one microbatch per data-parallel rank, no accumulation (microbatch x "
                  "dp = 2 x 16 = 32)"));
  EXPECT_TRUE(has(u, "recompute \"activation checkpointing\": full"));
  ASSERT_TRUE(u.predicted) << u.reason;
  EXPECT_EQ(json::parse(u.scenario_json)["plan"]["global_batch"], 32);

  // A pipeline without its batch is not predicted: its fill depends on the microbatch count.
  EXPECT_FALSE(rep->rows[2].predicted);
  EXPECT_EQ(rep->rows[2].layout, "tp2 pp2 dp4 v2 z1 mb2 gbs?");
  EXPECT_EQ(rep->rows[2].reason,
            "global_batch not stated (nor grad_accum) with pp 2: the pipeline's fill depends on the number of "
            "microbatches");

  // The hand record's model FLOPs per step, 3 x the forward's matmul FLOPs with the full
  // square, is Korthikanti's eq. 7 without recomputation: 93,183,610,454,016 (worked out in
  // HandWrittenRecordFollowsTheRules). MFU = that / (step x 16 GPUs x 312 TFLOP/s, the A100's
  // dense BF16 peak); model TFLOP/s per GPU = that / (step x 16) / 1e12.
  const double model_flops = 93'183'610'454'016.0;
  const ValidationRow& m = rep->rows[3];
  EXPECT_EQ(m.metric, "MFU %");
  EXPECT_DOUBLE_EQ(m.measured_value, 45.0);  // "45": a percentage
  EXPECT_DOUBLE_EQ(m.measured_mfu, 0.45);
  EXPECT_TRUE(has(m, "mfu 45: 0.45 (a percentage)"));
  ASSERT_TRUE(m.feasible) << m.reason;
  EXPECT_NEAR(m.predicted_value, 100 * model_flops / (m.predicted_iteration_s * 16 * 312e12), 1e-9);
  EXPECT_NEAR(m.throughput_error(), m.predicted_value / 45 - 1, 1e-12);
  const ValidationRow& mt = rep->rows[4];
  EXPECT_EQ(mt.metric, "model TFLOP/s");
  ASSERT_TRUE(mt.feasible) << mt.reason;
  EXPECT_NEAR(mt.predicted_value, model_flops / (mt.predicted_iteration_s * 16) / 1e12, 1e-9);
  EXPECT_EQ(rep->compared, 10);  // text, unstated, mfu, model_tflops, h800, nemo, six_n, palm, derived, four

  // An H800: the H100 preset with NVLink at 200 GB/s per direction.
  sc = json::parse(rep->rows[5].scenario_json);
  EXPECT_EQ(sc["cluster"]["preset"], "dgx-h100");
  EXPECT_EQ(sc["cluster"]["intra_node"], json::parse(R"j({"bandwidth_GBps": 200.0})j"));
  EXPECT_EQ(sc["plan"]["sequence_parallel"], true);  // not stated, Hopper: on

  // Mixtral: the Llama block, each expert the model's FFN width.
  const ValidationRow& x = rep->rows[6];
  ASSERT_TRUE(x.predicted) << x.reason;
  sc = json::parse(x.scenario_json);
  EXPECT_EQ(sc["model"]["family"], "llama");
  EXPECT_EQ(sc["model"]["moe"]["num_experts"], 8);
  EXPECT_EQ(sc["model"]["moe"]["top_k"], 2);
  EXPECT_EQ(sc["model"]["moe"]["expert_ffn_hidden_size"], 3584);
  EXPECT_TRUE(has(x, "moe \"8 experts, top-2\": expert FFN width not stated, every layer MoE: ffn_hidden (3584)"));

  // NeMo's performance tables: the recipes' distributed optimizer; FP8 reduces bf16
  // gradients; TP overlap with sequence parallelism.
  sc = json::parse(rep->rows[7].scenario_json);
  EXPECT_EQ(sc["plan"]["zero"], 1);
  EXPECT_EQ(sc["plan"]["grad_dtype"], "bf16");
  EXPECT_EQ(sc["plan"]["tp_comm_overlap"], true);

  // TFLOP/s under 6 N per token: 6 x 2e9 x 64 x 2048 = 1,572,864,000,000,000; under PaLM's
  // 6 N + 12 l h s: 64 x 2048 x (1.2e10 + 12 x 4 x 1024 x 2048 = 100,663,296), i.e.
  // 1,572,864,000,000,000 + 131,072 x 100,663,296 = 13,194,139,533,312: 1,586,058,139,533,312.
  EXPECT_DOUBLE_EQ(rep->rows[8].accounting_flops_per_step, 1'572'864'000'000'000.0);
  EXPECT_DOUBLE_EQ(rep->rows[9].accounting_flops_per_step, 1'586'058'139'533'312.0);
  EXPECT_NEAR(rep->rows[8].predicted_value, 1.572864e15 / (rep->rows[8].predicted_iteration_s * 16) / 1e12, 1e-9);

  // NeMo's MoE recipes leave TP overlap off; "2k" tokens is 2048.
  const ValidationRow& nm = rep->rows[10];
  ASSERT_TRUE(nm.predicted) << nm.reason;
  sc = json::parse(nm.scenario_json);
  EXPECT_EQ(sc["plan"]["zero"], 1);
  EXPECT_FALSE(sc["plan"].contains("tp_comm_overlap"));
  EXPECT_EQ(sc["workload"]["seq_len"], 2048);
  EXPECT_TRUE(has(nm, "seq_len \"2k\": 2048 (k = 1024 tokens)"));

  // No GPU count: the layout's product, 2 x 2 x 1 x 4 = 16; four GPUs without a node size: one
  // node of 4.
  EXPECT_EQ(rep->rows[11].gpus, 16);
  EXPECT_TRUE(has(rep->rows[11], "gpus_total not stated: tp x pp x cp x dp = 2 x 2 x 1 x 4 = 16"));
  ASSERT_TRUE(rep->rows[12].predicted) << rep->rows[12].reason;
  EXPECT_EQ(json::parse(rep->rows[12].scenario_json)["cluster"],
            json::parse(R"j({"preset": "dgx-a100", "nodes": 1, "gpus_per_node": 4})j"));
  EXPECT_TRUE(has(rep->rows[12], "gpus_per_node not stated, 4 GPUs: one node"));
  // Neither a GPU count nor dp: the record cannot be placed, an error naming the field.
  const std::string nowhere = record(json::parse(R"j({"id": "nowhere", "hardware": {"gpus_total": null}})j"));
  const std::string path = file_of("[" + nowhere + "]");
  EXPECT_EQ(error_of(path), path +
                                ": records[0].hardware.gpus_total: missing (required): a positive integer (or "
                                "layout.dp, to derive it)");
}

// Descriptions of hundreds of thousands of characters (pasted or fuzzed) are read in their
// first 1000 characters: the rules' regular expressions would otherwise recurse per character
// and overflow the stack. The record is predicted or refused by field, never a crash.
TEST_F(ValidateTest, HugeDescriptionsAreReadWithoutCrashing) {
  const std::string pad(200'000, ' ');
  json patch = json::object();
  patch["hardware"]["gpu"] = "H100 1" + pad + "W";
  patch["hardware"]["interconnect"] = "8 x" + pad + "200 Gbps";
  patch["measured"]["flop_accounting"] = "6" + pad + "N";
  patch["layout"]["schedule"] = "interleaved" + pad;
  const std::string huge = record(patch);
  auto rep = run_validate({file_of("[" + huge + "]"), ""});
  ASSERT_TRUE(rep.ok()) << rep.error().message;
  EXPECT_TRUE(rep->rows.at(0).predicted) << rep->rows[0].reason;
  // A number written as 300,000 digits is not a number: an error naming the field.
  json digits = json::object();
  digits["model"]["seq_len"] = pad + "4k";
  digits["measured"]["tokens_per_s"] = std::string(300'000, '1');
  const std::string path = file_of("[" + record(digits) + "]");
  const std::string err = error_of(path);
  EXPECT_NE(err.find("records[0].model.seq_len: expected a positive integer"), std::string::npos) << err;
  EXPECT_NE(err.find("records[0].measured.tokens_per_s: expected a positive number"), std::string::npos) << err;
}

TEST_F(ValidateTest, WrongTypesNameTheirJsonPath) {
  const std::string bad =
      record(json::parse(R"j({"id": "bad", "model": {"hidden": "x"}, "layout": {"sequence_parallel": "maybe"},
      "measured": {"iteration_time_s": -3}})j"));
  const std::string path = file_of("[" + record() + ", 7, " + bad + "]");
  EXPECT_EQ(error_of(path),
            path + ": records[1]: expected an object, got 7\n" + path +
                ": records[2].model.hidden: expected a positive integer, got \"x\"\n" + path +
                ": records[2].layout.sequence_parallel: expected true or false (or yes/no, on/off), got \"maybe\"\n" +
                path + ": records[2].measured.iteration_time_s: expected a positive number, got -3");
}

TEST_F(ValidateTest, UnknownKeysGetDidYouMean) {
  json rec = json::parse(record());
  rec["model"].erase("hidden");
  rec["model"]["hiden"] = 1024;
  rec["layuot"] = rec["layout"];
  rec.erase("layout");
  const std::string path = file_of("[" + rec.dump() + "]");
  EXPECT_EQ(error_of(path), path + ": records[0].layout: missing (required): an object\n" + path +
                                ": records[0].layuot: unknown key; did you mean \"layout\"?\n" + path +
                                ": records[0].model.hidden: missing (required): a positive integer\n" + path +
                                ": records[0].model.hiden: unknown key; did you mean \"hidden\"?");
}

// A source's fields stepcast has no rule for are named in the record's assumptions, not
// refused: one unknown key must not cost a whole file's predictions. A key within two edits
// of a known one stays an error (UnknownKeysGetDidYouMean). Other spellings of what it reads
// are read: measured.step_time_s as iteration_time_s, "1,100 tokens/s/GPU", "12.5 s",
// "75 GB" (10^9 bytes), the chunk count in the schedule's text, the batch in tokens.
TEST_F(ValidateTest, FieldsStepcastDoesNotReadAreNamedNotRefused) {
  const json rec = json::parse(record(json::parse(R"j({"id": "extra", "gpu_hours": 1000,
      "model": {"rope_theta": 500000}, "hardware": {"cpu": "2x EPYC"},
      "layout": {"schedule": "interleaved, 2 virtual stages", "virtual_stages": null, "global_batch": null,
                 "global_batch_tokens": 131072, "activation_offload": false},
      "measured": {"tflops_per_gpu": null, "throughput": "fast", "tokens_per_s_per_gpu": "1,100 tokens/s/GPU",
                   "step_time_s": "12.5 s", "peak_memory_gib": "75 GB"}})j")));
  auto rep = run_validate({file_of("[" + rec.dump() + "]"), ""});
  ASSERT_TRUE(rep.ok()) << rep.error().message;
  const ValidationRow& r = rep->rows[0];
  auto has = [&](const std::string& line) {
    return std::find(r.assumptions.begin(), r.assumptions.end(), line) != r.assumptions.end();
  };
  EXPECT_TRUE(
      has("not read (stepcast has no rule for them): gpu_hours, model.rope_theta, hardware.cpu, "
          "layout.activation_offload, measured.throughput"));
  EXPECT_EQ(r.measured_tokens_per_s_per_gpu, 1100);
  EXPECT_EQ(r.measured_iteration_s, 12.5);
  EXPECT_TRUE(has("measured.step_time_s: read as iteration_time_s"));
  EXPECT_NEAR(r.measured_peak_memory_gib, 75e9 / (1024.0 * 1024 * 1024), 1e-9);  // 69.85 GiB
  EXPECT_TRUE(has("virtual_stages not stated, schedule \"interleaved, 2 virtual stages\": 2"));
  // 131,072 tokens / 2,048 = 64 sequences.
  EXPECT_TRUE(has("global_batch_tokens 131072: 64 sequences of 2048 tokens"));
  EXPECT_EQ(r.layout, "tp2 pp2 dp4 v2 z1 mb2 gbs64");
  // The count written as Megatron's flag ("VP=2"); a digit run glued to letters is no count.
  for (const auto& [schedule, layout] : {std::pair{"interleaved (VP=2)", "tp2 pp2 dp4 v2 z1 mb2 gbs64"},
                                         std::pair{"interleaved 1F1B, mvp2x", "tp2 pp2 dp4 z1 mb2 gbs64"}}) {
    json other = rec;
    other["layout"]["schedule"] = schedule;
    auto o = run_validate({file_of("[" + other.dump() + "]"), ""});
    ASSERT_TRUE(o.ok()) << o.error().message;
    EXPECT_EQ(o->rows[0].layout, layout) << schedule;
  }
  // A misspelling of a key it reads is still refused, naming the key it meant.
  json typo = rec;
  typo["measured"]["tokens_per_s_per_gp"] = 1;
  EXPECT_EQ(error_of(file_of("[" + typo.dump() + "]")),
            (dir_ / "runs.json").string() +
                ": records[0].measured.tokens_per_s_per_gp: unknown key; did you mean \"tokens_per_s_per_gpu\"?");
}

TEST_F(ValidateTest, MalformedDocumentsAreRefusedWholly) {
  std::string path = write("cut.json", "{\"records\": [");
  EXPECT_EQ(error_of(path), path + ": invalid JSON: parse error at line 1, column 14: syntax error while parsing "
                            "value - unexpected end of input; expected '[', '{', or a literal");
  path = write("deep.json", std::string(100, '[') + std::string(100, ']'));
  EXPECT_EQ(error_of(path), path + ": invalid JSON: nesting deeper than 64 levels at line 1");
  path = write("top.json", "[1, 2]");
  EXPECT_EQ(error_of(path), path + ": expected a JSON object at the top level, got [1,2]");
  path = write("none.json", "{\"format\": 1}");
  EXPECT_EQ(error_of(path), path + ": records: missing (required): an array of measured runs");
  path = write("empty.json", "{\"records\": []}");
  EXPECT_EQ(error_of(path), path + ": records: empty: nothing to validate");
  path = write("format.json", "{\"format\": 2, \"records\": [1]}");
  EXPECT_EQ(error_of(path), path + ": format: 2 is not supported (this stepcast reads format 1)");
  path = write("typo.json", "{\"records\": [" + record() + "], \"descripton\": \"x\"}");
  EXPECT_EQ(error_of(path), path + ": descripton: unknown key; did you mean \"description\"?");
}

TEST_F(ValidateTest, PipesAndDevicesAreRefused) {
  const std::string fifo = (dir_ / "fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(error_of(fifo), fifo + ": not a regular file (a pipe, device or socket)");
  EXPECT_EQ(error_of("/dev/zero"), "/dev/zero: not a regular file (a pipe, device or socket)");
  EXPECT_EQ(error_of((dir_ / "absent.json").string()), (dir_ / "absent.json").string() + ": no such file or directory");
}

TEST_F(ValidateTest, TenThousandBadRecordsGiveACappedMessage) {
  std::string records = "[";
  for (int i = 0; i < 10'000; ++i) records += i ? ",5" : "5";
  const std::string path = file_of(records + "]");
  // reader::kMaxDiagnosticLines (20) lines, then one line counting the other 9,980.
  std::string expected;
  for (int i = 0; i < 20; ++i) expected += path + ": records[" + std::to_string(i) + "]: expected an object, got 5\n";
  expected += path + ": ... and 9980 more problems (the first 20 are listed)";
  EXPECT_EQ(error_of(path), expected);
}

TEST_F(ValidateTest, ScenariosAreWrittenOrFailCleanly) {
  const std::string path = file_of("[" + record() + "]");
  const std::string out = (dir_ / "out" / "nested").string();
  auto rep = run_validate({path, out});
  ASSERT_TRUE(rep.ok()) << rep.error().message;
  ASSERT_EQ(rep->written, std::vector<std::string>{out + "/hand.json"});
  std::ifstream in(out + "/hand.json");
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  auto parsed = reader::parse_document(text);  // comments allowed: `stepcast estimate` reads it
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_EQ((*parsed)["plan"]["tp"], 2);
  // A regular file where the directory should be: an error naming it, nothing else written.
  const std::string blocker = write("blocker", "x");
  auto bad = run_validate({path, blocker + "/sub"});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message.rfind("scenario_dir " + blocker + "/sub: cannot create directory (", 0), 0u)
      << bad.error().message;
}

// A record on part of one node (a single-GPU run) runs on that many GPUs of one node; several
// nodes of fewer than 8 GPUs are nodes of that many of the preset's GPUs with its NICs per GPU;
// more than 8 per node is not predicted.
// A record without its microbatch: global_batch / (grad_accum x dp) where it states the
// accumulation; one microbatch a step (global_batch / dp) when sharded (ZeRO-3) without a
// pipeline, lowered to the largest divisor that fits; else 1. Oracles: the divisions by hand,
// and for the lowering a scan of the divisors by estimate() on the written scenario.
TEST_F(ValidateTest, AnUnstatedMicrobatchIsDerivedFromTheAccumulationOrTheShardedStep) {
  auto rows_of = [&](const std::vector<json>& patches) {
    std::string text = "[";
    for (std::size_t i = 0; i < patches.size(); ++i) {
      json p = patches[i];
      p["id"] = fmt::format("r{}", i);
      p["layout"]["microbatch"] = nullptr;
      p["layout"]["virtual_stages"] = nullptr;
      p["layout"]["schedule"] = nullptr;
      text += (i ? "," : "") + record(p);
    }
    auto rep = run_validate({file_of(text + "]"), ""});
    EXPECT_TRUE(rep.ok()) << rep.error().message;
    return rep.ok() ? rep->rows : std::vector<ValidationRow>{};
  };
  auto has = [](const ValidationRow& r, const std::string& line) {
    return std::find(r.assumptions.begin(), r.assumptions.end(), line) != r.assumptions.end();
  };
  const auto rows = rows_of({
      json::parse(R"j({"layout": {"tp": 1, "pp": 1, "zero_fsdp": "ZeRO-3"}})j"),
      json::parse(R"j({"layout": {"tp": 1, "pp": 1, "zero_fsdp": "ZeRO-1", "grad_accum": 2}})j"),
      json::parse(R"j({"layout": {"tp": 1, "pp": 1, "zero_fsdp": "ZeRO-1"}})j"),
      json::parse(R"j({"layout": {"tp": 1, "pp": 2, "zero_fsdp": "ZeRO-3"}})j"),
      json::parse(R"j({"layout": {"tp": 2, "pp": 1, "zero_fsdp": "ZeRO-3", "grad_accum": 4}})j"),
  });
  ASSERT_EQ(rows.size(), 5u);
  // 16 GPUs, tp 1: dp 16; 64 / 16 = 4.
  EXPECT_EQ(rows[0].layout, "tp1 pp1 dp16 z3 mb4 gbs64");
  EXPECT_TRUE(has(rows[0],
                  "microbatch not stated, ZeRO-3 without a pipeline: one microbatch a step, global_batch / dp = 64 / "
                  "16 = 4 (a sharded step gathers the weights again for every microbatch)"));
  EXPECT_TRUE(rows[0].feasible) << rows[0].reason;
  // 64 / (2 x 16) = 2.
  EXPECT_EQ(rows[1].layout, "tp1 pp1 dp16 z1 mb2 gbs64");
  EXPECT_TRUE(has(rows[1], "microbatch not stated: global_batch / (grad_accum x dp) = 64 / (2 x 16) = 2"));
  // Not sharded, or pipelined: Megatron's default, 1.
  EXPECT_EQ(rows[2].layout, "tp1 pp1 dp16 z1 mb1 gbs64");
  EXPECT_TRUE(has(rows[2], "microbatch not stated: 1"));
  EXPECT_EQ(rows[3].layout, "tp1 pp2 dp8 z3 mb1 gbs64");
  EXPECT_TRUE(has(rows[3], "microbatch not stated: 1"));
  // The stated accumulation wins over the sharded rule: dp 8, 64 / (4 x 8) = 2.
  EXPECT_EQ(rows[4].layout, "tp2 pp1 dp8 z3 mb2 gbs64");

  // 24 layers of h 2048 without FlashAttention or recomputation on 40 GB A100s: 1024 / 16 =
  // 64 sequences a rank do not fit; validate takes the largest divisor of 64 that does.
  const auto big = rows_of({json::parse(R"j({"model": {"layers": 24, "hidden": 2048},
      "hardware": {"gpu": "A100-SXM4-40GB"},
      "layout": {"tp": 1, "pp": 1, "zero_fsdp": "ZeRO-3", "global_batch": 1024, "recompute": "none"}})j")});
  ASSERT_EQ(big.size(), 1u);
  ASSERT_TRUE(big[0].feasible) << big[0].reason;
  const json sc = json::parse(big[0].scenario_json);
  const std::int64_t chosen = sc["plan"]["microbatch"];
  std::int64_t oracle = 0;
  for (std::int64_t d = 64; d >= 1 && oracle == 0; --d) {
    if (64 % d != 0) continue;
    json trial = sc;
    trial["plan"]["microbatch"] = d;
    const auto parsed = stepcast::parse_scenario(trial.dump());
    ASSERT_TRUE(parsed.ok()) << parsed.error().message;
    if (stepcast::estimate(*parsed).memory.fits) oracle = d;
  }
  ASSERT_GT(oracle, 0);
  EXPECT_LT(oracle, 64);
  EXPECT_EQ(chosen, oracle);
  EXPECT_TRUE(has(big[0], fmt::format("microbatch not stated, ZeRO-3 without a pipeline: one microbatch a step, "
                                      "global_batch / dp = 1024 / 16 = 64 (a sharded step gathers the weights again "
                                      "for every microbatch); 64 does not fit: the largest divisor that fits, {} ({} "
                                      "microbatches a step)",
                                      oracle, 64 / oracle)));
}

// Multi-head latent attention and multi-token prediction: model.mla (Hugging Face's rank
// names) and model.num_nextn_predict_layers reach the scenario's model; a record named
// DeepSeek-V3 with the preset's shapes takes the preset's ranks, its one MTP module and its
// node-limited routing where it states none (models/data/models.json: 1536, 512, 128, 64, 128;
// 8 groups, 4 per token); modules named in prose are selective recomputation of those.
TEST_F(ValidateTest, LatentAttentionAndMtpAreReadOrTakenFromThePreset) {
  const json dsv3 = json::parse(R"j({"id": "dsv3", "model": {"name": "DeepSeek-V3", "layers": 61, "hidden": 7168,
      "heads": 128, "kv_heads": 128, "ffn_hidden": 18432, "vocab": 129280, "seq_len": 4096,
      "moe": "256 routed experts + 1 shared expert, top-8, expert FFN 2048, first 3 layers dense"},
      "layout": {"tp": 1, "pp": 1, "ep": 8, "virtual_stages": null, "schedule": null,
                 "recompute": "RMSNorm and MLA up-projections"}})j");
  json own = dsv3;
  own["id"] = "own";
  own["model"]["name"] = "a latent-attention model";
  own["model"]["mla"] = {{"q_lora_rank", nullptr},
                         {"kv_lora_rank", 256},
                         {"qk_nope_head_dim", 64},
                         {"qk_rope_head_dim", 32},
                         {"v_head_dim", 64}};
  own["model"]["num_nextn_predict_layers"] = 2;
  auto rep = run_validate({file_of("[" + record(dsv3) + "," + record(own) + "]"), ""});
  ASSERT_TRUE(rep.ok()) << rep.error().message;
  ASSERT_EQ(rep->rows.size(), 2u);
  const json a = json::parse(rep->rows[0].scenario_json)["model"];
  EXPECT_EQ(a["attention"], "mla");
  EXPECT_EQ(a["mla"], json::parse(R"j({"q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128,
      "qk_rope_head_dim": 64, "v_head_dim": 128})j"));
  EXPECT_EQ(a["mtp_modules"], 1);
  EXPECT_EQ(a["moe"]["expert_groups"], 8);
  EXPECT_EQ(a["moe"]["limited_groups"], 4);
  const auto& said = rep->rows[0].assumptions;
  EXPECT_NE(std::find(said.begin(), said.end(),
                      "model named DeepSeek-V3 with its shapes: the deepseek-v3 preset's multi-head latent attention "
                      "(q_lora_rank 1536, kv_lora_rank 512, qk_nope_head_dim 128, qk_rope_head_dim 64, v_head_dim "
                      "128), 1 multi-token-prediction module, node-limited routing (8 expert groups, 4 per token)"),
            said.end());
  EXPECT_NE(std::find(said.begin(), said.end(),
                      "recompute \"RMSNorm and MLA up-projections\": selective, recompute_modules layernorm, "
                      "mla_up_proj"),
            said.end());
  const json plan = json::parse(rep->rows[0].scenario_json)["plan"];
  EXPECT_EQ(plan["recompute"], "selective");
  EXPECT_EQ(plan["recompute_modules"], json::parse(R"(["layernorm", "mla_up_proj"])"));
  // Its own ranks (q_lora_rank absent, or null, which the merge patch above removes: no
  // query compression, the scenario's 0) and two MTP modules; no preset rule for another name.
  const json b = json::parse(rep->rows[1].scenario_json)["model"];
  EXPECT_EQ(b["mla"], json::parse(R"j({"kv_lora_rank": 256, "qk_nope_head_dim": 64, "qk_rope_head_dim": 32,
      "v_head_dim": 64})j"));
  EXPECT_EQ(b["mtp_modules"], 2);
  EXPECT_FALSE(b["moe"].contains("expert_groups"));
  // The stated ranks reach the estimate: latent attention holds fewer attention weights
  // than the same record without it (h x 128 heads x 192 for Q alone).
  EXPECT_TRUE(rep->rows[1].predicted) << rep->rows[1].reason;
  // layout.pipeline_layout reaches the plan as written; the loader's rule is the reason a
  // wrong one is not predicted.
  json layered = dsv3;
  layered["id"] = "layered";
  layered["layout"]["pp"] = 2;
  layered["layout"]["global_batch"] = 64;
  layered["layout"]["pipeline_layout"] = "Et*31|t*30mL";
  json wrong = layered;
  wrong["id"] = "wrong";
  wrong["layout"]["pipeline_layout"] = json::parse("[30, 30]");
  auto lay = run_validate({file_of("[" + record(layered) + "," + record(wrong) + "]"), ""});
  ASSERT_TRUE(lay.ok()) << lay.error().message;
  EXPECT_EQ(json::parse(lay->rows[0].scenario_json)["plan"]["pipeline_layout"], "Et*31|t*30mL");
  EXPECT_FALSE(lay->rows[1].predicted);
  EXPECT_EQ(lay->rows[1].reason, "plan.pipeline_layout: 60 decoder layers (30x2), but wrong has 61");
  // A rank missing or out of range names its field.
  json bad = own;
  bad["id"] = "bad";
  bad["model"]["mla"] = {{"kv_lora_rank", 0}, {"qk_nope_head_dim", 64}};
  EXPECT_EQ(error_of(file_of("[" + record(bad) + "]")),
            (dir_ / "runs.json").string() + ": records[0].model.mla.kv_lora_rank: 0 is out of range (1 to 1000000)\n" +
                (dir_ / "runs.json").string() + ": records[0].model.mla.v_head_dim: missing (required with model.mla)");
}

// A Megatron-Bridge DeepSeek-V3 row as NVIDIA's table states it (layout, batch, precision)
// runs the recipe it was measured with (deepseek_llm_pretrain.py): on H100 the shipped
// scenario scenarios/deepseek-v3-ep64-1024xh100.json is that recipe written out by hand, so
// the two predict the same step (the second method); on B200 the recipe's other settings.
TEST_F(ValidateTest, AMegatronBridgeDeepSeekV3RecordRunsItsRecipe) {
  const json h100 = json::parse(R"j({"id": "mb_dsv3_h100",
      "source": {"title": "NVIDIA Megatron-Bridge performance summary (25.11 NeMo container)"},
      "model": {"name": "DeepSeekV3", "layers": 61, "hidden": 7168, "heads": 128, "kv_heads": 128,
                "ffn_hidden": 18432, "vocab": 129280, "seq_len": 4096,
                "moe": "256 routed experts + 1 shared expert, top-8, expert FFN 2048, first 3 layers dense"},
      "hardware": {"gpu": "H100-SXM5-80GB", "gpus_total": 1024, "gpus_per_node": 8, "interconnect": "DGX H100"},
      "layout": {"tp": 2, "pp": 8, "cp": 1, "ep": 64, "virtual_stages": 4, "microbatch": 1, "global_batch": 8192,
                 "zero_fsdp": "no FSDP (FSDP=0 in table: DDP)", "precision": "FP8-CS", "schedule": null,
                 "recompute": null},
      "measured": {"tokens_per_s_per_gpu": 1000}})j");
  json b200 = h100;
  b200["id"] = "mb_dsv3_b200";
  b200["hardware"] = {{"gpu", "B200"}, {"gpus_total", 256}, {"gpus_per_node", 8}, {"interconnect", "DGX B200"}};
  b200["layout"]["tp"] = 1;
  b200["layout"]["pp"] = 16;
  b200["layout"]["virtual_stages"] = nullptr;
  b200["layout"]["ep"] = 8;
  b200["layout"]["global_batch"] = 2048;
  // The model is named as NVIDIA's table names it, "DeepSeekV3"; the other as its report does.
  b200["model"]["name"] = "DeepSeek-V3";
  const std::string path = file_of("[" + h100.dump() + "," + b200.dump() + "]");
  auto rep = run_validate({path, ""});
  ASSERT_TRUE(rep.ok()) << rep.error().message;
  const ValidationRow& r = rep->rows[0];
  ASSERT_TRUE(r.feasible) << r.reason;
  const json plan = json::parse(r.scenario_json)["plan"];
  EXPECT_EQ(plan["etp"], 1);
  EXPECT_EQ(plan["recompute"], "selective");
  EXPECT_EQ(plan["recompute_modules"], json::parse(R"(["mla_up_proj", "mlp"])"));
  EXPECT_EQ(plan["moe_dispatcher"], "deepep");
  EXPECT_EQ(plan["moe_a2a_overlap"], true);
  EXPECT_EQ(plan["overlap_grad_reduce"], false);
  EXPECT_EQ(plan["pipeline_layout"], "Et|(tt|)*30mL");
  auto shipped = stepcast::load_scenario_file(STEPCAST_SOURCE_DIR "/scenarios/deepseek-v3-ep64-1024xh100.json");
  ASSERT_TRUE(shipped.ok()) << shipped.error().message;
  const stepcast::Estimate e = stepcast::estimate(*shipped);
  EXPECT_NEAR(r.predicted_iteration_s / e.step_time_s, 1.0, 1e-6);
  // The memory differs by the router's score bias (the preset's, which the record's
  // description does not name): 256 x 58 layers over the stage, a few kilobytes.
  EXPECT_NEAR(r.memory_total_bytes / e.memory.total, 1.0, 1e-6);
  const ValidationRow& bw = rep->rows[1];
  ASSERT_TRUE(bw.predicted) << bw.reason;
  const json bplan = json::parse(bw.scenario_json)["plan"];
  EXPECT_EQ(bplan["recompute_modules"], json::parse(R"(["mla_up_proj"])"));
  EXPECT_FALSE(bplan.contains("moe_dispatcher"));  // NCCL's all-to-all: enable_deepep=False
  EXPECT_FALSE(bplan.contains("moe_a2a_overlap"));
  EXPECT_FALSE(bplan.contains("overlap_grad_reduce"));
  EXPECT_FALSE(bplan.contains("pipeline_layout"));
  EXPECT_NE(std::find(bw.assumptions.begin(), bw.assumptions.end(),
                      "Megatron-Bridge DeepSeek-V3 recipe (B200/GB200, deepseek_llm_pretrain.py): selective "
                      "recomputation of mla_up_proj"),
            bw.assumptions.end());
}

TEST_F(ValidateTest, ARecordOnPartOfOneNodeRunsOnThatManyGpus) {
  const std::string one = record(json::parse(R"j({"id": "one", "hardware": {"gpus_total": 1, "gpus_per_node": 1},
      "layout": {"tp": 1, "pp": 1, "virtual_stages": null, "schedule": "1F1B", "global_batch": 8}})j"));
  const std::string split =
      record(json::parse(R"j({"id": "split", "hardware": {"gpus_total": 8, "gpus_per_node": 4}})j"));
  const std::string wide =
      record(json::parse(R"j({"id": "wide", "hardware": {"gpus_total": 32, "gpus_per_node": 16}})j"));
  const std::string gh200 = record(json::parse(R"j({"id": "gh200", "hardware": {"gpu": "GH200 96GB",
      "gpus_total": 16, "gpus_per_node": 4, "interconnect": "4x 200 Gb/s Slingshot per node"}})j"));
  const std::string out = (dir_ / "out").string();
  auto rep = run_validate({file_of("[" + one + "," + split + "," + wide + "," + gh200 + "]"), out});
  ASSERT_TRUE(rep.ok()) << rep.error().message;
  ASSERT_EQ(rep->rows.size(), 4u);
  const ValidationRow& r = rep->rows[0];
  EXPECT_TRUE(r.feasible) << r.reason;
  EXPECT_NE(std::find(r.assumptions.begin(), r.assumptions.end(), "1 GPU of one dgx-a100 node"), r.assumptions.end());
  std::ifstream in(out + "/one.json");
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  auto parsed = reader::parse_document(text);
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_EQ((*parsed)["cluster"]["nodes"], 1);
  EXPECT_EQ((*parsed)["cluster"]["gpus_per_node"], 1);
  // Two nodes of 4 A100s: the preset's 8 x 200 Gb/s NICs per 8 GPUs are 4 per node of 4.
  ASSERT_TRUE(rep->rows[1].predicted) << rep->rows[1].reason;
  json sc = json::parse(rep->rows[1].scenario_json);
  EXPECT_EQ(sc["cluster"], json::parse(R"j({"preset": "dgx-a100", "nodes": 2, "gpus_per_node": 4,
      "inter_node": {"nic_Gbps": 200.0, "nics_per_node": 4}})j"));
  const auto& a = rep->rows[1].assumptions;
  EXPECT_NE(std::find(a.begin(), a.end(),
                      "4 GPUs per node: nodes of 4 a100-sxm-80gb GPUs (the dgx-a100 preset's GPU and NVLink bandwidth "
                      "per GPU), 4 x 200 Gb/s NICs per node (the preset's per GPU)"),
            a.end());
  EXPECT_FALSE(rep->rows[2].predicted);
  EXPECT_EQ(rep->rows[2].reason, "16 GPUs per node; the dgx-a100 preset has 8");
  // A GH200 (quad nodes): the H100 preset with its stated 96 GB and the stated NICs.
  ASSERT_TRUE(rep->rows[3].predicted) << rep->rows[3].reason;
  sc = json::parse(rep->rows[3].scenario_json);
  EXPECT_EQ(sc["cluster"], json::parse(R"j({"preset": "dgx-h100", "nodes": 4, "gpus_per_node": 4,
      "gpu": {"preset": "h100-sxm", "hbm_GiB": 96.0}, "inter_node": {"nic_Gbps": 200.0, "nics_per_node": 4}})j"));
}

// Validates a shipped records file of `rows` records and calls `check` on each row, which
// must be expressed and predicted, with the scenario validate generated for it.
void check_shipped_rows(const std::string& file, std::size_t rows,
                        const std::function<void(const ValidationRow&, const json&)>& check) {
  auto rep = run_validate({std::string(STEPCAST_SOURCE_DIR "/") + file, ""});
  ASSERT_TRUE(rep.ok()) << rep.error().message;
  ASSERT_EQ(rep->rows.size(), rows);
  for (const ValidationRow& r : rep->rows) {
    SCOPED_TRACE(r.id);
    ASSERT_TRUE(r.feasible) << r.reason;
    ASSERT_TRUE(r.predicted);
    check(r, json::parse(r.scenario_json));
  }
}

// The four training steps measured on an H200 (docs/data/executor-gpu/validation-h200.json,
// docs/gpu-measurements.md): each is expressed on one GPU of a dgx-h200 node, runs the
// PyTorch stack it names with SDPA's cuDNN attention, and lands within the issue's 15 % of
// its measured tokens/s (nothing in the model was fitted to them; they were 18-46 % fast
// before the measured kernel tables).
TEST(ValidateShipped, TheStepsMeasuredOnAnH200AreWithinFifteenPercent) {
  check_shipped_rows("docs/data/executor-gpu/validation-h200.json", 4, [](const ValidationRow& r, const json& sc) {
    EXPECT_EQ(sc["cluster"]["gpus_per_node"], 1);
    EXPECT_EQ(sc["plan"]["attention_kernel"], "sdpa-cudnn");
    EXPECT_EQ(sc["plan"]["stack"], r.id.find("compile") != std::string::npos ? "fsdp2-compile" : "fsdp2-eager");
    EXPECT_LT(std::abs(r.throughput_error()), 0.15);
  });
}

// The other rows of the torchtitan benchmark the shared torchtitan record comes from
// (docs/data/validation-torchtitan.json: Table 1's torch.compile and Float8 rows, Table 2's
// context-parallel rows at 32k-256k tokens), held out: nothing was fitted to them. Each is
// expressed as published (torchao's "Float8" read as fp8, torch.compile as fsdp2-compile,
// the CP degree), fits, and its peak memory is within the issue's 10 %; the rows without
// context parallelism, and CP 2, are within 15 % of their tokens/s. (CP 4 and 8 are 21 % and
// 25 % fast: PyTorch's ring attention's per-block kernels, docs/validation.md.)
TEST(ValidateShipped, TheOtherTorchtitanRunsAreExpressedAndHeldOut) {
  check_shipped_rows("docs/data/validation-torchtitan.json", 13, [](const ValidationRow& r, const json& sc) {
    const bool compiled = r.id.find("compile") != std::string::npos || r.id.find("_t2_") != std::string::npos ||
                          r.id.find("_t4_") != std::string::npos;
    // The Trainy team's H200 runs of June 2025 ran a torchtitan that compiles the loss too.
    const bool of2025 = r.id.find("_2025_") != std::string::npos;
    EXPECT_EQ(sc["plan"]["stack"], of2025 ? "fsdp2-compile-loss" : compiled ? "fsdp2-compile" : "fsdp2-eager");
    const bool float8 = r.id.find("float8") != std::string::npos || r.id.find("_t2_") != std::string::npos ||
                        r.id.find("_t4_") != std::string::npos;
    EXPECT_EQ(sc["plan"]["precision"], float8 ? "fp8" : "bf16");
    ASSERT_TRUE(r.has_memory_error());
    const bool llama70b = r.id.find("_t4_70b") != std::string::npos;
    // Every row's memory within 10 %, but two documented in docs/validation.md: the 70B rows'
    // measured peak is 19-24 % above the prediction, Table 3's eager row's 10.3 %.
    const double memory_bound = llama70b ? 0.25 : r.id == "torchtitan_h100_t3_8b_128gpu_fsdp" ? 0.11 : 0.10;
    EXPECT_LT(std::abs(r.memory_error()), memory_bound);
    if (sc["plan"]["cp"].get<int>() <= 2) {
      EXPECT_LT(std::abs(r.throughput_error()), 0.15);
    }
    // Table 4: FSDP 32 x TP 8 over 32 hosts, sequence parallel; AsyncTP is the TP overlap.
    if (llama70b) {
      EXPECT_EQ(r.layout, "tp8 pp1 dp32 z3 mb16 gbs512");
      EXPECT_EQ(sc["plan"]["sequence_parallel"], true);
      EXPECT_EQ(sc["plan"].value("tp_comm_overlap", false), r.id.find("asynctp") != std::string::npos);
    }
  });
}

// MosaicML's MPT benchmarks (docs/data/validation-llm-foundry.json), held out: every row runs
// the llm-foundry stack and fits, its model has exactly the parameters the table prints
// (NumParams: GPT blocks with biases, learned positions that grow with the sequence, tied
// embeddings, the vocabulary unpadded), and the stated dropout of 0 is off. Their throughput
// is not asserted: stepcast is 8-53 % fast on them (docs/validation.md).
TEST(ValidateShipped, LlmFoundrysMptBenchmarksAreExpressedAndHeldOut) {
  const std::string path = STEPCAST_SOURCE_DIR "/docs/data/validation-llm-foundry.json";
  const json doc = json::parse(std::ifstream(path));
  std::map<std::string, std::int64_t> num_params;
  for (const json& rec : doc["records"]) num_params[rec["id"]] = rec["model"]["params"].get<std::int64_t>();
  check_shipped_rows("docs/data/validation-llm-foundry.json", 19, [&](const ValidationRow& r, const json& sc) {
    EXPECT_EQ(sc["plan"]["stack"], "llm-foundry");
    EXPECT_EQ(sc["plan"]["zero"], 3);
    EXPECT_EQ(sc["model"]["dropout"], false);
    EXPECT_EQ(sc["model"]["vocab_size"], 50368);
    EXPECT_EQ(r.metric, "tokens/s/GPU");
    const auto s = stepcast::parse_scenario(r.scenario_json);
    ASSERT_TRUE(s.ok()) << s.error().message;
    EXPECT_EQ(stepcast::count_params(s->model).total, num_params.at(r.id));
  });
}

// torchtitan compiles its loss with the model since 2025: a compiled torchtitan record dated
// 2025 or later runs fsdp2-compile-loss, one of 2024 (or undated) fsdp2-compile, an eager one
// fsdp2-eager whatever its year, and a compiled FSDP2 run that does not name torchtitan
// (this project's own, which compiles the blocks only) fsdp2-compile.
TEST_F(ValidateTest, TorchtitanRecordsOf2025CompileTheLoss) {
  auto stack_of = [&](const std::string& id, const std::string& techniques) {
    const json patch = {{"id", id},
                        {"source", {{"title", id.starts_with("own") ? "measured here" : "torchtitan benchmark"}}},
                        {"layout",
                         {{"tp", 1},
                          {"pp", 1},
                          {"virtual_stages", nullptr},
                          {"schedule", nullptr},
                          {"zero_fsdp", "FSDP2"},
                          {"techniques", techniques}}}};
    auto rep = run_validate({file_of("[" + record(patch) + "]"), ""});
    EXPECT_TRUE(rep.ok()) << rep.error().message;
    if (!rep.ok()) return std::string();
    return json::parse(rep->rows[0].scenario_json)["plan"]["stack"].get<std::string>();
  };
  EXPECT_EQ(stack_of("titan_2025_06", "FSDP2 + torch.compile"), "fsdp2-compile-loss");
  EXPECT_EQ(stack_of("titan_2024_12", "FSDP2 + torch.compile"), "fsdp2-compile");
  EXPECT_EQ(stack_of("titan", "FSDP2 + torch.compile"), "fsdp2-compile");
  EXPECT_EQ(stack_of("titan_2025_06", "FSDP2"), "fsdp2-eager");
  EXPECT_EQ(stack_of("own_2026_12", "PyTorch FSDP2-style, torch.compile per block"), "fsdp2-compile");
}

// Megatron-Bridge 25.11's dense rows on DGX H100 and DGX B200
// (docs/data/validation-megatron-bridge.json), held out: each is expressed with its
// published layout (FSDP = 1 as ZeRO 3, FP8-CS as fp8, the CP degree) and fits; the H100
// rows are within 15 % of their tokens/s. (The B200 rows are 26-31 % fast: no Blackwell
// kernel tables, docs/validation.md.)
// MegaScale's Megatron-LM baseline at 12,288 GPUs, its MFU derived from the abstract (55.2 % /
// 1.34): measured as MFU only, so compared on stepcast's MFU; held out, within 15 %. (It lies
// at the upper edge of its p10-p90 band: 8.583 s measured against a p90 of 8.578 s.)
TEST(ValidateShipped, MegaScalesMegatronBaselineAt12288GpusIsHeldOut) {
  check_shipped_rows("docs/data/validation-megascale.json", 1, [](const ValidationRow& r, const json& sc) {
    EXPECT_EQ(r.layout, "tp8 pp8 dp192 v6 z1 mb1 gbs6144");
    EXPECT_EQ(sc["cluster"]["nodes"], 1536);
    EXPECT_EQ(r.metric, "MFU %");
    EXPECT_NEAR(r.measured_value, 41.2, 1e-9);
    // stepcast's MFU by hand: its model FLOPs for this GPT (4h FFN, multi-head attention) are
    // Korthikanti's eq. 7, 72 B s l h^2 (1 + s/6h + V/12lh) with B 6144, s 2048, l 96,
    // h 12288 and V 64512 (64000 padded to 128 x 8), over step x 12288 GPUs x 312 TFLOP/s.
    const double B = 6144, s = 2048, l = 96, h = 12288, V = 64512;
    const double model_flops = 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h));
    EXPECT_NEAR(r.predicted_value, 100 * model_flops / (r.predicted_iteration_s * 12288 * 312e12), 1e-9);
    EXPECT_LT(std::abs(r.throughput_error()), 0.15);
  });
}

TEST(ValidateShipped, MegatronBridgeDenseRowsAreExpressedAndHeldOut) {
  check_shipped_rows("docs/data/validation-megatron-bridge.json", 5, [](const ValidationRow& r, const json& sc) {
    EXPECT_EQ(sc["plan"]["precision"], "fp8");
    EXPECT_EQ(sc["plan"]["stack"], "megatron-core");
    const bool h100 = r.id.find("h100") != std::string::npos;
    EXPECT_EQ(sc["cluster"]["preset"], h100 ? "dgx-h100" : "dgx-b200");
    if (h100 && r.id.find("8b_8gpu") != std::string::npos) {
      EXPECT_EQ(sc["plan"]["zero"], 3);  // FSDP = 1
    }
    if (h100) {
      EXPECT_LT(std::abs(r.throughput_error()), 0.15);
    }
  });
}

// Megatron-Bridge 25.11's MoE rows (docs/data/validation-megatron-bridge-moe.json), held
// out: GPT-OSS 120B is expressed with its sliding window on every other layer (the record's
// model.sliding_window and window_attn_skip_freq) and biases on every linear layer, its
// experts as the MoE rule reads them; the H100 GPT-OSS row's stated layout does not fit
// (micro batch 4 without recomputation: docs/validation.md), and says so; the B200 rows are
// predicted on dgx-b200. The 25.09 container's H100 row of the shared Qwen3-30B-A3B record's
// layout is expressed exactly as the shared record (the same scenario), against its own
// measurement (10,494 tokens/s per GPU, the table's; the shared 25.11 row measured 5,275).
TEST(ValidateShipped, MegatronBridgeMoeRowsAreExpressedAndHeldOut) {
  auto rep = run_validate({STEPCAST_SOURCE_DIR "/docs/data/validation-megatron-bridge-moe.json", ""});
  ASSERT_TRUE(rep.ok()) << rep.error().message;
  ASSERT_EQ(rep->rows.size(), 5u);
  // No dense record: the summary says so, and summarises the five predicted MoE rows apart.
  EXPECT_EQ(rep->compared, 0u);
  EXPECT_EQ(rep->moe_compared, 5u);
  const std::string text = validate_text(*rep);
  EXPECT_NE(text.find("throughput: no dense record compared (the mixture-of-experts records are summarised apart)"),
            std::string::npos);
  EXPECT_NE(text.find("mixture-of-experts throughput, apart (not in the line above or the band residuals): 5 records"),
            std::string::npos);
  auto shared = run_validate({STEPCAST_SOURCE_DIR "/docs/data/validation-runs.json", ""});
  ASSERT_TRUE(shared.ok()) << shared.error().message;
  const ValidationRow* r2509 = nullptr;
  const ValidationRow* r2511 = nullptr;
  for (const ValidationRow& r : rep->rows) {
    if (r.id == "megatron_bridge_25.09_dgx_h100_qwen3_30b_a3b_16gpu_fp8") r2509 = &r;
  }
  for (const ValidationRow& r : shared->rows) {
    if (r.id == "megatron_bridge_25.11_dgx_h100_qwen3_30b_a3b_16gpu_fp8cs") r2511 = &r;
  }
  ASSERT_NE(r2509, nullptr);
  ASSERT_NE(r2511, nullptr);
  json a = json::parse(r2509->scenario_json), b = json::parse(r2511->scenario_json);
  for (json* j : {&a, &b}) {  // the record's id
    j->erase("name");
    (*j)["model"].erase("name");
  }
  EXPECT_EQ(a, b);
  EXPECT_EQ(r2509->measured_value, 10494);
  EXPECT_EQ(r2511->measured_value, 5275);
  EXPECT_EQ(r2509->predicted_value, r2511->predicted_value);
  for (const ValidationRow& r : rep->rows) {
    SCOPED_TRACE(r.id);
    const json sc = json::parse(r.scenario_json);
    EXPECT_EQ(sc["plan"]["stack"], "megatron-core");
    ASSERT_TRUE(sc["model"].contains("moe"));
    const bool oss = r.id.find("gpt_oss") != std::string::npos;
    if (oss) {
      EXPECT_EQ(sc["model"]["sliding_window"], 128);
      EXPECT_EQ(sc["model"]["window_attn_skip_freq"], 2);
      EXPECT_EQ(sc["model"]["linear_bias"], true);
      EXPECT_EQ(sc["model"]["norm"], "rmsnorm");
      EXPECT_EQ(sc["model"]["moe"]["top_k"], 4);
      EXPECT_EQ(sc["model"]["moe"]["expert_ffn_hidden_size"], 2880);
      EXPECT_EQ(sc["plan"]["precision"], "bf16");
    } else {
      EXPECT_FALSE(sc["model"].contains("sliding_window"));
      EXPECT_EQ(sc["model"]["linear_bias"], false);
      EXPECT_EQ(sc["plan"]["precision"], "fp8");
    }
    // Every row runs as its recipe states it and fits, GPT-OSS on H100 included: its record
    // takes micro batch 1 and the recipe's recomputation (the table's MBS and GA are the B200
    // row's); as the table printed it (micro batch 4, no recomputation) it needs 112 GiB.
    EXPECT_EQ(sc["cluster"]["preset"], r.id.find("h100") != std::string::npos ? "dgx-h100" : "dgx-b200");
    EXPECT_TRUE(r.feasible) << r.reason;
    EXPECT_TRUE(r.predicted);
    if (oss) {
      EXPECT_EQ(sc["plan"]["recompute"], "selective");
      EXPECT_EQ(sc["plan"]["recompute_modules"], json::array({"layernorm", "moe_act"}));
      EXPECT_EQ(sc["plan"]["microbatch"], r.id.find("h100") != std::string::npos ? 1 : 4);
    }
  }
}

// Megatron-LM's MoE recipe index (docs/data/validation-megatron-moe-recipes.json), held
// out: Qwen3-30B-A3B on 32 H100 as the recipes run it (TP1 PP1 EP8, micro batch 1, global
// batch 256, the distributed optimizer) in BF16 and FP8, and Qwen3-235B-A22B on 256 H100
// (TP2 PP8 with 3-layer virtual stages, EP32 folded with etp 1, the all-to-all overlap,
// moe_act and layernorm recomputed) and on 128 B200 (MXFP8, TP2 PP4 with 2-layer virtual
// stages, EP16, DeepEP, micro batch 3). The source measures model TFLOP/s; the file's tokens/s
// are that divided by Megatron-LM's own FLOP count per token (megatron/training/training.py
// transformer_flops), written out here by hand.
TEST(ValidateShipped, MegatronLmMoeRecipeRowsAreExpressedAndHeldOut) {
  const std::string path = STEPCAST_SOURCE_DIR "/docs/data/validation-megatron-moe-recipes.json";
  // Megatron-LM's count: 3 (fwd + 2 bwd) x 2 (FMA) per weight element and token, the
  // attention core at the causal half, SwiGLU experts (3 matrices), top-8, no padding.
  const auto per_token = [](double h, double heads, double layers, double expert_ffn) {
    const double q = heads * 128, kv = 4 * 128, s = 4096, vocab = 151936;
    const double experts = 6 * h * (expert_ffn * 8 * 3) * layers;
    const double attention = 6 * (h * (q + 2 * kv) + q * s / 2 * 2 + q * h) * layers;
    return experts + attention + 6 * h * vocab;
  };
  const double small = per_token(2048, 32, 48, 768), large = per_token(4096, 64, 94, 1536);
  EXPECT_DOUBLE_EQ(small, 23006281728.0);
  EXPECT_DOUBLE_EQ(large, 148034813952.0);
  std::ifstream in(path);
  const json file = json::parse(in);
  ASSERT_EQ(file["records"].size(), 4u);
  for (const json& rec : file["records"]) {
    const bool big = rec["id"].get<std::string>().find("235b") != std::string::npos;
    const double tflops = rec["measured"]["model_tflops_per_gpu"].get<double>();
    EXPECT_NEAR(rec["measured"]["tokens_per_s_per_gpu"].get<double>(), tflops * 1e12 / (big ? large : small), 0.5)
        << rec["id"];
  }

  auto rep = run_validate({path, ""});
  ASSERT_TRUE(rep.ok()) << rep.error().message;
  ASSERT_EQ(rep->rows.size(), 4u);
  EXPECT_EQ(rep->compared, 0u);
  EXPECT_EQ(rep->moe_compared, 4u);
  EXPECT_EQ(rep->moe_within_band, 3);
  for (const ValidationRow& r : rep->rows) {
    SCOPED_TRACE(r.id);
    const json sc = json::parse(r.scenario_json);
    const json& plan = sc["plan"];
    EXPECT_EQ(plan["stack"], "megatron-core");
    EXPECT_EQ(plan["zero"], 1);
    EXPECT_EQ(plan["etp"], 1);
    EXPECT_EQ(sc["model"]["moe"]["num_experts"], 128);
    EXPECT_EQ(sc["model"]["moe"]["top_k"], 8);
    EXPECT_EQ(sc["model"]["qk_norm"], true);  // a model named Qwen3: its per-head q and k norms
    EXPECT_EQ(plan["precision"], r.id.find("fp8") != std::string::npos ? "fp8" : "bf16");
    EXPECT_TRUE(r.feasible) << r.reason;
    EXPECT_EQ(r.metric, "tokens/s/GPU");
    if (r.id.find("b200") != std::string::npos) {
      // DeepEP, as the recipe names it; the B200's MoE rows stay far off (docs/validation.md).
      EXPECT_EQ(sc["cluster"]["preset"], "dgx-b200");
      EXPECT_EQ(plan["moe_dispatcher"], "deepep");
      EXPECT_EQ(plan["ep"], 16);
      EXPECT_EQ(plan["virtual_stages"], 12);
      EXPECT_EQ(plan["microbatch"], 3);
      EXPECT_EQ(plan["global_batch"], 3072);
      EXPECT_EQ(plan["moe_a2a_overlap"], true);
      EXPECT_EQ(plan["recompute"], "none");
      EXPECT_FALSE(r.in_band());  // measured at 1 / 1.628 of the prediction, the band's p90 is 1.39
      continue;
    }
    EXPECT_EQ(plan["microbatch"], 1);
    EXPECT_EQ(sc["cluster"]["preset"], "dgx-h100");
    EXPECT_FALSE(plan.contains("moe_dispatcher"));  // HybridEP: priced as the all-to-all
    if (r.id.find("235b") != std::string::npos) {
      EXPECT_EQ(plan["tp"], 2);
      EXPECT_EQ(plan["pp"], 8);
      EXPECT_EQ(plan["dp"], 16);
      EXPECT_EQ(plan["ep"], 32);
      EXPECT_EQ(plan["schedule"], "interleaved");
      EXPECT_EQ(plan["virtual_stages"], 4);
      EXPECT_EQ(plan["global_batch"], 2048);
      EXPECT_EQ(plan["moe_a2a_overlap"], true);
      EXPECT_EQ(plan["recompute"], "selective");
      EXPECT_EQ(plan["recompute_modules"], json::parse(R"(["moe_act", "layernorm"])"));
      EXPECT_EQ(sc["cluster"]["nodes"], 32);
    } else {
      EXPECT_EQ(plan["tp"], 1);
      EXPECT_EQ(plan["pp"], 1);
      EXPECT_EQ(plan["dp"], 32);
      EXPECT_EQ(plan["ep"], 8);
      EXPECT_EQ(plan["global_batch"], 256);
      EXPECT_FALSE(plan.contains("moe_a2a_overlap"));
      EXPECT_EQ(sc["cluster"]["nodes"], 4);
    }
    // The finding docs/validation.md reports: on H100 these recipes are predicted within a
    // fifth (the 25.11 record's layout of the smaller model is +138 %), inside their bands.
    EXPECT_TRUE(r.in_band());
    EXPECT_LT(std::abs(r.throughput_error()), 0.20);
  }
}

TEST(ValidateShipped, EveryRecordPredictsOrSaysWhy) {
  auto rep = run_validate({STEPCAST_SOURCE_DIR "/docs/data/validation-runs.json", ""});
  ASSERT_TRUE(rep.ok()) << rep.error().message;
  EXPECT_EQ(rep->rows.size(), 16u);
  for (const ValidationRow& r : rep->rows) {
    EXPECT_TRUE(r.feasible || !r.reason.empty()) << r.id;
    EXPECT_EQ(r.feasible, r.reason.empty()) << r.id;
  }
  // The MoE record is expressed (its description read by the MoE rule) and predicted.
  const auto qwen = std::find_if(rep->rows.begin(), rep->rows.end(),
                                 [](const ValidationRow& r) { return r.id.find("qwen3") != std::string::npos; });
  ASSERT_NE(qwen, rep->rows.end());
  EXPECT_TRUE(qwen->predicted);
  EXPECT_TRUE(qwen->moe);
  EXPECT_TRUE(qwen->feasible) << qwen->reason;
  EXPECT_EQ(rep->moe_compared, 1);  // summarised apart from the dense records
  EXPECT_DOUBLE_EQ(rep->moe_mean_error, qwen->throughput_error());
  const json qs = json::parse(qwen->scenario_json);
  EXPECT_EQ(qs["model"]["moe"], json::parse(R"j({"num_experts": 128, "top_k": 8, "expert_ffn_hidden_size": 768,
      "num_shared_experts": 0, "shared_expert_ffn_hidden_size": 0, "num_dense_layers": 0})j"));
  EXPECT_EQ(qs["plan"]["ep"], 8);
  // Its step table row carries the parts its scenario's estimate reports: the exposed
  // all-to-all and, of the compute, the attention core's kernels.
  {
    const auto sc = stepcast::parse_scenario(qwen->scenario_json);
    ASSERT_TRUE(sc.ok()) << sc.error().message;
    const stepcast::Estimate e = stepcast::estimate(*sc);
    EXPECT_EQ(qwen->ep_s, e.exposed.ep);
    EXPECT_GT(qwen->ep_s, 0.1 * qwen->predicted_iteration_s);
    EXPECT_EQ(qwen->attention_s, e.compute.attention);
    EXPECT_LT(qwen->attention_s, qwen->compute_s);
  }
  // The ZeRO-3 record's row carries its estimate's host part (the GPU waiting for the host
  // to issue each synced list gather): at least one issue per gather of its coordinator.
  {
    const auto z3 = std::find_if(rep->rows.begin(), rep->rows.end(),
                                 [](const ValidationRow& r) { return r.id.find("zero3") != std::string::npos; });
    ASSERT_NE(z3, rep->rows.end());
    const auto sc = stepcast::parse_scenario(z3->scenario_json);
    ASSERT_TRUE(sc.ok()) << sc.error().message;
    const stepcast::Estimate e = stepcast::estimate(*sc);
    EXPECT_EQ(z3->host_s, e.breakdown.host);
    EXPECT_GT(z3->host_s, 1000 * 386 * 10e-6);  // over 1,000 gathers per microbatch, 386 launches each
  }
  // GPT-1.7B of Narayanan et al. Table 1 (Megatron), eq. 3: 96 B s l h^2 (1 + s/6h + V/16lh)
  // with B 512, s 2048, l 24, h 2304, V 51200 (a multiple of 128: not padded):
  // 96 x 512 x 2048 x 24 x 2304^2 = 12,824,703,626,379,264; s/6h = 2048/13824 = 4/27,
  // V/16lh = 51200/884736 = 25/432, factor (432 + 64 + 25)/432 = 521/432;
  // 12,824,703,626,379,264 x 521 / 432 = 15,466,830,067,924,992 FLOPs per iteration
  // (at the measured 137 TFLOP/s x 32 GPUs: 3.53 s, the record's derived iteration time).
  const ValidationRow& gpt = rep->rows[0];
  ASSERT_EQ(gpt.id, "narayanan2021_t1_1p7B");
  EXPECT_DOUBLE_EQ(gpt.accounting_flops_per_step, 15'466'830'067'924'992.0);
  EXPECT_EQ(gpt.metric, "TFLOP/s/GPU");
  EXPECT_EQ(gpt.measured_value, 137);
  // Deterministic: the same file gives the same bytes.
  auto again = run_validate({STEPCAST_SOURCE_DIR "/docs/data/validation-runs.json", ""});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(validate_text(*rep), validate_text(*again));
  EXPECT_EQ(validate_json(*rep), validate_json(*again));
}

// run_validate_text (the fuzz target's entry point) is run_validate without the file: the
// same report for the same text, and the same errors, prefixed with the source it is given.
TEST_F(ValidateTest, TextEntryPointMatchesTheFileOne) {
  const std::string path = STEPCAST_SOURCE_DIR "/docs/data/validation-runs.json";
  std::ifstream in(path, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto from_file = run_validate({path, ""});
  auto from_text = run_validate_text(text, path);
  ASSERT_TRUE(from_file.ok()) << from_file.error().message;
  ASSERT_TRUE(from_text.ok()) << from_text.error().message;
  EXPECT_EQ(from_text->path, path);
  EXPECT_EQ(validate_json(*from_text), validate_json(*from_file));

  const std::string bad = "{\"format\": 1, \"records\": [" + record(json::parse(R"j({"model": {"hidden": "x"}})j")) + "]}";
  const std::string bad_path = write("bad.json", bad);
  auto bad_text = run_validate_text(bad, bad_path);
  ASSERT_FALSE(bad_text.ok());
  EXPECT_EQ(bad_text.error().message, error_of(bad_path));
}

}  // namespace

// The validation residuals the prediction bands use (band.cc) are what `stepcast validate`
// computes now: log(1 + throughput error) over the compared records, their mean and sample
// standard deviation, pooled and per stack. When the model or the records change, this fails
// and prints the values to put in band.cc (the band must follow the model it describes).
struct Residuals {
  std::vector<double> logs;
  int n() const { return static_cast<int>(logs.size()); }
  double mean() const {
    double m = 0;
    for (double l : logs) m += l;
    return logs.empty() ? 0.0 : m / static_cast<double>(logs.size());
  }
  double sd() const {
    if (logs.size() < 2) return 0.0;
    double ss = 0;
    for (double l : logs) ss += (l - mean()) * (l - mean());
    return std::sqrt(ss / static_cast<double>(logs.size() - 1));
  }
  std::string want() const { return fmt::format("{{{}, {:.17g}, {:.17g}}}", n(), mean(), sd()); }
};

void expect_residuals(const stepcast::ValidationResiduals& v, const Residuals& r, const std::string& what) {
  EXPECT_EQ(v.records, r.n()) << what << ": " << r.want();
  EXPECT_NEAR(v.mean_log, r.mean(), 1e-12) << what << ": " << r.want();
  EXPECT_NEAR(v.sd_log, r.sd(), 1e-12) << what << ": " << r.want();
}

TEST(ValidateShipped, BandResidualsAreTheCurrentValidationResiduals) {
  auto rep = run_validate({STEPCAST_SOURCE_DIR "/docs/data/validation-runs.json", ""});
  ASSERT_TRUE(rep.ok()) << rep.error().message;
  Residuals pooled;
  std::array<Residuals, stepcast::Names<stepcast::Stack>::kTable.size()> per_stack;
  for (const ValidationRow& r : rep->rows) {
    if (!r.has_throughput_error() || r.moe) continue;  // MoE records are summarised apart
    pooled.logs.push_back(std::log1p(r.throughput_error()));
    per_stack.at(static_cast<std::size_t>(r.stack)).logs.push_back(std::log1p(r.throughput_error()));
  }
  ASSERT_GE(pooled.n(), 2);
  expect_residuals(stepcast::validation_residuals(), pooled, "pooled");
  for (const auto& entry : stepcast::Names<stepcast::Stack>::kTable) {
    const stepcast::Stack st = entry.value;
    const Residuals& own = per_stack.at(static_cast<std::size_t>(st));
    const std::string name(stepcast::to_string(st));
    expect_residuals(stepcast::stack_validation_residuals(st), own, name);
    // A stack's bands use its own residuals from kMinStackRecords records on, else the pooled.
    const stepcast::ValidationResiduals& used = stepcast::validation_residuals(st);
    if (own.n() >= stepcast::kMinStackRecords) {
      EXPECT_EQ(&used, &stepcast::stack_validation_residuals(st)) << name;
    } else {
      EXPECT_EQ(&used, &stepcast::validation_residuals()) << name;
    }
  }
  EXPECT_GE(per_stack[0].n(), stepcast::kMinStackRecords);  // megatron-core has its own
}

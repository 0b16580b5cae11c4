// plan.pipeline_layout (Megatron-Core's pipeline_model_parallel_layout): the layout string's
// expansion and its errors, the chunks it gives each stage, the parameters a stage then
// holds (hand counts), the loader's messages, and the report's echo.
#include "stepcast/models/pipeline_layout.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <vector>

#include "stepcast/models/estimate.h"
#include "stepcast/models/params.h"
#include "stepcast/models/presets.h"
#include "stepcast/models/report.h"
#include "stepcast/models/scenario.h"

namespace stepcast {
namespace {

std::string parse_error(std::string_view text) {
  const auto r = parse_pipeline_layout(text);
  return r.ok() ? "(parsed)" : r.error().message;
}

TEST(PipelineLayout, MegatronsStringsExpandToLayersPerChunk) {
  // NVIDIA's DeepSeek-V3 H100 recipe (Megatron-Bridge deepseek_llm_pretrain.py, pp 8 x vp 4):
  // "Et" then 30 chunks "tt", then "mL": 32 chunks, 1 + 60 = 61 layers, one MTP module.
  auto dsv3 = parse_pipeline_layout("Et|(tt|)*30mL");
  ASSERT_TRUE(dsv3.ok()) << dsv3.error().message;
  ASSERT_EQ(dsv3->layers.size(), 32u);
  EXPECT_EQ(dsv3->layers.front(), 1);
  for (std::size_t k = 1; k <= 30; ++k) EXPECT_EQ(dsv3->layers[k], 2) << k;
  EXPECT_EQ(dsv3->layers.back(), 0);
  EXPECT_EQ(dsv3->mtp, 1);
  // "t*N" and a nested group: "Ettt|" then twice "t|t|tt|", then "L".
  auto nested = parse_pipeline_layout("Et*3|((t|)*2t*2|)*2L");
  ASSERT_TRUE(nested.ok()) << nested.error().message;
  EXPECT_EQ(nested->layers, (std::vector<int>{3, 1, 1, 2, 1, 1, 2, 0}));
  EXPECT_EQ(nested->mtp, 0);
  auto one = parse_pipeline_layout("EttttL");
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->layers, std::vector<int>{4});
  EXPECT_EQ(pipeline_layout_text(dsv3->layers), "1,2x30,0");
  EXPECT_EQ(pipeline_layout_text({7, 8, 8, 7}), "7,8x2,7");
}

TEST(PipelineLayout, BadStringsNameTheCharacter) {
  EXPECT_EQ(parse_error("Et|tX|L"), "\"Et|tX|L\": 'X' is not one of E, t, m, L, |, (, ), *N (character 5)");
  EXPECT_EQ(parse_error("Et|(tt|*2L"), "\"Et|(tt|*2L\": '(' without its ')' (character 4)");
  EXPECT_EQ(parse_error("Et|tt)L"), "\"Et|tt)L\": ')' without its '(' (character 6)");
  EXPECT_EQ(parse_error("Et*|tL"), "\"Et*|tL\": '*' without a count after it (character 3)");
  EXPECT_EQ(parse_error("Et*0|tL"), "\"Et*0|tL\": repeat count 0 outside 1..10000 (character 3)");
  EXPECT_EQ(parse_error("t|tL"), "\"t|tL\": the first chunk must open with 'E' (the embedding)");
  EXPECT_EQ(parse_error("Et|t"), "\"Et|t\": the last chunk must end with 'L' (the loss)");
  EXPECT_EQ(parse_error("Et|mt|tL"),
            "\"Et|mt|tL\": 'm' must stand in the last chunk (Megatron-Core's layout; stepcast runs the embedding on "
            "the first chunk, the multi-token-prediction modules and the loss on the last)");
  EXPECT_EQ(parse_error("Et|tLt"),
            "\"Et|tLt\": 'L' must end the layout (the loss on the last chunk) (Megatron-Core's layout; stepcast runs "
            "the embedding on the first chunk, the multi-token-prediction modules and the loss on the last)");
  // Repetition is bounded: 10000^3 characters are refused before they are built.
  EXPECT_EQ(
      parse_error("E(((t)*10000)*10000)*10000L").find("expands to more than 1000000 characters") != std::string::npos,
      true);
}

TEST(PipelineLayout, ChunksAndStageParametersFollowTheLayout) {
  const ModelSpec& m = builtin_presets().models.at("llama3-8b");
  Plan p;
  p.tp = 2;
  p.pp = 4;
  p.pipeline_layout = {1, 12, 12, 7};
  EXPECT_EQ(chunk_layers(m, p, 0), 1);
  EXPECT_EQ(chunk_layers(m, p, 3), 7);
  EXPECT_EQ(chunk_first_layer(m, p, 0), 0);
  EXPECT_EQ(chunk_first_layer(m, p, 2), 13);
  EXPECT_EQ(chunk_first_layer(m, p, 3), 25);
  // llama3-8b's layer: Q and O 4096 x 4096 each, K and V 4096 x 1024 each, SwiGLU 3 x 4096 x
  // 14336: 218,103,808 weights split by tp 2, plus two RMSNorm gains of 4096 (replicated).
  const double layer = 218'103'808.0 / 2 + 2 * 4096;
  const RankParams s1 = rank_params(m, p, 1);
  EXPECT_EQ(s1.layers, 12);
  EXPECT_DOUBLE_EQ(s1.dense, 12 * layer);
  // Stage 0: its one layer and the input embedding, 128,256 x 4096 over tp 2.
  EXPECT_DOUBLE_EQ(rank_params(m, p, 0).dense, layer + 128'256.0 * 4096 / 2);
  // Without a layout: stepcast's even split, 8 layers a stage.
  p.pipeline_layout.clear();
  EXPECT_EQ(rank_params(m, p, 1).layers, 8);
  // Interleaved: chunk k runs on stage k % pp.
  p.schedule = Schedule::kInterleaved;
  p.virtual_stages = 2;
  p.pipeline_layout = {0, 5, 5, 5, 5, 5, 5, 2};
  EXPECT_EQ(rank_params(m, p, 0).layers, 5);  // chunks 0 and 4
  EXPECT_EQ(rank_params(m, p, 3).layers, 7);  // chunks 3 and 7
}

constexpr std::string_view kHead = R"({"format": 1, "model": "llama3-8b",
    "cluster": {"preset": "dgx-h100", "nodes": 1}, "plan": {"tp": 2, "pp": 4, "global_batch": 16, )";

std::string load_error(std::string_view plan_tail) {
  const Result<Scenario> r = parse_scenario(std::string(kHead) + std::string(plan_tail) + "}}");
  return r.ok() ? "(loaded without error)" : r.error().message;
}

TEST(PipelineLayout, TheLoaderNamesTheFieldAndTheRule) {
  EXPECT_EQ(load_error(R"("pipeline_layout": [8, 8, 8])"),
            "plan.pipeline_layout: 3 model chunks (8x3), but pp x virtual_stages = 4 x 1 = 4");
  EXPECT_EQ(load_error(R"("pipeline_layout": [8, 8, 8, 9])"),
            "plan.pipeline_layout: 33 decoder layers (8x3,9), but llama3-8b has 32");
  EXPECT_EQ(load_error(R"("pipeline_layout": [16, 0, 8, 8])"),
            "plan.pipeline_layout[1]: 0 decoder layers; only the first chunk (beside the embedding) and the last "
            "(beside the output layer) may hold none");
  EXPECT_EQ(load_error(R"("pipeline_layout": [8, -1, 8, 8])"),
            "plan.pipeline_layout[1]: expected a layer count from 0 to 100000, got -1");
  EXPECT_EQ(load_error(R"("pipeline_layout": 32)"),
            "plan.pipeline_layout: expected Megatron-Core's layout string (e.g. \"Et|(tt|)*30mL\") or a list of layer "
            "counts per model chunk (e.g. [1, 2, 2, 0]), got 32");
  EXPECT_EQ(load_error(R"("pipeline_layout": "Et*8|t*8|t*8|t*8mL")"),
            "plan.pipeline_layout: places 1 multi-token-prediction module ('m'), but llama3-8b has 0");
  EXPECT_EQ(load_error(R"("pipeline_layout": "Et*8|t*8|tX")"),
            "plan.pipeline_layout: \"Et*8|t*8|tX\": 'X' is not one of E, t, m, L, |, (, ), *N (character 11)");
  EXPECT_EQ(load_error(R"("pipeline_layout": "Et*8|t*8|t*8|t*8L")"), "(loaded without error)");
}

TEST(PipelineLayout, TheEvenLayoutIsTheDefaultSplitAndReportsEchoIt) {
  const auto a = parse_scenario(std::string(kHead) + R"("zero": 1}})");
  const auto b = parse_scenario(std::string(kHead) + R"("zero": 1, "pipeline_layout": "Et*8|t*8|t*8|t*8L"}})");
  ASSERT_TRUE(a.ok() && b.ok());
  const Estimate ea = estimate(*a), eb = estimate(*b);
  EXPECT_EQ(ea.step_time_s, eb.step_time_s);
  EXPECT_EQ(ea.memory.total, eb.memory.total);
  const nlohmann::json jb = nlohmann::json::parse(estimate_report_json(*b, eb));
  EXPECT_EQ(jb["plan"]["pipeline_layout"], nlohmann::json::parse("[8, 8, 8, 8]"));
  EXPECT_FALSE(nlohmann::json::parse(estimate_report_json(*a, ea))["plan"].contains("pipeline_layout"));
  EXPECT_NE(estimate_report_text(*b, eb).find("  layers   8x4 per model chunk (plan.pipeline_layout)\n"),
            std::string::npos);
  // Unloading the output layer's stage (7 layers there, 9 on two middle stages) changes the
  // step: the layout reaches the estimate.
  const auto c = parse_scenario(std::string(kHead) + R"("zero": 1, "pipeline_layout": [7, 9, 9, 7]}})");
  ASSERT_TRUE(c.ok());
  EXPECT_NE(estimate(*c).step_time_s, ea.step_time_s);
}

}  // namespace
}  // namespace stepcast

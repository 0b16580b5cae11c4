// The built-in presets (models/data/*.json, embedded at build time). Oracles: the
// parameter totals recorded in models/data/models.json (`params_total`, derived with the
// formulas of docs/cost-model-sources.md section 1), the reference's list of models and GPUs, and the
// vendor datasheets quoted in clusters.json (8 GPUs per DGX node).
#include "stepcast/models/presets.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "stepcast/models/params.h"
#include "stepcast/models/scenario.h"

namespace stepcast {
namespace {

// params_total of every model in models/data/models.json.
const std::vector<std::pair<std::string, std::int64_t>>& reference_totals() {
  static const std::vector<std::pair<std::string, std::int64_t>> kTotals = {
      {"gpt3-175b", 174'604'259'328},
      {"llama3-8b", 8'030'261'248},
      {"llama3-70b", 70'553'706'496},
      {"llama3-405b", 405'853'388'800},
      {"llama2-7b", 6'738'415'616},
      {"llama2-70b", 68'976'648'192},
      {"mixtral-8x7b", 46'702'792'704},
      {"deepseek-v3", 671'026'419'200},
      // Qwen3 MoE, by hand (docs/model-reference.md §1): per layer attention h (a + 2g) d_h +
      // a d_h h, router h E, experts E 3 h F_e, norms 2h and the QK norms 2 d_h (q_norm,
      // k_norm); untied embeddings 2 V h; final norm h.
      // 30B-A3B: 48 x 623,120,640 + 622,329,856 + 2,048.
      {"qwen3-30b-a3b", 30'532'122'624},
      // 235B-A22B: 94 x 2,487,755,008 + 1,244,659,712 + 4,096.
      {"qwen3-235b-a22b", 235'093'634'560},
      // GPT-OSS, by hand: per layer attention h (a + 2g) d_h + a d_h h = 26,542,080 and its
      // biases a d_h + 2 g d_h + h = 8,000; router h E + E; experts E (3 h F + 2 F + h) (each
      // expert carries its biases); norms 2h; untied embeddings 2 V h = 1,158,266,880; final
      // norm h. The model card's totals: 116.83 B and 20.91 B.
      // 120b: 36 x (26,542,080 + 8,000 + 368,768 + 128 x 24,891,840 + 5,760) + 1,158,266,880 + 2,880.
      {"gpt-oss-120b", 116'829'154'368},
      // 20b: 24 x (26,542,080 + 8,000 + 92,192 + 32 x 24,891,840 + 5,760) + 1,158,266,880 + 2,880.
      {"gpt-oss-20b", 20'914'755'648},
  };
  return kTotals;
}

// The GPUs of models/data/gpus.json.
const std::vector<std::string> kReferenceGpus = {"a100-sxm-80gb", "h100-sxm", "h200-sxm", "b200",
                                                 "mi300x"};

TEST(Presets, EveryReferenceModelIsBuiltInWithItsRecordedTotal) {
  // builtin_presets() aborts on an invalid entry, so reaching the checks means every
  // embedded preset passed the loader's validation.
  const PresetCatalog& cat = builtin_presets();
  for (const auto& [name, total] : reference_totals()) {
    SCOPED_TRACE(name);
    auto it = cat.models.find(name);
    ASSERT_NE(it, cat.models.end());
    ASSERT_TRUE(it->second.reference_params_total.has_value());
    EXPECT_EQ(*it->second.reference_params_total, total);
  }
}

TEST(Presets, EveryModelsComputedTotalEqualsItsRecordedTotal) {
  const PresetCatalog& cat = builtin_presets();
  ASSERT_FALSE(cat.models.empty());
  for (const auto& [name, model] : cat.models) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(model.reference_params_total.has_value()) << "every preset records params_total";
    EXPECT_EQ(count_params(model).total, *model.reference_params_total);
  }
}

TEST(Presets, EveryReferenceGpuIsBuiltIn) {
  const PresetCatalog& cat = builtin_presets();
  for (const auto& name : kReferenceGpus) EXPECT_EQ(cat.gpus.count(name), 1u) << name;
}

TEST(Presets, PresetKeysAreTheSpecNames) {
  // The catalog's key is the name a scenario uses and reports print.
  const PresetCatalog& cat = builtin_presets();
  for (const auto& [key, m] : cat.models) EXPECT_EQ(m.name, key);
  for (const auto& [key, g] : cat.gpus) EXPECT_EQ(g.name, key);
  for (const auto& [key, c] : cat.clusters) EXPECT_EQ(c.name, key);
}

TEST(Presets, EveryPresetKeepsItsSource) {
  const PresetCatalog& cat = builtin_presets();
  for (const auto& [key, m] : cat.models) EXPECT_FALSE(m.source.empty()) << "model " << key;
  for (const auto& [key, g] : cat.gpus) EXPECT_FALSE(g.source.empty()) << "gpu " << key;
  for (const auto& [key, c] : cat.clusters) EXPECT_FALSE(c.source.empty()) << "cluster " << key;
}

TEST(Presets, DgxClustersHaveEightGpusPerNodeOfTheirGeneration) {
  // NVIDIA DGX A100 / H100 / H200 / B200 datasheets: 8 GPUs per server.
  const PresetCatalog& cat = builtin_presets();
  const std::vector<std::pair<std::string, std::string>> kDgx = {{"dgx-a100", "a100-sxm-80gb"},
                                                                 {"dgx-h100", "h100-sxm"},
                                                                 {"dgx-h200", "h200-sxm"},
                                                                 {"dgx-b200", "b200"}};
  for (const auto& [cluster, gpu] : kDgx) {
    SCOPED_TRACE(cluster);
    auto it = cat.clusters.find(cluster);
    ASSERT_NE(it, cat.clusters.end());
    EXPECT_EQ(it->second.gpus_per_node, 8);
    EXPECT_EQ(it->second.nics_per_node, 8);
    EXPECT_EQ(it->second.nodes, 1);  // scenarios override "nodes"
    EXPECT_EQ(it->second.gpu.name, gpu);
  }
}

TEST(Presets, EveryModelPresetLoadsInAScenarioByName) {
  // tp 1 x dp 8 on one DGX H100 fits any head count; seq_len defaults to train_seq_len.
  for (const auto& [name, model] : builtin_presets().models) {
    SCOPED_TRACE(name);
    const auto r = parse_scenario(R"({"format": 1, "model": ")" + name +
                                  R"(", "cluster": "dgx-h100", "plan": {"tp": 1}})");
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->model.num_layers, model.num_layers);
    EXPECT_EQ(r->workload.seq_len, model.train_seq_len);
  }
}

TEST(Presets, EveryGpuPresetLoadsInsideACustomCluster) {
  for (const auto& [name, gpu] : builtin_presets().gpus) {
    SCOPED_TRACE(name);
    const auto r = parse_scenario(
        R"({"format": 1, "model": "llama3-8b", "plan": {"tp": 8},
            "cluster": {"gpu": ")" + name +
        R"(", "nodes": 1, "gpus_per_node": 8, "intra_node": {"bandwidth_GBps": 100}}})");
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->cluster.gpu.name, name);
    EXPECT_EQ(r->cluster.gpu.bf16_dense_tflops, gpu.bf16_dense_tflops);
  }
}

TEST(Presets, EveryClusterPresetLoadsInAScenarioByName) {
  for (const auto& [name, cluster] : builtin_presets().clusters) {
    SCOPED_TRACE(name);
    const auto r = parse_scenario(R"({"format": 1, "model": "llama3-8b", "cluster": ")" + name +
                                  R"(", "plan": {"tp": 1}})");
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->plan.dp, cluster.gpus_per_node);
  }
}

}  // namespace
}  // namespace stepcast

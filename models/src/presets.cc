#include "stepcast/models/presets.h"

#include <cstdio>
#include <cstdlib>

#include "reliability_json.h"
#include "spec_json.h"
#include "stepcast/models/attention.h"
#include "stepcast/models/names.h"

namespace stepcast::detail {
extern const char* const kPresetModelsJson;
extern const char* const kPresetGpusJson;
extern const char* const kPresetClustersJson;
extern const char* const kPresetFailuresJson;
extern const char* const kPresetStacksJson;
extern const char* const kPresetAttentionJson;
}  // namespace stepcast::detail

namespace stepcast {

using detail::Diagnostics;
using detail::json;
using detail::ObjectReader;

const char* builtin_preset_text(const std::string& name) {
  if (name == "models") return detail::kPresetModelsJson;
  if (name == "gpus") return detail::kPresetGpusJson;
  if (name == "clusters") return detail::kPresetClustersJson;
  if (name == "failures") return detail::kPresetFailuresJson;
  if (name == "stacks") return detail::kPresetStacksJson;
  if (name == "attention") return detail::kPresetAttentionJson;
  return nullptr;
}

namespace {

// One stack profile (models/data/stacks.json): every parameter must name its source and
// verification code (a missing one is a build defect, like any invalid preset).
StackProfile read_stack(ObjectReader& r) {
  StackProfile s;
  if (auto x = r.string("name")) s.display_name = *x;
  if (auto x = r.string("description")) s.description = *x;
  std::vector<std::string> params;
  auto num = [&](const char* key, double& out) {
    if (auto x = r.number(key, 0, 1e6)) out = *x;
    params.emplace_back(key);
  };
  auto count = [&](const char* key, int& out) {
    if (auto x = r.integer(key, 0, 10'000)) out = static_cast<int>(*x);
    params.emplace_back(key);
  };
  auto flag = [&](const char* key, bool& out) {
    if (auto x = r.boolean(key)) out = *x;
    params.emplace_back(key);
  };
  num("host_us_per_kernel", s.host_us_per_kernel);
  flag("cuda_graphs", s.cuda_graphs);
  count("qkv_gemms", s.qkv_gemms);
  count("gated_fc1_gemms", s.gated_fc1_gemms);
  count("rmsnorm_kernels", s.rmsnorm_kernels);
  count("layernorm_kernels", s.layernorm_kernels);
  count("rope_kernels", s.rope_kernels);
  count("gated_activation_kernels", s.gated_activation_kernels);
  count("activation_kernels", s.activation_kernels);
  count("residual_kernels", s.residual_kernels);
  count("dropout_kernels", s.dropout_kernels);
  count("attention_fwd_kernels", s.attention_fwd_kernels);
  count("attention_bwd_kernels", s.attention_bwd_kernels);
  num("elementwise_bwd_per_fwd", s.elementwise_bwd_per_fwd);
  flag("moe_grouped_gemm", s.moe_grouped_gemm);
  flag("moe_gemm_per_expert", s.moe_gemm_per_expert);
  count("router_kernels", s.router_kernels);
  if (auto x = r.choice("moe_host_sync", names_of<MoeHostSync>())) s.moe_host_sync = *parse_name<MoeHostSync>(*x);
  params.emplace_back("moe_host_sync");
  num("rmsnorm_bytes", s.rmsnorm_bytes);
  num("layernorm_bytes", s.layernorm_bytes);
  num("gated_activation_bytes", s.gated_activation_bytes);
  num("rope_bytes", s.rope_bytes);
  num("loss_bytes_per_logit", s.loss_bytes_per_logit);
  num("loss_traffic_bytes_per_logit", s.loss_traffic_bytes_per_logit);
  if (auto x = r.choice("attention_kernel", attention_kernel_names())) s.attention_kernel = *x;
  params.emplace_back("attention_kernel");
  flag("fp8_weight_cache", s.fp8_weight_cache);
  {
    if (auto x = r.choice("zero3_fetch", names_of<Zero3Fetch>())) s.zero3_fetch = *parse_name<Zero3Fetch>(*x);
    params.emplace_back("zero3_fetch");
    // The per-module coordinator's element counts: required (with their sources) there only.
    auto elements = [&](const char* key, double& out) {
      if (auto x = r.number(key, 1, 1e15)) out = *x;
      params.emplace_back(key);
    };
    if (s.zero3_fetch == Zero3Fetch::kModuleSync) {
      if (auto x = r.choice("zero3_gather", names_of<Zero3Gather>())) s.zero3_gather = *parse_name<Zero3Gather>(*x);
      params.emplace_back("zero3_gather");
      elements("zero3_prefetch_numel", s.zero3_prefetch_numel);
      elements("zero3_max_live_numel", s.zero3_max_live_numel);
      elements("zero3_reuse_distance_numel", s.zero3_reuse_distance_numel);
    }
  }
  if (auto x = r.choice("grad_reduce", names_of<GradReduce>())) s.grad_reduce = *parse_name<GradReduce>(*x);
  params.emplace_back("grad_reduce");
  flag("grad_reduce_overlap", s.grad_reduce_overlap);
  flag("master_weights_sharded", s.master_weights_sharded);
  flag("master_in_optimizer", s.master_in_optimizer);
  if (auto x = r.choice("pipeline_p2p", names_of<PipelineP2p>())) s.pipeline_p2p = *parse_name<PipelineP2p>(*x);
  params.emplace_back("pipeline_p2p");
  num("grad_clip_bytes", s.grad_clip_bytes);
  num("zero3_copy_out_bytes", s.zero3_copy_out_bytes);
  num("zero3_copy_in_bytes", s.zero3_copy_in_bytes);
  num("fp16_unscale_bytes", s.fp16_unscale_bytes);
  if (auto x = r.integer("max_zero", 0, 3)) s.max_zero = static_cast<int>(*x);
  params.emplace_back("max_zero");
  if (auto x = r.integer("pipeline_max_zero", -1, 3)) s.pipeline_max_zero = static_cast<int>(*x);
  params.emplace_back("pipeline_max_zero");
  flag("context_parallel", s.context_parallel);
  for (const char* table : {"sources", "verification"}) {
    const json* t = r.object(table);
    auto& out = std::string(table) == "sources" ? s.sources : s.verification;
    for (const std::string& key : params) {
      if (!r.has(key)) r.diag().add(r.path_of(key), "missing (every stack parameter is required)");
      if (t == nullptr || !t->contains(key) || !t->at(key).is_string()) {
        r.diag().add(r.path_of(table) + "." + key, "missing: every stack parameter names its " + std::string(table));
      } else {
        out[key] = t->at(key).get<std::string>();
      }
    }
  }
  return s;
}

// One architecture's attention kernel table (models/data/attention.json): every series has
// one figure per sequence length, the lengths ascend, and the table names its source.
AttentionTable read_attention(ObjectReader& r) {
  AttentionTable t;
  if (auto x = r.required_string("reference_gpu")) t.reference_gpu = *x;
  if (auto x = r.required_number("reference_bf16_dense_tflops", 1, 1e6)) t.reference_bf16_dense_tflops = *x;
  if (auto x = r.required_number("head_dim", 1, 4096)) t.head_dim = *x;
  if (auto x = r.required_string("source")) t.source = *x;
  r.ignore({"verification", "cross_checks"});
  auto series = [&](const json& arr, const std::string& path, std::vector<double>& out) {
    if (!arr.is_array() || arr.empty()) return r.diag().add(path, "must be a non-empty array of numbers");
    for (const json& v : arr) {
      if (!v.is_number() || v.get<double>() <= 0) return r.diag().add(path, "must hold positive numbers");
      out.push_back(v.get<double>());
    }
  };
  if (const json* s = r.array("seq")) series(*s, r.path_of("seq"), t.seq);
  for (std::size_t i = 1; i < t.seq.size(); ++i) {
    if (t.seq[i] <= t.seq[i - 1]) r.diag().add(r.path_of("seq"), "must ascend");
  }
  if (const json* k = r.object("kernels")) {
    for (auto it = k->begin(); it != k->end(); ++it) {
      const std::string path = r.path_of("kernels") + "." + it.key();
      ObjectReader kr(it.value(), path, r.diag());
      AttentionKernelFigures f;
      for (auto [key, out] : {std::pair{"fwd_causal_tflops", &f.fwd_causal_tflops},
                              std::pair{"fwd_tflops", &f.fwd_tflops}, std::pair{"bwd_tflops", &f.bwd_tflops}}) {
        if (out == &f.fwd_tflops && !kr.has("fwd_tflops")) {  // a causal-only table
          f.fwd_tflops = f.fwd_causal_tflops;
          f.fwd_from_causal = true;
          continue;
        }
        if (const json* a = kr.array(key)) series(*a, kr.path_of(key), *out);
        if (out->size() != t.seq.size()) kr.diag().add(kr.path_of(key), "needs one figure per seq entry");
      }
      if (auto x = kr.string("source")) f.source = *x;  // a family measured apart from the table's source
      kr.finish();
      t.kernels.emplace(it.key(), std::move(f));
    }
  }
  return t;
}

template <typename Spec, typename ReadFn>
void read_section(const char* file, const char* section, std::map<std::string, Spec>& out,
                  Diagnostics& diag, ReadFn read) {
  const json doc = json::parse(builtin_preset_text(file));
  const std::string path = std::string(file) + ".json:" + section;
  for (auto it = doc.at(section).begin(); it != doc.at(section).end(); ++it) {
    ObjectReader r(it.value(), path + "." + it.key(), diag);
    Spec spec = read(r);
    r.finish();
    spec.name = it.key();
    out.emplace(it.key(), std::move(spec));
  }
}

PresetCatalog parse_catalog() {
  PresetCatalog cat;
  Diagnostics diag;
  read_section<ModelSpec>("models", "models", cat.models, diag, [](ObjectReader& r) {
    return detail::read_model(r, ModelSpec{}, /*from_preset=*/false);
  });
  read_section<GpuSpec>("gpus", "gpus", cat.gpus, diag, [](ObjectReader& r) {
    GpuSpec g = detail::read_gpu(r, GpuSpec{}, /*from_preset=*/false);
    return g;
  });
  read_section<ClusterSpec>("clusters", "clusters", cat.clusters, diag, [&](ObjectReader& r) {
    return detail::read_cluster(r, ClusterSpec{}, /*from_preset=*/false, cat.gpus);
  });
  read_section<FailureSpec>("failures", "failures", cat.failures, diag, [](ObjectReader& r) {
    return detail::read_failures(r, FailureSpec{}, /*from_preset=*/false);
  });
  read_section<StackProfile>("stacks", "stacks", cat.stacks, diag, read_stack);
  read_section<AttentionTable>("attention", "architectures", cat.attention, diag, read_attention);
  for (auto& [arch, table] : cat.attention) {
    // The reference GPU's power limit and GEMM ceiling, for attention_power_cap_factor.
    const auto ref = cat.gpus.find(table.reference_gpu);
    if (ref == cat.gpus.end()) {
      diag.add("attention.json:architectures." + arch + ".reference_gpu",
               "\"" + table.reference_gpu + "\" is not a GPU preset");
      continue;
    }
    table.reference_tdp_W = ref->second.tdp_W;
    table.reference_mamf_bf16_tflops = sweep_bf16_tflops(ref->second);
  }
  for (const auto& [key, stack] : cat.stacks) {
    for (const auto& [arch, table] : cat.attention) {
      if (table.kernels.count(stack.attention_kernel) == 0) {
        diag.add("stacks.json:stacks." + key + ".attention_kernel",
                 "\"" + stack.attention_kernel + "\" has no figures in attention.json:architectures." + arch);
      }
    }
  }
  for (const std::string& key : names_of<Stack>()) {
    if (cat.stacks.count(key) == 0) diag.add("stacks.json:stacks." + key, "missing profile for a plan.stack name");
  }
  for (auto& [key, model] : cat.models) {
    if (model.family.empty()) model.family = key;
  }
  if (!diag.empty()) {
    std::fprintf(stderr, "stepcast: built-in presets are invalid (build defect):\n%s\n",
                 diag.joined().c_str());
    std::abort();
  }
  return cat;
}

}  // namespace

const PresetCatalog& builtin_presets() {
  static const PresetCatalog catalog = parse_catalog();  // immutable after first use
  return catalog;
}

}  // namespace stepcast

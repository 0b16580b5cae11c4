#include "stepcast/app/presets.h"

#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "stepcast/models/params.h"
#include "stepcast/models/reliability.h"

namespace stepcast::app {

Result<PresetsReport> run_presets(const PresetsRequest&) { return PresetsReport{&builtin_presets()}; }

std::string presets_json(const PresetsReport& report) {
  const PresetCatalog& cat = *report.catalog;
  nlohmann::ordered_json j;
  j["format"] = 1;
  for (const auto& [k, m] : cat.models) {
    const ParamCounts c = count_params(m);
    j["models"][k] = {{"num_layers", m.num_layers}, {"hidden_size", m.hidden_size},
                      {"params_total", c.total}, {"params_active", c.active},
                      {"source", m.source}};
  }
  for (const auto& [k, g] : cat.gpus) {
    j["gpus"][k] = {{"bf16_dense_tflops", g.bf16_dense_tflops},
                    {"hbm_GiB", g.hbm_GiB},
                    {"hbm_bandwidth_GBps", g.hbm_bandwidth_GBps},
                    {"mamf_bf16_tflops", g.mamf_bf16_tflops},
                    {"mamf_fp8_tflops", g.mamf_fp8_tflops},
                    {"gemm_fp8_k_half", g.gemm_fp8_k_half},
                    {"gemm_bf16_k_half", g.gemm_bf16_k_half},
                    {"gemm_bf16_sweep_tflops", g.gemm_bf16_sweep_tflops},
                    {"tdp_W", g.tdp_W},
                    {"source", g.source}};
  }
  for (const auto& [k, c] : cat.clusters) {
    j["clusters"][k] = {{"gpu", c.gpu.name}, {"gpus_per_node", c.gpus_per_node},
                        {"intra_bandwidth_GBps", c.intra_bandwidth_GBps},
                        {"nic_Gbps", c.nic_Gbps}, {"nics_per_node", c.nics_per_node},
                        {"source", c.source}};
  }
  for (const auto& [k, f] : cat.failures) {
    for (FailureCause cause : kAllFailureCauses) {
      j["failures"][k]["causes"][failure_cause_name(cause)] = {
          {"rate_per_unit_h", f.component(cause).rate_per_unit_h}, {"unit", failure_unit_name(cause)}};
    }
    j["failures"][k]["source"] = f.source;
  }
  for (const auto& [k, st] : cat.stacks) {
    auto& o = j["stacks"][k];
    o["name"] = st.display_name;
    o["host_us_per_kernel"] = st.host_us_per_kernel;
    o["cuda_graphs"] = st.cuda_graphs;
    o["qkv_gemms"] = st.qkv_gemms;
    o["gated_fc1_gemms"] = st.gated_fc1_gemms;
    o["rmsnorm_kernels"] = st.rmsnorm_kernels;
    o["layernorm_kernels"] = st.layernorm_kernels;
    o["rope_kernels"] = st.rope_kernels;
    o["gated_activation_kernels"] = st.gated_activation_kernels;
    o["activation_kernels"] = st.activation_kernels;
    o["residual_kernels"] = st.residual_kernels;
    o["dropout_kernels"] = st.dropout_kernels;
    o["attention_fwd_kernels"] = st.attention_fwd_kernels;
    o["attention_bwd_kernels"] = st.attention_bwd_kernels;
    o["elementwise_bwd_per_fwd"] = st.elementwise_bwd_per_fwd;
    o["moe_grouped_gemm"] = st.moe_grouped_gemm;
    o["moe_gemm_per_expert"] = st.moe_gemm_per_expert;
    o["router_kernels"] = st.router_kernels;
    o["moe_host_sync"] = name_of(st.moe_host_sync);
    o["rmsnorm_bytes"] = st.rmsnorm_bytes;
    o["layernorm_bytes"] = st.layernorm_bytes;
    o["gated_activation_bytes"] = st.gated_activation_bytes;
    o["rope_bytes"] = st.rope_bytes;
    o["loss_bytes_per_logit"] = st.loss_bytes_per_logit;
    o["loss_traffic_bytes_per_logit"] = st.loss_traffic_bytes_per_logit;
    o["attention_kernel"] = st.attention_kernel;
    o["fp8_weight_cache"] = st.fp8_weight_cache;
    o["zero3_fetch"] = name_of(st.zero3_fetch);
    if (st.zero3_fetch == Zero3Fetch::kModuleSync) {
      o["zero3_gather"] = name_of(st.zero3_gather);
      o["zero3_prefetch_numel"] = st.zero3_prefetch_numel;
      o["zero3_max_live_numel"] = st.zero3_max_live_numel;
      o["zero3_reuse_distance_numel"] = st.zero3_reuse_distance_numel;
    }
    o["grad_reduce"] = name_of(st.grad_reduce);
    o["grad_reduce_overlap"] = st.grad_reduce_overlap;
    o["master_weights_sharded"] = st.master_weights_sharded;
    o["master_in_optimizer"] = st.master_in_optimizer;
    o["pipeline_p2p"] = name_of(st.pipeline_p2p);
    o["grad_clip_bytes"] = st.grad_clip_bytes;
    o["zero3_copy_out_bytes"] = st.zero3_copy_out_bytes;
    o["zero3_copy_in_bytes"] = st.zero3_copy_in_bytes;
    o["fp16_unscale_bytes"] = st.fp16_unscale_bytes;
    o["max_zero"] = st.max_zero;
    o["pipeline_max_zero"] = st.pipeline_max_zero;
    o["context_parallel"] = st.context_parallel;
    o["sources"] = st.sources;
    o["verification"] = st.verification;
  }
  for (const auto& [arch, t] : cat.attention) {
    auto& o = j["attention"][arch];
    o["reference_gpu"] = t.reference_gpu;
    o["reference_bf16_dense_tflops"] = t.reference_bf16_dense_tflops;
    o["head_dim"] = t.head_dim;
    o["seq"] = t.seq;
    for (const auto& [kernel, f] : t.kernels) {
      o["kernels"][kernel] = {{"fwd_causal_tflops", f.fwd_causal_tflops},
                              {"fwd_tflops", f.fwd_tflops},
                              {"bwd_tflops", f.bwd_tflops}};
      if (f.fwd_from_causal) o["kernels"][kernel]["fwd_tflops_from_causal"] = true;
      if (!f.source.empty()) o["kernels"][kernel]["source"] = f.source;
    }
    o["source"] = t.source;
  }
  return j.dump(2) + "\n";
}

std::string presets_text(const PresetsReport& report) {
  const PresetCatalog& cat = *report.catalog;
  std::string out;
  out += "Models (model: NAME)\n";
  out += fmt::format("  {:<14}{:>8}{:>8}{:>7}{:>8}{:>18}{:>18}\n", "name", "layers", "hidden",
                           "heads", "kv", "params", "active");
  for (const auto& [k, m] : cat.models) {
    const ParamCounts c = count_params(m);
    out += fmt::format("  {:<14}{:>8}{:>8}{:>7}{:>8}{:>18}{:>18}\n", k, m.num_layers,
                             m.hidden_size, m.num_attention_heads, m.num_kv_heads, c.total, c.active);
  }
  out += "\nGPUs (cluster.gpu: NAME)\n";
  out += fmt::format("  {:<15}{:>12}{:>12}{:>11}{:>9}{:>11}{:>14}{:>7}\n", "name", "bf16 TFLOP/s", "fp8 TFLOP/s",
                     "bf16 MAMF", "HBM GiB", "HBM GB/s", "scale-up GB/s", "TDP W");
  auto or_dash = [](double v, const char* spec) { return v > 0 ? fmt::format(fmt::runtime(spec), v) : "-"; };
  for (const auto& [k, g] : cat.gpus) {
    out += fmt::format("  {:<15}{:>12.1f}{:>12}{:>11}{:>9.0f}{:>11.0f}{:>14.0f}{:>7}\n", k, g.bf16_dense_tflops,
                       or_dash(g.fp8_dense_tflops, "{:.1f}"), or_dash(g.mamf_bf16_tflops, "{:.1f}"), g.hbm_GiB,
                       g.hbm_bandwidth_GBps, g.scaleup_bandwidth_per_direction_GBps, or_dash(g.tdp_W, "{:.0f}"));
  }
  out +=
      "  (bf16 MAMF: the GEMM model's large-K bf16 ceiling, the best matmul rate of a sweep or, on Hopper,\n"
      "   the sustained rate measured at the power limit, docs/model-reference.md 4.1;\n"
      "   TDP W: the power limit the figures hold at)\n";
  out += "\nClusters (cluster: NAME or {\"preset\": NAME, \"nodes\": N})\n";
  out += fmt::format("  {:<11}{:<15}{:>10}{:>16}{:>14}\n", "name", "gpu", "GPUs/node",
                           "NVLink GB/s/dir", "NICs x Gb/s");
  for (const auto& [k, c] : cat.clusters) {
    out += fmt::format("  {:<11}{:<15}{:>10}{:>16.0f}{:>14}\n", k, c.gpu.name, c.gpus_per_node,
                             c.intra_bandwidth_GBps, fmt::format("{} x {:.0f}", c.nics_per_node, c.nic_Gbps));
  }
  out += "\nFailure models (faults.failures: NAME; rates per unit-hour)\n";
  out += fmt::format("  {:<16}{:>11}{:>11}{:>11}{:>11}{:>11}{:>24}\n", "name", "gpu/GPU", "host/node",
                           "nic/node", "switch", "sw/node", "job MTBF, 2048x8 GPUs");
  for (const auto& [k, f] : cat.failures) {
    ClusterSpec ref;  // the Llama 3 405B job: 2,048 nodes of 8 GPUs
    ref.nodes = 2048;
    ref.gpus_per_node = 8;
    out += fmt::format("  {:<16}{:>11.3g}{:>11.3g}{:>11.3g}{:>11.3g}{:>11.3g}{:>22.2f} h\n", k,
                             f.component(FailureCause::kGpu).rate_per_unit_h,
                             f.component(FailureCause::kHost).rate_per_unit_h,
                             f.component(FailureCause::kNic).rate_per_unit_h,
                             f.component(FailureCause::kSwitch).rate_per_unit_h,
                             f.component(FailureCause::kSoftware).rate_per_unit_h,
                             1.0 / job_failure_rate_per_h(f, ref));
  }
  out += "\nSoftware stacks (plan.stack: NAME; kernels per layer forward; sources: presets --json)\n";
  out += fmt::format("  {:<21}{:>9}{:>8}{:>6}{:>6}{:>6}{:>6}{:>6}{:>6}{:>9}{:>12}{:>13}{:>19}{:>8}{:>10}{:>13}  {}\n",
                     "name", "us/kernel", "graphs", "qkv", "fc1", "rms", "rope", "act", "res", "attn f/b", "kernel",
                     "zero3 fetch", "zero1/2 grads", "master", "pp p2p", "zero/pp/cp", "framework");
  for (const auto& [k, st] : cat.stacks) {
    const std::string grads =
        fmt::format("{} {}", st.grad_reduce == GradReduce::kAllReduce ? "all-reduce" : "r-scatter",
                    st.grad_reduce_overlap ? "overlap" : "at end");
    // What the stack runs: its highest ZeRO stage, the highest beside a pipeline ("-": no
    // pipeline parallelism), and context parallelism.
    const std::string runs = fmt::format("z{}/{}/{}", st.max_zero,
                                         st.pipeline_max_zero < 0 ? "-" : "z" + std::to_string(st.pipeline_max_zero),
                                         st.context_parallel ? "cp" : "-");
    out +=
        fmt::format("  {:<21}{:>9.1f}{:>8}{:>6}{:>6}{:>6}{:>6}{:>6}{:>6}{:>9}{:>12}{:>13}{:>19}{:>8}{:>10}{:>13}  {}\n",
                    k, st.host_us_per_kernel, st.cuda_graphs ? "yes" : "no", st.qkv_gemms, st.gated_fc1_gemms,
                    st.rmsnorm_kernels, st.rope_kernels, st.gated_activation_kernels, st.residual_kernels,
                    fmt::format("{}/{}", st.attention_fwd_kernels, st.attention_bwd_kernels), st.attention_kernel,
                    name_of(st.zero3_fetch), grads, st.master_weights_sharded ? "shard" : "whole",
                    name_of(st.pipeline_p2p), runs, st.display_name);
  }
  out +=
      "  zero/pp/cp: the highest ZeRO stage the stack runs, the highest beside pipeline parallelism (-: none),\n"
      "  context parallelism (-: none); a plan beyond them is refused (exit 2)\n";
  for (const auto& [arch, t] : cat.attention) {
    std::vector<std::string> own;  // families measured apart from the table's source
    for (const auto& [kernel, f] : t.kernels) {
      if (!f.source.empty()) own.push_back(kernel);
    }
    out += fmt::format(
        "\nAttention kernels on {} (plan.attention_kernel; TFLOP/s on {}, head dim {:g}, causal forward / "
        "backward; {}source: presets --json)\n",
        arch, t.reference_gpu, t.head_dim,
        own.empty() ? std::string() : fmt::format("{}: measured apart; ", fmt::join(own, ", ")));
    // Columns 13 wide, wider where a pair needs it (Blackwell's "1332.4/1074.8").
    std::size_t width = 13;
    const auto pair = [](const AttentionKernelFigures& f, std::size_t i) {
      return fmt::format("{:g}/{:g}", f.fwd_causal_tflops[i], f.bwd_tflops[i]);
    };
    for (const auto& [kernel, f] : t.kernels) {
      for (std::size_t i = 0; i < t.seq.size(); ++i) width = std::max(width, pair(f, i).size() + 2);
    }
    out += fmt::format("  {:<10}", "tokens");
    for (double n : t.seq) out += fmt::format("{:>{}g}", n, width);
    out += "\n";
    for (const auto& [kernel, f] : t.kernels) {
      out += fmt::format("  {:<10}", kernel);
      for (std::size_t i = 0; i < t.seq.size(); ++i) out += fmt::format("{:>{}}", pair(f, i), width);
      out += "\n";
    }
  }
  return out;
}

}  // namespace stepcast::app

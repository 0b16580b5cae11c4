#include "stepcast/models/attention.h"

#include <algorithm>
#include <cmath>

#include "stepcast/models/presets.h"

namespace stepcast {

double interpolate_log2(const std::vector<double>& xs, const std::vector<double>& ys, double x) {
  if (x <= xs.front()) return ys.front();
  if (x >= xs.back()) return ys.back();
  const auto hi = static_cast<std::size_t>(std::upper_bound(xs.begin(), xs.end(), x) - xs.begin());
  const std::size_t lo = hi - 1;
  const double f = (std::log2(x) - std::log2(xs[lo])) / (std::log2(xs[hi]) - std::log2(xs[lo]));
  return ys[lo] + f * (ys[hi] - ys[lo]);
}

const std::vector<std::string>& attention_kernel_names() {
  static const std::vector<std::string> names{"fa2", "cudnn", "fa3", "sdpa-flash", "sdpa-cudnn"};
  return names;
}

const AttentionTable* attention_table(const std::string& architecture) {
  const auto& tables = builtin_presets().attention;
  const auto it = tables.find(architecture);
  return it == tables.end() ? nullptr : &it->second;
}

AttentionEfficiency attention_efficiency(const GpuSpec& gpu, const std::string& kernel, double seq,
                                         bool causal, bool fused) {
  if (gpu.attention_efficiency > 0) return {gpu.attention_efficiency, gpu.attention_efficiency, false};
  const AttentionEfficiency prior{kAttentionEfficiencyPrior, kAttentionEfficiencyPrior, false};
  const AttentionTable* table = fused && !gpu.architecture.empty() ? attention_table(gpu.architecture) : nullptr;
  if (table == nullptr) return prior;
  const auto k = table->kernels.find(kernel);
  if (k == table->kernels.end()) return prior;
  const AttentionKernelFigures& f = k->second;
  const double peak = table->reference_bf16_dense_tflops;
  const double cap = attention_power_cap_factor(gpu, *table);
  return {cap * interpolate_log2(table->seq, causal ? f.fwd_causal_tflops : f.fwd_tflops, seq) / peak,
          cap * interpolate_log2(table->seq, f.bwd_tflops, seq) / peak, true};
}

double sweep_bf16_tflops(const GpuSpec& gpu) {
  return gpu.gemm_bf16_sweep_tflops > 0 ? gpu.gemm_bf16_sweep_tflops : gpu.mamf_bf16_tflops;
}

double attention_power_cap_factor(const GpuSpec& gpu, const AttentionTable& table) {
  const double sweep = sweep_bf16_tflops(gpu);
  if (gpu.tdp_W <= 0 || table.reference_tdp_W <= gpu.tdp_W || sweep <= 0 || table.reference_mamf_bf16_tflops <= 0) {
    return 1.0;
  }
  return std::min(1.0, sweep / table.reference_mamf_bf16_tflops);
}

}  // namespace stepcast

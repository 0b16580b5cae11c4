#include "stepcast/models/compute.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "stepcast/models/params.h"

namespace stepcast {

TokenFlops token_flops(const ModelSpec& m, std::int64_t seq_len) {
  const ParamCounts c = count_params(m);
  TokenFlops f;
  const double h = static_cast<double>(m.hidden_size);
  const double a = m.num_attention_heads;
  double d_qk = static_cast<double>(m.head_dim), d_v = d_qk;
  if (m.mla) {
    d_qk = static_cast<double>(m.mla->qk_nope_head_dim + m.mla->qk_rope_head_dim);
    d_v = static_cast<double>(m.mla->v_head_dim);
  }
  // Weights used once per token: 2 FLOPs each. Biases and norms are not matmuls.
  double attn_w = static_cast<double>(c.attention_per_layer);
  double ffn_w = static_cast<double>(m.ffn_matrices) * h * m.ffn_hidden_size;
  if (m.linear_bias && !m.mla) {
    attn_w -= a * m.head_dim + 2.0 * m.num_kv_heads * m.head_dim + h;
  }
  if (m.mla) {  // MLA: the two norm gains inside the projections are not matmuls
    attn_w -= static_cast<double>(m.mla->q_lora_rank + m.mla->kv_lora_rank);
  }
  f.dense_layer = 2.0 * (attn_w + ffn_w);
  if (m.moe) {
    const MoeSpec& e = *m.moe;
    const double g = m.ffn_matrices;
    f.moe_layer = 2.0 * (attn_w + h * e.num_experts + e.top_k * g * h * e.expert_ffn_hidden_size +
                         e.num_shared_experts * g * h * e.shared_expert_ffn_hidden_size);
  }
  // A windowed layer's query sees at most `sliding_window` keys; counted like the full
  // square (no causal halving), at min(window, s) keys per query.
  const double s = static_cast<double>(seq_len);
  const double windowed = m.num_layers > 0 ? static_cast<double>(windowed_layers(m)) / m.num_layers : 0.0;
  const double keys = (1 - windowed) * s + windowed * std::min(s, static_cast<double>(m.sliding_window));
  f.attention_core = 2.0 * a * (d_qk + d_v) * keys;
  f.logits = 2.0 * h * m.vocab_size;
  f.forward = c.dense_layers * (f.dense_layer + f.attention_core) +
              c.moe_layers * (f.moe_layer + f.attention_core) + f.logits;
  f.training = 3.0 * f.forward;
  return f;
}

int windowed_layers(const ModelSpec& m) {
  if (m.sliding_window <= 0) return 0;
  if (m.window_attn_skip_freq <= 0) return m.num_layers;
  return m.num_layers - m.num_layers / m.window_attn_skip_freq;
}

double windowed_keys_per_query(double seq, double window) {
  if (seq <= window) return (seq + 1) / 2;
  return window - window * (window - 1) / (2 * seq);
}

double peak_flops(const GpuSpec& gpu, Precision p) {
  switch (p) {
    case Precision::kFp8: return gpu.fp8_dense_tflops * 1e12;
    case Precision::kFp16: return (gpu.fp16_dense_tflops > 0 ? gpu.fp16_dense_tflops : gpu.bf16_dense_tflops) * 1e12;
    case Precision::kBf16: break;
  }
  return gpu.bf16_dense_tflops * 1e12;
}

double gemm_efficiency_max(const GpuSpec& gpu, Precision p) {
  if (gpu.gemm_efficiency > 0) return gpu.gemm_efficiency;
  const double mamf = p == Precision::kFp8 ? gpu.mamf_fp8_tflops : gpu.mamf_bf16_tflops;
  const double peak = peak_flops(gpu, p) / 1e12;
  if (mamf > 0 && peak > 0) return std::min(1.0, mamf / peak);
  return 0.75;
}

namespace {
constexpr double kSplitKStep = 64;  // K per main-loop step of a 128 x 256 x 64 tile (CUTLASS sm90)
}  // namespace

namespace {

// gemm_tiling's work: the quantization and the K slices of the better cut, and the cut's
// details when `detail` is given (the estimate's hot path leaves them out).
struct Cut {
  double quantization = 0, slices = 1;
};

Cut cut_gemm(const GpuSpec& gpu, Precision p, double m, double n, double k, GemmTiling* detail) {
  // docs/model-reference.md section 4.1. The output is cut into tiles of 128 x 256 or
  // 256 x 128 (cuBLAS holds kernels of both orientations; the better one is taken).
  // Tiles that do not fill the SMs once split the K loop (split-K / stream-K, Osama et al.,
  // PPoPP 2023): s = min(floor(SMs / tiles), floor(K / 64)) slices per tile, each with its
  // own fixed cost over K / s (the rate rises with s, so the most that fit is best; 64 =
  // the K depth of one main-loop step); from one full wave on, whole tiles in waves.
  const double k_half = p == Precision::kFp8 ? gpu.gemm_fp8_k_half : gpu.gemm_bf16_k_half;
  const double a = std::max(1, gpu.gemm_tile_m), b = std::max(1, gpu.gemm_tile_n);
  const double sms = gpu.sms;
  Cut best{-1, 1};
  for (int turn = 0; turn < 2; ++turn) {
    const double tm = turn == 0 ? a : b, tn = turn == 0 ? b : a;
    const double tiles_m = std::ceil(m / tm), tiles_n = std::ceil(n / tn);
    const double tiles = tiles_m * tiles_n;
    const double q_tile = (m * n) / (tiles * tm * tn);
    double q_wave = 1.0, slices = 1.0;
    if (sms > 0) {
      if (tiles < sms) slices = std::max(1.0, std::min(std::floor(sms / tiles), std::floor(k / kSplitKStep)));
      const double units = tiles * slices;
      q_wave = units / (std::ceil(units / sms) * sms);
    }
    // Each tile slice's fixed cost (prologue, epilogue) against its main loop over
    // K / slices: K = K½ halves the rate. FP8's main loop runs twice as fast as 16-bit's,
    // so its K½ is larger.
    const double ks = k / slices;
    const double q_k = k_half > 0 ? ks / (ks + k_half) : 1.0;
    const double q = q_tile * q_wave * q_k;
    if (q > best.quantization) {
      best = Cut{q, slices};
      if (detail != nullptr) *detail = GemmTiling{q, slices, 0, tm, tn, tiles, q_tile, q_wave, q_k};
    }
    if (a == b) break;
  }
  return best;
}

// gemm_cost's formula; fills *detail when given.
double cost_gemm(const GpuSpec& gpu, Precision p, double m, double n, double k, GemmCost* detail) {
  const Cut cut = cut_gemm(gpu, p, m, n, k, detail != nullptr ? &detail->tiling : nullptr);
  const double efficiency = gemm_efficiency_max(gpu, p) * cut.quantization;
  const double flops = 2.0 * m * n * k;
  const double elem = p == Precision::kFp8 ? 1.0 : 2.0;
  // Split K: each slice writes its fp32 partial output and the reduction reads them back.
  const double partials = cut.slices > 1 ? 2.0 * 4.0 * m * n * cut.slices : 0.0;
  const double bytes = elem * (m * k + k * n) + 2.0 * m * n + partials;
  const double compute_s = flops / (efficiency * peak_flops(gpu, p));
  const double memory_s = memory_time_s(gpu, bytes);
  const double time_s = std::max(compute_s, memory_s) + bytes * gpu.gemm_s_per_byte;
  if (detail != nullptr) {
    detail->tiling.efficiency = efficiency;
    detail->flops = flops;
    detail->bytes = bytes;
    detail->compute_s = compute_s;
    detail->memory_s = memory_s;
    detail->time_s = time_s;
  }
  return time_s;
}

}  // namespace

GemmTiling gemm_tiling(const GpuSpec& gpu, Precision p, double m, double n, double k) {
  GemmTiling t;
  cut_gemm(gpu, p, m, n, k, &t);
  t.efficiency = gemm_efficiency_max(gpu, p) * t.quantization;
  return t;
}

double gemm_efficiency(const GpuSpec& gpu, Precision p, double m, double n, double k) {
  return gemm_tiling(gpu, p, m, n, k).efficiency;
}

double memory_time_s(const GpuSpec& gpu, double bytes) {
  return bytes / (gpu.hbm_efficiency * gpu.hbm_bandwidth_GBps * 1e9);
}

double overlap_interference(const GpuSpec& gpu) {
  const double s = std::max(0.0, gpu.overlap_slowdown);
  return s / (1.0 + s);
}

GemmCost gemm_cost(const GpuSpec& gpu, Precision p, double m, double n, double k) {
  GemmCost c;
  if (m > 0 && n > 0 && k > 0) cost_gemm(gpu, p, m, n, k, &c);
  return c;
}

double gemm_time_s(const GpuSpec& gpu, Precision p, double m, double n, double k) {
  if (m <= 0 || n <= 0 || k <= 0) return 0;
  return cost_gemm(gpu, p, m, n, k, nullptr);
}

double gemm_backward_s(const GpuSpec& gpu, Precision p, double m, double n, double k) {
  return gemm_time_s(gpu, p, m, k, n) + gemm_time_s(gpu, p, k, n, m);
}

namespace {

// Inverse of the standard normal CDF: Acklam's rational approximation (relative error
// below 1.15e-9 over (0, 1); no refinement step: the closed form calls it per estimate).
double inverse_normal_cdf(double p) {
  static constexpr double a[] = {-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
                                 1.383577518672690e+02, -3.066479806614716e+01, 2.506628277459239e+00};
  static constexpr double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                                 6.680131188771972e+01, -1.328068155288572e+01};
  static constexpr double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                                 -2.549732539343734e+00, 4.374664141464968e+00, 2.938163982698783e+00};
  static constexpr double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                                 3.754408661907416e+00};
  constexpr double lo = 0.02425, hi = 1 - lo;
  double x = 0;
  if (p < lo) {
    const double q = std::sqrt(-2 * std::log(p));
    x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  } else if (p <= hi) {
    const double q = p - 0.5, r = q * q;
    x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
  } else {
    const double q = std::sqrt(-2 * std::log(1 - p));
    x = -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  }
  return x;
}

}  // namespace

double expected_max_standard_normal(std::int64_t n) {
  if (n <= 1) return 0.0;
  // The last value per thread: an estimate asks for its job's n many times (every GPU time
  // is paced), a planner's search for the same n over thousands of layouts.
  thread_local std::int64_t last_n = 0;
  thread_local double last = 0.0;
  if (n == last_n) return last;
  const double nd = static_cast<double>(n);
  last = inverse_normal_cdf((nd - 0.375) / (nd + 0.25));
  last_n = n;
  return last;
}

double job_pace(const ClusterSpec& c) {
  if (!(c.gpu_speed_sigma > 0)) return 1.0;
  return 1.0 + c.gpu_speed_sigma * expected_max_standard_normal(c.world());
}

}  // namespace stepcast

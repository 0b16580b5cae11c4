// FLOPs (docs/cost-model-sources.md sections 1.3-1.5) and the roofline compute-time model with
// achieved efficiency (section 6; docs/model-reference.md "FLOPs" and "Compute time").
#pragma once

#include <cstdint>

#include "stepcast/models/specs.h"

namespace stepcast {

// Forward FLOPs of one token (multiply-add = 2), matmuls only.
struct TokenFlops {
  double dense_layer = 0;      // projections + dense FFN of one dense layer (2 x weights)
  double moe_layer = 0;        // projections + router + k routed + shared experts
  double attention_core = 0;   // Q.K^T and .V of one layer, full s x s square; with a
                               // sliding window the mean over the layers, a windowed
                               // layer's query counted at min(window, s) keys
  double logits = 0;           // 2 h V, once per token
  // Whole-model forward, full-square attention (the MFU convention of stepcast).
  double forward = 0;
  // Training = 3 x forward: the model FLOPs used for MFU (no recomputation).
  double training = 0;
};
TokenFlops token_flops(const ModelSpec& model, std::int64_t seq_len);

// Sliding-window attention (ModelSpec::sliding_window): the number of layers with a window
// (0 without one; all of them with window_attn_skip_freq 0; else those whose 1-based number
// is not a multiple of the frequency).
int windowed_layers(const ModelSpec& model);

// The mean number of keys a query attends in a causal layer of `seq` tokens whose window
// holds `window` keys (the query itself included): query i (1-based) sees min(i, window),
// so the mean is window - window (window - 1) / (2 seq) for seq >= window, (seq + 1) / 2
// below it (the causal triangle). The count Megatron-Bridge's GPT-OSS FLOP formula uses
// (w (w + 1) / 2 + (s - w) w nonzero scores per head).
double windowed_keys_per_query(double seq, double window);

// The attention convention behind `training`, printed with every MFU.
inline constexpr const char* kMfuConvention =
    "model FLOPs = 3 x forward matmul FLOPs, attention counted as the full s x s square "
    "(PaLM / Narayanan et al.); kernel time uses the causal half with FlashAttention";

// Dense peak of the tensor cores for the plan's precision, FLOP/s.
double peak_flops(const GpuSpec& gpu, Precision precision);

// Efficiency ceiling for large GEMMs: gemm_efficiency if set, else measured MAMF / peak
// (ml-engineering), else 0.75.
double gemm_efficiency_max(const GpuSpec& gpu, Precision precision);

// How an (m x k) . (k x n) GEMM is cut (docs/model-reference.md section 4.1): tiles of
// 128 x 256 or 256 x 128, whichever is faster (tile quantization); wave quantization over
// the SMs; when the tiles do not fill the SMs once, the K loop split into k_slices
// (split-K, fp32 partial outputs); and the short-K factor K' / (K' + K_half) of each
// slice's K' = k / k_slices.
struct GemmTiling {
  double quantization = 0;  // tile x wave x short-K factors, 0..1
  double k_slices = 1;      // slices of the K loop (1 = none)
  double efficiency = 0;    // gemm_efficiency_max x quantization
  // The chosen cut: tile sides (rows x columns of the output), the tile count, and the
  // three factors whose product is `quantization`.
  double tile_m = 0, tile_n = 0, tiles = 0;
  double q_tile = 1, q_wave = 1, q_k = 1;
};
GemmTiling gemm_tiling(const GpuSpec& gpu, Precision precision, double m, double n, double k);

// gemm_time_s's parts: the FLOPs and bytes (with split K's fp32 partials), the compute time
// at the tiling's efficiency, the memory time, and the time = max(compute, memory) + the
// calibrated per-byte term (GpuSpec::gemm_s_per_byte).
struct GemmCost {
  double flops = 0, bytes = 0;
  double compute_s = 0, memory_s = 0, time_s = 0;
  GemmTiling tiling;
};
GemmCost gemm_cost(const GpuSpec& gpu, Precision precision, double m, double n, double k);

// Achieved fraction of peak for an (m x k) . (k x n) GEMM: gemm_tiling's efficiency.
double gemm_efficiency(const GpuSpec& gpu, Precision precision, double m, double n, double k);

// Roofline time of a GEMM: max(FLOPs / (eta * peak), bytes / (hbm_eff * BW)), 2-byte
// operands (1-byte for fp8 inputs), a 2-byte output, and with split K the fp32 partial
// outputs written and read back (8 bytes x m x n x k_slices).
double gemm_time_s(const GpuSpec& gpu, Precision precision, double m, double n, double k);

// The backward of that GEMM: its data gradient (m x n).(n x k) and weight gradient
// (k x m).(m x n), each timed by gemm_time_s on its own shape (docs/model-reference.md 4.2).
double gemm_backward_s(const GpuSpec& gpu, Precision precision, double m, double n, double k);

// Time to stream `bytes` through HBM (memory-bound kernels).
double memory_time_s(const GpuSpec& gpu, double bytes);

// Compute-communication interference (docs/model-reference.md): while a collective of
// duration C overlaps compute, the compute runs (1 + s) times slower, s =
// gpu.overlap_slowdown, so the compute issued with it finishes C s / (1 + s) later (when
// it lasts at least C / (1 + s); the comm is then the longer). Returns s / (1 + s).
double overlap_interference(const GpuSpec& gpu);

// E[max of n independent standard normals] (0 for n <= 1), by Blom's plotting position
// Phi^-1((n - 0.375) / (n + 0.25)); within 0.6 % of the exact integral from n = 10 on
// (tests/models/compute_test.cc integrates it).
double expected_max_standard_normal(std::int64_t n);

// The pace of a synchronous job on `cluster` relative to one GPU alone: it waits for its
// slowest GPU, 1 + gpu_speed_sigma x E[max of world() normals] (docs/model-reference.md
// section 4.5). Every GPU compute time of layer_cost.h is multiplied by it.
double job_pace(const ClusterSpec& cluster);

}  // namespace stepcast

// Fused attention kernels by family and GPU architecture (models/data/attention.json):
// the published TFLOP/s of FlashAttention-2, cuDNN and FlashAttention-3 by sequence length,
// causal and non-causal forward and backward, turned into efficiencies against the
// reference GPU's peak (docs/model-reference.md "Attention kernels").
#pragma once

#include <map>
#include <string>
#include <vector>

#include "stepcast/models/specs.h"

namespace stepcast {

// One kernel family's published figures on the architecture's reference GPU, TFLOP/s at
// AttentionTable::seq.
struct AttentionKernelFigures {
  std::vector<double> fwd_causal_tflops, fwd_tflops, bwd_tflops;
  // The table gave no non-causal forward (a causal-only benchmark): fwd_tflops is the causal
  // series, which errs slow (every family with both runs the non-causal forward faster).
  bool fwd_from_causal = false;
  std::string source;  // where a family measured apart from the table's source comes from
};

struct AttentionTable {
  std::string name;                     // the architecture, e.g. "hopper" (the key)
  std::string reference_gpu;            // the GPU the figures were measured on (a GPU preset)
  double reference_bf16_dense_tflops = 0;
  // The reference GPU preset's power limit and short-sweep bf16 GEMM ceiling
  // (sweep_bf16_tflops), resolved when the catalog loads (attention_power_cap_factor);
  // 0 = unknown.
  double reference_tdp_W = 0, reference_mamf_bf16_tflops = 0;
  double head_dim = 0;
  std::vector<double> seq;              // tokens, ascending
  // A subset of attention_kernel_names(): "fa2", "cudnn", "fa3", "sdpa-flash", "sdpa-cudnn"
  // (FlashAttention-3 runs on Hopper only); a family the table lacks gets the prior.
  std::map<std::string, AttentionKernelFigures> kernels;
  std::string source;
};

// The kernel families plan.attention_kernel and a stack's attention_kernel may name: the
// published fa2, cudnn, fa3 and the families measured on an H200, sdpa-flash and sdpa-cudnn
// (each table holds only these, and every stack's family: AttentionKernels tests).
const std::vector<std::string>& attention_kernel_names();

// Efficiency (achieved / dense bf16 peak) of the core attention, forward and backward.
struct AttentionEfficiency {
  double fwd = 0, bwd = 0;
  bool from_table = false;  // false: the GPU's attention_efficiency (or the prior)
};

// The prior used where no table applies (FlashAttention-class kernels, unsourced [U]).
inline constexpr double kAttentionEfficiencyPrior = 0.6;

// The efficiency of `kernel` ("fa2", "cudnn", "fa3") on `gpu` for sequences of `seq` tokens:
//  - gpu.attention_efficiency > 0 (stated in the scenario, a GPU preset or a calibration)
//    wins, for both passes;
//  - else, with FlashAttention (`fused`) and a table for gpu.architecture holding `kernel`:
//    the table's TFLOP/s over its reference peak, interpolated linearly in log2(seq) and
//    clamped at the table's ends, causal or non-causal forward, and the backward, times
//    attention_power_cap_factor;
//  - else kAttentionEfficiencyPrior.
AttentionEfficiency attention_efficiency(const GpuSpec& gpu, const std::string& kernel, double seq,
                                         bool causal, bool fused);

// A GPU held below the power limit the table's reference GPU ran at (an H100 capped at
// 500 W, its figures measured at 700 W) sustains a lower tensor-core clock, and its fused
// attention kernels with it: the ratio its GEMM ceiling measured at the cap shows, both
// ceilings measured the same way (sweep_bf16_tflops: the short-sweep figure),
// sweep_bf16_tflops(gpu) / table.reference_mamf_bf16_tflops, at most 1. 1 when either power
// limit or either ceiling is unknown, or the GPU runs at the reference's limit or above
// (docs/model-reference.md "Attention kernels").
double attention_power_cap_factor(const GpuSpec& gpu, const AttentionTable& table);

// gpu.gemm_bf16_sweep_tflops where the preset states it, else gpu.mamf_bf16_tflops.
double sweep_bf16_tflops(const GpuSpec& gpu);

// The table of `architecture`, or nullptr.
const AttentionTable* attention_table(const std::string& architecture);

// Linear interpolation of `ys` at log2(x) over log2(xs) (xs ascending, same size as ys),
// clamped to the end values.
double interpolate_log2(const std::vector<double>& xs, const std::vector<double>& ys, double x);

}  // namespace stepcast

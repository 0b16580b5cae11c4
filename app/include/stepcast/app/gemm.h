// `gemm`: one GEMM priced by the model every command uses (docs/model-reference.md section
// 4.1; "One GEMM" in docs/gemm.md). The time, the achieved TFLOP/s, whether compute or
// memory bounds it, and how the efficiency comes about: the GPU's ceiling, the tile cut
// (orientation, tiles, waves), the K slices when the tiles do not fill the SMs, and the
// short-K factor; optionally the GEMM's backward (data and weight gradients) on their own
// shapes. Users hold it against their own cuBLAS timings.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "stepcast/app/scenario_input.h"
#include "stepcast/models/compute.h"
#include "stepcast/models/result.h"
#include "stepcast/models/specs.h"

namespace stepcast::app {

struct GemmRequest {
  // (M x K) . (K x N): M rows of the output (tokens), N columns (output features), K the
  // inner dimension. Each 1 to 2^30; all three 0 with `against` (the file's shapes only).
  std::int64_t m = 0, n = 0, k = 0;
  std::string gpu = "h100-sxm";               // a GPU preset, used when cluster_file is unset
  std::optional<ScenarioInput> cluster_file;  // a scenario whose cluster's GPU is used instead
  std::string precision = "bf16";             // bf16, fp16 or fp8 (fp8: e4m3 operands, 16-bit output)
  bool backward = false;                      // also the data gradient and the weight gradient
  bool sweep = false;                         // also the forward at M = 64, 128, ... (doubling) <= M
  // A `stepcast bench gemm --json` file (kind "stepcast-bench", bench "gemm"; read by
  // exec::read_bench): each measured shape priced by the model, model time over measured.
  std::string against;
};

// One measured GEMM of the `against` file beside the model's time for it.
struct GemmComparison {
  std::int64_t m = 0, n = 0, k = 0, batch = 1;
  double measured_s = 0, model_s = 0;
  double ratio = 0;     // model_s / measured_s (> 1: the model is slower)
  double k_slices = 1;  // the model's cut, for reading the misses
  double tiles = 0;
};
struct GemmAgainst {
  std::string file, device;          // the file's path and its `device` line
  std::vector<GemmComparison> rows;  // in the file's order
  double median_ratio = 0, min_ratio = 0, max_ratio = 0;
  int within_10pct = 0;  // rows with |ratio - 1| <= 0.10
};

// One GEMM of the report: the forward, or one of its backward halves.
struct GemmPass {
  std::string name;  // "forward", "data gradient", "weight gradient"
  std::int64_t m = 0, n = 0, k = 0;
  GemmCost cost;              // compute.h: FLOPs, bytes, compute and memory time, the cut
  double tflops = 0;          // FLOPs / time / 1e12
  bool memory_bound = false;  // memory time > compute time
};

struct GemmReport {
  GpuSpec gpu;
  std::string gpu_label;  // "h100-sxm" or "FILE (GPU NAME)"
  Precision precision = Precision::kBf16;
  double peak_tflops = 0;          // the dense peak of the precision
  double ceiling = 0;              // gemm_efficiency_max: the fraction of peak large GEMMs reach
  double k_half = 0;               // the precision's K½ (0: no short-K term)
  std::vector<GemmPass> passes;    // forward, then (request.backward) data and weight gradient
  double total_s = 0;              // the passes' sum
  std::vector<GemmPass> sweep;     // request.sweep: the forward at M = 64 doubling while < M, then M
  std::optional<GemmAgainst> against;  // request.against
  std::vector<std::string> notes;  // what the numbers leave out, one sentence each
};

// Errors (input), each naming the argument: "M: ...", "N: ...", "K: ..." (outside 1 to
// 2^30; "M N K: ..." when missing without --against), "--gpu: unknown GPU preset ... (did
// you mean ...?) (presets: ...)", "--precision: ...", the scenario's own errors for
// cluster_file, the bench file's for `against` ("--against: FILE: results[2].time_s: ..."),
// "--against: ... not a GEMM bench" (a collectives file), "--sweep/--backward: need M N K".
Result<GemmReport> run_gemm(const GemmRequest& request);

// The readable report: the question, one block per pass (time, rate, bound, efficiency
// factors, cut), the sweep's table, then the notes.
std::string gemm_text(const GemmReport& report);
// One JSON object (format 1; docs/gemm.md). Every number is finite.
std::string gemm_json(const GemmReport& report);

}  // namespace stepcast::app

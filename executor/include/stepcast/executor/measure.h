// Measurements: what `stepcast execute` writes (measured.json) and `stepcast bench`
// writes, and what `stepcast calibrate` reads; the scale-down of a model; the fit.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stepcast/executor/backend.h"
#include "stepcast/executor/runner.h"
#include "stepcast/models/calibration.h"
#include "stepcast/models/result.h"
#include "stepcast/models/specs.h"
#include "stepcast/models/timeline.h"

namespace stepcast::exec {

// Shrinks a model by `factor` keeping its structure: hidden size, heads, KV heads, FFN
// and expert widths and vocabulary divided by `factor` (head_dim kept; heads at least
// `min_heads`, KV heads dividing heads), layers divided by `factor` but at least
// `min_layers` (the plan's pp x virtual stages). Throws std::invalid_argument when the
// factor does not leave a model (e.g. fewer heads than tensor-parallel ranks).
ModelSpec scale_down(const ModelSpec& model, int factor, int min_layers, int min_heads);

// One rank's result as a compact string (to gather it on rank 0), and back.
std::string rank_result_wire(const RankResult& r);
RankResult rank_result_from_wire(const std::string& s);

struct Measurement {
  std::string scenario;        // path of the scenario file (absolute)
  int scale_down = 1;
  std::string backend, device, communicator, host;
  int ranks = 0, warmup = 0, steps = 0;
  std::vector<double> step_time_s;        // per measured step, max over ranks
  double predicted_step_time_s = 0;       // the simulator's, before calibration
  std::int64_t verified_elements = 0, wrong_elements = 0;
  std::vector<std::string> errors;
  std::vector<double> peak_memory_bytes, predicted_peak_bytes;   // per rank
  Timeline timeline;                      // merged, measured steps
  double median_step_s() const;
};
std::string measurement_json(const Measurement& m);
Result<Measurement> parse_measurement(const std::string& text, const std::string& path);

// Microbenchmark points (nccl-tests definitions: algbw = bytes / time, busbw = algbw x
// bus_factor(kind, n)).
struct GemmPoint {
  GemmShape shape;
  double time_s = 0;
};
struct CollectivePoint {
  CollKind kind = CollKind::kAllReduce;
  double bytes = 0;
  std::size_t count = 0;
  int ranks = 0;
  bool inter_node = false;
  double time_s = 0;
  std::int64_t wrong = 0;
};
std::vector<GemmPoint> bench_gemm(Device& device, const std::vector<GemmShape>& shapes, double min_time_s);
std::vector<CollectivePoint> bench_collectives(Device& device, Communicator& comm, const std::vector<CollKind>& kinds,
                                               double min_bytes, double max_bytes, int iterations, int ranks_per_node);

struct BenchFile {
  std::string kind;   // "gemm" | "collectives"
  std::string device, communicator;
  int ranks = 1;
  std::vector<GemmPoint> gemm;
  std::vector<CollectivePoint> collectives;
};
std::string bench_json(const BenchFile& b);
Result<BenchFile> parse_bench(const std::string& text, const std::string& path);

// Fit inputs: compute ops (or GEMM benchmark points) and collectives with their measured
// durations. A compute op's time is the sum of its parts (op_work.h).
struct ComputeSample {
  double gemm_flops = 0;     // executed GEMM FLOPs
  double quantization = 1;   // tile/wave efficiency of the GEMM shape (compute.h), relative to the ceiling
  double operand_bytes = 0;  // GEMM operand and result bytes (the cost model's formula)
  double core_flops = 0;     // attention core FLOPs
  double bytes = 0;          // memory-bound bytes
  double measured_s = 0;
};
struct CommSample {
  CollKind kind = CollKind::kAllReduce;
  bool inter_node = false;
  int ranks = 2;
  double bytes = 0;          // nccl-tests size
  double measured_s = 0;
};
std::vector<ComputeSample> compute_samples(const GpuSpec& gpu, Precision p, const std::vector<GemmPoint>& points);
// Samples from a measured run: every compute op (duration end - post) and collective
// (end - begin, begin = the last member's arrival) of every rank.
void run_samples(const Program& program, const ExecContext& ctx, const Timeline& t,
                 std::vector<ComputeSample>& compute, std::vector<CommSample>& comm);

// Non-negative least squares (Eigen QR) on absolute errors, so fitted totals match measured
// totals. Compute, one joint fit over all samples: time = GEMM flops / (eta q peak) + c x
// GEMM operand bytes + core flops / (eta_att peak) + bytes / (eta_mem BW). Collectives per
// (kind, scope): alpha + beta x bus bytes. Parts without samples stay 0 (prior kept).
Calibration fit_calibration(const GpuSpec& gpu, Precision p, const std::vector<ComputeSample>& compute,
                            const std::vector<CommSample>& comm);

}  // namespace stepcast::exec

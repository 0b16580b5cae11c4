// The calibration fit (`stepcast calibrate`): samples from measured runs and GEMM
// benchmarks, and the least-squares fit of the cost model's efficiencies and collective
// alpha-beta terms (docs/executor.md, "The fit").
#pragma once

#include <vector>

#include "stepcast/executor/bench.h"
#include "stepcast/executor/op_work.h"
#include "stepcast/models/calibration.h"
#include "stepcast/models/program.h"
#include "stepcast/models/specs.h"
#include "stepcast/models/timeline.h"

namespace stepcast::exec {

// Fit inputs: compute ops (or GEMM benchmark points) and collectives with their measured
// durations. A compute op's time is the sum of its parts (op_work.h).
struct ComputeSample {
  double gemm_flops = 0;     // executed GEMM FLOPs
  double quantization = 1;   // tile, wave and short-K factors of the GEMM shape (compute.h gemm_tiling)
  double operand_bytes = 0;  // GEMM bytes as gemm_cost counts them (operands, output, split K's partials)
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

// A host op of an offloaded run (docs/executor.md "Optimizer offload"): a copy over the
// host link (either direction), or the host optimizer step with its host memory bytes.
struct HostSample {
  bool optimizer = false;
  double bytes = 0;
  double measured_s = 0;
};

// One sample per GEMM benchmark point, its shape evaluated for `gpu` at precision `p`.
std::vector<ComputeSample> compute_samples(const GpuSpec& gpu, Precision p, const std::vector<GemmPoint>& points);
// One sample per collective benchmark point.
std::vector<CommSample> comm_samples(const std::vector<CollectivePoint>& points);
// Samples from a measured run: every compute op (duration end - post) and collective
// (end - begin, begin = the last member's arrival) of every rank, appended.
// REQUIRES: every span's stage and op exist in `program` (throws std::out_of_range).
// With `host`, the host copies and host optimizer steps too (end - begin).
void run_samples(const Program& program, const ExecContext& ctx, const Timeline& t, std::vector<ComputeSample>& compute,
                 std::vector<CommSample>& comm, std::vector<HostSample>* host = nullptr);

// The host link's and the host optimizer step's rates: total bytes / total time of each
// kind (a rate through the origin fitted to match the measured total), and how well each
// explains its samples. Kinds without samples stay 0 (prior kept).
HostCalibration fit_host(const std::vector<HostSample>& samples);

// Non-negative least squares (Eigen QR) on absolute errors, so fitted totals match measured
// totals. Compute, one joint fit over all samples: time = GEMM flops / (eta q peak) + c x
// GEMM operand bytes + core flops / (eta_att peak) + bytes / (eta_mem BW). Collectives per
// (kind, scope): alpha + beta x bus bytes. Parts without samples stay 0 (prior kept).
// Noise-free samples of that model (enough distinct ones per part) are recovered exactly,
// to rounding (tests/executor/calibration_fit_test.cc).
Calibration fit_calibration(const GpuSpec& gpu, Precision p, const std::vector<ComputeSample>& compute,
                            const std::vector<CommSample>& comm);

}  // namespace stepcast::exec

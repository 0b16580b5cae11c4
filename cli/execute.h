// `stepcast execute`, `stepcast bench gemm|collectives`, `stepcast calibrate`: the
// executor's commands (docs/executor.md).
#pragma once

#include <string>
#include <vector>

#include "stepcast/models/result.h"
#include "stepcast/analysis/compare.h"

namespace stepcast::cli {

struct ExecuteArgs {
  std::string scenario;
  std::string backend = "cpu_mpi";   // cpu_mpi | cuda_nccl
  int steps = 3;
  int warmup = 1;
  int scale_down = 1;
  bool no_verify = false;
  std::string out = "stepcast-execute";
  bool json = false;
};
int cmd_execute(const ExecuteArgs& args);

struct BenchArgs {
  std::string what;                  // gemm | collectives
  std::string backend = "cpu_mpi";
  std::string gpu;                   // GPU preset for "% of peak" (default by backend)
  double min_bytes = 1024, max_bytes = 4 * 1024 * 1024;
  int iterations = 5;
  int max_size = 0;                  // largest GEMM dimension (default by backend)
  int gpus_per_node = 0;             // ranks per node (default: the launcher's local size)
  std::string json_out;
};
int cmd_bench(const BenchArgs& args);

struct CalibrateArgs {
  std::vector<std::string> measured;   // stepcast execute outputs (measured.json) to fit on
  std::vector<std::string> bench;      // stepcast bench --json files to fit on
  std::vector<std::string> holdout;    // measured.json files only predicted (not fitted)
  std::string out = "calibration.json";
  bool json = false;
};
int cmd_calibrate(const CalibrateArgs& args);

// True when `text` is a measurement written by `stepcast execute` (measured.json).
bool looks_like_measurement(const std::string& text);
// `compare` of a measured run: its side, labelled "<scenario name> (measured)". Errors
// name the file (exit 2).
Result<analysis::CompareSide> measured_compare_side(const std::string& path);

}  // namespace stepcast::cli

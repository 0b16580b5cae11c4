// `bench gemm|collectives`: microbenchmarks on an executor backend (docs/executor.md).
// Every rank of the launch calls run_bench; rank 0 reports.
#pragma once

#include <cstdint>
#include <string>

#include "stepcast/executor/bench_file.h"
#include "stepcast/models/result.h"
#include "stepcast/models/specs.h"

namespace stepcast::app {

struct BenchRequest {
  std::string what;                  // gemm | collectives
  std::string backend = "cpu_mpi";
  std::string gpu;                   // GPU preset for "% of peak" ("": h100-sxm on cuda_nccl, else cpu-core)
  double min_bytes = 1024, max_bytes = 4 * 1024 * 1024;
  int iterations = 5;
  int max_size = 0;                  // largest GEMM dimension (0: 16384 on cuda_nccl, else 1024)
  int gpus_per_node = 0;             // ranks per node (0: the launcher's local size)
  // Memory the sizes may need, bytes; 0: the machine's available memory (MemAvailable of
  // /proc/meminfo). Tests set it to make the refusal deterministic.
  double memory_limit_bytes = 0;
};

struct BenchReport {
  bool root = false;                 // rank 0 reports
  exec::BenchFile file;
  std::string gpu_name;
  GpuSpec gpu;
  std::string compute_dtype, comm_dtype;
  int ranks_per_node = 1;
  std::int64_t wrong = 0;            // wrong elements over every collective point (exit 1 when > 0)
};

// Errors (input errors): an unknown benchmark, --iters < 1, bad --min-bytes/--max-bytes,
// an unknown --gpu preset, sizes that cannot fit (--max-size above 65536 or needing more
// than the available memory on the cpu; --max-bytes whose buffers and check copies,
// times the ranks on this node, exceed the available memory; each message names the
// option, what it needs and what is available), and open_machine's.
Result<BenchReport> run_bench(const BenchRequest& request);

// The table (rank 0). REQUIRES: root.
std::string bench_text(const BenchReport& report);
// The bench file (exec::bench_json).
std::string bench_json(const BenchReport& report);

}  // namespace stepcast::app

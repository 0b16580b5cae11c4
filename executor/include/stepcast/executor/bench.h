// Microbenchmarks on a backend (`stepcast bench gemm|collectives`): GEMM times per shape,
// collective times per size with every result checked (nccl-tests definitions: algbw =
// bytes / time, busbw = algbw x bus_factor(kind, n); docs/executor.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "stepcast/executor/backend.h"
#include "stepcast/models/collectives.h"

namespace stepcast::exec {

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

// The GEMM sweep up to `max_size`: squares 64, 128, ... <= max_size, then (max_size/4) x n x
// (max_size/4) for n = 64, 256, ... <= 4 max_size (m and k at least 64).
// REQUIRES: 64 <= max_size <= kMaxGemmSize.
std::vector<GemmShape> gemm_sweep(int max_size);
inline constexpr int kMaxGemmSize = 65536;
// Bytes the sweep of `max_size` holds at once at most: its largest shape's A, B and C in
// elements of `element_bytes` (4 on the cpu, 2 for bf16 operands on cuda).
double gemm_sweep_bytes(int max_size, double element_bytes);

// The collectives `bench collectives` measures, in order.
std::vector<CollKind> bench_collective_kinds();
// Memory one rank holds at the largest size `max_bytes` of a collective sweep: send and
// receive buffers (2 x max_bytes of `comm` elements; host memory on the cpu) plus the
// check's three float copies on the host (3 x 4 bytes per element).
double collective_sweep_host_bytes(double max_bytes, Dtype comm);

// Times each shape (one warm-up, then doubling iteration counts until `min_time_s`).
std::vector<GemmPoint> bench_gemm(Device& device, const std::vector<GemmShape>& shapes, double min_time_s);
// Every kind over the world, sizes min_bytes, 2 min_bytes, ... <= max_bytes; each point
// the maximum over ranks of the mean of `iterations` timed runs after a warm-up, its result
// checked (`wrong` counts wrong elements over all ranks). `ranks_per_node` decides whether
// points are inter-node. All ranks call it together.
std::vector<CollectivePoint> bench_collectives(Device& device, Communicator& comm, const std::vector<CollKind>& kinds,
                                               double min_bytes, double max_bytes, int iterations, int ranks_per_node);

}  // namespace stepcast::exec

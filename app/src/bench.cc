#include "stepcast/app/bench.h"

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "stepcast/executor/bench.h"
#include "stepcast/executor/machine.h"
#include "stepcast/models/collectives.h"
#include "stepcast/models/compute.h"
#include "stepcast/models/presets.h"

namespace stepcast::app {

namespace {

// MemAvailable of /proc/meminfo in bytes; 0 when unknown.
double available_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("MemAvailable:", 0) == 0) {
      std::istringstream ss(line.substr(13));
      double kib = 0;
      ss >> kib;
      return kib * 1024;
    }
  }
  return 0;
}

std::string gb(double bytes) { return fmt::format("{:.3g} GB", bytes / 1e9); }

// Ranks sharing this node's memory, from the launcher (before MPI is up).
int local_ranks() {
  for (const char* v : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE"}) {
    if (const char* s = std::getenv(v)) {
      const int n = std::atoi(s);
      if (n > 0) return n;
    }
  }
  return 1;
}

}  // namespace

Result<BenchReport> run_bench(const BenchRequest& a) {
  if (a.what != "gemm" && a.what != "collectives") {
    return Error{fmt::format("bench: \"{}\" is not a benchmark (gemm, collectives)", a.what)};
  }
  if (a.iterations < 1) return Error{"--iters: must be at least 1"};
  if (!(a.min_bytes > 0) || a.max_bytes < a.min_bytes) {
    return Error{"--min-bytes/--max-bytes: need 0 < min-bytes <= max-bytes"};
  }
  BenchReport rep;
  rep.gpu_name = !a.gpu.empty() ? a.gpu : (a.backend == "cuda_nccl" ? "h100-sxm" : "cpu-core");
  const auto& gpus = builtin_presets().gpus;
  auto it = gpus.find(rep.gpu_name);
  if (it == gpus.end()) return Error{fmt::format("--gpu: unknown GPU preset \"{}\"", rep.gpu_name)};
  rep.gpu = it->second;
  // Refuse sizes that cannot fit before allocating anything (a sweep that allocates
  // until the kernel kills it helps nobody).
  const bool cpu = a.backend != "cuda_nccl";
  const double avail = a.memory_limit_bytes > 0 ? a.memory_limit_bytes : available_memory_bytes();
  const int top = a.max_size > 0 ? a.max_size : (cpu ? 1024 : 16384);
  if (a.what == "gemm") {
    if (top < 64 || top > exec::kMaxGemmSize) {
      return Error{fmt::format("--max-size: {} is out of range (64 to {})", a.max_size, exec::kMaxGemmSize)};
    }
    const double need = exec::gemm_sweep_bytes(top, 4.0);
    if (cpu && avail > 0 && need > avail) {
      return Error{fmt::format("--max-size: {} needs {} for its largest GEMM's f32 operands, more than the {} of "
                               "memory available",
                               top, gb(need), gb(avail))};
    }
  } else {
    const exec::Dtype dt = cpu ? exec::Dtype::kF32 : exec::Dtype::kBf16;
    const int on_node = local_ranks();
    const double need = exec::collective_sweep_host_bytes(a.max_bytes, dt) * on_node;
    if (avail > 0 && need > avail) {
      return Error{fmt::format("--max-bytes: {:g} needs about {} of host memory ({} rank{} on this node, each with "
                               "send and receive buffers and the check's copies), more than the {} available",
                               a.max_bytes, gb(need), on_node, on_node == 1 ? "" : "s", gb(avail))};
    }
  }
  auto machine = exec::open_machine(a.backend);
  if (!machine.ok()) return machine.error();
  exec::Device& device = *machine.value().device;
  exec::Communicator& comm = machine.value().data();
  rep.file.kind = a.what;
  rep.file.device = device.describe();
  rep.file.communicator = comm.describe();
  rep.file.ranks = comm.world();
  rep.root = comm.rank() == 0;
  rep.compute_dtype = to_string(device.compute_dtype());
  rep.comm_dtype = to_string(device.comm_dtype());
  try {
    if (a.what == "gemm") {
      rep.file.gemm = exec::bench_gemm(device, exec::gemm_sweep(top), 0.05);
    } else {
      int rpn = a.gpus_per_node;
      if (rpn <= 0) {
        const char* l = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
        rpn = l ? std::max(1, std::atoi(l)) : comm.world();
      }
      rep.ranks_per_node = rpn;
      rep.file.collectives = exec::bench_collectives(device, comm, exec::bench_collective_kinds(), a.min_bytes,
                                                     a.max_bytes, a.iterations, rpn);
    }
  } catch (const std::exception& e) {  // the backend's failures (MPI, CUDA), e.g. a count beyond MPI's int
    return Error{fmt::format("bench {}: {}", a.what, e.what())};
  }
  for (const auto& p : rep.file.collectives) rep.wrong += p.wrong;
  return rep;
}

std::string bench_json(const BenchReport& r) { return exec::bench_json(r.file); }

std::string bench_text(const BenchReport& r) {
  const exec::BenchFile& bf = r.file;
  std::string out;
  if (bf.kind == "gemm") {
    const double peak = peak_flops(r.gpu, Precision::kBf16);
    out += fmt::format("# stepcast bench gemm: {} (rank 0 of {}); % of {} peak {:.1f} TFLOP/s\n", bf.device, bf.ranks,
                       r.gpu_name, peak / 1e12);
    out += fmt::format("{:>8}{:>8}{:>8}{:>7}{:>12}{:>11}{:>9}\n", "m", "n", "k", "type", "time(us)", "TFLOP/s", "%peak");
    for (const exec::GemmPoint& p : bf.gemm) {
      const double tf = p.shape.flops() / p.time_s;
      out += fmt::format("{:>8}{:>8}{:>8}{:>7}{:>12.2f}{:>11.4f}{:>8.1f}%\n", p.shape.m, p.shape.n, p.shape.k,
                         r.compute_dtype, p.time_s * 1e6, tf / 1e12, 100.0 * tf / peak);
    }
    return out;
  }
  out += fmt::format("# stepcast bench collectives: {} ranks ({} per node), {}; {}\n", bf.ranks, r.ranks_per_node,
                     bf.communicator, bf.device);
  out += "# algbw = size / time; busbw = algbw x bus factor (nccl-tests: 2(n-1)/n all-reduce, (n-1)/n "
         "all-gather, reduce-scatter, all-to-all, 1 broadcast)\n";
  out += fmt::format("{:>15}{:>12}{:>12}{:>6}{:>12}{:>10}{:>10}{:>8}\n", "collective", "size(B)", "count", "type",
                     "time(us)", "algbw", "busbw", "#wrong");
  for (const exec::CollectivePoint& p : bf.collectives) {
    const double algbw = p.bytes / p.time_s / 1e9;
    out += fmt::format("{:>15}{:>12.0f}{:>12}{:>6}{:>12.1f}{:>10.3f}{:>10.3f}{:>8}\n", to_string(p.kind), p.bytes, p.count,
                       r.comm_dtype, p.time_s * 1e6, algbw, algbw * bus_factor(p.kind, p.ranks), p.wrong);
  }
  return out;
}

}  // namespace stepcast::app

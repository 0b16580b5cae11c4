#include "stepcast/executor/bench.h"

#include <algorithm>

#include "stepcast/executor/runner.h"

namespace stepcast::exec {

std::vector<GemmShape> gemm_sweep(int top) {
  std::vector<GemmShape> shapes;
  for (std::int64_t s = 64; s <= top; s *= 2) shapes.push_back({s, s, s, 1});
  const std::int64_t mk = std::max(64, top / 4);
  for (std::int64_t n = 64; n <= std::int64_t{top} * 4; n *= 4) shapes.push_back({mk, n, mk, 1});
  return shapes;
}

double gemm_sweep_bytes(int top, double element_bytes) {
  double most = 0;
  for (const GemmShape& g : gemm_sweep(top)) {
    const double m = static_cast<double>(g.m), n = static_cast<double>(g.n), k = static_cast<double>(g.k);
    most = std::max(most, (m * k + k * n + m * n) * element_bytes);
  }
  return most;
}

std::vector<CollKind> bench_collective_kinds() {
  return {CollKind::kAllReduce, CollKind::kAllGather, CollKind::kReduceScatter, CollKind::kAllToAll,
          CollKind::kBroadcast};
}

double collective_sweep_host_bytes(double max_bytes, Dtype comm) {
  const double elements = max_bytes / static_cast<double>(dtype_bytes(comm));
  const double buffers = comm == Dtype::kF32 ? 2 * max_bytes : 0;  // f32 buffers live in host memory (cpu)
  return buffers + 3 * 4 * elements;
}

std::vector<GemmPoint> bench_gemm(Device& dev, const std::vector<GemmShape>& shapes, double min_time_s) {
  std::vector<GemmPoint> out;
  for (const GemmShape& g : shapes) {
    dev.gemm(Stream::kCompute, g);  // warm-up (allocates operands)
    dev.synchronize();
    int iters = 1;
    double t = 0;
    for (;;) {
      const EventPtr a = dev.record(Stream::kCompute);
      for (int i = 0; i < iters; ++i) dev.gemm(Stream::kCompute, g);
      const EventPtr b = dev.record(Stream::kCompute);
      dev.synchronize();
      t = b->time_s() - a->time_s();
      if (t >= min_time_s || iters >= (1 << 20)) break;
      iters *= 2;
    }
    out.push_back(GemmPoint{g, t / iters});
  }
  return out;
}

std::vector<CollectivePoint> bench_collectives(Device& dev, Communicator& comm, const std::vector<CollKind>& kinds,
                                               double min_bytes, double max_bytes, int iterations, int ranks_per_node) {
  std::vector<CollectivePoint> out;
  const CommGroup world = comm.create_group(0);
  const int n = world.size();
  const std::size_t esize = dtype_bytes(dev.comm_dtype());
  for (CollKind kind : kinds) {
    for (double bytes = min_bytes; bytes <= max_bytes * 1.0000001; bytes *= 2) {
      const std::size_t total = std::max<std::size_t>(static_cast<std::size_t>(n), static_cast<std::size_t>(bytes / static_cast<double>(esize)));
      const std::size_t chunk = total / static_cast<std::size_t>(n);
      std::size_t send_n = total, recv_n = total;
      if (kind == CollKind::kAllGather) send_n = chunk, recv_n = chunk * static_cast<std::size_t>(n);
      if (kind == CollKind::kReduceScatter) send_n = chunk * static_cast<std::size_t>(n), recv_n = chunk;
      if (kind == CollKind::kAllToAll) send_n = recv_n = chunk * static_cast<std::size_t>(n);
      Buffer send = dev.alloc(send_n), recv = dev.alloc(recv_n);
      std::vector<float> host(send_n);
      for (std::size_t i = 0; i < send_n; ++i) host[i] = pattern_value(comm.rank(), 1, i);
      dev.upload(send, host);
      comm.collective(dev, Stream::kDp, kind, world, send, recv)->wait();  // warm-up
      dev.synchronize();
      comm.barrier();
      const double t0 = dev.now_s();
      EventPtr last;
      for (int i = 0; i < iterations; ++i) {
        last = comm.collective(dev, Stream::kDp, kind, world, send, recv);
        last->wait();
      }
      dev.synchronize();
      const double dt = comm.max_all(dev.now_s() - t0) / iterations;
      // Verify the last result (same seeded inputs every iteration).
      std::vector<float> got(recv_n), exp(recv_n, 0.0f);
      dev.download(recv, got);
      const std::size_t me = static_cast<std::size_t>(world.index), nn = static_cast<std::size_t>(n);
      for (std::size_t k = 0; k < recv_n; ++k) {
        switch (kind) {
          case CollKind::kAllGather: exp[k] = pattern_value(world.members[k / chunk], 1, k % chunk); break;
          case CollKind::kReduceScatter:
            for (std::size_t j = 0; j < nn; ++j) exp[k] += pattern_value(world.members[j], 1, me * chunk + k);
            break;
          case CollKind::kAllToAll: exp[k] = pattern_value(world.members[k / chunk], 1, me * chunk + k % chunk); break;
          case CollKind::kBroadcast: exp[k] = pattern_value(world.members[0], 1, k); break;
          default:
            for (std::size_t j = 0; j < nn; ++j) exp[k] += pattern_value(world.members[j], 1, k);
        }
      }
      std::int64_t wrong = 0;
      for (std::size_t k = 0; k < recv_n; ++k) wrong += got[k] != exp[k];
      dev.release(send);
      dev.release(recv);
      CollectivePoint p;
      p.kind = kind;
      p.bytes = static_cast<double>(std::max(send_n, recv_n) * esize);
      p.count = std::max(send_n, recv_n);
      p.ranks = n;
      p.inter_node = n > ranks_per_node;
      p.time_s = dt;
      p.wrong = static_cast<std::int64_t>(comm.max_all(static_cast<double>(wrong)));
      out.push_back(p);
    }
  }
  return out;
}

}  // namespace stepcast::exec

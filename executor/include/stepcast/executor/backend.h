// What the executor needs from a machine: a Device that runs compute on streams and a
// Communicator that moves real buffers between ranks. Backends: cpu (Eigen GEMMs, one
// host thread; cpu_device.h) with an in-memory fake communicator (fake_comm.h, unit
// tests) or MPI (mpi_comm.h, `mpirun -np N`), and cuda_nccl (cuBLASLt + NCCL;
// cuda_backend.h, optional target). The runner (runner.h) drives both through these
// interfaces only, so every backend executes the same Program the same way.
//
// Stream model (CUDA's): work enqueued on a stream runs in enqueue order; `record(s)`
// returns an Event that completes when everything enqueued on `s` so far has finished;
// `wait(s, e)` makes later work on `s` wait for `e`. A synchronous backend (cpu) runs
// compute at enqueue time and may block the host in wait(); the semantics are the same.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "stepcast/models/collectives.h"
#include "stepcast/models/program.h"

namespace stepcast::exec {

enum class Dtype : std::uint8_t { kF32, kBf16, kFp8 };
const char* to_string(Dtype t);
std::size_t dtype_bytes(Dtype t);

// A point in a stream's work. time_s() is valid once done(): seconds on the backend's
// clock (Device::now_s()'s base), when the work before it finished.
class Event {
 public:
  virtual ~Event() = default;
  virtual bool done() = 0;        // non-blocking
  virtual void wait() = 0;        // blocks the host until done
  virtual double time_s() = 0;    // waits if needed
};
using EventPtr = std::shared_ptr<Event>;

// Device memory holding `count` elements of `dtype`. Communication payloads are f32 on
// the cpu backend and bf16 on cuda; the runner fills and checks them through
// Device::upload/download as floats (small integers: exact in both).
struct Buffer {
  void* data = nullptr;
  std::size_t count = 0;
  Dtype dtype = Dtype::kF32;
  std::size_t bytes() const { return count * dtype_bytes(dtype); }
};

// (m x k) . (k x n), `batch` independent products.
struct GemmShape {
  std::int64_t m = 1, n = 1, k = 1, batch = 1;
  double flops() const { return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) * static_cast<double>(batch); }
};

// Core attention of `batch` heads: scores = Q (sq x d) . K^T (d x sk), softmax over sk
// (elementwise, memory-bound), out = P (sq x sk) . V (sk x d).
struct AttentionShape {
  std::int64_t batch = 1, sq = 1, sk = 1, d = 1;
  double flops() const { return 4.0 * static_cast<double>(batch) * static_cast<double>(sq) * static_cast<double>(sk) * static_cast<double>(d); }
};

class Device {
 public:
  virtual ~Device() = default;
  // One line for reports and calibration fingerprints ("NVIDIA H200 (CUDA 13.0, ...)").
  virtual std::string describe() const = 0;
  virtual Dtype compute_dtype() const = 0;     // what gemm() multiplies
  virtual Dtype comm_dtype() const = 0;        // what alloc() of communication buffers holds
  virtual double now_s() = 0;                  // host clock, the base of Event::time_s
  virtual EventPtr record(Stream s) = 0;
  virtual void wait(Stream s, const EventPtr& e) = 0;
  virtual void gemm(Stream s, const GemmShape& g) = 0;
  virtual void attention(Stream s, const AttentionShape& a) = 0;
  // Memory-bound work reading and writing `bytes` in total.
  virtual void elementwise(Stream s, double bytes) = 0;
  // A copy of `bytes` between device memory and (pinned) host memory: to the host when
  // `to_host`, else to the device (offload transfers).
  virtual void host_copy(Stream s, double bytes, bool to_host) = 0;
  // The host's optimizer step over `elements` parameters (Adam, else SGD with momentum;
  // host_optimizer.h), in stream order on `s`: it starts when the work enqueued on `s`
  // before it has finished, and later work on `s` waits for it (optimizer offload).
  virtual void host_optimizer(Stream s, double elements, bool adam) = 0;
  virtual Buffer alloc(std::size_t count) = 0; // communication buffer of comm_dtype()
  virtual void release(Buffer& b) = 0;
  // Memory the plan's alloc/free ops stand for (activations): really allocated on
  // devices that measure memory, so the measured peak can be compared with the model.
  virtual void* alloc_bytes(double bytes) = 0;
  virtual void free_bytes(void* p) = 0;
  virtual void upload(const Buffer& b, std::span<const float> host) = 0;
  virtual void download(const Buffer& b, std::span<float> host) = 0;
  virtual void synchronize() = 0;
  // Peak device memory in use since the last reset, bytes (0 when the backend cannot tell).
  virtual double peak_memory_bytes() = 0;
  virtual void reset_peak_memory() = 0;
};

// A group of ranks, created collectively (every rank of the world calls create_group
// with the same arguments in the same order): `members` are world ranks, ascending.
struct CommGroup {
  int id = -1;                  // index for the communicator's own tables
  std::vector<int> members;
  int index = -1;               // this rank's position in members (-1: not a member)
  int size() const { return static_cast<int>(members.size()); }
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world() const = 0;
  virtual std::string describe() const = 0;   // "Open MPI 4.1.4" / "NCCL 2.28.9"
  // Collective over the world: the group of ranks with the same `color`, ordered by rank
  // (MPI_Comm_split(color, key = rank)). Every rank calls it, with its own color.
  virtual CommGroup create_group(int color) = 0;
  // A collective on stream `s` of `device`. Buffers (element counts, nccl-tests sizes):
  //   all-reduce      send.count == recv.count
  //   all-gather      recv.count == n * send.count
  //   reduce-scatter  send.count == n * recv.count
  //   all-to-all      send.count == recv.count, n blocks
  //   broadcast       send.count == recv.count, root = members[0]
  // Returns an Event that completes with the collective.
  virtual EventPtr collective(Device& device, Stream s, CollKind kind, const CommGroup& g,
                              const Buffer& send, const Buffer& recv) = 0;
  virtual EventPtr send(Device& device, Stream s, int peer, std::uint32_t tag, const Buffer& b) = 0;
  virtual EventPtr recv(Device& device, Stream s, int peer, std::uint32_t tag, const Buffer& b) = 0;
  // Grouped calls (ncclGroupStart/End): operations between begin and end are launched
  // together, so a send and a recv with the same peer cannot deadlock each other.
  virtual void group_begin() {}
  virtual void group_end() {}
  // Host-side control plane (not timed): barrier, and gathering strings to rank 0 (the
  // measured timelines). gather returns all ranks' strings on rank 0, {} elsewhere.
  virtual void barrier() = 0;
  virtual std::vector<std::string> gather(const std::string& mine) = 0;
  // Maximum over ranks of `x`, on every rank.
  virtual double max_all(double x) = 0;
};

}  // namespace stepcast::exec

// CudaDevice and CudaEvent (private to executor/cuda): the Device of make_cuda_device(),
// with the extra entry points the NCCL communicator needs (streams, deferred events).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "cuda_backend.h"
#include "cuda_check.h"
#include "stepcast/executor/backend.h"
#include "stepcast/executor/host_optimizer.h"

namespace stepcast::exec::cuda_detail {

// A completed event with a known host time: Event::time_s() of later events is measured
// from it (cudaEventElapsedTime).
struct Anchor {
  cudaEvent_t event = nullptr;
  double host_s = 0;
  Anchor() = default;
  Anchor(const Anchor&) = delete;
  Anchor& operator=(const Anchor&) = delete;
  ~Anchor();
};

class CudaEvent final : public Event {
 public:
  explicit CudaEvent(ErrorContextPtr ctx);  // created, not yet recorded
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;
  ~CudaEvent() override;

  // REQUIRES: not recorded yet. `anchor` completed before this call.
  void record(cudaStream_t s, std::shared_ptr<const Anchor> anchor);
  bool recorded() const { return anchor_ != nullptr; }
  cudaEvent_t raw() const { return event_; }

  bool done() override;
  void wait() override;
  double time_s() override;

 private:
  void require_recorded(const char* what) const;

  ErrorContextPtr ctx_;
  cudaEvent_t event_ = nullptr;
  std::shared_ptr<const Anchor> anchor_;
  bool have_time_ = false;
  double time_s_ = 0;
};

class CudaDevice final : public Device {
 public:
  explicit CudaDevice(const CudaOptions& o);
  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;
  ~CudaDevice() override;

  std::string describe() const override;
  Dtype compute_dtype() const override { return compute_; }
  Dtype comm_dtype() const override { return Dtype::kBf16; }
  double now_s() override;
  EventPtr record(Stream s) override;
  void wait(Stream s, const EventPtr& e) override;
  void gemm(Stream s, const GemmShape& g) override;
  void attention(Stream s, const AttentionShape& a) override;
  void elementwise(Stream s, double bytes) override;
  void host_copy(Stream s, double bytes, bool to_host) override;
  void host_optimizer(Stream s, double elements, bool adam) override;
  Buffer alloc(std::size_t count) override;
  void release(Buffer& b) override;
  void* alloc_bytes(double bytes) override;
  void free_bytes(void* p) override;
  void upload(const Buffer& b, std::span<const float> host) override;
  void download(const Buffer& b, std::span<float> host) override;
  void synchronize() override;
  double peak_memory_bytes() override;
  void reset_peak_memory() override;

  // For the communicator.
  cudaStream_t stream(Stream s) const { return streams_[static_cast<std::size_t>(s)]; }
  cudaStream_t send_stream() const { return send_stream_; }
  cudaStream_t recv_stream() const { return recv_stream_; }
  int gpu() const { return gpu_; }
  const ErrorContextPtr& context() const { return ctx_; }
  std::shared_ptr<CudaEvent> new_event() const { return std::make_shared<CudaEvent>(ctx_); }
  void record_event(CudaEvent& e, cudaStream_t s) { e.record(s, anchor_); }
  // Later work on `waiter` waits for everything enqueued on `s` so far (p2p ops excepted).
  void stream_after(cudaStream_t waiter, Stream s);
  // A p2p op issued on `s` (running on the send/recv stream): the next gemm, attention,
  // elementwise or collective on `s` waits for it.
  void add_pending_p2p(Stream s, std::shared_ptr<CudaEvent> e);
  void join_p2p(Stream s);

  CudaMemoryStats memory_stats();

 private:
  // A cuBLASLt matmul D (m x n) = op(A) (m x k) . B (k x n), `batch` strided copies, in the
  // "TN" layout (A stored k x m, column-major) that fp8 requires.
  struct Plan {
    std::int64_t m = 0, n = 0, k = 0, batch = 0;  // after rounding (fp8: to 16)
    std::size_t a_bytes = 0, b_bytes = 0, d_bytes = 0;
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  using PlanKey = std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t>;

  const Plan& plan(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t batch);
  void matmul(const Plan& p, const void* a, const void* b, void* d, Stream s);
  void* workspace(Stream s);
  // Grow-only pools: `in_` holds operands (random data, only ever read), `out_` results.
  void ensure_pools(std::size_t in_bytes, std::size_t out_bytes);
  void refresh_anchor();
  double sample_used();
  void cleanup() noexcept;
  const ErrorContext& ctx() const { return *ctx_; }

  ErrorContextPtr ctx_;
  Dtype compute_ = Dtype::kBf16;
  int gpu_ = 0;
  int max_blocks_ = 1024;
  std::string gpu_name_;
  int sm_ = 0;
  int sm_count_ = 0;
  double total_mem_bytes_ = 0;
  std::string pci_;

  std::array<cudaStream_t, kNumStreams> streams_{};
  cudaStream_t send_stream_ = nullptr, recv_stream_ = nullptr;
  std::array<std::vector<std::shared_ptr<CudaEvent>>, kNumStreams> pending_p2p_;
  cublasLtHandle_t lt_ = nullptr;
  std::array<void*, kNumStreams> workspaces_{};
  std::map<PlanKey, Plan> plans_;
  void* in_ = nullptr;
  void* out_ = nullptr;
  std::size_t in_bytes_ = 0, out_bytes_ = 0;
  void* pinned_ = nullptr;  // host_copy: pinned host memory, grow-only
  std::size_t pinned_bytes_ = 0;
  // host_optimizer: the state, and each enqueued step's arguments until it has run
  // (cudaLaunchHostFunc takes a pointer); cleared at synchronize().
  struct HostStep {
    HostOptimizer* opt;
    double elements;
    bool adam;
  };
  std::unique_ptr<HostOptimizer> host_opt_;
  std::vector<std::unique_ptr<HostStep>> host_steps_;
  std::uint64_t fill_seed_ = 0x5eedULL;

  std::shared_ptr<const Anchor> anchor_;
  std::map<void*, std::size_t> allocs_;  // alloc_bytes() blocks (stream-ordered allocator)
  double tracked_live_ = 0, tracked_peak_ = 0, used_peak_ = 0;
};

}  // namespace stepcast::exec::cuda_detail

// The cuda_nccl backend's Device: cuBLASLt GEMMs, kernels.cu passes, cudaEvent timing.
#include "cuda_device.h"

#include <fmt/format.h>
#include <nccl.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <thread>

#include "kernels.h"

namespace stepcast::exec {
namespace cuda_detail {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;
constexpr std::size_t kWorkspaceBytes = 32 * kMiB;       // cuBLASLt workspace, per stream
constexpr std::size_t kScoresChunkBytes = 256 * kMiB;    // attention scores per chunk of heads
constexpr std::size_t kElementwiseChunkBytes = 256 * kMiB;  // per side, per pass
constexpr std::size_t kAlign = 256;
constexpr double kAnchorRefreshS = 1.0;  // keeps cudaEventElapsedTime's float ms precise
constexpr double kClockOffsetS = 1.6e9;  // now_s() = Unix time - 1.6e9 (more bits after the point)

std::size_t align_up(std::size_t x) { return (x + kAlign - 1) / kAlign * kAlign; }
std::int64_t round_up(std::int64_t x, std::int64_t q) { return (x + q - 1) / q * q; }

const char* dtype_name(Dtype t) {
  switch (t) {
    case Dtype::kF32: return "f32";
    case Dtype::kBf16: return "bf16";
    case Dtype::kFp8: return "fp8";
  }
  return "?";
}

double seconds(std::chrono::system_clock::time_point t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}
double seconds(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

// The host clock: steady (never jumps during a run), shifted once to Unix time - 1.6e9 so
// ranks on different nodes agree to the accuracy of their clock sync at start-up.
double host_now_s() {
  static const double offset =
      seconds(std::chrono::system_clock::now()) - kClockOffsetS - seconds(std::chrono::steady_clock::now());
  return seconds(std::chrono::steady_clock::now()) + offset;
}

std::uint16_t f32_to_bf16(float f) {
  std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  if ((u & 0x7fffffffU) > 0x7f800000U) return static_cast<std::uint16_t>((u >> 16) | 0x40U);  // quiet NaN
  u += 0x7fffU + ((u >> 16) & 1U);  // round to nearest even
  return static_cast<std::uint16_t>(u >> 16);
}

float bf16_to_f32(std::uint16_t h) { return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16); }

void check_buffer(const Buffer& b, std::size_t host_count, const char* what) {
  if (b.dtype != Dtype::kBf16)
    throw std::invalid_argument(fmt::format("cuda device {}: buffer holds {}, expected bf16 (from Device::alloc)", what,
                                            dtype_name(b.dtype)));
  if (host_count != b.count)
    throw std::invalid_argument(
        fmt::format("cuda device {}: host span has {} elements, buffer {}", what, host_count, b.count));
}

}  // namespace

// ---------------------------------------------------------------------------------- events

Anchor::~Anchor() {
  if (event) (void)cudaEventDestroy(event);
}

CudaEvent::CudaEvent(ErrorContextPtr ctx) : ctx_(std::move(ctx)) {
  SC_CHECK(*ctx_, cudaEventCreate(&event_));
}

CudaEvent::~CudaEvent() {
  if (event_) (void)cudaEventDestroy(event_);
}

void CudaEvent::record(cudaStream_t s, std::shared_ptr<const Anchor> anchor) {
  if (recorded()) throw std::logic_error("CudaEvent recorded twice");
  SC_CHECK(*ctx_, cudaEventRecord(event_, s));
  anchor_ = std::move(anchor);
}

void CudaEvent::require_recorded(const char* what) const {
  if (!recorded())
    throw std::logic_error(fmt::format(
        "{}: Event::{}() on an event of an open NCCL group; it is recorded at group_end()", ctx_->where(), what));
}

bool CudaEvent::done() {
  if (!recorded()) return false;
  const cudaError_t e = cudaEventQuery(event_);
  if (e == cudaErrorNotReady) {
    (void)cudaGetLastError();  // not an error; keep it out of later checks
    return false;
  }
  SC_CHECK(*ctx_, e);
  return true;
}

void CudaEvent::wait() {
  require_recorded("wait");
  SC_CHECK(*ctx_, cudaEventSynchronize(event_));
}

double CudaEvent::time_s() {
  if (!have_time_) {
    wait();
    float ms = 0;
    SC_CHECK(*ctx_, cudaEventElapsedTime(&ms, anchor_->event, event_));
    time_s_ = anchor_->host_s + static_cast<double>(ms) * 1e-3;
    have_time_ = true;
  }
  return time_s_;
}

// ---------------------------------------------------------------------------------- device

CudaDevice::CudaDevice(const CudaOptions& o) : ctx_(std::make_shared<ErrorContext>()), compute_(o.compute) {
  ctx_->host = host_name();
  if (compute_ != Dtype::kBf16 && compute_ != Dtype::kFp8)
    throw std::invalid_argument(
        fmt::format("cuda device: compute dtype {} is not supported; use bf16 or fp8", dtype_name(compute_)));
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    throw std::runtime_error(fmt::format("no CUDA device: {} [{}] (host {}, local rank {})", cudaGetErrorString(e),
                                         cudaGetErrorName(e), ctx_->host, o.local_rank));
  }
  if (count == 0) {
    const char* vis = std::getenv("CUDA_VISIBLE_DEVICES");
    throw std::runtime_error(fmt::format("no CUDA device: cudaGetDeviceCount found none (host {}, CUDA_VISIBLE_DEVICES={})",
                                         ctx_->host, vis ? vis : "unset"));
  }
  // One visible GPU (srun --gpus-per-task=1, or CUDA_VISIBLE_DEVICES per rank): use it.
  gpu_ = count == 1 ? 0 : o.local_rank;
  // The host step of optimizer offload: this GPU's share of the host's cores.
  host_opt_ = std::make_unique<HostOptimizer>(
      static_cast<int>(std::max(1u, std::thread::hardware_concurrency() / static_cast<unsigned>(count))));
  if (o.local_rank < 0 || gpu_ >= count)
    throw std::invalid_argument(fmt::format("cuda device: local rank {} on {} but only {} CUDA devices are visible "
                                            "(launch at most {} ranks per node, or one GPU per rank)",
                                            o.local_rank, ctx_->host, count, count));
  ctx_->gpu = gpu_;
  try {
    SC_CHECK(ctx(), cudaSetDevice(gpu_));
    cudaDeviceProp prop{};
    SC_CHECK(ctx(), cudaGetDeviceProperties(&prop, gpu_));
    gpu_name_ = prop.name;
    sm_ = prop.major * 10 + prop.minor;
    sm_count_ = prop.multiProcessorCount;
    max_blocks_ = std::max(1, sm_count_ * 8);
    total_mem_bytes_ = static_cast<double>(prop.totalGlobalMem);
    pci_ = fmt::format("{:04x}:{:02x}:{:02x}.0", prop.pciDomainID, prop.pciBusID, prop.pciDeviceID);
    if (compute_ == Dtype::kFp8 && sm_ < 89)
      throw std::invalid_argument(
          fmt::format("cuda device: fp8 GEMMs need sm_89 or newer; {} is sm_{}", gpu_name_, sm_));

    for (cudaStream_t& s : streams_) SC_CHECK(ctx(), cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    SC_CHECK(ctx(), cudaStreamCreateWithFlags(&send_stream_, cudaStreamNonBlocking));
    SC_CHECK(ctx(), cudaStreamCreateWithFlags(&recv_stream_, cudaStreamNonBlocking));
    SC_CHECK(ctx(), cublasLtCreate(&lt_));

    // alloc_bytes() uses the stream-ordered allocator; keep freed memory reserved (like a
    // caching allocator) so a free never hands memory back to the driver mid-step.
    cudaMemPool_t pool = nullptr;
    SC_CHECK(ctx(), cudaDeviceGetDefaultMemPool(&pool, gpu_));
    std::uint64_t threshold = std::numeric_limits<std::uint64_t>::max();
    SC_CHECK(ctx(), cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));

    SC_CHECK(ctx(), cudaDeviceSynchronize());
    refresh_anchor();
    used_peak_ = sample_used();
  } catch (...) {
    cleanup();
    throw;
  }
}

CudaDevice::~CudaDevice() { cleanup(); }

void CudaDevice::cleanup() noexcept {
  (void)cudaDeviceSynchronize();
  for (auto& [key, p] : plans_) {
    if (p.desc) (void)cublasLtMatmulDescDestroy(p.desc);
    if (p.a) (void)cublasLtMatrixLayoutDestroy(p.a);
    if (p.b) (void)cublasLtMatrixLayoutDestroy(p.b);
    if (p.d) (void)cublasLtMatrixLayoutDestroy(p.d);
  }
  plans_.clear();
  for (void*& w : workspaces_) {
    if (w) (void)cudaFree(w);
    w = nullptr;
  }
  if (in_) (void)cudaFree(in_);
  if (out_) (void)cudaFree(out_);
  in_ = out_ = nullptr;
  if (pinned_) (void)cudaFreeHost(pinned_);
  pinned_ = nullptr;
  pinned_bytes_ = 0;
  for (auto& [p, bytes] : allocs_) (void)cudaFree(p);
  allocs_.clear();
  for (auto& list : pending_p2p_) list.clear();
  anchor_.reset();
  if (lt_) (void)cublasLtDestroy(lt_);
  lt_ = nullptr;
  for (cudaStream_t& s : streams_) {
    if (s) (void)cudaStreamDestroy(s);
    s = nullptr;
  }
  if (send_stream_) (void)cudaStreamDestroy(send_stream_);
  if (recv_stream_) (void)cudaStreamDestroy(recv_stream_);
  send_stream_ = recv_stream_ = nullptr;
  (void)cudaGetLastError();
}

std::string CudaDevice::describe() const {
  int rt = 0, drv = 0, nccl = 0;
  (void)cudaRuntimeGetVersion(&rt);
  (void)cudaDriverGetVersion(&drv);
  (void)ncclGetVersion(&nccl);
  const std::size_t lt = cublasLtGetVersion();
  return fmt::format("{} (sm_{}, {} SMs, {:.1f} GiB, CUDA runtime {}.{}, driver {}.{}, cuBLAS {}.{}.{}, NCCL {}.{}.{}) "
                     "GPU {} at {}, {} GEMMs",
                     gpu_name_, sm_, sm_count_, total_mem_bytes_ / static_cast<double>(1ULL << 30), rt / 1000,
                     rt % 1000 / 10, drv / 1000, drv % 1000 / 10, lt / 10000, lt / 100 % 100, lt % 100, nccl / 10000,
                     nccl % 10000 / 100, nccl % 100, gpu_, pci_, dtype_name(compute_));
}

double CudaDevice::now_s() { return host_now_s(); }

void CudaDevice::refresh_anchor() {
  auto a = std::make_shared<Anchor>();
  SC_CHECK(ctx(), cudaEventCreate(&a->event));
  const double before = host_now_s();
  SC_CHECK(ctx(), cudaEventRecord(a->event, streams_[0]));
  SC_CHECK(ctx(), cudaEventSynchronize(a->event));
  const double after = host_now_s();
  a->host_s = 0.5 * (before + after);  // the GPU stamped it between the two
  anchor_ = std::move(a);
}

EventPtr CudaDevice::record(Stream s) {
  auto e = new_event();
  record_event(*e, stream(s));
  return e;
}

void CudaDevice::wait(Stream s, const EventPtr& e) {
  if (!e) return;
  if (auto* ce = dynamic_cast<CudaEvent*>(e.get())) {
    if (!ce->recorded())
      throw std::logic_error(fmt::format("{}: Device::wait on an event of an open NCCL group; it is recorded at "
                                         "group_end()",
                                         ctx().where()));
    SC_CHECK(ctx(), cudaStreamWaitEvent(stream(s), ce->raw(), 0));
  } else {
    e->wait();  // another backend's event: block the host
  }
}

void CudaDevice::stream_after(cudaStream_t waiter, Stream s) {
  cudaEvent_t ev = nullptr;
  SC_CHECK(ctx(), cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  const cudaError_t rec = cudaEventRecord(ev, stream(s));
  const cudaError_t wt = rec == cudaSuccess ? cudaStreamWaitEvent(waiter, ev, 0) : rec;
  (void)cudaEventDestroy(ev);  // released once it completes
  SC_CHECK(ctx(), wt);
}

void CudaDevice::add_pending_p2p(Stream s, std::shared_ptr<CudaEvent> e) {
  auto& list = pending_p2p_[static_cast<std::size_t>(s)];
  // A stream that only ever carries p2p ops never joins them: drop the finished ones here.
  std::erase_if(list, [](const std::shared_ptr<CudaEvent>& x) { return x->recorded() && x->done(); });
  list.push_back(std::move(e));
}

void CudaDevice::join_p2p(Stream s) {
  auto& list = pending_p2p_[static_cast<std::size_t>(s)];
  std::erase_if(list, [&](const std::shared_ptr<CudaEvent>& e) {
    if (!e->recorded()) return false;  // inside an open group: joined after group_end
    SC_CHECK(ctx(), cudaStreamWaitEvent(stream(s), e->raw(), 0));
    return true;
  });
}

// ------------------------------------------------------------------------------ compute

void* CudaDevice::workspace(Stream s) {
  // One per stream: concurrent kernels must not share a workspace (split-K counters).
  void*& w = workspaces_[static_cast<std::size_t>(s)];
  if (!w) {
    SC_CHECK(ctx(), cudaMalloc(&w, kWorkspaceBytes));
    used_peak_ = std::max(used_peak_, sample_used());
  }
  return w;
}

const CudaDevice::Plan& CudaDevice::plan(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t batch) {
  const bool fp8 = compute_ == Dtype::kFp8;
  if (fp8) {  // fp8 cuBLASLt kernels want 16-element multiples
    m = round_up(m, 16);
    n = round_up(n, 16);
    k = round_up(k, 16);
  }
  const PlanKey key{m, n, k, batch};
  if (auto it = plans_.find(key); it != plans_.end()) return it->second;
  if (batch > std::numeric_limits<std::int32_t>::max())
    throw std::invalid_argument(fmt::format("cuda device: GEMM batch {} exceeds cuBLASLt's int32 batch count", batch));

  Plan p;
  p.m = m, p.n = n, p.k = k, p.batch = batch;
  const std::size_t in_elem = fp8 ? 1 : 2;
  const auto um = static_cast<std::size_t>(m), un = static_cast<std::size_t>(n), uk = static_cast<std::size_t>(k),
             ub = static_cast<std::size_t>(batch);
  p.a_bytes = um * uk * ub * in_elem;
  p.b_bytes = uk * un * ub * in_elem;
  p.d_bytes = um * un * ub * 2;
  const cudaDataType_t in_type = fp8 ? CUDA_R_8F_E4M3 : CUDA_R_16BF;
  try {
    SC_CHECK(ctx(), cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    SC_CHECK(ctx(), cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
    SC_CHECK(ctx(), cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
    SC_CHECK(ctx(), cublasLtMatrixLayoutCreate(&p.a, in_type, static_cast<std::uint64_t>(k), static_cast<std::uint64_t>(m), k));
    SC_CHECK(ctx(), cublasLtMatrixLayoutCreate(&p.b, in_type, static_cast<std::uint64_t>(k), static_cast<std::uint64_t>(n), k));
    SC_CHECK(ctx(), cublasLtMatrixLayoutCreate(&p.d, CUDA_R_16BF, static_cast<std::uint64_t>(m), static_cast<std::uint64_t>(n), m));
    if (batch > 1) {
      const auto count = static_cast<std::int32_t>(batch);
      const std::int64_t sa = m * k, sb = k * n, sd = m * n;
      const std::array<std::pair<cublasLtMatrixLayout_t, std::int64_t>, 3> layouts{{{p.a, sa}, {p.b, sb}, {p.d, sd}}};
      for (const auto& [layout, stride] : layouts) {
        SC_CHECK(ctx(), cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
        SC_CHECK(ctx(), cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                                         sizeof(stride)));
      }
    }
    cublasLtMatmulPreference_t pref = nullptr;
    SC_CHECK(ctx(), cublasLtMatmulPreferenceCreate(&pref));
    const std::uint64_t ws = kWorkspaceBytes;
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
    if (st == CUBLAS_STATUS_SUCCESS)
      st = cublasLtMatmulAlgoGetHeuristic(lt_, p.desc, p.a, p.b, p.d, p.d, pref, 1, &result, &found);
    (void)cublasLtMatmulPreferenceDestroy(pref);
    SC_CHECK(ctx(), st);
    if (found == 0)
      throw std::runtime_error(fmt::format("{}: cuBLASLt has no {} algorithm for m={} n={} k={} batch={}", ctx().where(),
                                           dtype_name(compute_), m, n, k, batch));
    p.algo = result.algo;
  } catch (...) {
    if (p.desc) (void)cublasLtMatmulDescDestroy(p.desc);
    if (p.a) (void)cublasLtMatrixLayoutDestroy(p.a);
    if (p.b) (void)cublasLtMatrixLayoutDestroy(p.b);
    if (p.d) (void)cublasLtMatrixLayoutDestroy(p.d);
    throw;
  }
  return plans_.emplace(key, p).first->second;
}

void CudaDevice::matmul(const Plan& p, const void* a, const void* b, void* d, Stream s) {
  const float alpha = 1.0f, beta = 0.0f;
  void* ws = workspace(s);
  SC_CHECK(ctx(), cublasLtMatmul(lt_, p.desc, &alpha, a, p.a, b, p.b, &beta, d, p.d, d, p.d, &p.algo, ws,
                                 kWorkspaceBytes, stream(s)));
}

void CudaDevice::ensure_pools(std::size_t in_bytes, std::size_t out_bytes) {
  in_bytes = align_up(in_bytes);
  out_bytes = align_up(out_bytes);
  if (in_bytes <= in_bytes_ && out_bytes <= out_bytes_) return;
  SC_CHECK(ctx(), cudaDeviceSynchronize());  // kernels in flight may use the old pools
  if (in_bytes > in_bytes_) {
    if (in_) SC_CHECK(ctx(), cudaFree(in_));
    in_ = nullptr;
    in_bytes_ = 0;
    SC_CHECK(ctx(), cudaMalloc(&in_, in_bytes));
    in_bytes_ = in_bytes;
    const FillKind kind = compute_ == Dtype::kFp8 ? FillKind::kFp8E4m3 : FillKind::kBf16;
    SC_CHECK(ctx(), launch_fill_random(in_, in_bytes_, kind, fill_seed_++, max_blocks_, streams_[0]));
  }
  if (out_bytes > out_bytes_) {
    if (out_) SC_CHECK(ctx(), cudaFree(out_));
    out_ = nullptr;
    out_bytes_ = 0;
    SC_CHECK(ctx(), cudaMalloc(&out_, out_bytes));
    out_bytes_ = out_bytes;
    SC_CHECK(ctx(), cudaMemsetAsync(out_, 0, out_bytes_, streams_[0]));
  }
  SC_CHECK(ctx(), cudaDeviceSynchronize());  // every stream may read them next
  used_peak_ = std::max(used_peak_, sample_used());
}

void CudaDevice::gemm(Stream s, const GemmShape& g) {
  if (g.m < 1 || g.n < 1 || g.k < 1 || g.batch < 1)
    throw std::invalid_argument(
        fmt::format("cuda device gemm: m, n, k, batch must be >= 1, got {} {} {} {}", g.m, g.n, g.k, g.batch));
  const Plan& p = plan(g.m, g.n, g.k, g.batch);
  ensure_pools(align_up(p.a_bytes) + p.b_bytes, p.d_bytes);
  join_p2p(s);
  auto* in = static_cast<unsigned char*>(in_);
  matmul(p, in, in + align_up(p.a_bytes), out_, s);
}

void CudaDevice::attention(Stream s, const AttentionShape& a) {
  if (a.batch < 1 || a.sq < 1 || a.sk < 1 || a.d < 1)
    throw std::invalid_argument(fmt::format("cuda device attention: batch, sq, sk, d must be >= 1, got {} {} {} {}",
                                            a.batch, a.sq, a.sk, a.d));
  // Heads per chunk: the scores of one chunk stay near kScoresChunkBytes (flash attention
  // never holds them all; this keeps the memory of the stand-in bounded).
  const double head_scores = static_cast<double>(a.sq) * static_cast<double>(a.sk) * 2.0;
  const auto per_chunk = static_cast<std::int64_t>(
      std::clamp(std::floor(static_cast<double>(kScoresChunkBytes) / head_scores), 1.0, static_cast<double>(a.batch)));
  const bool fp8 = compute_ == Dtype::kFp8;
  const float scale = 1.0f / std::sqrt(static_cast<float>(a.d));
  join_p2p(s);
  for (std::int64_t first = 0; first < a.batch; first += per_chunk) {
    const std::int64_t h = std::min(per_chunk, a.batch - first);
    const Plan& qk = plan(a.sq, a.sk, a.d, h);  // S (sq x sk) = Q (sq x d) . K^T
    const Plan& pv = plan(a.sq, a.d, a.sk, h);  // O (sq x d) = P (sq x sk) . V (sk x d)
    // in: Q | K | V   out: S | P (fp8 only; bf16 rewrites S in place) | O
    const std::size_t q_off = 0, k_off = align_up(qk.a_bytes), v_off = k_off + align_up(qk.b_bytes);
    const std::size_t s_off = 0, p_off = align_up(qk.d_bytes), o_off = p_off + (fp8 ? align_up(pv.a_bytes) : 0);
    ensure_pools(v_off + pv.b_bytes, o_off + pv.d_bytes);
    auto* in = static_cast<unsigned char*>(in_);
    auto* out = static_cast<unsigned char*>(out_);
    matmul(qk, in + q_off, in + k_off, out + s_off, s);
    const std::size_t scores = static_cast<std::size_t>(qk.m) * static_cast<std::size_t>(qk.n) * static_cast<std::size_t>(h);
    void* probs = fp8 ? static_cast<void*>(out + p_off) : static_cast<void*>(out + s_off);
    SC_CHECK(ctx(), launch_scores_pass(out + s_off, probs, fp8, scores, scale, max_blocks_, stream(s)));
    matmul(pv, probs, in + v_off, out + o_off, s);
  }
}

void CudaDevice::elementwise(Stream s, double bytes) {
  if (!(bytes > 0)) return;
  // Reads bytes/2 and writes bytes/2, in passes over at most kElementwiseChunkBytes a side
  // (far beyond L2, so every pass streams from HBM).
  const double half = bytes / 2.0;
  const std::size_t chunk =
      align_up(static_cast<std::size_t>(std::min(half, static_cast<double>(kElementwiseChunkBytes))));
  ensure_pools(chunk, chunk);
  join_p2p(s);
  auto left = static_cast<std::size_t>(std::ceil(half / 16.0)) * 16;
  while (left > 0) {
    const std::size_t n = std::min(left, chunk);
    SC_CHECK(ctx(), launch_stream_rw(in_, out_, n, max_blocks_, stream(s)));
    left -= n;
  }
}

void CudaDevice::host_copy(Stream s, double bytes, bool to_host) {
  if (!(bytes > 0)) return;
  // Out of the operand pool or into the result pool (operands stay as filled), through
  // pinned host memory, in passes of at most kElementwiseChunkBytes.
  const std::size_t chunk =
      align_up(static_cast<std::size_t>(std::min(bytes, static_cast<double>(kElementwiseChunkBytes))));
  ensure_pools(chunk, chunk);
  if (pinned_bytes_ < chunk) {
    SC_CHECK(ctx(), cudaDeviceSynchronize());  // copies in flight may use the old buffer
    if (pinned_) SC_CHECK(ctx(), cudaFreeHost(pinned_));
    pinned_ = nullptr;
    pinned_bytes_ = 0;
    SC_CHECK(ctx(), cudaMallocHost(&pinned_, chunk));
    std::memset(pinned_, 0, chunk);
    pinned_bytes_ = chunk;
  }
  join_p2p(s);
  auto left = static_cast<std::size_t>(std::ceil(bytes));
  while (left > 0) {
    const std::size_t n = std::min(left, chunk);
    if (to_host) {
      SC_CHECK(ctx(), cudaMemcpyAsync(pinned_, in_, n, cudaMemcpyDeviceToHost, stream(s)));
    } else {
      SC_CHECK(ctx(), cudaMemcpyAsync(out_, pinned_, n, cudaMemcpyHostToDevice, stream(s)));
    }
    left -= n;
  }
}

void CudaDevice::host_optimizer(Stream s, double elements, bool adam) {
  if (!(elements >= 1)) return;
  // In stream order: CUDA runs the function on its own host thread once the work before it
  // on the stream is done, and holds later work on the stream until it returns. The
  // function makes no CUDA call (the CUDA rule for host functions).
  join_p2p(s);
  host_steps_.push_back(std::make_unique<HostStep>(HostStep{host_opt_.get(), elements, adam}));
  SC_CHECK(ctx(), cudaLaunchHostFunc(
                      stream(s),
                      [](void* p) {
                        const auto* h = static_cast<const HostStep*>(p);
                        h->opt->step(h->elements, h->adam);
                      },
                      host_steps_.back().get()));
}

// ------------------------------------------------------------------------------- memory

double CudaDevice::sample_used() {
  std::size_t free_b = 0, total_b = 0;
  SC_CHECK(ctx(), cudaMemGetInfo(&free_b, &total_b));
  return static_cast<double>(total_b - free_b);
}

Buffer CudaDevice::alloc(std::size_t count) {
  Buffer b;
  b.count = count;
  b.dtype = Dtype::kBf16;
  if (count > 0) SC_CHECK(ctx(), cudaMalloc(&b.data, count * 2));
  tracked_live_ += static_cast<double>(count * 2);
  tracked_peak_ = std::max(tracked_peak_, tracked_live_);
  used_peak_ = std::max(used_peak_, sample_used());
  return b;
}

void CudaDevice::release(Buffer& b) {
  if (b.data) {
    SC_CHECK(ctx(), cudaFree(b.data));
    tracked_live_ -= static_cast<double>(b.count * 2);
  }
  b = Buffer{};
}

void* CudaDevice::alloc_bytes(double bytes) {
  const auto size = static_cast<std::size_t>(std::max(1.0, std::ceil(bytes)));
  void* p = nullptr;
  SC_CHECK(ctx(), cudaMallocAsync(&p, size, streams_[0]));
  allocs_.emplace(p, size);
  tracked_live_ += static_cast<double>(size);
  tracked_peak_ = std::max(tracked_peak_, tracked_live_);
  used_peak_ = std::max(used_peak_, sample_used());
  return p;
}

void CudaDevice::free_bytes(void* p) {
  if (!p) return;
  const auto it = allocs_.find(p);
  if (it == allocs_.end())
    throw std::invalid_argument(fmt::format("{}: free_bytes of a pointer alloc_bytes did not return", ctx().where()));
  SC_CHECK(ctx(), cudaFreeAsync(p, streams_[0]));
  tracked_live_ -= static_cast<double>(it->second);
  allocs_.erase(it);
}

void CudaDevice::upload(const Buffer& b, std::span<const float> host) {
  check_buffer(b, host.size(), "upload");
  std::vector<std::uint16_t> staged(host.size());
  std::transform(host.begin(), host.end(), staged.begin(), f32_to_bf16);
  SC_CHECK(ctx(), cudaDeviceSynchronize());  // nothing in flight may still use b
  if (!staged.empty())
    SC_CHECK(ctx(), cudaMemcpy(b.data, staged.data(), staged.size() * 2, cudaMemcpyHostToDevice));
  SC_CHECK(ctx(), cudaDeviceSynchronize());
}

void CudaDevice::download(const Buffer& b, std::span<float> host) {
  check_buffer(b, host.size(), "download");
  std::vector<std::uint16_t> staged(host.size());
  SC_CHECK(ctx(), cudaDeviceSynchronize());
  if (!staged.empty())
    SC_CHECK(ctx(), cudaMemcpy(staged.data(), b.data, staged.size() * 2, cudaMemcpyDeviceToHost));
  std::transform(staged.begin(), staged.end(), host.begin(), bf16_to_f32);
}

void CudaDevice::synchronize() {
  SC_CHECK(ctx(), cudaDeviceSynchronize());
  host_steps_.clear();
  for (auto& list : pending_p2p_)  // all done now, except events of a still open group
    std::erase_if(list, [](const std::shared_ptr<CudaEvent>& x) { return x->recorded(); });
  if (host_now_s() - anchor_->host_s > kAnchorRefreshS) refresh_anchor();
}

double CudaDevice::peak_memory_bytes() {
  used_peak_ = std::max(used_peak_, sample_used());
  return used_peak_;
}

void CudaDevice::reset_peak_memory() {
  tracked_peak_ = tracked_live_;
  used_peak_ = sample_used();
}

CudaMemoryStats CudaDevice::memory_stats() {
  CudaMemoryStats st;
  st.device_used_peak_bytes = peak_memory_bytes();
  st.tracked_live_bytes = tracked_live_;
  st.tracked_peak_bytes = tracked_peak_;
  std::size_t ws = 0;
  for (void* w : workspaces_) ws += w ? kWorkspaceBytes : 0;
  st.scratch_bytes = static_cast<double>(in_bytes_ + out_bytes_ + ws);
  return st;
}

}  // namespace cuda_detail

// ------------------------------------------------------------------------------ public

std::unique_ptr<Device> make_cuda_device(const CudaOptions& o) { return std::make_unique<cuda_detail::CudaDevice>(o); }

CudaMemoryStats cuda_memory_stats(Device& device) {
  auto* d = dynamic_cast<cuda_detail::CudaDevice*>(&device);
  if (!d) throw std::invalid_argument("cuda_memory_stats: the device does not come from make_cuda_device");
  return d->memory_stats();
}

std::string cuda_describe() {
  int rt = 0, drv = 0, nccl = 0;
  (void)cudaRuntimeGetVersion(&rt);
  (void)cudaDriverGetVersion(&drv);
  if (ncclGetVersion(&nccl) != ncclSuccess) nccl = 0;
  const std::size_t lt = cublasLtGetVersion();
  const std::string driver = drv > 0 ? fmt::format("{}.{}", drv / 1000, drv % 1000 / 10) : std::string("none");
  std::string out = fmt::format("CUDA runtime {}.{}, driver {}, cuBLAS {}.{}.{}, NCCL {}.{}.{}, ", rt / 1000,
                                rt % 1000 / 10, driver, lt / 10000, lt / 100 % 100, lt % 100, nccl / 10000,
                                nccl % 10000 / 100, nccl % 100);
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return out + fmt::format("no CUDA device: {}", cudaGetErrorString(e));
  }
  if (count == 0) return out + "no CUDA device: none visible";
  int dev = 0;
  cudaDeviceProp prop{};
  if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&prop, dev) != cudaSuccess) {
    const cudaError_t last = cudaGetLastError();
    return out + fmt::format("GPU ? ({})", cudaGetErrorString(last));
  }
  return out + fmt::format("GPU {} (sm_{}{})", prop.name, prop.major, prop.minor);
}

}  // namespace stepcast::exec

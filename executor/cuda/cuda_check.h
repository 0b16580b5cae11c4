// Checking CUDA, cuBLAS(Lt) and NCCL return codes (private to executor/cuda).
// SC_CHECK(ctx, call) throws std::runtime_error on failure, with a message naming the rank,
// host, GPU, the call's text, file:line and the library's message, e.g.
//   "rank 3 (GPU 3) on node017: cudaMalloc(&p, bytes) failed at cuda_device.cc:120:
//    out of memory [cudaErrorMemoryAllocation]"
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <memory>
#include <string>

namespace stepcast::exec::cuda_detail {

// Who is failing. Shared (shared_ptr) by a device, its events and its communicator; the
// communicator fills in the world rank once it knows it.
struct ErrorContext {
  int rank = -1;        // world rank, -1 while unknown
  int gpu = -1;         // CUDA device index
  std::string host;     // gethostname()
  std::string where() const;  // "rank 3 (GPU 3) on node017"
};
using ErrorContextPtr = std::shared_ptr<ErrorContext>;

std::string host_name();

[[noreturn]] void throw_error(const ErrorContext& ctx, const char* call, const char* file, int line, cudaError_t e);
[[noreturn]] void throw_error(const ErrorContext& ctx, const char* call, const char* file, int line, cublasStatus_t e);
[[noreturn]] void throw_error(const ErrorContext& ctx, const char* call, const char* file, int line, ncclResult_t e);

inline bool failed(cudaError_t e) { return e != cudaSuccess; }
inline bool failed(cublasStatus_t e) { return e != CUBLAS_STATUS_SUCCESS; }
inline bool failed(ncclResult_t e) { return e != ncclSuccess; }

}  // namespace stepcast::exec::cuda_detail

// `ctx` is an ErrorContext (not a pointer). The overload on the call's return type picks the
// library's error text.
#define SC_CHECK(ctx, call)                                                                      \
  do {                                                                                           \
    const auto sc_status_ = (call);                                                              \
    if (::stepcast::exec::cuda_detail::failed(sc_status_))                                       \
      ::stepcast::exec::cuda_detail::throw_error((ctx), #call, __FILE__, __LINE__, sc_status_);  \
  } while (0)

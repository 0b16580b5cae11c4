// Kernel launchers (kernels.cu, compiled by nvcc); callable from host C++ compiled by g++.
// Each returns the launch's cudaError_t (cudaGetLastError), for SC_CHECK.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace stepcast::exec::cuda_detail {

enum class FillKind : int { kBf16, kFp8E4m3 };

// Fills [p, p + bytes) with pseudo-random values in [-1, 1) of `kind` (a function of
// `seed` and the index only), so GEMMs see realistic data rather than zeros.
cudaError_t launch_fill_random(void* p, std::size_t bytes, FillKind kind, std::uint64_t seed, int max_blocks,
                               cudaStream_t s);

// Memory-bound pass: reads `bytes` from `in`, writes `bytes` to `out` (a cheap bitwise op
// in between). REQUIRES: 16-byte aligned pointers; bytes rounded down to a multiple of 16.
cudaError_t launch_stream_rw(const void* in, void* out, std::size_t bytes, int max_blocks, cudaStream_t s);

// Softmax-like pass over `n` bf16 attention scores: out[i] = exp(in[i] * scale - 1), out
// bf16 (may be `in` itself) or fp8 e4m3 when out_fp8. One read and one write per score.
cudaError_t launch_scores_pass(const void* in_bf16, void* out, bool out_fp8, std::size_t n, float scale,
                               int max_blocks, cudaStream_t s);

}  // namespace stepcast::exec::cuda_detail

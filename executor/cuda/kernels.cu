// Small CUDA kernels of the cuda_nccl backend (CUDA C++17, nvcc). All grid-stride loops.
#include "kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <algorithm>

namespace stepcast::exec::cuda_detail {
namespace {

constexpr int kThreads = 256;

int blocks_for(std::size_t items, int max_blocks) {
  const std::size_t need = (items + kThreads - 1) / kThreads;
  return static_cast<int>(std::max<std::size_t>(1, std::min<std::size_t>(need, static_cast<std::size_t>(std::max(1, max_blocks)))));
}

__device__ __forceinline__ float hash_unit(std::uint64_t seed, std::uint64_t i) {
  // splitmix64 of (seed, i) -> [-1, 1)
  std::uint64_t z = seed + 0x9E3779B97F4A7C15ull * (i + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

__global__ void fill_bf16(__nv_bfloat16* p, std::size_t n, std::uint64_t seed) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    p[i] = __float2bfloat16_rn(hash_unit(seed, i));
}

__global__ void fill_fp8(__nv_fp8_storage_t* p, std::size_t n, std::uint64_t seed) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    p[i] = __nv_cvt_float_to_fp8(hash_unit(seed, i), __NV_SATFINITE, __NV_E4M3);
}

__global__ void stream_rw(const uint4* __restrict__ in, uint4* __restrict__ out, std::size_t n) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    uint4 v = in[i];
    v.x ^= 0x5bd1e995u;
    v.y ^= 0x5bd1e995u;
    v.z ^= 0x5bd1e995u;
    v.w ^= 0x5bd1e995u;
    out[i] = v;
  }
}

__device__ __forceinline__ float score(__nv_bfloat16 x, float scale) { return __expf(__bfloat162float(x) * scale - 1.0f); }

// One output element of the scores pass.
template <typename Out>
__device__ __forceinline__ Out to_out(float x);
template <>
__device__ __forceinline__ __nv_bfloat16 to_out<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }
template <>
__device__ __forceinline__ __nv_fp8_storage_t to_out<__nv_fp8_storage_t>(float x) {
  return __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
}

// 8 scores per 16-byte input vector (written as 8 x sizeof(Out) bytes); the tail (n % 8) scalar.
template <typename Out, typename Vec>
__global__ void scores(const __nv_bfloat16* in, Out* out, std::size_t n, float scale) {
  static_assert(sizeof(Vec) == 8 * sizeof(Out), "one output vector holds 8 scores");
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const std::size_t first = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  const std::size_t vecs = n / 8;
  for (std::size_t v = first; v < vecs; v += stride) {
    const uint4 raw = reinterpret_cast<const uint4*>(in)[v];
    const __nv_bfloat16* x = reinterpret_cast<const __nv_bfloat16*>(&raw);
    Vec res;
    Out* y = reinterpret_cast<Out*>(&res);
#pragma unroll
    for (int j = 0; j < 8; ++j) y[j] = to_out<Out>(score(x[j], scale));
    reinterpret_cast<Vec*>(out)[v] = res;
  }
  for (std::size_t i = vecs * 8 + first; i < n; i += stride) out[i] = to_out<Out>(score(in[i], scale));
}

}  // namespace

cudaError_t launch_fill_random(void* p, std::size_t bytes, FillKind kind, std::uint64_t seed, int max_blocks,
                               cudaStream_t s) {
  if (kind == FillKind::kBf16) {
    const std::size_t n = bytes / 2;
    if (n > 0) fill_bf16<<<blocks_for(n, max_blocks), kThreads, 0, s>>>(static_cast<__nv_bfloat16*>(p), n, seed);
  } else if (bytes > 0) {
    fill_fp8<<<blocks_for(bytes, max_blocks), kThreads, 0, s>>>(static_cast<__nv_fp8_storage_t*>(p), bytes, seed);
  }
  return cudaGetLastError();
}

cudaError_t launch_stream_rw(const void* in, void* out, std::size_t bytes, int max_blocks, cudaStream_t s) {
  const std::size_t n = bytes / sizeof(uint4);
  if (n > 0) stream_rw<<<blocks_for(n, max_blocks), kThreads, 0, s>>>(static_cast<const uint4*>(in), static_cast<uint4*>(out), n);
  return cudaGetLastError();
}

cudaError_t launch_scores_pass(const void* in_bf16, void* out, bool out_fp8, std::size_t n, float scale,
                               int max_blocks, cudaStream_t s) {
  if (n == 0) return cudaGetLastError();
  const int blocks = blocks_for((n + 7) / 8, max_blocks);
  const auto* in = static_cast<const __nv_bfloat16*>(in_bf16);
  if (out_fp8) {
    scores<__nv_fp8_storage_t, uint2><<<blocks, kThreads, 0, s>>>(in, static_cast<__nv_fp8_storage_t*>(out), n, scale);
  } else {
    scores<__nv_bfloat16, uint4><<<blocks, kThreads, 0, s>>>(in, static_cast<__nv_bfloat16*>(out), n, scale);
  }
  return cudaGetLastError();
}

}  // namespace stepcast::exec::cuda_detail

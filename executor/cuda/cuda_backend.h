// The cuda_nccl backend: a Device on one NVIDIA GPU (cuBLASLt GEMMs, small CUDA kernels,
// cudaEvent timing) and a Communicator over NCCL. Optional target
// `stepcast_executor_cuda` (STEPCAST_WITH_CUDA=ON); this header includes no CUDA header,
// so callers compile without the toolkit. See executor/cuda/README.md for launching.
//
// Errors: every CUDA / cuBLAS / NCCL call is checked; a failure throws std::runtime_error
// whose message names the rank, the host, the GPU, the call, file:line and the library's
// own message. Misuse of the interface (wrong buffer sizes, a foreign Device) throws
// std::invalid_argument or std::logic_error. Nothing here calls exit().
//
// Threading: use a device and its communicator from the thread that created the device
// (the CUDA current device is per thread). Destroy the communicator before its device.
#pragma once

#include <memory>
#include <string>

#include "stepcast/executor/backend.h"

namespace stepcast::exec {

struct CudaOptions {
  int local_rank = 0;              // GPU index on the node (the only visible GPU when just one is visible)
  Dtype compute = Dtype::kBf16;    // GEMM operand type: kBf16 or kFp8 (e4m3); fp32 accumulate
  std::string id_file;             // "" = exchange the ncclUniqueId through `host`
};

// The Device on GPU `o.local_rank` (cudaSetDevice on the calling thread).
//  - gemm: cuBLASLt, operands in o.compute, bf16 output, fp32 accumulate, 32 MiB workspace
//    per stream; operands come from one grow-only scratch pool filled with random values
//    (so clocks and power are those of real data), fp8 shapes rounded up to multiples of 16.
//  - attention: per chunk of heads (scores of a chunk capped near 256 MiB), QK^T and PV as
//    strided-batched GEMMs plus one read+write pass over the scores.
//  - elementwise(bytes): a streaming kernel reading bytes/2 and writing bytes/2 (through a
//    scratch of at most 2 x 256 MiB, in passes).
//  - Streams: one non-blocking cudaStream per stepcast Stream, plus a send and a recv
//    stream for the communicator's point-to-point ops (see make_nccl_communicator).
//  - Clock: now_s() is system_clock seconds minus 1.6e9 (comparable across nodes to the
//    accuracy of their clock sync); Event::time_s() = host time of an anchor event +
//    cudaEventElapsedTime from it. Anchors are taken at construction and refreshed in
//    synchronize() (at most every 10 s, so the float milliseconds stay precise).
//  - Memory: alloc_bytes/free_bytes use the stream-ordered allocator (cudaMallocAsync on the
//    compute stream, pool kept reserved like a caching allocator), so a free never
//    synchronizes the device. peak_memory_bytes() is the peak of cudaMemGetInfo's
//    (total - free), sampled after every alloc/alloc_bytes, scratch growth and at the call:
//    everything on the GPU, CUDA context, NCCL and cuBLAS buffers included (other
//    processes on the same GPU too). The exact counter of what alloc/alloc_bytes hold is
//    cuda_memory_stats().
//  - upload/download: synchronous (the whole device is synchronized first), float <->
//    bf16 converted on the host (round to nearest even); comm buffers are bf16.
// Throws std::runtime_error "no CUDA device: <CUDA's message>" on a machine without a
// usable GPU, std::invalid_argument for o.compute == kF32 or a local_rank out of range.
std::unique_ptr<Device> make_cuda_device(const CudaOptions& o);

// The NCCL Communicator of world rank `rank` of `world`, on `device` (which must come from
// make_cuda_device; REQUIRES: it outlives the communicator).
//  - Bootstrap: rank 0 makes the ncclUniqueId of the world communicator and shares it
//    through `host` (any Communicator, used only for max_all; typically MPI), or, with
//    host == nullptr and o.id_file set, through the file `<id_file>.world` (written
//    atomically by rank 0, polled by the others for up to 10 minutes, removed by rank 0
//    once all ranks joined; use a fresh path per job, e.g. with $SLURM_JOB_ID, on a file
//    system all nodes see). world == 1 needs neither.
//  - create_group(color): the colors are all-gathered over the world communicator and the
//    group's communicator is ncclCommSplit(world, color, key = rank) (what MPI_Comm_split
//    does; NCCL exchanges the new id itself). REQUIRES: color >= 0.
//  - collective(): on the device's stream for `s` (later work on `s` follows it):
//    all-reduce/reduce-scatter (sum), all-gather, broadcast (root members[0]), all-to-all
//    as ncclGroupStart + one ncclSend/ncclRecv per member + ncclGroupEnd.
//  - send/recv: ncclSend/ncclRecv (peer = world rank) on the device's dedicated p2p send /
//    recv streams, after all work enqueued on `s` before them. Work on `s` after them does
//    not wait for them (wait on the returned Event), except gemm/attention/elementwise and
//    collectives on `s`, which do; so a send and a recv never serialize, whichever stream
//    they name. Sends to higher ranks and to lower ranks use two separate communicators
//    (split from the world one), so forward and backward pipeline traffic never queue
//    behind each other inside NCCL either. NCCL has no tags: messages between two ranks
//    match in issue order, `tag` is not checked.
//  - group_begin/group_end: ncclGroupStart/ncclGroupEnd. Events returned inside a group are
//    recorded at group_end; waiting on one before that throws std::logic_error.
//  - Control plane (barrier/gather/max_all): delegated to `host` when given, else over
//    the world NCCL communicator on a private stream.
// Throws std::invalid_argument when rank/world disagree with `host` or neither `host` nor
// o.id_file is given with world > 1; std::runtime_error on NCCL errors (message names
// rank, host and NCCL's last error; rerun with NCCL_DEBUG=INFO for the details).
std::unique_ptr<Communicator> make_nccl_communicator(Device& device, Communicator* host, int rank, int world,
                                                     const CudaOptions& o);

// Library versions for fingerprints: "CUDA runtime 13.0, driver 13.0, cuBLAS 13.1.0,
// NCCL 2.28.9, GPU NVIDIA H200 (sm_90)"; without a usable GPU the GPU part is
// "no CUDA device: <CUDA's message>". Never throws.
std::string cuda_describe();

// Memory counters of a device from make_cuda_device, bytes. Throws std::invalid_argument
// for another kind of Device.
struct CudaMemoryStats {
  double device_used_peak_bytes = 0;  // what peak_memory_bytes() returns
  double tracked_live_bytes = 0;      // held now by alloc() and alloc_bytes()
  double tracked_peak_bytes = 0;      // peak of the above since reset_peak_memory()
  double scratch_bytes = 0;           // GEMM/attention/elementwise operand pool + workspaces
};
CudaMemoryStats cuda_memory_stats(Device& device);

}  // namespace stepcast::exec

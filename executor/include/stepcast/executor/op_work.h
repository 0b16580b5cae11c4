// What a Program op asks a real machine to do. The Program carries FLOPs, bytes and
// cost-model durations, not kernel shapes; op_work() turns an op into work of the same
// size (docs/executor.md "From ops to kernels"). A compute op has up to three parts, as
// lower() records them (program.h): GEMM FLOPs, attention-core FLOPs (core_fraction) and
// the bytes of its memory-bound part:
//   GEMM part        one GEMM with m = tokens per rank per microbatch, k = hidden size
//                    and n chosen so that 2mnk equals the part's FLOPs;
//   attention part   batched Q.K^T and P.V over the rank's heads (d = head_dim, sq = the
//                    rank's tokens), sk chosen so the FLOPs match, plus the softmax pass;
//   memory part      an elementwise pass streaming the bytes;
//   ops with a duration and nothing else (optimizer, input, ops of hand-built Programs)
//                    stream duration x hbm_efficiency x HBM bandwidth of the scenario's GPU;
//   the CP ring (a fixed-duration op on the CP stream) cp-1 neighbour exchanges;
//   an offload copy (a fixed-duration op on Stream::kHostOut / kHostIn) a copy of its bytes
//                    from device memory to pinned host memory, or back;
//   the host optimizer step (ComputeClass::kHostOptimizer) the host's Adam (or SGD) over the
//                    parameters its bytes stand for (host_optimizer_bytes_per_param).
#pragma once

#include "stepcast/executor/backend.h"
#include "stepcast/models/program.h"
#include "stepcast/models/specs.h"

namespace stepcast::exec {

// The model, cluster and plan a Program was lowered from.
struct ExecContext {
  ModelSpec model;
  ClusterSpec cluster;
  Plan plan;
  Workload workload;
};

struct OpWork {
  enum class Kind : std::uint8_t {
    kNone,
    kCompute,
    kCollective,
    kSend,
    kRecv,
    kRing,
    kAlloc,
    kFree,
    kHostCopy,
    kHostStep
  };
  Kind kind = Kind::kNone;
  bool has_gemm = false, has_attention = false;   // kCompute parts (bytes > 0: the memory part)
  GemmShape gemm;
  AttentionShape attention;
  double bytes = 0;   // compute: streamed; comm: nccl-tests size; ring: one exchange; alloc/free
  int ring_steps = 0;
  bool to_host = false;  // kHostCopy: device to host (else host to device)
  double elements = 0;   // kHostStep: parameters the host optimizer updates
  bool adam = true;      // kHostStep: Adam, else SGD with momentum
};

OpWork op_work(const ExecContext& ctx, const Op& op);

// Tokens one rank processes per microbatch (microbatch x seq_len / cp).
double tokens_per_rank(const ExecContext& ctx);

}  // namespace stepcast::exec

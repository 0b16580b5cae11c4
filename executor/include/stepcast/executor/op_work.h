// What a Program op asks a real machine to do. The Program carries FLOPs, bytes and
// cost-model durations, not kernel shapes; op_work() turns an op into work of the same
// size (docs/executor.md "From ops to kernels"):
//   GEMM ops         one GEMM with m = tokens per rank per microbatch, k = hidden size
//                    and n chosen so that 2mnk equals the op's FLOPs;
//   attention ops    batched Q.K^T and P.V over the rank's heads (d = head_dim, sq = the
//                    rank's tokens), sk chosen so the FLOPs match, plus the softmax pass;
//   memory-bound ops (elementwise, optimizer, input) the bytes the cost model streamed:
//                    duration x hbm_efficiency x HBM bandwidth of the scenario's GPU;
//   ops with a duration but no FLOPs (context parallelism's projections) a GEMM of the
//                    FLOPs the cost model's GEMM rate gives that duration;
//   the CP ring (a fixed-duration op on the CP stream) cp-1 neighbour exchanges.
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
  enum class Kind : std::uint8_t { kNone, kGemm, kAttention, kElementwise, kCollective, kSend, kRecv, kRing, kAlloc, kFree };
  Kind kind = Kind::kNone;
  GemmShape gemm;
  AttentionShape attention;
  double bytes = 0;   // elementwise: streamed; comm: nccl-tests size; ring: one exchange; alloc/free
  int ring_steps = 0;
};

OpWork op_work(const ExecContext& ctx, const Op& op);

// Tokens one rank processes per microbatch (microbatch x seq_len / cp).
double tokens_per_rank(const ExecContext& ctx);

}  // namespace stepcast::exec

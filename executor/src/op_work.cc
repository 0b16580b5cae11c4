#include "stepcast/executor/op_work.h"

#include <algorithm>
#include <cmath>

#include "stepcast/models/compute.h"

namespace stepcast::exec {

double tokens_per_rank(const ExecContext& ctx) {
  return static_cast<double>(ctx.plan.microbatch) * static_cast<double>(ctx.workload.seq_len) / ctx.plan.cp;
}

namespace {

std::int64_t at_least_one(double x) { return std::max<std::int64_t>(1, std::llround(x)); }

GemmShape gemm_of_flops(const ExecContext& ctx, double flops) {
  GemmShape g;
  g.m = at_least_one(tokens_per_rank(ctx));
  g.k = std::max<std::int64_t>(1, ctx.model.hidden_size);
  g.n = at_least_one(flops / (2.0 * static_cast<double>(g.m) * static_cast<double>(g.k)));
  return g;
}

}  // namespace

OpWork op_work(const ExecContext& ctx, const Op& op) {
  OpWork w;
  const GpuSpec& gpu = ctx.cluster.gpu;
  switch (op.kind) {
    case OpKind::kAlloc: w.kind = OpWork::Kind::kAlloc; w.bytes = op.bytes; return w;
    case OpKind::kFree: w.kind = OpWork::Kind::kFree; w.bytes = op.bytes; return w;
    case OpKind::kCollective: w.kind = OpWork::Kind::kCollective; w.bytes = op.bytes; return w;
    case OpKind::kSend: w.kind = OpWork::Kind::kSend; w.bytes = op.bytes; return w;
    case OpKind::kRecv: w.kind = OpWork::Kind::kRecv; w.bytes = op.bytes; return w;
    case OpKind::kCompute: break;
  }
  const double seconds = op.duration.seconds();
  if (op.stream != Stream::kCompute) {
    // A fixed-duration transfer standing for a sequence of exchanges (the CP ring).
    w.kind = OpWork::Kind::kRing;
    w.bytes = op.bytes;
    w.ring_steps = std::max(0, ctx.plan.cp - 1);
    if (w.bytes <= 0 || w.ring_steps == 0) w.kind = OpWork::Kind::kNone;
    return w;
  }
  switch (op.cclass) {
    case ComputeClass::kGemm: {
      double flops = op.flops;
      if (flops <= 0 && seconds > 0) {
        flops = seconds * gemm_efficiency_max(gpu, ctx.plan.precision) * peak_flops(gpu, ctx.plan.precision);
      }
      if (flops <= 0) return w;
      w.kind = OpWork::Kind::kGemm;
      w.gemm = gemm_of_flops(ctx, flops);
      return w;
    }
    case ComputeClass::kAttention: {
      if (op.flops <= 0) return w;
      AttentionShape a;
      a.batch = std::max<std::int64_t>(1, ctx.model.num_attention_heads / std::max(1, ctx.plan.tp));
      a.d = std::max<std::int64_t>(1, ctx.model.head_dim);
      a.sq = at_least_one(tokens_per_rank(ctx));
      a.sk = at_least_one(op.flops / (4.0 * static_cast<double>(a.batch * a.sq * a.d)));
      w.kind = OpWork::Kind::kAttention;
      w.attention = a;
      return w;
    }
    case ComputeClass::kElementwise:
    case ComputeClass::kOptimizer:
    case ComputeClass::kInput:
      if (seconds <= 0) return w;
      w.kind = OpWork::Kind::kElementwise;
      w.bytes = seconds * gpu.hbm_efficiency * gpu.hbm_bandwidth_GBps * 1e9;
      return w;
  }
  return w;
}

}  // namespace stepcast::exec

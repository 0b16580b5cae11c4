#include "stepcast/executor/op_work.h"

#include <algorithm>
#include <cmath>

#include "stepcast/models/layer_cost.h"

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
  if (op.stream == Stream::kHostOut || op.stream == Stream::kHostIn) {
    // An offload transfer over the host link (lower.cc offload_copies).
    w.kind = op.bytes > 0 ? OpWork::Kind::kHostCopy : OpWork::Kind::kNone;
    w.bytes = op.bytes;
    w.to_host = op.stream == Stream::kHostOut;
    return w;
  }
  if (op.stream == Stream::kDp) {
    // DeepSpeed 2021's memsets and per-rank copies beside its ZeRO-3 collectives (lower.cc
    // zdp_work): the executor's collectives gather and reduce flat buffers, nothing to copy.
    w.kind = OpWork::Kind::kNone;
    return w;
  }
  if (op.stream != Stream::kCompute) {
    // A fixed-duration transfer standing for a sequence of exchanges (the CP ring).
    w.kind = OpWork::Kind::kRing;
    w.bytes = op.bytes;
    w.ring_steps = std::max(0, ctx.plan.cp - 1);
    if (w.bytes <= 0 || w.ring_steps == 0) w.kind = OpWork::Kind::kNone;
    return w;
  }
  double gemm_flops = 0, core_flops = 0;
  switch (op.cclass) {
    case ComputeClass::kGemm:
      core_flops = op.flops * op.core_fraction;
      gemm_flops = op.flops - core_flops;
      break;
    case ComputeClass::kAttention:
      // Without a recorded split (hand-built Programs) an attention op is all core.
      core_flops = op.core_fraction > 0 ? op.flops * op.core_fraction : op.flops;
      gemm_flops = op.flops - core_flops;
      break;
    case ComputeClass::kElementwise:
    case ComputeClass::kOptimizer:
    case ComputeClass::kInput:
      break;
    case ComputeClass::kHostOptimizer:
      w.bytes = op.bytes;
      w.adam = ctx.plan.optimizer == Optimizer::kAdam;
      w.elements = op.bytes / host_optimizer_bytes_per_param(ctx.plan.optimizer);
      w.kind = w.elements >= 1 ? OpWork::Kind::kHostStep : OpWork::Kind::kNone;
      return w;
    case ComputeClass::kHost:
    case ComputeClass::kInterference:
      // The host's dispatch time: a real run spends it in the framework, not in a kernel.
      // Interference: a real run's kernels slow down by themselves while NCCL runs.
      w.kind = OpWork::Kind::kNone;
      return w;
  }
  w.bytes = op.bytes;
  if (gemm_flops <= 0 && core_flops <= 0 && w.bytes <= 0 && seconds > 0) {
    w.bytes = seconds * gpu.hbm_efficiency * gpu.hbm_bandwidth_GBps * 1e9;
  }
  if (gemm_flops > 0) {
    w.has_gemm = true;
    w.gemm = gemm_of_flops(ctx, gemm_flops);
  }
  if (core_flops > 0) {
    AttentionShape a;
    a.batch = std::max<std::int64_t>(1, ctx.model.num_attention_heads / std::max(1, ctx.plan.tp));
    a.d = std::max<std::int64_t>(1, ctx.model.head_dim);
    a.sq = at_least_one(tokens_per_rank(ctx));
    a.sk = at_least_one(core_flops / (4.0 * static_cast<double>(a.batch * a.sq * a.d)));
    w.has_attention = true;
    w.attention = a;
  }
  if (w.has_gemm || w.has_attention || w.bytes > 0) w.kind = OpWork::Kind::kCompute;
  return w;
}

}  // namespace stepcast::exec

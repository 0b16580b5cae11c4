#include "stepcast/models/stack.h"

#include <array>
#include <string>

#include "stepcast/models/layer_cost.h"
#include "stepcast/models/names.h"
#include "stepcast/models/params.h"
#include "stepcast/models/presets.h"

namespace stepcast {

const StackProfile& stack_profile(Stack stack) {
  // estimate() asks once per call: look the names up once, not a string map per estimate.
  constexpr std::size_t kStacks = Names<Stack>::kTable.size();
  static const std::array<const StackProfile*, kStacks> profiles = [] {
    std::array<const StackProfile*, kStacks> p{};
    for (const auto& e : Names<Stack>::kTable) {
      p[static_cast<std::size_t>(e.value)] = &builtin_presets().stacks.at(std::string(e.name));
    }
    return p;
  }();
  return *profiles[static_cast<std::size_t>(stack)];
}

CollKind dp_grad_collective(const Plan& p) {
  return p.zero == 0 || stack_profile(p.stack).grad_reduce == GradReduce::kAllReduce ? CollKind::kAllReduce
                                                                                     : CollKind::kReduceScatter;
}

bool dp_grad_overlapped(const Plan& p) { return p.overlap_grad_reduce && stack_profile(p.stack).grad_reduce_overlap; }

int pipeline_exchange_transfers(const Plan& p) {
  return p.pp > 1 && p.schedule == Schedule::kOneFOneB && stack_profile(p.stack).pipeline_p2p == PipelineP2p::kSeparate
             ? 2
             : 1;
}

LayerKernels layer_kernels(const ModelSpec& m, const Plan& p, bool moe, const StackProfile& s) {
  // docs/model-reference.md section 4.3: GEMMs, attention, and the elementwise kernels.
  const bool gated = m.ffn_matrices == 3;
  const double fc1 = gated ? s.gated_fc1_gemms : 1;
  double gemms = s.qkv_gemms + 1;  // QKV projections + output projection
  double elem = m.norm == NormKind::kRmsNorm ? s.rmsnorm_kernels : s.layernorm_kernels;
  if (m.position_embedding == PositionEmbedding::kRope) elem += s.rope_kernels;
  if (has_qk_norm(m)) elem += s.rmsnorm_kernels;  // q_norm and k_norm: RMSNorms, two as the layer's two
  elem += s.residual_kernels;
  if (m.dropout) elem += 2.0 * s.dropout_kernels;
  if (m.dropout && !p.flash_attention) elem += 1;  // the attention probabilities' dropout kernel
  const double act = gated ? s.gated_activation_kernels : s.activation_kernels;
  if (!moe) {
    gemms += fc1 + 1;
    elem += act;
  } else {
    const MoeSpec& e = *m.moe;
    const double local = static_cast<double>(e.num_experts) / p.ep;
    const double launches = s.moe_gemm_per_expert ? local : 1.0;  // GEMM launches per expert matrix
    const double groups = s.moe_grouped_gemm ? 1.0 : local;       // the activation's launches
    gemms += 1 + launches * (fc1 + 1);                            // router + routed experts
    elem += s.router_kernels + groups * act;
    if (e.num_shared_experts > 0) {
      gemms += fc1 + 1;
      elem += act;
    }
  }
  LayerKernels k;
  k.fwd = gemms + s.attention_fwd_kernels + elem;
  k.bwd = 2 * gemms + s.attention_bwd_kernels + s.elementwise_bwd_per_fwd * elem;
  if (p.recompute == Recompute::kFull) {
    k.bwd += k.fwd;
  } else if (p.recompute == Recompute::kSelectiveOp) {
    // torchtitan's op-level policy: the matmuls not saved and every elementwise kernel.
    double mms = 0;
    for (const OpSacMm& mm : op_sac_split(m, p).mms) mms += mm.recompute_weight;
    k.bwd += mms + elem;
  } else if (p.recompute == Recompute::kSelective) {
    // The recomputed modules' forward kernels (layer_cost.cc, the same modules).
    using RM = RecomputeModule;
    if (p.recomputes(RM::kCoreAttn)) k.bwd += s.attention_fwd_kernels;
    const double norm = m.norm == NormKind::kRmsNorm ? s.rmsnorm_kernels : s.layernorm_kernels;
    if (p.recomputes(RM::kLayernorm)) k.bwd += norm / 2 * ((moe ? 1 : 0) + (m.mla ? 1 : 0));
    if (m.mla && p.recomputes(RM::kMlaUpProj)) k.bwd += 2 + s.rope_kernels;
    if (!moe && p.recomputes(RM::kMlp)) k.bwd += fc1 + 1 + act;
    if (moe) {
      const MoeSpec& e = *m.moe;
      const double local = static_cast<double>(e.num_experts) / p.ep;
      const double launches = s.moe_gemm_per_expert ? local : 1.0;
      const double groups = s.moe_grouped_gemm ? 1.0 : local;
      const double shared = e.num_shared_experts > 0 ? fc1 + 1 + act : 0.0;
      if (p.recomputes(RM::kMoe)) {
        k.bwd += 1 + s.router_kernels + launches * (fc1 + 1) + groups * act + shared;
      } else {
        if (p.recomputes(RM::kMoeAct)) k.bwd += groups * act;
        if (p.recomputes(RM::kSharedExperts)) k.bwd += shared;
      }
    }
  }
  k.host_s = (k.fwd + k.bwd) * s.host_us_per_kernel * 1e-6;
  return k;
}

}  // namespace stepcast

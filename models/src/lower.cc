#include "stepcast/models/lower.h"

#include <algorithm>

#include <fmt/format.h>

#include "stepcast/models/compute.h"
#include "stepcast/models/estimate.h"
#include "stepcast/models/layer_cost.h"
#include "stepcast/models/params.h"
#include "stepcast/models/stack.h"
#include "stepcast/models/zero3_fetch.h"

namespace stepcast {

int schedule_warmup(const Plan& plan, int stage) {
  const int p = plan.pp, m = static_cast<int>(plan.accumulation());
  if (plan.schedule == Schedule::kGpipe) return m;
  const int v = plan.schedule == Schedule::kInterleaved ? plan.virtual_stages : 1;
  const int total = m * v;
  // Megatron-Core get_pp_rank_microbatches: 2 (pp - rank - 1) + (v - 1) x the microbatch group.
  int warmup = v == 1 ? std::min(p - stage - 1, m) : std::min(2 * (p - stage - 1) + (v - 1) * plan.vp_group(), total);
  // All-to-all overlap: one more forward, so that each merged step's forward and backward
  // belong to different microbatches (Megatron-Core schedules.py get_pp_rank_microbatches;
  // combined_1f1b.py without pipelining: the first microbatch's forward alone).
  if (plan.moe_a2a_overlap) warmup = std::min(warmup + 1, total);
  return warmup;
}

std::vector<ScheduleStep> interleaved_table(const Plan& plan) {
  // Megatron-Core schedules.py get_schedule_table: microbatches in groups of vp_group(); each
  // group runs through chunk 0, then chunk 1, ...; the last group takes the remainder.
  const int m = static_cast<int>(plan.accumulation()), v = plan.virtual_stages, g = plan.vp_group();
  std::vector<ScheduleStep> table;
  table.reserve(static_cast<std::size_t>(m) * static_cast<std::size_t>(v));
  for (int lo = 0; lo < m; lo += g) {
    const int hi = lo + g >= m ? m : lo + g;
    for (int chunk = 0; chunk < v; ++chunk) {
      for (int mb = lo; mb < hi; ++mb) table.push_back({true, mb, chunk});
    }
  }
  return table;
}

std::vector<ScheduleStep> pipeline_schedule(const Plan& plan, int stage) {
  const int m = static_cast<int>(plan.accumulation());
  std::vector<ScheduleStep> out;
  if (plan.schedule == Schedule::kGpipe) {
    for (int i = 0; i < m; ++i) out.push_back({true, i, 0});
    for (int i = 0; i < m; ++i) out.push_back({false, i, 0});
    return out;
  }
  const int v = plan.schedule == Schedule::kInterleaved ? plan.virtual_stages : 1;
  const int total = m * v;
  const int warmup = schedule_warmup(plan, stage);
  // k-th forward (backward) chunk-microbatch of this stage, Megatron's interleaving.
  const std::vector<ScheduleStep> table = v == 1 ? std::vector<ScheduleStep>{} : interleaved_table(plan);
  auto fwd = [&](int k) {
    if (v == 1) return ScheduleStep{true, k, 0};
    return table[static_cast<std::size_t>(k)];
  };
  auto bwd = [&](int k) {
    if (v == 1) return ScheduleStep{false, k, 0};
    const ScheduleStep& f = table[static_cast<std::size_t>(k)];
    return ScheduleStep{false, f.microbatch, v - 1 - f.chunk};
  };
  for (int k = 0; k < warmup; ++k) out.push_back(fwd(k));
  for (int i = 0; i < total - warmup; ++i) {
    out.push_back(fwd(warmup + i));
    out.push_back(bwd(i));
  }
  for (int i = total - warmup; i < total; ++i) out.push_back(bwd(i));
  return out;
}

namespace {

constexpr std::uint32_t kNone = UINT32_MAX;

class StageBuilder {
 public:
  StageBuilder(Program& prog, const ModelSpec& m, const ClusterSpec& c, const Plan& p,
               const Workload& w, int stage)
      : prog_(prog), m_(m), c_(c), p_(p), w_(w), stage_(stage), role_(prog.roles[static_cast<std::size_t>(stage)]) {
    role_.stage = stage;
    dense_ = layer_cost(m, c, p, w.seq_len, false);
    dense_comm_ = layer_comm(m, c, p, w.seq_len, false, dense_);
    if (m.moe) {
      moe_ = layer_cost(m, c, p, w.seq_len, true);
      moe_comm_ = layer_comm(m, c, p, w.seq_len, true, moe_);
      if (p.moe_deepep_dispatcher()) prog.deepep_rdma_per_byte = moe_comm_.ep_rdma_per_byte;
    }
    host_dense_ = host_stall(m, p, dense_, dense_comm_, false);
    if (m.moe) host_moe_ = host_stall(m, p, moe_, moe_comm_, true);
    if (p.partial_full_recompute()) {
      // The layers that keep their activations (recompute_num_layers) wait for the host as
      // without recomputation.
      const Plan kept = p.without_recompute();
      auto stall = [&](bool moe) {
        const LayerCost lc = layer_cost(m, c, kept, w.seq_len, moe);
        return host_stall(m, kept, lc, layer_comm(m, c, kept, w.seq_len, moe, lc), moe);
      };
      host_dense_kept_ = stall(false);
      if (m.moe) host_moe_kept_ = stall(true);
    }
    logits_ = logits_cost(m, c, p, w.seq_len);
    if (zero3_module_fetch(m, p)) {
      // DeepSpeed's 2021 per-module fetch (zero3_fetch.h): the coordinator's hooks over one
      // microbatch's trace, replayed by zuse() in the same order.
      zmod_ = true;
      ztrace_ = zero3_trace(m, p, dense_, logits_.fwd_s, logits_.bwd_s);
      zhooks_ = zero3_coordinate(ztrace_, zero3_policy(stack_profile(p.stack)));
      const StackProfile& stack = stack_profile(p.stack);
      zlaunch_s_ = stack.host_us_per_kernel * 1e-6;
      zlist_ = stack.zero3_gather == Zero3Gather::kSyncedList;
      if (zlist_) zwork_ = zero3_gather_work(c.gpu, p.grad_bytes, p.dp * p.cp, stack.host_us_per_kernel);
    }
    if (m.mtp_layers > 0) {
      mtp_ = mtp_projection_cost(m, c, p, w.seq_len);
      mtp_act_ = mtp_activation_bytes(m, p, w.seq_len);
    }
    chunks_ = p.pp * p.virtual_stages;
    p2p_transfers_ = static_cast<std::uint8_t>(pipeline_exchange_transfers(p));
    tokens_ = p.microbatch * static_cast<double>(w.seq_len) / p.cp;
    act_dense_ = layer_activation_bytes(m, p, w.seq_len, false);
    act_moe_ = m.moe ? layer_activation_bytes(m, p, w.seq_len, true) : 0.0;
    const Plan no_rc = p.without_recompute();
    full_dense_ = layer_activation_bytes(m, no_rc, w.seq_len, false);
    full_moe_ = m.moe ? layer_activation_bytes(m, no_rc, w.seq_len, true) : 0.0;
    if (p.recompute == Recompute::kSelective || p.recompute == Recompute::kSelectiveOp) {
      // What a layer recomputes, live during its backward (the static model's term,
      // estimate.cc stage_memory).
      full_dense_ -= act_dense_;
      full_moe_ = m.moe ? full_moe_ - act_moe_ : 0.0;
    }
    sp_ = p.sequence_parallel && p.tp > 1;
    m_count_ = static_cast<int>(p.accumulation());
    const MemoryBreakdown mem = stage_memory(m, c, p, w, stage);
    role_.static_bytes = mem.params + mem.grads + mem.optimizer + mem.buffers;
    dense_layers_ = m.moe ? m.moe->num_dense_layers : m.num_layers;
    layer_dense_ = layer_rank_params(m, p, false);
    if (m.moe) layer_moe_ = layer_rank_params(m, p, true);
    copy_out_dense_s_ = zero3_copy_out_s(c, p, layer_dense_);
    copy_out_moe_s_ = zero3_copy_out_s(c, p, layer_moe_);
    copy_in_dense_s_ = zero3_copy_in_s(c, p, layer_dense_);
    copy_in_moe_s_ = zero3_copy_in_s(c, p, layer_moe_);
    if (p.offload_activations > 0 || p.offload_weights > 0) {
      // Offload (layer_cost.h): whole layers, the stage's first ones in model order.
      off_dense_ = layer_offload(c, p, dense_, dense_comm_, act_dense_, 2.0 * layer_dense_.dense);
      if (m.moe) {
        off_moe_ = layer_offload(c, p, moe_, moe_comm_, act_moe_, 2.0 * (layer_moe_.dense + layer_moe_.expert));
      }
      std::vector<int> mine;
      for (int v = 0; v < p.virtual_stages; ++v) {
        const int chunk = stage + v * p.pp;
        const int first = chunk_first_layer(m, p, chunk);
        for (int i = 0; i < chunk_layers(m, p, chunk); ++i) mine.push_back(first + i);
      }
      const int n = static_cast<int>(mine.size());
      if (const int k = offloaded_layers(p.offload_activations, n); k > 0) act_off_end_ = mine[static_cast<std::size_t>(k - 1)] + 1;
      if (const int k = offloaded_layers(p.offload_weights, n); k > 0) weight_off_end_ = mine[static_cast<std::size_t>(k - 1)] + 1;
    }
  }

  void build() {
    std::uint32_t input = kNone;
    if (stage_ == 0) {  // always present (possibly 0 s): input stalls lengthen it
      Op op = compute(ComputeClass::kInput, SimTime::from_s(w_.input_time_s), 0, 0);
      input = add(op, "input", {});
    }
    if (p_.zero >= 1 && p_.zero < 3 && p_.overlap_param_gather) param_gather_ = gather_params({}, /*overlapped=*/true);
    const std::vector<ScheduleStep> steps = pipeline_schedule(p_, stage_);
    // Receives in the order the steps need them; with p2p overlap the receive of step i+1
    // is posted before step i computes (on its own stream, so it waits only for its data).
    const bool ahead = p_.pp > 1 && p_.schedule == Schedule::kInterleaved && p_.overlap_p2p_comm;
    // All-to-all overlap: the steady state's forward/backward pairs run as merged steps.
    const std::size_t warmup = static_cast<std::size_t>(schedule_warmup(p_, stage_));
    const std::size_t steady_end = steps.size() - warmup;  // the cool-down's first step
    auto span_at = [&](std::size_t i) -> std::size_t {
      return p_.moe_a2a_overlap && i >= warmup && i + 1 < steady_end && (i - warmup) % 2 == 0 ? 2 : 1;
    };
    // The receives of the next span (one step, or the two of a merged step).
    std::uint32_t next = kNone, next2 = kNone;
    for (std::size_t i = 0; i < steps.size();) {
      const ScheduleStep& st = steps[i];
      const std::size_t span = span_at(i);
      std::uint32_t r = next, r2 = next2;
      if (i == 0 || !ahead) {
        r = recv_for(st, ahead);
        r2 = span == 2 ? recv_for(steps[i + 1], ahead) : kNone;
      }
      if (ahead && i + span < steps.size()) {
        const std::size_t j = i + span;
        next = recv_for(steps[j], true);
        next2 = span_at(j) == 2 ? recv_for(steps[j + 1], true) : kNone;
      }
      if (span == 2) merged(st, steps[i + 1], input, r, r2);
      else if (st.forward) forward(st.microbatch, st.chunk, input, r);
      else backward(st.microbatch, st.chunk, r);
      i += span;
    }
    finish_step();
  }

  // The pipeline receive a step starts with (kNone: none, the first or last chunk).
  std::uint32_t recv_for(const ScheduleStep& st, bool ahead) {
    const int k = chunk_of(st.chunk);
    const int mb = st.microbatch;
    if (st.forward ? k == 0 : k == chunks_ - 1) return kNone;
    const int peer = st.forward ? k - 1 : k + 1;
    Op r = p2p(OpKind::kRecv, stage_of_chunk(peer), tag(mb, peer, !st.forward), mb);
    if (ahead) r.stream = Stream::kPpRecv;
    const std::uint32_t id = add(r, fmt::format("pp.recv {} mb{} chunk{}", st.forward ? 'F' : 'B', mb, k), {});
    // Posted ahead, its transfer overlaps the compute issued next (that step's chunk).
    return ahead ? contend(id) : id;
  }

 private:
  // --- op helpers -----------------------------------------------------------------
  std::uint32_t add(Op op, std::string name, std::initializer_list<std::uint32_t> deps) {
    op.dep_begin = static_cast<std::uint32_t>(role_.deps.size());
    for (std::uint32_t d : deps) {
      if (d != kNone) role_.deps.push_back(d);
    }
    op.dep_count = static_cast<std::uint32_t>(role_.deps.size()) - op.dep_begin;
    op.name = prog_.intern(std::move(name));
    role_.ops.push_back(op);
    return static_cast<std::uint32_t>(role_.ops.size() - 1);
  }
  // Records what an op's duration is made of, for the executor (program.h): `mem_s`
  // seconds of memory-bound work (stored as the bytes they stream) and `core_flops` of
  // attention core among its FLOPs. Returns `op`.
  std::uint32_t annotate(std::uint32_t op, double mem_s, double core_flops) {
    Op& o = role_.ops[op];
    // The job's pace (compute.h job_pace) is in the seconds, not in the bytes streamed.
    o.bytes = mem_s / job_pace(c_) * c_.gpu.hbm_efficiency * c_.gpu.hbm_bandwidth_GBps * 1e9;
    o.core_fraction = o.flops > 0 ? static_cast<float>(std::clamp(core_flops / o.flops, 0.0, 1.0)) : 0.0f;
    return op;
  }
  void add_dep(std::uint32_t op, std::uint32_t dep) {
    // Only valid for the op just added (its deps are the last entries).
    if (dep == kNone) return;
    role_.deps.push_back(dep);
    ++role_.ops[op].dep_count;
  }
  Op compute(ComputeClass cc, SimTime d, double flops, int layer, int mb = -1) const {
    Op op;
    op.kind = OpKind::kCompute;
    op.stream = Stream::kCompute;
    op.cclass = cc;
    op.duration = d;
    op.flops = flops;
    op.layer = layer;
    op.microbatch = mb;
    return op;
  }
  Op collective(CollKind k, GroupKind g, double bytes, int layer, int mb) const {
    Op op;
    op.kind = OpKind::kCollective;
    op.coll = k;
    op.group = g;
    op.bytes = bytes;
    op.layer = layer;
    op.microbatch = mb;
    switch (g) {
      case GroupKind::kTp:
      case GroupKind::kEtp:
        op.stream = Stream::kTp;
        op.comm = CommClass::kTp;
        break;
      case GroupKind::kCp: op.stream = Stream::kCp; op.comm = CommClass::kCp; break;
      case GroupKind::kEp:
      case GroupKind::kEtpEp:
        op.stream = Stream::kEp;
        op.comm = CommClass::kEp;
        break;
      case GroupKind::kDp:
      case GroupKind::kEdp:
      case GroupKind::kWorld:
        op.stream = Stream::kDp;
        op.comm = CommClass::kDp;
        break;
      case GroupKind::kPp: op.stream = Stream::kPp; op.comm = CommClass::kPp; break;
    }
    return op;
  }
  // A pipeline send or recv of one microbatch's activation (or its gradient).
  Op p2p(OpKind kind, int peer_stage, std::uint32_t p2p_tag, int mb) const {
    Op op;
    op.kind = kind;
    op.stream = Stream::kPp;
    op.comm = CommClass::kPp;
    op.peer_stage = peer_stage;
    op.tag = p2p_tag;
    op.bytes = p2p_bytes();
    op.transfers = p2p_transfers_;
    op.microbatch = mb;
    return op;
  }
  std::uint32_t memory(bool alloc, double bytes, std::string name, std::uint32_t dep) {
    Op op;
    op.kind = alloc ? OpKind::kAlloc : OpKind::kFree;
    op.stream = Stream::kCompute;
    op.bytes = bytes;
    return add(op, std::move(name), {dep});
  }

  bool is_moe(int layer) const { return m_.moe && layer >= dense_layers_; }
  int chunk_of(int j) const { return stage_ + j * p_.pp; }
  int stage_of_chunk(int k) const { return k % p_.pp; }
  std::uint32_t tag(int mb, int sender_chunk, bool backward) const {
    return static_cast<std::uint32_t>((mb * chunks_ + sender_chunk) * 2 + (backward ? 1 : 0));
  }

  // TP collectives around a block: with SP an all-gather before and a reduce-scatter
  // after; without SP an all-reduce after.
  // An MoE block's pair is the expert-TP gather and scatter of the dispatched tokens
  // (layer_comm's moe_tp_bytes; none with etp = 1), on the expert-TP group: its own etp ranks
  // when the experts are folded (etp != tp, also under tp 1), else the TP group.
  const LayerCost& lc_of(bool moe) const { return moe ? moe_ : dense_; }
  // Whether main layer `layer` recomputes in full (recompute "full", within
  // recompute_num_layers of its chunk's first layer).
  bool full_recompute(int layer) const { return recomputes_in_full(m_, p_, layer); }
  // The activations a main layer keeps from its forward to its backward.
  double kept_activations(int layer) const {
    const bool moe = is_moe(layer);
    if (layer < act_off_end_) return 0.0;  // in host memory
    if (p_.recompute_group() > 1) {
      // A group keeps its first layer's input only (the next layers' are recomputed).
      return recompute_group_of(m_, p_, layer).first == layer ? layer_activation_bytes(m_, p_, w_.seq_len, moe) : 0.0;
    }
    if (full_recompute(layer)) return layer_activation_bytes(m_, p_, w_.seq_len, moe);
    if (p_.recompute == Recompute::kFull) return moe ? full_moe_ : full_dense_;  // not recomputing
    return moe ? act_moe_ : act_dense_;
  }
  // Recomputation of parts of a layer (Megatron-Core's modules or torchtitan's ops).
  bool selective() const {
    return p_.recompute == Recompute::kSelective || p_.recompute == Recompute::kSelectiveOp;
  }
  double tp_bytes_of(int layer, bool mlp_block) const {
    return mlp_block && is_moe(layer) ? moe_comm_.moe_tp_bytes : dense_comm_.tp_bytes;
  }
  bool folded_pair(int layer, bool mlp_block) const { return mlp_block && is_moe(layer) && p_.expert_tp() != p_.tp; }
  std::uint32_t tp_before(std::uint32_t prev, int layer, int mb, const std::string& what, bool mlp_block) {
    const double bytes = tp_bytes_of(layer, mlp_block);
    const bool folded = folded_pair(layer, mlp_block);
    if ((!sp_ && !folded) || bytes <= 0) return prev;
    return add(collective(CollKind::kAllGather, folded ? GroupKind::kEtp : GroupKind::kTp, bytes, layer, mb),
               (folded ? "etp.ag " : "tp.ag ") + what, {prev});
  }
  std::uint32_t tp_after(std::uint32_t prev, int layer, int mb, const std::string& what, bool mlp_block) {
    const double bytes = tp_bytes_of(layer, mlp_block);
    const bool folded = folded_pair(layer, mlp_block);
    if ((p_.tp <= 1 && !folded) || bytes <= 0) return prev;
    if (folded) {
      return add(collective(CollKind::kReduceScatter, GroupKind::kEtp, bytes, layer, mb), "etp.rs " + what, {prev});
    }
    const CollKind k = sp_ ? CollKind::kReduceScatter : CollKind::kAllReduce;
    return add(collective(k, GroupKind::kTp, bytes, layer, mb), std::string(sp_ ? "tp.rs " : "tp.ar ") + what,
               {prev});
  }

  // Attention block (forward or backward or recompute) with CP ring exchange overlapped
  // with the attention core. Returns the last op.
  std::uint32_t attention(std::uint32_t prev, int layer, int mb, char pass) {
    const LayerCost& lc = is_moe(layer) ? moe_ : dense_;
    const bool bwd = pass == 'B';
    const double gemm = bwd ? lc.attn_gemm_bwd_s : lc.attn_gemm_s, elem = (bwd ? 2.0 : 1.0) * lc.attn_elem_s;
    const double gemm_flops = (bwd ? 2 : 1) * lc.attn_gemm_flops;
    // QKV projection (half of the GEMM time) and the memory-bound work before the core,
    // the output projection after it.
    return core_block(prev, layer, mb, pass, gemm / 2 + elem, gemm_flops / 2, gemm / 2, gemm_flops / 2, elem);
  }

  std::uint32_t mlp(std::uint32_t prev, int layer, int mb, char pass) {
    const bool moe = is_moe(layer);
    const LayerCost& lc = moe ? moe_ : dense_;
    const bool bwd = pass == 'B';
    const double t = bwd ? lc.mlp_bwd_s() : lc.mlp_fwd_s();
    const double flops = (bwd ? 2 : 1) * lc.mlp_flops;
    const std::string name = fmt::format("{} mb{} L{} {}", pass, mb, layer, moe ? "moe" : "mlp");
    if (moe && p_.moe_allgather_dispatcher() && p_.expert_tp() * p_.ep > 1) {
      // The all-gather dispatcher: its collectives of the pass (allgather_dispatch, the
      // ones layer_comm prices) before and after the experts.
      const DispatchPass d = allgather_dispatch(moe_comm_, bwd);
      auto coll = [&](std::uint32_t after, const DispatchCollective& c) {
        return add(
            collective(c.kind, GroupKind::kEtpEp, c.bytes, layer, mb),
            fmt::format("ep.{} {} mb{} L{} {}", c.kind == CollKind::kAllGather ? "ag" : "rs", pass, mb, layer, c.what),
            {after});
      };
      std::uint32_t x = prev;
      int i = 0;
      for (; i < d.n && !d.ops[i].after_experts; ++i) x = coll(x, d.ops[i]);
      x = annotate(add(compute(ComputeClass::kGemm, SimTime::from_s(t), flops, layer, mb), name, {x}),
                   (bwd ? 2 : 1) * lc.mlp_elem_s, 0);
      for (; i < d.n; ++i) x = coll(x, d.ops[i]);
      return x;
    }
    if (moe && p_.ep > 1) {
      const double bytes = moe_comm_.ep_bytes;
      const std::uint32_t a = add(collective(CollKind::kAllToAll, GroupKind::kEp, bytes, layer, mb),
                                  fmt::format("ep.a2a {} mb{} L{} {}", pass, mb, layer, bwd ? "combine" : "dispatch"),
                                  {prev});
      if (p_.moe_shared_expert_overlap && lc.shared_gemm_s > 0) {
        // The shared experts beside the all-to-all (their own op after `prev`, not after `a`);
        // the routed experts wait for both (layer_comm: the closed form's exposure).
        const double shared = bwd ? lc.shared_gemm_bwd_s : lc.shared_gemm_s;
        contend(a);
        const std::uint32_t sh = add(compute(ComputeClass::kGemm, SimTime::from_s(shared), 0, layer, mb),
                                     fmt::format("{} mb{} L{} shared experts", pass, mb, layer), {prev});
        const std::uint32_t e = annotate(
            add(compute(ComputeClass::kGemm, SimTime::from_s(t - shared), flops, layer, mb), name, {a, sh}),
            (bwd ? 2 : 1) * lc.mlp_elem_s, 0);
        return add(collective(CollKind::kAllToAll, GroupKind::kEp, bytes, layer, mb),
                   fmt::format("ep.a2a {} mb{} L{} {}", pass, mb, layer, bwd ? "dispatch" : "combine"), {e});
      }
      const std::uint32_t e = annotate(add(compute(ComputeClass::kGemm, SimTime::from_s(t), flops, layer, mb), name, {a}),
                                       (bwd ? 2 : 1) * lc.mlp_elem_s, 0);
      return add(collective(CollKind::kAllToAll, GroupKind::kEp, bytes, layer, mb),
                 fmt::format("ep.a2a {} mb{} L{} {}", pass, mb, layer, bwd ? "dispatch" : "combine"), {e});
    }
    return annotate(add(compute(ComputeClass::kGemm, SimTime::from_s(t), flops, layer, mb), name, {prev}),
                    (bwd ? 2 : 1) * lc.mlp_elem_s, 0);
  }

  // --- TP communication overlap (LayerCost::tp_overlap; layer_cost.h) -----------------
  // The collectives stay real collectives on the TP stream (the backend prices them, as
  // layer_comm() does); the GEMM beside them is split so that the engine's time equals the
  // closed form's: a ring all-gather beside the first n-1 chunks, the last chunk after both,
  // c + ... = g + max(c, (n-1) g) = n g + (n-1) max(0, c/(n-1) - g).

  // A zero-second op on the compute stream that waits for `x` and every op of `ops`.
  std::uint32_t join_all(std::uint32_t x, const std::vector<std::uint32_t>& ops, int layer, int mb, std::string name) {
    const std::uint32_t j = add(compute(ComputeClass::kElementwise, SimTime{}, 0, layer, mb), std::move(name), {x});
    for (std::uint32_t d : ops) add_dep(j, d);
    return j;
  }
  // A zero-second op on the compute stream that waits for `a` and `b`.
  std::uint32_t join(std::uint32_t a, std::uint32_t b, int layer, int mb, const std::string& name) {
    return add(compute(ComputeClass::kElementwise, SimTime{}, 0, layer, mb), name, {a, b});
  }
  // All-gather pipelined with a GEMM split into n chunks of `g` seconds (ring exchange).
  std::uint32_t ag_ring(std::uint32_t prev, double g, double flops, int layer, int mb, const std::string& name) {
    const double n = p_.tp;
    const std::uint32_t ag =
        contend(add(collective(CollKind::kAllGather, GroupKind::kTp, dense_comm_.tp_bytes, layer, mb),
                    "tp.ag " + name + " (overlapped)", {prev}));
    const std::uint32_t main = add(compute(ComputeClass::kGemm, SimTime::from_s((n - 1) * g), flops * (n - 1) / n, layer, mb),
                                   name + " chunks", {prev});
    return add(compute(ComputeClass::kGemm, SimTime::from_s(g), flops / n, layer, mb), name + " last chunk", {main, ag});
  }
  // A GEMM split into n chunks of `g` seconds pipelined with a reduce-scatter: the first
  // chunk, then the reduce-scatter beside the other n-1.
  std::uint32_t rs_pipeline(std::uint32_t prev, double g, double flops, int layer, int mb, const std::string& name) {
    const double n = p_.tp;
    const std::uint32_t first = add(compute(ComputeClass::kGemm, SimTime::from_s(g), flops / n, layer, mb),
                                    name + " first chunk", {prev});
    const std::uint32_t rs =
        contend(add(collective(CollKind::kReduceScatter, GroupKind::kTp, dense_comm_.tp_bytes, layer, mb),
                    "tp.rs " + name + " (overlapped)", {first}));
    const std::uint32_t rest = add(compute(ComputeClass::kGemm, SimTime::from_s((n - 1) * g), flops * (n - 1) / n, layer, mb),
                                   name + " chunks", {first});
    return join(rest, rs, layer, mb, "wait tp.rs " + name);
  }
  // A reduce-scatter issued after `prev` beside an independent GEMM of `g` seconds (bulk).
  std::uint32_t rs_bulk(std::uint32_t prev, double g, double flops, int layer, int mb, const std::string& name) {
    const std::uint32_t rs =
        contend(add(collective(CollKind::kReduceScatter, GroupKind::kTp, dense_comm_.tp_bytes, layer, mb),
                    "tp.rs " + name + " (overlapped)", {prev}));
    const std::uint32_t w = add(compute(ComputeClass::kGemm, SimTime::from_s(g), flops, layer, mb), name, {prev});
    return join(w, rs, layer, mb, "wait tp.rs " + name);
  }
  // `pre` seconds of compute, the attention core (with the CP ring exchange beside it when
  // cp > 1), then `post` seconds; `elem_s` of `pre` is memory-bound work. One op without CP.
  std::uint32_t core_block(std::uint32_t prev, int layer, int mb, char pass, double pre, double pre_flops,
                           double post, double post_flops, double elem_s) {
    const LayerCost& lc = is_moe(layer) ? moe_ : dense_;
    const LayerComm& cm = is_moe(layer) ? moe_comm_ : dense_comm_;
    const bool bwd = pass == 'B';
    const double core = bwd ? lc.attn_core_bwd_s : lc.attn_core_s;
    const double core_flops = (bwd ? lc.core_bwd_factor : 1) * lc.attn_core_flops;
    const std::string name = fmt::format("{} mb{} L{} attn", pass, mb, layer);
    if (p_.cp <= 1) {
      return annotate(add(compute(ComputeClass::kAttention, SimTime::from_s(pre + core + post),
                                  pre_flops + core_flops + post_flops, layer, mb),
                          name, {prev}),
                      elem_s, core_flops);
    }
    const double c = p_.cp;
    const std::uint32_t before =
        annotate(add(compute(ComputeClass::kGemm, SimTime::from_s(pre), pre_flops, layer, mb), name + ".pre", {prev}),
                 elem_s, 0);
    const std::uint32_t ring =
        add(collective(CollKind::kSendRecv, GroupKind::kCp, (bwd ? 2 : 1) * cm.cp_step_bytes, layer, mb),
            fmt::format("cp.ring {} mb{} L{}", pass, mb, layer), {before});
    // The ring's duration: cp-1 neighbour exchanges beside the core (a fixed-duration
    // transfer on the CP stream; the executor runs it as cp-1 exchanges of `bytes`).
    role_.ops[ring].duration = SimTime::from_s((c - 1) * (bwd ? cm.cp_step_bwd_s : cm.cp_step_fwd_s));
    role_.ops[ring].kind = OpKind::kCompute;
    role_.ops[ring].cclass = ComputeClass::kElementwise;
    contend(ring);
    const std::uint32_t main = annotate(add(compute(ComputeClass::kAttention, SimTime::from_s(core * (c - 1) / c),
                                                    core_flops * (c - 1) / c, layer, mb),
                                            name + ".core", {before}),
                                        0, core_flops * (c - 1) / c);
    const std::uint32_t last = annotate(
        add(compute(ComputeClass::kAttention, SimTime::from_s(core / c), core_flops / c, layer, mb), name + ".core_last",
            {main, ring}),
        0, core_flops / c);
    return add(compute(ComputeClass::kGemm, SimTime::from_s(post), post_flops, layer, mb), name + ".post", {last});
  }
  // Forward (or recomputed forward) of a dense layer with TP communication overlap.
  std::uint32_t layer_forward_overlap(std::uint32_t prev, int layer, int mb, char pass) {
    const LayerCost& lc = dense_;
    const std::string t = fmt::format("{} mb{} L{}", pass, mb, layer);
    std::uint32_t x = ag_ring(prev, lc.qkv_chunk_s, lc.qkv_flops, layer, mb, t + " qkv");
    x = core_block(x, layer, mb, pass, lc.attn_elem_s, 0, 0, 0, lc.attn_elem_s);
    x = rs_pipeline(x, lc.proj_chunk_s, lc.proj_flops, layer, mb, t + " proj");
    x = ag_ring(x, lc.fc1_chunk_s, lc.fc1_flops, layer, mb, t + " fc1");
    x = annotate(add(compute(ComputeClass::kElementwise, SimTime::from_s(lc.mlp_elem_s), 0, layer, mb), t + " mlp elem", {x}),
                 lc.mlp_elem_s, 0);
    return rs_pipeline(x, lc.fc2_chunk_s, lc.fc2_flops, layer, mb, t + " fc2");
  }
  // Backward of a dense layer with TP communication overlap: per block, the all-gather of
  // the output gradient ring-exchanged with the dgrad of proj / fc2; the reduce-scatter of
  // the input gradient in bulk beside the wgrad of qkv / fc1.
  std::uint32_t layer_backward_overlap(std::uint32_t prev, int layer, int mb) {
    const LayerCost& lc = dense_;
    const std::string t = fmt::format("B mb{} L{}", mb, layer);
    std::uint32_t x = ag_ring(prev, lc.fc2_dgrad_chunk_s, lc.fc2_flops, layer, mb, t + " fc2.dgrad");
    x = annotate(add(compute(ComputeClass::kGemm, SimTime::from_s(lc.fc2_wgrad_s + 2 * lc.mlp_elem_s + lc.fc1_dgrad_s),
                             lc.fc2_flops + lc.fc1_flops, layer, mb),
                     t + " fc2.wgrad+mlp elem+fc1.dgrad", {x}),
                 2 * lc.mlp_elem_s, 0);
    x = rs_bulk(x, lc.fc1_wgrad_s, lc.fc1_flops, layer, mb, t + " fc1.wgrad");
    x = ag_ring(x, lc.proj_dgrad_chunk_s, lc.proj_flops, layer, mb, t + " proj.dgrad");
    x = core_block(x, layer, mb, 'B', lc.proj_wgrad_s + 2 * lc.attn_elem_s, lc.proj_flops, lc.qkv_dgrad_s, lc.qkv_flops,
                   2 * lc.attn_elem_s);
    return rs_bulk(x, lc.qkv_wgrad_s, lc.qkv_flops, layer, mb, t + " qkv.wgrad");
  }

  // One layer's forward (pass 'F') or its recomputation ('R').
  std::uint32_t layer_forward(std::uint32_t prev, int layer, int mb, char pass) {
    if (!is_moe(layer) && dense_.tp_overlap) return layer_forward_overlap(prev, layer, mb, pass);
    const std::string tag_s = fmt::format("{} mb{} L{}", pass, mb, layer);
    std::uint32_t x = tp_before(prev, layer, mb, tag_s + " attn", false);
    x = attention(x, layer, mb, pass);
    x = tp_after(x, layer, mb, tag_s + " attn", false);
    x = tp_before(x, layer, mb, tag_s + " mlp", true);
    x = mlp(x, layer, mb, pass);
    return tp_after(x, layer, mb, tag_s + " mlp", true);
  }

  // The GPU's wait for the host after a launch-bound layer's pass ('F', or 'B' with its
  // recomputation): estimate.h host_stall, the closed form's st.host split by kernel counts.
  std::uint32_t host_wait(std::uint32_t prev, int layer, int mb, char pass) {
    const bool kept = p_.partial_full_recompute() && layer < m_.num_layers && !full_recompute(layer);
    const HostStall& h = is_moe(layer) ? (kept ? host_moe_kept_ : host_moe_) : (kept ? host_dense_kept_ : host_dense_);
    const double s = pass == 'F' ? h.fwd_s : h.bwd_s;
    if (s <= 0) return prev;
    return add(compute(ComputeClass::kHost, SimTime::from_s(s), 0, layer, mb),
               fmt::format("host {} mb{} L{}", pass, mb, layer), {prev});
  }

  // --- offload (layer_cost.h LayerOffload) -----------------------------------------------
  // An offloaded layer's transfers of one pass, each a copy on its direction of the host link
  // (Stream::kHostOut / kHostIn) issued when the pass starts (`start`): forward its
  // activations out and its weights in, backward its activations and then its weights in.
  std::vector<std::uint32_t> offload_copies(std::uint32_t start, int layer, int mb, char pass) {
    std::vector<std::uint32_t> copies;
    const bool act = layer < act_off_end_, weight = layer < weight_off_end_;
    if (!act && !weight) return copies;
    const LayerOffload& o = is_moe(layer) ? off_moe_ : off_dense_;
    auto copy = [&](Stream s, double bytes, double seconds, const char* what) {
      Op op = compute(ComputeClass::kElementwise, SimTime::from_s(seconds), 0, layer, mb);
      op.stream = s;
      op.bytes = bytes;
      copies.push_back(add(op, fmt::format("offload {} {} mb{} L{}", what, pass, mb, layer), {start}));
    };
    if (act)
      copy(pass == 'F' ? Stream::kHostOut : Stream::kHostIn, o.act_bytes, o.act_s, pass == 'F' ? "act out" : "act in");
    if (weight) copy(Stream::kHostIn, o.weight_bytes, o.weight_s, "weights in");
    return copies;
  }
  // The layer's pass (ending with `x`) and its transfers done.
  std::uint32_t join_copies(std::uint32_t x, const std::vector<std::uint32_t>& copies, int layer, int mb, char pass) {
    return copies.empty() ? x
                          : join_all(x, copies, layer, mb, fmt::format("wait offload {} mb{} L{}", pass, mb, layer));
  }

  // --- ZeRO-3 fetch per module (zero3_fetch.h) ----------------------------------------
  // The next use of the trace after `x`: at a synchronisation, the on-demand gathers, then a
  // zero-second op that waits for the compute and every gather and reduce-scatter issued
  // since the last one, then one launch on the host; the prefetched gathers (each slowing
  // the compute after it); the use's compute (the trace's seconds, none when 0; `flops`,
  // `mem_s` and `core_flops` describe it); its gradient's reduce-scatter. Every gather and
  // reduce-scatter is on the data-parallel stream. A kSyncedList stack gathers each weight
  // with zgather_list().
  std::uint32_t zuse(std::uint32_t x, int layer, int mb, ComputeClass cls, double flops, double mem_s,
                     double core_flops, const std::string& name) {
    const Zero3Use& u = ztrace_.uses[zcur_];
    const double s = u.compute_s;
    auto weight = [&](int q, CollKind k, double bytes_per) {
      return collective(k, GroupKind::kDp, ztrace_.numel[static_cast<std::size_t>(q)] * bytes_per, layer, mb);
    };
    if (zhooks_.sync(zcur_)) {
      for (int q : zhooks_.fetch(zcur_)) {
        if (zlist_) {
          x = zgather_list(x, q, false, layer, mb, "fetch " + name);
        } else {
          zout_.push_back(add(weight(q, CollKind::kAllGather, kZero3WeightBytes), "zero3.ag fetch " + name, {}));
        }
      }
      const std::uint32_t sync = join_all(x, zout_, layer, mb, "zero3.sync " + name);
      zout_.clear();
      x = add(compute(ComputeClass::kHost, SimTime::from_s(zlaunch_s_), 0, layer, mb), "zero3.launch " + name, {sync});
      zhost_ = x;
    }
    for (int q : zhooks_.prefetch(zcur_)) {
      if (zlist_) {
        x = zgather_list(x, q, true, layer, mb, "prefetch " + name);
      } else {
        zout_.push_back(
            contend(add(weight(q, CollKind::kAllGather, kZero3WeightBytes), "zero3.ag prefetch " + name, {x})));
      }
    }
    if (s > 0) x = annotate(add(compute(cls, SimTime::from_s(s), flops, layer, mb), name, {x}), mem_s, core_flops);
    if (u.reduce) {
      // kSyncedList: the gradient divided and its views copied flat first, on the stream.
      if (zlist_)
        zdp_work(zwork_.reduce_copy_s(ztrace_.numel[static_cast<std::size_t>(u.param)]), {x}, layer, mb,
                 "zero3.rs copies " + name);
      const std::uint32_t rs = add(weight(u.param, CollKind::kReduceScatter, p_.grad_bytes), "zero3.rs " + name, {x});
      zout_.push_back(rs);
      dp_ops_.push_back(rs);
      // overlap_grad_reduce false (DeepSpeed's overlap_comm off): the compute waits for it.
      if (!p_.overlap_grad_reduce) x = rs;
    }
    zcur_ = (zcur_ + 1) % ztrace_.uses.size();
    return x;
  }
  // A fixed-duration op on the data-parallel stream: DeepSpeed 2021's memsets and the process
  // group's per-rank copies (device memory traffic beside the collectives; the executor's
  // collectives use flat buffers and run none).
  std::uint32_t zdp_work(double seconds, std::initializer_list<std::uint32_t> deps, int layer, int mb,
                         std::string name) {
    Op op = compute(ComputeClass::kElementwise, SimTime::from_s(seconds), 0, layer, mb);
    op.stream = Stream::kDp;
    return add(op, std::move(name), deps);
  }
  // One weight gathered as DeepSpeed 2021's _allgather_param (zero3_fetch.h Zero3GatherWork):
  // its memset on the stream once the host has issued the last gather, a drain of the device
  // (the compute after `x` and everything on the stream), then the host's issue on the
  // compute stream beside the gather, and the copy-backs after both. Returns the issue.
  std::uint32_t zgather_list(std::uint32_t x, int q, bool prefetched, int layer, int mb, const std::string& name) {
    const auto qi = static_cast<std::size_t>(q);
    zout_.push_back(zdp_work(zwork_.memset_s(ztrace_.numel[qi]), {zhost_}, layer, mb, "zero3.memset " + name));
    const std::uint32_t drain = join_all(x, zout_, layer, mb, "zero3.drain " + name);
    zout_.clear();
    const std::uint32_t ag =
        add(collective(CollKind::kAllGather, GroupKind::kDp, ztrace_.numel[qi] * kZero3WeightBytes, layer, mb),
            "zero3.ag " + name, {drain});
    zhost_ = add(compute(ComputeClass::kHost, SimTime::from_s(zwork_.issue_s), 0, layer, mb), "zero3.issue " + name,
                 {drain});
    zout_.push_back(zdp_work(zwork_.copy_s(ztrace_.numel[qi]), {zhost_}, layer, mb, "zero3.copies " + name));
    if (prefetched) contend(ag);  // after the issue: the compute it slows follows the host
    return zhost_;
  }
  // A layer's forward (or full recomputation, pass 'R') and backward as the trace's uses.
  std::uint32_t zlayer_forward(std::uint32_t x, int layer, int mb, char pass) {
    const LayerCost& lc = dense_;
    const std::string t = fmt::format("{} mb{} L{}", pass, mb, layer);
    x = zuse(x, layer, mb, ComputeClass::kAttention, lc.qkv_flops + lc.attn_core_flops, lc.attn_elem_s,
             lc.attn_core_flops, t + " qkv+core");
    x = zuse(x, layer, mb, ComputeClass::kGemm, lc.proj_flops, 0, 0, t + " proj");
    x = zuse(x, layer, mb, ComputeClass::kGemm, lc.fc1_flops, lc.mlp_elem_s, 0, t + " fc1");
    return zuse(x, layer, mb, ComputeClass::kGemm, lc.fc2_flops, 0, 0, t + " fc2");
  }
  std::uint32_t zlayer_backward(std::uint32_t x, int layer, int mb) {
    const LayerCost& lc = dense_;
    const std::string t = fmt::format("B mb{} L{}", mb, layer);
    const bool sel = p_.recompute != Recompute::kFull;
    const double core_flops = lc.core_bwd_factor * lc.attn_core_flops;
    x = zuse(x, layer, mb, ComputeClass::kGemm, 2 * lc.fc2_flops, 0, 0, t + " fc2");
    x = zuse(x, layer, mb, ComputeClass::kGemm, 2 * lc.fc1_flops, 2 * lc.mlp_elem_s, 0, t + " fc1");
    x = zuse(x, layer, mb, ComputeClass::kAttention, 2 * lc.proj_flops + core_flops + (sel ? lc.recompute_flops : 0.0),
             0, core_flops, t + " proj+core");
    return zuse(x, layer, mb, ComputeClass::kGemm, 2 * lc.qkv_flops, 2 * lc.attn_elem_s, 0, t + " qkv");
  }
  // The embedding's uses (word, then learned positions; the backward in reverse).
  std::uint32_t zembedding(std::uint32_t x, int mb, bool backward) {
    const bool pos = m_.position_embedding == PositionEmbedding::kLearned;
    const std::string t = fmt::format("{} mb{} embedding", backward ? 'B' : 'F', mb);
    if (!backward) x = zuse(x, -1, mb, ComputeClass::kGemm, 0, 0, 0, t);
    if (pos) x = zuse(x, -1, mb, ComputeClass::kGemm, 0, 0, 0, t + " positions");
    if (backward) x = zuse(x, -1, mb, ComputeClass::kGemm, 0, 0, 0, t);
    return x;
  }

  // --- FSDP (ZeRO-3) --------------------------------------------------------------
  std::uint32_t fsdp_gather(int layer, int mb, char pass, std::uint32_t window_dep) {
    const LayerRankParams& lp = is_moe(layer) ? layer_moe_ : layer_dense_;
    return contend(add(collective(CollKind::kAllGather, GroupKind::kDp, (lp.dense + lp.expert) * 2.0, layer, mb),
                       fmt::format("fsdp.ag {} mb{} L{}", pass, mb, layer), {window_dep}));
  }
  // The stack's copy of the gathered layer on the compute stream once its gather is done
  // (FSDP2's foreach_all_gather_copy_out; layer_cost.h zero3_copy_out_s). Returns the op the
  // layer's compute waits for: the copy, or the gather where the stack copies nothing.
  std::uint32_t fsdp_copy_out(std::uint32_t gather, int layer, int mb, char pass) {
    const double s = is_moe(layer) ? copy_out_moe_s_ : copy_out_dense_s_;
    if (!(s > 0)) return gather;
    return annotate(add(compute(ComputeClass::kElementwise, SimTime::from_s(s), 0, layer, mb),
                        fmt::format("fsdp.ag copy-out {} mb{} L{}", pass, mb, layer), {gather}),
                    s, 0);
  }
  // The stack's copy of the layer's gradients into the reduce-scatter input on the compute
  // stream after its backward (FSDP2's foreach_reduce_scatter_copy_in; layer_cost.h
  // zero3_copy_in_s). Returns the op the reduce-scatter and the compute after wait for: the
  // copy, or `after` where the stack copies nothing.
  std::uint32_t fsdp_copy_in(std::uint32_t after, int layer, int mb) {
    const double s = is_moe(layer) ? copy_in_moe_s_ : copy_in_dense_s_;
    if (!(s > 0)) return after;
    return annotate(add(compute(ComputeClass::kElementwise, SimTime::from_s(s), 0, layer, mb),
                        fmt::format("fsdp.rs copy-in mb{} L{}", mb, layer), {after}),
                    s, 0);
  }

  // Compute-communication interference (program.h kInterference): a collective that
  // overlaps compute (data-parallel buckets and gathers, the TP collectives of
  // tp_comm_overlap, the CP ring, the all-to-all beside the shared experts, the pipeline
  // receives posted ahead) slows the compute issued after it. The delay goes on the compute
  // stream where the collective is issued, so the compute that follows waits for it; the
  // simulator sizes it from the collective's own duration. Returns `coll`.
  std::uint32_t contend(std::uint32_t coll) {
    if (!(prog_.interference > 0) || coll == kNone) return coll;
    Op op = compute(ComputeClass::kInterference, SimTime{}, 0, role_.ops[coll].layer, role_.ops[coll].microbatch);
    op.contends = coll;
    add(op, "interference " + prog_.names[role_.ops[coll].name], {});
    return coll;
  }

  // --- passes ------------------------------------------------------------------------
  // A chunk pass is emitted as its start, its layers (one at a time, or pairs of a forward
  // and a backward layer in a merged step) and its end.
  struct FwdPass {
    int mb = 0, k = 0, first = 0, n = 0;
    std::uint32_t x = kNone;
    std::vector<std::uint32_t> done;
  };
  struct BwdPass {
    int mb = 0, j = 0, k = 0, first = 0, n = 0;
    bool last_mb = false;
    bool logits_freed = false;  // the output head's buffer freed after its backward
    std::uint32_t x = kNone;
    std::vector<std::uint32_t> done;
    // recompute_method "uniform": each layer's recomputation buffer, allocated when its group
    // recomputes (at the group's last layer), by chunk-local index.
    std::vector<std::uint32_t> group_alloc;
    double bucket_dense = 0, bucket_expert = 0;
    std::uint32_t bucket_n = 0;
    // FSDP: the reduce-scatter of a layer's gradients is issued after the next layer's
    // prefetch gather. The DP stream runs in program order, so a reduce-scatter placed
    // before that gather would hold it until the layer's backward is done: no prefetch.
    // (PyTorch FSDP issues the backward prefetch in the pre-backward hook, before the
    // post-backward reduce-scatter.)
    int rs_layer = -1;
    std::uint32_t rs_after = kNone;
  };

  void forward(int mb, int j, std::uint32_t input, std::uint32_t recv) {
    FwdPass f = fwd_begin(mb, j, input, recv);
    for (int i = 0; i < f.n; ++i) fwd_layer(f, i);
    fwd_end(f);
  }

  FwdPass fwd_begin(int mb, int j, std::uint32_t input, std::uint32_t recv) {
    FwdPass f;
    f.mb = mb;
    f.k = chunk_of(j);
    f.first = chunk_first_layer(m_, p_, f.k);
    f.n = chunk_layers(m_, p_, f.k);
    if (f.k == 0) {
      f.x = memory(true, first_stage_input_bytes(m_, p_, tokens_), fmt::format("alloc token ids mb{}", mb), input);
      if (zmod_) f.x = zembedding(f.x, mb, false);
    } else {
      f.x = recv;
    }
    if (param_gather_ != kNone) add_dep_to_next_ = param_gather_;
    f.done.assign(static_cast<std::size_t>(f.n), kNone);
    return f;
  }

  // Layer i's activations (and its ZeRO-3 gather): the op its forward starts after.
  std::uint32_t fwd_layer_start(FwdPass& f, int i) {
    const int layer = f.first + i;
    std::uint32_t gather = kNone;
    if (p_.zero >= 3 && p_.dp * p_.cp > 1 && !zmod_) {
      // Prefetch: at most two gathered layers, so gather i waits for layer i-2.
      gather = fsdp_copy_out(fsdp_gather(layer, f.mb, 'F', i >= 2 ? f.done[static_cast<std::size_t>(i - 2)] : kNone),
                             layer, f.mb, 'F');
    }
    // An activation-offloaded layer keeps its activations in host memory (its staging
    // buffer is in the stage's static bytes).
    const double act = kept_activations(layer);
    std::uint32_t a = memory(true, act, fmt::format("alloc act mb{} L{}", f.mb, layer), f.x);
    add_dep(a, gather);
    if (add_dep_to_next_ != kNone) {
      add_dep(a, add_dep_to_next_);
      add_dep_to_next_ = kNone;
    }
    return a;
  }

  void fwd_layer(FwdPass& f, int i) {
    const int layer = f.first + i;
    const std::uint32_t a = fwd_layer_start(f, i);
    const std::vector<std::uint32_t> copies = offload_copies(a, layer, f.mb, 'F');
    const std::uint32_t x = zmod_ ? zlayer_forward(a, layer, f.mb, 'F') : layer_forward(a, layer, f.mb, 'F');
    f.x = host_wait(join_copies(x, copies, layer, f.mb, 'F'), layer, f.mb, 'F');
    f.done[static_cast<std::size_t>(i)] = f.x;
  }

  void fwd_end(FwdPass& f) {
    const int mb = f.mb, k = f.k;
    std::uint32_t x = f.x;
    if (k == chunks_ - 1) {
      x = memory(true, logits_bytes(), fmt::format("alloc logits mb{}", mb), x);
      if (zmod_) {
        x = zuse(x, -1, mb, ComputeClass::kGemm, logits_.flops / 3, logits_.ce_s / 2, 0,
                 fmt::format("F mb{} logits+loss", mb));
      } else {
        x = annotate(add(compute(ComputeClass::kGemm, SimTime::from_s(logits_.fwd_s), logits_.flops / 3, -1, mb),
                         fmt::format("F mb{} logits+loss", mb), {x}),
                     logits_.ce_s / 2, 0);
      }
      // Multi-token prediction modules (estimate.cc): the projection, a layer of the model's
      // last kind (index num_layers + i), the output head again.
      for (int i = 0; i < m_.mtp_layers; ++i) {
        const int layer = m_.num_layers + i;
        x = memory(true, mtp_act_, fmt::format("alloc mtp act mb{} M{}", mb, i), x);
        x = add(compute(ComputeClass::kGemm, SimTime::from_s(mtp_.fwd_s), mtp_.flops, layer, mb),
                fmt::format("F mb{} M{} proj", mb, i), {x});
        x = host_wait(layer_forward(x, layer, mb, 'F'), layer, mb, 'F');
        x = memory(true, logits_bytes(), fmt::format("alloc mtp logits mb{} M{}", mb, i), x);
        x = annotate(add(compute(ComputeClass::kGemm, SimTime::from_s(logits_.fwd_s), logits_.flops / 3, -1, mb),
                         fmt::format("F mb{} M{} logits+loss", mb, i), {x}),
                     logits_.ce_s / 2, 0);
      }
    } else {
      const Op s = p2p(OpKind::kSend, stage_of_chunk(k + 1), tag(mb, k, false), mb);
      add(s, fmt::format("pp.send F mb{} chunk{}", mb, k), {x});
    }
    last_compute_ = x;
  }

  void backward(int mb, int j, std::uint32_t recv) {
    BwdPass b = bwd_begin(mb, j, recv);
    for (int idx = 0; idx < b.n; ++idx) bwd_layer(b, idx);
    bwd_end(b);
  }

  // `free_logits`: free the output head's buffer right after its backward (a merged step,
  // whose forward computes its own loss at its end); else at the pass's end.
  BwdPass bwd_begin(int mb, int j, std::uint32_t recv, bool free_logits = false) {
    BwdPass b;
    b.mb = mb;
    b.j = j;
    b.k = chunk_of(j);
    b.first = chunk_first_layer(m_, p_, b.k);
    b.n = chunk_layers(m_, p_, b.k);
    std::uint32_t x = kNone;
    if (b.k == chunks_ - 1) {
      x = last_compute_;
      for (int i = m_.mtp_layers - 1; i >= 0; --i) {
        const int layer = m_.num_layers + i;
        x = annotate(add(compute(ComputeClass::kGemm, SimTime::from_s(logits_.bwd_s), logits_.flops * 2 / 3, -1, mb),
                         fmt::format("B mb{} M{} logits", mb, i), {x}),
                     logits_.ce_s / 2, 0);
        x = memory(false, logits_bytes(), fmt::format("free mtp logits mb{} M{}", mb, i), x);
        x = layer_backward_plain(x, layer, mb);
        x = add(compute(ComputeClass::kGemm, SimTime::from_s(mtp_.bwd_s), 2 * mtp_.flops, layer, mb),
                fmt::format("B mb{} M{} proj", mb, i), {x});
        x = memory(false, mtp_act_, fmt::format("free mtp act mb{} M{}", mb, i), x);
      }
      if (zmod_) {
        x = zuse(x, -1, mb, ComputeClass::kGemm, logits_.flops * 2 / 3, logits_.ce_s / 2, 0,
                 fmt::format("B mb{} logits", mb));
      } else {
        x = annotate(add(compute(ComputeClass::kGemm, SimTime::from_s(logits_.bwd_s), logits_.flops * 2 / 3, -1, mb),
                         fmt::format("B mb{} logits", mb), {x}),
                     logits_.ce_s / 2, 0);
      }
      if (free_logits) {
        x = memory(false, logits_bytes(), fmt::format("free logits mb{}", mb), x);
        b.logits_freed = true;
      }
    } else {
      x = recv;
    }
    b.x = x;
    b.last_mb = is_last_backward(mb, j);
    b.done.assign(static_cast<std::size_t>(b.n), kNone);
    if (p_.recompute_group() > 1) b.group_alloc.assign(static_cast<std::size_t>(b.n), kNone);
    if (b.last_mb && b.k == chunks_ - 1) {
      b.bucket_dense += extra_params_last();
      b.bucket_expert += mtp_params().expert;
    }
    return b;
  }

  void flush_fsdp_rs(BwdPass& b) {
    if (b.rs_after == kNone) return;
    const LayerRankParams& lp = is_moe(b.rs_layer) ? layer_moe_ : layer_dense_;
    dp_ops_.push_back(contend(add(
        collective(CollKind::kReduceScatter, GroupKind::kDp, (lp.dense + lp.expert) * p_.grad_bytes, b.rs_layer, b.mb),
        fmt::format("fsdp.rs mb{} L{}", b.mb, b.rs_layer), {b.rs_after})));
    b.rs_after = kNone;
  }

  // The layer idx-th from the chunk's end (layer first + n - 1 - idx): its gather and
  // recomputation, before its backward blocks. Returns the op they start after; sets
  // `full_alloc` to the recomputation's buffer (kNone without).
  std::uint32_t bwd_layer_start(BwdPass& b, int idx, std::uint32_t& full_alloc) {
    const int layer = b.first + b.n - 1 - idx;
    const bool moe = is_moe(layer);
    std::uint32_t x = b.x;
    std::uint32_t gather = kNone;
    if (p_.zero >= 3 && p_.dp * p_.cp > 1 && !zmod_) {
      // Without reshard_after_forward the forward's gathered parameters are still there.
      if (p_.reshard_after_forward) {
        gather =
            fsdp_copy_out(fsdp_gather(layer, b.mb, 'B', idx >= 2 ? b.done[static_cast<std::size_t>(idx - 2)] : kNone),
                          layer, b.mb, 'B');
      }
      flush_fsdp_rs(b);
    }
    full_alloc = kNone;
    if (p_.recompute_group() > 1) {
      // recompute_method "uniform": the group's last layer (the first its backward reaches)
      // re-runs the whole group's forward, each layer into its own buffer; every layer frees
      // its buffer after its backward.
      const RecomputeGroup g = recompute_group_of(m_, p_, layer);
      if (layer == g.first + g.count - 1) {
        for (int l = g.first; l <= layer; ++l) {
          const std::uint32_t a =
              memory(true, is_moe(l) ? full_moe_ : full_dense_, fmt::format("alloc recompute mb{} L{}", b.mb, l), x);
          b.group_alloc[static_cast<std::size_t>(l - b.first)] = a;
          x = layer_forward(a, l, b.mb, 'R');
        }
      }
      full_alloc = b.group_alloc[static_cast<std::size_t>(layer - b.first)];
    } else if (full_recompute(layer)) {
      full_alloc = memory(true, moe ? full_moe_ : full_dense_, fmt::format("alloc recompute mb{} L{}", b.mb, layer), x);
      add_dep(full_alloc, gather);
      x = zmod_ ? zlayer_forward(full_alloc, layer, b.mb, 'R') : layer_forward(full_alloc, layer, b.mb, 'R');
    } else if (selective() && lc_of(moe).recompute_s > 0) {
      full_alloc = memory(true, moe ? full_moe_ : full_dense_, fmt::format("alloc recompute mb{} L{}", b.mb, layer), x);
      add_dep(full_alloc, gather);
      // With the per-module fetch the recomputation runs in the projection's backward use.
      x = zmod_ ? full_alloc : recompute_modules(full_alloc, layer, b.mb, kNone);
    } else if (gather != kNone) {
      x = add(compute(ComputeClass::kElementwise, SimTime{}, 0, layer, b.mb),
              fmt::format("wait fsdp.ag B mb{} L{}", b.mb, layer), {x, gather});
    }
    return x;
  }

  // After the layer's backward blocks (`x`): its host wait, frees, and the gradient
  // reduction it completes.
  void bwd_layer_finish(BwdPass& b, int idx, std::uint32_t x, std::uint32_t full_alloc) {
    const int i = b.n - 1 - idx;
    const int layer = b.first + i;
    const bool moe = is_moe(layer);
    x = host_wait(x, layer, b.mb, 'B');
    b.done[static_cast<std::size_t>(idx)] = x;
    const double act = kept_activations(layer);
    x = memory(false, act, fmt::format("free act mb{} L{}", b.mb, layer), x);
    if (full_alloc != kNone)
      x = memory(false, moe ? full_moe_ : full_dense_, fmt::format("free recompute mb{} L{}", b.mb, layer), x);
    if (zmod_) {
      // Reduce-scattered per use (zuse).
    } else if (p_.zero >= 3 && p_.dp * p_.cp > 1) {
      // Deferred (fsdp_no_sync): only the chunk's last backward reduce-scatters (the
      // gradients accumulate unsharded until then).
      if (!p_.defers_reduce_scatter() || b.last_mb) {
        x = fsdp_copy_in(x, layer, b.mb);
        b.rs_layer = layer;
        b.rs_after = x;
      }
    } else if (b.last_mb && dp_grad_overlapped(p_)) {
      const LayerRankParams& lp = moe ? layer_moe_ : layer_dense_;
      b.bucket_dense += lp.dense;
      b.bucket_expert += lp.expert;
      if (i == 0 && b.k == 0) b.bucket_dense += extra_params_first();
      if ((b.bucket_dense + b.bucket_expert) * p_.grad_bytes >= bucket_bytes() || i == 0) {
        // The stage's last bucket (its first layer, in its last backward) has no compute
        // after it to slow.
        flush_bucket(b.bucket_dense, b.bucket_expert, x, b.k, b.bucket_n++, /*overlapped=*/!(i == 0 && b.j == 0));
        b.bucket_dense = b.bucket_expert = 0;
      }
    }
    b.x = x;
  }

  void bwd_layer(BwdPass& b, int idx) {
    const int layer = b.first + b.n - 1 - idx;
    const std::vector<std::uint32_t> copies = offload_copies(b.x, layer, b.mb, 'B');
    std::uint32_t full_alloc = kNone;
    std::uint32_t x = bwd_layer_start(b, idx, full_alloc);
    x = zmod_                                   ? zlayer_backward(x, layer, b.mb)
        : (!is_moe(layer) && dense_.tp_overlap) ? layer_backward_overlap(x, layer, b.mb)
                                                : layer_backward_blocks(x, layer, b.mb);
    bwd_layer_finish(b, idx, join_copies(x, copies, layer, b.mb, 'B'), full_alloc);
  }

  void bwd_end(BwdPass& b) {
    flush_fsdp_rs(b);
    std::uint32_t x = b.x;
    if (b.k == 0) {
      if (zmod_) x = zembedding(x, b.mb, true);
      x = memory(false, first_stage_input_bytes(m_, p_, tokens_), fmt::format("free token ids mb{}", b.mb), x);
    } else {
      const Op s = p2p(OpKind::kSend, stage_of_chunk(b.k - 1), tag(b.mb, b.k, true), b.mb);
      add(s, fmt::format("pp.send B mb{} chunk{}", b.mb, b.k), {x});
    }
    if (b.k == chunks_ - 1 && !b.logits_freed)
      x = memory(false, logits_bytes(), fmt::format("free logits mb{}", b.mb), x);
    last_compute_ = x;
  }

  // --- all-to-all overlap (Plan::moe_a2a_overlap) -------------------------------------
  // A merged step: the forward of one chunk-microbatch and the backward of another, layer
  // by layer (forward layer i with backward layer n-1-i; the rest alone), as Megatron-Core's
  // combined 1F1B schedules them (models/common/model_chunk_schedule_plan.py
  // schedule_layer_1f1b). Each all-to-all runs on the EP stream beside a compute block of
  // the other pass: B combine | F attention, F dispatch | B experts, B dispatch | F experts,
  // F combine | B attention. A block starts with a zero-second op on the compute stream, so
  // that its TP collectives wait for the compute issued before it (Megatron runs them on the
  // compute stream); the all-to-alls' interference precedes the block beside them.
  void merged(const ScheduleStep& fs, const ScheduleStep& bs, std::uint32_t input, std::uint32_t recv_f,
              std::uint32_t recv_b) {
    FwdPass f = fwd_begin(fs.microbatch, fs.chunk, input, recv_f);
    BwdPass b = bwd_begin(bs.microbatch, bs.chunk, recv_b, /*free_logits=*/true);
    const int pairs = std::min(f.n, b.n);
    for (int i = 0; i < pairs; ++i) {
      if (is_moe(f.first + i) && is_moe(b.first + b.n - 1 - i)) {
        merged_layers(f, i, b, i);
      } else {
        fwd_layer(f, i);
        bwd_layer(b, i);
      }
    }
    for (int i = pairs; i < f.n; ++i) fwd_layer(f, i);
    for (int i = pairs; i < b.n; ++i) bwd_layer(b, i);
    fwd_end(f);
    bwd_end(b);
  }

  std::uint32_t a2a_overlapped(std::uint32_t after, int layer, int mb, char pass, const char* what) {
    return contend(add(collective(CollKind::kAllToAll, GroupKind::kEp, moe_comm_.ep_bytes, layer, mb),
                       fmt::format("ep.a2a {} mb{} L{} {} (overlapped)", pass, mb, layer, what), {after}));
  }
  std::uint32_t block_start(std::uint32_t after, int layer, int mb, char pass, const char* what) {
    return add(compute(ComputeClass::kElementwise, SimTime{}, 0, layer, mb),
               fmt::format("{} mb{} L{} {} start", pass, mb, layer, what), {after});
  }
  std::uint32_t attention_block(std::uint32_t x, int layer, int mb, char pass) {
    const std::string t = fmt::format("{} mb{} L{} attn", pass, mb, layer);
    x = tp_before(block_start(x, layer, mb, pass, "attn"), layer, mb, t, false);
    x = attention(x, layer, mb, pass);
    return tp_after(x, layer, mb, t, false);
  }
  // The routed experts' compute (LayerCost's MLP block: router, permutation, expert GEMMs)
  // between the expert-TP gather and scatter, without the all-to-alls.
  std::uint32_t expert_block(std::uint32_t x, int layer, int mb, char pass, std::uint32_t full_alloc) {
    const bool bwd = pass == 'B';
    const std::string t = fmt::format("{} mb{} L{} moe", pass, mb, layer);
    x = tp_before(block_start(x, layer, mb, pass, "moe"), layer, mb, t, true);
    // Selective recomputation (its modules' op, in its buffer) before the experts' backward.
    if (full_alloc != kNone) x = recompute_modules(x, layer, mb, full_alloc);
    const double s = bwd ? moe_.mlp_bwd_s() : moe_.mlp_fwd_s();
    x = annotate(
        add(compute(ComputeClass::kGemm, SimTime::from_s(s), (bwd ? 2 : 1) * moe_.mlp_flops, layer, mb), t, {x}),
        (bwd ? 2 : 1) * moe_.mlp_elem_s, 0);
    return tp_after(x, layer, mb, t, true);
  }

  void merged_layers(FwdPass& f, int i, BwdPass& b, int idx) {
    const int lf = f.first + i, lb = b.first + b.n - 1 - idx;
    // The backward layer's recomputation buffer is allocated when its pass reaches it; its
    // modules' op runs in its experts' block.
    const std::uint32_t full_alloc =
        selective() && moe_.recompute_s > 0
            ? memory(true, full_moe_, fmt::format("alloc recompute mb{} L{}", b.mb, lb), b.x)
            : kNone;
    const std::uint32_t cb = a2a_overlapped(b.x, lb, b.mb, 'B', "combine");
    const std::uint32_t fa = attention_block(fwd_layer_start(f, i), lf, f.mb, 'F');
    const std::uint32_t fd = a2a_overlapped(fa, lf, f.mb, 'F', "dispatch");
    const std::uint32_t bm = expert_block(cb, lb, b.mb, 'B', full_alloc);
    const std::uint32_t bd = a2a_overlapped(bm, lb, b.mb, 'B', "dispatch");
    const std::uint32_t fm = expert_block(fd, lf, f.mb, 'F', kNone);
    const std::uint32_t fc = a2a_overlapped(fm, lf, f.mb, 'F', "combine");
    const std::uint32_t ba = attention_block(bd, lb, b.mb, 'B');
    f.x = host_wait(fc, lf, f.mb, 'F');
    f.done[static_cast<std::size_t>(i)] = f.x;
    bwd_layer_finish(b, idx, ba, full_alloc);
  }

  // The last backward of chunk j in this stage's schedule.
  bool is_last_backward(int mb, int j) {
    const auto key = static_cast<std::size_t>(j);
    if (backwards_seen_.size() <= key) backwards_seen_.resize(key + 1, 0);
    (void)mb;
    return ++backwards_seen_[key] == m_count_;
  }

  // `overlapped`: issued during the backward (dp_grad_overlapped), so it slows the compute
  // after it.
  void flush_bucket(double dense, double expert, std::uint32_t after, int chunk, std::uint32_t n, bool overlapped) {
    const CollKind kind = dp_grad_collective(p_);
    auto issue = [&](std::uint32_t coll) { return overlapped ? contend(coll) : coll; };
    if (p_.dp * p_.cp > 1 && dense > 0) {
      dp_ops_.push_back(issue(add(collective(kind, GroupKind::kDp, dense * p_.grad_bytes, -1, -1),
                                  fmt::format("dp.{} grads chunk{} bucket{}", p_.zero == 0 ? "ar" : "rs", chunk, n),
                                  {after})));
    }
    if (p_.edp() > 1 && expert > 0) {
      dp_ops_.push_back(issue(add(collective(kind, GroupKind::kEdp, expert * p_.grad_bytes, -1, -1),
                                  fmt::format("edp.{} expert grads chunk{} bucket{}", p_.zero == 0 ? "ar" : "rs", chunk, n),
                                  {after})));
    }
  }

  // `overlapped`: issued before the first forward (overlap_param_gather), so it slows it.
  std::uint32_t gather_params(std::initializer_list<std::uint32_t> deps, bool overlapped) {
    const RankParams rp = rank_params(m_, p_, stage_);
    std::uint32_t last = kNone;
    auto issue = [&](std::uint32_t coll) { return overlapped ? contend(coll) : coll; };
    if (p_.dp * p_.cp > 1) {
      last = issue(add(collective(CollKind::kAllGather, GroupKind::kDp, rp.dense * 2.0, -1, -1), "dp.ag params", deps));
    }
    if (p_.edp() > 1 && rp.expert > 0) {
      last = issue(add(collective(CollKind::kAllGather, GroupKind::kEdp, rp.expert * 2.0, -1, -1),
                       "edp.ag expert params", deps));
    }
    return last;
  }

  void finish_step() {
    const RankParams rp = rank_params(m_, p_, stage_);
    if (p_.zero < 3 && !dp_grad_overlapped(p_)) {
      // One reduction of all gradients after the last backward.
      flush_bucket(rp.dense, rp.expert, last_compute_, -1, 0, /*overlapped=*/false);
    }
    // Sequence parallelism's replicated parameters (layer_cost.h sp_grad_allreduce_bytes):
    // their gradients all-reduced over the TP group after the data-parallel reduction; the
    // tied exchange and the norm wait for it as for the reduction.
    if (const double sp = sp_grad_allreduce_bytes(m_, count_params(m_), p_, rp, stage_ == p_.pp - 1); sp > 0) {
      const std::uint32_t ar = add(collective(CollKind::kAllReduce, GroupKind::kTp, sp, -1, -1),
                                   "tp.ar sequence-parallel grads", {last_compute_});
      for (std::uint32_t d : dp_ops_) add_dep(ar, d);
      dp_ops_.push_back(ar);
    }
    const double nd = static_cast<double>(p_.dp) * p_.cp;
    const double params = p_.zero >= 1 ? rp.dense / nd + rp.expert / p_.edp() : rp.dense + rp.expert;
    const OptimizerStep os = optimizer_step(c_, p_, params);
    const std::uint32_t ready = tied_embedding_exchange();
    // The gradient pass (its norm over the rank's shard), then the norm's all-reduce over
    // every rank (and the fp16 overflow flag's): no rank updates before every stage has
    // reduced its gradients (layer_cost.h grad_norm_allreduces). The scale of stacks that
    // clip on every step runs after the all-reduce in their code; it is priced with the
    // norm's pass, before it.
    std::uint32_t o =
        add(compute(ComputeClass::kOptimizer, SimTime::from_s(os.clip_s), 0, -1), "gradient norm", {ready});
    for (std::uint32_t d : dp_ops_) add_dep(o, d);
    const int norm_allreduces = grad_norm_allreduces(p_);
    for (int k = 0; k < norm_allreduces; ++k) {
      o = add(collective(CollKind::kAllReduce, GroupKind::kWorld, kGradNormBytes, -1, -1),
              k + 1 < norm_allreduces ? "world.ar fp16 overflow flag" : "world.ar gradient norm", {o});
    }
    o = add(compute(ComputeClass::kOptimizer, SimTime::from_s(os.gpu_s - os.clip_s), 0, -1), "optimizer", {o});
    if (os.host_bytes > 0) o = host_optimizer(o, os);
    if (p_.zero >= 1 && p_.zero < 3 && !p_.overlap_param_gather) gather_params({o}, /*overlapped=*/false);
  }

  // Tied embeddings across the pipeline (layer_cost.h tied_embedding_grad_bytes): on the
  // first and the last stage, after the data-parallel reduction, the embedding's gradients
  // go to the other stage and come back from it (a two-rank all-reduce), sent on the p2p
  // stream and received on the look-ahead one so that neither waits behind the other. The
  // op the optimizer follows (the last compute elsewhere).
  std::uint32_t tied_embedding_exchange() {
    const double bytes = tied_embedding_grad_bytes(m_, p_);
    if (bytes <= 0 || (stage_ != 0 && stage_ != p_.pp - 1)) return last_compute_;
    const int peer = stage_ == 0 ? p_.pp - 1 : 0;
    // Tags past every microbatch's (tag()): the sender's stage picks one of two.
    auto tied_tag = [&](int sender) {
      return static_cast<std::uint32_t>(2 * m_count_ * chunks_ + (sender == 0 ? 0 : 1));
    };
    Op send = p2p(OpKind::kSend, peer, tied_tag(stage_), -1);
    send.bytes = bytes;
    send.transfers = 1;  // an all-reduce of two ranks: each way at once
    Op recv = p2p(OpKind::kRecv, peer, tied_tag(peer), -1);
    recv.bytes = bytes;
    recv.transfers = 1;
    recv.stream = Stream::kPpRecv;
    const std::uint32_t s = add(send, "pp.send tied embedding grads", {last_compute_});
    const std::uint32_t r = add(recv, "pp.recv tied embedding grads", {last_compute_});
    for (std::uint32_t d : dp_ops_) {
      add_dep(s, d);
      add_dep(r, d);
    }
    return join(s, r, -1, -1, "tied embedding grads reduced");
  }

  // Optimizer offload (layer_cost.h OptimizerStep), after the GPU's share (`gpu`): the
  // gradients down the host link and then the updated 16-bit weights up, while the host
  // steps beside them (the transfers pipelined with the host step: max(down + up, host)).
  std::uint32_t host_optimizer(std::uint32_t gpu, const OptimizerStep& os) {
    auto copy = [&](Stream s, double bytes, double seconds, const char* name, std::uint32_t after) {
      Op op = compute(ComputeClass::kOptimizer, SimTime::from_s(seconds), 0, -1);
      op.stream = s;
      op.bytes = bytes;
      return add(op, name, {after});
    };
    const std::uint32_t down = copy(Stream::kHostOut, os.down_bytes, os.down_s, "optimizer gradients to host", gpu);
    const std::uint32_t up = copy(Stream::kHostIn, os.up_bytes, os.up_s, "optimizer weights to device", down);
    Op step = compute(ComputeClass::kHostOptimizer, SimTime::from_s(os.host_s), 0, -1);
    step.bytes = os.host_bytes;
    const std::uint32_t h = add(step, "optimizer host step", {gpu});
    return join(h, up, -1, -1, "optimizer host done");
  }

  double p2p_bytes() const {
    return tokens_ * static_cast<double>(m_.hidden_size) * 2.0 / (sp_ ? p_.tp : 1);
  }
  double logits_bytes() const { return output_head_buffer_bytes(m_, p_, tokens_); }
  double bucket_bytes() const { return p_.ddp_bucket_MiB * 1024 * 1024; }
  // Parameters outside the transformer layers (embedding, output layer, final norm).
  double extra_params_first() const {
    const ParamCounts c = count_params(m_);
    return static_cast<double>(c.embedding_input) / p_.tp + static_cast<double>(c.position_embedding);
  }
  // A layer's backward: the MLP (or MoE) block, then the attention block, each between its
  // TP collectives.
  std::uint32_t layer_backward_blocks(std::uint32_t x, int layer, int mb) {
    const std::string t = fmt::format("B mb{} L{}", mb, layer);
    x = tp_before(x, layer, mb, t + " mlp", true);
    x = mlp(x, layer, mb, 'B');
    x = tp_after(x, layer, mb, t + " mlp", true);
    x = tp_before(x, layer, mb, t + " attn", false);
    x = attention(x, layer, mb, 'B');
    return tp_after(x, layer, mb, t + " attn", false);
  }
  // Selective recomputation before a layer's backward (layer_cost.cc, the same modules): one
  // op for the modules without communication, then, for "mlp" / "moe", the MLP block's
  // forward with its TP and all-to-all collectives, as the forward lowers it.
  std::uint32_t recompute_modules(std::uint32_t x, int layer, int mb, std::uint32_t gather) {
    const LayerCost& lc = lc_of(is_moe(layer));
    if (lc.recompute_s <= 0) return x;
    const double block_s = lc.recompute_block ? lc.mlp_fwd_s() : 0.0;
    const double block_flops = lc.recompute_block ? lc.mlp_flops : 0.0;
    const double core_flops = p_.recomputes(RecomputeModule::kCoreAttn) ? lc.attn_core_flops : 0.0;
    const ComputeClass kind = core_flops > 0 ? ComputeClass::kAttention : ComputeClass::kGemm;
    x = annotate(add(compute(kind, SimTime::from_s(lc.recompute_s - block_s),
                             lc.recompute_flops - block_flops, layer, mb),
                     fmt::format("R mb{} L{} modules", mb, layer), {x, gather}),
                 0, core_flops);
    if (!lc.recompute_block) return x;
    const std::string t = fmt::format("R mb{} L{} mlp", mb, layer);
    return tp_after(mlp(tp_before(x, layer, mb, t, true), layer, mb, 'R'), layer, mb, t, true);
  }
  // A multi-token prediction layer's backward (with its recomputation), as the main
  // layers' without FSDP or TP overlap.
  std::uint32_t layer_backward_plain(std::uint32_t x, int layer, int mb) {
    const double held = is_moe(layer) ? full_moe_ : full_dense_;  // as the main layers' backward
    const bool recomputes = p_.recompute == Recompute::kFull ||
                            (selective() && lc_of(is_moe(layer)).recompute_s > 0);
    if (recomputes) x = memory(true, held, fmt::format("alloc recompute mb{} M{}", mb, layer), x);
    if (p_.recompute == Recompute::kFull) x = layer_forward(x, layer, mb, 'R');
    if (selective()) x = recompute_modules(x, layer, mb, kNone);
    x = host_wait(layer_backward_blocks(x, layer, mb), layer, mb, 'B');
    return recomputes ? memory(false, held, fmt::format("free recompute mb{} M{}", mb, layer), x) : x;
  }

  double extra_params_last() const {
    const ParamCounts c = count_params(m_);
    double x = static_cast<double>(c.final_norm);
    if (p_.pp == 1) x += static_cast<double>(c.output_projection) / p_.tp;
    else x += static_cast<double>(m_.tied_embeddings ? c.embedding_input : c.output_projection) / p_.tp;
    return x + mtp_params().dense;
  }
  // The last stage's multi-token prediction parameters (params.h).
  LayerRankParams mtp_params() const { return mtp_rank_params(m_, count_params(m_), p_); }

  Program& prog_;
  const ModelSpec& m_;
  const ClusterSpec& c_;
  const Plan& p_;
  const Workload& w_;
  int stage_;
  RoleTemplate& role_;
  LayerCost dense_, moe_;
  LayerComm dense_comm_, moe_comm_;
  HostStall host_dense_, host_moe_;
  HostStall host_dense_kept_, host_moe_kept_;  // recompute_num_layers: the layers not recomputing
  LayerOffload off_dense_, off_moe_;
  int act_off_end_ = -1, weight_off_end_ = -1;  // layers below these (on this stage) are offloaded
  LogitsCost logits_;
  MtpProjection mtp_;
  double mtp_act_ = 0;  // one MTP module's activations per microbatch (estimate.h)
  LayerRankParams layer_dense_, layer_moe_;
  double copy_out_dense_s_ = 0, copy_out_moe_s_ = 0;  // zero3_copy_out_s per gathered layer
  double copy_in_dense_s_ = 0, copy_in_moe_s_ = 0;    // zero3_copy_in_s per reduce-scattered layer
  int chunks_ = 1, dense_layers_ = 0, m_count_ = 1;
  std::uint8_t p2p_transfers_ = 1;  // per pipeline send/recv (stack.h pipeline_exchange_transfers)
  // full_*: the bytes a layer's recomputation holds during its backward (full: the whole
  // layer's activations; selective: its recomputed modules').
  double tokens_ = 0, act_dense_ = 0, act_moe_ = 0, full_dense_ = 0, full_moe_ = 0;
  bool sp_ = false;
  std::uint32_t last_compute_ = kNone, param_gather_ = kNone, add_dep_to_next_ = kNone;
  std::vector<std::uint32_t> dp_ops_;
  // ZeRO-3 fetch per module: the trace, its hooks, the next use, the gathers and
  // reduce-scatters issued since the last synchronisation.
  bool zmod_ = false;
  Zero3Trace ztrace_;
  Zero3Hooks zhooks_;
  bool zlist_ = false;  // the stack gathers as kSyncedList
  Zero3GatherWork zwork_;
  std::uint32_t zhost_ = kNone;  // kSyncedList: the last gather's issue (or launch)
  std::size_t zcur_ = 0;
  std::vector<std::uint32_t> zout_;
  double zlaunch_s_ = 0;
  std::vector<int> backwards_seen_;
};

}  // namespace

Program lower(const ModelSpec& m, const ClusterSpec& c, const Plan& p, const Workload& w) {
  Program prog;
  prog.placement = Placement::of(p, c.gpus_per_node);
  prog.roles.resize(static_cast<std::size_t>(p.pp));
  prog.tokens_per_step = p.global_batch * w.seq_len;
  prog.model_flops_per_step = token_flops(m, w.seq_len).training * static_cast<double>(prog.tokens_per_step);
  prog.peak_flops_per_gpu = peak_flops(c.gpu, p.precision);
  prog.interference = overlap_interference(c.gpu);
  for (int s = 0; s < p.pp; ++s) {
    StageBuilder b(prog, m, c, p, w, s);
    b.build();
  }
  return prog;
}

}  // namespace stepcast

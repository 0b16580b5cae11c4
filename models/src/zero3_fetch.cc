#include "stepcast/models/zero3_fetch.h"

#include <algorithm>
#include <cstddef>

#include "stepcast/models/compute.h"
#include "stepcast/models/stack.h"

namespace stepcast {

Zero3Policy zero3_policy(const StackProfile& s) {
  return Zero3Policy{s.zero3_prefetch_numel, s.zero3_max_live_numel, s.zero3_reuse_distance_numel};
}

Zero3Hooks zero3_coordinate(const Zero3Trace& t, const Zero3Policy& policy) {
  enum class Status : std::uint8_t { kNotAvailable, kInflight, kAvailable };
  const std::size_t n = t.uses.size();
  std::vector<Status> status(t.numel.size(), Status::kNotAvailable);
  // Reuse distance of use i: the elements of the weights used strictly between it and the
  // next use of its weight (DeepSpeed's _distance_in_numel over the recorded trace); none
  // after the trace's last use of a weight.
  std::vector<double> prefix(n + 1, 0.0);
  for (std::size_t i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + t.numel[static_cast<std::size_t>(t.uses[i].param)];
  std::vector<std::size_t> next_use(n, n);
  {
    std::vector<std::size_t> last(t.numel.size(), n);
    for (std::size_t i = n; i-- > 0;) {
      const auto p = static_cast<std::size_t>(t.uses[i].param);
      next_use[i] = last[p];
      last[p] = i;
    }
  }
  Zero3Hooks out;
  out.hooks.resize(n);
  out.params.reserve(t.numel.size() * 2);
  std::vector<int> inflight;
  double available = 0;  // gathered or in-flight elements
  for (std::size_t i = 0; i < n; ++i) {
    Zero3Hooks::Hook& h = out.hooks[i];
    const int p = t.uses[i].param;
    const auto pi = static_cast<std::size_t>(p);
    h.fetch = static_cast<std::uint32_t>(out.params.size());
    if (status[pi] == Status::kNotAvailable) {
      out.params.push_back(p);
      available += t.numel[pi];
      status[pi] = Status::kInflight;
      inflight.push_back(p);
    }
    h.prefetch = static_cast<std::uint32_t>(out.params.size());
    if (status[pi] == Status::kInflight) {
      // fetch_sub_module: _synchronize_communication completes every gather in flight.
      h.sync = true;
      for (int q : inflight) status[static_cast<std::size_t>(q)] = Status::kAvailable;
      inflight.clear();
    }
    // prefetch_next_sub_modules: only with nothing in flight and under the live limit; the
    // next not-available weights of the trace (this use's onwards) until `prefetch_numel`.
    if (inflight.empty() && available < policy.max_live_numel) {
      double numel = 0;
      for (std::size_t j = i; j < n && numel < policy.prefetch_numel; ++j) {
        const auto q = static_cast<std::size_t>(t.uses[j].param);
        if (status[q] != Status::kNotAvailable) continue;
        status[q] = Status::kInflight;
        inflight.push_back(t.uses[j].param);
        out.params.push_back(t.uses[j].param);
        numel += t.numel[q];
        available += t.numel[q];
      }
    }
    h.end = static_cast<std::uint32_t>(out.params.size());
    // release_sub_module: keep the weight only if it is used again within `reuse_numel`.
    const bool keep = next_use[i] < n && prefix[next_use[i]] - prefix[i + 1] < policy.reuse_numel;
    if (!keep) {
      status[pi] = Status::kNotAvailable;
      available -= t.numel[pi];
    }
  }
  return out;
}

const Zero3Hooks& zero3_coordinate_cached(const Zero3Trace& t, const Zero3Policy& policy) {
  // The planner prices many layouts of one model: the coordinator's decisions depend only on
  // the weights' sizes, the uses' order and the policy, not on the compute times.
  struct Entry {
    std::vector<double> numel;
    std::vector<int> params;
    Zero3Policy policy;
    Zero3Hooks hooks;
  };
  constexpr std::size_t kEntries = 4;
  thread_local std::vector<Entry> cache = [] {
    std::vector<Entry> c;
    c.reserve(kEntries);  // entries never move: a returned reference stays on its entry
    return c;
  }();
  thread_local std::size_t next = 0;
  auto same = [&](const Entry& e) {
    if (e.numel != t.numel || e.params.size() != t.uses.size()) return false;
    if (e.policy.prefetch_numel != policy.prefetch_numel || e.policy.max_live_numel != policy.max_live_numel ||
        e.policy.reuse_numel != policy.reuse_numel) {
      return false;
    }
    for (std::size_t i = 0; i < t.uses.size(); ++i) {
      if (e.params[i] != t.uses[i].param) return false;
    }
    return true;
  };
  for (const Entry& e : cache) {
    if (same(e)) return e.hooks;
  }
  Entry e{t.numel, {}, policy, zero3_coordinate(t, policy)};
  e.params.reserve(t.uses.size());
  for (const Zero3Use& u : t.uses) e.params.push_back(u.param);
  if (cache.size() < kEntries) {
    cache.push_back(std::move(e));
    return cache.back().hooks;
  }
  Entry& slot = cache[next];
  next = (next + 1) % kEntries;
  slot = std::move(e);
  return slot.hooks;
}

Zero3GatherWork zero3_gather_work(const Zero3Trace& t, const GpuSpec& gpu, double grad_bytes, int ranks,
                                  double host_us) {
  Zero3GatherWork w;
  w.issue_s = (ranks + 2) * host_us * 1e-6;
  for (double n : t.numel) {
    w.memset_s.push_back(memory_time_s(gpu, n * kZero3WeightBytes));
    w.copy_s.push_back(memory_time_s(gpu, 2 * n * kZero3WeightBytes));
    w.reduce_copy_s.push_back(memory_time_s(gpu, 4 * n * grad_bytes));
  }
  return w;
}

Zero3Timing zero3_time(const Zero3Trace& t, const Zero3Hooks& hooks, const std::vector<double>& gather_s,
                       const std::vector<double>& reduce_s, double f, double launch_s, const Zero3GatherWork* list) {
  Zero3Timing r;
  // The open segment, from its synchronisation: the compute stream's clock, the data-
  // parallel stream's (each collective starts when the stream is free and it is issued) and
  // the host's (kSyncedList: when it has issued the last gather).
  double cc = 0, sc = 0, hc = 0;
  // The compute stream's next op waits for the host.
  auto host_gate = [&] {
    if (hc > cc) {
      r.host_s += hc - cc;
      cc = hc;
    }
  };
  // kSyncedList: the memset queues once the stream is free and the host there, the device
  // drains, the host issues the gather; the stream ends with the copy-backs.
  auto drain_and_issue = [&](int p) {
    const auto q = static_cast<std::size_t>(p);
    r.total_s += std::max(cc, std::max(sc, hc) + list->memset_s[q]);
    ++r.drains;
    sc = std::max(gather_s[q], list->issue_s) + list->copy_s[q];
    hc = list->issue_s;
    cc = 0;
  };
  for (std::size_t i = 0; i < t.uses.size(); ++i) {
    if (hooks.sync(i)) {
      // The on-demand gathers queue behind the stream's work (kSyncedList: each after a
      // drain); the device then drains.
      for (int p : hooks.fetch(i)) {
        if (list != nullptr) {
          drain_and_issue(p);
        } else {
          sc += gather_s[static_cast<std::size_t>(p)];
        }
      }
      host_gate();  // kSyncedList: the last on-demand gather's issue, on the compute stream
      r.total_s += std::max(cc, sc) + launch_s;
      r.host_s += launch_s;
      cc = sc = hc = 0;
      ++r.syncs;
    }
    for (int p : hooks.prefetch(i)) {
      const double g = gather_s[static_cast<std::size_t>(p)];
      if (list != nullptr) {
        drain_and_issue(p);
        host_gate();
      } else {
        sc = std::max(sc, cc) + g;
      }
      cc += f * g;
      r.interference_s += f * g;
      if (i < t.forward_uses) r.interference_fwd_s += f * g;
    }
    const Zero3Use& u = t.uses[i];
    host_gate();
    cc += u.compute_s;
    r.compute_s += u.compute_s;
    if (u.reduce) {
      const auto q = static_cast<std::size_t>(u.param);
      sc = std::max(sc, cc) + reduce_s[q] + (list != nullptr ? list->reduce_copy_s[q] : 0.0);
    }
  }
  host_gate();
  r.total_s += std::max(cc, sc);
  return r;
}

bool zero3_module_sync_stack(const Plan& p) {
  return stack_profile(p.stack).zero3_fetch == Zero3Fetch::kModuleSync && p.zero >= 3 && p.dp * p.cp > 1;
}

bool zero3_module_fetch(const ModelSpec& m, const Plan& p) {
  return zero3_module_sync_stack(p) && p.pp == 1 && p.tp == 1 && p.cp == 1 && !m.moe && !m.mla && m.mtp_layers == 0 &&
         !p.offloads() && p.reshard_after_forward && !p.defers_reduce_scatter();
}

Zero3Trace zero3_trace(const ModelSpec& m, const Plan& p, const LayerCost& lc, double logits_fwd_s,
                       double logits_bwd_s) {
  Zero3Trace t;
  const double h = static_cast<double>(m.hidden_size), dh = static_cast<double>(m.head_dim);
  const double a = m.num_attention_heads, g = m.num_kv_heads, F = static_cast<double>(m.ffn_hidden_size);
  const bool positions = m.position_embedding == PositionEmbedding::kLearned;
  const int L = m.num_layers;
  t.numel.reserve(static_cast<std::size_t>(3 + 4 * L));
  t.numel.push_back(static_cast<double>(m.vocab_size) * h);  // word embedding
  const int pos = positions ? 1 : -1;
  if (positions) t.numel.push_back(static_cast<double>(m.max_seq_len) * h);
  const int first_layer = static_cast<int>(t.numel.size());
  for (int l = 0; l < L; ++l) {
    t.numel.push_back(h * (a + 2 * g) * dh);          // QKV
    t.numel.push_back(a * dh * h);                    // output projection
    t.numel.push_back((m.ffn_matrices - 1) * h * F);  // FC1 (gate and up)
    t.numel.push_back(F * h);                         // FC2
  }
  const int head = m.tied_embeddings ? 0 : static_cast<int>(t.numel.size());
  if (!m.tied_embeddings) t.numel.push_back(static_cast<double>(m.vocab_size) * h);
  auto w = [&](int l, int k) { return first_layer + 4 * l + k; };
  // Forward pieces (their sum is lc.fwd_s()): QKV with the norm, RoPE and the attention core
  // before the projection's hook; FC1 with the norm and the activation.
  const double q_f = lc.attn_elem_s + lc.qkv_gemm_s + lc.attn_core_s, p_f = lc.proj_gemm_s;
  const double f1_f = lc.mlp_elem_s + lc.fc1_gemm_s, f2_f = lc.fc2_gemm_s;
  // Backward pieces (their sum is lc.bwd_s()): the attention core's backward after the
  // projection's; a selective recomputation before it.
  const double full = p.recompute == Recompute::kFull ? 1.0 : 0.0;
  const double q_b = lc.qkv_dgrad_s + lc.qkv_wgrad_s + 2 * lc.attn_elem_s;
  const double p_b = lc.proj_dgrad_s + lc.proj_wgrad_s + lc.attn_core_bwd_s + (1 - full) * lc.recompute_s;
  const double f1_b = lc.fc1_dgrad_s + lc.fc1_wgrad_s + 2 * lc.mlp_elem_s, f2_b = lc.fc2_dgrad_s + lc.fc2_wgrad_s;
  // Sized once and written in place (push_back per use cost half of an estimate): the
  // embedding and head twice, learned positions twice, 4 uses per layer forward, 4 or (with
  // full recomputation) 8 backward.
  t.uses.resize(static_cast<std::size_t>(4 + (positions ? 2 : 0) + 4 * L + L * (full > 0 ? 8 : 4)));
  std::size_t k = 0;
  auto use = [&](int param, double s, bool reduce) { t.uses.at(k++) = Zero3Use{param, s, reduce}; };
  use(0, 0.0, false);
  if (positions) use(pos, 0.0, false);
  for (int l = 0; l < L; ++l) {
    use(w(l, 0), q_f, false);
    use(w(l, 1), p_f, false);
    use(w(l, 2), f1_f, false);
    use(w(l, 3), f2_f, false);
  }
  use(head, logits_fwd_s, false);
  t.forward_uses = k;
  use(head, logits_bwd_s, !m.tied_embeddings);
  for (int l = L - 1; l >= 0; --l) {
    if (full > 0) {
      use(w(l, 0), q_f, false);
      use(w(l, 1), p_f, false);
      use(w(l, 2), f1_f, false);
      use(w(l, 3), f2_f, false);
    }
    use(w(l, 3), f2_b, true);
    use(w(l, 2), f1_b, true);
    use(w(l, 1), p_b, true);
    use(w(l, 0), q_b, true);
  }
  if (positions) use(pos, 0.0, true);
  use(0, 0.0, true);
  t.uses.resize(k);
  return t;
}

}  // namespace stepcast

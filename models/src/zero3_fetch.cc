#include "stepcast/models/zero3_fetch.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <map>

#include "stepcast/models/compute.h"
#include "stepcast/models/stack.h"

namespace stepcast {

Zero3Policy zero3_policy(const StackProfile& s) {
  return Zero3Policy{s.zero3_prefetch_numel, s.zero3_max_live_numel, s.zero3_reuse_distance_numel};
}

namespace {

// Zero3Hooks::segments and segment_class: a stretch's key lists, per use, its role (or, for a
// use of its own, its index), whether it is the forward's, its weight's size, its reduce-
// scatter and its prefetched weights' sizes, then the closing synchronisation's on-demand
// weights' sizes (none at the trace's end, marked apart); the first stretch is its own class.
void classify_segments(const Zero3Trace& t, Zero3Hooks& h) {
  const std::size_t n = t.uses.size();
  h.segments.clear();
  h.segment_class.clear();
  h.class_count.clear();
  h.class_first.clear();
  for (std::size_t i = 0; i < n; ++i) {
    if (i == 0 || h.sync(i)) h.segments.push_back(static_cast<std::uint32_t>(i));
  }
  h.segments.push_back(static_cast<std::uint32_t>(n));
  std::map<std::vector<double>, std::uint32_t> classes;
  std::vector<double> key;
  for (std::size_t k = 0; k + 1 < h.segments.size(); ++k) {
    key.clear();
    key.push_back(k == 0 ? -1.0 : 0.0);
    for (std::size_t i = h.segments[k]; i < h.segments[k + 1]; ++i) {
      const Zero3Use& u = t.uses[i];
      key.push_back(u.role >= 0 ? u.role : -2.0 - static_cast<double>(i));
      key.push_back(i < t.forward_uses ? 1.0 : 0.0);
      key.push_back(t.numel[static_cast<std::size_t>(u.param)]);
      key.push_back(u.reduce ? 1.0 : 0.0);
      for (int q : h.prefetch(i)) key.push_back(t.numel[static_cast<std::size_t>(q)]);
      key.push_back(-1.0);  // separates the uses
    }
    const std::size_t end = h.segments[k + 1];
    if (end < n) {
      for (int q : h.fetch(end)) key.push_back(t.numel[static_cast<std::size_t>(q)]);
    } else {
      key.push_back(-3.0);
    }
    const std::uint32_t c = classes.emplace(key, static_cast<std::uint32_t>(classes.size())).first->second;
    h.segment_class.push_back(c);
    if (c >= h.class_count.size()) {
      h.class_count.resize(c + 1, 0);
      h.class_first.resize(c + 1, static_cast<std::uint32_t>(k));
    }
    ++h.class_count[c];
  }
}

}  // namespace

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
  classify_segments(t, out);
  return out;
}

Zero3GatherWork zero3_gather_work(const GpuSpec& gpu, double grad_bytes, int ranks, double host_us) {
  Zero3GatherWork w;
  w.issue_launches = ranks + 2;
  w.issue_s = w.issue_launches * host_us * 1e-6;
  w.memset_s_per_elem = memory_time_s(gpu, kZero3WeightBytes);
  w.copy_s_per_elem = memory_time_s(gpu, 2 * kZero3WeightBytes);
  w.reduce_copy_s_per_elem = memory_time_s(gpu, 4 * grad_bytes);
  return w;
}

Zero3Timing zero3_time(const Zero3Trace& t, const Zero3Hooks& hooks, const std::vector<double>& gather_s,
                       const std::vector<double>& reduce_s, double f, double launch_s, const Zero3GatherWork* list,
                       bool reduce_blocks, const Zero3RoleSeconds* role_s) {
  auto compute = [&](const Zero3Use& u) {
    return role_s != nullptr && u.role >= 0 ? (*role_s)[static_cast<std::size_t>(u.role)] : u.compute_s;
  };
  // One stretch [i0, i1): from the synchronisation at i0 (the trace's start for the first,
  // whose synchronisation at 0, if any, is its own) to the next's at i1, which it ends with.
  auto stretch = [&](std::size_t i0, std::size_t i1, Zero3Timing& r) {
    // The clocks from the synchronisation: the compute stream's, the data-parallel
    // stream's (each collective starts when the stream is free and it is issued) and the
    // host's (kSyncedList: when it has issued the last gather).
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
      r.total_s += std::max(cc, std::max(sc, hc) + list->memset_s(t.numel[q]));
      ++r.drains;
      sc = std::max(gather_s[q], list->issue_s) + list->copy_s(t.numel[q]);
      hc = list->issue_s;
      cc = 0;
    };
    // The synchronisation at hook i: its on-demand gathers queue behind the stream's work
    // (kSyncedList: each after a drain); the device then drains.
    auto synchronise = [&](std::size_t i) {
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
    };
    for (std::size_t i = i0; i < i1; ++i) {
      if (i == 0 && hooks.sync(0)) synchronise(0);
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
      const double work = compute(u);
      cc += work;
      r.compute_s += work;
      if (u.reduce) {
        const auto q = static_cast<std::size_t>(u.param);
        sc = std::max(sc, cc) + reduce_s[q] + (list != nullptr ? list->reduce_copy_s(t.numel[q]) : 0.0);
        if (reduce_blocks) cc = sc;
      }
    }
    if (i1 < t.uses.size()) {
      synchronise(i1);
    } else {
      host_gate();
      r.total_s += std::max(cc, sc);
    }
  };
  Zero3Timing r;
  if (hooks.segments.size() < 2) {  // hooks built by hand, without their stretches
    std::size_t i0 = 0;
    for (std::size_t i = 1; i <= t.uses.size(); ++i) {
      if (i == t.uses.size() || hooks.sync(i)) {
        stretch(i0, i, r);
        i0 = i;
      }
    }
    return r;
  }
  // Each class of stretch timed once, counted as often as it occurs.
  const std::vector<std::uint32_t>& count = hooks.class_count;
  const std::vector<std::uint32_t>& first = hooks.class_first;
  for (std::size_t c = 0; c < count.size(); ++c) {
    Zero3Timing one;
    stretch(hooks.segments[first[c]], hooks.segments[first[c] + 1], one);
    const double m = count[c];
    r.total_s += m * one.total_s;
    r.compute_s += m * one.compute_s;
    r.interference_s += m * one.interference_s;
    r.interference_fwd_s += m * one.interference_fwd_s;
    r.host_s += m * one.host_s;
    r.syncs += static_cast<int>(count[c]) * one.syncs;
    r.drains += static_cast<int>(count[c]) * one.drains;
  }
  return r;
}

bool zero3_module_sync_stack(const Plan& p) {
  return stack_profile(p.stack).zero3_fetch == Zero3Fetch::kModuleSync && p.zero >= 3 && p.dp * p.cp > 1;
}

bool zero3_module_fetch(const ModelSpec& m, const Plan& p) {
  return zero3_module_sync_stack(p) && p.pp == 1 && p.tp == 1 && p.cp == 1 && !m.moe && !m.mla && m.mtp_layers == 0 &&
         !p.offloads() && p.reshard_after_forward && !p.defers_reduce_scatter();
}

namespace {

// The elements of the trace's weights: the word embedding (and an untied head), the learned
// positions (0 without them), and each layer's QKV, output projection, FC1 (the gate and up
// matrices) and FC2. zero3_trace_shape lays them out; zero3_schedule_cached keys on them.
std::array<double, 6> weight_sizes(const ModelSpec& m) {
  const double h = static_cast<double>(m.hidden_size), dh = static_cast<double>(m.head_dim);
  const double a = m.num_attention_heads, g = m.num_kv_heads, F = static_cast<double>(m.ffn_hidden_size);
  const bool positions = m.position_embedding == PositionEmbedding::kLearned;
  return {static_cast<double>(m.vocab_size) * h,
          positions ? static_cast<double>(m.max_seq_len) * h : 0.0,
          h * (a + 2 * g) * dh,
          a * dh * h,
          (m.ffn_matrices - 1) * h * F,
          F * h};
}

}  // namespace

Zero3Trace zero3_trace_shape(const ModelSpec& m, const Plan& p) {
  Zero3Trace t;
  const std::array<double, 6> sizes = weight_sizes(m);
  const bool positions = m.position_embedding == PositionEmbedding::kLearned;
  const int L = m.num_layers;
  t.numel.reserve(static_cast<std::size_t>(3 + 4 * L));
  t.numel.push_back(sizes[0]);  // word embedding
  const int pos = positions ? 1 : -1;
  if (positions) t.numel.push_back(sizes[1]);
  const int first_layer = static_cast<int>(t.numel.size());
  for (int l = 0; l < L; ++l) t.numel.insert(t.numel.end(), sizes.begin() + 2, sizes.end());
  const int head = m.tied_embeddings ? 0 : static_cast<int>(t.numel.size());
  if (!m.tied_embeddings) t.numel.push_back(sizes[0]);
  auto w = [&](int l, int k) { return first_layer + 4 * l + k; };
  const bool full = p.recompute == Recompute::kFull;
  // Sized once and written in place: the embedding and head twice, learned positions twice,
  // 4 uses per layer forward, 4 or (with full recomputation) 8 backward.
  t.uses.resize(static_cast<std::size_t>(4 + (positions ? 2 : 0) + 4 * L + L * (full ? 8 : 4)));
  std::size_t k = 0;
  auto use = [&](int param, bool reduce, Zero3Role role) { t.uses.at(k++) = Zero3Use{param, 0.0, reduce, role}; };
  use(0, false, kZ3EmbF);
  if (positions) use(pos, false, kZ3PosF);
  for (int l = 0; l < L; ++l) {
    use(w(l, 0), false, kZ3QF);
    use(w(l, 1), false, kZ3PF);
    use(w(l, 2), false, kZ3F1F);
    use(w(l, 3), false, kZ3F2F);
  }
  use(head, false, kZ3HeadF);
  t.forward_uses = k;
  use(head, !m.tied_embeddings, kZ3HeadB);
  for (int l = L - 1; l >= 0; --l) {
    if (full) {
      use(w(l, 0), false, kZ3QR);
      use(w(l, 1), false, kZ3PR);
      use(w(l, 2), false, kZ3F1R);
      use(w(l, 3), false, kZ3F2R);
    }
    use(w(l, 3), true, kZ3F2B);
    use(w(l, 2), true, kZ3F1B);
    use(w(l, 1), true, kZ3PB);
    use(w(l, 0), true, kZ3QB);
  }
  if (positions) use(pos, true, kZ3PosB);
  use(0, true, kZ3EmbB);
  t.uses.resize(k);
  return t;
}

Zero3RoleSeconds zero3_role_seconds(const Plan& p, const LayerCost& lc, double logits_fwd_s, double logits_bwd_s) {
  Zero3RoleSeconds r{};  // the embedding's and the positions' uses compute nothing
  // Forward pieces (their sum is lc.fwd_s()): QKV with the norm, RoPE and the attention core
  // before the projection's hook; FC1 with the norm and the activation. The recomputed
  // forward repeats them.
  r[kZ3QF] = r[kZ3QR] = lc.attn_elem_s + lc.qkv_gemm_s + lc.attn_core_s;
  r[kZ3PF] = r[kZ3PR] = lc.proj_gemm_s;
  r[kZ3F1F] = r[kZ3F1R] = lc.mlp_elem_s + lc.fc1_gemm_s;
  r[kZ3F2F] = r[kZ3F2R] = lc.fc2_gemm_s;
  // Backward pieces (their sum is lc.bwd_s()): the attention core's backward after the
  // projection's; a selective recomputation before it.
  const double full = p.recompute == Recompute::kFull ? 1.0 : 0.0;
  r[kZ3QB] = lc.qkv_dgrad_s + lc.qkv_wgrad_s + 2 * lc.attn_elem_s;
  r[kZ3PB] = lc.proj_dgrad_s + lc.proj_wgrad_s + lc.attn_core_bwd_s + (1 - full) * lc.recompute_s;
  r[kZ3F1B] = lc.fc1_dgrad_s + lc.fc1_wgrad_s + 2 * lc.mlp_elem_s;
  r[kZ3F2B] = lc.fc2_dgrad_s + lc.fc2_wgrad_s;
  r[kZ3HeadF] = logits_fwd_s;
  r[kZ3HeadB] = logits_bwd_s;
  return r;
}

Zero3Trace zero3_trace(const ModelSpec& m, const Plan& p, const LayerCost& lc, double logits_fwd_s,
                       double logits_bwd_s) {
  Zero3Trace t = zero3_trace_shape(m, p);
  const Zero3RoleSeconds r = zero3_role_seconds(p, lc, logits_fwd_s, logits_bwd_s);
  for (Zero3Use& u : t.uses) u.compute_s = r[static_cast<std::size_t>(u.role)];
  return t;
}

const Zero3Schedule& zero3_schedule_cached(const ModelSpec& m, const Plan& p, const Zero3Policy& policy) {
  // What zero3_trace_shape reads: the weights' sizes, the layer count, learned positions,
  // tied embeddings and full recomputation; and the policy.
  struct Key {
    std::array<double, 6> numel{};
    int layers = 0;
    bool positions = false, tied = false, full = false;
    double prefetch = 0, max_live = 0, reuse = 0;
    bool operator==(const Key&) const = default;
  };
  const Key key{weight_sizes(m),
                m.num_layers,
                m.position_embedding == PositionEmbedding::kLearned,
                m.tied_embeddings,
                p.recompute == Recompute::kFull,
                policy.prefetch_numel,
                policy.max_live_numel,
                policy.reuse_numel};
  struct Entry {
    Key key;
    Zero3Schedule schedule;
  };
  constexpr std::size_t kEntries = 4;
  thread_local std::vector<Entry> cache = [] {
    std::vector<Entry> c;
    c.reserve(kEntries);  // entries never move: a returned reference stays on its entry
    return c;
  }();
  thread_local std::size_t next = 0;
  for (const Entry& e : cache) {
    if (e.key == key) return e.schedule;
  }
  Entry e{key, {zero3_trace_shape(m, p), {}}};
  e.schedule.hooks = zero3_coordinate(e.schedule.trace, policy);
  if (cache.size() < kEntries) {
    cache.push_back(std::move(e));
    return cache.back().schedule;
  }
  Entry& slot = cache[next];
  next = (next + 1) % kEntries;
  slot = std::move(e);
  return slot.schedule;
}

}  // namespace stepcast

#include "spec_json.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

namespace stepcast::detail {

namespace {
constexpr std::int64_t kMaxDim = 10'000'000;      // hidden/FFN sizes
// Layers: about 10x the deepest model trained so far (Llama-3-405B and GPT-3 have 126 and
// 96). Above this, lowering builds per-layer ops for every microbatch and rank role, which
// for 100,000 layers ran out of memory after seconds instead of naming the field.
constexpr std::int64_t kMaxLayers = 1'000;
constexpr std::int64_t kMaxHeads = 100'000;
constexpr std::int64_t kMaxVocab = 100'000'000;
constexpr std::int64_t kMaxSeq = 100'000'000;

template <typename T, typename U>
void set(T& field, const std::optional<U>& v) {
  if (v) field = static_cast<T>(*v);
}

// Each size is bounded on its own, but their products are not: 100000 layers of
// h = 10^7 would be 10^20 parameters, past int64 in count_params. The loader rejects
// models above kMaxParams (1000 x the largest model trained so far), checked in double
// with every term of docs/cost-model-sources.md section 1.1 taken at its largest (dense and MoE FFN,
// and MHA and MLA projections, all at once), so the bound is above the exact count.
constexpr double kMaxParams = 1e15;
double params_upper_bound(const ModelSpec& m) {
  const double h = static_cast<double>(m.hidden_size);
  const double a = m.num_attention_heads, g = m.num_kv_heads;
  const double d = static_cast<double>(m.head_dim);
  double layer = 2 * h * a * d + 2 * h * g * d + (a + 2 * g) * d + 5 * h;  // Q, O, K, V, biases, norms
  layer += m.ffn_matrices * h * static_cast<double>(m.ffn_hidden_size) +
           static_cast<double>(m.ffn_hidden_size);
  if (m.moe) {
    const double f = static_cast<double>(
        std::max(m.moe->expert_ffn_hidden_size, m.moe->shared_expert_ffn_hidden_size));
    const double experts = static_cast<double>(m.moe->num_experts) + m.moe->num_shared_experts;
    layer += experts * (m.ffn_matrices * h * f + f + h) + 2 * h * m.moe->num_experts;
  }
  if (m.mla) {
    const double q = static_cast<double>(m.mla->q_lora_rank);
    const double kv = static_cast<double>(m.mla->kv_lora_rank);
    const double dn = static_cast<double>(m.mla->qk_nope_head_dim);
    const double dr = static_cast<double>(m.mla->qk_rope_head_dim);
    const double dv = static_cast<double>(m.mla->v_head_dim);
    layer += (h + a * (dn + dr)) * (q + h) + h * (kv + dr) + kv * a * (dn + dv) + a * dv * h + q + kv;
  }
  const double vocab = static_cast<double>(m.vocab_size);
  return m.num_layers * layer + 2 * vocab * h + static_cast<double>(m.max_seq_len) * h + h;
}
}  // namespace

std::optional<double> physical(ObjectReader& r, std::string_view key, const PhysicalRange& range) {
  auto x = r.number(key, 0, std::numeric_limits<double>::max(), false, true);
  if (x && !(*x >= range.lo && *x <= range.hi)) {
    r.diag().add(r.path_of(key), fmt::format("{} is outside the physical range ({} to {} {})",
                                             describe(*r.raw(key)), range.lo, range.hi, range.unit));
    return std::nullopt;
  }
  return x;
}

std::string unknown_preset_message(const std::string& kind, const std::string& name,
                                   const std::vector<std::string>& names) {
  std::string msg = fmt::format("unknown {} preset \"{}\"", kind, name);
  const std::string near = closest(name, names);
  if (!near.empty()) msg += fmt::format("; did you mean \"{}\"?", near);
  msg += " (stepcast presets lists them)";
  return msg;
}

static std::optional<MoeSpec> read_moe(ObjectReader& parent, std::optional<MoeSpec> base) {
  const json* v = parent.raw("moe");
  if (!v) return base;
  if (v->is_null()) return std::nullopt;
  const std::string path = parent.path_of("moe");
  if (!v->is_object()) {
    parent.diag().add(path, "expected an object or null, got " + describe(*v));
    return base;
  }
  ObjectReader r(*v, path, parent.diag());
  MoeSpec m = base.value_or(MoeSpec{});
  const bool fresh = !base.has_value();
  set(m.num_experts, r.integer("num_experts", 1, 1'000'000));
  set(m.top_k, r.integer("top_k", 1, 1'000'000));
  set(m.num_shared_experts, r.integer("num_shared_experts", 0, 1'000'000));
  set(m.expert_ffn_hidden_size, r.integer("expert_ffn_hidden_size", 1, kMaxDim));
  set(m.shared_expert_ffn_hidden_size, r.integer("shared_expert_ffn_hidden_size", 0, kMaxDim));
  set(m.num_dense_layers, r.integer("num_dense_layers", 0, kMaxLayers));
  if (auto f = r.integer("moe_layer_freq", 1, kMaxLayers); f && *f != 1) {
    r.diag().add(r.path_of("moe_layer_freq"),
                 fmt::format("{} is not supported (only 1: every layer after the dense ones is MoE)", *f));
  }
  set(m.capacity_factor, r.number("capacity_factor", 0, 1000, /*allow_null=*/true));
  set(m.pad_to_capacity, r.boolean("pad_to_capacity"));
  set(m.router_bias, r.boolean("router_bias"));
  set(m.load_imbalance, r.number("load_imbalance", 1, 100));
  set(m.expert_groups, r.integer("expert_groups", 1, 1'000'000));
  set(m.limited_groups, r.integer("limited_groups", 1, 1'000'000));
  r.ignore({"router", "route_scale"});
  r.finish();
  if (fresh) {
    if (!r.has("num_experts")) r.diag().add(r.path_of("num_experts"), "required");
    if (!r.has("expert_ffn_hidden_size")) r.diag().add(r.path_of("expert_ffn_hidden_size"), "required");
  }
  if (m.expert_groups > 0 && m.num_experts > 0 && m.num_experts % m.expert_groups != 0) {
    r.diag().add(r.path_of("expert_groups"),
                 fmt::format("{} does not divide num_experts ({})", m.expert_groups, m.num_experts));
  } else if (m.limited_groups > 0 && m.expert_groups == 0) {
    r.diag().add(r.path_of("limited_groups"), "needs expert_groups (the groups it chooses among)");
  } else if (m.limited_groups > m.expert_groups) {
    r.diag().add(r.path_of("limited_groups"),
                 fmt::format("{} exceeds expert_groups ({})", m.limited_groups, m.expert_groups));
  } else if (m.limited_groups > 0 && m.top_k > m.limited_groups * (m.num_experts / m.expert_groups)) {
    r.diag().add(r.path_of("top_k"),
                 fmt::format("{} exceeds the {} experts of limited_groups ({}) groups", m.top_k,
                             m.limited_groups * (m.num_experts / m.expert_groups), m.limited_groups));
  }
  if (m.top_k > m.num_experts && m.num_experts > 0) {
    r.diag().add(r.path_of("top_k"),
                 fmt::format("{} exceeds num_experts ({})", m.top_k, m.num_experts));
  }
  if (m.pad_to_capacity && m.capacity_factor <= 0) {
    // Megatron-Core transformer_config.py: "moe_expert_capacity_factor must be set to use
    // moe_pad_expert_input_to_capacity".
    r.diag().add(r.path_of("pad_to_capacity"), "needs capacity_factor (the capacity it pads to)");
  }
  return m;
}

static std::optional<MlaSpec> read_mla(ObjectReader& parent, std::optional<MlaSpec> base) {
  const json* v = parent.raw("mla");
  if (!v) return base;
  if (v->is_null()) return std::nullopt;
  const std::string path = parent.path_of("mla");
  if (!v->is_object()) {
    parent.diag().add(path, "expected an object or null, got " + describe(*v));
    return base;
  }
  ObjectReader r(*v, path, parent.diag());
  MlaSpec m = base.value_or(MlaSpec{});
  set(m.q_lora_rank, r.integer("q_lora_rank", 0, kMaxDim));
  set(m.kv_lora_rank, r.integer("kv_lora_rank", 1, kMaxDim));
  set(m.qk_nope_head_dim, r.integer("qk_nope_head_dim", 1, kMaxDim));
  set(m.qk_rope_head_dim, r.integer("qk_rope_head_dim", 0, kMaxDim));
  set(m.v_head_dim, r.integer("v_head_dim", 1, kMaxDim));
  r.finish();
  if (!base) {
    for (const char* k : {"kv_lora_rank", "qk_nope_head_dim", "v_head_dim"}) {
      if (!r.has(k)) r.diag().add(r.path_of(k), "required");
    }
  }
  return m;
}

ModelSpec read_model(ObjectReader& r, ModelSpec m, bool from_preset) {
  const std::size_t before = r.diag().size();
  set(m.name, r.string("name"));
  set(m.family, r.string("family"));
  if (auto v = r.choice("attention", {"mha", "gqa", "mqa", "mla"})) (void)v;  // informational
  auto layers = r.integer("num_layers", 1, kMaxLayers);
  auto hidden = r.integer("hidden_size", 1, kMaxDim);
  auto heads = r.integer("num_attention_heads", 1, kMaxHeads);
  auto kv = r.integer("num_kv_heads", 1, kMaxHeads);
  auto head_dim = r.integer("head_dim", 1, kMaxDim);
  auto ffn = r.integer("ffn_hidden_size", 1, kMaxDim);
  auto act = r.choice("ffn_activation", {"swiglu", "geglu", "gelu", "relu"});
  auto mats = r.integer("ffn_matrices", 2, 3);
  auto norm = r.choice("norm", {"rmsnorm", "layernorm"});
  auto pos = r.choice("position_embedding", {"rope", "learned"});
  set(m.tied_embeddings, r.boolean("tied_embeddings"));
  set(m.linear_bias, r.boolean("linear_bias"));
  set(m.qk_norm, r.boolean("qk_norm"));
  set(m.dropout, r.boolean("dropout"));
  auto vocab = r.integer("vocab_size", 1, kMaxVocab);
  auto max_seq = r.integer("max_seq_len", 1, kMaxSeq);
  auto train_seq = r.integer("train_seq_len", 1, kMaxSeq);
  set(m.source, r.string("source"));
  if (auto p = r.integer("params_total", 0, std::int64_t{1} << 60)) m.reference_params_total = *p;
  if (auto k = r.integer("mtp_modules", 0, 16)) m.mtp_layers = static_cast<int>(*k);
  // Sliding-window attention: null (over a preset) turns it off, with its layer pattern.
  if (const json* v = r.raw("sliding_window"); v && v->is_null()) {
    m.sliding_window = 0;
    m.window_attn_skip_freq = 0;
  } else if (auto w = r.integer("sliding_window", 1, kMaxSeq)) m.sliding_window = *w;
  if (auto f = r.integer("window_attn_skip_freq", 0, kMaxLayers)) {
    if (*f == 1) {
      r.diag().add(r.path_of("window_attn_skip_freq"),
                   "1 would keep every layer at full attention; give 0 (every layer windowed) or N >= 2 "
                   "(layers numbered N, 2N, ... keep full attention), or drop sliding_window");
    } else {
      m.window_attn_skip_freq = static_cast<int>(*f);
    }
  }
  r.number("rope_theta", 0, 1e12, /*allow_null=*/true);
  r.ignore({"notes", "verification", "params_official", "params_per_layer", "params_active",
            "params_embedding_input", "params_attention_per_layer", "preset"});
  m.moe = read_moe(r, m.moe);
  m.mla = read_mla(r, m.mla);

  set(m.num_layers, layers);
  set(m.hidden_size, hidden);
  set(m.num_attention_heads, heads);
  set(m.vocab_size, vocab);
  set(m.max_seq_len, max_seq);
  set(m.train_seq_len, train_seq);
  set(m.ffn_hidden_size, ffn);
  if (act) {
    m.ffn_activation = *act;
    if (!mats) m.ffn_matrices = (*act == "swiglu" || *act == "geglu") ? 3 : 2;
  }
  set(m.ffn_matrices, mats);
  if (norm) m.norm = *norm == "layernorm" ? NormKind::kLayerNorm : NormKind::kRmsNorm;
  if (pos) m.position_embedding = *pos == "learned" ? PositionEmbedding::kLearned : PositionEmbedding::kRope;
  // An override of the head count keeps the preset's KV ratio only if the user says so.
  if (kv) m.num_kv_heads = static_cast<int>(*kv);
  else if (!from_preset && heads) m.num_kv_heads = static_cast<int>(*heads);
  if (head_dim) m.head_dim = *head_dim;
  else if (!from_preset && hidden && heads && *heads > 0) m.head_dim = *hidden / *heads;
  if (!from_preset && !max_seq && train_seq) m.max_seq_len = *train_seq;
  if (!from_preset && !train_seq && max_seq) m.train_seq_len = *max_seq;
  if (!from_preset && !m.moe && !ffn && hidden) {
    // The family's usual value: 4h for plain FFNs, the Llama rule 2/3 * 4h for gated ones.
    m.ffn_hidden_size = m.ffn_matrices == 3 ? (8 * *hidden / 3 + 255) / 256 * 256 : 4 * *hidden;
  }
  if (!from_preset && m.moe && !ffn) m.ffn_hidden_size = m.moe->expert_ffn_hidden_size;
  if (m.moe && m.moe->shared_expert_ffn_hidden_size == 0) {
    m.moe->shared_expert_ffn_hidden_size = m.moe->expert_ffn_hidden_size;
  }

  if (!from_preset) {
    for (const char* k : {"num_layers", "hidden_size", "num_attention_heads", "vocab_size"}) {
      if (!r.has(k)) r.diag().add(r.path_of(k), "required (or give \"preset\")");
    }
    if (!r.has("max_seq_len") && !r.has("train_seq_len")) {
      r.diag().add(r.path_of("max_seq_len"), "required (or give \"preset\")");
    }
  }
  if (r.diag().size() != before) return m;
  if (!from_preset && !head_dim && m.hidden_size % m.num_attention_heads != 0) {
    // The default head_dim = h / a would silently round down.
    r.diag().add(r.path_of("num_attention_heads"),
                 fmt::format("{} does not divide hidden_size ({}); give head_dim explicitly",
                             m.num_attention_heads, m.hidden_size));
  }
  if (m.num_attention_heads % m.num_kv_heads != 0) {
    r.diag().add(r.path_of("num_kv_heads"),
                 fmt::format("{} does not divide num_attention_heads ({})", m.num_kv_heads,
                             m.num_attention_heads));
  }
  if (m.moe && m.moe->num_dense_layers > m.num_layers) {
    r.diag().add(r.path_of("moe.num_dense_layers"),
                 fmt::format("{} exceeds num_layers ({})", m.moe->num_dense_layers, m.num_layers));
  }
  if (m.window_attn_skip_freq > 0 && m.sliding_window == 0) {
    r.diag().add(r.path_of("window_attn_skip_freq"), "given without sliding_window (the window's size in tokens)");
  }
  if (m.train_seq_len > m.max_seq_len) {
    r.diag().add(r.path_of("train_seq_len"),
                 fmt::format("{} exceeds max_seq_len ({})", m.train_seq_len, m.max_seq_len));
  }
  if (const double n = params_upper_bound(m); n > kMaxParams) {
    r.diag().add(r.path(), fmt::format("about {:.2g} parameters, more than the {:g} stepcast "
                                       "supports",
                                       n, kMaxParams));
  }
  return m;
}

GpuSpec read_gpu(ObjectReader& r, GpuSpec g, bool from_preset) {
  set(g.display_name, r.string("name"));
  set(g.architecture, r.string("architecture"));
  set(g.bf16_dense_tflops, physical(r, "bf16_dense_tflops", kTflopsRange));
  set(g.fp16_dense_tflops, physical(r, "fp16_dense_tflops", kTflopsRange));
  if (const json* v = r.raw("fp8_dense_tflops"); v && v->is_null()) g.fp8_dense_tflops = 0;
  else set(g.fp8_dense_tflops, physical(r, "fp8_dense_tflops", kTflopsRange));
  set(g.hbm_GiB, physical(r, "hbm_GiB", kHbmGiBRange));
  set(g.hbm_bandwidth_GBps, physical(r, "hbm_bandwidth_GBps", kHbmGBpsRange));
  set(g.sms, r.integer("sms", 1, 1'000'000));
  if (const json* v = r.raw("mamf_bf16_tflops"); v && v->is_null()) g.mamf_bf16_tflops = 0;
  else set(g.mamf_bf16_tflops, physical(r, "mamf_bf16_tflops", kTflopsRange));
  if (const json* v = r.raw("mamf_fp8_tflops"); v && v->is_null()) g.mamf_fp8_tflops = 0;
  else set(g.mamf_fp8_tflops, physical(r, "mamf_fp8_tflops", kTflopsRange));
  set(g.gemm_fp8_k_half, r.number("gemm_fp8_k_half", 0, 1e6));
  set(g.gemm_bf16_k_half, r.number("gemm_bf16_k_half", 0, 1e6));
  set(g.gemm_bf16_sweep_tflops, physical(r, "gemm_bf16_sweep_tflops", kTflopsRange));
  set(g.scaleup_bandwidth_per_direction_GBps, physical(r, "scaleup_bandwidth_per_direction_GBps", kLinkGBpsRange));
  set(g.scaleup_domain_gpus, r.integer("scaleup_domain_gpus", 1, 1'000'000));
  set(g.nic_Gbps_per_gpu, physical(r, "nic_Gbps_per_gpu", kNicGbpsRange));
  set(g.tdp_W, physical(r, "tdp_W", kPowerWRange));
  set(g.gemm_efficiency, physical(r, "gemm_efficiency", kEfficiencyRange));
  set(g.attention_efficiency, physical(r, "attention_efficiency", kEfficiencyRange));
  set(g.hbm_efficiency, physical(r, "hbm_efficiency", kEfficiencyRange));
  set(g.overlap_slowdown, r.number("overlap_slowdown", 0, 4));  // a fraction; 0 = off
  set(g.gemm_tile_m, r.integer("gemm_tile_m", 1, 4096));
  set(g.gemm_tile_n, r.integer("gemm_tile_n", 1, 4096));
  set(g.source, r.string("source"));
  r.ignore({"vendor", "tf32_dense_tflops", "fp4_dense_tflops", "int8_dense_tops", "hbm_type", "scaleup_fabric",
            "scaleup_generation", "scaleup_links", "scaleup_bandwidth_bidir_GBps",
            "scaleup_per_peer_per_direction_GBps", "compute_units", "verification", "notes", "preset"});
  if (!from_preset) {
    for (const char* k : {"bf16_dense_tflops", "hbm_GiB", "hbm_bandwidth_GBps"}) {
      if (!r.has(k)) r.diag().add(r.path_of(k), "required (or give \"preset\")");
    }
    if (!r.has("fp16_dense_tflops")) g.fp16_dense_tflops = g.bf16_dense_tflops;
  }
  return g;
}

ClusterSpec read_cluster(ObjectReader& r, ClusterSpec c, bool from_preset,
                         const std::map<std::string, GpuSpec>& gpus) {
  set(c.name, r.string("name"));
  const std::size_t before = r.diag().size();
  bool gpu_given = false;
  if (const json* v = r.raw("gpu")) {
    GpuSpec defaults;
    defaults.name = "custom";
    if (auto g = resolve_spec<GpuSpec>(*v, r.path_of("gpu"), r.diag(), gpus, defaults, "gpu",
                                       [](ObjectReader& rr, GpuSpec base, bool fp) {
                                         return read_gpu(rr, std::move(base), fp);
                                       })) {
      c.gpu = *g;
      gpu_given = true;
    }
  } else if (!from_preset) {
    r.diag().add(r.path_of("gpu"), "required (or give \"preset\")");
  }
  set(c.nodes, r.integer("nodes", 1, 1'000'000));
  auto gpn = r.integer("gpus_per_node", 1, 1024);
  set(c.gpus_per_node, gpn);
  if (!from_preset && !gpn && gpu_given && c.gpu.scaleup_domain_gpus > 0) {
    c.gpus_per_node = c.gpu.scaleup_domain_gpus;
  }
  bool intra_bw = false, nic = false, nics = false;
  if (const json* v = r.raw("intra_node")) {
    if (!v->is_object()) {
      r.diag().add(r.path_of("intra_node"), "expected an object, got " + describe(*v));
    } else {
      ObjectReader s(*v, r.path_of("intra_node"), r.diag());
      auto bw = physical(s, "bandwidth_GBps", kLinkGBpsRange);
      intra_bw = bw.has_value();
      set(c.intra_bandwidth_GBps, bw);
      set(c.intra_latency_us, s.number("latency_us", 0, kMaxLatencyUs));
      set(c.intra_efficiency, physical(s, "efficiency", kEfficiencyRange));
      s.finish();
    }
  }
  if (const json* v = r.raw("inter_node")) {
    if (!v->is_object()) {
      r.diag().add(r.path_of("inter_node"), "expected an object, got " + describe(*v));
    } else {
      ObjectReader s(*v, r.path_of("inter_node"), r.diag());
      auto n = physical(s, "nic_Gbps", kNicGbpsRange);
      nic = n.has_value();
      set(c.nic_Gbps, n);
      auto k = s.integer("nics_per_node", 1, 1024);
      nics = k.has_value();
      set(c.nics_per_node, k);
      set(c.inter_latency_us, s.number("latency_us", 0, kMaxLatencyUs));
      set(c.inter_efficiency, physical(s, "efficiency", kEfficiencyRange));
      if (auto t = s.choice("topology", {"single-switch", "fat-tree", "rail-optimized"})) {
        c.topology = *t == "single-switch" ? Topology::kSingleSwitch
                     : *t == "fat-tree"    ? Topology::kFatTree
                                           : Topology::kRailOptimized;
      }
      set(c.oversubscription, s.number("oversubscription", 1, 1000));
      set(c.nodes_per_leaf, s.integer("nodes_per_leaf", 1, 1'000'000));
      s.finish();
    }
  }
  if (const json* v = r.raw("storage")) {
    if (!v->is_object()) {
      r.diag().add(r.path_of("storage"), "expected an object, got " + describe(*v));
    } else {
      ObjectReader s(*v, r.path_of("storage"), r.diag());
      set(c.storage_write_GBps, physical(s, "write_GBps", kStorageGBpsRange));
      set(c.storage_read_GBps, physical(s, "read_GBps", kStorageGBpsRange));
      set(c.storage_commit_s, s.number("commit_s", 0, 3600));
      set(c.storage_local, s.boolean("local"));
      s.finish();
    }
  }
  set(c.host_memory_GiB, physical(r, "host_memory_GiB", kHostGiBRange));
  if (const json* v = r.raw("host")) {
    if (!v->is_object()) {
      r.diag().add(r.path_of("host"), "expected an object, got " + describe(*v));
    } else {
      ObjectReader s(*v, r.path_of("host"), r.diag());
      set(c.host_link_GBps, physical(s, "link_GBps", kLinkGBpsRange));
      set(c.host_memory_bandwidth_GBps, physical(s, "memory_bandwidth_GBps", kLinkGBpsRange));
      set(c.host_efficiency, physical(s, "efficiency", kEfficiencyRange));
      if (auto cpu = s.choice("cpu", {"intel", "amd"})) c.host_cpu = *cpu == "amd" ? HostCpu::kAmd : HostCpu::kIntel;
      s.finish();
    }
  }
  set(c.gpu_speed_sigma, r.number("gpu_speed_sigma", 0, 0.5));
  if (auto m = r.choice("collectives", {"nccl", "alpha_beta"})) {
    c.collectives = *m == "nccl" ? CollectiveModel::kNccl : CollectiveModel::kAlphaBeta;
  }
  set(c.source, r.string("source"));
  r.ignore({"preset"});
  if (!from_preset && r.diag().size() == before) {
    // A full cluster object: take the GPU's reference-server figures where not given.
    if (c.name.empty()) c.name = "custom";
    if (!intra_bw) c.intra_bandwidth_GBps = c.gpu.scaleup_bandwidth_per_direction_GBps;
    if (!nics) c.nics_per_node = c.gpus_per_node;
    if (!nic) c.nic_Gbps = c.gpu.nic_Gbps_per_gpu;
    if (c.intra_bandwidth_GBps <= 0 && c.gpus_per_node > 1) {
      r.diag().add(r.path_of("intra_node.bandwidth_GBps"),
                   "required: the gpu gives no scaleup_bandwidth_per_direction_GBps");
    }
    if (c.nic_Gbps <= 0 && c.nodes > 1) {
      r.diag().add(r.path_of("inter_node.nic_Gbps"), "required: the gpu gives no nic_Gbps_per_gpu");
    }
  }
  return c;
}

}  // namespace stepcast::detail

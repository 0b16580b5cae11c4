#include "stepcast/models/scenario.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include <fmt/format.h>

#include "list_reader.h"
#include "reliability_json.h"
#include "search_json.h"
#include "spec_json.h"
#include "stepcast/models/attention.h"
#include "stepcast/models/estimate.h"
#include "stepcast/models/names.h"
#include "stepcast/models/pipeline_layout.h"
#include "stepcast/models/presets.h"
#include "stepcast/models/program.h"
#include "stepcast/models/report.h"
#include "stepcast/models/stack.h"
#include "stepcast/models/zero3_fetch.h"
#include "stragglers_json.h"

namespace stepcast {

using detail::describe;
using detail::Diagnostics;
using detail::json;
using detail::ObjectReader;

namespace {

constexpr std::int64_t kMaxGlobalBatch = 1'000'000'000;  // sequences per step

void read_plan(ObjectReader& r, Plan& p, bool& dp_given) {
  constexpr std::int64_t kMaxPar = 1'000'000;
  auto set = [](auto& field, const auto& v) {
    if (v) field = static_cast<std::remove_reference_t<decltype(field)>>(*v);
  };
  set(p.tp, r.integer("tp", 1, kMaxPar));
  set(p.pp, r.integer("pp", 1, kMaxPar));
  dp_given = r.has("dp");
  set(p.dp, r.integer("dp", 1, kMaxPar));
  set(p.cp, r.integer("cp", 1, kMaxPar));
  set(p.ep, r.integer("ep", 1, kMaxPar));
  set(p.etp, r.integer("etp", 1, kMaxPar));
  set(p.sequence_parallel, r.boolean("sequence_parallel"));
  set(p.tp_comm_overlap, r.boolean("tp_comm_overlap"));
  if (auto s = r.choice("schedule", names_of<Schedule>())) p.schedule = *parse_schedule(*s);
  set(p.virtual_stages, r.integer("virtual_stages", 1, 1000));
  if (const json* layout = r.raw("pipeline_layout")) {
    // Megatron-Core's layout string, or the decoder layers of each chunk as a list.
    const std::string path = r.path_of("pipeline_layout");
    if (layout->is_string()) {
      auto parsed = parse_pipeline_layout(layout->get<std::string>());
      if (!parsed.ok()) r.diag().add(path, parsed.error().message);
      else {
        p.pipeline_layout = parsed->layers;
        p.pipeline_layout_mtp = parsed->mtp;
      }
    } else if (layout->is_array() && !layout->empty()) {
      for (std::size_t i = 0; i < layout->size(); ++i) {
        const json& v = (*layout)[i];
        if (!v.is_number_integer() || v.get<std::int64_t>() < 0 || v.get<std::int64_t>() > 100000) {
          r.diag().add(reader::index(path, i),
                       fmt::format("expected a layer count from 0 to 100000, got {}", describe(v)));
          p.pipeline_layout.clear();
          break;
        }
        p.pipeline_layout.push_back(v.get<int>());
      }
    } else {
      r.diag().add(path, fmt::format("expected Megatron-Core's layout string (e.g. \"Et|(tt|)*30mL\") or a list of "
                                     "layer counts per model chunk (e.g. [1, 2, 2, 0]), got {}",
                                     describe(*layout)));
    }
  }
  set(p.microbatch_group, r.integer("microbatch_group_size_per_vp_stage", 1, kMaxGlobalBatch));
  set(p.microbatch, r.integer("microbatch", 1, kMaxPar));
  const bool gb_given = r.has("global_batch");
  set(p.global_batch, r.integer("global_batch", 1, kMaxGlobalBatch));
  set(p.zero, r.integer("zero", 0, 3));
  if (auto s = r.choice("recompute", names_of<Recompute>())) p.recompute = *parse_recompute(*s);
  if (r.has("recompute_modules")) {
    if (auto mods = detail::choices<RecomputeModule>(r, "recompute_modules")) {
      if (p.recompute != Recompute::kSelective) {
        r.diag().add(r.path_of("recompute_modules"),
                     fmt::format("applies to recompute \"selective\" (Megatron-Core recompute_granularity), "
                                 "not \"{}\"",
                                 to_string(p.recompute)));
      }
      p.recompute_modules = 0;
      for (RecomputeModule m : *mods) p.recompute_modules |= module_bit(m);
    }
  }
  if (r.has("recompute_num_layers")) {
    set(p.recompute_num_layers, r.integer("recompute_num_layers", 0, 100000));
    if (p.recompute != Recompute::kFull && p.recompute_num_layers > 0) {
      r.diag().add(r.path_of("recompute_num_layers"),
                   fmt::format("applies to recompute \"full\" (Megatron-Core recompute_method \"block\"), not \"{}\"",
                               to_string(p.recompute)));
    }
  }
  if (auto s = r.choice("recompute_method", names_of<RecomputeMethod>())) {
    p.recompute_method = *parse_name<RecomputeMethod>(*s);
    if (p.recompute != Recompute::kFull) {
      r.diag().add(
          r.path_of("recompute_method"),
          fmt::format("applies to recompute \"full\" (Megatron-Core recompute_granularity \"full\"), not \"{}\"",
                      to_string(p.recompute)));
    }
  }
  if (auto s = r.choice("precision", names_of<Precision>())) p.precision = *parse_precision(*s);
  if (auto s = r.choice("fp8_recipe", names_of<Fp8Recipe>())) p.fp8_recipe = *parse_name<Fp8Recipe>(*s);
  set(p.replicate_kv_heads, r.boolean("replicate_kv_heads"));
  set(p.flash_attention, r.boolean("flash_attention"));
  if (auto s = r.choice("grad_dtype", {"fp32", "bf16"})) p.grad_bytes = *s == "fp32" ? 4 : 2;
  if (auto s = r.choice("optimizer", {"adam", "sgd"})) {
    p.optimizer = *s == "adam" ? Optimizer::kAdam : Optimizer::kSgd;
  }
  set(p.ddp_bucket_MiB, r.number("ddp_bucket_MiB", 0, 1e6, false, true));
  set(p.overlap_grad_reduce, r.boolean("overlap_grad_reduce"));
  set(p.overlap_param_gather, r.boolean("overlap_param_gather"));
  set(p.fsdp_no_sync, r.boolean("fsdp_no_sync"));
  set(p.reshard_after_forward, r.boolean("reshard_after_forward"));
  set(p.overlap_p2p_comm, r.boolean("overlap_p2p_comm"));
  set(p.moe_shared_expert_overlap, r.boolean("moe_shared_expert_overlap"));
  set(p.moe_a2a_overlap, r.boolean("moe_a2a_overlap"));
  if (auto s = r.choice("moe_dispatcher", names_of<MoeDispatcher>())) p.moe_dispatcher = *parse_name<MoeDispatcher>(*s);
  set(p.memory_headroom, r.number("memory_headroom", 0, 0.9));
  if (auto s = r.choice("stack", names_of<Stack>())) p.stack = *parse_stack(*s);
  std::vector<std::string> kernels{"stack"};
  kernels.insert(kernels.end(), attention_kernel_names().begin(), attention_kernel_names().end());
  if (auto s = r.choice("attention_kernel", kernels)) {
    p.attention_kernel = *s == "stack" ? "" : *s;
    if (!p.attention_kernel.empty() && !p.flash_attention) {
      r.diag().add(r.path_of("attention_kernel"),
                   fmt::format("\"{}\" is a FlashAttention-class kernel, but plan.flash_attention is false "
                               "(the fused-softmax path); remove one of them",
                               p.attention_kernel));
    }
  }
  set(p.offload_optimizer, r.number("offload_optimizer", 0, 1));
  set(p.offload_activations, r.number("offload_activations", 0, 1));
  set(p.offload_weights, r.number("offload_weights", 0, 1));
  if (auto order = r.string("placement")) {
    // "tp-cp-ep-dp-pp": dimensions innermost first; "ep" may appear (it is carved out of
    // cp x dp) but places nothing; cp and dp must be adjacent.
    std::array<int, 4> dims{};
    int n = 0;
    bool seen[4] = {};
    std::string bad;
    std::size_t start = 0;
    while (start <= order->size()) {
      const std::size_t dash = order->find('-', start);
      const std::string tok = order->substr(start, dash == std::string::npos ? std::string::npos : dash - start);
      const int d = tok == "tp" ? 0 : tok == "cp" ? 1 : tok == "dp" ? 2 : tok == "pp" ? 3 : tok == "ep" ? -1 : -2;
      if (d == -2 || (d >= 0 && seen[d])) {
        bad = tok;
        break;
      }
      if (d >= 0) {
        seen[d] = true;
        dims[static_cast<std::size_t>(n++)] = d;
      }
      if (dash == std::string::npos) break;
      start = dash + 1;
    }
    const auto pos = [&](int d) { return std::find(dims.begin(), dims.end(), d) - dims.begin(); };
    if (!bad.empty() || n != 4) {
      r.diag().add(r.path_of("placement"),
                   "\"" + detail::printable(*order) +
                       "\" must name tp, cp, dp and pp once each, innermost first, e.g. \"tp-cp-ep-dp-pp\"");
    } else if (std::abs(pos(1) - pos(2)) != 1) {
      r.diag().add(r.path_of("placement"), "\"" + *order + "\": cp and dp must be adjacent (data-parallel and expert groups span both)");
    } else {
      p.placement = dims;
    }
  }
  r.finish();
  if (!gb_given) p.global_batch = -1;  // resolved once dp is known
}

void check_expect(const json& v, Diagnostics& diag) {
  if (!v.is_object()) {
    diag.add("expect", "expected an object, got " + describe(v));
    return;
  }
  // The names are checked by `stepcast check` against the fields of the reports the
  // scenario calls for (each report declares its own); here only the shapes.
  for (auto it = v.begin(); it != v.end(); ++it) {
    const std::string path = "expect." + it.key();
    const json& c = it.value();
    if (c.is_object()) {
      ObjectReader r(c, path, diag);
      auto lo = r.number("min", -1e300, 1e300);
      auto hi = r.number("max", -1e300, 1e300);
      r.finish();
      if (!r.has("min") && !r.has("max")) diag.add(path, "a range needs \"min\" and/or \"max\"");
      if (lo && hi && *lo > *hi) diag.add(path, fmt::format("min {} exceeds max {}", *lo, *hi));
    } else if (!(c.is_number() || c.is_boolean() || c.is_string() || c.is_array())) {
      diag.add(path, "expected a value, a {\"min\", \"max\"} range or a list, got " + describe(c));
    }
  }
}

// The product of positive factors, or nullopt when it exceeds int64 (an absurd layout
// such as tp = pp = cp = dp = 1000000; the check must not overflow on it).
std::optional<std::int64_t> checked_product(std::initializer_list<std::int64_t> factors) {
  std::int64_t out = 1;
  for (std::int64_t f : factors) {
    if (f != 0 && out > std::numeric_limits<std::int64_t>::max() / f) return std::nullopt;
    out *= f;
  }
  return out;
}

// Adds "path: reason" lines (from a nested parser) to `diag`.
void add_lines(detail::Diagnostics& diag, const std::string& text) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const auto colon = line.find(": ");
    if (colon == std::string::npos) diag.add("calibration", line);
    else diag.add(line.substr(0, colon), line.substr(colon + 2));
  }
}

// Joins messages one per line, each made printable (a model "name" may hold a newline),
// capped as Diagnostics caps them (reader::kMaxDiagnosticLines, then a count of the rest).
std::string one_per_line(const std::vector<std::string>& lines) {
  detail::Diagnostics diag;
  for (const std::string& line : lines) diag.add("", line);
  return diag.joined();
}

}  // namespace

bool microbatch_group_runs(int pp, std::int64_t m, std::int64_t group) {
  if (group < pp || group > m) return false;
  const std::int64_t last = m % group;
  return last == 0 || last >= pp;
}

std::int64_t smallest_microbatch_group(int pp, std::int64_t m) {
  // m itself always runs once m >= pp; for group > m / 2 the last group is m - group, so the
  // search ends by then.
  for (std::int64_t g = pp; g <= m; ++g) {
    if (microbatch_group_runs(pp, m, g)) return g;
  }
  return 0;
}

std::string moe_a2a_overlap_problem(const ModelSpec& m, const Plan& p) {
  // Megatron-Core's rules (transformer_config.py __post_init__ for
  // overlap_moe_expert_parallel_comm), then what stepcast does not express.
  if (!m.moe) return fmt::format("needs a mixture-of-experts model ({} has no moe)", m.name);
  if (p.ep < 2)
    return fmt::format("needs expert parallelism (ep > 1, got {}): it overlaps the expert-parallel all-to-alls", p.ep);
  if (p.pp > 1 && p.schedule != Schedule::kInterleaved) {
    return fmt::format("with pp = {} needs the interleaved schedule (Megatron-Core requires virtual pipeline stages)",
                       p.pp);
  }
  if (p.recompute == Recompute::kFull) return "cannot be combined with full recomputation (Megatron-Core refuses it)";
  if (p.recomputes(RecomputeModule::kMoe)) {
    return "cannot be combined with recompute_modules \"moe\" (the recomputed MoE block re-runs the dispatch)";
  }
  if (p.moe_shared_expert_overlap) {
    return "cannot be combined with plan.moe_shared_expert_overlap (Megatron-Core refuses it)";
  }
  if (p.moe_allgather_dispatcher()) {
    return "needs moe_dispatcher \"alltoall\" or \"deepep\" (Megatron-Core: alltoall or flex)";
  }
  if (p.stack != Stack::kMegatronCore) {
    return fmt::format("is Megatron-Core's (plan.stack \"megatron-core\", got \"{}\")", to_string(p.stack));
  }
  if (p.zero >= 3) return "with zero 3 is not expressed";
  if (p.cp > 1) return fmt::format("with context parallelism (cp = {}) is not expressed", p.cp);
  if (p.offloads()) return "with offload is not expressed";
  return "";
}

// The interleaved schedule's microbatch group against the step's m microbatches, Megatron-
// Core's two checks (schedules.py forward_backward_pipelining_with_interleaving): the group
// within [pp, m], and a last group of none or at least pp microbatches ("dependency
// bubbles" otherwise). Without the field, the group is pp and the second check reads "m a
// multiple of pp"; the message then names a group that would run.
template <class Add>
void check_microbatch_group(const Plan& p, std::int64_t m, Add& add) {
  const std::int64_t g = p.vp_group();
  const bool stated = p.microbatch_group > 0;
  if (microbatch_group_runs(p.pp, m, g)) return;
  if (g < p.pp || g > m) {
    if (stated) {
      add(
          fmt::format("plan.microbatch_group_size_per_vp_stage: {} is outside [pp, microbatches] = [{}, {}] "
                      "(Megatron-Core's interleaved schedule)",
                      g, p.pp, m));
    } else {
      add(fmt::format("plan.global_batch: interleaved 1F1B needs at least pp ({}) microbatches per step, got {}", p.pp,
                      m));
    }
    return;
  }
  const std::int64_t last = m % g;
  const std::int64_t fit = smallest_microbatch_group(p.pp, m);
  if (stated) {
    add(
        fmt::format("plan.microbatch_group_size_per_vp_stage: {} leaves a last group of {} microbatches ({} % {}), "
                    "fewer than pp ({}); Megatron-Core refuses it (dependency bubbles); {} would run",
                    g, last, m, g, p.pp, fit));
  } else {
    add(
        fmt::format("plan.global_batch: interleaved 1F1B needs the microbatch count ({}) to be a multiple of pp ({}), "
                    "or plan.microbatch_group_size_per_vp_stage set so that the last group has none or at least pp "
                    "microbatches (e.g. {})",
                    m, p.pp, fit));
  }
}

// plan.pipeline_layout against the model and the plan's chunks.
template <class Add>
void check_pipeline_layout(const ModelSpec& m, const Plan& p, std::int64_t chunks, Add& add) {
  const auto& layout = p.pipeline_layout;
  const std::int64_t n = static_cast<std::int64_t>(layout.size());
  if (n != chunks) {
    add(fmt::format("plan.pipeline_layout: {} model chunks ({}), but pp x virtual_stages = {} x {} = {}", n,
                    pipeline_layout_text(layout), p.pp, p.virtual_stages, chunks));
    return;
  }
  std::int64_t sum = 0;
  for (int x : layout) sum += x;
  if (sum != m.num_layers) {
    add(fmt::format("plan.pipeline_layout: {} decoder layers ({}), but {} has {}", sum, pipeline_layout_text(layout),
                    m.name, m.num_layers));
  }
  for (std::int64_t k = 1; k + 1 < n; ++k) {
    if (layout[static_cast<std::size_t>(k)] == 0) {
      add(
          fmt::format("plan.pipeline_layout[{}]: 0 decoder layers; only the first chunk (beside the embedding) and "
                      "the last (beside the output layer) may hold none",
                      k));
      break;
    }
  }
  if (p.pipeline_layout_mtp > 0 && p.pipeline_layout_mtp != m.mtp_layers) {
    add(fmt::format("plan.pipeline_layout: places {} multi-token-prediction module{} ('m'), but {} has {}",
                    p.pipeline_layout_mtp, p.pipeline_layout_mtp == 1 ? "" : "s", m.name, m.mtp_layers));
  }
}

std::vector<std::string> layout_errors(const ModelSpec& m, const ClusterSpec& c, const Plan& p,
                                       const Workload& w) {
  std::vector<std::string> out;
  auto add = [&](std::string s) { out.push_back(std::move(s)); };
  if (p.moe_a2a_overlap) {
    if (const std::string why = moe_a2a_overlap_problem(m, p); !why.empty()) add("plan.moe_a2a_overlap: " + why);
  }
  if (p.moe_allgather_dispatcher()) {
    // Megatron-Core (transformer_config.py): the shared-expert overlap needs the alltoall or
    // flex dispatcher. stepcast prices the dispatcher's group as a block of consecutive ranks.
    const int block = p.expert_tp() * p.ep;
    if (!m.moe) {
      add(fmt::format("plan.moe_dispatcher: \"allgather\" needs a mixture-of-experts model ({} has no moe)", m.name));
    } else if (p.moe_shared_expert_overlap) {
      add("plan.moe_shared_expert_overlap: needs moe_dispatcher \"alltoall\" or \"deepep\" (Megatron-Core: alltoall or "
          "flex)");
    } else if (p.tp > 1 && !p.sequence_parallel) {
      add("plan.moe_dispatcher: \"allgather\" with tp > 1 needs sequence_parallel (Megatron-Core requires it for MoE "
          "with tensor parallelism)");
    } else if (block > 1 && (p.placement[3] != 3 || (p.tp > 1 && p.placement[0] != 0))) {
      add("plan.moe_dispatcher: \"allgather\" needs tp innermost and pp outermost in the placement (its expert-TP "
          "x EP group is a block of consecutive ranks)");
    }
  }
  if (p.moe_deepep_dispatcher()) {
    // Megatron-Core's flex dispatcher runs DeepEP over the expert-TP x EP group; stepcast
    // prices DeepEP's expert-parallel exchange alone (docs/model-reference.md §5.11).
    if (!m.moe) {
      add(fmt::format("plan.moe_dispatcher: \"deepep\" needs a mixture-of-experts model ({} has no moe)", m.name));
    } else if (p.expert_tp() > 1) {
      add(
          fmt::format("plan.moe_dispatcher: \"deepep\" needs etp 1 (got {}): stepcast prices DeepEP's expert-parallel "
                      "exchange alone",
                      p.expert_tp()));
    }
  }
  if (m.moe && m.moe->capacity_factor > 0 && p.moe_dispatcher != MoeDispatcher::kAllToAll) {
    // Megatron-Core transformer_config.py: "moe_expert_capacity_factor only works with
    // alltoall token dispatcher".
    add(
        fmt::format("model.moe.capacity_factor: token dropping needs plan.moe_dispatcher \"alltoall\" (got \"{}\"; "
                    "Megatron-Core drops tokens only in its alltoall dispatcher)",
                    to_string(p.moe_dispatcher)));
  }
  if (m.num_attention_heads % p.tp != 0) {
    add(fmt::format("plan.tp: {} does not divide num_attention_heads ({})", p.tp,
                    m.num_attention_heads));
  } else if (m.num_kv_heads % p.tp != 0) {
    if (p.tp % m.num_kv_heads == 0) {
      if (!p.replicate_kv_heads) {
        add(fmt::format(
            "plan.tp: {} does not divide num_kv_heads ({}); set plan.replicate_kv_heads to true "
            "to replicate each KV head on {} ranks",
            p.tp, m.num_kv_heads, p.tp / m.num_kv_heads));
      }
    } else {
      add(fmt::format("plan.tp: {} does not divide num_kv_heads ({})", p.tp, m.num_kv_heads));
    }
  }
  if (p.tp_comm_overlap && (p.tp < 2 || !p.sequence_parallel)) {
    add(fmt::format("plan.tp_comm_overlap: needs tensor parallelism with sequence parallelism "
                    "(tp = {}, sequence_parallel = {}); it overlaps the sequence-parallel "
                    "all-gathers and reduce-scatters with the GEMMs",
                    p.tp, p.sequence_parallel ? "true" : "false"));
  }
  {
    // What the stack runs at all: its profile's limits, each refusal quoting the source.
    const StackProfile& st = stack_profile(p.stack);
    const auto why = [&](const char* key) {
      const auto it = st.sources.find(key);
      return it == st.sources.end() ? std::string() : it->second;
    };
    if (p.zero > st.max_zero) {
      add(fmt::format("plan.zero: {} is not run by plan.stack \"{}\": {}", p.zero, to_string(p.stack),
                      why("max_zero")));
    } else if (p.pp > 1 && st.pipeline_max_zero < 0) {
      add(fmt::format("plan.pp: {} is not run by plan.stack \"{}\": {}", p.pp, to_string(p.stack),
                      why("pipeline_max_zero")));
    } else if (p.pp > 1 && p.zero > st.pipeline_max_zero) {
      add(fmt::format("plan.zero: {} beside pp {} is not run by plan.stack \"{}\": {}", p.zero, p.pp,
                      to_string(p.stack), why("pipeline_max_zero")));
    }
    if (p.cp > 1 && !st.context_parallel) {
      add(fmt::format("plan.cp: {} is not run by plan.stack \"{}\": {}", p.cp, to_string(p.stack),
                      why("context_parallel")));
    }
  }
  if (p.fsdp_no_sync && p.zero != 3) {
    add(fmt::format("plan.fsdp_no_sync: applies to ZeRO-3 / FSDP (zero 3), got zero {}; with ZeRO 0-2 the "
                    "gradients are reduced once per step already",
                    p.zero));
  }
  if (!p.reshard_after_forward && p.zero != 3) {
    add(fmt::format("plan.reshard_after_forward: false applies to ZeRO-3 / FSDP (zero 3), got zero {}; with "
                    "ZeRO 0-2 the parameters are not sharded",
                    p.zero));
  }
  if (p.schedule == Schedule::kInterleaved) {
    if (p.virtual_stages < 2) {
      add(fmt::format("plan.schedule: \"interleaved\" needs virtual_stages >= 2 (got {})",
                      p.virtual_stages));
    }
    if (p.pp < 2) add("plan.schedule: \"interleaved\" needs pp >= 2 (got 1)");
  } else if (p.virtual_stages > 1) {
    add(fmt::format("plan.virtual_stages: {} needs schedule \"interleaved\"", p.virtual_stages));
  }
  if (p.microbatch_group > 0 && p.schedule != Schedule::kInterleaved) {
    add(fmt::format("plan.microbatch_group_size_per_vp_stage: {} applies to schedule \"interleaved\" only",
                    p.microbatch_group));
  }
  const std::int64_t chunks = std::int64_t{p.pp} * p.virtual_stages;
  if (!p.pipeline_layout.empty()) {
    check_pipeline_layout(m, p, chunks, add);
  } else if (chunks > m.num_layers) {
    add(fmt::format("plan.pp: {} stages x {} virtual stages = {} model chunks exceed num_layers ({})",
                    p.pp, p.virtual_stages, chunks, m.num_layers));
  }
  const auto world = checked_product({p.tp, p.pp, p.cp, p.dp});
  if (world != c.world()) {
    const std::string product =
        world ? std::to_string(*world)
              : fmt::format("{:g}", double{1.0} * p.tp * p.pp * p.cp * p.dp);
    add(fmt::format("plan: tp x pp x cp x dp = {} x {} x {} x {} = {}, but the cluster has {} GPUs "
                    "({} nodes x {})",
                    p.tp, p.pp, p.cp, p.dp, product, c.world(), c.nodes, c.gpus_per_node));
  }
  if (w.seq_len % p.cp != 0) {
    add(fmt::format("plan.cp: {} does not divide workload.seq_len ({})", p.cp, w.seq_len));
  }
  if (p.ep > 1 && !m.moe) {
    add(fmt::format("plan.ep: {} needs a mixture-of-experts model ({} has no moe)", p.ep, m.name));
  } else if (p.etp > 0 && p.etp != p.tp && !m.moe) {
    add(fmt::format("plan.etp: {} needs a mixture-of-experts model ({} has no moe)", p.etp, m.name));
  } else if (m.moe) {
    if (m.moe->num_experts % p.ep != 0) {
      add(fmt::format("plan.ep: {} does not divide moe.num_experts ({})", p.ep, m.moe->num_experts));
    }
    if (const ExpertLayoutError e = expert_layout_error(Placement::of(p, c.gpus_per_node)); !e.field.empty()) {
      add(fmt::format("plan.{}: {}", e.field, e.message));
    } else if (p.expert_tp() != p.tp && p.tp > 1 && !p.sequence_parallel) {
      add(fmt::format("plan.etp: {} != tp {} needs sequence_parallel (Megatron-Core requires it for MoE with "
                      "tensor parallelism)",
                      p.expert_tp(), p.tp));
    }
  }
  if (p.recompute == Recompute::kSelectiveOp && (m.moe || m.mla)) {
    add(fmt::format("plan.recompute: \"selective_op\" (torchtitan's op-level policy) is expressed for dense layers "
                    "without MLA; {} has {}",
                    m.name, m.moe ? "MoE layers" : "MLA"));
  }
  if (p.recompute == Recompute::kSelective) {
    // Megatron-Core's rules for recompute_modules (transformer_config.py), and modules the
    // model does not have.
    auto needs = [&](RecomputeModule mod, bool ok, const std::string& why) {
      if (p.recomputes(mod) && !ok) {
        add(fmt::format("plan.recompute_modules: \"{}\" {}", to_string(mod), why));
      }
    };
    const std::string none_moe = fmt::format("needs a mixture-of-experts model ({} has no moe)", m.name);
    needs(RecomputeModule::kMoe, m.moe.has_value(), none_moe);
    needs(RecomputeModule::kMoeAct, m.moe.has_value(), none_moe);
    needs(RecomputeModule::kSharedExperts, m.moe && m.moe->num_shared_experts > 0,
          fmt::format("needs shared experts ({} has none)", m.name));
    needs(RecomputeModule::kSharedExperts, !p.moe_shared_expert_overlap,
          "cannot be combined with plan.moe_shared_expert_overlap (Megatron-Core refuses it)");
    needs(RecomputeModule::kMlaUpProj, m.mla.has_value(),
          fmt::format("needs multi-head latent attention ({} has no mla)", m.name));
    needs(RecomputeModule::kMlp, !m.moe || m.moe->num_dense_layers > 0,
          fmt::format("recomputes dense MLP layers; every layer of {} is MoE (use \"moe\" or \"moe_act\")",
                      m.name));
  }
  if (p.partial_full_recompute()) {
    // Megatron-Core's recompute_method "block" (specs.h recompute_num_layers).
    if (p.offloads()) {
      add(
          fmt::format("plan.recompute_num_layers: {} with offload is not expressed (both choose a stage's first "
                      "layers; use one of them)",
                      p.recompute_num_layers));
    }
    if (zero3_module_fetch(m, p)) {
      add(
          fmt::format("plan.recompute_num_layers: {} is Megatron-Core's recompute_method \"block\"; stack \"{}\" "
                      "fetches ZeRO-3 weights per module and recomputes every layer (use 0)",
                      p.recompute_num_layers, to_string(p.stack)));
    }
  }
  if (p.recompute_group() > 1) {
    // Megatron-Core's recompute_method "uniform" with groups of several layers.
    if (p.offloads()) {
      add(
          fmt::format("plan.recompute_method: \"uniform\" with groups of {} layers and offload is not expressed "
                      "(offload moves single layers' activations; use recompute_num_layers 1)",
                      p.recompute_num_layers));
    }
    if (p.zero >= 3) {
      add(
          fmt::format("plan.recompute_method: \"uniform\" with groups of {} layers beside zero 3 is not expressed "
                      "(stepcast gathers ZeRO-3 weights layer by layer in the backward; use recompute_num_layers 1 "
                      "or zero <= 2)",
                      p.recompute_num_layers));
    }
    if (p.moe_a2a_overlap) {
      add(
          fmt::format("plan.recompute_method: \"uniform\" with groups of {} layers beside plan.moe_a2a_overlap is "
                      "not expressed (the merged forward-backward step interleaves single layers)",
                      p.recompute_num_layers));
    }
  }
  if (p.offload_weights > 0 && p.zero >= 3) {
    add(fmt::format("plan.offload_weights: {} with zero 3 is not expressed (stepcast offloads whole replicated "
                    "layer weights; ZeRO-3 shards them)",
                    p.offload_weights));
  }
  const std::int64_t per_step = std::int64_t{p.microbatch} * p.dp;
  if (p.global_batch % per_step != 0) {
    add(fmt::format("plan.global_batch: {} is not divisible by microbatch x dp = {} x {} = {}",
                    p.global_batch, p.microbatch, p.dp, per_step));
  } else if (p.schedule == Schedule::kInterleaved && p.pp >= 2) {
    check_microbatch_group(p, p.global_batch / per_step, add);
  }
  if (p.fp8_recipe != Fp8Recipe::kTensorwise && p.precision != Precision::kFp8) {
    add(fmt::format("plan.fp8_recipe: \"{}\" applies to precision \"fp8\" (got \"{}\")", to_string(p.fp8_recipe),
                    to_string(p.precision)));
  } else if (p.fp8_recipe == Fp8Recipe::kMxfp8 && c.gpu.architecture != "blackwell") {
    // Transformer Engine's MXFP8BlockScaling needs Blackwell's block-scaled tensor cores.
    add(fmt::format("plan.fp8_recipe: \"mxfp8\" needs a Blackwell GPU (gpu {} is {})", c.gpu.name,
                    c.gpu.architecture.empty() ? "of no stated architecture" : c.gpu.architecture));
  }
  if (p.precision == Precision::kFp8 && c.gpu.fp8_dense_tflops <= 0) {
    add(fmt::format("plan.precision: \"fp8\" needs FP8 tensor cores; gpu {} has none", c.gpu.name));
  }
  if (w.seq_len > m.max_seq_len) {
    add(fmt::format("workload.seq_len: {} exceeds the model's max_seq_len ({})", w.seq_len,
                    m.max_seq_len));
  }
  return out;
}

Result<Scenario> parse_scenario(std::string_view text, const LoadOptions& options) {
  auto parsed = reader::parse_document(text);
  if (!parsed.ok()) return parsed.error();
  const json& doc = *parsed;
  if (!doc.is_object()) {
    return Error{"expected a JSON object at the top level, got " + describe(doc)};
  }
  const PresetCatalog& presets = builtin_presets();
  Diagnostics diag;
  ObjectReader top(doc, "", diag);
  Scenario s;
  if (auto f = top.integer("format", 0, 1'000'000); f && *f != 1) {
    diag.add("format", fmt::format("{} is not supported (this stepcast reads format 1)", *f));
  }
  if (auto n = top.string("name")) s.name = *n;
  top.ignore({"description"});
  if (auto seed = top.integer("seed", 0, std::numeric_limits<std::int64_t>::max())) {
    s.seed = static_cast<std::uint64_t>(*seed);
  }
  if (auto n = top.choice("network", {"analytic", "simgrid"})) {
    s.network = *n;
  }
  if (const json* v = top.raw("faults")) s.faults = detail::read_faults(*v, diag, presets.failures);
  if (const json* v = top.raw("checkpoint")) s.checkpoint = detail::read_checkpoint(*v, diag);
  if (const json* v = top.raw("search")) s.search = detail::read_search(*v, diag);
  const bool plan_template = options.plan_template && s.search.has_value();
  std::optional<Calibration> calibration;
  if (const json* v = top.raw("calibration")) {
    if (v->is_object()) {
      auto c = parse_calibration(v->dump(), "calibration");
      if (c.ok()) calibration = *c;
      else add_lines(diag, c.error().message);
    } else if (v->is_string()) {
      std::filesystem::path fpath(v->get<std::string>());
      if (!options.base_dir.empty() && fpath.is_relative()) fpath = std::filesystem::path(options.base_dir) / fpath;
      auto cal_text = reader::read_input_file(fpath.native());
      if (!cal_text.ok()) {
        diag.add("calibration", cal_text.error().message);
      } else {
        auto c = parse_calibration(*cal_text, fmt::format("calibration ({})", printable(fpath.native())));
        if (c.ok()) calibration = *c;
        else add_lines(diag, c.error().message);
      }
    } else {
      diag.add("calibration", fmt::format("expected a file path or an object, got {}", describe(*v)));
    }
  }
  if (const json* e = top.raw("expect")) {
    check_expect(*e, diag);
    s.expect_json = e->dump();
  }

  bool model_ok = false, cluster_ok = false, plan_ok = false;
  if (const json* v = top.raw("model")) {
    ModelSpec defaults;
    defaults.name = "custom";
    if (auto m = detail::resolve_spec<ModelSpec>(
            *v, "model", diag, presets.models, defaults, "model",
            [](ObjectReader& r, ModelSpec base, bool fp) { return detail::read_model(r, std::move(base), fp); })) {
      s.model = *m;
      model_ok = true;
    }
  } else {
    diag.add("model", "required: a preset name or an object");
  }
  if (const json* v = top.raw("cluster")) {
    ClusterSpec defaults;
    defaults.name = "custom";
    if (auto c = detail::resolve_spec<ClusterSpec>(
            *v, "cluster", diag, presets.clusters, defaults, "cluster",
            [&](ObjectReader& r, ClusterSpec base, bool fp) {
              return detail::read_cluster(r, std::move(base), fp, presets.gpus);
            })) {
      s.cluster = *c;
      cluster_ok = true;
    }
  } else {
    diag.add("cluster", "required: a preset name or an object");
  }
  bool dp_given = false;
  if (const json* v = top.raw("plan")) {
    if (!v->is_object()) {
      diag.add("plan", "expected an object, got " + describe(*v));
    } else {
      const std::size_t before = diag.size();
      ObjectReader r(*v, "plan", diag);
      read_plan(r, s.plan, dp_given);
      plan_ok = diag.size() == before;
    }
  } else if (plan_template) {
    plan_ok = true;  // the planner searches every layout
  } else {
    diag.add("plan", "required: an object with tp, pp, dp, ...");
  }
  bool workload_ok = true;
  if (const json* v = top.raw("workload")) {
    if (!v->is_object()) {
      diag.add("workload", "expected an object, got " + describe(*v));
      workload_ok = false;
    } else {
      const std::size_t before = diag.size();
      ObjectReader r(*v, "workload", diag);
      if (auto x = r.integer("seq_len", 1, 100'000'000)) s.workload.seq_len = *x;
      if (auto x = r.number("train_tokens", 0, 1e18)) s.workload.train_tokens = *x;
      if (auto x = r.number("input_time_s", 0, 1e6)) s.workload.input_time_s = *x;
      r.finish();
      workload_ok = diag.size() == before;
    }
  }
  top.finish();
  if (!diag.empty()) return Error{diag.joined()};
  if (!(model_ok && cluster_ok && plan_ok && workload_ok)) return Error{"invalid scenario"};
  if (calibration) {
    apply_calibration(*calibration, s.cluster);
    if (s.checkpoint) apply_calibration(*calibration, *s.checkpoint);
    s.calibration = std::move(calibration);
  }

  if (s.workload.seq_len == 0) s.workload.seq_len = s.model.train_seq_len;
  if (plan_template) {  // the plan is the search's template (search_json.cc)
    if (s.name.empty()) s.name = s.model.name + " on " + std::to_string(s.cluster.world()) + " x " + s.cluster.gpu.name;
    auto errors = detail::complete_search(s, true, top.has("plan"), dp_given);
    for (auto& e : detail::perturbation_errors(s.faults.perturb, s.cluster)) errors.push_back(std::move(e));
    if (!errors.empty()) return Error{one_per_line(errors)};
    return s;
  }
  Plan& p = s.plan;
  if (!dp_given) {
    const std::int64_t inner = std::int64_t{p.tp} * p.pp * p.cp;
    if (s.cluster.world() % inner != 0) {
      return Error{fmt::format("plan: tp x pp x cp = {} x {} x {} = {} does not divide the "
                               "cluster's {} GPUs ({} nodes x {})",
                               p.tp, p.pp, p.cp, inner, s.cluster.world(), s.cluster.nodes,
                               s.cluster.gpus_per_node)};
    }
    p.dp = static_cast<int>(s.cluster.world() / inner);
  }
  if (p.global_batch < 0) {
    // The same bound as a given global_batch: it keeps tokens per step (x seq_len <= 1e8)
    // far from int64 overflow.
    p.global_batch = std::int64_t{p.microbatch} * p.dp;
    if (p.global_batch > kMaxGlobalBatch) {
      return Error{fmt::format("plan.global_batch: not given, and microbatch x dp = {} x {} = {} "
                               "is out of range (1 to {})",
                               p.microbatch, p.dp, p.global_batch, kMaxGlobalBatch)};
    }
    s.notes.push_back(fmt::format("plan.global_batch is not given: it is taken as microbatch x dp = {} x {} = {} "
                                  "sequences, so it changes with the GPU count",
                                  p.microbatch, p.dp, p.global_batch));
  }
  if (s.name.empty()) s.name = s.model.name + " on " + std::to_string(s.cluster.world()) + " x " + s.cluster.gpu.name;
  auto errors = layout_errors(s.model, s.cluster, p, s.workload);
  for (auto& e : detail::perturbation_errors(s.faults.perturb, s.cluster)) errors.push_back(std::move(e));
  if (s.search) {
    for (auto& e : detail::complete_search(s, false, true, dp_given)) errors.push_back(std::move(e));
  }
  if (!errors.empty()) return Error{one_per_line(errors)};
  // Every report prints finite numbers only, and the simulators represent the step in
  // integer nanoseconds: a step time beyond kMaxStepTimeS (the physical ranges make it
  // all but unreachable) is refused here, before any command runs.
  if (auto e = estimate_report_error(estimate(s))) return *e;
  return s;
}

Result<Scenario> load_scenario_file(const std::string& path, const LoadOptions& options) {
  auto text = reader::read_input_file(path);
  if (!text.ok()) return text.error();
  LoadOptions with_dir = options;
  if (with_dir.base_dir.empty()) {
    const std::filesystem::path parent = std::filesystem::path(path).parent_path();
    with_dir.base_dir = parent.native();
  }
  auto r = parse_scenario(*text, with_dir);
  if (!r.ok()) return Error{reader::prefix_lines(path, r.error().message)};  // each problem names the file
  return r;
}

}  // namespace stepcast

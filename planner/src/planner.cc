#include "stepcast/planner/planner.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <tuple>

#include <fmt/format.h>

#include "stepcast/analysis/breakdown.h"
#include "stepcast/models/collectives.h"
#include "stepcast/models/compute.h"
#include "stepcast/models/names.h"
#include "stepcast/models/params.h"
#include "stepcast/models/program.h"
#include "stepcast/models/text.h"
#include "stepcast/planner/goodput.h"
#include "stepcast/planner/layout.h"
#include "stepcast/sim/run.h"

namespace stepcast::planner {

const char* reject_key(Reject r) {
  switch (r) {
    case Reject::kTpHeads: return "tp_heads";
    case Reject::kTpAcrossNodes: return "tp_across_nodes";
    case Reject::kContext: return "context";
    case Reject::kExperts: return "experts";
    case Reject::kPipelineDepth: return "pipeline_depth";
    case Reject::kBatch: return "batch";
    case Reject::kLayout: return "layout";
    case Reject::kMemory: return "memory";
  }
  return "?";
}

const char* reject_text(Reject r) {
  switch (r) {
    case Reject::kTpHeads: return "tp does not divide the attention or KV heads";
    case Reject::kTpAcrossNodes: return "the TP group spans nodes";
    case Reject::kContext: return "cp does not divide the sequence length";
    case Reject::kExperts: return "ep does not divide the experts or dp x cp";
    case Reject::kPipelineDepth: return "pp x virtual stages exceed the layers";
    case Reject::kBatch:
      return "global batch not divisible by microbatch x dp (interleaved: fewer than pp microbatches)";
    case Reject::kLayout: return "other layout rules";
    case Reject::kMemory: return "does not fit in memory";
  }
  return "?";
}

std::int64_t SpaceCounts::rejected_total() const {
  std::int64_t n = 0;
  for (std::int64_t r : rejected) n += r;
  return n;
}

void SpaceCounts::add(const SpaceCounts& o) {
  size += o.size;
  feasible += o.feasible;
  estimated += o.estimated;
  for (int i = 0; i < kRejectReasons; ++i)
    rejected[static_cast<std::size_t>(i)] += o.rejected[static_cast<std::size_t>(i)];
}

double objective_value(Objective objective, const Figures& f) {
  switch (objective) {
    case Objective::kTimeToTrain: return f.time_to_train_s;
    case Objective::kTokensPerS: return -f.tokens_per_s;
    case Objective::kCost: return f.cost;
  }
  return 0;
}

namespace {

// Selective recomputation of the core attention alone (the default module) with
// FlashAttention: dominated by no recomputation (see the search space below).
bool core_attn_only_with_flash(const Plan& p) {
  return p.flash_attention && p.recompute_modules == module_bit(RecomputeModule::kCoreAttn);
}

// The scenario's options that apply to some layouts only, as the search and --explain apply
// them: its FSDP options (specs.h) to ZeRO-3 layouts, its all-to-all overlap where
// Megatron-Core allows it and stepcast expresses it (the other layouts go without).
void apply_scenario_options(const Plan& scenario, const ModelSpec& m, Plan& p, bool a2a = true) {
  p.fsdp_no_sync = p.zero == 3 && scenario.fsdp_no_sync;
  p.reshard_after_forward = p.zero != 3 || scenario.reshard_after_forward;
  if (a2a) p.moe_a2a_overlap = scenario.moe_a2a_overlap && moe_a2a_overlap_problem(m, p).empty();
}

// Ties go to fewer GPUs, then the smaller batch, then the simpler layout: less context,
// tensor and pipeline parallelism (so more data parallelism), fewer expert groups, ...
auto layout_key(const Plan& p) {
  return std::make_tuple(p.world(), p.global_batch, p.cp, p.tp, p.pp, p.ep, p.expert_tp(), static_cast<int>(p.schedule),
                         p.virtual_stages, p.microbatch, p.sequence_parallel, p.tp_comm_overlap, p.moe_a2a_overlap,
                         static_cast<int>(p.moe_dispatcher), p.zero, static_cast<int>(p.recompute),
                         p.partial_full_recompute() ? p.recompute_num_layers : 0, p.recompute_group(),
                         p.recompute == Recompute::kSelective ? p.recompute_modules : 0u, static_cast<int>(p.stack),
                         p.offload_optimizer, p.offload_activations, p.offload_weights);
}

bool same_layout(const Plan& a, const Plan& b) { return layout_key(a) == layout_key(b); }

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

}  // namespace

bool ranks_before(Objective objective, const Candidate& a, const Candidate& b) {
  const double va = objective_value(objective, a.figures());
  const double vb = objective_value(objective, b.figures());
  if (va != vb) return va < vb;
  return layout_key(a.plan) < layout_key(b.plan);
}

namespace {

// ---------------------------------------------------------------------------------------
// The resolved search: the spec with its defaults, and what each GPU count shares.

// search.recompute_num_layers "fit" in the (recompute, method, count) choices.
constexpr int kFitLayers = -1;

// One recomputation the search lists: Plan::recompute, recompute_method and
// recompute_num_layers (or kFitLayers).
struct RecomputeChoice {
  Recompute recompute = Recompute::kNone;
  RecomputeMethod method = RecomputeMethod::kBlock;
  int layers = 0;
  std::uint32_t modules = kDefaultRecomputeModules;  // with "selective"; the default otherwise
  bool operator==(const RecomputeChoice&) const = default;
};

// The choice `p` is: "uniform" groups of 0 or 1 layer are every layer alone ("block" 0).
RecomputeChoice choice_of(const Plan& p) {
  if (p.recompute == Recompute::kSelective) return {p.recompute, RecomputeMethod::kBlock, 0, p.recompute_modules};
  if (p.recompute != Recompute::kFull) return {p.recompute, RecomputeMethod::kBlock, 0};
  if (p.recompute_method == RecomputeMethod::kUniform) {
    if (p.recompute_group() > 1) return {Recompute::kFull, RecomputeMethod::kUniform, p.recompute_num_layers};
    return {Recompute::kFull, RecomputeMethod::kBlock, 0};
  }
  return {Recompute::kFull, RecomputeMethod::kBlock, p.recompute_num_layers};
}

void set_choice(Plan& p, const RecomputeChoice& rc) {
  p.recompute = rc.recompute;
  p.recompute_modules = rc.modules;
  p.recompute_method = rc.method;
  p.recompute_num_layers = rc.layers == kFitLayers ? 0 : rc.layers;
}

struct World {
  int gpus = 0;
  ClusterSpec cluster;
  FailureEnv env;
};

struct Context {
  const Scenario& s;
  SearchSpec q;
  Objective objective = Objective::kTokensPerS;
  std::vector<World> worlds;
  std::vector<std::int64_t> steps_total;  // per global batch (0 without train_tokens)
  std::vector<int> microbatch, zero, virtual_stages, ep;
  std::vector<Schedule> schedules;
  std::vector<Recompute> recompute;
  std::vector<bool> sp;
  std::vector<bool> tpo;   // tp_comm_overlap values
  std::vector<bool> fold;  // fold_experts values (etp 1 when true)
  // (optimizer, activations, weights) offload fractions, every combination of the searched ones.
  std::vector<std::array<double, 3>> offloads;
  // recompute_method values for "full" (search.recompute_method, else the plan's).
  std::vector<RecomputeMethod> methods;
  // recompute_modules sets for "selective" (search.recompute_modules, else the plan's).
  std::vector<std::uint32_t> module_sets;
  // (recompute, method, recompute_num_layers): each "full" with each searched method and
  // count, "uniform" groups of 0 or 1 listed as "block" 0 (every layer alone), once.
  std::vector<RecomputeChoice> recomputes;
  std::vector<Stack> stacks;
  std::vector<MoeDispatcher> dispatchers;
};

// Ascending.
std::vector<int> divisors(int n) {
  std::vector<int> low, high;
  for (int d = 1; static_cast<std::int64_t>(d) * d <= n; ++d) {
    if (n % d != 0) continue;
    low.push_back(d);
    if (d != n / d) high.push_back(n / d);
  }
  low.insert(low.end(), high.rbegin(), high.rend());
  return low;
}

bool allowed(const std::vector<int>& list, int v) {
  return list.empty() || std::find(list.begin(), list.end(), v) != list.end();
}

// The layers of the plan's largest model chunk (a pipeline stage's, or a virtual stage's).
int largest_chunk_layers(const ModelSpec& m, const Plan& p) {
  const int chunks = p.pp * p.virtual_stages;
  int most = 0;
  for (int k = 0; k < chunks; ++k) most = std::max(most, chunk_layers(m, p, k));
  return most;
}

// Whether every pipeline stage of `q` fits in HBM and host memory: estimate()'s
// memory.fits from stage_memory alone (the step is not needed to compare recomputations).
bool memory_fits(const ModelSpec& m, const ClusterSpec& c, const Plan& q, const Workload& w) {
  const std::vector<MemoryBreakdown> stages = stage_memories(m, c, q, w);
  return std::all_of(stages.begin(), stages.end(), [](const MemoryBreakdown& mem) { return mem.fits; });
}

// With recompute "full": the fewest layers per model chunk (Plan::recompute_num_layers,
// Megatron-Core's "block") whose full recomputation makes `p` fit in HBM, counted up to the
// largest chunk's layer count (every layer); nullopt when even that does not fit or the
// count is not expressed with the plan (offload, per-module ZeRO-3 fetch). A stage's
// memory does not grow as N grows (each recomputed layer keeps its input instead of its
// activations; docs/model-reference.md §3.8), so N is found by bisection.
struct FittingLayers {
  int n = 0;     // the fewest that fit, 1..most
  int most = 0;  // the largest chunk's layers
  // As Plan::recompute_num_layers: n, or 0 when it is every layer.
  int count() const { return n == most ? 0 : n; }
};
std::optional<FittingLayers> fewest_fitting_recompute_layers(const ModelSpec& m, const ClusterSpec& c, Plan q,
                                                             const Workload& w) {
  const int most = largest_chunk_layers(m, q);
  q.recompute = Recompute::kFull;
  q.recompute_method = RecomputeMethod::kBlock;
  const StageMemoriesByCount memories(m, c, q, w);
  auto fits = [&](int n) { return memories.fits(FittingLayers{n, most}.count()); };
  q.recompute_num_layers = most > 1 ? 1 : 0;
  if (!layout_errors(m, c, q, w).empty()) {
    // A count is not expressed here: every layer or nothing.
    q.recompute_num_layers = 0;
    if (!layout_errors(m, c, q, w).empty() || !fits(most)) return std::nullopt;
    return FittingLayers{most, most};
  }
  if (!fits(most)) return std::nullopt;
  int lo = 1, hi = most;  // fits(hi)
  while (lo < hi) {
    const int mid = lo + (hi - lo) / 2;
    if (fits(mid)) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return FittingLayers{lo, most};
}

// The count search.recompute_num_layers "fit" takes for `p`: the fewest that fit, or 0
// (every layer) when none does.
int fit_recompute_count(const ModelSpec& m, const ClusterSpec& c, const Plan& p, const Workload& w) {
  const auto f = fewest_fitting_recompute_layers(m, c, p, w);
  return f ? f->count() : 0;
}

// The group size of recompute_method "uniform" (docs/model-reference.md §3.8 "Grouped full
// recomputation") that holds the least memory on `p`'s layout: every size from 2 up to the
// largest chunk's layers is tried (groups keep fewer inputs but hold more layers live), the
// smaller on a tie. nullopt when groups are not expressed with the plan (layout_errors:
// offload, ZeRO-3, the merged all-to-all step) or no chunk has two layers.
std::optional<int> least_memory_group(const ModelSpec& m, const ClusterSpec& c, Plan q, const Workload& w) {
  q.recompute = Recompute::kFull;
  q.recompute_method = RecomputeMethod::kUniform;
  q.recompute_num_layers = 2;
  const int most = largest_chunk_layers(m, q);
  if (most < 2 || !layout_errors(m, c, q, w).empty()) return std::nullopt;
  // The sizes compared by their worst stage's memory alone (stage_memory, what estimate()
  // reports as memory.total); the step is the same for every size.
  const StageMemoriesByCount memories(m, c, q, w);
  int best = 0;
  double least = 0;
  for (int g = 2; g <= most; ++g) {
    const double bytes = memories.worst_total(g);
    if (best == 0 || bytes < least) best = g, least = bytes;
  }
  return best;
}

// The group size search.recompute_num_layers "fit" takes for `p` under recompute_method
// "uniform". Every size recomputes every layer once, so the step is the same: 1 (every
// layer alone) when that fits or no chunk has two layers, else the size that holds the
// least; 2 where groups are not expressed (the layout rules then reject it, naming why).
int fit_group_size(const ModelSpec& m, const ClusterSpec& c, const Plan& p, const Workload& w) {
  Plan alone = p;
  alone.recompute = Recompute::kFull;
  alone.recompute_method = RecomputeMethod::kBlock;
  alone.recompute_num_layers = 0;
  if (layout_errors(m, c, alone, w).empty() && memory_fits(m, c, alone, w)) return 1;
  if (const auto g = least_memory_group(m, c, p, w)) return *g;
  return largest_chunk_layers(m, p) < 2 ? 1 : 2;
}

// The count "fit" takes for `p` under `method`.
int fit_count(const ModelSpec& m, const ClusterSpec& c, const Plan& p, const Workload& w, RecomputeMethod method) {
  return method == RecomputeMethod::kUniform ? fit_group_size(m, c, p, w) : fit_recompute_count(m, c, p, w);
}

// One unit of work: a (GPU count, global batch, tp, pp, cp) with dp = gpus / (tp pp cp).
struct Item {
  int world = 0, batch = 0;
  int tp = 1, pp = 1, cp = 1, dp = 1;
};

struct ItemOut {
  SpaceCounts counts;
  std::vector<Candidate> candidates;  // in enumeration order
};

struct Variant {
  Schedule schedule = Schedule::kOneFOneB;
  int v = 1;
};

// Schedules are equivalent with one stage: a pp = 1 layout is listed once, as 1f1b (gpipe
// when only gpipe is allowed; none when only interleaved is, which needs pp >= 2).
std::vector<Variant> schedule_variants(const Context& x, int pp) {
  std::vector<Variant> out;
  auto has = [&](Schedule sc) { return std::find(x.schedules.begin(), x.schedules.end(), sc) != x.schedules.end(); };
  if (pp == 1) {
    if (has(Schedule::kOneFOneB)) out.push_back({Schedule::kOneFOneB, 1});
    else if (has(Schedule::kGpipe)) out.push_back({Schedule::kGpipe, 1});
    return out;
  }
  for (Schedule sc : x.schedules) {
    if (sc == Schedule::kInterleaved) {
      for (int v : x.virtual_stages) out.push_back({sc, v});
    } else {
      out.push_back({sc, 1});
    }
  }
  return out;
}

// Sequence parallelism is a no-op without TP: a tp = 1 layout is listed once.
// With tp = 1 there is no sequence to split: such a layout is listed once, as sp=false,
// whatever search.sequence_parallel lists (docs/planner.md).
std::vector<bool> sp_values(const Context& x, int tp) {
  if (tp == 1) return {false};
  return x.sp;
}

// TP communication overlap needs sequence parallelism and tp > 1: other layouts are listed
// once, without it.
std::vector<bool> tpo_values(const Context& x, int tp, bool sp) {
  if (tp == 1 || !sp) return {false};
  return x.tpo;
}

// The expert tensor-parallel widths tried at `tp`: search.etp's, else tp (unfolded) and 1
// (folded) as fold_experts lists them, which differ only for MoE models with tp > 1. A dense
// model is listed once, unfolded.
std::vector<int> etp_values(const Context& x, int tp) {
  if (!x.s.model.moe) return {tp};
  if (!x.q.etp.empty()) return x.q.etp;
  if (tp == 1) return {tp};
  std::vector<int> out;
  for (bool fold : x.fold) out.push_back(fold ? 1 : tp);
  return out;
}

// The MoE token dispatchers tried at `ep`: search.moe_dispatcher's (else the plan's) for an
// MoE layout with ep > 1; the plan's alone otherwise (nothing is dispatched across ranks).
std::vector<MoeDispatcher> dispatcher_values(const Context& x, int ep) {
  if (!x.s.model.moe || ep == 1) return {x.s.plan.moe_dispatcher};
  return x.dispatchers;
}

bool heads_ok(const ModelSpec& m, const Plan& p) {
  if (m.num_attention_heads % p.tp != 0) return false;
  if (m.num_kv_heads % p.tp == 0) return true;
  return p.tp % m.num_kv_heads == 0 && p.replicate_kv_heads;
}

bool tp_spans_nodes(const Plan& p, int gpus_per_node) {
  const int stride = Placement::of(p, gpus_per_node).group_stride(GroupKind::kTp);
  return group_shape(p.tp, stride, gpus_per_node).nodes > 1;
}

// The first reason among layout_errors' messages, by the field each names.
Reject classify(const std::vector<std::string>& errors) {
  Reject best = Reject::kLayout;
  bool any = false;
  for (const std::string& e : errors) {
    Reject r = Reject::kLayout;
    if (e.rfind("plan.tp:", 0) == 0) r = Reject::kTpHeads;
    else if (e.rfind("plan.cp:", 0) == 0) r = Reject::kContext;
    else if (e.rfind("plan.ep:", 0) == 0 || e.rfind("plan.etp:", 0) == 0) r = Reject::kExperts;
    else if (e.rfind("plan.pp:", 0) == 0 || e.rfind("plan.schedule:", 0) == 0 ||
             e.rfind("plan.virtual_stages:", 0) == 0)
      r = Reject::kPipelineDepth;
    else if (e.rfind("plan.global_batch:", 0) == 0 || e.rfind("plan.microbatch_group_size_per_vp_stage:", 0) == 0)
      r = Reject::kBatch;
    if (!any || static_cast<int>(r) < static_cast<int>(best)) best = r;
    any = true;
  }
  return best;
}

Figures figures_for(const Context& x, const World& w, const Plan& p, std::int64_t steps_total, double step_s,
                    double mfu, const CheckpointCost* cost = nullptr) {
  Figures f;
  f.step_time_s = step_s;
  const double tokens_per_step = static_cast<double>(p.global_batch) * static_cast<double>(x.s.workload.seq_len);
  f.tokens_per_s = tokens_per_step / step_s;
  f.mfu = mfu;
  const Goodput g = cost ? layout_goodput(x.s, *cost, step_s, steps_total, w.env)
                         : layout_goodput(x.s, w.cluster, p, step_s, steps_total, w.env);
  f.goodput = g.goodput;
  f.checkpoint_mode = g.mode;
  f.checkpoint_interval_steps = g.interval_steps;
  f.checkpoint_interval_s = g.interval_s;
  f.checkpoint_pause_s = g.pause_s;
  f.restore_s = g.restore_s;
  if (steps_total > 0) f.time_to_train_s = static_cast<double>(steps_total) * step_s / g.goodput;
  f.cost = x.q.price_per_gpu_hour * p.world() * f.time_to_train_s / 3600.0;
  return f;
}

Candidate make_candidate(const Context& x, const World& w, const Plan& p, const Estimate& e, std::int64_t steps_total) {
  Candidate c;
  c.plan = p;
  c.memory_bytes = e.memory.total;
  c.usable_bytes = e.memory.usable;
  c.capacity_bytes = e.memory.capacity;
  c.breakdown = e.breakdown;
  c.step_time_band = e.step_time_band;
  c.exposed = e.exposed;
  c.compute = e.compute;
  if (w.env.failures) {
    const CheckpointCost cost = layout_checkpoint_cost(x.s, w.cluster, p, e);
    c.checkpoint_bytes = cost.total_bytes;
    c.staging_bytes = cost.node_staging_bytes;
    c.async_fits = cost.staging_fits;
    c.closed = figures_for(x, w, p, steps_total, e.step_time_s, e.mfu, &cost);
  } else {
    c.closed = figures_for(x, w, p, steps_total, e.step_time_s, e.mfu);
  }
  return c;
}

ItemOut evaluate_item(const Context& x, const Item& it) {
  ItemOut out;
  SpaceCounts& c = out.counts;
  const World& w = x.worlds[static_cast<std::size_t>(it.world)];
  const ModelSpec& m = x.s.model;
  const std::vector<Variant> variants = schedule_variants(x, it.pp);
  const std::vector<bool> sps = sp_values(x, it.tp);
  std::size_t sp_tpo = 0;  // (sp, tp_comm_overlap) pairs
  for (bool sp : sps) sp_tpo += tpo_values(x, it.tp, sp).size();
  const std::int64_t per_mb =
      static_cast<std::int64_t>(sp_tpo * x.recomputes.size() * x.zero.size() * x.stacks.size() * x.offloads.size());
  const std::int64_t per_variant = per_mb * static_cast<std::int64_t>(x.microbatch.size());
  const std::int64_t per_dispatcher = per_variant * static_cast<std::int64_t>(variants.size());
  const std::vector<int> etps = etp_values(x, it.tp);
  std::int64_t leaves = 0;
  for (int ep : x.ep) {
    leaves += per_dispatcher * static_cast<std::int64_t>(etps.size() * dispatcher_values(x, ep).size());
  }
  c.size = leaves;
  if (leaves == 0) return out;
  auto reject = [&](Reject r, std::int64_t n) { c.rejected[static_cast<std::size_t>(r)] += n; };

  // The item's layouts price the same collectives again and again (its tp, cp and dp groups).
  CollectiveTimes times(w.cluster);
  Plan p = x.s.plan;  // the template: precision, placement, headroom, ...
  p.tp = it.tp;
  p.pp = it.pp;
  p.cp = it.cp;
  p.dp = it.dp;
  p.global_batch = x.q.global_batch[static_cast<std::size_t>(it.batch)];
  p.ep = 1;
  p.etp = 0;
  p.schedule = Schedule::kOneFOneB;
  p.virtual_stages = 1;
  // The checks shared by the whole item, in the order of Reject.
  if (!heads_ok(m, p)) return reject(Reject::kTpHeads, leaves), out;
  if (!x.q.allow_tp_across_nodes && tp_spans_nodes(p, w.cluster.gpus_per_node)) {
    return reject(Reject::kTpAcrossNodes, leaves), out;
  }
  if (x.s.workload.seq_len % it.cp != 0) return reject(Reject::kContext, leaves), out;
  const std::int64_t steps_total = x.steps_total[static_cast<std::size_t>(it.batch)];
  const std::int64_t stage_ranks = std::int64_t{it.tp} * it.cp * it.dp;
  for (int ep : x.ep) {
    const std::vector<MoeDispatcher> dispatchers = dispatcher_values(x, ep);
    for (int etp : etps) {
      if ((ep > 1 || etp != it.tp) &&
          (!m.moe || m.moe->num_experts % ep != 0 || stage_ranks % (std::int64_t{etp} * ep) != 0)) {
        reject(Reject::kExperts, per_dispatcher * static_cast<std::int64_t>(dispatchers.size()));
        continue;
      }
      p.ep = ep;
      p.etp = etp == it.tp ? 0 : etp;
      for (MoeDispatcher dispatcher : dispatchers) {
        p.moe_dispatcher = dispatcher;
        for (const Variant& var : variants) {
          if (std::int64_t{it.pp} * var.v > m.num_layers) {
            reject(Reject::kPipelineDepth, per_variant);
            continue;
          }
          p.schedule = var.schedule;
          p.virtual_stages = var.v;
          for (int mb : x.microbatch) {
            const std::int64_t per_step = std::int64_t{mb} * it.dp;
            if (p.global_batch % per_step != 0) {
              reject(Reject::kBatch, per_mb);
              continue;
            }
            if (var.schedule == Schedule::kInterleaved) {
              // The template's microbatch group where it runs here, else the smallest that does
              // (pp when m is a multiple of it: Megatron-Core's default, written as 0).
              const std::int64_t micro = p.global_batch / per_step;
              std::int64_t group = x.s.plan.microbatch_group;
              if (!microbatch_group_runs(it.pp, micro, group)) group = smallest_microbatch_group(it.pp, micro);
              if (group == 0) {
                reject(Reject::kBatch, per_mb);
                continue;
              }
              p.microbatch_group = group == it.pp ? 0 : static_cast<int>(group);
            } else {
              p.microbatch_group = 0;
            }
            p.microbatch = mb;
            for (bool sp : sps) {
              p.sequence_parallel = sp;
              for (bool tpo : tpo_values(x, it.tp, sp)) {
                p.tp_comm_overlap = tpo;
                for (const RecomputeChoice& rc : x.recomputes) {
                  set_choice(p, rc);
                  for (int z : x.zero) {
                    p.zero = z;
                    for (Stack st : x.stacks) {
                      for (const std::array<double, 3>& off : x.offloads) {
                        p.stack = st;
                        p.offload_optimizer = off[0];
                        p.offload_activations = off[1];
                        p.offload_weights = off[2];
                        apply_scenario_options(x.s.plan, m, p);
                        if (rc.layers == kFitLayers) {
                          // "fit": with "block" the fewest recomputed layers per chunk that fit
                          // (every layer when none does: rejected below for memory), with
                          // "uniform" every layer alone when that fits, else the group size
                          // that holds the least. A count also listed is that entry's layout:
                          // not a second one in the space.
                          p.recompute_num_layers = fit_count(m, w.cluster, p, x.s.workload, rc.method);
                          const RecomputeChoice got = choice_of(p);
                          // "uniform"'s every layer alone beside "block"'s "fit", which takes as
                          // few layers or fewer: that entry's layout, or one as fast or faster.
                          const bool block_fit_too =
                              got.method == RecomputeMethod::kBlock && rc.method == RecomputeMethod::kUniform &&
                              std::find(x.recomputes.begin(), x.recomputes.end(),
                                        RecomputeChoice{rc.recompute, RecomputeMethod::kBlock, kFitLayers}) !=
                                  x.recomputes.end();
                          if (block_fit_too ||
                              std::find(x.recomputes.begin(), x.recomputes.end(), got) != x.recomputes.end()) {
                            --c.size;
                            continue;
                          }
                        }
                        // The loader's rules stay the authority: anything they still find is counted.
                        const std::vector<std::string> errors = layout_errors(m, w.cluster, p, x.s.workload);
                        if (!errors.empty()) {
                          reject(classify(errors), 1);
                          continue;
                        }
                        const Estimate e = estimate(m, w.cluster, p, x.s.workload, EstimateNotes::kSkip, &times);
                        ++c.estimated;
                        if (!e.memory.fits) {
                          reject(Reject::kMemory, 1);
                          continue;
                        }
                        ++c.feasible;
                        out.candidates.push_back(make_candidate(x, w, p, e, steps_total));
                      }
                    }
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  return out;
}

bool cancelled(const PlanOptions& o) { return o.cancel != nullptr && o.cancel->load(std::memory_order_relaxed); }

Error cancelled_error() { return Error{"search cancelled"}; }

// Runs f(i) for i in [0, n) on `threads` threads (work handed out in index order; each
// result goes to its own slot, so the outcome does not depend on the thread count).
// Calls progress(base + done, total) on this thread about ten times a second. Once
// o.cancel is set no more work is handed out and it returns when the items in hand finish
// (the caller checks cancelled() and discards the partial outcome).
template <typename F>
void parallel_for(std::size_t n, int threads, const F& f, const PlanOptions& o, std::int64_t base, std::int64_t total) {
  std::atomic<std::size_t> next{0}, done{0};
  std::mutex mu;
  std::condition_variable cv;
  std::exception_ptr failure;
  auto work = [&] {
    for (std::size_t i = next++; i < n && !cancelled(o); i = next++) {
      try {
        f(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!failure) failure = std::current_exception();
      }
      if (++done == n) {
        std::lock_guard<std::mutex> lock(mu);
        cv.notify_all();
      }
    }
  };
  const int spawn = static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(std::max(threads, 1)), n)) - 1;
  std::vector<std::thread> pool;
  for (int t = 0; t < spawn; ++t) pool.emplace_back(work);
  if (o.progress) {
    // This thread reports progress while the pool works (or works alone with one thread).
    if (spawn == 0) {
      std::thread solo(work);
      pool.push_back(std::move(solo));
    }
    // Cancelled, `done` never reaches n: stop reporting and join the workers, which stop
    // after their current item.
    std::unique_lock<std::mutex> lock(mu);
    while (done.load() < n && !cancelled(o)) {
      cv.wait_for(lock, std::chrono::milliseconds(100), [&] { return done.load() >= n || cancelled(o); });
      lock.unlock();
      o.progress(base + static_cast<std::int64_t>(done.load()), total);
      lock.lock();
    }
  } else {
    work();
  }
  for (std::thread& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);
}

int thread_count(const Context& x, const PlanOptions& o) {
  int t = o.threads >= 0 ? o.threads : x.q.threads;
  if (t <= 0) t = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return t;
}

Result<Context> make_context(const Scenario& s) {
  Context x{s, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}};
  if (s.search) {
    x.q = *s.search;
  } else {
    x.q.plan_is_layout = true;
  }
  if (x.q.gpus.empty()) x.q.gpus = {s.cluster.world()};
  if (x.q.global_batch.empty()) x.q.global_batch = {s.plan.global_batch};
  const bool train = s.workload.train_tokens > 0;
  x.objective = x.q.objective.value_or(train ? Objective::kTimeToTrain : Objective::kTokensPerS);
  if (x.objective != Objective::kTokensPerS && !train) {
    return Error{
        fmt::format("search.objective: \"{}\" needs workload.train_tokens (the tokens of the "
                    "whole run, e.g. 15e12)",
                    objective_name(x.objective))};
  }
  if (x.objective == Objective::kCost && !(x.q.price_per_gpu_hour > 0)) {
    return Error{"search.objective: \"cost\" needs search.price_per_gpu_hour (e.g. 2.5)"};
  }
  for (int g : x.q.gpus) {
    World w;
    w.gpus = g;
    w.cluster = s.cluster;
    w.cluster.nodes = g / s.cluster.gpus_per_node;
    w.env = s.faults.failures ? failure_env(*s.faults.failures, w.cluster) : FailureEnv{};
    x.worlds.push_back(std::move(w));
  }
  for (std::int64_t gb : x.q.global_batch) {
    const double tokens_per_step = static_cast<double>(gb) * static_cast<double>(s.workload.seq_len);
    x.steps_total.push_back(train ? static_cast<std::int64_t>(std::ceil(s.workload.train_tokens / tokens_per_step))
                                  : 0);
  }
  auto or_default = [](const std::vector<int>& v, std::vector<int> d) { return v.empty() ? d : v; };
  x.microbatch = or_default(x.q.microbatch, {1, 2, 4, 8});
  x.zero = or_default(x.q.zero, {0, 1, 2, 3});
  x.virtual_stages = or_default(x.q.virtual_stages, {2, 4, 8});
  x.schedules = x.q.schedule.empty()
                    ? std::vector<Schedule>{Schedule::kGpipe, Schedule::kOneFOneB, Schedule::kInterleaved}
                    : x.q.schedule;
  x.recompute = x.q.recompute.empty()
                    ? std::vector<Recompute>{Recompute::kNone, Recompute::kSelective, Recompute::kFull}
                    : x.q.recompute;
  x.module_sets =
      x.q.recompute_modules.empty() ? std::vector<std::uint32_t>{s.plan.recompute_modules} : x.q.recompute_modules;
  x.methods =
      x.q.recompute_method.empty() ? std::vector<RecomputeMethod>{s.plan.recompute_method} : x.q.recompute_method;
  auto add_choice = [&](const RecomputeChoice& c) {
    if (std::find(x.recomputes.begin(), x.recomputes.end(), c) == x.recomputes.end()) x.recomputes.push_back(c);
  };
  const bool none_searched = std::find(x.recompute.begin(), x.recompute.end(), Recompute::kNone) != x.recompute.end();
  for (Recompute rc : x.recompute) {
    if (rc == Recompute::kSelective) {
      for (std::uint32_t set : x.module_sets) {
        // Selective recomputation of the core attention alone (Megatron-Core's default
        // module) drops the attention scores, which FlashAttention never keeps: with it, it
        // only drops the log-sum-exp and costs the attention's forward again (estimate.cc,
        // layer_cost.cc). "none" dominates it, and it is not searched.
        Plan q = s.plan;
        q.recompute_modules = set;
        if (!(none_searched && core_attn_only_with_flash(q))) add_choice({rc, RecomputeMethod::kBlock, 0, set});
      }
      continue;
    }
    if (rc != Recompute::kFull) {
      add_choice({rc, RecomputeMethod::kBlock, 0});
      continue;
    }
    std::vector<int> counts = x.q.recompute_num_layers;
    if (counts.empty() && !x.q.recompute_num_layers_fit) counts.push_back(s.plan.recompute_num_layers);
    for (RecomputeMethod method : x.methods) {
      for (int n : counts) {
        Plan q;
        set_choice(q, {rc, method, n});
        add_choice(choice_of(q));
      }
      if (x.q.recompute_num_layers_fit) add_choice({rc, method, kFitLayers});
    }
  }
  if (std::none_of(x.recomputes.begin(), x.recomputes.end(),
                   [](const RecomputeChoice& c) { return c.recompute == Recompute::kSelective; })) {
    x.recompute.erase(std::remove(x.recompute.begin(), x.recompute.end(), Recompute::kSelective), x.recompute.end());
  }
  x.sp = x.q.sequence_parallel.empty() ? std::vector<bool>{false, true} : x.q.sequence_parallel;
  x.tpo = x.q.tp_comm_overlap.empty() ? std::vector<bool>{false, true} : x.q.tp_comm_overlap;
  x.fold = x.q.fold_experts.empty() ? std::vector<bool>{false, true} : x.q.fold_experts;
  {
    auto values = [](const std::vector<double>& q, double own) { return q.empty() ? std::vector<double>{own} : q; };
    for (double o : values(x.q.offload_optimizer, s.plan.offload_optimizer)) {
      for (double a : values(x.q.offload_activations, s.plan.offload_activations)) {
        for (double wt : values(x.q.offload_weights, s.plan.offload_weights)) x.offloads.push_back({o, a, wt});
      }
    }
  }
  x.stacks = x.q.stack.empty() ? std::vector<Stack>{s.plan.stack} : x.q.stack;
  x.dispatchers = x.q.moe_dispatcher.empty() ? std::vector<MoeDispatcher>{s.plan.moe_dispatcher} : x.q.moe_dispatcher;
  if (!x.q.ep.empty()) x.ep = x.q.ep;
  else if (s.model.moe) x.ep = divisors(s.model.moe->num_experts);
  else x.ep = {1};
  return x;
}

std::vector<Item> make_items(const Context& x) {
  std::vector<Item> items;
  for (std::size_t wi = 0; wi < x.worlds.size(); ++wi) {
    const int g = x.worlds[wi].gpus;
    for (std::size_t bi = 0; bi < x.q.global_batch.size(); ++bi) {
      for (int tp : divisors(g)) {
        if (!allowed(x.q.tp, tp)) continue;
        for (int pp : divisors(g / tp)) {
          if (!allowed(x.q.pp, pp)) continue;
          for (int cp : divisors(g / tp / pp)) {
            if (!allowed(x.q.cp, cp)) continue;
            items.push_back(Item{static_cast<int>(wi), static_cast<int>(bi), tp, pp, cp, g / tp / pp / cp});
          }
        }
      }
    }
  }
  return items;
}

// Indices of `ranked` on the Pareto front of (GPUs min, time min, spare memory max); time is
// the time to train, or seconds per token without workload.train_tokens. Equal points: the
// better-ranked one stands for them.
std::vector<std::size_t> pareto_front(const std::vector<Candidate>& ranked, bool train) {
  auto time_of = [&](const Candidate& c) {
    return train ? c.figures().time_to_train_s : 1.0 / c.figures().tokens_per_s;
  };
  std::vector<std::size_t> order(ranked.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const Candidate& ca = ranked[a];
    const Candidate& cb = ranked[b];
    if (ca.gpus() != cb.gpus()) return ca.gpus() < cb.gpus();
    if (time_of(ca) != time_of(cb)) return time_of(ca) < time_of(cb);
    if (ca.spare_bytes() != cb.spare_bytes()) return ca.spare_bytes() > cb.spare_bytes();
    return a < b;
  });
  std::vector<std::size_t> front;
  std::size_t i = 0;
  while (i < order.size()) {
    const int g = ranked[order[i]].gpus();
    std::size_t end = i;
    while (end < order.size() && ranked[order[end]].gpus() == g) ++end;
    const std::size_t smaller = front.size();  // front members with fewer GPUs
    bool any = false;
    double best_spare = 0;
    for (std::size_t k = i; k < end; ++k) {
      const Candidate& c = ranked[order[k]];
      // Within one GPU count: time ascending, so only more spare memory can make a point.
      if (any && !(c.spare_bytes() > best_spare)) continue;
      any = true;
      best_spare = c.spare_bytes();
      bool dominated = false;
      for (std::size_t f = 0; f < smaller && !dominated; ++f) {
        const Candidate& d = ranked[front[f]];
        dominated = time_of(d) <= time_of(c) && d.spare_bytes() >= c.spare_bytes();
      }
      if (!dominated) front.push_back(order[k]);
    }
    i = end;
  }
  return front;
}

Plan canonical(const Context& x, Plan p, std::vector<std::string>& why);

// Simulations allowed per requested top-k slot when simulated layouts turn out too big.
constexpr std::size_t kMaxSimulationsPerSlot = 4;

const World& world_of(const Context& x, int gpus) {
  std::size_t wi = 0;
  while (wi + 1 < x.worlds.size() && x.worlds[wi].gpus != gpus) ++wi;
  return x.worlds[wi];
}

std::int64_t steps_total_of(const Scenario& s, std::int64_t global_batch) {
  if (!(s.workload.train_tokens > 0)) return 0;
  return static_cast<std::int64_t>(std::ceil(
      s.workload.train_tokens / (static_cast<double>(global_batch) * static_cast<double>(s.workload.seq_len))));
}

// One step of `c` with the engine (representative mode, analytic network, no perturbations:
// the planner ranks the unperturbed step): sets c.engine, c.engine_memory_bytes and
// c.simulated. Returns why the run failed (the closed form is then kept).
std::optional<std::string> simulate_candidate(const Context& x, const World& w, Candidate& c) {
  Scenario one = x.s;
  one.plan = c.plan;
  one.cluster = w.cluster;
  one.faults.perturb = PerturbationSpec{};
  one.network = "analytic";
  sim::RunOptions ro;
  ro.full = false;
  ro.steps = 1;
  ro.network = "analytic";
  const auto run = sim::run_scenario(one, ro);
  if (!run.ok() || run->out.deadlock || !(run->summary.step_time_s > 0)) {
    return fmt::format("{}: the engine run failed ({}); closed form kept", layout_string(c.plan),
                       run.ok() ? "deadlock" : run.error().message);
  }
  const double step = run->summary.step_time_s;
  c.engine = figures_for(x, w, c.plan, steps_total_of(x.s, c.plan.global_batch), step,
                         c.closed.mfu * c.closed.step_time_s / step);
  c.engine_memory_bytes = 0;
  c.engine_stage = 0;
  for (const analysis::RankBreakdown& b : run->summary.ranks) {
    if (b.peak_bytes > c.engine_memory_bytes) {
      c.engine_memory_bytes = b.peak_bytes;
      c.engine_stage = b.stage;
    }
  }
  c.simulated = true;
  return std::nullopt;
}

}  // namespace

Result<PlanResult> search_layouts(const Scenario& s, const PlanOptions& o) {
  auto ctx = make_context(s);
  if (!ctx.ok()) return ctx.error();
  const Context& x = *ctx;
  const std::vector<Item> items = make_items(x);
  const int threads = thread_count(x, o);
  const int top_k = std::max(0, o.top_k.value_or(x.q.top_k));

  PlanResult r;
  r.objective = x.objective;
  r.search = x.q;
  r.top_k = top_k;
  std::vector<ItemOut> outs(items.size());
  const std::int64_t total = static_cast<std::int64_t>(items.size()) + top_k;
  parallel_for(
      items.size(), threads, [&](std::size_t i) { outs[i] = evaluate_item(x, items[i]); }, o, 0, total);
  if (cancelled(o)) return cancelled_error();

  // Merge in item order: the same for any thread count.
  for (std::size_t wi = 0; wi < x.worlds.size(); ++wi) {
    for (std::size_t bi = 0; bi < x.q.global_batch.size(); ++bi) {
      r.sweep.push_back(SweepCounts{x.worlds[wi].gpus, x.q.global_batch[bi], {}});
    }
  }
  std::size_t feasible = 0;
  for (std::size_t i = 0; i < items.size(); ++i) {
    r.counts.add(outs[i].counts);
    r.sweep[static_cast<std::size_t>(items[i].world) * x.q.global_batch.size() +
            static_cast<std::size_t>(items[i].batch)]
        .counts.add(outs[i].counts);
    feasible += outs[i].candidates.size();
  }
  if (r.counts.size == 0) {
    std::string gpus;
    for (int g : x.q.gpus) gpus += (gpus.empty() ? "" : ", ") + std::to_string(g);
    return Error{
        fmt::format("search: the space is empty: no layout on {} GPUs takes its tp, pp, cp and "
                    "schedule from the listed values",
                    gpus)};
  }
  r.ranked.reserve(feasible);
  for (ItemOut& out : outs) {
    for (Candidate& c : out.candidates) r.ranked.push_back(std::move(c));
    out.candidates = {};
  }
  const Objective obj = x.objective;
  std::sort(r.ranked.begin(), r.ranked.end(),
            [obj](const Candidate& a, const Candidate& b) { return ranks_before(obj, a, b); });

  // The best top_k by the closed form, re-simulated by the engine and re-ranked. A layout
  // whose simulated memory peak exceeds the usable HBM (the engine follows the schedule's
  // allocations; the closed form approximates the in-flight activations) is rejected
  // after all and the next one is simulated, in closed-form order. Then the layout with
  // the most tokens/s is confirmed the same way (best_layout_by_tokens_per_s). At most
  // kMaxSimulationsPerSlot simulations per requested layout.
  const std::size_t want = std::min(r.ranked.size(), static_cast<std::size_t>(top_k));
  const std::size_t cap = kMaxSimulationsPerSlot * want;
  enum : char { kUntouched = 0, kKept = 1, kTooBig = 2 };
  std::vector<char> state(r.ranked.size(), kUntouched);
  std::vector<std::string> sim_notes(r.ranked.size());
  std::size_t next = 0, kept = 0, sims = 0;
  auto settle = [&](std::size_t i) {
    const Candidate& c = r.ranked[i];
    state[i] = c.simulated && c.engine_memory_bytes > c.usable_bytes ? kTooBig : kKept;
    if (state[i] == kKept) ++kept;
  };
  while (kept < want && next < r.ranked.size() && sims < cap) {
    const std::size_t batch = std::min({want - kept, r.ranked.size() - next, cap - sims});
    const std::size_t first = next;
    parallel_for(
        batch, threads,
        [&](std::size_t i) {
          Candidate& c = r.ranked[first + i];
          if (auto err = simulate_candidate(x, world_of(x, c.gpus()), c)) sim_notes[first + i] = *err;
        },
        o, static_cast<std::int64_t>(items.size() + std::min(sims, want)), total);
    if (cancelled(o)) return cancelled_error();
    for (std::size_t i = first; i < first + batch; ++i) settle(i);
    next += batch;
    sims += batch;
  }
  while (want > 0 && sims < cap) {
    std::optional<std::size_t> fastest;
    for (std::size_t i = 0; i < r.ranked.size(); ++i) {
      if (state[i] == kTooBig) continue;
      if (!fastest || r.ranked[i].figures().tokens_per_s > r.ranked[*fastest].figures().tokens_per_s) fastest = i;
    }
    if (!fastest || state[*fastest] != kUntouched) break;
    if (cancelled(o)) return cancelled_error();
    Candidate& c = r.ranked[*fastest];
    if (auto err = simulate_candidate(x, world_of(x, c.gpus()), c)) sim_notes[*fastest] = *err;
    settle(*fastest);
    ++sims;
  }
  for (std::string& n : sim_notes) {
    if (!n.empty()) r.notes.push_back(std::move(n));
  }
  if (want > 0 && sims == cap && kept < want + 1) {
    r.notes.push_back(
        fmt::format("{} of the {} layouts simulated exceeded the usable memory in the engine; "
                    "the simulation budget ({} per requested layout) is spent",
                    sims - kept, sims, kMaxSimulationsPerSlot));
  }
  // Rebuild: the kept simulated layouts (re-ranked), then the rest in closed-form order.
  std::vector<Candidate> top, rest;
  for (std::size_t i = 0; i < r.ranked.size(); ++i) {
    Candidate& c = r.ranked[i];
    if (state[i] == kTooBig) {
      r.counts.feasible -= 1;
      r.counts.rejected[static_cast<std::size_t>(Reject::kMemory)] += 1;
      for (SweepCounts& sw : r.sweep) {
        if (sw.gpus == c.gpus() && sw.global_batch == c.plan.global_batch) {
          sw.counts.feasible -= 1;
          sw.counts.rejected[static_cast<std::size_t>(Reject::kMemory)] += 1;
        }
      }
      r.engine_rejected.push_back(std::move(c));
    } else if (state[i] == kKept) {
      top.push_back(std::move(c));
    } else {
      rest.push_back(std::move(c));
    }
  }
  std::sort(top.begin(), top.end(), [obj](const Candidate& a, const Candidate& b) { return ranks_before(obj, a, b); });
  r.simulated = static_cast<int>(top.size());
  r.ranked = std::move(top);
  for (Candidate& c : rest) r.ranked.push_back(std::move(c));

  // Ties with the best (band.h): the objective's ratio is within what the difference in
  // their step make-up leaves uncertain. The closed form's shares stand for both figures.
  const auto parts = [](const Candidate& c) { return step_parts(c.breakdown, c.compute); };
  for (std::size_t i = 0; i < r.ranked.size(); ++i) {
    Candidate& c = r.ranked[i];
    if (c.simulated && c.closed.step_time_s > 0) {
      const double k = c.engine.step_time_s / c.closed.step_time_s;
      c.step_time_band = Band{c.step_time_band.p10 * k, c.step_time_band.p90 * k};
    }
    if (i == 0) continue;
    c.ties_best = ties(std::abs(objective_value(obj, r.ranked[0].figures())), parts(r.ranked[0]),
                       std::abs(objective_value(obj, c.figures())), parts(c));
    if (c.ties_best) ++r.ties_with_best;
  }
  r.pareto = pareto_front(r.ranked, s.workload.train_tokens > 0);
  for (std::size_t i = 1; i < r.ranked.size(); ++i) {
    if (r.ranked[i].figures().tokens_per_s > r.ranked[r.best_by_tokens].figures().tokens_per_s) r.best_by_tokens = i;
  }
  if (x.q.plan_is_layout) {
    std::vector<std::string> folded;
    const Plan own = canonical(x, s.plan, folded);
    for (std::size_t i = 0; i < r.ranked.size(); ++i) {
      if (same_layout(r.ranked[i].plan, own)) {
        r.scenario_layout = i;
        break;
      }
    }
  }
  if (cancelled(o)) return cancelled_error();
  if (o.progress) o.progress(total, total);
  return r;
}

// ---------------------------------------------------------------------------------------
// explain

namespace {

std::string list_text(const std::vector<int>& v) {
  std::string out;
  for (int x : v) out += (out.empty() ? "" : ", ") + std::to_string(x);
  return out;
}

// The layout the search lists for `p`: settings that change nothing folded as the search
// folds them (pp = 1: one schedule; tp = 1: one sp value; FlashAttention: selective is
// none), with the reason for each fold.
Plan canonical(const Context& x, Plan p, std::vector<std::string>& why) {
  if (p.pp == 1 && p.schedule != Schedule::kInterleaved) {
    const std::vector<Variant> variants = schedule_variants(x, 1);
    if (!variants.empty() && variants.front().schedule != p.schedule) {
      why.push_back(fmt::format("with pp = 1 every schedule is the same: listed as schedule={}",
                                schedule_name(variants.front().schedule)));
      p.schedule = variants.front().schedule;
    }
  }
  if (p.tp == 1 && p.sequence_parallel) {
    why.push_back("with tp = 1 sequence parallelism changes nothing: listed as sp=false");
    p.sequence_parallel = false;
  }
  if (p.recompute == Recompute::kSelective && core_attn_only_with_flash(p) &&
      std::find(x.recompute.begin(), x.recompute.end(), Recompute::kNone) != x.recompute.end()) {
    why.push_back(
        "with FlashAttention selective recomputation of the core attention only drops its log-sum-exp and "
        "costs its forward again: not searched, listed as recompute=none");
    p.recompute = Recompute::kNone;
  }
  // recompute_num_layers applies to "full" only, and "uniform" groups of 0 or 1 layer are
  // every layer alone.
  set_choice(p, choice_of(p));
  return p;
}

// Why `p` (canonical) is not among the layouts the search enumerates (empty: it is).
std::vector<std::string> outside_space(const Context& x, const Plan& p, const ClusterSpec& cluster) {
  std::vector<std::string> out;
  auto check = [&](const char* field, const std::vector<int>& list, int v, bool given) {
    if (std::find(list.begin(), list.end(), v) == list.end()) {
      out.push_back(fmt::format("{} = {} is not searched (search.{}{}: {})", field, v, field, given ? "" : ", default",
                                list_text(list)));
    }
  };
  if (std::find(x.q.gpus.begin(), x.q.gpus.end(), p.world()) == x.q.gpus.end()) {
    out.push_back(fmt::format("{} GPUs are not searched (search.gpus: {})", p.world(), list_text(x.q.gpus)));
  }
  if (std::find(x.q.global_batch.begin(), x.q.global_batch.end(), p.global_batch) == x.q.global_batch.end()) {
    std::string gbs;
    for (std::int64_t g : x.q.global_batch) gbs += (gbs.empty() ? "" : ", ") + std::to_string(g);
    out.push_back(fmt::format("gb = {} is not searched (search.global_batch: {})", p.global_batch, gbs));
  }
  if (!x.q.tp.empty()) check("tp", x.q.tp, p.tp, true);
  if (!x.q.pp.empty()) check("pp", x.q.pp, p.pp, true);
  if (!x.q.cp.empty()) check("cp", x.q.cp, p.cp, true);
  check("ep", x.ep, p.ep, !x.q.ep.empty());
  check("microbatch", x.microbatch, p.microbatch, !x.q.microbatch.empty());
  check("zero", x.zero, p.zero, !x.q.zero.empty());
  if (std::find(x.recompute.begin(), x.recompute.end(), p.recompute) == x.recompute.end()) {
    out.push_back(fmt::format("recompute = {} is not searched (search.recompute)", recompute_name(p.recompute)));
  } else if (const RecomputeChoice own = choice_of(p);
             std::find(x.recomputes.begin(), x.recomputes.end(), own) == x.recomputes.end()) {
    if (own.recompute == Recompute::kSelective) {
      std::string sets;
      for (std::uint32_t set : x.module_sets) {
        if (!sets.empty()) sets += "; ";
        sets += recompute_modules_text(set);
      }
      out.push_back(fmt::format("recompute_modules = {} is not searched (search.recompute_modules{}: {})",
                                recompute_modules_text(own.modules),
                                x.q.recompute_modules.empty() ? ", the scenario's" : "", sets));
    } else if (std::find(x.methods.begin(), x.methods.end(), own.method) == x.methods.end()) {
      std::string methods;
      for (RecomputeMethod m : x.methods) {
        if (!methods.empty()) methods += ", ";
        methods += name_of(m);
      }
      out.push_back(fmt::format("recompute_method = {} is not searched (search.recompute_method{}: {})",
                                name_of(own.method), x.q.recompute_method.empty() ? ", the scenario's" : "", methods));
    } else {
      std::vector<int> counts;  // those listed with this method
      for (const RecomputeChoice& c : x.recomputes) {
        if (c.recompute == Recompute::kFull && c.method == own.method && c.layers != kFitLayers) {
          counts.push_back(c.layers);
        }
      }
      if (!x.q.recompute_num_layers_fit) {
        out.push_back(fmt::format("recompute_num_layers = {} is not searched (search.recompute_num_layers{}: {})",
                                  own.layers, x.q.recompute_num_layers.empty() ? ", the scenario's" : "",
                                  list_text(counts)));
      } else {
        // "fit" searches one count per layout and method (fit_count).
        const int fit = fit_count(x.s.model, cluster, p, x.s.workload, own.method);
        if (fit != own.layers) {
          out.push_back(fmt::format(
              "recompute_num_layers = {} is not searched (search.recompute_num_layers: \"fit\" takes {} for this "
              "layout{}{})",
              own.layers, fit, counts.empty() ? "" : ", and ", list_text(counts)));
        }
      }
    }
  }
  if (std::find(x.schedules.begin(), x.schedules.end(), p.schedule) == x.schedules.end()) {
    out.push_back(fmt::format("schedule = {} is not searched (search.schedule)", schedule_name(p.schedule)));
  } else if (p.schedule == Schedule::kInterleaved) {
    check("virtual_stages", x.virtual_stages, p.virtual_stages, !x.q.virtual_stages.empty());
  }
  if (const std::vector<int> etps = etp_values(x, p.tp);
      std::find(etps.begin(), etps.end(), p.expert_tp()) == etps.end()) {
    if (!x.q.etp.empty()) {
      out.push_back(fmt::format("etp = {} is not searched (search.etp: {})", p.expert_tp(), list_text(x.q.etp)));
    } else {
      out.push_back(fmt::format("fold_experts = {} is not searched (search.fold_experts)",
                                p.expert_tp() != p.tp ? "true" : "false"));
    }
  }
  if (p.tp > 1 && std::find(x.sp.begin(), x.sp.end(), p.sequence_parallel) == x.sp.end()) {
    out.push_back(
        fmt::format("sp = {} is not searched (search.sequence_parallel)", p.sequence_parallel ? "true" : "false"));
  }
  const bool offload_searched = std::any_of(x.offloads.begin(), x.offloads.end(), [&](const std::array<double, 3>& o) {
    return o[0] == p.offload_optimizer && o[1] == p.offload_activations && o[2] == p.offload_weights;
  });
  if (!offload_searched) {
    out.push_back(
        fmt::format("offload = {:g}/{:g}/{:g} (optimizer/activations/weights) is not searched "
                    "(search.offload_optimizer, offload_activations, offload_weights)",
                    p.offload_optimizer, p.offload_activations, p.offload_weights));
  }
  if (const std::vector<MoeDispatcher> ds = dispatcher_values(x, p.ep);
      std::find(ds.begin(), ds.end(), p.moe_dispatcher) == ds.end()) {
    out.push_back(fmt::format("moe_dispatcher = {} is not searched (search.moe_dispatcher{})",
                              to_string(p.moe_dispatcher), x.q.moe_dispatcher.empty() ? ", default: the plan's" : ""));
  }
  if (std::find(x.stacks.begin(), x.stacks.end(), p.stack) == x.stacks.end()) {
    out.push_back(fmt::format("stack = {} is not searched (search.stack{})", to_string(p.stack),
                              x.q.stack.empty() ? ", default: the plan's" : ""));
  }
  const std::vector<bool> tpos = tpo_values(x, p.tp, p.sequence_parallel);
  if (std::find(tpos.begin(), tpos.end(), p.tp_comm_overlap) == tpos.end()) {
    out.push_back(
        fmt::format("tpo = {} is not searched (search.tp_comm_overlap)", p.tp_comm_overlap ? "true" : "false"));
  }
  return out;
}

std::string pct(double part, double whole) { return fmt::format("{:.1f}%", whole > 0 ? 100.0 * part / whole : 0.0); }

std::vector<std::string> limits_of(const Context& x, const PlanResult& r, const Candidate& c,
                                   std::optional<std::size_t> rank) {
  std::vector<std::string> out;
  const Figures& f = c.figures();
  const StepBreakdown& b = c.breakdown;
  const double step = c.closed.step_time_s;
  // The parts of the closed-form step, largest first (compute excluded: it is the work).
  std::vector<std::pair<double, std::string>> parts = {
      {b.bubble, "pipeline bubble"},
      {c.exposed.tp, "exposed TP communication"},
      {c.exposed.dp, "exposed DP/ZeRO communication"},
      {c.exposed.pp, "exposed pipeline send/recv"},
      {c.exposed.cp, "exposed CP communication"},
      {c.exposed.ep, "exposed EP all-to-all"},
      {b.wait, "waiting on other ranks"},
      {b.optimizer, "optimizer step"},
      {b.input, "input"},
  };
  std::stable_sort(parts.begin(), parts.end(), [](const auto& a, const auto& bb) { return a.first > bb.first; });
  std::string overheads;
  for (const auto& [t, name] : parts) {
    if (t > 0.005 * step) overheads += fmt::format("{}{} {}", overheads.empty() ? "" : ", ", name, pct(t, step));
  }
  // The compute by kind of work (estimate.h ComputeParts), the parts above 0.5% of the step.
  std::string kinds;
  for (const auto& [t, name] :
       {std::pair{c.compute.gemm, "GEMMs"}, std::pair{c.compute.attention, "attention core"},
        std::pair{c.compute.memory_bound, "memory-bound"}, std::pair{c.compute.recompute, "recompute"},
        std::pair{c.compute.output, "output head"}, std::pair{c.compute.interference, "interference"}}) {
    if (t > 0.005 * step) kinds += fmt::format("{}{} {}", kinds.empty() ? " (" : ", ", name, pct(t, step));
  }
  if (!kinds.empty()) kinds += ")";
  std::string first = fmt::format("step {:.3f} s (closed form): compute {}{}{}{}", step, pct(b.compute, step), kinds,
                                  overheads.empty() ? "" : "; ", overheads);
  // What waiting for the slowest GPU costs (docs/model-reference.md section 4.5): this
  // step against the same layout on GPUs that all run at one speed.
  for (const World& w : x.worlds) {
    if (w.gpus != c.gpus() || !(job_pace(w.cluster) > 1.0)) continue;
    const double slowest = slowest_gpu_cost_s(x.s.model, w.cluster, c.plan, x.s.workload, step);
    first += fmt::format("; {} of it waiting for the slowest of {} GPUs", pct(slowest, step), c.gpus());
  }
  out.push_back(first);
  if (parts.front().first > 0.005 * step) {
    out.push_back(
        fmt::format("largest overhead: {} ({} of the step)", parts.front().second, pct(parts.front().first, step)));
  }
  out.push_back(fmt::format("memory: {:.1f} GiB of {:.1f} GiB usable ({:.1f} GiB spare, {:.0f}% headroom kept; {})",
                            c.peak_bytes() / kGiB, c.usable_bytes / kGiB, c.spare_bytes() / kGiB,
                            c.plan.memory_headroom * 100, c.simulated ? "the engine's peak" : "closed form"));
  if (f.checkpoint_interval_steps > 0) {
    std::string line = fmt::format(
        "goodput {:.2f}%: {} checkpoint of {:.1f} GB pauses {:.2f} s every {} steps "
        "({:.0f} s), restore {:.1f} s",
        f.goodput * 100, to_string(f.checkpoint_mode), c.checkpoint_bytes / 1e9, f.checkpoint_pause_s,
        f.checkpoint_interval_steps, f.checkpoint_interval_s, f.restore_s);
    if (!c.async_fits) {
      line += fmt::format("; async would stage {:.1f} GiB per node in pinned host memory, more than its {:.0f} GiB",
                          c.staging_bytes / kGiB, x.s.cluster.host_memory_GiB);
    }
    out.push_back(line);
  }
  if (rank && *rank > 0 && !r.ranked.empty()) {
    const Candidate& best = r.ranked.front();
    const Figures& bf = best.figures();
    std::string gap;
    switch (x.objective) {
      case Objective::kTimeToTrain:
        gap = fmt::format("time to train {:.1f}% longer", 100.0 * (f.time_to_train_s / bf.time_to_train_s - 1));
        break;
      case Objective::kTokensPerS:
        gap = fmt::format("tokens/s {:.1f}% lower", 100.0 * (1 - f.tokens_per_s / bf.tokens_per_s));
        break;
      case Objective::kCost: gap = fmt::format("cost {:.1f}% higher", 100.0 * (f.cost / bf.cost - 1)); break;
    }
    out.push_back(fmt::format("vs #1 ({}): {}", layout_string(best.plan), gap));
  }
  return out;
}

}  // namespace

namespace {

// For a layout that does not fit in HBM while every layer recomputes in full: the group
// size of recompute_method "uniform" (docs/model-reference.md §3.8 "Grouped full
// recomputation") that holds the least memory, in words, when that makes it fit, or
// nullopt. Groups keep fewer inputs but hold more layers live, so every size is tried (up to
// the largest chunk's layers); the step does not change.
std::optional<std::string> uniform_groups_that_fit(const Scenario& s, const ClusterSpec& c, const Plan& p) {
  if (p.recompute != Recompute::kFull || p.partial_full_recompute()) return std::nullopt;
  const auto best_g = least_memory_group(s.model, c, p, s.workload);
  if (!best_g) return std::nullopt;
  Plan q = p;
  q.recompute_method = RecomputeMethod::kUniform;
  q.recompute_num_layers = *best_g;
  const Estimate best = estimate(s.model, c, q, s.workload);
  if (!best.memory.fits) return std::nullopt;
  return fmt::format(
      "recomputation in groups would make it fit: with recompute_method=uniform,recompute_num_layers={} (each "
      "chunk's layers in groups of {} that keep one input each, the size that holds the least) stage {} needs "
      "{:.1f} GiB; every layer still recomputes once, so the step stays {}",
      *best_g, *best_g, best.memory.stage, best.memory.total / kGiB, seconds_text(best.step_time_s));
}

// For a layout that does not fit in HBM and recomputes nothing or selectively: the
// recompute_modules set the search ranks (search.recompute_modules, else the plan's; not the
// core attention alone where "none" dominates it) with which selective recomputation makes it
// fit fastest, in words, or nullopt. Sets the model does not take (the layout rules) and the
// layout's own are skipped.
std::optional<std::string> modules_that_fit(const Context& x, const ClusterSpec& c, const Plan& p) {
  const Scenario& s = x.s;
  if (p.recompute != Recompute::kNone && p.recompute != Recompute::kSelective) return std::nullopt;
  std::optional<Estimate> best;
  Plan best_plan;
  for (const RecomputeChoice& rc : x.recomputes) {
    if (rc.recompute != Recompute::kSelective) continue;
    Plan q = p;
    set_choice(q, rc);
    if (choice_of(q) == choice_of(p) || !layout_errors(s.model, c, q, s.workload).empty() ||
        !memory_fits(s.model, c, q, s.workload)) {
      continue;
    }
    Estimate e = estimate(s.model, c, q, s.workload);
    if (!best || e.step_time_s < best->step_time_s) {
      best = std::move(e);
      best_plan = q;
    }
  }
  if (!best) return std::nullopt;
  return fmt::format(
      "selective recomputation would make it fit: with recompute=selective,recompute_modules={} (the searched set "
      "that fits fastest) stage {} needs {:.1f} GiB and the step takes {} instead of {}",
      recompute_modules_text(best_plan.recompute_modules), best->memory.stage, best->memory.total / kGiB,
      seconds_text(best->step_time_s), seconds_text(estimate(s.model, c, p, s.workload).step_time_s));
}

// For a layout that does not fit in HBM: the least offload that makes it fit, in words
// (optimizer states first, then activations, then weights), or nullopt.
std::optional<std::string> offload_that_fits(const Scenario& s, const ClusterSpec& c, const Plan& p) {
  const std::array<std::array<double, 3>, 3> steps = {{{1, 0, 0}, {1, 1, 0}, {1, 1, 1}}};
  for (const auto& f : steps) {
    Plan q = p;
    q.offload_optimizer = std::max(p.offload_optimizer, f[0]);
    q.offload_activations = std::max(p.offload_activations, f[1]);
    q.offload_weights = p.zero >= 3 ? p.offload_weights : std::max(p.offload_weights, f[2]);
    if (q.offload_optimizer == p.offload_optimizer && q.offload_activations == p.offload_activations &&
        q.offload_weights == p.offload_weights) {
      continue;
    }
    const Estimate e = estimate(s.model, c, q, s.workload);
    if (!e.memory.fits) continue;
    const Estimate base = estimate(s.model, c, p, s.workload);
    std::string keys;
    if (q.offload_optimizer != p.offload_optimizer) keys += fmt::format(",offload_optimizer={:g}", q.offload_optimizer);
    if (q.offload_activations != p.offload_activations)
      keys += fmt::format(",offload_activations={:g}", q.offload_activations);
    if (q.offload_weights != p.offload_weights) keys += fmt::format(",offload_weights={:g}", q.offload_weights);
    return fmt::format(
        "offload would make it fit: with {} stage {} needs {:.1f} GiB ({:.1f} GiB in host memory per "
        "GPU) and the step takes {} instead of {}",
        keys.substr(1), e.memory.stage, e.memory.total / kGiB, e.memory.host / kGiB, seconds_text(e.step_time_s),
        seconds_text(base.step_time_s));
  }
  return std::nullopt;
}

// For a layout that does not fit in HBM and does not recompute every layer: the fewest
// layers of each chunk whose full recomputation (recompute_num_layers, Megatron-Core's
// "block") makes it fit, in words, or nullopt.
std::optional<std::string> recompute_that_fits(const Scenario& s, const ClusterSpec& c, const Plan& p) {
  // Every layer recomputes already (alone, or in groups of recompute_method "uniform").
  if (p.recompute == Recompute::kFull && (p.recompute_num_layers == 0 || p.recompute_group() > 1)) return std::nullopt;
  const auto f = fewest_fitting_recompute_layers(s.model, c, p, s.workload);
  if (!f) return std::nullopt;
  Plan q = p;
  q.recompute = Recompute::kFull;
  q.recompute_method = RecomputeMethod::kBlock;
  q.recompute_num_layers = f->count();
  const Estimate e = estimate(s.model, c, q, s.workload);
  const Estimate base = estimate(s.model, c, p, s.workload);
  return fmt::format(
      "recomputation would make it fit: with recompute=full{} (the first {} of each chunk's {} layers) stage {} "
      "needs {:.1f} GiB and the step takes {} instead of {}",
      q.recompute_num_layers > 0 ? fmt::format(",recompute_num_layers={}", f->n) : "", f->n, f->most, e.memory.stage,
      e.memory.total / kGiB, seconds_text(e.step_time_s), seconds_text(base.step_time_s));
}

}  // namespace

Result<Explanation> explain_layout(const Scenario& s, const PlanResult& r, std::string_view text) {
  auto ctx = make_context(s);
  if (!ctx.ok()) return ctx.error();
  const Context& x = *ctx;
  auto parsed = parse_layout(text, s.plan);
  if (!parsed.ok()) return parsed.error();
  Plan p = parsed->plan;
  int gpus = 0;
  if (parsed->gpus) {
    gpus = *parsed->gpus;
  } else if (parsed->dp_given) {
    gpus = p.world();
  } else if (x.q.gpus.size() == 1) {
    gpus = x.q.gpus.front();
  } else {
    return Error{fmt::format("\"{}\": name the GPU count (gpus=N): the search has several ({})", std::string(text),
                             list_text(x.q.gpus))};
  }
  if (gpus % s.cluster.gpus_per_node != 0) {
    return Error{fmt::format("\"{}\": gpus: {} is not a multiple of cluster.gpus_per_node ({})", std::string(text),
                             gpus, s.cluster.gpus_per_node)};
  }
  if (!parsed->dp_given) {
    const std::int64_t inner = std::int64_t{p.tp} * p.pp * p.cp;
    p.dp = gpus % inner == 0 ? static_cast<int>(gpus / inner) : 1;
  }
  Explanation ex;
  p = canonical(x, p, ex.folded);
  // As the search applies the scenario's options (unless the layout names a2a).
  apply_scenario_options(s.plan, s.model, p, /*a2a=*/!parsed->a2a_given);
  ex.plan = p;
  ex.layout = layout_string(p);
  World w;
  w.gpus = gpus;
  w.cluster = s.cluster;
  w.cluster.nodes = gpus / s.cluster.gpus_per_node;
  w.env = s.faults.failures ? failure_env(*s.faults.failures, w.cluster) : FailureEnv{};
  ex.outside = outside_space(x, p, w.cluster);

  std::vector<std::string> errors = layout_errors(s.model, w.cluster, p, s.workload);
  std::vector<Reject> reasons;
  for (const std::string& e : errors) reasons.push_back(classify({e}));
  ex.problems = errors;
  if (!x.q.allow_tp_across_nodes && tp_spans_nodes(p, w.cluster.gpus_per_node)) {
    const int stride = Placement::of(p, w.cluster.gpus_per_node).group_stride(GroupKind::kTp);
    const GroupShape g = group_shape(p.tp, stride, w.cluster.gpus_per_node);
    ex.problems.push_back(
        fmt::format("plan.tp: the TP group of {} spans {} nodes of {} GPUs; TP stays inside the "
                    "scale-up domain unless search.allow_tp_across_nodes is true",
                    p.tp, g.nodes, w.cluster.gpus_per_node));
    reasons.push_back(Reject::kTpAcrossNodes);
  }
  std::optional<Estimate> e;
  if (errors.empty()) {
    e = estimate(s.model, w.cluster, p, s.workload);
    if (!e->memory.fits && e->memory.total > e->memory.usable) {
      const MemoryBreakdown& mem = e->memory;
      ex.problems.push_back(fmt::format(
          "memory: stage {} needs {:.1f} GiB but {:.1f} GiB are usable ({:.1f} GiB HBM less {:.0f}% headroom): "
          "{:.1f} GiB over (params {:.1f}, grads {:.1f}, optimizer {:.1f}, activations {:.1f}, buffers {:.1f} GiB)",
          mem.stage, mem.total / kGiB, mem.usable / kGiB, mem.capacity / kGiB, p.memory_headroom * 100,
          (mem.total - mem.usable) / kGiB, mem.params / kGiB, mem.grads / kGiB, mem.optimizer / kGiB,
          mem.activations / kGiB, mem.buffers / kGiB));
      if (mem.host <= mem.host_usable) {
        if (auto fix = offload_that_fits(s, w.cluster, p)) ex.problems.push_back(*fix);
      }
      if (!p.offloads()) {
        if (auto fix = modules_that_fit(x, w.cluster, p)) ex.problems.push_back(*fix);
        if (auto fix = recompute_that_fits(s, w.cluster, p)) ex.problems.push_back(*fix);
        if (auto fix = uniform_groups_that_fit(s, w.cluster, p)) ex.problems.push_back(*fix);
      }
      reasons.push_back(Reject::kMemory);
    }
    if (!e->memory.fits && e->memory.host > e->memory.host_usable) {
      ex.problems.push_back(
          fmt::format("memory: offload needs {:.1f} GiB of host memory per GPU, {:.1f} GiB is "
                      "each GPU's share of the node's {:.0f} GiB",
                      e->memory.host / kGiB, e->memory.host_usable / kGiB, w.cluster.host_memory_GiB));
      reasons.push_back(Reject::kMemory);
    }
  }
  if (!reasons.empty()) {
    ex.rejected = *std::min_element(reasons.begin(), reasons.end(),
                                    [](Reject a, Reject b) { return static_cast<int>(a) < static_cast<int>(b); });
    return ex;
  }
  for (std::size_t i = 0; i < r.ranked.size(); ++i) {
    if (same_layout(r.ranked[i].plan, p)) {
      ex.rank = i;
      ex.evaluated = r.ranked[i];
      break;
    }
  }
  if (!ex.evaluated) {
    // Outside the space, or too big for the engine: simulate it as the top layouts are.
    Candidate c = make_candidate(x, w, p, *e, steps_total_of(s, p.global_batch));
    const auto prior = std::find_if(r.engine_rejected.begin(), r.engine_rejected.end(),
                                    [&](const Candidate& q) { return same_layout(q.plan, p); });
    if (prior != r.engine_rejected.end()) c = *prior;
    else if (auto err = simulate_candidate(x, w, c)) ex.limits.push_back(*err);
    if (c.simulated && c.engine_memory_bytes > c.usable_bytes) {
      ex.problems.push_back(fmt::format(
          "memory: the event engine's peak on stage {} is {:.1f} GiB but {:.1f} GiB are usable: {:.1f} GiB over "
          "(the closed form's {:.1f} GiB on stage {} fits; the engine follows the schedule's allocations)",
          c.engine_stage, c.engine_memory_bytes / kGiB, c.usable_bytes / kGiB,
          (c.engine_memory_bytes - c.usable_bytes) / kGiB, c.memory_bytes / kGiB, e->memory.stage));
      ex.rejected = Reject::kMemory;
      return ex;
    }
    ex.evaluated = c;
    std::size_t before = 0;
    for (const Candidate& q : r.ranked) before += ranks_before(x.objective, q, *ex.evaluated) ? 1 : 0;
    ex.rank = before;
  }
  for (std::string& l : limits_of(x, r, *ex.evaluated, ex.rank)) ex.limits.push_back(std::move(l));
  if (p.recompute == Recompute::kFull && !p.offloads() && p.recompute_method == RecomputeMethod::kBlock) {
    // Does it recompute more layers than it needs to fit?
    if (const auto f = fewest_fitting_recompute_layers(s.model, w.cluster, p, s.workload)) {
      const int now = p.recompute_num_layers > 0 ? std::min(p.recompute_num_layers, f->most) : f->most;
      if (f->n < now) {
        Plan q = p;
        q.recompute_num_layers = f->n;
        const Estimate fewer = estimate(s.model, w.cluster, q, s.workload);
        const Estimate none = estimate(s.model, w.cluster, p.without_recompute(), s.workload);
        ex.limits.push_back(fmt::format(
            "recomputation: {} of each chunk's {} layers recompute in full; the first {} would fit "
            "(recompute_num_layers={}: stage {} needs {:.1f} GiB) and the step would take {} instead of {}{}",
            now, f->most, f->n, f->n, fewer.memory.stage, fewer.memory.total / kGiB, seconds_text(fewer.step_time_s),
            seconds_text(e->step_time_s),
            none.memory.fits ? fmt::format("; without recomputation it fits too ({})", seconds_text(none.step_time_s))
                             : ""));
      }
    }
  }
  if (p.offloads()) {
    // Is offload what makes it fit?
    Plan none = p;
    none.offload_optimizer = none.offload_activations = none.offload_weights = 0;
    const Estimate without = estimate(s.model, w.cluster, none, s.workload);
    ex.limits.push_back(fmt::format(
        "offload (optimizer {:g}, activations {:g}, weights {:g}): {:.1f} GiB in host memory per GPU; the host costs "
        "{} of the step ({} optimizer step, {} waits for transfers); {}",
        p.offload_optimizer, p.offload_activations, p.offload_weights, e->memory.host / kGiB,
        seconds_text(e->breakdown.optimizer - without.breakdown.optimizer + e->breakdown.host - without.breakdown.host),
        seconds_text(e->breakdown.optimizer - without.breakdown.optimizer),
        seconds_text(e->breakdown.host - without.breakdown.host),
        without.memory.fits
            ? "it also fits without offload"
            : fmt::format("offload is what makes it fit: without it stage {} needs {:.1f} GiB, {:.1f} "
                          "GiB usable",
                          without.memory.stage, without.memory.total / kGiB, without.memory.usable / kGiB)));
  }
  return ex;
}

}  // namespace stepcast::planner

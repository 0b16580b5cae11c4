// The optional `search` section of a scenario: what `stepcast plan` searches, under which
// constraints, and how it ranks (docs/planner.md). Plain values filled and validated by
// the scenario loader (models/src/search_json.cc); the planner (planner/) reads them.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "stepcast/models/specs.h"

namespace stepcast {

enum class Objective { kTimeToTrain, kTokensPerS, kCost };

// "time_to_train", "tokens_per_s", "cost".
const char* objective_name(Objective objective);

struct SearchSpec {
  // World sizes (GPUs) to plan for, ascending, each a multiple of cluster.gpus_per_node
  // (the cluster is resized to gpus / gpus_per_node nodes). Empty in the file: the
  // cluster's own; the loader fills it.
  std::vector<int> gpus;
  // Sequences per optimizer step, ascending. Empty in the file: plan.global_batch; the
  // loader fills it (and reports the field when neither is given).
  std::vector<std::int64_t> global_batch;
  // Allowed values per searched dimension, ascending without duplicates; empty: the
  // default set (docs/planner.md "The space"). dp is derived: gpus / (tp x pp x cp).
  std::vector<int> tp, pp, cp, ep;
  std::vector<int> virtual_stages;   // for schedule "interleaved" (each >= 2)
  std::vector<int> microbatch;
  std::vector<int> zero;             // 0..3
  std::vector<Schedule> schedule;    // in enum order
  std::vector<Recompute> recompute;  // in enum order
  // With recompute "full": the counts of each chunk's first layers that recompute
  // (Plan::recompute_num_layers, 0 = every layer), ascending; empty: the plan's own only
  // (unless recompute_num_layers_fit).
  std::vector<int> recompute_num_layers;
  // "fit" in search.recompute_num_layers: each "full" layout is also evaluated with the
  // fewest layers per chunk whose full recomputation makes it fit in HBM (every layer when
  // none fewer does; docs/planner.md "The space").
  bool recompute_num_layers_fit = false;
  // Megatron-Core's recompute_method for the "full" layouts (Plan::recompute_method), in
  // enum order; empty: the plan's own only. With "block" the recompute_num_layers entries
  // are each chunk's first layers that recompute; with "uniform" they are group sizes (every
  // layer recomputes, in groups; 0 and 1: every layer alone, as "block" 0), and "fit" takes
  // the group size that holds the least memory (docs/planner.md "The space").
  std::vector<RecomputeMethod> recompute_method;
  // Megatron-Core's recompute_modules for the "selective" layouts: module sets (Plan::
  // recompute_modules bits), ascending; empty: the plan's own only. Each "selective" layout
  // is evaluated with each set (docs/planner.md "The space").
  std::vector<std::uint32_t> recompute_modules;
  std::vector<bool> sequence_parallel;  // false before true
  // TP communication overlap (Plan::tp_comm_overlap), false before true; empty: both. Only
  // layouts with sequence parallelism and tp > 1 take true; the others are listed once,
  // without it.
  std::vector<bool> tp_comm_overlap;
  // Parallel folding of MoE layers (Plan::etp), false before true; empty: both. false runs
  // the experts with etp = tp, true with etp = 1 (EP then spans tp x cp x dp). Only MoE
  // layouts with tp > 1 take true; the others are listed once, unfolded.
  std::vector<bool> fold_experts;
  // Expert tensor-parallel widths (Plan::etp) to try, ascending; empty: those of
  // fold_experts. A width equal to a layout's tp runs unfolded, any other folds the experts
  // (etp x ep must divide the stage's tp x cp x dp ranks). Not with fold_experts.
  std::vector<int> etp;
  // Offload fractions (Plan::offload_*), each in 0..1, ascending; empty: the plan's own value
  // only. Every layout is evaluated with each combination (docs/planner.md "Offload").
  std::vector<double> offload_optimizer, offload_activations, offload_weights;
  // Software stacks (plan.stack, models/data/stacks.json), in enum order; empty: the plan's
  // own only. Each layout is evaluated under each listed stack.
  std::vector<Stack> stack;
  // MoE token dispatchers (Plan::moe_dispatcher), in enum order; empty: the plan's own only.
  // Each MoE layout with ep > 1 is evaluated with each; dense and ep = 1 layouts keep the
  // plan's.
  std::vector<MoeDispatcher> moe_dispatcher;
  bool allow_tp_across_nodes = false;   // else a TP group must sit inside one node
  int top_k = 20;                       // closed-form best re-simulated by the engine (0: none)
  // nullopt: time_to_train when workload.train_tokens > 0, else tokens_per_s.
  std::optional<Objective> objective;
  double price_per_gpu_hour = 0;        // 0: no cost column (objective "cost" needs > 0)
  int threads = 0;                      // 0: std::thread::hardware_concurrency()

  // Set by the loader: the scenario's `plan` section is present and, completed with the
  // defaults, is a valid layout of the cluster (then Scenario::plan holds it, and `stepcast
  // plan` reports where it ranks). Otherwise Scenario::plan holds only the settings that
  // every candidate shares (precision, placement, memory_headroom, ...).
  bool plan_is_layout = false;
};

}  // namespace stepcast

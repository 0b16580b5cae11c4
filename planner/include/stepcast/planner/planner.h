// Layout search (docs/planner.md): every parallel layout of the scenario's model on the
// searched GPU counts and global batches, pruned by the layout rules (models/scenario.h
// layout_errors), the scale-up domain and memory (the closed form of models/estimate.h
// with the configured headroom), ranked by the closed form with a failure-aware goodput
// (goodput.h), the best `top_k` re-simulated with the event engine (sim/run.h,
// representative mode) and re-ranked, and a Pareto front over GPUs x time to train x
// memory headroom. Deterministic: the same scenario gives the same result, field for
// field, with any number of threads.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "stepcast/models/estimate.h"
#include "stepcast/models/reliability.h"
#include "stepcast/models/result.h"
#include "stepcast/models/scenario.h"
#include "stepcast/models/search.h"
#include "stepcast/models/specs.h"

namespace stepcast::planner {

// Why a layout of the space is rejected: the first check it fails, in this order (the
// order in which the search prunes, so that every layout is counted once).
enum class Reject {
  kTpHeads = 0,     // tp does not divide the attention or KV heads
  kTpAcrossNodes,   // the TP group spans nodes (search.allow_tp_across_nodes is false)
  kContext,         // cp does not divide seq_len
  kExperts,         // ep does not divide the experts or dp x cp
  kPipelineDepth,   // pp x virtual_stages exceed the layers
  kBatch,           // global batch not divisible by microbatch x dp (interleaved: m % pp)
  kLayout,          // any other layout rule (layout_errors)
  kMemory,          // the worst rank's peak exceeds the HBM less the headroom
};
inline constexpr int kRejectReasons = 8;
const char* reject_key(Reject reason);   // "tp_heads", "tp_across_nodes", ..., "memory"
const char* reject_text(Reject reason);  // in words, for reports

struct SpaceCounts {
  std::int64_t size = 0;       // layouts in the space
  std::int64_t feasible = 0;   // passed every check: ranked
  std::int64_t estimated = 0;  // closed-form evaluations (layouts that reached the memory check)
  std::array<std::int64_t, kRejectReasons> rejected{};
  std::int64_t rejected_total() const;
  void add(const SpaceCounts& other);
};

// Counts of one (GPU count, global batch) pair of the sweep.
struct SweepCounts {
  int gpus = 0;
  std::int64_t global_batch = 0;
  SpaceCounts counts;
};

// Predicted figures of one layout.
struct Figures {
  double step_time_s = 0;
  double tokens_per_s = 0;
  double mfu = 0;
  double goodput = 1;                     // 1 without a failure model
  CheckpointMode checkpoint_mode = CheckpointMode::kSync;
  std::int64_t checkpoint_interval_steps = 0;  // 0 without a failure model
  double checkpoint_interval_s = 0;
  double checkpoint_pause_s = 0;
  double restore_s = 0;
  double time_to_train_s = 0;             // 0 without workload.train_tokens
  double cost = 0;                        // price x GPU-hours; 0 without a price
};

struct Candidate {
  Plan plan;                 // the layout; its world plan.world() is the GPU count
  Figures closed;            // closed form
  Figures engine;            // event engine, when `simulated`
  bool simulated = false;
  double memory_bytes = 0;   // worst rank's peak (closed form)
  double engine_memory_bytes = 0;  // worst simulated rank's peak (when `simulated`)
  int engine_stage = 0;            // its pipeline stage
  double usable_bytes = 0;   // HBM x (1 - memory_headroom)
  double capacity_bytes = 0;
  double checkpoint_bytes = 0;   // with a failure model: one checkpoint (reliability.h)
  double staging_bytes = 0;      // pinned host memory per node an async snapshot needs
  bool async_fits = true;        // staging_bytes <= cluster.host_memory_GiB
  StepBreakdown breakdown;   // closed form, slowest rank
  ComputeParts compute;      // its compute by kind of work
  ExposedComm exposed;
  Band step_time_band;       // closed form's p10-p90 (band.h), scaled to figures() when simulated
  bool ties_best = false;    // too close to ranked[0] to rank (band.h ties(); ranked[0] itself: false)

  const Figures& figures() const { return simulated ? engine : closed; }
  int gpus() const { return plan.world(); }
  // The peak used for the fit: the engine's when simulated, else the closed form's.
  double peak_bytes() const { return simulated ? engine_memory_bytes : memory_bytes; }
  // Bytes left beyond the configured headroom (>= 0 for a ranked layout).
  double spare_bytes() const { return usable_bytes - peak_bytes(); }
};

// The value the objective minimises: time to train (s), -tokens/s, or cost.
double objective_value(Objective objective, const Figures& figures);

// Total order of the ranking: the objective value, then (ascending) GPUs, global batch,
// cp, tp, pp, ep, schedule, virtual stages, microbatch, sp, tpo, zero, recompute, stack — equal values
// go to the simpler layout, and two different layouts never tie.
bool ranks_before(Objective objective, const Candidate& a, const Candidate& b);

struct PlanResult {
  Objective objective = Objective::kTokensPerS;
  SearchSpec search;                 // as searched: gpus and global_batch filled
  SpaceCounts counts;                // the whole sweep
  std::vector<SweepCounts> sweep;    // per (gpus, global batch), ascending
  std::vector<Candidate> ranked;     // every feasible layout, best first
  int top_k = 0;                     // layouts asked to be re-simulated
  int simulated = 0;                 // ranked[0, simulated) re-simulated and re-ranked
  // Layouts the closed form fits and whose simulated peak does not (counted as memory),
  // in closed-form order.
  std::vector<Candidate> engine_rejected;
  std::vector<std::size_t> pareto;   // indices into `ranked`: GPUs asc, then time asc
  std::size_t best_by_tokens = 0;    // index of the highest tokens/s (figures())
  int ties_with_best = 0;            // ranked layouts after the first that tie with it
  std::optional<std::size_t> scenario_layout;  // index of the scenario's own plan, when ranked
  std::vector<std::string> notes;    // engine runs that fell back to the closed form, ...
};

struct PlanOptions {
  int threads = -1;                  // -1: search.threads (0 there: hardware concurrency)
  std::optional<int> top_k;          // overrides search.top_k
  // Called on the calling thread, about ten times a second and once at the end, with the
  // work done and the total (search items, then engine runs). May be empty.
  std::function<void(std::int64_t done, std::int64_t total)> progress;
  // Stop as soon as possible when it becomes true (a GUI's Cancel, set from any thread);
  // search_layouts then returns Error{"search cancelled"}. Items already being evaluated
  // finish first, so it returns within one item's (or one engine run's) time.
  const std::atomic<bool>* cancel = nullptr;
};

// The search. Uses scenario.search when set (load with LoadOptions::plan_template), else
// the defaults with the cluster's GPUs and plan.global_batch. Errors (exit 2 in the CLI):
// an objective that needs workload.train_tokens or a price it lacks, a space with nothing
// in it. A space where nothing fits is a result (ranked empty), not an error.
Result<PlanResult> search_layouts(const Scenario& scenario, const PlanOptions& options = {});

// Why one layout is rejected, or where it ranks and what limits it.
struct Explanation {
  Plan plan;                          // the layout asked about, completed and folded
  std::string layout;                 // layout_string(plan)
  std::vector<std::string> folded;    // settings that change nothing, folded as the search lists them
  std::vector<std::string> outside;   // why it is not in the searched space (empty: it is)
  std::optional<Reject> rejected;     // the first failed check, as the search counts it
  std::vector<std::string> problems;  // every failed check, whole messages
  std::optional<Candidate> evaluated; // its figures when it passes every check
  std::optional<std::size_t> rank;    // 0-based place in result.ranked (or where it would be)
  std::vector<std::string> limits;    // what limits it, in words
};

// `layout` is a layout string (layout.h); fields it does not name take the scenario's plan
// values, dp = gpus / (tp pp cp), gpus = the search's only GPU count (else name it: gpus=N),
// gb = the search's first global batch. Errors: a malformed string, an unknown key, gpus
// needed and not named. REQUIRES: `result` is search_layouts(scenario).
Result<Explanation> explain_layout(const Scenario& scenario, const PlanResult& result,
                                   std::string_view layout);

}  // namespace stepcast::planner

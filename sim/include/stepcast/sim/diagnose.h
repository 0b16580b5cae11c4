// Incident analysis (docs/incidents.md): read a trace in stepcast's own format back into
// a neutral per-rank structure, find outlier ranks (slow compute, late arrival) and the
// wait they cause, input stalls per host, exposed communication and hangs, audit what a
// checkpoint lacks for an exact resume, and decompose the step-time difference between
// two runs. A simulated scenario goes through the same path as a trace file
// (trace_from_timeline == read_trace(chrome_trace_json(...)), tested), so the detectors
// never see where their input came from. Everything here is deterministic: ranks in
// ascending order, std::map / sorted vectors only, fixed number formatting.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "stepcast/models/program.h"
#include "stepcast/models/reliability.h"
#include "stepcast/models/result.h"
#include "stepcast/models/scenario.h"
#include "stepcast/models/timeline.h"
#include "stepcast/sim/analysis.h"
#include "stepcast/sim/run.h"

namespace stepcast::sim {

// Steps `diagnose`, `compare` and `check` (for scenarios with faults) simulate.
inline constexpr int kDiagnoseSteps = 10;

// ---------------------------------------------------------------------------------------
// The neutral trace.

enum class TraceOpKind : std::uint8_t { kCompute, kCollective, kSend, kRecv };

// One executed op of one rank. Times in integer nanoseconds from the start of the run.
// For communication `post` is when the rank reached the op and `begin` when data started
// to move (begin - post: waiting for peers); for compute post == begin.
struct TraceOp {
  std::int64_t post_ns = 0, begin_ns = 0, end_ns = 0;
  std::uint32_t name = 0;                  // index into Trace::names
  int step = 0;
  TraceOpKind kind = TraceOpKind::kCompute;
  Stream stream = Stream::kCompute;
  ComputeClass cclass = ComputeClass::kGemm;  // kCompute
  GroupKind group = GroupKind::kTp;           // kCollective
  CollKind coll = CollKind::kAllReduce;       // kCollective
  int group_root = 0;                         // kCollective: lowest rank of the group
  std::uint32_t seq = 0;                      // kCollective: 1-based number within the group kind
  double bytes = 0;                           // communication (nccl-tests size)
};

struct TraceRank {
  int rank = 0, stage = 0, node = 0;
  std::vector<TraceOp> ops;  // in the order of the trace (the writer's: completion order)
};

struct Trace {
  Placement placement;                    // layout, from the metadata event
  std::vector<std::int64_t> step_end_ns;  // global end of each step; 0 (or not increasing):
                                          // the step never finished (a hang)
  std::vector<TraceRank> ranks;           // ascending rank; only ranks present in the trace
  std::vector<std::string> names;

  int steps() const { return static_cast<int>(step_end_ns.size()); }
  // The first step that not every rank finished: its step_end is not later than the one
  // before (the first must be > 0), or a rank completed fewer ops in it than the busiest
  // rank of its pipeline stage (they run the same op list). steps() when all finished.
  int first_unfinished_step() const;
  bool complete() const { return steps() > 0 && first_unfinished_step() == steps(); }
};

// True when `text` looks like a trace rather than a scenario (it has a "traceEvents" key).
bool looks_like_trace(std::string_view text);

// Parses Chrome trace-event JSON written by chrome_trace_json (models/timeline.h; the
// executor writes the same format). Streams the events (one event object in memory at a
// time). Errors name the event and field, e.g.
//   `traceEvents[12].args.step: expected a non-negative integer, got "x"`, or
//   `not a stepcast trace: no {"ph":"M","name":"stepcast"} metadata event (...)`.
// "wait: ..." slices (redundant with wait_us), counters and other metadata are skipped.
Result<Trace> read_trace(std::string_view text);

// The same structure straight from a simulation (no text round trip).
Trace trace_from_timeline(const Program& program, const Timeline& timeline);

// Per-rank breakdown of a trace, with the rules of analyze() (sim/analysis.h): equal to it
// for a simulated timeline. peak_bytes is 0 (traces carry no memory model). REQUIRES
// trace.complete() and at least one step.
std::vector<RankBreakdown> trace_breakdown(const Trace& trace);

// ---------------------------------------------------------------------------------------
// Detectors.

struct DiagnoseOptions {
  // Robust z = (x - median) / (1.4826 MAD) (Iglewicz-Hoaglin). Outlier ranks: the median
  // of the rank's pipeline stage in that step, the MAD pooled over all steps of the stage.
  // Input stalls: median and MAD of all hosts and steps.
  double z_threshold = 3.5;
  double min_compute_excess = 0.05;  // compute >= 5 % above its stage's median
  double min_lateness_step_fraction = 0.05;  // late arrival >= 5 % of the median step
  int min_outlier_steps = 2;        // flagged in >= this many steps (all steps when fewer)
  double min_stall_input_fraction = 0.5;     // input >= 50 % above the median input ...
  double min_stall_step_fraction = 0.01;     // ... and >= 1 % of the median step longer
  double exposed_comm_note_fraction = 0.10;  // exposed communication worth a note
  double input_note_fraction = 0.05;         // input time on every host worth a note
};

// The waiting a rank causes at collectives of one group kind: for every collective in
// which it arrived last, sum over the members of (its arrival - member's arrival), ties
// for last split evenly. Averaged over the analysed steps.
struct CausedWait {
  GroupKind group = GroupKind::kDp;
  int group_size = 0;        // members of its group of this kind
  double summed_s = 0;       // per step, summed over the peers (rank-seconds)
  double per_peer_s = 0;     // per step, each instance's sum divided by its peers (size - 1)
};

struct OutlierRank {
  int rank = 0, stage = 0, node = 0;
  int steps = 0;                   // steps analysed
  int compute_steps = 0;           // steps in which its compute is an outlier
  int late_steps = 0;              // steps in which its arrival is an outlier not explained
                                   // by a slow or stalled rank it runs in lockstep with (its
                                   // tp/cp/ep groups and those of its pipeline neighbours)
  double compute_s = 0;            // its compute per step (mean over all steps)
  double median_compute_s = 0;     // its stage's median compute per step (mean over steps)
  double compute_excess = 0;       // mean of compute / median - 1 over its outlier steps
                                   // (over all steps when it is only late)
  double lateness_s = 0;           // per step, the sum over its collectives of its arrival
                                   // minus its group's median arrival (mean over all steps)
  std::vector<CausedWait> caused;  // by group kind (tp, cp, ep, dp, edp order), nonzero only
};

struct InputStall {
  int node = 0;
  std::vector<int> ranks;            // its ranks that read input (pipeline stage 0)
  std::vector<int> stalled_steps;    // ascending
  int period = 0;                    // steps between stalls when regular (>= 2 stalls), else 0
  double median_input_s = 0;         // median input time of all hosts and steps
  double excess_s = 0;               // mean input time above the median, over stalled steps
  double per_step_s = 0;             // the excess averaged over all steps
  double peers_wait_s = 0;           // wait its ranks cause per stalled step (per peer, all kinds)
};

// Mean over ranks per step, seconds, by kind: tp, cp, ep, pp, dp.
struct ExposedComm {
  std::array<double, 5> by_kind{};
  double total = 0;
  double fraction = 0;  // of the step
};
inline constexpr std::array<const char*, 5> kCommKindNames = {"tp", "cp", "ep", "pp", "dp"};

// What a checkpoint lacks for an exact resume (checkpoint.contents).
struct ResumeItem {
  StatePart part = StatePart::kModel;
  bool matters = true;       // false: missing without effect (grad_scaler without fp16)
  std::string consequence;   // what goes wrong after a restart
};
struct ResumeAudit {
  std::vector<ResumeItem> missing;  // in the order of kAllStateParts
  // The missing parts that matter, names sorted alphabetically and comma-separated
  // ("data_sampler,lr_scheduler,rng"); "" when the resume is exact.
  std::string missing_list() const;
  bool ok() const { return missing_list().empty(); }
};
// `loss_scaling`: the run scales its loss (fp16); otherwise a missing grad_scaler is harmless.
ResumeAudit resume_audit(const CheckpointSpec& checkpoint, bool loss_scaling = false);

struct Finding {
  bool problem = true;  // false: a note (worth knowing, not a fault)
  std::string text;     // plain words, one sentence
};

struct Diagnosis {
  std::string source;        // scenario name or trace path
  std::string input;         // "scenario" | "trace"
  std::string mode;          // "full" | "representative" (scenarios), "trace"
  int world = 0;
  int ranks_analysed = 0;
  int steps = 0;
  std::uint64_t seed = 0;    // scenarios
  double step_time_s = 0;    // mean over steps
  std::vector<double> step_times_s;
  std::vector<RankBreakdown> ranks;  // per-rank breakdown, ascending rank
  RankBreakdown mean;                // mean over the analysed ranks (rank = stage = -1)
  std::vector<OutlierRank> outliers;  // ascending rank
  std::vector<InputStall> stalls;     // ascending node
  ExposedComm comm;
  bool hang = false;
  std::string hang_report;            // the engine's (scenarios) or the trace's report
  std::vector<std::string> mismatches;
  std::optional<ResumeAudit> resume;  // scenarios with a `checkpoint` block
  std::vector<Finding> verdict;       // problems first, then notes
  DiagnoseOptions options;            // the thresholds used

  bool problem() const;
  std::string outlier_list() const;   // "37" / "3,12" / ""
  std::string stalling_list() const;  // hosts, same form
};

// Detectors on a complete trace, or the hang report of an incomplete one.
Diagnosis diagnose_trace(const Trace& trace, const DiagnoseOptions& options = {});
// A finished simulation of `scenario` (its trace via trace_from_timeline; on a hang, the
// engine's report and mismatches), plus the resume audit when it has a checkpoint block.
Diagnosis diagnose_run(const Scenario& scenario, const RunResult& run, const DiagnoseOptions& options = {});
// Simulates `scenario` for `steps` steps (full mode when faults perturb ranks) and
// diagnoses it. Errors: those of run_scenario.
Result<Diagnosis> diagnose_scenario(const Scenario& scenario, int steps, const DiagnoseOptions& options = {});

std::string diagnosis_text(const Diagnosis& d);
// JSON; the check fields outlier_ranks, stalling_hosts, hang, mismatch, resume_missing are
// top-level (outlier_ranks and stalling_hosts absent on a hang: nothing was analysed).
std::string diagnosis_json(const Diagnosis& d);

// ---------------------------------------------------------------------------------------
// compare A B.

// What one fault of a scenario (an entry of faults.stragglers other than jitter) costs:
// the step time with it minus the step time of the same scenario without it.
struct FaultEffect {
  std::string fault;        // "faults.stragglers[0]"
  std::string description;  // "slowdown of ranks 37 (x1.18)"
  double alone_s = 0;
};

struct CompareSide {
  std::string name;
  int world = 0;
  int steps = 0;
  double step_time_s = 0;
  RankBreakdown mean;                 // mean over ranks: its parts sum to step_time_s
  std::int64_t tokens_per_step = 0;
  std::int64_t global_batch = 0;      // sequences per step
  std::int64_t seq_len = 0;
  double model_flops_per_step = 0;
  double peak_flops_per_gpu = 0;
  std::vector<std::string> findings;  // the problems diagnose finds in it
  std::string hang_report;            // non-empty: the run hangs (nothing else is filled)
  // Counterfactuals: the scenario re-simulated without each fault alone and without all of
  // them (jitter is kept: ordinary noise, not a fault). Without faults, clean_* == the above.
  std::vector<FaultEffect> faults;
  double faults_together_s = 0;       // step_time_s - clean_step_time_s
  double clean_step_time_s = 0;
  RankBreakdown clean_mean;
};

// Simulates `scenario` for `steps` steps, diagnoses it and, when it has faults, simulates
// the counterfactuals. Errors: those of run_scenario.
Result<CompareSide> compare_side(const Scenario& scenario, int steps, const DiagnoseOptions& options = {});
// A side from a measured run (the executor's timeline of `program`, lowered from
// `scenario`): diagnosed as a trace; no counterfactuals (a measurement has no faults to
// remove). `name` labels it in reports.
CompareSide compare_side_measured(const Scenario& scenario, const Program& program, const Timeline& measured,
                                  const std::string& name, const DiagnoseOptions& options = {});

struct ComparePart {
  std::string name;   // "compute", "exposed_comm.tp", ..., "bubble", "wait", "input", "optimizer"
  double a_s = 0, b_s = 0;
  double delta_s() const { return b_s - a_s; }
};

struct Comparison {
  CompareSide a, b;
  // The step-time difference by breakdown part (means over ranks); the deltas add up to
  // b.step_time_s - a.step_time_s.
  std::vector<ComparePart> parts;
  double step_delta_s = 0;
  double parts_delta_s = 0;        // sum of the parts' deltas (equal up to rounding)
  // The same difference by cause: B's faults (together) minus A's faults (together) plus
  // the layout-and-scale part (B without faults vs A without faults, by breakdown part).
  std::vector<ComparePart> layout_parts;
  double layout_delta_s = 0;
  // Per-GPU throughput of B over A (tokens/s/GPU): strong-scaling efficiency when both
  // train the same global batch, weak-scaling when the work per GPU is the same.
  double scaling_efficiency = 0;
  std::string scaling_kind;        // "strong" | "weak" | "throughput"
  bool same_training = true;       // same global batch and tokens per step
  std::vector<std::string> warnings;
};

// REQUIRES: neither side hangs.
Comparison compare(const CompareSide& a, const CompareSide& b);
std::string comparison_text(const Comparison& c);
std::string comparison_json(const Comparison& c);

}  // namespace stepcast::sim

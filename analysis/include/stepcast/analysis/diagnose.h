// The detectors of `stepcast diagnose` (docs/incidents.md) on a neutral trace (trace.h):
// outlier ranks (slow compute, late arrival) and the wait they cause, slow links, input
// stalls per host, exposed communication and hangs, with a verdict in plain words and
// text/JSON reports. Everything here is deterministic: ranks in ascending order,
// std::map / sorted vectors only, fixed number formatting.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "stepcast/analysis/breakdown.h"
#include "stepcast/analysis/resume.h"
#include "stepcast/analysis/trace.h"
#include "stepcast/models/band.h"
#include "stepcast/models/program.h"

namespace stepcast::analysis {

// Steps `diagnose`, `compare` and `check` (for scenarios with faults) simulate.
inline constexpr int kDiagnoseSteps = 10;

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
  // Slow links: a group's transfer >= this many times the median of the same collective in
  // the other groups of its kind (at least 3 groups), robust z >= z_threshold, MAD pooled
  // over all steps of the kind; the group is named when slow in >= min_outlier_steps steps.
  double min_link_slowdown = 1.25;
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

// A group whose collectives move data for longer than the same collectives in the other
// groups of its kind: a slow link of one of its members bounds every transfer.
struct SlowGroup {
  GroupKind group = GroupKind::kTp;
  std::vector<int> members;  // ascending; members.front() is the group's root
  int steps = 0;             // steps in which at least one of its transfers is slow
  double slowdown = 0;       // mean over its slow transfers of duration / the kind's median
};

// A slow link: the ranks common to every slow group (one rank when groups of two kinds
// are slow: the link's rank), and those groups. Every member of a slow group waits for the
// transfer alike, so it costs exposed communication, not a slow or late rank: the late
// arrivals it causes (in the steps it slows, of ranks in lockstep with a member of a slow
// group) are not held against those ranks.
struct SlowLink {
  std::vector<int> ranks;         // ascending
  std::vector<int> nodes;         // the nodes of `ranks`, ascending, each once
  std::vector<SlowGroup> groups;  // in group-kind order (tp, cp, ep, dp, edp), then root
};

// Mean over ranks per step, seconds, by kind: tp, cp, ep, pp, dp.
struct ExposedComm {
  std::array<double, 5> by_kind{};
  double total = 0;
  double fraction = 0;  // of the step
};
inline constexpr std::array<const char*, 5> kCommKindNames = {"tp", "cp", "ep", "pp", "dp"};

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
  // Scenarios (a prediction) only: its p10-p90 band (simulate_report.h simulated_step_band)
  // around step_time_s; a trace, measured or not, has none.
  std::optional<Band> step_time_band;
  std::vector<RankBreakdown> ranks;  // per-rank breakdown, ascending rank
  RankBreakdown mean;                // mean over the analysed ranks (rank = stage = -1)
  std::vector<OutlierRank> outliers;  // ascending rank
  std::vector<InputStall> stalls;     // ascending node
  std::vector<SlowLink> links;        // by their first rank
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
  std::string link_list() const;      // the ranks of every slow link, same form
};

// Detectors on a complete trace, or the hang report of an incomplete one. `input` and
// `mode` are "trace", `source` is left empty, the verdict is filled; a caller that adds to the
// diagnosis (a scenario's name, mode, seed, resume audit, an engine's hang report) calls
// rebuild_verdict afterwards.
Diagnosis diagnose_trace(const Trace& trace, const DiagnoseOptions& options = {});
// Rebuilds d.verdict from its fields and d.options (problems first, then notes).
void rebuild_verdict(Diagnosis& d);

std::string diagnosis_text(const Diagnosis& d);
// JSON; the check fields outlier_ranks, stalling_hosts, slow_link_ranks, hang, mismatch,
// resume_missing are top-level (outlier_ranks, stalling_hosts and slow_link_ranks absent on
// a hang: nothing was analysed).
std::string diagnosis_json(const Diagnosis& d);
// The same report as a JSON value (what diagnosis_json prints).
nlohmann::ordered_json diagnosis_value(const Diagnosis& d);

}  // namespace stepcast::analysis

// The breakdown of a step: per rank, at every instant exactly one part applies (compute,
// optimizer, input, exposed communication by kind, waiting for peers, bubble), so the
// parts sum to the step time. Works on simulated and measured timelines alike; the trace
// reader (trace.h) applies the same rules to a trace file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "stepcast/models/program.h"
#include "stepcast/models/timeline.h"

namespace stepcast::analysis {

// Seconds per step (averaged over the analysed steps). At every instant of a rank's
// step exactly one part applies, in this priority: an op on the compute stream
// (optimizer, input, else compute); communication moving data (by kind: tp, cp, ep, pp,
// dp); a collective waiting for late group members (wait); nothing (bubble: idle, e.g.
// waiting for a pipeline neighbour's activations). So the parts sum to the step time.
struct RankBreakdown {
  int rank = 0;
  int stage = 0;
  double compute = 0, optimizer = 0, input = 0, bubble = 0, wait = 0;
  double host = 0;   // GPU idle while the host dispatches kernels (launch-bound layers)
  double tp = 0, cp = 0, ep = 0, pp = 0, dp = 0;
  double peak_bytes = 0;
  double exposed_comm() const { return tp + cp + ep + pp + dp; }
  double total() const { return compute + optimizer + input + host + bubble + wait + exposed_comm(); }
};

// One interval of a rank's activity, for the breakdown sweep.
enum class Part { kCompute, kOptimizer, kInput, kHost, kTp, kCp, kEp, kPp, kDp, kWait, kOffload };
struct PartInterval {
  std::int64_t begin_ns = 0, end_ns = 0;
  Part part = Part::kCompute;
};
// The breakdown of [0, end_ns) by the priority rules above (earlier Part wins; uncovered
// time is bubble), divided by `steps`. Shared by analyze() and trace_breakdown().
// REQUIRES: steps >= 1.
RankBreakdown sweep_breakdown(int rank, int stage, const std::vector<PartInterval>& intervals, std::int64_t end_ns,
                              int steps);
// The Part of a compute-stream op of class `c`.
Part compute_part(ComputeClass c);
// Whether the time a rank waits in a collective of group `g` for its peers counts as wait,
// in a plan of `pp` pipeline stages. Not at the world group's (the gradient norm's
// all-reduce, lower.cc finish_step) with pp > 1: the stages that end their last backward
// early wait there for the others' drain, the pipeline's flush, which stays bubble
// (uncovered) as it was before that synchronisation.
bool counts_as_wait(GroupKind g, int pp);
// The Part of a communication op on `stream` while it moves data.
Part transfer_part(Stream stream);

// The mean over `ranks` of each part (rank = stage = -1, peak_bytes 0); all zero when
// `ranks` is empty. Its parts sum to the mean step time when each rank's do.
RankBreakdown mean_breakdown(const std::vector<RankBreakdown>& ranks);

struct SimSummary {
  std::vector<double> step_times_s;  // each step's duration (global, max over ranks)
  double step_time_s = 0;            // mean over steps
  std::vector<RankBreakdown> ranks;  // ascending rank
  std::size_t critical = 0;          // index of the rank with the least bubble + wait
  std::size_t peak = 0;              // index of the rank with the highest memory peak
};

// The summary of `timeline`, a run of `program` (every rank's stage indexes
// program.roles). Empty `ranks` when the timeline has no step.
SimSummary analyze(const Program& program, const Timeline& timeline);

}  // namespace stepcast::analysis

// Timeline analysis: per-rank breakdown of the step into compute, exposed communication
// by kind, pipeline bubble, waiting for peers, optimizer and input; the critical rank;
// memory peaks. Works on simulated and measured timelines alike.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "stepcast/models/program.h"
#include "stepcast/models/scenario.h"
#include "stepcast/models/timeline.h"

namespace stepcast::sim {

// Seconds per step (averaged over the simulated steps). At every instant of a rank's
// step exactly one part applies, in this priority: an op on the compute stream
// (optimizer, input, else compute); communication moving data (by kind: tp, cp, ep, pp,
// dp); a collective waiting for late group members (wait); nothing (bubble: idle, e.g.
// waiting for a pipeline neighbour's activations). So the parts sum to the step time.
struct RankBreakdown {
  int rank = 0;
  int stage = 0;
  double compute = 0, optimizer = 0, input = 0, bubble = 0, wait = 0;
  double tp = 0, cp = 0, ep = 0, pp = 0, dp = 0;
  double peak_bytes = 0;
  double exposed_comm() const { return tp + cp + ep + pp + dp; }
  double total() const { return compute + optimizer + input + bubble + wait + exposed_comm(); }
};

// One interval of a rank's activity, for the breakdown sweep.
enum class Part { kCompute, kOptimizer, kInput, kTp, kCp, kEp, kPp, kDp, kWait };
struct PartInterval {
  std::int64_t begin_ns = 0, end_ns = 0;
  Part part = Part::kCompute;
};
// The breakdown of [0, end_ns) by the priority rules above (earlier Part wins; uncovered
// time is bubble), divided by `steps`. Shared by analyze() and the trace reader.
RankBreakdown sweep_breakdown(int rank, int stage, const std::vector<PartInterval>& intervals, std::int64_t end_ns,
                              int steps);
// The Part of a communication op on `stream` while it moves data.
Part transfer_part(Stream stream);

struct SimSummary {
  std::vector<double> step_times_s;  // each step's duration (global, max over ranks)
  double step_time_s = 0;            // mean over steps
  std::vector<RankBreakdown> ranks;  // ascending rank
  std::size_t critical = 0;          // index of the rank with the least bubble + wait
  std::size_t peak = 0;              // index of the rank with the highest memory peak
};

SimSummary analyze(const Program& program, const Timeline& timeline);

// The JSON report of reference/interfaces.md for a simulation (`ranks` in full mode).
std::string simulate_report_json(const Scenario& scenario, const Program& program,
                                 const SimSummary& summary, bool full, int steps);
// The readable report.
std::string simulate_report_text(const Scenario& scenario, const Program& program,
                                 const SimSummary& summary, bool full, int steps);

}  // namespace stepcast::sim

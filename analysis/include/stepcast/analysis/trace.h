// The neutral trace: what every rank executed, read back from a trace file in stepcast's
// own format (Chrome trace-event JSON, written by chrome_trace_json in models/timeline.h;
// the executor writes the same format) or taken straight from a Timeline. A simulated run
// and a trace file reach the detectors (diagnose.h) through this one structure
// (trace_from_timeline == read_trace(chrome_trace_json(...)), tested), so they never see
// where their input came from.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "stepcast/analysis/breakdown.h"
#include "stepcast/models/program.h"
#include "stepcast/models/result.h"
#include "stepcast/models/timeline.h"

namespace stepcast::analysis {

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

// Parses a trace written by chrome_trace_json. The text goes through the checks of the
// public JSON reader (stepcast/models/json_reader.h: no NUL byte, bounded nesting, comments
// allowed, no repeated key) and is then streamed: one event object is in memory at a
// time, so a trace of millions of events never sits in memory twice. Each event's fields
// are read with reader::ObjectReader; the first bad event stops the read, and the error
// names its JSON path and the reason, e.g.
//   `traceEvents[12].args.step: expected an integer, got "x"`,
//   `traceEvents[3]: invalid JSON: ...` (a truncated file: where it broke), or
//   `not a stepcast trace: no {"ph":"M","name":"stepcast"} metadata event (...)`.
// "wait: ..." slices (redundant with wait_us), counters, other metadata and keys it does
// not use are skipped.
Result<Trace> read_trace(std::string_view text);

// The same structure straight from a run of `program` (no text round trip).
Trace trace_from_timeline(const Program& program, const Timeline& timeline);

// Per-rank breakdown of a trace, with the rules of analyze() (breakdown.h): equal to it
// for a simulated timeline. peak_bytes is 0 (traces carry no memory model). Empty when the
// trace has no step. REQUIRES trace.complete() for meaningful parts.
std::vector<RankBreakdown> trace_breakdown(const Trace& trace);

}  // namespace stepcast::analysis

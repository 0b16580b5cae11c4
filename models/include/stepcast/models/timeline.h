// Timeline: what every simulated (or measured) rank did, as spans of Program ops. The
// simulator and the executor produce the same type; the trace writer turns it into
// Chrome trace-event JSON (one process per rank, one thread per stream).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stepcast/models/program.h"
#include "stepcast/models/sim_time.h"

namespace stepcast {

// One execution of one op. For communication, `post` is when the rank reached the op,
// `begin` when data started to move (the last group member arrived / the matching send
// was posted) and `end` when it finished; post <= begin <= end. For compute ops
// post == begin.
struct Span {
  SimTime post, begin, end;
  std::uint32_t op = 0;      // index into the rank's RoleTemplate::ops
  std::uint16_t step = 0;
  Stream stream = Stream::kCompute;
};

struct MemorySample {
  SimTime time;
  double bytes = 0;
};

struct RankTimeline {
  int rank = 0;
  int stage = 0;
  std::vector<Span> spans;             // in completion order
  std::vector<SimTime> step_end;       // when this rank finished each step
  std::vector<MemorySample> memory;    // after each change, when recorded
  double peak_bytes = 0;
};

struct Timeline {
  std::vector<RankTimeline> ranks;     // ascending rank
  std::vector<SimTime> step_end;       // max over ranks of each step's end
};

// Chrome trace-event JSON of `timeline` (ts/dur in microseconds with nanosecond
// decimals, fixed formatting: byte-identical for equal input).
std::string chrome_trace_json(const Program& program, const Timeline& timeline);

}  // namespace stepcast

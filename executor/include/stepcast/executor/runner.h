// The runner: executes one rank's ops of a Program on a Device and a Communicator, in
// program order (a topological order: lower() only adds dependencies on earlier ops),
// each op on its stream after waiting for its dependencies on other streams; warm-up
// steps, then measured steps. Every collective and receive moves real, seeded data and
// is verified element by element after its step.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "stepcast/executor/backend.h"
#include "stepcast/executor/op_work.h"
#include "stepcast/models/program.h"
#include "stepcast/models/timeline.h"

namespace stepcast::exec {

struct RunOptions {
  int warmup = 1;
  int steps = 3;
  bool verify = true;
  // Called after each step (warm-up included) with (steps done, warmup + steps), on the
  // calling thread; empty: no calls. For progress display only.
  std::function<void(int, int)> on_step;
};

struct RankResult {
  RankTimeline timeline;          // measured steps only, times from the first measured step's start
  std::vector<double> step_s;     // this rank's duration of each measured step
  std::int64_t verified_elements = 0;
  std::int64_t wrong_elements = 0;
  std::vector<std::string> errors;   // the first few verification failures, in words
  double peak_memory_bytes = 0;      // measured by the device (0: not measured)
  double predicted_peak_bytes = 0;   // static bytes + the largest live sum of alloc ops
};

// Value of element `i` of the buffer rank `rank` contributes to its `seq`-th collective
// (or sends with tag `seq`): a small integer (0..3), so sums over up to 64 ranks are exact
// in bf16 as in f32.
float pattern_value(int rank, std::uint64_t seq, std::size_t i);

// Runs `program` for `comm.rank()`. All ranks of the world must call it together.
RankResult run_rank(const Program& program, const ExecContext& ctx, Device& device, Communicator& comm,
                    const RunOptions& options);

// Merges the ranks' timelines (ascending rank) into one Timeline and sets each
// collective's `begin` to the last member's post (when data could start to move),
// clipped to its end: the measured counterpart of the engine's spans.
Timeline merge_timelines(const Program& program, std::vector<RankTimeline> ranks);

}  // namespace stepcast::exec

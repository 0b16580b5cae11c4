// Per-rank perturbations of a training run (scenario `faults.stragglers`, `faults.crash`,
// `faults.mismatch`; docs/incidents.md). Plain values validated by the loader; the
// simulator applies them (sim/perturb.h) in full mode.
#pragma once

#include <climits>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace stepcast {

enum class StragglerKind { kSlowdown, kJitter, kInputStall, kDataSkew, kSlowLink };

struct StragglerSpec {
  StragglerKind kind = StragglerKind::kSlowdown;
  std::vector<int> ranks;       // targets (slowdown, data_skew); empty with no nodes = all ranks
  std::vector<int> nodes;       // targets by node (slowdown, input_stall, slow_link, data_skew)
  double factor = 1.0;          // slowdown: compute time x factor (> 0, 1.18 = 18 % slower);
                                // slow_link: bandwidth x factor (0 < factor <= 1)
  double cv = 0;                // jitter: coefficient of variation of a multiplicative normal
                                // factor per op or per step; data_skew: of each rank's tokens per step
  bool per_op = true;           // jitter granularity
  int every_steps = 1;          // input_stall: on steps where (step - from_step) % every_steps == 0
  double duration_s = 0;        // input_stall: extra input time on those steps
  int from_step = 0;            // first step affected
  int to_step = INT_MAX;        // last step affected (inclusive)
};

// A rank that stops (crashes): before starting op `at_op` of its role in `step`, or at the
// first op it would start at or after `at_time_s`.
struct CrashSpec {
  int rank = 0;
  int step = 0;
  std::optional<std::uint32_t> at_op;
  std::optional<double> at_time_s;
};

// A rank that passes a different size to one collective (op `at_op` of its role, in
// `step`): bytes x `bytes_factor`. The group never completes it (a hang), and the engine
// reports the mismatch.
struct MismatchSpec {
  int rank = 0;
  int step = 0;
  std::uint32_t at_op = 0;
  double bytes_factor = 2.0;
};

struct PerturbationSpec {
  std::vector<StragglerSpec> stragglers;
  std::optional<CrashSpec> crash;
  std::optional<MismatchSpec> mismatch;
  bool any() const { return !stragglers.empty() || crash || mismatch; }
};

const char* to_string(StragglerKind kind);  // "slowdown", "jitter", "input_stall", "data_skew", "slow_link"

}  // namespace stepcast

// The deterministic discrete-event engine. Simulated time is integer nanoseconds; events
// are ordered by (time, sequence number). Each rank runs its stage's RoleTemplate; ops on
// one stream run in program order; an op starts when its stream predecessor and its
// dependencies are done. A collective starts when the last member of its group arrives
// (one late rank delays its whole group) and lasts what the backend says. A send is
// posted without blocking its stream; its recv completes when the transfer, which starts
// once both are posted, ends. A Program that cannot finish is reported, not looped on.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "stepcast/models/program.h"
#include "stepcast/models/result.h"
#include "stepcast/models/timeline.h"
#include "stepcast/sim/backend.h"

namespace stepcast::sim {

// Per-rank perturbations of a run (stragglers, jitter, stalls, slow links, crashes,
// mismatched collectives), injected by the caller (sim/perturb.h builds them from a
// scenario's `faults`). All must be deterministic functions of their arguments.
class Perturbations {
 public:
  virtual ~Perturbations() = default;
  // Duration of compute op `op_index` of `rank` in `step`, from its cost-model duration.
  virtual SimTime compute(int rank, int step, std::uint32_t op_index, const Op& op, SimTime base) const = 0;
  // Duration of a transfer among `ranks` (a group in order, or {src, dst}) from its nominal.
  virtual SimTime comm(std::span<const int> ranks, const Op& op, SimTime base) const = 0;
  // True when `rank` stops before starting op `op_index` of `step` at time `now` (a crash:
  // it never starts another op).
  virtual bool stops(int rank, int step, std::uint32_t op_index, SimTime now) const = 0;
  // The bytes `rank` passes to collective `op` (a mismatch injects a different size).
  virtual double collective_bytes(int rank, int step, std::uint32_t op_index, const Op& op) const {
    (void)rank, (void)step, (void)op_index;
    return op.bytes;
  }
};

struct EngineOptions {
  // false: representative mode, one rank per pipeline stage (coordinates t = c = d = 0);
  // valid when no rank is perturbed. true: every rank.
  bool full = false;
  int steps = 1;
  bool record_memory = true;  // memory samples (for traces)
  const Perturbations* perturb = nullptr;  // REQUIRES full mode when it perturbs ranks differently
};

struct SimOutput {
  Timeline timeline;
  bool deadlock = false;
  // When the program cannot finish (a hang): one line per group of ranks in the same state
  // (ranks written as ranges), giving each rank's last collective entered (kind, group,
  // sequence number) and, for pending collectives, the ranks that never arrived.
  std::string deadlock_report;
  // Collectives whose members passed different operations or sizes at the same sequence
  // number (they never complete: part of the hang).
  std::vector<std::string> mismatches;
  std::uint64_t events = 0;     // ops executed
};

// REQUIRES: a Program from lower() (or a hand-built one with consistent groups and tags).
SimOutput simulate(const Program& program, NetworkBackend& backend, const EngineOptions& options);

}  // namespace stepcast::sim

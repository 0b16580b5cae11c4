// The deterministic discrete-event engine. Simulated time is integer nanoseconds; events
// are ordered by (time, sequence number). Each rank runs its stage's RoleTemplate; ops on
// one stream run in program order; an op starts when its stream predecessor and its
// dependencies are done. A collective starts when the last member of its group arrives
// (one late rank delays its whole group) and lasts what the backend says. A send is
// posted without blocking its stream; its recv completes when the transfer, which starts
// once both are posted, ends. A Program that cannot finish is reported, not looped on.
#pragma once

#include <string>
#include <vector>

#include "stepcast/models/program.h"
#include "stepcast/models/result.h"
#include "stepcast/models/timeline.h"
#include "stepcast/sim/backend.h"

namespace stepcast::sim {

struct EngineOptions {
  // false: representative mode, one rank per pipeline stage (coordinates t = c = d = 0);
  // valid when no rank is perturbed. true: every rank.
  bool full = false;
  int steps = 1;
  bool record_memory = true;  // memory samples (for traces)
};

struct SimOutput {
  Timeline timeline;
  bool deadlock = false;
  std::string deadlock_report;  // per blocked rank: what it waits for
  std::uint64_t events = 0;     // ops executed
};

// REQUIRES: a Program from lower() (or a hand-built one with consistent groups and tags).
SimOutput simulate(const Program& program, NetworkBackend& backend, const EngineOptions& options);

}  // namespace stepcast::sim

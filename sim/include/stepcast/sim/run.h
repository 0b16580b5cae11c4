// One call from a loaded scenario to an analysed simulation: lowering, the network
// backend the scenario (or the caller) asks for, the engine, the analysis.
#pragma once

#include <string>

#include "stepcast/models/program.h"
#include "stepcast/models/result.h"
#include "stepcast/models/scenario.h"
#include "stepcast/sim/analysis.h"
#include "stepcast/sim/engine.h"

namespace stepcast::sim {

struct RunOptions {
  bool full = false;          // every rank (forced for simgrid on more than one node)
  int steps = 1;
  bool record_memory = false;
  std::string network;        // "" = the scenario's; "analytic" | "simgrid"
};

struct RunResult {
  Program program;
  SimOutput out;
  SimSummary summary;         // empty when out.deadlock
  bool full = false;          // the mode actually used
  std::string network;        // the backend actually used
  std::string note;           // why the mode was changed, if it was
};

// Errors (exit 2 in the CLI): an unknown network, "simgrid" in a build without SimGrid,
// a world above kSimgridMaxRanks for simgrid, or a SimGrid plugin that cannot be loaded
// (simgrid_backend.h: make_simgrid_backend).
Result<RunResult> run_scenario(const Scenario& scenario, const RunOptions& options);

}  // namespace stepcast::sim

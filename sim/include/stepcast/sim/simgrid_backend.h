// The flow-level network backend: the Program's communication as flows on a SimGrid
// platform built from the ClusterSpec, so that concurrent collectives contend for links.
// No SimGrid header leaks from here (the library builds without SimGrid; then
// make_simgrid_backend() returns nullptr). See docs/network.md.
#pragma once

#include <memory>

#include "stepcast/models/program.h"
#include "stepcast/models/specs.h"
#include "stepcast/sim/backend.h"

namespace stepcast::sim {

struct SimgridOptions {
  // false: collectives and p2p entirely inside one node are priced by the alpha-beta model
  // (the NVSwitch is non-blocking; only a GPU's own concurrent streams could contend),
  // which keeps large simulations fast. true: they are flows on the NVLink links too.
  bool intra_node_flows = false;
};

// Whether this build includes the SimGrid backend.
bool simgrid_available();

// The backend for `program` on `cluster` (one SimGrid host per rank; routes for every pair
// of ranks the program's collectives and p2p use). nullptr when SimGrid is not built in.
// REQUIRES: program.placement.world() <= kSimgridMaxRanks.
std::unique_ptr<NetworkBackend> make_simgrid_backend(const ClusterSpec& cluster, const Program& program,
                                                     const SimgridOptions& options = {});
inline constexpr int kSimgridMaxRanks = 4096;

}  // namespace stepcast::sim

// The flow-level network backend: the Program's communication as flows on a SimGrid
// platform built from the ClusterSpec, so that concurrent collectives contend for links.
// No SimGrid header leaks from here, and stepcast_sim does not link SimGrid: the backend
// lives in a plugin, libstepcast-simgrid.so, loaded with dlopen() the first time a
// simulation asks for it, so commands that never use it do not pay SimGrid's (and ns-3's)
// start-up. See docs/network.md ("Where the plugin is found").
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "stepcast/models/plugin.h"
#include "stepcast/models/program.h"
#include "stepcast/models/result.h"
#include "stepcast/models/specs.h"
#include "stepcast/sim/backend.h"

namespace stepcast::sim {

struct SimgridOptions {
  // false: collectives and p2p entirely inside one node are priced by the alpha-beta model
  // (the NVSwitch is non-blocking; only a GPU's own concurrent streams could contend),
  // which keeps large simulations fast. true: they are flows on the NVLink links too.
  bool intra_node_flows = false;
};

// Whether this build includes the SimGrid backend (configured with STEPCAST_WITH_SIMGRID=ON,
// so the plugin was built). Says nothing about whether the plugin can be loaded.
bool simgrid_available();

// The plugin's file name. It is searched for like every stepcast plugin
// (stepcast/models/plugin.h: $STEPCAST_PLUGIN_DIR alone when set; otherwise the running
// executable's directory, its ../lib/stepcast, and the install directory).
inline constexpr const char* kSimgridPluginName = "libstepcast-simgrid.so";
using stepcast::plugin_search_dirs;

// The backend for `program` on `cluster` (one SimGrid host per rank; routes for every pair
// of ranks the program's collectives and p2p use). Loads the plugin on first use (once per
// process; it stays loaded). Errors: SimGrid not built in; the plugin not found or not
// loadable (network "simgrid": cannot load libstepcast-simgrid.so (tried <paths>):
// <dlerror>); a plugin from another build (ABI mismatch).
// REQUIRES: program.placement.world() <= kSimgridMaxRanks.
Result<std::unique_ptr<NetworkBackend>> make_simgrid_backend(const ClusterSpec& cluster, const Program& program,
                                                             const SimgridOptions& options = {});
inline constexpr int kSimgridMaxRanks = 4096;

}  // namespace stepcast::sim

// The interface between stepcast_sim (simgrid_loader.cc) and the plugin
// libstepcast-simgrid.so (simgrid_backend.cc). The plugin exports exactly one symbol,
// kSimgridPluginFactory, with C linkage; everything else in it has hidden visibility (and
// the static libraries it links are excluded from its dynamic symbol table), so its copies
// of stepcast_sim and stepcast_models never interpose on the host's.
//
// The C++ types passed across (ClusterSpec, Program, SimgridOptions, NetworkBackend) must
// have the same layout on both sides: the caller passes kSimgridPluginAbi and the sizes it
// was compiled with, and the plugin refuses (returns nullptr) on any difference. Bump
// kSimgridPluginAbi when NetworkBackend or FlowNetwork change.
#pragma once

#include <cstddef>

#include "stepcast/models/program.h"
#include "stepcast/models/specs.h"
#include "stepcast/sim/backend.h"
#include "stepcast/sim/simgrid_backend.h"

namespace stepcast::sim {

inline constexpr int kSimgridPluginAbi = 1;
inline constexpr const char* kSimgridPluginFactory = "stepcast_simgrid_create_backend";

struct SimgridPluginArgs {
  int abi = kSimgridPluginAbi;
  std::size_t sizeof_cluster = sizeof(ClusterSpec);
  std::size_t sizeof_program = sizeof(Program);
  std::size_t sizeof_options = sizeof(SimgridOptions);
  const ClusterSpec* cluster = nullptr;
  const Program* program = nullptr;
  const SimgridOptions* options = nullptr;
};

// The factory's type. Returns a backend the caller owns (delete through NetworkBackend's
// virtual destructor), or nullptr when `args` does not match the plugin's ABI or
// construction failed. Never throws.
using SimgridPluginFactoryFn = NetworkBackend* (*)(const SimgridPluginArgs* args);

}  // namespace stepcast::sim

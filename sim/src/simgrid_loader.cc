// Built when STEPCAST_WITH_SIMGRID is on: finds libstepcast-simgrid.so, loads it with
// dlopen() on first use and creates backends through its one factory (simgrid_plugin.h).
// stepcast_sim itself does not link SimGrid, so a process that never asks for the flow
// backend never maps libsimgrid (nor ns-3 behind it).
#include <memory>
#include <string>

#include <fmt/format.h>

#include "simgrid_plugin.h"
#include "stepcast/models/plugin.h"
#include "stepcast/sim/simgrid_backend.h"

namespace stepcast::sim {

namespace {

struct Plugin {
  SimgridPluginFactoryFn create = nullptr;
  std::string error;  // set when create is null
};

const Plugin& plugin() {
  // Local scope: libsimgrid's symbols (among them SMPI's MPI_*) stay out of the global
  // scope, so they cannot interpose on a real MPI the host or another plugin uses.
  static const Plugin p = [] {
    const PluginLoad l = load_plugin(kSimgridPluginName, kSimgridPluginFactory, PluginScope::kLocal);
    if (l.error) return Plugin{nullptr, "network \"simgrid\": " + l.error->message};
    return Plugin{reinterpret_cast<SimgridPluginFactoryFn>(l.plugin.factory), ""};
  }();  // thread-safe, once per process
  return p;
}

}  // namespace

bool simgrid_available() { return true; }

Result<std::unique_ptr<NetworkBackend>> make_simgrid_backend(const ClusterSpec& cluster, const Program& program,
                                                             const SimgridOptions& options) {
  const Plugin& p = plugin();
  if (p.create == nullptr) return Error{p.error};
  SimgridPluginArgs args;
  args.cluster = &cluster;
  args.program = &program;
  args.options = &options;
  std::unique_ptr<NetworkBackend> backend(p.create(&args));
  if (backend == nullptr) {
    return Error{
        fmt::format("network \"simgrid\": the plugin {} refused to create a backend (a plugin from "
                    "another stepcast build? ABI {} expected)",
                    kSimgridPluginName, kSimgridPluginAbi)};
  }
  return backend;
}

}  // namespace stepcast::sim

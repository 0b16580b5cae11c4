// Finding and loading stepcast's plugins: the backends that would make every command slow
// to start if the binary linked them (libstepcast-simgrid.so for sim's flow network,
// libstepcast-mpi.so and libstepcast-cuda.so for the executor). One search order and one
// loader for all of them (docs/architecture.md).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "stepcast/models/result.h"

namespace stepcast {

// Directories searched for plugins, in order: $STEPCAST_PLUGIN_DIR alone when it is set and
// not empty; else the running executable's directory (/proc/self/exe), its
// ../lib/stepcast, and the install directory (<prefix>/lib/stepcast), duplicates removed.
std::vector<std::string> plugin_search_dirs();

struct LoadedPlugin {
  void* factory = nullptr;  // the factory symbol's address
  std::string path;         // the file it came from
};
struct PluginLoadError {
  bool found = false;       // a file existed but did not load (as opposed to: none found)
  std::string message;      // "cannot load FILE (tried A, B): <dlerror()>"
};

// Whether the plugin's symbols (and its libraries') join the process's global scope.
// kGlobal for Open MPI, which opens its own components that look up libmpi's symbols
// there; kLocal for SimGrid, whose SMPI exports MPI_* that must not interpose on a real MPI.
enum class PluginScope { kLocal, kGlobal };

// dlopen(RTLD_NOW | RTLD_NODELETE and the scope) of `file_name` from the first directory
// that has it, and dlsym(`symbol`). Loaded once per (file, process); never unloaded. On failure the message names every path tried and dlerror()'s text (from the
// first file that exists but failed to load, else the last attempt).
// When `own_symbol` (e.g. "MPI_Init") is already defined in the process (SimGrid's SMPI
// exports MPI_* while SimGrid is linked into the binary), RTLD_DEEPBIND is added so the
// plugin and its dependencies bind to their own definitions. Thread-safe.
struct PluginLoad {
  LoadedPlugin plugin;
  std::optional<PluginLoadError> error;
};
PluginLoad load_plugin(const std::string& file_name, const std::string& symbol, PluginScope scope,
                       const std::string& own_symbol = "");

}  // namespace stepcast

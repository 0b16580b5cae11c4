// Finding and loading the executor's plugins (libstepcast-mpi.so, libstepcast-cuda.so).
// The same search order as sim's SimGrid plugin (sim/src/simgrid_loader.cc); the lead folds
// the two loaders into one later (models must stay free of dlopen).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "stepcast/models/result.h"

namespace stepcast::exec {

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

// dlopen(RTLD_NOW | RTLD_GLOBAL | RTLD_NODELETE) of `file_name` from the first directory
// that has it, and dlsym(`symbol`). RTLD_GLOBAL: Open MPI opens its own components, which
// look up libmpi's symbols in the global scope. Loaded once per (file, process); never
// unloaded. On failure the message names every path tried and dlerror()'s text (from the
// first file that exists but failed to load, else the last attempt).
// When `own_symbol` (e.g. "MPI_Init") is already defined in the process (SimGrid's SMPI
// exports MPI_* while SimGrid is linked into the binary), RTLD_DEEPBIND is added so the
// plugin and its dependencies bind to their own definitions. Thread-safe.
struct PluginLoad {
  LoadedPlugin plugin;
  std::optional<PluginLoadError> error;
};
PluginLoad load_plugin(const std::string& file_name, const std::string& symbol, const std::string& own_symbol = "");

}  // namespace stepcast::exec

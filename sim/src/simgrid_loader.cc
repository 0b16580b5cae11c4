// Built when STEPCAST_WITH_SIMGRID is on: finds libstepcast-simgrid.so, loads it with
// dlopen() on first use and creates backends through its one factory (simgrid_plugin.h).
// stepcast_sim itself does not link SimGrid, so a process that never asks for the flow
// backend never maps libsimgrid (nor ns-3 behind it).
#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include <fmt/format.h>

#include "simgrid_plugin.h"
#include "stepcast/sim/simgrid_backend.h"

#ifndef STEPCAST_PLUGIN_INSTALL_DIR
#error "STEPCAST_PLUGIN_INSTALL_DIR must name the installed plugin directory (sim/CMakeLists.txt)"
#endif

namespace stepcast::sim {

namespace {

namespace fs = std::filesystem;

struct Plugin {
  SimgridPluginFactoryFn create = nullptr;
  std::string error;  // set when create is null
};

// The directory of the running executable, or "" when /proc is not readable.
std::string executable_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec || exe.empty()) return {};
  return exe.parent_path().string();
}

Plugin load_plugin() {
  Plugin p;
  std::vector<std::string> tried;
  std::string first_error;  // from a file that exists but does not load: the useful one
  std::string last_error;
  for (const std::string& dir : plugin_search_dirs()) {
    const std::string path = (fs::path(dir) / kSimgridPluginName).string();
    tried.push_back(path);
    // RTLD_LOCAL: libsimgrid's symbols (among them SMPI's MPI_*) stay out of the global
    // scope, so they cannot interpose on a real MPI the host or another plugin uses.
    // RTLD_NODELETE: SimGrid keeps process-wide state; the plugin is never unloaded.
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (handle == nullptr) {
      const char* e = dlerror();
      last_error = e != nullptr ? e : "unknown dlopen error";
      std::error_code ec;
      if (first_error.empty() && fs::exists(path, ec)) first_error = last_error;
      continue;
    }
    void* sym = dlsym(handle, kSimgridPluginFactory);
    if (sym == nullptr) {
      const char* e = dlerror();
      p.error = fmt::format("network \"simgrid\": {} does not export {}: {}", path, kSimgridPluginFactory,
                            e != nullptr ? e : "symbol not found");
      return p;
    }
    p.create = reinterpret_cast<SimgridPluginFactoryFn>(sym);
    return p;
  }
  std::string list;
  for (const std::string& t : tried) list += (list.empty() ? "" : ", ") + t;
  p.error = fmt::format("network \"simgrid\": cannot load {} (tried {}): {}", kSimgridPluginName,
                        tried.empty() ? "no directory" : list, first_error.empty() ? last_error : first_error);
  return p;
}

const Plugin& plugin() {
  static const Plugin p = load_plugin();  // thread-safe, once per process
  return p;
}

}  // namespace

bool simgrid_available() { return true; }

std::vector<std::string> plugin_search_dirs() {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("STEPCAST_PLUGIN_DIR"); env != nullptr && *env != '\0') {
    dirs.emplace_back(env);
    return dirs;
  }
  auto add = [&dirs](const fs::path& d) {
    const std::string s = d.lexically_normal().string();
    for (const std::string& x : dirs) {
      if (x == s) return;
    }
    dirs.push_back(s);
  };
  if (const std::string exe = executable_dir(); !exe.empty()) {
    add(fs::path(exe));
    add(fs::path(exe) / ".." / "lib" / "stepcast");
  }
  add(fs::path(STEPCAST_PLUGIN_INSTALL_DIR));
  return dirs;
}

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

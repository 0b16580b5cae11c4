#include "stepcast/models/plugin.h"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <system_error>

#include <fmt/format.h>

#ifndef STEPCAST_PLUGIN_INSTALL_DIR
#error "STEPCAST_PLUGIN_INSTALL_DIR must name the installed plugin directory (models/CMakeLists.txt)"
#endif

namespace stepcast {

namespace {

namespace fs = std::filesystem;

std::string executable_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec || exe.empty()) return {};
  return exe.parent_path().string();
}

PluginLoad load_uncached(const std::string& file_name, const std::string& symbol, PluginScope scope,
                         const std::string& own_symbol) {
  PluginLoad out;
  int flags = RTLD_NOW | RTLD_NODELETE | (scope == PluginScope::kGlobal ? RTLD_GLOBAL : RTLD_LOCAL);
  // Another library of the process already defines the plugin's library's symbols (SMPI's
  // MPI_* in libsimgrid, while SimGrid is linked into the binary): the plugin and its
  // dependencies then look up their own definitions first.
  if (!own_symbol.empty() && dlsym(RTLD_DEFAULT, own_symbol.c_str()) != nullptr) flags |= RTLD_DEEPBIND;
  std::vector<std::string> tried;
  std::string first_error, last_error;
  for (const std::string& dir : plugin_search_dirs()) {
    const std::string path = (fs::path(dir) / file_name).string();
    tried.push_back(path);
    void* handle = dlopen(path.c_str(), flags);
    if (handle == nullptr) {
      const char* e = dlerror();
      last_error = e != nullptr ? e : "unknown dlopen error";
      std::error_code ec;
      if (first_error.empty() && fs::exists(path, ec)) first_error = last_error;
      continue;
    }
    dlerror();
    void* sym = dlsym(handle, symbol.c_str());
    if (sym == nullptr) {
      const char* e = dlerror();
      out.error = PluginLoadError{true, fmt::format("{} does not export {}: {}", path, symbol,
                                                    e != nullptr ? e : "symbol not found")};
      return out;
    }
    out.plugin = LoadedPlugin{sym, path};
    return out;
  }
  std::string list;
  for (const std::string& t : tried) list += (list.empty() ? "" : ", ") + t;
  out.error = PluginLoadError{!first_error.empty(),
                              fmt::format("cannot load {} (tried {}): {}", file_name,
                                          tried.empty() ? "no directory" : list,
                                          first_error.empty() ? last_error : first_error)};
  return out;
}

}  // namespace

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

PluginLoad load_plugin(const std::string& file_name, const std::string& symbol, PluginScope scope,
                       const std::string& own_symbol) {
  // Successful loads are cached (the library stays mapped anyway); failures are retried,
  // so a test can point STEPCAST_PLUGIN_DIR elsewhere and try again.
  static std::mutex mu;
  static std::map<std::string, LoadedPlugin> loaded;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = loaded.find(file_name); it != loaded.end()) return PluginLoad{it->second, std::nullopt};
  PluginLoad p = load_uncached(file_name, symbol, scope, own_symbol);
  if (!p.error) loaded[file_name] = p.plugin;
  return p;
}

}  // namespace stepcast

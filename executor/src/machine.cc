#include "stepcast/executor/machine.h"

#include <exception>

#include <fmt/format.h>

#include "plugin_api.h"
#include "stepcast/executor/cpu_device.h"
#include "stepcast/executor/launch.h"
#include "stepcast/models/plugin.h"

namespace stepcast::exec {

namespace {

// How to get a plugin that was not found.
std::string build_hint(const std::string& file) {
  if (file == plugin::kMpiPluginFile) return " (configure with -DSTEPCAST_WITH_MPI=ON, or set STEPCAST_PLUGIN_DIR)";
  return " (configure with -DSTEPCAST_WITH_CUDA=ON, or set STEPCAST_PLUGIN_DIR)";
}

// Loads `file` and calls its factory. `optional`: a plugin that no directory has is not an
// error (nullopt result, no error); one that exists but fails is.
struct Opened {
  bool absent = false;
  plugin::PluginOpen out;
};
Result<Opened> call_plugin(const std::string& backend, const std::string& file, const std::string& symbol,
                           plugin::PluginOpen in, bool optional) {
  const PluginLoad l =
      load_plugin(file, symbol, PluginScope::kGlobal, file == plugin::kMpiPluginFile ? "MPI_Init" : "");
  if (l.error) {
    if (optional && !l.error->found) return Opened{true, {}};
    return Error{fmt::format("--backend {}: {}{}", backend, l.error->message, l.error->found ? "" : build_hint(file))};
  }
  auto factory = reinterpret_cast<plugin::PluginFactory>(l.plugin.factory);
  if (factory(&in) != 0) {
    delete in.comm;
    delete in.device;
    return Error{in.error};
  }
  return Opened{false, std::move(in)};
}

}  // namespace

const std::vector<std::string>& backend_names() {
  static const std::vector<std::string> names = {"cpu_mpi", "cuda_nccl"};
  return names;
}

Result<Machine> open_machine(const std::string& backend) {
  if (backend != "cpu_mpi" && backend != "cuda_nccl") {
    return Error{fmt::format("--backend: \"{}\" is not a backend (cpu_mpi, cuda_nccl)", backend)};
  }
  Machine m;
  m.backend = backend;
  auto host = call_plugin(backend, plugin::kMpiPluginFile, plugin::kMpiFactory, {}, backend == "cuda_nccl");
  if (!host.ok()) return host.error();
  m.host.reset(host->out.comm);
  if (backend == "cpu_mpi") {
    m.device = make_cpu_device();
    return m;
  }
  plugin::PluginOpen in;
  try {
    const LaunchInfo li = detect_launch();
    in.local_rank = li.local_rank;
    in.rank = m.host ? m.host->rank() : li.rank;
    in.world = m.host ? m.host->world() : li.world;
  } catch (const std::exception& e) {
    return Error{e.what()};
  }
  in.host = m.host.get();
  if (!m.host) in.id_file = "stepcast-nccl-id";
  auto cuda = call_plugin(backend, plugin::kCudaPluginFile, plugin::kCudaFactory, std::move(in), false);
  if (!cuda.ok()) return cuda.error();
  m.device.reset(cuda->out.device);
  m.comm.reset(cuda->out.comm);
  return m;
}

}  // namespace stepcast::exec

// libstepcast-mpi.so: the cpu_mpi backend's MPI communicator behind one C entry point
// (plugin_api.h). Only this symbol is exported (mpi_plugin.map).
#include <exception>

#include <fmt/format.h>

#include "mpi_comm.h"
#include "plugin_api.h"

extern "C" __attribute__((visibility("default"))) int stepcast_mpi_plugin_open(stepcast::exec::plugin::PluginOpen* p) {
  using stepcast::exec::plugin::kPluginAbi;
  using stepcast::exec::plugin::PluginOpen;
  if (p->abi != kPluginAbi || p->size != sizeof(PluginOpen)) {
    p->error = fmt::format("libstepcast-mpi.so: plugin ABI {} (size {}) but the caller has ABI {} (size {}): a plugin "
                           "from another stepcast build",
                           kPluginAbi, sizeof(PluginOpen), p->abi, p->size);
    return 1;
  }
  try {
    p->comm = stepcast::exec::make_mpi_communicator().release();
    return 0;
  } catch (const std::exception& e) {
    p->error = e.what();
    return 1;
  }
}

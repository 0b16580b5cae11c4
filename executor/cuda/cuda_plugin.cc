// libstepcast-cuda.so: the cuda_nccl backend (device + NCCL communicator) behind one C
// entry point (plugin_api.h). Only this symbol is exported (cuda_plugin.map).
#include <exception>
#include <memory>

#include <fmt/format.h>

#include "cuda_backend.h"
#include "plugin_api.h"

extern "C" __attribute__((visibility("default"))) int stepcast_cuda_plugin_open(stepcast::exec::plugin::PluginOpen* p) {
  using namespace stepcast::exec;
  if (p->abi != plugin::kPluginAbi || p->size != sizeof(plugin::PluginOpen)) {
    p->error = fmt::format("libstepcast-cuda.so: plugin ABI {} (size {}) but the caller has ABI {} (size {}): a plugin "
                           "from another stepcast build",
                           plugin::kPluginAbi, sizeof(plugin::PluginOpen), p->abi, p->size);
    return 1;
  }
  try {
    CudaOptions o;
    o.local_rank = p->local_rank;
    o.id_file = p->id_file;
    std::unique_ptr<Device> device = make_cuda_device(o);
    std::unique_ptr<Communicator> comm = make_nccl_communicator(*device, p->host, p->rank, p->world, o);
    p->comm = comm.release();
    p->device = device.release();
    return 0;
  } catch (const std::exception& e) {
    p->error = e.what();
    return 1;
  }
}

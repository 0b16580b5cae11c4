// The one entry point of each executor plugin (libstepcast-mpi.so, libstepcast-cuda.so):
// a C function that fills a PluginOpen. Shared by the loader (machine.cc) and the plugins
// (mpi_plugin.cc, cuda/cuda_plugin.cc) only; not a public header.
//
// Contract of a factory `int NAME(PluginOpen* p)`:
//  - REQUIRES: p != nullptr. Returns 0 and sets the outputs on success; returns nonzero
//    with p->error set (never throws, never exits) on failure, outputs left null.
//  - Refuses (nonzero, error naming both numbers) p->abi != kPluginAbi or
//    p->size != sizeof(PluginOpen): a plugin of another stepcast build.
//  - Ownership of the returned objects passes to the caller, which deletes them with
//    `delete` (their virtual destructors live in the plugin; it is never unloaded). A
//    communicator returned with a device must be destroyed before that device.
#pragma once

#include <cstddef>
#include <string>

#include "stepcast/executor/backend.h"

namespace stepcast::exec::plugin {

inline constexpr int kPluginAbi = 1;

inline constexpr const char* kMpiPluginFile = "libstepcast-mpi.so";
inline constexpr const char* kMpiFactory = "stepcast_mpi_plugin_open";     // sets comm (MPI world)
inline constexpr const char* kCudaPluginFile = "libstepcast-cuda.so";
inline constexpr const char* kCudaFactory = "stepcast_cuda_plugin_open";   // sets device and comm (NCCL)

struct PluginOpen {
  // In.
  int abi = kPluginAbi;
  std::size_t size = sizeof(PluginOpen);
  Communicator* host = nullptr;   // cuda: the control plane (MPI) or nullptr (id file)
  int rank = 0, world = 1, local_rank = 0;
  std::string id_file;            // cuda without host: NCCL id exchange file prefix
  // Out.
  Device* device = nullptr;
  Communicator* comm = nullptr;
  std::string error;
};

using PluginFactory = int (*)(PluginOpen*);

}  // namespace stepcast::exec::plugin

// Opening a backend by name: the device, the host (control-plane) communicator and the
// data communicator of this process. MPI and CUDA are runtime-loaded plugins
// (libstepcast-mpi.so, libstepcast-cuda.so; docs/executor.md "Plugins"), so the library
// and the `stepcast` binary link neither: a process that never opens a machine never maps
// Open MPI, CUDA, cuBLAS or NCCL.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "stepcast/executor/backend.h"
#include "stepcast/models/result.h"

namespace stepcast::exec {

// The backends `open_machine` knows, in the order --backend lists them.
const std::vector<std::string>& backend_names();   // {"cpu_mpi", "cuda_nccl"}

struct Machine {
  std::string backend;                     // as opened: "cpu_mpi" | "cuda_nccl"
  std::unique_ptr<Communicator> host;      // MPI world (libstepcast-mpi.so), when loaded
  std::unique_ptr<Device> device;
  std::unique_ptr<Communicator> comm;      // the data plane when it is not `host` (NCCL)
  // The communicator that moves data: `comm` when set, else `host`.
  // REQUIRES: the machine was opened (one of them is set).
  Communicator& data() { return comm ? *comm : *host; }
  // Members are destroyed in reverse order: comm, then device, then host (NCCL before its
  // device, MPI last).
};

// Opens `backend`:
//  - "cpu_mpi": host = MPI (plugin libstepcast-mpi.so, MPI_Init on first use), device = the
//    Eigen cpu device (cpu_device.h), comm unset (MPI is the data plane).
//  - "cuda_nccl": host = MPI when libstepcast-mpi.so is found (a plugin that exists but
//    fails to load is an error), else none and NCCL bootstraps through the id file
//    `stepcast-nccl-id.world` in the working directory; device and comm from
//    libstepcast-cuda.so on the GPU of the launcher's local rank (launch.h).
// Errors (values, never exceptions): an unknown name ("--backend: \"x\" is not a backend
// (cpu_mpi, cuda_nccl)"); a plugin not found or not loadable ("--backend cpu_mpi: cannot
// load libstepcast-mpi.so (tried DIR/libstepcast-mpi.so, ...): <dlerror()>", with how to
// build it); the backend's own failure ("no CUDA device: ...", MPI errors, launcher
// variables).
Result<Machine> open_machine(const std::string& backend);

}  // namespace stepcast::exec

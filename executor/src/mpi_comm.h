// The MPI Communicator of the cpu_mpi backend (built with STEPCAST_WITH_MPI): one
// sub-communicator per group (MPI_Comm_split), non-blocking collectives and point to
// point (MPI_Iallreduce, MPI_Iallgather, MPI_Ireduce_scatter_block, MPI_Ialltoall,
// MPI_Ibcast, MPI_Isend/MPI_Irecv) on f32 host buffers. Waiting polls MPI_Test with short
// sleeps, so ranks oversubscribing the cores leave them to ranks that compute. Also the
// control plane (barrier, gather, max) of the cuda_nccl backend.
#pragma once

#include <memory>
#include <string>

#include "stepcast/executor/backend.h"

namespace stepcast::exec {

// Initializes MPI (MPI_Init_thread, funneled) on first use; finalized at exit.
std::unique_ptr<Communicator> make_mpi_communicator();

// "Open MPI v4.1.4, ..." (MPI_Get_library_version, first line).
std::string mpi_library_version();

}  // namespace stepcast::exec

// Rank, world and local rank of this process, from the launcher's environment: Open MPI
// (OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK), PMI (PMI_RANK/PMI_SIZE, MPICH and srun --mpi),
// Slurm (SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID) or torchrun-style (RANK/WORLD_SIZE/
// LOCAL_RANK), in that order; without any, a single rank.
#pragma once

#include <functional>
#include <string>

namespace stepcast::exec {

struct LaunchInfo {
  int rank = 0, world = 1, local_rank = 0;
  std::string source = "none";   // which variables were used
};

// `getenv` is injectable for tests. Throws std::invalid_argument naming the variable on
// malformed or inconsistent values (e.g. RANK=4 with WORLD_SIZE=4).
LaunchInfo detect_launch(const std::function<const char*(const char*)>& getenv);
LaunchInfo detect_launch();

// This machine's host name (gethostname), "unknown" when it cannot be read: recorded in
// measurements and calibrations.
std::string host_name();

}  // namespace stepcast::exec

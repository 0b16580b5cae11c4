// The cpu Device: f32 GEMMs with Eigen on the calling thread (Eigen without OpenMP: one
// core per rank), compute run at enqueue time. Events are host timestamps; wait() blocks
// the host until the awaited event (e.g. an MPI request) is done. Device memory is not
// measured on the cpu (peak_memory_bytes() = 0): alloc ops are only counted.
#pragma once

#include <memory>

#include "stepcast/executor/backend.h"

namespace stepcast::exec {

std::unique_ptr<Device> make_cpu_device();

// Seconds on the host's monotonic clock (shared by all processes of one machine).
double host_now_s();

// An Event that is already done, at time `t`.
EventPtr done_event(double t);

}  // namespace stepcast::exec

// Built when STEPCAST_WITH_SIMGRID is off.
#include "stepcast/sim/simgrid_backend.h"

namespace stepcast::sim {

bool simgrid_available() { return false; }

std::unique_ptr<NetworkBackend> make_simgrid_backend(const ClusterSpec&, const Program&, const SimgridOptions&) {
  return nullptr;
}

}  // namespace stepcast::sim

// Built when STEPCAST_WITH_SIMGRID is off.
#include "stepcast/sim/simgrid_backend.h"

namespace stepcast::sim {

bool simgrid_available() { return false; }

Result<std::unique_ptr<NetworkBackend>> make_simgrid_backend(const ClusterSpec&, const Program&,
                                                             const SimgridOptions&) {
  return Error{
      "network: \"simgrid\" is not available: this stepcast was built without SimGrid "
      "(configure with -DSTEPCAST_WITH_SIMGRID=ON)"};
}

}  // namespace stepcast::sim

// One rank's result as a compact string, to gather it on rank 0 (Communicator::gather),
// and back. Internal to one run of one build: not a file format.
#pragma once

#include <string>

#include "stepcast/executor/runner.h"

namespace stepcast::exec {

std::string rank_result_wire(const RankResult& r);
// REQUIRES: `s` came from rank_result_wire of the same build (throws nlohmann's
// exceptions otherwise).
RankResult rank_result_from_wire(const std::string& s);

}  // namespace stepcast::exec

// Private: JSON -> per-rank perturbations (faults.stragglers, faults.crash, faults.mismatch).
#pragma once

#include <string>
#include <vector>

#include "json_reader.h"
#include "stepcast/models/specs.h"
#include "stepcast/models/stragglers.h"

namespace stepcast::detail {

// Reads the perturbation keys of the `faults` object behind `faults` (marks them known).
PerturbationSpec read_perturbations(ObjectReader& faults);

// Ranks and nodes outside the cluster, once it is known. One message per problem.
std::vector<std::string> perturbation_errors(const PerturbationSpec& spec, const ClusterSpec& cluster);

}  // namespace stepcast::detail

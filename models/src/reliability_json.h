// Private: JSON -> reliability specs (faults.failures, checkpoint), shared by the preset
// catalog (models/data/failures.json) and the scenario loader.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "json_reader.h"
#include "stepcast/models/reliability.h"

namespace stepcast::detail {

// Reads failure-model fields from `r` on top of `base` (a preset, or the defaults when
// !from_preset). Reports at least one positive rate as required.
FailureSpec read_failures(ObjectReader& r, FailureSpec base, bool from_preset);

// The `faults` section: only `failures` (a preset name, {"preset": ..., overrides} or a
// full object); `stragglers`, `crash` and anything else are reported.
FaultSpec read_faults(const json& v, Diagnostics& diag,
                      const std::map<std::string, FailureSpec>& presets);

// The `checkpoint` section. nullopt (with messages in `diag`) when it is invalid.
std::optional<CheckpointSpec> read_checkpoint(const json& v, Diagnostics& diag);

}  // namespace stepcast::detail

// `presets`: the built-in models, GPUs, clusters and failure models, with their sources.
#pragma once

#include <string>

#include "stepcast/models/presets.h"
#include "stepcast/models/result.h"

namespace stepcast::app {

struct PresetsRequest {};

struct PresetsReport {
  const PresetCatalog* catalog = nullptr;  // the built-in catalog (static storage)
};

Result<PresetsReport> run_presets(const PresetsRequest& request);

// Tables of models (parameters), GPUs, clusters and failure models.
std::string presets_text(const PresetsReport& report);
// One JSON object (format 1) with every preset and its `source`.
std::string presets_json(const PresetsReport& report);

}  // namespace stepcast::app

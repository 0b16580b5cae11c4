// --scale-down F: a production model shrunk to fit a small machine, keeping its structure
// and the plan (docs/executor.md, "--scale-down F").
#pragma once

#include "stepcast/models/result.h"
#include "stepcast/models/scenario.h"
#include "stepcast/models/specs.h"

namespace stepcast::exec {

// Shrinks a model by `factor` keeping its structure: hidden size, heads, KV heads, FFN
// and expert widths and vocabulary divided by `factor` (head_dim kept; heads at least
// `min_heads`, KV heads dividing heads), layers divided by `factor` but at least
// `min_layers` (the plan's pp x virtual stages). Throws std::invalid_argument when the
// factor is below 1.
ModelSpec scale_down(const ModelSpec& model, int factor, int min_layers, int min_heads);

// The scenario with its model scaled down by `factor` (1: unchanged) and the plan's layout
// checked again. Errors: "--scale-down: F must be at least 1"; "--scale-down F: <the first
// layout error>" when the factor leaves no valid model.
Result<Scenario> scale_down_scenario(const Scenario& scenario, int factor);

}  // namespace stepcast::exec

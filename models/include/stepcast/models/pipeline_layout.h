// Megatron-Core's pipeline_model_parallel_layout: which decoder layers each pipeline model
// chunk holds (docs/model-reference.md "Uneven pipeline split").
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "stepcast/models/result.h"

namespace stepcast {

struct PipelineLayout {
  std::vector<int> layers;  // decoder layers per model chunk, in chunk order
  int mtp = 0;              // "m": the multi-token-prediction modules placed (last chunk)
};

// Parses Megatron-Core's layout string: "E" the embedding, "t" one decoder layer, "m" one
// multi-token-prediction module, "L" the loss (output layer), "|" between model chunks,
// "X*N" and "(...)*N" repeat (N from 1 to 10000), e.g. "Et|(tt|)*30mL" = 32 chunks of 1, 2
// x 30 and 0 layers. "E" must open the first chunk, "L" close the last one, and "m" stand
// in the last chunk before "L", where stepcast (and Megatron's layouts) run them. Errors
// quote the string and name the position: `"Et|tX": 'X' (character 5) is not one of E, t,
// m, L, |, (, ), *N`.
Result<PipelineLayout> parse_pipeline_layout(std::string_view text);

// A chunk list as reports print it: runs of one count written "2x30", joined by ","
// ("1,2x30,0").
std::string pipeline_layout_text(const std::vector<int>& layers);

}  // namespace stepcast

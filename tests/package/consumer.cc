// Links stepcast::models from an installed prefix and counts a preset's parameters.
#include <cstdio>

#include "stepcast/models/params.h"
#include "stepcast/models/presets.h"

int main() {
  const stepcast::ParamCounts p = stepcast::count_params(stepcast::builtin_presets().models.at("llama3-70b"));
  std::printf("llama3-70b %lld\n", static_cast<long long>(p.total));
  return p.total > 0 ? 0 : 1;
}

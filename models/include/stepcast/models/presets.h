// Built-in presets: the models, GPUs, clusters and failure models of models/data/*.json,
// embedded in the library at build time (so the binary works from any directory). Every
// entry keeps its `source`.
#pragma once

#include <map>
#include <string>

#include "stepcast/models/attention.h"
#include "stepcast/models/reliability.h"
#include "stepcast/models/specs.h"
#include "stepcast/models/stack.h"

namespace stepcast {

struct PresetCatalog {
  std::map<std::string, ModelSpec> models;    // key order (deterministic)
  std::map<std::string, GpuSpec> gpus;
  std::map<std::string, ClusterSpec> clusters;  // nodes = 1; scenarios override it
  std::map<std::string, FailureSpec> failures;  // faults.failures (models/data/failures.json)
  std::map<std::string, StackProfile> stacks;   // plan.stack (models/data/stacks.json)
  std::map<std::string, AttentionTable> attention;  // by GPU architecture (models/data/attention.json)
};

// The parsed built-in catalog. Parsed once on first use; the embedded files are
// validated by the same loader as scenarios, and a failure there is a build defect
// (the library aborts with the loader's message; tests/models/presets_test.cc guards it).
const PresetCatalog& builtin_presets();

// The raw embedded JSON text of models/data/<name>.json ("models", "gpus", "clusters",
// "failures", "stacks", "attention").
const char* builtin_preset_text(const std::string& name);

}  // namespace stepcast

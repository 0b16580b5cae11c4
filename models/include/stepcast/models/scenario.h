// Scenario files (format 1, docs/interfaces.md): loading and validation.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "stepcast/models/calibration.h"
#include "stepcast/models/reliability.h"
#include "stepcast/models/result.h"
#include "stepcast/models/search.h"
#include "stepcast/models/specs.h"

namespace stepcast {

struct Scenario {
  std::string name;
  ModelSpec model;
  ClusterSpec cluster;
  Plan plan;
  Workload workload;
  std::uint64_t seed = 0;
  std::string network = "analytic";  // "analytic" | "simgrid" (sim/simgrid_backend.h)
  FaultSpec faults;                  // "faults": failures (campaigns), stragglers, crash, mismatch
  std::optional<CheckpointSpec> checkpoint;  // "checkpoint"; absent: the defaults
  std::optional<SearchSpec> search;  // "search": constraints of `stepcast plan` (search.h)
  std::string expect_json;           // the "expect" object, compact JSON; "" when absent
  std::optional<Calibration> calibration;  // "calibration", already applied to `cluster`
  // Defaults the loader chose that change a result and that a user may not expect, one
  // sentence each (e.g. a global batch derived from the GPU count); reports print them.
  std::vector<std::string> notes;
};

struct LoadOptions {
  // false (estimate, simulate, ...): `plan` is required and must be a valid layout, with
  // or without a `search` section. true (`stepcast plan`, `stepcast check`): in a scenario
  // with a `search` section the plan is a template for the search: it may be absent or
  // partial, and its layout checks are left to the planner (SearchSpec::plan_is_layout
  // says whether it is a valid layout). Without a `search` section both are the same.
  bool plan_template = false;
  // Directory that relative paths in the document ("calibration") are relative to;
  // load_scenario_file sets it to the file's directory.
  std::string base_dir;
};

// Parses and validates a scenario document. Comments (// and /* */) are allowed.
// On failure the error holds one line per problem, each naming the JSON path and the
// reason, e.g. "plan.tp: 3 does not divide num_attention_heads (64)".
Result<Scenario> parse_scenario(std::string_view text, const LoadOptions& options = {});

// Reads `path` and parses it; messages are prefixed with "<path>: ".
Result<Scenario> load_scenario_file(const std::string& path, const LoadOptions& options = {});

// Why plan.moe_a2a_overlap cannot apply to this model and plan ("" when it can): Megatron-
// Core's rules, then what stepcast does not express (specs.h Plan::moe_a2a_overlap).
std::string moe_a2a_overlap_problem(const ModelSpec& model, const Plan& plan);
// Whether the interleaved schedule runs m microbatches per step in groups of `group`
// (Megatron-Core's checks: pp <= group <= m, and m % group is 0 or at least pp).
bool microbatch_group_runs(int pp, std::int64_t m, std::int64_t group);
// The smallest microbatch group the interleaved schedule runs m microbatches with (pp when
// m is a multiple of pp); 0 when none does (m < pp).
std::int64_t smallest_microbatch_group(int pp, std::int64_t m);
// Semantic checks of a layout against model, cluster and workload (divisibility, world
// size, batch). One message per problem, each naming the plan field (e.g. "plan.tp: ...").
// Empty when the layout is valid. Used by the loader and by layout search.
std::vector<std::string> layout_errors(const ModelSpec& model, const ClusterSpec& cluster,
                                       const Plan& plan, const Workload& workload);

}  // namespace stepcast

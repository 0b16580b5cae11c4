// Private: JSON -> SearchSpec (the scenario's `search` section, docs/planner.md), and its
// completion once model, cluster, plan and workload are known.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "json_reader.h"
#include "stepcast/models/scenario.h"
#include "stepcast/models/search.h"

namespace stepcast::detail {

// Reads the `search` object; every problem goes to `diag` with its JSON path. nullopt
// when the value is not an object.
std::optional<SearchSpec> read_search(const json& v, Diagnostics& diag);

// Completes `s.search` (REQUIRES: set) against the rest of the scenario: fills `gpus` (the
// cluster's) and `global_batch` (plan.global_batch), checks what needs the cluster or the
// workload (gpus a multiple of gpus_per_node; time_to_train and cost need
// workload.train_tokens, cost a price), and decides SearchSpec::plan_is_layout.
// `plan_template`: the plan was read as a template (LoadOptions::plan_template): it may be
// absent (`plan_given` false), its dp not given (`dp_given` false, derived here when it
// divides) and its global_batch not given (negative; then the search's first value is
// used). Returns one message per problem, each naming the field.
std::vector<std::string> complete_search(Scenario& s, bool plan_template, bool plan_given,
                                         bool dp_given);

}  // namespace stepcast::detail

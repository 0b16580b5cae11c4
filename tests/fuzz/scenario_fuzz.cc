// Fuzz target: the scenario reader (models/scenario.h parse_scenario), as a command and as
// `stepcast plan` load it. Properties on every input: no crash, no exception, no hang;
// an error has a message; a loaded scenario's estimate passes the report check (finite
// numbers, report.h estimate_report_error), and both reports render, the JSON one without
// a null (nlohmann writes a non-finite number as null).
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "fuzz_target.h"
#include "stepcast/models/estimate.h"
#include "stepcast/models/report.h"
#include "stepcast/models/scenario.h"

namespace {

bool has_null(const nlohmann::json& j) {
  if (j.is_null()) return true;
  if (j.is_structured()) {
    for (const auto& v : j) {
      if (has_null(v)) return true;
    }
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (const bool plan_template : {false, true}) {
    stepcast::LoadOptions options;
    options.plan_template = plan_template;
    // No base directory: a relative "calibration" path names nothing under the corpus.
    options.base_dir = "/nonexistent-fuzz-dir";
    const stepcast::Result<stepcast::Scenario> s = stepcast::parse_scenario(text, options);
    if (!s.ok()) {
      STEPCAST_FUZZ_CHECK(!s.error().message.empty(), "an error without a message");
      continue;
    }
    if (plan_template && s->search) continue;  // a template: the planner checks the layout
    const stepcast::Estimate e = stepcast::estimate(*s);
    STEPCAST_FUZZ_CHECK(!stepcast::estimate_report_error(e), "a loaded scenario's estimate fails the report check");
    const nlohmann::json report = nlohmann::json::parse(stepcast::estimate_report_json(*s, e));
    STEPCAST_FUZZ_CHECK(!has_null(report), "a null in the estimate report");
    STEPCAST_FUZZ_CHECK(!stepcast::estimate_report_text(*s, e).empty(), "an empty text report");
  }
  return 0;
}

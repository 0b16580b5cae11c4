#include "stepcast/app/compare.h"

#include <fmt/format.h>

#include "stepcast/analysis/diagnose.h"
#include "stepcast/analysis/trace.h"
#include "stepcast/app/measurement.h"
#include "stepcast/app/scenario_input.h"
#include "stepcast/models/json_reader.h"
#include "stepcast/sim/incident.h"

namespace stepcast::app {

namespace {

// One side, or an error; a hang leaves `hang` set and returns an empty side.
Result<analysis::CompareSide> side_of(const std::string& path, int steps, std::string& hang) {
  auto text = reader::read_input_file(path);
  if (!text.ok()) return text.error();
  if (looks_like_measurement(*text)) return measured_compare_side(path);
  if (analysis::looks_like_trace(*text)) {
    return Error{fmt::format("{}: a trace; compare needs scenarios or measured runs (measured.json of stepcast "
                             "execute: they give the batch and the work per GPU); diagnose reads traces",
                             path)};
  }
  auto s = load(ScenarioInput::file(path));
  if (!s.ok()) return s.error();
  auto side = sim::compare_side(*s, steps);
  if (!side.ok()) return side.error();
  if (!side->hang_report.empty()) hang = path + ": " + side->hang_report;
  return side;
}

}  // namespace

Result<CompareReport> run_compare(const CompareRequest& request) {
  const int steps = request.steps.value_or(analysis::kDiagnoseSteps);
  if (steps < 1 || steps > 10000) return Error{fmt::format("--steps: {} is out of range (1 to 10000)", steps)};
  CompareReport r;
  auto a = side_of(request.a, steps, r.hang);
  if (!a.ok()) return a.error();
  if (!r.hang.empty()) return r;
  auto b = side_of(request.b, steps, r.hang);
  if (!b.ok()) return b.error();
  if (!r.hang.empty()) return r;
  r.comparison = analysis::compare(*a, *b);
  return r;
}

std::string compare_text(const CompareReport& r) { return analysis::comparison_text(*r.comparison); }

std::string compare_json(const CompareReport& r) { return analysis::comparison_json(*r.comparison); }

}  // namespace stepcast::app

#include "stepcast/app/diagnose.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "stepcast/app/scenario_input.h"
#include "stepcast/models/json_reader.h"

namespace stepcast::app {

namespace {

// Traces of full runs are large; they are streamed, so a generous cap.
constexpr std::uint64_t kMaxTraceBytes = 4ull << 30;

}  // namespace

Result<DiagnoseReport> run_diagnose(const DiagnoseRequest& request) {
  auto text = reader::read_input_file(request.path, kMaxTraceBytes);
  if (!text.ok()) return text.error();
  DiagnoseReport r;
  if (sim::looks_like_trace(*text)) {
    if (request.steps) r.note = "--steps is ignored for a trace (it has its own steps)";
    auto trace = sim::read_trace(*text);
    if (!trace.ok()) return Error{reader::prefix_lines(request.path, trace.error().message)};
    r.diagnosis = sim::diagnose_trace(*trace);
    r.diagnosis.source = request.path;
    return r;
  }
  const int steps = request.steps.value_or(kDiagnoseSteps);
  if (steps < 1 || steps > 10000) return Error{fmt::format("--steps: {} is out of range (1 to 10000)", steps)};
  auto s = load(ScenarioInput::file(request.path));
  if (!s.ok()) return s.error();
  auto d = sim::diagnose_scenario(*s, steps);
  if (!d.ok()) return d.error();
  r.diagnosis = std::move(d).value();
  return r;
}

std::string diagnose_text(const DiagnoseReport& r) { return sim::diagnosis_text(r.diagnosis); }

std::string diagnose_json(const DiagnoseReport& r) { return sim::diagnosis_json(r.diagnosis); }

Fields diagnose_fields(const Scenario& scenario, const sim::RunResult& run) {
  const Fields all = Fields::of(nlohmann::ordered_json::parse(sim::diagnosis_json(sim::diagnose_run(scenario, run))));
  Fields f;
  for (const char* key : {"healthy", "hang", "mismatch", "outlier_ranks", "stalling_hosts", "resume_missing"}) {
    if (const nlohmann::json* v = all.find(key)) f.set(key, *v);
  }
  return f;
}

}  // namespace stepcast::app

#include "stepcast/app/measurement.h"

#include <fmt/format.h>

#include "stepcast/executor/scale_down.h"
#include "stepcast/models/lower.h"

namespace stepcast::app {

Result<MeasuredRun> load_measured_run(const std::string& path) {
  auto m = exec::read_measurement(path);
  if (!m.ok()) return m.error();
  auto loaded = load_scenario_file(m->scenario);
  if (!loaded.ok()) return Error{fmt::format("{}: scenario {}: {}", path, m->scenario, loaded.error().message)};
  auto sc = exec::scale_down_scenario(*loaded, m->scale_down);
  if (!sc.ok()) return Error{fmt::format("{}: scenario {}: {}", path, m->scenario, sc.error().message)};
  MeasuredRun run{path, std::move(m).value(), std::move(sc).value(), {}};
  run.program = lower(run.scenario);
  for (const RankTimeline& r : run.measurement.timeline.ranks) {
    if (r.stage < 0 || static_cast<std::size_t>(r.stage) >= run.program.roles.size()) {
      return Error{fmt::format("{}: rank {} has stage {} but the scenario's plan has {} stages (scenario changed?)", path,
                               r.rank, r.stage, run.program.roles.size())};
    }
    for (const Span& s : r.spans) {
      if (s.op >= run.program.roles[static_cast<std::size_t>(r.stage)].ops.size()) {
        return Error{fmt::format("{}: op {} does not exist in the scenario's Program (scenario changed?)", path, s.op)};
      }
    }
  }
  return run;
}

bool looks_like_measurement(const std::string& text) { return exec::looks_like_measurement(text); }

Result<analysis::CompareSide> measured_compare_side(const std::string& path) {
  auto run = load_measured_run(path);
  if (!run.ok()) return run.error();
  const bool on_gpus = run->measurement.backend != "cpu_mpi";
  return analysis::compare_side_measured(run->scenario, run->program, run->measurement.timeline,
                                         run->scenario.name + " (measured)", {}, on_gpus);
}

}  // namespace stepcast::app

// A measured run (measured.json of `stepcast execute`) with the scenario it ran, reloaded
// and lowered again: what `calibrate` fits and `compare` compares.
#pragma once

#include <string>

#include "stepcast/executor/measurement.h"
#include "stepcast/models/program.h"
#include "stepcast/models/result.h"
#include "stepcast/models/scenario.h"
#include "stepcast/analysis/compare.h"

namespace stepcast::app {

struct MeasuredRun {
  std::string path;            // as given
  exec::Measurement measurement;
  Scenario scenario;           // the recorded scenario file, scaled down as recorded
  Program program;             // lower(scenario)
};

// Reads `path` (exec::read_measurement), reloads its scenario and lowers it. Errors name
// the file: read and parse errors (with their JSON path), "PATH: scenario S: <load or
// scale-down error>", and "PATH: ... (scenario changed?)" when a rank's stage or a span's
// op does not exist in the Program.
Result<MeasuredRun> load_measured_run(const std::string& path);

// True when `text` starts like a measured.json (exec::looks_like_measurement).
bool looks_like_measurement(const std::string& text);

// `compare` of a measured run: its side, labelled "<scenario name> (measured)", counted in
// "ranks" rather than GPUs when the run was not on GPUs (cpu_mpi). Errors: those of
// load_measured_run.
Result<analysis::CompareSide> measured_compare_side(const std::string& path);

}  // namespace stepcast::app

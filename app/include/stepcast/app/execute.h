// `execute`: runs a scenario's plan for real on a backend (one process per rank), measures
// it, checks every received element, and prepares measured.json and trace.json
// (docs/executor.md). Every rank of the launch calls run_execute; rank 0 gathers.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "stepcast/executor/measurement.h"
#include "stepcast/models/result.h"

namespace stepcast::app {

struct ExecuteRequest {
  std::string scenario;              // scenario file (recorded as an absolute path)
  std::string backend = "cpu_mpi";   // exec::backend_names()
  int steps = 3;
  int warmup = 1;
  int scale_down = 1;
  bool verify = true;
  std::string out = "stepcast-execute";   // directory of measured.json and trace.json
  // Called on rank 0 after each step with (steps done, warm-up + measured steps); may be empty.
  std::function<void(std::int64_t, std::int64_t)> progress;
};

struct ExecuteReport {
  bool root = false;                 // rank 0: the only rank with the fields below filled
  int rank = 0;
  std::string run_error;             // non-empty: this rank's run failed ("rank R: error: ..."); exit 1
  std::string scenario_name;
  std::string backend;
  bool verify = true;
  bool calibrated = false;           // the prediction used the scenario's calibration
  exec::Measurement measurement;
  std::string measured_path, trace_path;   // DIR/measured.json, DIR/trace.json
  std::string measured_json, trace_json;   // their contents (the caller writes them)
  bool failed() const { return !run_error.empty() || measurement.wrong_elements > 0; }
};

// Loads and scales the scenario, opens the backend (exec::open_machine), runs every step
// and, on rank 0, merges the ranks' timelines and simulates the prediction. Creates the
// output directory on rank 0; writes no file.
// Errors (input errors, exit 2): the scenario's, --steps < 1, --warmup < 0,
// --scale-down < 1, open_machine's, "SCENARIO: the plan needs N ranks but M were launched
// (...)" (on rank 0; other ranks get an error with an empty message: nothing to print),
// "--out: cannot create directory ...". A failure while running is not an error but
// report.run_error.
Result<ExecuteReport> run_execute(const ExecuteRequest& request);

// The summary lines (device, steps, prediction, verification, memory, files). REQUIRES: root.
std::string execute_text(const ExecuteReport& report);
// measured.json's text. REQUIRES: root.
std::string execute_json(const ExecuteReport& report);

}  // namespace stepcast::app

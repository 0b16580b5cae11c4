// `calibrate`: fits the cost model to measured runs and benchmark files, then reports the
// step-time error of every run before and after (docs/executor.md, "calibrate").
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "stepcast/models/calibration.h"
#include "stepcast/models/result.h"
#include "stepcast/models/specs.h"

namespace stepcast::app {

struct CalibrateRequest {
  std::vector<std::string> measured;   // measured.json files (fitted); `execute --train` ones fit the checkpoint storage
  std::vector<std::string> bench;      // bench --json files (fitted)
  std::vector<std::string> holdout;    // measured.json files (predicted, not fitted)
  std::string out = "calibration.json";   // named in the report; the caller writes it
};

// A fitted part whose rms relative error is above this (100 %) gets a warning: the formula
// does not explain single samples; only totals can be trusted.
inline constexpr double kRmsWarnRelative = 1.0;

struct CalibrateRun {
  std::string file, role;               // role: "Fitted on" | "Held out"
  std::string scenario_name;
  bool has_classes = false;
  struct Class {
    double measured_s = 0, before_s = 0, after_s = 0;
  };
  std::map<std::string, Class> classes;  // rank 0's seconds per step by op class
  double measured_s = 0, before_s = 0, after_s = 0;   // step (median measured)
  double error_before() const { return (before_s - measured_s) / measured_s; }
  double error_after() const { return (after_s - measured_s) / measured_s; }
};

// A training run's checkpoints (measured.json of `execute --train`): the measured save
// pause against the checkpoint cost model's, before and after the calibration.
struct CheckpointRunReport {
  std::string file, role;               // role: "Fitted on" | "Held out"
  std::string scenario_name;
  int saves = 0;
  bool async = false;
  double measured_bytes = 0, predicted_bytes = 0;       // one generation
  double measured_s = 0, before_s = 0, after_s = 0;     // mean save pause
  double error_before() const { return (before_s - measured_s) / measured_s; }
  double error_after() const { return (after_s - measured_s) / measured_s; }
};

struct CalibrateReport {
  Calibration calibration;
  std::string calibration_json;        // the file's text (models::calibration_json)
  std::string out;
  double hbm_bandwidth_GBps = 0;       // of the GPU the memory efficiency is relative to
  std::size_t compute_samples = 0, comm_samples = 0;
  std::vector<CalibrateRun> runs;      // fitted runs, then held-out ones
  std::vector<CheckpointRunReport> checkpoint_runs;   // training runs' checkpoints, the same order
  std::vector<std::string> warnings;   // fits with rms above kRmsWarnRelative
  // Non-empty: the calibration must not be written (it predicts the runs it was fitted on
  // worse than the priors: mean |step error| over those runs larger after than before).
  std::string refused;
};

// Reads every file (measured runs through load_measured_run, bench files through
// exec::read_bench), fits (exec::fit_calibration), and simulates every run with and
// without the calibration. Writes nothing. Errors (input errors) name the file: read,
// parse and scenario errors, "calibrate: give measured runs (MEASURED.json) or --bench
// files", "PATH: cannot simulate its scenario".
Result<CalibrateReport> run_calibrate(const CalibrateRequest& request);

// The fit and the per-run tables.
std::string calibrate_text(const CalibrateReport& report);
// {"calibration": out, "fit": <the file>, "runs": [...]} (+ "refused" when refused).
std::string calibrate_json(const CalibrateReport& report);

}  // namespace stepcast::app

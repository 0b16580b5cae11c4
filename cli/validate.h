// `stepcast validate FILE`: predicts the published training runs of a validation file
// (docs/data/validation-runs.json) and compares the predictions with the measurements
// (docs/validation.md). Each record becomes a stepcast scenario by fixed, documented
// rules; nothing is fitted to the measurements.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "stepcast/models/result.h"

namespace stepcast::cli {

// One record of the file and what stepcast predicts for it.
struct ValidationRow {
  std::string id;
  int gpus = 0;
  std::string layout;                    // "tp8 pp4 dp32 mb1 gbs1792"
  std::vector<std::string> assumptions;  // the record-specific rules applied
  std::string scenario_json;             // the scenario built for the record ("" if none)
  bool feasible = false;
  std::string reason;                    // why not feasible ("" when feasible)

  // Measured (null fields of the record are <= 0 here).
  double measured_tflops = 0;            // per GPU, under the record's FLOP accounting
  double measured_iteration_s = 0;
  double measured_samples_per_s = 0;

  // Predicted (meaningful when the scenario loaded; `feasible` also needs the fit).
  bool predicted = false;
  std::string accounting;                // name of the FLOP accounting applied
  double accounting_flops_per_step = 0;  // that accounting's FLOPs of one iteration
  double predicted_tflops = 0;           // accounting FLOPs / (step time x GPUs) / 1e12
  double predicted_iteration_s = 0;
  double predicted_samples_per_s = 0;
  double stepcast_mfu = 0;               // stepcast's own MFU and HFU conventions
  double stepcast_hfu = 0;
  double compute_s = 0, tp_s = 0, dp_s = 0, pp_s = 0, bubble_s = 0, optimizer_s = 0;
  double memory_total_bytes = 0, memory_usable_bytes = 0;

  // (predicted - measured) / measured; valid when the measurement is present.
  double tflops_error() const { return (predicted_tflops - measured_tflops) / measured_tflops; }
  double iteration_error() const {
    return (predicted_iteration_s - measured_iteration_s) / measured_iteration_s;
  }
};

struct ValidationReport {
  std::vector<std::string> common_assumptions;
  std::vector<ValidationRow> rows;        // file order
  int compared = 0;                       // feasible rows with a measured TFLOP/s
  double tflops_mean_abs_error = 0;       // mean |error| over those rows
  double tflops_mean_error = 0;           // signed mean (bias)
  int iteration_compared = 0;
  double iteration_mean_abs_error = 0;
};

// Parses a validation file and predicts every record. On a malformed file the error
// holds one line per problem, each naming the field ("records[3].model.hidden: expected
// a positive integer, got \"x\""). A record whose layout stepcast cannot run (GPU count,
// divisibility, memory) is not an error: its row says why.
Result<ValidationReport> validate_runs(std::string_view text);

// The table, the mean errors and the assumptions, as text.
std::string validation_report_text(const ValidationReport& report);
// The same as one JSON object (format 1), newline-terminated.
std::string validation_report_json(const ValidationReport& report);

// The command: reads `path`, prints the report; with a non-empty `scenario_dir` also
// writes each record's generated scenario there as <id>.json (for `stepcast estimate`
// and what-if edits). Returns 0, or 2 on a bad file (message on stderr naming the file
// and the field) or an unwritable scenario_dir.
int cmd_validate(const std::string& path, bool as_json, const std::string& scenario_dir);

}  // namespace stepcast::cli

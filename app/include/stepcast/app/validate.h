// `validate`: predicts the published training runs of a validation file
// (docs/data/validation-runs.json) and compares the predictions with the measurements
// (docs/validation.md). Each record becomes a stepcast scenario by fixed, documented rules;
// nothing is fitted to the measurements.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "stepcast/models/result.h"
#include "stepcast/models/specs.h"

namespace stepcast::app {

struct ValidateRequest {
  std::string path;          // the validation file, read with reader::read_input_file
  std::string scenario_dir;  // when non-empty: each record's scenario is written to DIR/<id>.json
};

// One record of the file and what stepcast predicts for it.
struct ValidationRow {
  std::string id;
  int gpus = 0;
  std::string layout;                    // "tp8 pp4 dp32 mb1 gbs1792"
  Stack stack = Stack::kMegatronCore;    // plan.stack, by the record's framework
  bool moe = false;                      // a mixture-of-experts record (summarised apart)
  std::vector<std::string> assumptions;  // the record-specific rules applied
  std::string scenario_json;             // the scenario built for the record ("" if none)
  bool predicted = false;                // the scenario loaded and was estimated
  bool feasible = false;                 // predicted, and it fits in memory
  std::string reason;                    // why not feasible ("" when feasible)

  // Measured (absent fields of the record are <= 0 here).
  double measured_tflops = 0;            // per GPU, under the record's FLOP accounting
  double measured_iteration_s = 0;
  double measured_samples_per_s = 0;
  double measured_tokens_per_s = 0;
  double measured_tokens_per_s_per_gpu = 0;
  double measured_model_tflops = 0;      // the source's own model-FLOP count; the metric "model TFLOP/s" when no rate
  double measured_mfu = 0;               // a fraction; the metric "MFU %" when nothing else is measured
  double measured_peak_memory_gib = 0;   // max over ranks

  // The throughput compared: the first the record measures of "TFLOP/s/GPU" (under its own
  // accounting), "tokens/s/GPU", "tokens/s", "samples/s"; "" when it measures none.
  std::string metric;
  double measured_value = 0;             // in the metric's unit
  double predicted_value = 0;            // in the metric's unit (when predicted)

  // Predicted (meaningful when `predicted`).
  std::string accounting;                // name of the FLOP accounting applied
  double accounting_flops_per_step = 0;  // that accounting's FLOPs of one iteration
  double predicted_tflops = 0;           // accounting FLOPs / (step time x GPUs) / 1e12
  double predicted_iteration_s = 0;
  double predicted_samples_per_s = 0;
  double predicted_tokens_per_s = 0;
  double stepcast_mfu = 0;               // stepcast's own MFU and HFU conventions
  double stepcast_hfu = 0;
  double compute_s = 0, tp_s = 0, dp_s = 0, pp_s = 0, bubble_s = 0, optimizer_s = 0;
  double attention_s = 0;  // of compute_s: the attention core's kernels (estimate.h ComputeParts)
  double ep_s = 0, cp_s = 0;  // exposed all-to-all and context-parallel ring exchange
  double host_s = 0;          // the GPU waiting for the host (launch-bound layers, ZeRO-3 issues, offload)
  double memory_total_bytes = 0, memory_usable_bytes = 0;
  double band_p10_s = 0, band_p90_s = 0;  // the predicted step's p10-p90 band (model-reference section 8)

  // (predicted - measured) / measured. Throughput and iteration time need `feasible` and the
  // measurement; peak memory needs `predicted` and the measurement.
  bool has_throughput_error() const { return feasible && measured_value > 0; }
  bool has_iteration_error() const { return feasible && measured_iteration_s > 0; }
  bool has_memory_error() const { return predicted && measured_peak_memory_gib > 0; }
  double throughput_error() const { return (predicted_value - measured_value) / measured_value; }
  double iteration_error() const { return (predicted_iteration_s - measured_iteration_s) / measured_iteration_s; }
  double memory_error() const;
  // Whether the measured throughput lies inside the prediction's band: the step it implies,
  // predicted step x predicted / measured throughput, between p10 and p90 (has_throughput_error).
  bool in_band() const;
};

struct ValidateReport {
  std::string path;                        // the file validated, as given
  std::vector<std::string> common_assumptions;
  std::vector<ValidationRow> rows;         // file order
  // Throughput over the dense rows with has_throughput_error(); the mixture-of-experts rows
  // are summarised apart (moe_compared, moe_mean_error) and stay out of the band residuals.
  int compared = 0;
  double median_abs_error = 0;             // median |error| (mean of the middle two for an even count)
  double mean_abs_error = 0;
  double mean_error = 0;                   // signed (bias)
  int within_10_percent = 0;               // |error| <= 0.10
  int within_band = 0;                     // measured inside the p10-p90 band (ValidationRow::in_band)
  int moe_compared = 0;
  int moe_within_band = 0;
  double moe_mean_error = 0;               // signed, over the MoE rows with a throughput error
  int iteration_compared = 0;
  double iteration_mean_abs_error = 0;
  int memory_compared = 0;
  double memory_mean_error = 0;            // signed
  double memory_mean_abs_error = 0;
  std::vector<std::string> written;        // scenario files written, in row order
};

// Reads the validation file (reader::read_input_file: regular files only, size-capped),
// parses it (reader::parse_document) and predicts every record; with a scenario_dir, also
// writes each record's generated scenario there atomically (write_file_atomic), creating
// the directory. Errors: a file that cannot be read, malformed JSON, or records with
// problems -- one line per problem, each prefixed with the path and naming the JSON field
// ("FILE: records[3].model.hidden: expected a positive integer, got \"x\""), capped at
// reader::kMaxDiagnosticLines lines; or a scenario that could not be written ("scenario_dir
// DIR: ..."). A record that stepcast cannot express (MoE, no preset for its GPU) or whose
// layout it cannot run (divisibility, memory) is not an error: its row says why.
Result<ValidateReport> run_validate(const ValidateRequest& request);

// run_validate on the text of a validation file already read, writing no scenario:
// `source` names the file in the errors (as run_validate's path does) and becomes
// ValidateReport::path. The same report and the same errors as run_validate of a file
// holding `text`, minus the file's own read errors.
Result<ValidateReport> run_validate_text(std::string_view text, const std::string& source);

// The table, the error summary, the breakdown of every prediction and the assumptions, as
// text. Deterministic.
std::string validate_text(const ValidateReport& report);
// The same as one JSON object (format 1), newline-terminated.
std::string validate_json(const ValidateReport& report);

}  // namespace stepcast::app

// measured.json: what `stepcast execute` writes and `stepcast calibrate` / `compare` read
// (docs/executor.md, "Outputs").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stepcast/models/result.h"
#include "stepcast/models/timeline.h"

namespace stepcast::exec {

// measured.json may be larger than other inputs (a span row per op, step and rank).
inline constexpr std::uint64_t kMaxMeasurementBytes = 1ull << 30;

struct Measurement {
  std::string scenario;        // path of the scenario file (absolute)
  int scale_down = 1;
  std::string backend, device, communicator, host;
  int ranks = 0, warmup = 0, steps = 0;
  std::vector<double> step_time_s;        // per measured step, max over ranks
  double predicted_step_time_s = 0;       // the simulator's, before calibration
  // Its p10-p90 band (models/band.h); both 0 when not given (files written before it).
  double predicted_p10_s = 0, predicted_p90_s = 0;
  std::int64_t verified_elements = 0, wrong_elements = 0;
  std::vector<std::string> errors;
  std::vector<double> peak_memory_bytes, predicted_peak_bytes;   // per rank
  Timeline timeline;                      // merged, measured steps
  double median_step_s() const;
};

// The file's text (format 1), indented by one space, ending in a newline.
std::string measurement_json(const Measurement& m);

// Parses measured.json text (reader::parse_document rules). Every error is prefixed with
// `source` (the file name) and names the JSON path and the reason, one line per problem:
// "run/measured.json: timeline[3].spans[7].op: expected a non-negative integer, got "x"".
// Checks types and ranges only; whether the ops exist in the scenario's Program is the
// caller's check (it lowers the scenario).
Result<Measurement> parse_measurement(const std::string& text, const std::string& source);

// Reads and parses the file at `path` (reader::read_input_file: regular files of at most
// kMaxMeasurementBytes).
Result<Measurement> read_measurement(const std::string& path);

// True when `text` starts like a measurement written by `stepcast execute` (its "kind"
// within the first 256 bytes); says nothing about validity.
bool looks_like_measurement(const std::string& text);

}  // namespace stepcast::exec

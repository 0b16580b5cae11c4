// The file `stepcast bench ... --json FILE` writes and `stepcast calibrate --bench` reads
// (kind "stepcast-bench", format 1).
#pragma once

#include <string>
#include <vector>

#include "stepcast/executor/bench.h"
#include "stepcast/models/result.h"

namespace stepcast::exec {

struct BenchFile {
  std::string kind;   // "gemm" | "collectives"
  std::string device, communicator;
  int ranks = 1;
  std::vector<GemmPoint> gemm;
  std::vector<CollectivePoint> collectives;
};

// The file's text, indented by one space, ending in a newline.
std::string bench_json(const BenchFile& b);

// Parses a bench file (reader::parse_document rules). Every error is prefixed with `source`
// and names the JSON path and the reason ("gemm.json: results[2].time_s: expected a
// positive number, got "x"").
Result<BenchFile> parse_bench(const std::string& text, const std::string& source);

// Reads (reader::read_input_file) and parses the file at `path`.
Result<BenchFile> read_bench(const std::string& path);

}  // namespace stepcast::exec

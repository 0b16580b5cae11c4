// Fuzz target: the bench-file reader (executor/bench_file.h parse_bench).
// Properties on every input: no crash, no exception, no hang; an error has a message; a
// bench file that loads writes back (bench_json) to a file that loads again and writes the
// same bytes.
#include <string>

#include "fuzz_target.h"
#include "stepcast/executor/bench_file.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const stepcast::Result<stepcast::exec::BenchFile> b = stepcast::exec::parse_bench(text, "fuzz.json");
  if (!b.ok()) {
    STEPCAST_FUZZ_CHECK(!b.error().message.empty(), "an error without a message");
    return 0;
  }
  const std::string written = stepcast::exec::bench_json(*b);
  const stepcast::Result<stepcast::exec::BenchFile> again = stepcast::exec::parse_bench(written, "fuzz.json");
  STEPCAST_FUZZ_CHECK(again.ok(), "bench_json wrote a file parse_bench refuses");
  STEPCAST_FUZZ_CHECK(stepcast::exec::bench_json(*again) == written, "bench_json is not a fixed point");
  return 0;
}

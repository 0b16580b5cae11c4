// Fuzz target: the measured.json reader (executor/measurement.h parse_measurement).
// Properties on every input: no crash, no exception, no hang; an error has a message; a
// measurement that loads writes back (measurement_json) to a file that loads again and
// writes the same bytes.
#include <string>

#include "fuzz_target.h"
#include "stepcast/executor/measurement.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const stepcast::Result<stepcast::exec::Measurement> m = stepcast::exec::parse_measurement(text, "fuzz.json");
  if (!m.ok()) {
    STEPCAST_FUZZ_CHECK(!m.error().message.empty(), "an error without a message");
    return 0;
  }
  const std::string written = stepcast::exec::measurement_json(*m);
  const stepcast::Result<stepcast::exec::Measurement> again = stepcast::exec::parse_measurement(written, "fuzz.json");
  STEPCAST_FUZZ_CHECK(again.ok(), "measurement_json wrote a file parse_measurement refuses");
  STEPCAST_FUZZ_CHECK(stepcast::exec::measurement_json(*again) == written, "measurement_json is not a fixed point");
  return 0;
}

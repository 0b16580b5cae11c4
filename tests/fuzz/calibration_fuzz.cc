// Fuzz target: the calibration reader (models/calibration.h parse_calibration).
// Properties on every input: no crash, no exception, no hang; an error has a message; a
// calibration that loads writes back (calibration_json) to a file that loads again to the
// same figures.
#include <string>
#include <string_view>

#include "fuzz_target.h"
#include "stepcast/models/calibration.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const stepcast::Result<stepcast::Calibration> c = stepcast::parse_calibration(text, "fuzz.json");
  if (!c.ok()) {
    STEPCAST_FUZZ_CHECK(!c.error().message.empty(), "an error without a message");
    return 0;
  }
  const std::string written = stepcast::calibration_json(*c);
  const stepcast::Result<stepcast::Calibration> again = stepcast::parse_calibration(written, "fuzz.json");
  STEPCAST_FUZZ_CHECK(again.ok(), "calibration_json wrote a file parse_calibration refuses");
  STEPCAST_FUZZ_CHECK(stepcast::calibration_json(*again) == written, "calibration_json is not a fixed point");
  return 0;
}

// Fuzz target: the validation-file reader of `stepcast validate` (app/validate.h
// run_validate_text: the records read, each turned into a scenario and estimated).
// Properties on every input: no crash, no exception, no hang; an error has a message; a
// report has one row per record and renders as text and as JSON.
#include <string>
#include <string_view>

#include "fuzz_target.h"
#include "stepcast/app/validate.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const stepcast::Result<stepcast::app::ValidateReport> r = stepcast::app::run_validate_text(text, "fuzz.json");
  if (!r.ok()) {
    STEPCAST_FUZZ_CHECK(!r.error().message.empty(), "an error without a message");
    return 0;
  }
  STEPCAST_FUZZ_CHECK(!r->rows.empty(), "a report without rows");
  STEPCAST_FUZZ_CHECK(!stepcast::app::validate_text(*r).empty(), "an empty text report");
  STEPCAST_FUZZ_CHECK(!stepcast::app::validate_json(*r).empty(), "an empty JSON report");
  return 0;
}

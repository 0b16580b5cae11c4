// Fuzz target: the trace reader (analysis/trace.h read_trace), as `stepcast diagnose
// TRACE` uses it: read, then diagnose. Properties on every input: no crash, no exception,
// no hang; an error has a message; a trace that loads answers first_unfinished_step()
// within [0, steps()], a complete one gives a breakdown of one row per rank, and its
// diagnosis renders as text and as JSON.
#include <string_view>
#include <vector>

#include "fuzz_target.h"
#include "stepcast/analysis/diagnose.h"
#include "stepcast/analysis/trace.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const stepcast::Result<stepcast::analysis::Trace> t = stepcast::analysis::read_trace(text);
  if (!t.ok()) {
    STEPCAST_FUZZ_CHECK(!t.error().message.empty(), "an error without a message");
    return 0;
  }
  const int first = t->first_unfinished_step();
  STEPCAST_FUZZ_CHECK(first >= 0 && first <= t->steps(), "first_unfinished_step() out of [0, steps()]");
  if (t->complete()) {
    const std::vector<stepcast::analysis::RankBreakdown> b = stepcast::analysis::trace_breakdown(*t);
    STEPCAST_FUZZ_CHECK(b.size() == t->ranks.size(), "a complete trace's breakdown is not one row per rank");
  }
  const stepcast::analysis::Diagnosis d = stepcast::analysis::diagnose_trace(*t);
  STEPCAST_FUZZ_CHECK(!stepcast::analysis::diagnosis_text(d).empty(), "an empty text diagnosis");
  STEPCAST_FUZZ_CHECK(!stepcast::analysis::diagnosis_json(d).empty(), "an empty JSON diagnosis");
  return 0;
}

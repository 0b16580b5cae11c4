#include "stepcast/app/estimate.h"

#include "stepcast/models/report.h"

namespace stepcast::app {

Result<EstimateReport> run_estimate(const EstimateRequest& request) {
  auto s = load(request.scenario);
  if (!s.ok()) return s.error();
  EstimateReport r{std::move(s).value(), {}};
  r.estimate = estimate(r.scenario);
  for (const std::string& n : r.scenario.notes) r.estimate.notes.push_back(n);
  return r;
}

std::string estimate_text(const EstimateReport& r) { return estimate_report_text(r.scenario, r.estimate); }

std::string estimate_json(const EstimateReport& r) { return estimate_report_json(r.scenario, r.estimate); }

Fields estimate_fields(const EstimateReport& r) { return Fields::of(estimate_report_value(r.scenario, r.estimate)); }

}  // namespace stepcast::app

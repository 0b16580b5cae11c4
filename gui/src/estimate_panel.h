// Live estimate: re-runs the closed form (app::run_estimate, microseconds) on every change
// of the document and shows step time with its p10-p90 band, tokens/s, MFU, memory per rank
// as a stacked bar against the usable HBM (fits / does not fit) and the step breakdown.
#pragma once

#include "view.h"

namespace stepcast::gui {

class EstimatePanel : public View {
  Q_OBJECT

 public:
  EstimatePanel(ScenarioDocument* doc, QWidget* parent = nullptr);
  ~EstimatePanel() override;
  // Milliseconds the last re-estimate took (run + display), for the < 50 ms target.
  double lastUpdateMs() const;
};

}  // namespace stepcast::gui

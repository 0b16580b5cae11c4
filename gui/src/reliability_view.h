// Reliability: failure rate (job MTBF), checkpoint size, store write bandwidth and restart
// time as sliders over the scenario's values; the goodput-vs-checkpoint-interval curve
// (app::run_checkpoint's sweep) with Young's, Daly's and the simulated optimum marked; the
// sync vs async recommendation.
#pragma once

#include "view.h"

namespace stepcast::gui {

class ReliabilityView : public View {
  Q_OBJECT

 public:
  ReliabilityView(ScenarioDocument* doc, QWidget* parent = nullptr);
  ~ReliabilityView() override;
  bool busy() const override;
  void prepareScreenshot() override;
};

}  // namespace stepcast::gui

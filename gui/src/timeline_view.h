// Timeline: simulates the scenario (app::run_simulate, in a worker thread) and draws the
// per-rank timeline: compute and the TP/DP/PP/CP/EP streams, bubbles and waits, with zoom
// (wheel), pan (drag), a rank filter, hover details, and "Open in Perfetto" (writes the
// Chrome/Perfetto trace of the same run).
#pragma once

#include "view.h"

namespace stepcast::gui {

class TimelineView : public View {
  Q_OBJECT

 public:
  TimelineView(ScenarioDocument* doc, QWidget* parent = nullptr);
  ~TimelineView() override;
  bool busy() const override;
  void prepareScreenshot() override;

 public slots:
  void runSimulation();
};

}  // namespace stepcast::gui

// Incidents and comparison: open a trace or a measured.json (or a scenario) and show
// `diagnose`'s verdict with the outlier ranks highlighted on a timeline; compare two
// scenarios (or measured runs) side by side with the difference by breakdown part
// (app::run_compare; the 8 -> 64 GPU story of scenarios/incident/ as the shipped example).
#pragma once

#include "view.h"

namespace stepcast::gui {

class IncidentsView : public View {
  Q_OBJECT

 public:
  IncidentsView(ScenarioDocument* doc, QWidget* parent = nullptr);
  ~IncidentsView() override;
  bool busy() const override;
  void prepareScreenshot() override;

 public slots:
  // Diagnoses a trace, measured.json or scenario file (in a worker thread).
  void openRun(const QString& path);
  // Compares two scenario or measured.json files, A the baseline (in a worker thread).
  void compareFiles(const QString& a, const QString& b);
};

}  // namespace stepcast::gui

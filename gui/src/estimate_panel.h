// Live estimate: re-runs the closed form (app::run_estimate, microseconds) on every change
// of the document and shows step time with its p10-p90 band, tokens/s, MFU, time to train,
// memory per rank as a stacked bar against the usable HBM (fits / does not fit) and the
// step breakdown.
#pragma once

#include <optional>

#include "stepcast/app/estimate.h"
#include "view.h"

class QLabel;
class QChart;
class QHorizontalStackedBarSeries;

namespace stepcast::gui {

class EstimatePanel : public View {
  Q_OBJECT

 public:
  EstimatePanel(ScenarioDocument* doc, QWidget* parent = nullptr);
  ~EstimatePanel() override;
  // Milliseconds the last re-estimate took (run + display), for the < 50 ms target.
  double lastUpdateMs() const { return last_ms_; }
  // The estimate shown; empty when the scenario is invalid.
  const std::optional<app::EstimateReport>& report() const { return report_; }
  // The text of a figure label: "step", "tokens", "mfu", "train", "memory", "fits".
  QString figure(const QString& name) const;
  QChart* memoryChart() const { return memory_chart_; }
  QChart* breakdownChart() const { return breakdown_chart_; }

 private:
  void update();

  std::optional<app::EstimateReport> report_;
  QLabel* message_;
  QLabel* step_;
  QLabel* tokens_;
  QLabel* mfu_;
  QLabel* train_;
  QLabel* memory_;
  QLabel* fits_;
  QChart* memory_chart_;
  QChart* breakdown_chart_;
  double last_ms_ = 0;
};

}  // namespace stepcast::gui

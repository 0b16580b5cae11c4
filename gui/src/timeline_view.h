// Timeline: simulates the scenario (app::run_simulate, in a worker thread) and draws the
// per-rank timeline: compute and the TP/DP/PP/CP/EP streams, bubbles and waits, with zoom
// (wheel), pan (drag), a rank filter, hover details, and "Open in Perfetto" (writes the
// Chrome/Perfetto trace of the same run).
#pragma once

#include <memory>

#include "view.h"

class QCheckBox;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QPushButton;
class QSpinBox;
class QStackedWidget;
class QThread;
class QTimer;

namespace stepcast::app {
struct SimulateReport;
}

namespace stepcast::gui {

class TimelineCanvas;
struct TimelineData;

class TimelineView : public View {
  Q_OBJECT

 public:
  TimelineView(ScenarioDocument* doc, QWidget* parent = nullptr);
  ~TimelineView() override;
  bool busy() const override;
  void prepareScreenshot() override;

  // The last finished simulation (nullptr before the first, or after an error).
  const app::SimulateReport* report() const { return report_.get(); }
  TimelineCanvas* canvas() const { return canvas_; }
  QLineEdit* rankFilter() const { return rank_edit_; }
  // The one-line summary above the timeline, and the text shown instead of it (a hang
  // report or an error; "" while the timeline shows).
  QString statusText() const;
  QString messageText() const;
  // Writes the last run's Chrome/Perfetto trace to `path` (what "Open in Perfetto" does
  // after its file dialog); false with `error` when there is no trace or the write fails.
  bool writeTrace(const QString& path, QString* error = nullptr) const;

 public slots:
  void runSimulation();

 protected:
  void showEvent(QShowEvent* e) override;

 private:
  struct Outcome;
  void finished(Outcome& outcome);
  void showMessage(const QString& text);
  void applyRankFilter();
  void openInPerfetto();

  TimelineCanvas* canvas_;
  QPushButton* simulate_;
  QPushButton* perfetto_;
  QLineEdit* rank_edit_;
  QCheckBox* full_;
  QSpinBox* steps_;
  QLabel* status_;
  QStackedWidget* stack_;
  QPlainTextEdit* message_;
  QTimer* debounce_;
  std::shared_ptr<const app::SimulateReport> report_;
  QThread* worker_ = nullptr;
  bool pending_ = false;  // a run was asked for while one was running: run again after it
  bool stale_ = true;     // the document changed since the last run (re-run when shown)
};

}  // namespace stepcast::gui

// Incidents and comparison: open a trace or a measured.json (or a scenario) and show
// `diagnose`'s verdict with the outlier ranks highlighted on a timeline; compare two
// scenarios (or measured runs) side by side with the difference by breakdown part
// (app::run_compare; the 8 -> 64 GPU story of scenarios/incident/ as the shipped example).
#pragma once

#include <memory>

#include "view.h"

class QChart;
class QLabel;
class QPlainTextEdit;
class QPushButton;
class QTableWidget;
class QThread;

namespace stepcast::app {
struct CompareReport;
struct DiagnoseReport;
}  // namespace stepcast::app

namespace stepcast::gui {

class TimelineCanvas;

// The repository root (the folder holding scenarios/incident/), searched from the
// STEPCAST_ROOT environment variable, the document's folder, the executable's folder and the
// working directory, each upwards; "" when none holds it.
QString find_stepcast_root(const QString& document_path);

class IncidentsView : public View {
  Q_OBJECT

 public:
  IncidentsView(ScenarioDocument* doc, QWidget* parent = nullptr);
  ~IncidentsView() override;
  bool busy() const override;
  void prepareScreenshot() override;

  // The last diagnosis shown (nullptr before the first or after an error).
  const app::DiagnoseReport* diagnosis() const { return diagnosis_.get(); }
  // The last comparison shown (nullptr before the first or after an error).
  const app::CompareReport* comparison() const { return comparison_.get(); }
  TimelineCanvas* canvas() const { return canvas_; }
  // Rows: "step time", one per breakdown part (column 0's Qt::UserRole holds the part's
  // name, columns 1-3 hold A, B and B - A in seconds as Qt::UserRole doubles), "sum of parts".
  QTableWidget* compareTable() const { return table_; }
  QString compareSummary() const;  // the summary line above the table
  QChart* compareChart() const { return chart_; }
  // The error of the last open or compare ("" when it succeeded).
  QString runError() const;
  QString compareError() const;
  QString verdictText() const;      // the structured summary (plain text)
  QString diagnosisText() const;    // diagnose's text report
  QString compareText() const;      // compare's text report

 public slots:
  // Diagnoses a trace, measured.json or scenario file (in a worker thread).
  void openRun(const QString& path);
  // Compares two scenario or measured.json files, A the baseline (in a worker thread).
  void compareFiles(const QString& a, const QString& b);

 private:
  struct RunOutcome;
  struct CompareOutcome;
  void runFinished(RunOutcome& o);
  void compareFinished(CompareOutcome& o);
  void openDialog();
  void compareDialog();
  void workEnded();

  TimelineCanvas* canvas_;
  QPushButton* open_;
  QPushButton* compare_;
  QLabel* run_title_;
  QLabel* run_error_;
  QLabel* verdict_;
  QPlainTextEdit* diagnosis_text_;
  QLabel* compare_title_;
  QLabel* compare_error_;
  QLabel* compare_summary_;
  QTableWidget* table_;
  QChart* chart_;
  QPlainTextEdit* compare_text_;
  std::shared_ptr<const app::DiagnoseReport> diagnosis_;
  std::shared_ptr<const app::CompareReport> comparison_;
  QThread* run_worker_ = nullptr;
  QThread* compare_worker_ = nullptr;
  QString last_dir_;
  QString verdict_plain_;
};

}  // namespace stepcast::gui

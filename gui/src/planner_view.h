// Planner: runs the layout search (app::run_plan) in a worker thread with a progress bar
// and cancel; the ranked layouts in a sortable table; the Pareto front as a scatter chart
// (GPUs x time to train, spare memory as the point colour); `--explain` of the selected
// row; "Use this layout" writes it into the scenario's plan (one undo step).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include <QAbstractTableModel>
#include <QPointer>

#include "stepcast/app/plan.h"
#include "view.h"

class QChart;
class QChartView;
class QLabel;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;
class QScatterSeries;
class QSortFilterProxyModel;
class QTableView;
class QThread;

namespace stepcast::gui {

// The ranked layouts of one search, one row per planner::Candidate in rank order. Display
// strings follow `stepcast plan`; Qt::UserRole holds the number a column sorts by.
class PlanTableModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column {
    kRank = 0, kLayout, kGpus, kStepTime, kTokensPerS, kMfu, kMemory, kTimeToTrain, kGoodput, kCost, kTie,
    kColumns
  };
  // The candidate's row in source order is its rank - 1.
  static constexpr int kRankRole = Qt::UserRole + 1;

  explicit PlanTableModel(QObject* parent = nullptr) : QAbstractTableModel(parent) {}
  // Shows `report`'s ranked layouts (empty: no rows).
  void setReport(std::shared_ptr<const app::PlanReport> report);
  const app::PlanReport* report() const { return report_.get(); }

  // The number column `column` of `row` sorts by (Qt::UserRole). REQUIRES: a report, row in range.
  double sortValue(int row, int column) const;

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 private:
  std::shared_ptr<const app::PlanReport> report_;
};

class PlannerView : public View {
  Q_OBJECT

 public:
  PlannerView(ScenarioDocument* doc, QWidget* parent = nullptr);
  ~PlannerView() override;
  bool busy() const override;
  void prepareScreenshot() override;

  // For tests and the main window: the widgets and the last finished search.
  QTableView* table() const { return table_; }
  PlanTableModel* tableModel() const { return model_; }
  QSortFilterProxyModel* sortModel() const { return proxy_; }
  QProgressBar* progressBar() const { return progress_; }
  QChart* chart() const { return chart_; }
  QScatterSeries* paretoSeries() const { return pareto_; }
  QScatterSeries* bestSeries() const { return best_; }
  QPlainTextEdit* explainPane() const { return explain_; }
  QLabel* statusLabel() const { return status_; }
  // The last search that finished ok (null before one, or after a failed or cancelled one).
  const app::PlanReport* report() const { return model_->report(); }
  // The layout string ("tp=...") of the table's row `view_row` as displayed (sorted); "" if none.
  QString layoutAt(int view_row) const;

 public slots:
  void startSearch();
  void cancelSearch();
  // Writes the selected row's layout into the document's plan.
  void adoptSelected();

 signals:
  void searchFinished();
  // After "Use this layout" changed the document's plan.
  void layoutAdopted();
  // The worker's progress (search items, then engine runs), on the GUI thread.
  void searchProgress(qint64 done, qint64 total);

 private:
  void finishSearch(std::shared_ptr<Result<app::PlanReport>> result);
  void showProgress(qint64 done, qint64 total);
  void showReport();
  void updateChart();
  void explainSelected();
  void updateButtons();
  const planner::Candidate* selectedCandidate() const;

  PlanTableModel* model_ = nullptr;
  QSortFilterProxyModel* proxy_ = nullptr;
  QTableView* table_ = nullptr;
  QProgressBar* progress_ = nullptr;
  QPushButton* start_ = nullptr;
  QPushButton* cancel_button_ = nullptr;
  QPushButton* adopt_ = nullptr;
  QLabel* status_ = nullptr;
  QChart* chart_ = nullptr;
  QChartView* chart_view_ = nullptr;
  QScatterSeries* pareto_ = nullptr;
  QScatterSeries* best_ = nullptr;
  QPlainTextEdit* explain_ = nullptr;

  // The running search: its cancel flag (shared with the worker, which may outlive a
  // cancelled request by one item) and its thread. running_ is true from startSearch()
  // until the worker's result has been shown on the GUI thread.
  std::shared_ptr<std::atomic<bool>> cancel_;
  QPointer<QThread> thread_;
  bool running_ = false;
  bool searched_ = false;  // a search has run (prepareScreenshot starts one otherwise)
};

}  // namespace stepcast::gui

// Planner: runs the layout search (app::run_plan) in a worker thread with a progress bar
// and cancel; the ranked layouts in a sortable table; the Pareto front as a scatter chart
// (GPUs x time to train, spare memory as the point colour); `--explain` of the selected
// row; "Use this layout" writes it into the scenario's plan (one undo step).
#pragma once

#include "view.h"

namespace stepcast::gui {

class PlannerView : public View {
  Q_OBJECT

 public:
  PlannerView(ScenarioDocument* doc, QWidget* parent = nullptr);
  ~PlannerView() override;
  bool busy() const override;
  void prepareScreenshot() override;

 public slots:
  void startSearch();
  void cancelSearch();
  // Writes the selected row's layout into the document's plan.
  void adoptSelected();

 signals:
  void searchFinished();
  // After "Use this layout" changed the document's plan.
  void layoutAdopted();
};

}  // namespace stepcast::gui

#include "planner_view.h"

namespace stepcast::gui {

// Placeholder until the view lands (built by its owner).
PlannerView::PlannerView(ScenarioDocument* doc, QWidget* parent) : View(doc, parent) {}
PlannerView::~PlannerView() = default;
bool PlannerView::busy() const { return false; }
void PlannerView::prepareScreenshot() {}

void PlannerView::startSearch() {}
void PlannerView::cancelSearch() {}
void PlannerView::adoptSelected() {}

}  // namespace stepcast::gui

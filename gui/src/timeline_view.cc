#include "timeline_view.h"

namespace stepcast::gui {

// Placeholder until the view lands (built by its owner).
TimelineView::TimelineView(ScenarioDocument* doc, QWidget* parent) : View(doc, parent) {}
TimelineView::~TimelineView() = default;
bool TimelineView::busy() const { return false; }
void TimelineView::prepareScreenshot() {}

void TimelineView::runSimulation() {}

}  // namespace stepcast::gui

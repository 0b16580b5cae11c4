#include "incidents_view.h"

namespace stepcast::gui {

// Placeholder until the view lands (built by its owner).
IncidentsView::IncidentsView(ScenarioDocument* doc, QWidget* parent) : View(doc, parent) {}
IncidentsView::~IncidentsView() = default;
bool IncidentsView::busy() const { return false; }
void IncidentsView::prepareScreenshot() {}

void IncidentsView::openRun(const QString&) {}
void IncidentsView::compareFiles(const QString&, const QString&) {}

}  // namespace stepcast::gui

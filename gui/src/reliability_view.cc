#include "reliability_view.h"

namespace stepcast::gui {

// Placeholder until the view lands (built by its owner).
ReliabilityView::ReliabilityView(ScenarioDocument* doc, QWidget* parent) : View(doc, parent) {}
ReliabilityView::~ReliabilityView() = default;
bool ReliabilityView::busy() const { return false; }
void ReliabilityView::prepareScreenshot() {}

}  // namespace stepcast::gui

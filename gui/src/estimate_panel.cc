#include "estimate_panel.h"

namespace stepcast::gui {

EstimatePanel::EstimatePanel(ScenarioDocument* doc, QWidget* parent) : View(doc, parent) {}
EstimatePanel::~EstimatePanel() = default;
double EstimatePanel::lastUpdateMs() const { return 0; }

}  // namespace stepcast::gui

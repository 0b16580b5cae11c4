#include "editor_view.h"

namespace stepcast::gui {

EditorView::EditorView(ScenarioDocument* doc, QWidget* parent) : View(doc, parent) {}
EditorView::~EditorView() = default;

}  // namespace stepcast::gui

// Scenario editor: model, cluster, plan and workload as forms (presets in drop-downs, a
// custom object's fields editable), each field with the loader's message beside it when
// the scenario is invalid. Every edit goes through ScenarioDocument::setValue (undoable).
#pragma once

#include "view.h"

namespace stepcast::gui {

class EditorView : public View {
  Q_OBJECT

 public:
  EditorView(ScenarioDocument* doc, QWidget* parent = nullptr);
  ~EditorView() override;
};

}  // namespace stepcast::gui

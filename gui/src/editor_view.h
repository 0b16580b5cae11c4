// Scenario editor: model, cluster, plan and workload as forms (presets in drop-downs, a
// preset's fields editable as overrides), each field with the loader's message beside it
// when the scenario is invalid. Every edit goes through ScenarioDocument (undoable).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <QVariant>

#include "view.h"

class QLabel;
class QFormLayout;

namespace stepcast {
struct Scenario;
}

namespace stepcast::gui {

class EditorView : public View {
  Q_OBJECT

 public:
  EditorView(ScenarioDocument* doc, QWidget* parent = nullptr);
  ~EditorView() override;

  // The input widget of a field by its JSON path ("plan.tp", "model", "cluster.nodes"), for
  // tests and the screenshot script; nullptr when there is none.
  QWidget* fieldWidget(const std::string& path) const;
  // The message shown beside a field ("" when none).
  QString fieldMessage(const std::string& path) const;

  // Writes `value` at `path`, turning a preset name on the way into {"preset": name, ...}
  // so the other fields of the preset stay (model and cluster overrides).
  void writeField(const std::vector<std::string>& path, const QVariant& value);

 private:
  // kList: names separated by commas, written as a JSON array of strings. kValues: values
  // separated by commas, written as a JSON array (integers and numbers as numbers, the rest
  // as strings: "0, fit" is [0, "fit"]).
  enum class Kind { kInt, kNumber, kBool, kChoice, kList, kValues };
  struct Field {
    std::vector<std::string> path;
    Kind kind = Kind::kInt;
    QWidget* input = nullptr;
    QLabel* message = nullptr;
    // The value the loaded scenario resolved (defaults and presets), when the JSON lacks it.
    std::function<QVariant(const Scenario&)> resolved;
    // An optional key (the search section's): an empty text or the choice kDefault removes
    // it, and the field shows that when the file lacks it.
    bool optional = false;
    // A kValues field whose single text (no comma) is written as a string, not a list of one
    // (plan.pipeline_layout: Megatron-Core's layout string or a list of layer counts).
    bool text_alone = false;
  };

  void addField(QFormLayout* form, const QString& label, Field field);
  void removeField(const std::vector<std::string>& path);  // an optional key: its default
  void refresh();  // from the document

  std::vector<Field> fields_;
  std::vector<std::pair<std::string, QLabel*>> group_messages_;  // "model" -> its label
  QLabel* banner_ = nullptr;
  bool updating_ = false;
};

}  // namespace stepcast::gui

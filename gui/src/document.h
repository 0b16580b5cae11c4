// The scenario being edited: its file text (what is saved, comments kept), the scenario
// the loader makes of it (or the loader's errors, by JSON path), and the undo history.
// Every view reads the scenario from here and edits through setValue(), so one edit
// re-validates once and every view updates from the changed() signal.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <QObject>
#include <QString>
#include <QUndoStack>
#include <nlohmann/json.hpp>

#include "stepcast/app/scenario_input.h"

namespace stepcast::gui {

class ScenarioDocument : public QObject {
  Q_OBJECT

 public:
  explicit ScenarioDocument(QObject* parent = nullptr);

  // Reads a scenario file (any text: a file the loader rejects opens with its errors).
  // False with `error` when the file cannot be read.
  bool open(const QString& path, QString* error = nullptr);
  // Writes the text to `path` (atomically: a temporary file renamed over it).
  bool save(const QString& path, QString* error = nullptr);
  const QString& path() const { return path_; }
  bool modified() const { return !undo_.isClean(); }

  // Replaces the whole text (one undo step). Used by open() without an undo step.
  void setText(const std::string& text, const QString& what = QStringLiteral("edit"));
  const std::string& text() const { return text_; }

  // Sets the value at `path` (object keys from the root: {"plan", "tp"}) in the text,
  // keeping everything else; one undo step named `what`. False (nothing changed) when the
  // text is not a JSON object the editor can scan.
  bool setValue(const std::vector<std::string>& path, const nlohmann::ordered_json& value, const QString& what = {});
  // Removes the member at `path` (one undo step); false when it is absent.
  bool removeValue(const std::vector<std::string>& path, const QString& what = {});
  // Several edits as one undo step: (path, value) pairs; a null value removes the member.
  using Edits = std::vector<std::pair<std::vector<std::string>, nlohmann::ordered_json>>;
  bool setValues(const Edits& edits, const QString& what);
  bool setValues(const std::vector<std::pair<std::vector<std::string>, nlohmann::json>>& edits, const QString& what);

  // The document as JSON (comments dropped), or null when it does not parse.
  const nlohmann::ordered_json& json() const { return json_; }
  // The value at `path` in json(), or nullptr.
  const nlohmann::ordered_json* value(const std::vector<std::string>& path) const;

  // The validated scenario of the current text; empty when the loader rejects it.
  const std::optional<Scenario>& scenario() const { return scenario_; }
  // The scenario as the planner reads it (LoadOptions::plan_template: with a `search`
  // section the plan may be partial); empty when the loader rejects it.
  const std::optional<Scenario>& planScenario() const { return plan_scenario_; }
  // The loader's whole message ("" when valid) and, per JSON path it names ("plan.tp"),
  // that line's message.
  const QString& error() const { return error_; }
  // The loader's message line by line.
  const std::vector<std::string>& errorLines() const { return error_lines_; }
  const std::map<std::string, QString>& fieldErrors() const { return field_errors_; }
  // The message for a field: its own path's, else the first error under it ("" when none).
  QString fieldError(const std::string& path) const;

  // The scenario for a use case (app::ScenarioInput::value), with file-relative paths
  // ("calibration") resolved against the document's directory.
  std::optional<app::ScenarioInput> input() const;

  QUndoStack* undoStack() { return &undo_; }

 signals:
  // After every change of the text (edit, undo, redo, open): views re-read the scenario.
  void changed();

 private:
  friend class TextCommand;
  void apply(const std::string& text);  // no undo step

  QString path_;
  std::string text_;
  nlohmann::ordered_json json_;
  std::optional<Scenario> scenario_, plan_scenario_;
  QString error_;
  std::vector<std::string> error_lines_;
  std::map<std::string, QString> field_errors_;
  QUndoStack undo_;
};

// "plan.tp: 3 does not divide ..." -> "plan.tp"; "" when the line does not start with a
// JSON path.
std::string error_path(const std::string& line);

}  // namespace stepcast::gui

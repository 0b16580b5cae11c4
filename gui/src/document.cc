#include "document.h"

#include <QFile>
#include <QFileInfo>
#include <QSaveFile>
#include <QUndoCommand>

#include "json_edit.h"
#include "stepcast/models/json_reader.h"
#include "stepcast/models/scenario.h"

namespace stepcast::gui {

// One undo step: the text before and after.
class TextCommand : public QUndoCommand {
 public:
  TextCommand(ScenarioDocument* doc, std::string before, std::string after, const QString& what)
      : QUndoCommand(what), doc_(doc), before_(std::move(before)), after_(std::move(after)) {}
  void undo() override { doc_->apply(before_); }
  void redo() override { doc_->apply(after_); }

 private:
  ScenarioDocument* doc_;
  std::string before_, after_;
};

std::string error_path(const std::string& line) {
  const std::size_t colon = line.find(": ");
  if (colon == std::string::npos || colon == 0) return "";
  for (std::size_t i = 0; i < colon; ++i) {
    const char c = line[i];
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                    c == '.' || c == '[' || c == ']' || c == '-';
    if (!ok) return "";
  }
  return line.substr(0, colon);
}

ScenarioDocument::ScenarioDocument(QObject* parent) : QObject(parent) {}

bool ScenarioDocument::open(const QString& path, QString* error) {
  const Result<std::string> text = reader::read_input_file(path.toStdString());
  if (!text) {
    if (error) *error = QString::fromStdString(text.error().message);
    return false;
  }
  path_ = path;
  undo_.clear();
  apply(*text);
  undo_.setClean();
  return true;
}

bool ScenarioDocument::save(const QString& path, QString* error) {
  QSaveFile f(path);
  if (!f.open(QIODevice::WriteOnly)) {
    if (error) *error = QStringLiteral("%1: %2").arg(path, f.errorString());
    return false;
  }
  f.write(text_.data(), static_cast<qint64>(text_.size()));
  if (!f.commit()) {
    if (error) *error = QStringLiteral("%1: %2").arg(path, f.errorString());
    return false;
  }
  path_ = path;
  undo_.setClean();
  return true;
}

void ScenarioDocument::setText(const std::string& text, const QString& what) {
  if (text == text_) return;
  undo_.push(new TextCommand(this, text_, text, what));
}

bool ScenarioDocument::setValues(const Edits& edits, const QString& what) {
  std::string t = text_;
  for (const auto& [path, value] : edits) {
    const std::optional<std::string> next =
        value.is_null() ? remove_json_member(t, path) : set_json_value(t, path, value.dump());
    if (!next) return false;
    t = *next;
  }
  setText(t, what);
  return true;
}

bool ScenarioDocument::setValues(const std::vector<std::pair<std::vector<std::string>, nlohmann::json>>& edits,
                                 const QString& what) {
  Edits ordered;
  for (const auto& [path, value] : edits) ordered.emplace_back(path, nlohmann::ordered_json(value));
  return setValues(ordered, what);
}

bool ScenarioDocument::setValue(const std::vector<std::string>& path, const nlohmann::ordered_json& value,
                                const QString& what) {
  QString label = what;
  if (label.isEmpty()) {
    std::string p;
    for (const std::string& k : path) p += (p.empty() ? "" : ".") + k;
    label = QStringLiteral("set %1").arg(QString::fromStdString(p));
  }
  return setValues(Edits{{path, value}}, label);
}

bool ScenarioDocument::removeValue(const std::vector<std::string>& path, const QString& what) {
  if (!value(path)) return false;
  return setValues(Edits{{path, nullptr}}, what.isEmpty() ? QStringLiteral("remove") : what);
}

const nlohmann::ordered_json* ScenarioDocument::value(const std::vector<std::string>& path) const {
  const nlohmann::ordered_json* j = &json_;
  for (const std::string& k : path) {
    if (!j->is_object()) return nullptr;
    const auto it = j->find(k);
    if (it == j->end()) return nullptr;
    j = &*it;
  }
  return j;
}

QString ScenarioDocument::fieldError(const std::string& path) const {
  const auto it = field_errors_.find(path);
  if (it != field_errors_.end()) return it->second;
  for (const auto& [p, message] : field_errors_) {
    if (p.size() > path.size() && p.compare(0, path.size(), path) == 0 &&
        (p[path.size()] == '.' || p[path.size()] == '[')) {
      return message;
    }
  }
  return {};
}

std::optional<app::ScenarioInput> ScenarioDocument::input() const {
  if (!scenario_) return std::nullopt;
  return app::ScenarioInput::value(*scenario_);
}

void ScenarioDocument::apply(const std::string& text) {
  text_ = text;
  json_ = nullptr;
  scenario_.reset();
  error_.clear();
  error_lines_.clear();
  field_errors_.clear();
  // The one reader decides whether the text is a document; the copy kept for the views
  // is parsed again in key order (the reader's value sorts keys).
  if (reader::parse_document(text_)) {
    json_ = nlohmann::ordered_json::parse(text_, nullptr, /*allow_exceptions=*/false, /*ignore_comments=*/true);
  }
  LoadOptions options;
  if (!path_.isEmpty()) options.base_dir = QFileInfo(path_).absolutePath().toStdString();
  Result<Scenario> s = parse_scenario(text_, options);
  plan_scenario_.reset();
  if (s) {
    scenario_ = std::move(s).value();
    plan_scenario_ = scenario_;
  }
  if (json_.is_object() && json_.contains("search")) {
    // The planner's reading: with a `search` section the plan may be a partial template.
    LoadOptions t = options;
    t.plan_template = true;
    if (Result<Scenario> ts = parse_scenario(text_, t)) plan_scenario_ = std::move(ts).value();
  }
  if (!s) {
    const std::string& message = s.error().message;
    error_ = QString::fromStdString(message);
    std::size_t b = 0;
    while (b < message.size()) {
      std::size_t e = message.find('\n', b);
      if (e == std::string::npos) e = message.size();
      error_lines_.push_back(message.substr(b, e - b));
      b = e + 1;
    }
    for (const std::string& line : error_lines_) {
      const std::string p = error_path(line);
      if (!p.empty() && !field_errors_.count(p)) field_errors_[p] = QString::fromStdString(line.substr(p.size() + 2));
    }
  }
  emit changed();
}

}  // namespace stepcast::gui

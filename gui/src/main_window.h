// The main window: the scenario editor beside its live estimate, then the timeline,
// planner, reliability, incidents and collectives views, all over one ScenarioDocument; File (open,
// save, save as) and Edit (undo, redo) menus.
#pragma once

#include <QMainWindow>
#include <QString>
#include <QStringList>

class QTabWidget;

namespace stepcast::gui {

class ScenarioDocument;
class EditorView;
class EstimatePanel;
class TimelineView;
class PlannerView;
class ReliabilityView;
class IncidentsView;
class CollectivesView;
class View;

class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  explicit MainWindow(QWidget* parent = nullptr);
  ~MainWindow() override;

  // Opens a scenario file; false with a message box (unless quiet) when it cannot be read.
  bool openFile(const QString& path, bool quiet = false);
  // Writes one PNG per view into `dir` (each view prepared and idle first): scenario.png,
  // timeline.png, planner.png, reliability.png, incidents.png, collectives.png, each name after `prefix`;
  // only the views named in `views` when it is not empty. False on a write error, an
  // unknown view name, or a view that stays busy for `timeout_ms`.
  bool saveScreenshots(const QString& dir, const QStringList& views = {}, const QString& prefix = {},
                       int timeout_ms = 300000);

  ScenarioDocument* document() const { return doc_; }
  QTabWidget* tabs() const { return tabs_; }
  EditorView* editor() const { return editor_; }
  EstimatePanel* estimate() const { return estimate_; }
  TimelineView* timeline() const { return timeline_; }
  PlannerView* planner() const { return planner_; }
  ReliabilityView* reliability() const { return reliability_; }
  IncidentsView* incidents() const { return incidents_; }
  CollectivesView* collectives() const { return collectives_; }

 protected:
  void closeEvent(class QCloseEvent* event) override;

 private slots:
  void openDialog();
  bool saveFile();
  bool saveFileAs();
  void updateTitle();

 private:
  bool maybeSave();

  ScenarioDocument* doc_;
  QTabWidget* tabs_;
  EditorView* editor_;
  EstimatePanel* estimate_;
  TimelineView* timeline_;
  PlannerView* planner_;
  ReliabilityView* reliability_;
  IncidentsView* incidents_;
  CollectivesView* collectives_;
};

}  // namespace stepcast::gui

#include "main_window.h"

#include <QAction>
#include <QCloseEvent>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QMenuBar>
#include <QMessageBox>
#include <QScrollArea>
#include <QSplitter>
#include <QTabWidget>

#include "collectives_view.h"
#include "document.h"
#include "editor_view.h"
#include "estimate_panel.h"
#include "incidents_view.h"
#include "planner_view.h"
#include "reliability_view.h"
#include "timeline_view.h"

namespace stepcast::gui {

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent), doc_(new ScenarioDocument(this)) {
  tabs_ = new QTabWidget(this);
  tabs_->setObjectName(QStringLiteral("tabs"));

  auto* split = new QSplitter(Qt::Horizontal, tabs_);
  editor_ = new EditorView(doc_, split);
  auto* scroll = new QScrollArea(split);
  scroll->setWidget(editor_);
  scroll->setWidgetResizable(true);
  estimate_ = new EstimatePanel(doc_, split);
  split->addWidget(scroll);
  split->addWidget(estimate_);
  split->setStretchFactor(0, 2);
  split->setStretchFactor(1, 3);
  tabs_->addTab(split, tr("Scenario"));

  timeline_ = new TimelineView(doc_, tabs_);
  planner_ = new PlannerView(doc_, tabs_);
  reliability_ = new ReliabilityView(doc_, tabs_);
  incidents_ = new IncidentsView(doc_, tabs_);
  collectives_ = new CollectivesView(doc_, tabs_);
  tabs_->addTab(timeline_, tr("Timeline"));
  tabs_->addTab(planner_, tr("Planner"));
  tabs_->addTab(reliability_, tr("Reliability"));
  tabs_->addTab(incidents_, tr("Incidents"));
  tabs_->addTab(collectives_, tr("Collectives"));
  setCentralWidget(tabs_);

  // "Use this layout": back to the editor, where the estimate shows the adopted layout.
  connect(planner_, &PlannerView::layoutAdopted, this, [this] { tabs_->setCurrentIndex(0); });

  QMenu* file = menuBar()->addMenu(tr("&File"));
  file->addAction(tr("&Open..."), QKeySequence::Open, this, &MainWindow::openDialog);
  file->addAction(tr("&Save"), QKeySequence::Save, this, &MainWindow::saveFile);
  file->addAction(tr("Save &as..."), QKeySequence::SaveAs, this, &MainWindow::saveFileAs);
  file->addSeparator();
  file->addAction(tr("&Quit"), QKeySequence::Quit, this, &QWidget::close);
  QMenu* edit = menuBar()->addMenu(tr("&Edit"));
  QAction* undo = doc_->undoStack()->createUndoAction(this, tr("&Undo"));
  undo->setShortcut(QKeySequence::Undo);
  QAction* redo = doc_->undoStack()->createRedoAction(this, tr("&Redo"));
  redo->setShortcut(QKeySequence::Redo);
  edit->addAction(undo);
  edit->addAction(redo);

  connect(doc_, &ScenarioDocument::changed, this, &MainWindow::updateTitle);
  connect(doc_->undoStack(), &QUndoStack::cleanChanged, this, &MainWindow::updateTitle);
  resize(1440, 900);
  updateTitle();
}

MainWindow::~MainWindow() = default;

bool MainWindow::openFile(const QString& path, bool quiet) {
  QString error;
  if (!doc_->open(path, &error)) {
    if (!quiet) QMessageBox::warning(this, tr("Open scenario"), error);
    return false;
  }
  return true;
}

void MainWindow::openDialog() {
  if (!maybeSave()) return;
  const QString path = QFileDialog::getOpenFileName(this, tr("Open scenario"), QString(),
                                                    tr("Scenarios (*.json);;All files (*)"));
  if (!path.isEmpty()) openFile(path);
}

bool MainWindow::saveFile() {
  if (doc_->path().isEmpty()) return saveFileAs();
  QString error;
  if (!doc_->save(doc_->path(), &error)) {
    QMessageBox::warning(this, tr("Save scenario"), error);
    return false;
  }
  return true;
}

bool MainWindow::saveFileAs() {
  const QString path = QFileDialog::getSaveFileName(this, tr("Save scenario"), doc_->path(),
                                                    tr("Scenarios (*.json)"));
  if (path.isEmpty()) return false;
  QString error;
  if (!doc_->save(path, &error)) {
    QMessageBox::warning(this, tr("Save scenario"), error);
    return false;
  }
  return true;
}

bool MainWindow::maybeSave() {
  if (!doc_->modified()) return true;
  const auto answer = QMessageBox::question(this, tr("stepcast"), tr("Save the changes to the scenario?"),
                                            QMessageBox::Save | QMessageBox::Discard | QMessageBox::Cancel);
  if (answer == QMessageBox::Save) return saveFile();
  return answer == QMessageBox::Discard;
}

void MainWindow::closeEvent(QCloseEvent* event) {
  if (maybeSave()) {
    event->accept();
  } else {
    event->ignore();
  }
}

void MainWindow::updateTitle() {
  const QString name = doc_->path().isEmpty() ? tr("untitled") : QFileInfo(doc_->path()).fileName();
  setWindowTitle(QStringLiteral("%1%2 - stepcast").arg(name, doc_->modified() ? QStringLiteral("*") : QString()));
}

bool MainWindow::saveScreenshots(const QString& dir, const QStringList& views, const QString& prefix,
                                 int timeout_ms) {
  QDir().mkpath(dir);
  struct Shot {
    int tab;
    View* view;
    const char* name;
  };
  const Shot shots[] = {{0, estimate_, "scenario"},   {1, timeline_, "timeline"},
                        {2, planner_, "planner"},     {3, reliability_, "reliability"},
                        {4, incidents_, "incidents"}, {5, collectives_, "collectives"}};
  for (const QString& v : views) {
    bool known = false;
    for (const Shot& s : shots) known = known || v == QLatin1String(s.name);
    if (!known) return false;
  }
  for (const Shot& s : shots) {
    const QString name = QString::fromLatin1(s.name);
    if (!views.isEmpty() && !views.contains(name)) continue;
    tabs_->setCurrentIndex(s.tab);
    s.view->prepareScreenshot();
    if (!wait_idle(s.view, timeout_ms)) return false;
    if (!grab().save(QDir(dir).filePath(prefix + name + QStringLiteral(".png")))) return false;
  }
  tabs_->setCurrentIndex(0);
  return true;
}

}  // namespace stepcast::gui

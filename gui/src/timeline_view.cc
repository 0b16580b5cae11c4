#include "timeline_view.h"

#include <QCheckBox>
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QFontDatabase>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSaveFile>
#include <QSpinBox>
#include <QStackedWidget>
#include <QTimer>
#include <QVBoxLayout>

#include "document.h"
#include "stepcast/analysis/trace.h"
#include "stepcast/app/simulate.h"
#include "style.h"
#include "timeline_canvas.h"

namespace stepcast::gui {

// What the worker hands back: the report and the canvas data built from it (both built off
// the GUI thread), or the use case's error.
struct TimelineView::Outcome {
  std::shared_ptr<const app::SimulateReport> report;
  std::shared_ptr<const TimelineData> data;
  QString error;
  qint64 ms = 0;
};

TimelineView::TimelineView(ScenarioDocument* doc, QWidget* parent)
    : View(doc, parent),
      canvas_(new TimelineCanvas(this)),
      simulate_(new QPushButton(tr("Simulate"), this)),
      perfetto_(new QPushButton(tr("Open in Perfetto..."), this)),
      rank_edit_(new QLineEdit(this)),
      full_(new QCheckBox(tr("Every rank"), this)),
      steps_(new QSpinBox(this)),
      status_(new QLabel(this)),
      stack_(new QStackedWidget(this)),
      message_(new QPlainTextEdit(this)),
      debounce_(new QTimer(this)) {
  setObjectName(QStringLiteral("timeline"));
  simulate_->setObjectName(QStringLiteral("simulate"));
  perfetto_->setObjectName(QStringLiteral("perfetto"));
  perfetto_->setToolTip(tr("Write the run's Chrome/Perfetto trace JSON; open it at ui.perfetto.dev"));
  perfetto_->setEnabled(false);
  rank_edit_->setObjectName(QStringLiteral("rankFilter"));
  rank_edit_->setPlaceholderText(tr("all ranks (e.g. 0-7,12)"));
  rank_edit_->setClearButtonEnabled(true);
  rank_edit_->setMaximumWidth(220);
  full_->setObjectName(QStringLiteral("full"));
  full_->setToolTip(tr("Simulate every rank (default: one rank per pipeline stage when ranks behave alike)"));
  steps_->setObjectName(QStringLiteral("steps"));
  steps_->setRange(1, 20);
  steps_->setValue(1);
  steps_->setPrefix(tr("steps "));
  status_->setObjectName(QStringLiteral("status"));
  status_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  message_->setObjectName(QStringLiteral("message"));
  message_->setReadOnly(true);
  message_->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  canvas_->setPlaceholder(tr("Press Simulate to draw the scenario's timeline."));
  auto* fit = new QPushButton(tr("Fit"), this);
  fit->setObjectName(QStringLiteral("fit"));
  fit->setToolTip(tr("Show the whole run (wheel: zoom around the cursor, drag: pan)"));

  auto* bar = new QHBoxLayout;
  bar->addWidget(simulate_);
  bar->addWidget(full_);
  bar->addWidget(steps_);
  bar->addSpacing(12);
  bar->addWidget(new QLabel(tr("Ranks:"), this));
  bar->addWidget(rank_edit_);
  bar->addWidget(fit);
  bar->addStretch(1);
  bar->addWidget(perfetto_);

  auto* page = new QWidget(stack_);
  auto* page_layout = new QVBoxLayout(page);
  page_layout->setContentsMargins(0, 0, 0, 0);
  page_layout->addWidget(canvas_, 1);
  page_layout->addWidget(make_timeline_legend(page));
  stack_->addWidget(page);
  stack_->addWidget(message_);

  auto* layout = new QVBoxLayout(this);
  layout->addLayout(bar);
  layout->addWidget(status_);
  layout->addWidget(stack_, 1);

  // Edits arrive per keystroke; one simulation for a burst of them.
  debounce_->setSingleShot(true);
  debounce_->setInterval(400);
  connect(debounce_, &QTimer::timeout, this, &TimelineView::runSimulation);
  connect(doc, &ScenarioDocument::changed, this, [this] {
    stale_ = true;
    if (isVisible()) debounce_->start();
  });
  connect(simulate_, &QPushButton::clicked, this, &TimelineView::runSimulation);
  connect(full_, &QCheckBox::toggled, this, &TimelineView::runSimulation);
  connect(steps_, &QSpinBox::valueChanged, this, [this] { debounce_->start(); });
  connect(rank_edit_, &QLineEdit::textChanged, this, &TimelineView::applyRankFilter);
  connect(fit, &QPushButton::clicked, canvas_, &TimelineCanvas::fitAll);
  connect(perfetto_, &QPushButton::clicked, this, &TimelineView::openInPerfetto);
}

TimelineView::~TimelineView() {
  // The worker holds no pointer into the view; wait for it so it does not outlive the process.
  if (worker_) {
    worker_->wait();
    delete worker_;
  }
}

bool TimelineView::busy() const { return worker_ != nullptr || pending_ || debounce_->isActive(); }

void TimelineView::prepareScreenshot() {
  rank_edit_->clear();
  if (!worker_) runSimulation();  // a run already going (started when the tab showed) will do
}

QString TimelineView::statusText() const { return status_->text(); }

QString TimelineView::messageText() const { return stack_->currentWidget() == message_ ? message_->toPlainText() : QString(); }

void TimelineView::showEvent(QShowEvent* e) {
  View::showEvent(e);
  if (stale_) runSimulation();
}

void TimelineView::showMessage(const QString& text) {
  message_->setPlainText(text);
  stack_->setCurrentWidget(message_);
}

void TimelineView::runSimulation() {
  debounce_->stop();
  if (worker_) {
    pending_ = true;  // coalesced: one more run with the latest document after this one
    return;
  }
  pending_ = false;
  stale_ = false;
  const std::optional<app::ScenarioInput> input = document()->input();
  if (!input) {
    report_.reset();
    canvas_->setData(nullptr);
    perfetto_->setEnabled(false);
    status_->setText(tr("The scenario does not load."));
    showMessage(document()->error().isEmpty() ? tr("No scenario.") : document()->error());
    emit idle();
    return;
  }
  app::SimulateRequest request;
  request.scenario = *input;
  request.full = full_->isChecked();
  request.steps = steps_->value();
  request.trace = true;
  simulate_->setEnabled(false);
  status_->setText(tr("Simulating..."));
  worker_ = start_worker<Outcome>(
      this,
      [request] {
        Outcome o;
        QElapsedTimer timer;
        timer.start();
        try {
          Result<app::SimulateReport> r = app::run_simulate(request);
          if (!r.ok()) {
            o.error = QString::fromStdString(r.error().message);
          } else {
            auto report = std::make_shared<app::SimulateReport>(std::move(r).value());
            o.data = std::make_shared<const TimelineData>(TimelineData::from_trace(
                analysis::trace_from_timeline(report->run.program, report->run.out.timeline)));
            o.report = std::move(report);
          }
        } catch (const std::exception& e) {
          o.error = QStringLiteral("simulate failed: %1").arg(QString::fromUtf8(e.what()));
        }
        o.ms = timer.elapsed();
        return o;
      },
      [this](Outcome& o) { finished(o); });
}

void TimelineView::finished(Outcome& o) {
  worker_ = nullptr;
  simulate_->setEnabled(true);
  if (pending_) {  // the document changed meanwhile: this result is already out of date
    runSimulation();
    return;
  }
  report_ = o.report;
  perfetto_->setEnabled(report_ && !report_->trace_json.empty());
  if (!report_) {
    canvas_->setData(nullptr);
    status_->setText(tr("Simulation failed."));
    showMessage(o.error);
  } else {
    canvas_->setData(o.data);
    applyRankFilter();
    const sim::RunResult& run = report_->run;
    const QString mode = run.full ? tr("full mode") : tr("representative mode");
    const int ranks = static_cast<int>(run.out.timeline.ranks.size());
    if (report_->hang()) {
      status_->setText(tr("The run hangs (%1, %2 rank(s) simulated): no step time.").arg(mode).arg(ranks));
      showMessage(tr("The simulated run cannot finish: it hangs.\n\n%1\n\nThe Perfetto trace shows the run up to the "
                     "hang.")
                      .arg(QString::fromStdString(report_->hang_report())));
    } else {
      QString text = tr("Step time %1 - %2, %3 rank(s) simulated, %4 step(s), %5 ops - simulated in %6 ms")
                         .arg(format_seconds(run.summary.step_time_s), mode)
                         .arg(ranks)
                         .arg(report_->steps)
                         .arg(format_count(static_cast<double>(o.data->ops)))
                         .arg(o.ms);
      if (!run.note.empty()) text += QStringLiteral(" (%1)").arg(QString::fromStdString(run.note));
      status_->setText(text);
      stack_->setCurrentIndex(0);
    }
  }
  emit idle();
}

void TimelineView::applyRankFilter() {
  std::set<int> ranks;
  QString error;
  const bool ok = parse_rank_list(rank_edit_->text(), &ranks, &error);
  rank_edit_->setToolTip(ok ? QString() : error);
  rank_edit_->setStyleSheet(ok ? QString() : QStringLiteral("QLineEdit { color: #c01c28; }"));
  canvas_->setRankFilter(ok ? ranks : std::set<int>{});
}

bool TimelineView::writeTrace(const QString& path, QString* error) const {
  if (!report_ || report_->trace_json.empty()) {
    if (error) *error = tr("There is no simulated run to write.");
    return false;
  }
  QSaveFile f(path);
  const std::string& json = report_->trace_json;
  if (!f.open(QIODevice::WriteOnly) || f.write(json.data(), static_cast<qint64>(json.size())) !=
                                           static_cast<qint64>(json.size()) ||
      !f.commit()) {
    if (error) *error = tr("%1: %2").arg(path, f.errorString());
    return false;
  }
  return true;
}

void TimelineView::openInPerfetto() {
  const QString base = document()->path().isEmpty() ? QStringLiteral("trace")
                                                      : QFileInfo(document()->path()).completeBaseName();
  const QString path = QFileDialog::getSaveFileName(this, tr("Write the Perfetto trace"), base + QStringLiteral(".trace.json"),
                                                    tr("Chrome/Perfetto traces (*.json)"));
  if (path.isEmpty()) return;
  QString error;
  if (!writeTrace(path, &error)) {
    QMessageBox::warning(this, tr("Open in Perfetto"), error);
    return;
  }
  QMessageBox::information(this, tr("Open in Perfetto"),
                           tr("Wrote %1.\n\nOpen https://ui.perfetto.dev and drag the file onto it (or use "
                              "\"Open trace file\"); chrome://tracing reads it too.")
                               .arg(QDir::toNativeSeparators(path)));
}

}  // namespace stepcast::gui

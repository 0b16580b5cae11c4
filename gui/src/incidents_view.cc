#include "incidents_view.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <QBarCategoryAxis>
#include <QBarSet>
#include <QChart>
#include <QChartView>
#include <QCoreApplication>
#include <QDir>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QFontDatabase>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QHorizontalStackedBarSeries>
#include <QIcon>
#include <QLabel>
#include <QPixmap>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSplitter>
#include <QTableWidget>
#include <QValueAxis>
#include <QVBoxLayout>

#include "document.h"
#include "stepcast/analysis/trace.h"
#include "stepcast/app/compare.h"
#include "stepcast/app/diagnose.h"
#include "stepcast/app/measurement.h"
#include "stepcast/app/simulate.h"
#include "style.h"
#include "timeline_canvas.h"

namespace stepcast::gui {

namespace {

constexpr const char* kExampleA = "scenarios/incident/8gpu.json";
constexpr const char* kExampleB = "scenarios/incident/64gpu.json";

// Up to 64 KiB of the file: enough to tell a measured.json from a trace or a scenario.
std::string file_head(const QString& path) {
  QFile f(path);
  if (!f.open(QIODevice::ReadOnly)) return {};
  return f.read(64 * 1024).toStdString();
}

// The part_color key of a compare part ("exposed_comm.tp" -> "tp").
std::string part_key(const std::string& part) {
  const std::string prefix = "exposed_comm.";
  return part.rfind(prefix, 0) == 0 ? part.substr(prefix.size()) : part;
}

QString seconds4(double s) { return QString::number(s, 'f', 4); }
QString signed4(double s) { return (s >= 0 ? QStringLiteral("+") : QString()) + QString::number(s, 'f', 4); }

QTableWidgetItem* cell(const QString& text, const QVariant& value = {}, bool bold = false) {
  auto* it = new QTableWidgetItem(text);
  it->setFlags(Qt::ItemIsEnabled | Qt::ItemIsSelectable);
  if (value.isValid()) {
    it->setData(Qt::UserRole, value);
    it->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
  }
  if (bold) {
    QFont f = it->font();
    f.setBold(true);
    it->setFont(f);
  }
  return it;
}

QPlainTextEdit* report_box(QWidget* parent, const char* name) {
  auto* t = new QPlainTextEdit(parent);
  t->setObjectName(QString::fromLatin1(name));
  t->setReadOnly(true);
  t->setLineWrapMode(QPlainTextEdit::NoWrap);
  t->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  return t;
}

QLabel* error_label(QWidget* parent, const char* name) {
  auto* l = new QLabel(parent);
  l->setObjectName(QString::fromLatin1(name));
  l->setWordWrap(true);
  l->setTextInteractionFlags(Qt::TextSelectableByMouse);
  l->setStyleSheet(QStringLiteral("QLabel { color: #c01c28; }"));
  l->hide();
  return l;
}

// Throughput per device of one side (tokens/s per GPU), 0 when unknown.
double per_device_tokens(const analysis::CompareSide& s) {
  return s.step_time_s > 0 && s.world > 0 ? static_cast<double>(s.tokens_per_step) / s.step_time_s / s.world : 0.0;
}

}  // namespace

QString find_stepcast_root(const QString& document_path) {
  const QString marker = QString::fromLatin1(kExampleB);
  auto holds = [&](const QString& dir) { return !dir.isEmpty() && QFileInfo::exists(QDir(dir).filePath(marker)); };
  const QString env = qEnvironmentVariable("STEPCAST_ROOT");
  if (holds(env)) return QDir(env).absolutePath();
  QStringList starts;
  if (!document_path.isEmpty()) starts << QFileInfo(document_path).absolutePath();
  if (QCoreApplication::instance()) starts << QCoreApplication::applicationDirPath();
  starts << QDir::currentPath();
  for (const QString& start : starts) {
    QDir dir(start);
    for (int up = 0; up < 12; ++up) {
      if (holds(dir.absolutePath())) return dir.absolutePath();
      if (!dir.cdUp()) break;
    }
  }
  return {};
}

// The worker's result for "Open run": diagnose's report and the run's timeline.
struct IncidentsView::RunOutcome {
  QString path;
  std::shared_ptr<const app::DiagnoseReport> report;
  std::shared_ptr<const TimelineData> data;
  QString error;           // diagnose failed: nothing to show
  QString timeline_error;  // diagnosed, but the timeline could not be built
};

struct IncidentsView::CompareOutcome {
  QString a, b;
  std::shared_ptr<const app::CompareReport> report;
  QString error;
};

IncidentsView::IncidentsView(ScenarioDocument* doc, QWidget* parent)
    : View(doc, parent),
      canvas_(new TimelineCanvas(this)),
      open_(new QPushButton(tr("Open run..."), this)),
      compare_(new QPushButton(tr("Compare..."), this)),
      run_title_(new QLabel(tr("No run open: a trace (--trace), a measured.json or a scenario."), this)),
      run_error_(error_label(this, "runError")),
      verdict_(new QLabel(this)),
      diagnosis_text_(report_box(this, "diagnosisText")),
      compare_title_(new QLabel(tr("No comparison: choose A (the baseline) and B."), this)),
      compare_error_(error_label(this, "compareError")),
      compare_summary_(new QLabel(this)),
      table_(new QTableWidget(0, 5, this)),
      chart_(new QChart),
      compare_text_(report_box(this, "compareText")) {
  setObjectName(QStringLiteral("incidents"));
  open_->setObjectName(QStringLiteral("openRun"));
  open_->setToolTip(tr("Diagnose a trace, a measured.json or a scenario: outlier ranks, stalls, hangs"));
  compare_->setObjectName(QStringLiteral("compare"));
  compare_->setToolTip(tr("Compare two scenarios or measured runs (A the baseline) part by part"));
  verdict_->setObjectName(QStringLiteral("verdict"));
  verdict_->setWordWrap(true);
  verdict_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  verdict_->setAlignment(Qt::AlignTop | Qt::AlignLeft);
  run_title_->setObjectName(QStringLiteral("runTitle"));
  compare_title_->setObjectName(QStringLiteral("compareTitle"));
  compare_summary_->setObjectName(QStringLiteral("compareSummary"));
  compare_summary_->setWordWrap(true);
  compare_summary_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  canvas_->setPlaceholder(tr("The run's timeline shows here, outlier ranks marked."));

  table_->setObjectName(QStringLiteral("compareTable"));
  table_->setHorizontalHeaderLabels({tr("per step"), tr("A, s"), tr("B, s"), tr("B - A, s"), tr("of the difference")});
  table_->verticalHeader()->hide();
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  chart_->setTitle(tr("Step-time difference by part (B - A)"));
  chart_->legend()->hide();
  chart_->setMargins(QMargins(4, 4, 4, 4));
  auto* chart_view = new QChartView(chart_, this);
  chart_view->setObjectName(QStringLiteral("compareChart"));
  chart_view->setRenderHint(QPainter::Antialiasing);
  chart_view->setMinimumWidth(280);

  auto* bar = new QHBoxLayout;
  bar->addWidget(open_);
  bar->addWidget(compare_);
  bar->addStretch(1);

  // Diagnosis: verdict and report on the left, the timeline on the right.
  auto* run_box = new QGroupBox(tr("Run diagnosis"), this);
  auto* run_left = new QWidget(run_box);
  auto* run_left_layout = new QVBoxLayout(run_left);
  run_left_layout->setContentsMargins(0, 0, 0, 0);
  run_left_layout->addWidget(verdict_);
  run_left_layout->addWidget(diagnosis_text_, 1);
  auto* run_right = new QWidget(run_box);
  auto* run_right_layout = new QVBoxLayout(run_right);
  run_right_layout->setContentsMargins(0, 0, 0, 0);
  run_right_layout->addWidget(canvas_, 1);
  run_right_layout->addWidget(make_timeline_legend(run_right, true));
  auto* run_split = new QSplitter(Qt::Horizontal, run_box);
  run_split->addWidget(run_left);
  run_split->addWidget(run_right);
  run_split->setStretchFactor(0, 2);
  run_split->setStretchFactor(1, 3);
  auto* run_layout = new QVBoxLayout(run_box);
  run_layout->addWidget(run_title_);
  run_layout->addWidget(run_error_);
  run_layout->addWidget(run_split, 1);

  // Comparison: the table and chart side by side, the text report beside them.
  auto* cmp_box = new QGroupBox(tr("Comparison (A baseline, B)"), this);
  auto* cmp_split = new QSplitter(Qt::Horizontal, cmp_box);
  cmp_split->addWidget(table_);
  cmp_split->addWidget(chart_view);
  cmp_split->addWidget(compare_text_);
  cmp_split->setStretchFactor(0, 2);
  cmp_split->setStretchFactor(1, 2);
  cmp_split->setStretchFactor(2, 3);
  auto* cmp_layout = new QVBoxLayout(cmp_box);
  cmp_layout->addWidget(compare_title_);
  cmp_layout->addWidget(compare_error_);
  cmp_layout->addWidget(compare_summary_);
  cmp_layout->addWidget(cmp_split, 1);

  auto* split = new QSplitter(Qt::Vertical, this);
  split->addWidget(run_box);
  split->addWidget(cmp_box);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 2);
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(bar);
  layout->addWidget(split, 1);

  connect(open_, &QPushButton::clicked, this, &IncidentsView::openDialog);
  connect(compare_, &QPushButton::clicked, this, &IncidentsView::compareDialog);
}

IncidentsView::~IncidentsView() {
  for (QThread* t : {run_worker_, compare_worker_}) {
    if (t) {
      t->wait();
      delete t;
    }
  }
}

bool IncidentsView::busy() const { return run_worker_ != nullptr || compare_worker_ != nullptr; }

QString IncidentsView::runError() const { return run_error_->isHidden() ? QString() : run_error_->text(); }
QString IncidentsView::compareError() const { return compare_error_->isHidden() ? QString() : compare_error_->text(); }
QString IncidentsView::verdictText() const { return verdict_plain_; }
QString IncidentsView::diagnosisText() const { return diagnosis_text_->toPlainText(); }
QString IncidentsView::compareSummary() const { return compare_summary_->text(); }
QString IncidentsView::compareText() const { return compare_text_->toPlainText(); }

void IncidentsView::prepareScreenshot() {
  const QString root = find_stepcast_root(document()->path());
  if (root.isEmpty()) {
    run_error_->setText(tr("scenarios/incident/ not found: set STEPCAST_ROOT to the stepcast source folder."));
    run_error_->show();
    return;
  }
  const QDir dir(root);
  compareFiles(dir.filePath(QString::fromLatin1(kExampleA)), dir.filePath(QString::fromLatin1(kExampleB)));
  openRun(dir.filePath(QString::fromLatin1(kExampleB)));
}

void IncidentsView::workEnded() {
  open_->setEnabled(run_worker_ == nullptr);
  compare_->setEnabled(compare_worker_ == nullptr);
  if (!busy()) emit idle();
}

void IncidentsView::openDialog() {
  if (last_dir_.isEmpty()) {
    const QString root = find_stepcast_root(document()->path());
    last_dir_ = root.isEmpty() ? QDir::currentPath() : QDir(root).filePath(QStringLiteral("scenarios/incident"));
  }
  const QString path = QFileDialog::getOpenFileName(
      this, tr("Open run: a trace, a measured.json or a scenario"), last_dir_,
      tr("Runs (*.json);;All files (*)"));
  if (path.isEmpty()) return;
  last_dir_ = QFileInfo(path).absolutePath();
  openRun(path);
}

void IncidentsView::compareDialog() {
  if (last_dir_.isEmpty()) {
    const QString root = find_stepcast_root(document()->path());
    last_dir_ = root.isEmpty() ? QDir::currentPath() : QDir(root).filePath(QStringLiteral("scenarios/incident"));
  }
  const QString filter = tr("Scenarios and measured runs (*.json);;All files (*)");
  const QString a = QFileDialog::getOpenFileName(this, tr("Compare: A, the baseline"), last_dir_, filter);
  if (a.isEmpty()) return;
  last_dir_ = QFileInfo(a).absolutePath();
  const QString b = QFileDialog::getOpenFileName(this, tr("Compare: B, against A (%1)").arg(QFileInfo(a).fileName()),
                                                 last_dir_, filter);
  if (b.isEmpty()) return;
  last_dir_ = QFileInfo(b).absolutePath();
  compareFiles(a, b);
}

void IncidentsView::openRun(const QString& path) {
  if (run_worker_) return;  // one diagnosis at a time; the button is disabled meanwhile
  open_->setEnabled(false);
  run_title_->setText(tr("Diagnosing %1 ...").arg(QDir::toNativeSeparators(path)));
  run_error_->hide();
  run_worker_ = start_worker<RunOutcome>(
      this,
      [path] {
        RunOutcome o;
        o.path = path;
        const std::string file = path.toStdString();
        try {
          auto report = std::make_shared<app::DiagnoseReport>();
          std::optional<analysis::Trace> trace;
          if (app::looks_like_measurement(file_head(path))) {
            // A measured run: its timeline is diagnosed as a trace, with the detectors diagnose uses.
            Result<app::MeasuredRun> m = app::load_measured_run(file);
            if (!m.ok()) {
              o.error = QString::fromStdString(m.error().message);
              return o;
            }
            trace = analysis::trace_from_timeline(m->program, m->measurement.timeline);
            report->diagnosis = analysis::diagnose_trace(*trace);
            report->diagnosis.source = file;
            report->note = "measured run (measured.json): its timeline diagnosed as a trace";
          } else {
            Result<app::DiagnoseReport> r = app::run_diagnose(app::DiagnoseRequest{file, std::nullopt});
            if (!r.ok()) {
              o.error = QString::fromStdString(r.error().message);
              return o;
            }
            *report = std::move(r).value();
            if (report->diagnosis.input == "trace") {
              // The same reader diagnose used; the text is read again (diagnose streams it).
              QFile f(path);
              if (!f.open(QIODevice::ReadOnly)) {
                o.timeline_error = QStringLiteral("%1: %2").arg(path, f.errorString());
              } else {
                const QByteArray bytes = f.readAll();
                Result<analysis::Trace> t = analysis::read_trace(std::string_view(bytes.constData(), bytes.size()));
                if (t.ok()) {
                  trace = std::move(t).value();
                } else {
                  o.timeline_error = QString::fromStdString(t.error().message);
                }
              }
            } else {
              // A scenario: simulated again as diagnose did (its steps; full mode when faults
              // perturb ranks), for the timeline diagnose does not return.
              Result<Scenario> s = app::load(app::ScenarioInput::file(file));
              app::SimulateRequest req;
              req.steps = std::max(1, report->diagnosis.steps);
              if (s.ok()) req.scenario = app::ScenarioInput::value(std::move(s).value());
              Result<app::SimulateReport> sim = s.ok() ? app::run_simulate(req) : Result<app::SimulateReport>(s.error());
              if (sim.ok()) {
                trace = analysis::trace_from_timeline(sim->run.program, sim->run.out.timeline);
              } else {
                o.timeline_error = QString::fromStdString(sim.error().message);
              }
            }
          }
          if (trace) o.data = std::make_shared<const TimelineData>(TimelineData::from_trace(*trace));
          o.report = std::move(report);
        } catch (const std::exception& e) {
          o.error = QStringLiteral("%1: %2").arg(path, QString::fromUtf8(e.what()));
        }
        return o;
      },
      [this](RunOutcome& o) { runFinished(o); });
}

void IncidentsView::runFinished(RunOutcome& o) {
  run_worker_ = nullptr;
  const QString name = QDir::toNativeSeparators(o.path);
  if (!o.report) {
    diagnosis_.reset();
    run_title_->setText(tr("Could not diagnose %1").arg(name));
    // The reader's message names the file; prefix it when it does not.
    run_error_->setText(o.error.contains(o.path) ? o.error : QStringLiteral("%1: %2").arg(o.path, o.error));
    run_error_->show();
    verdict_->clear();
    verdict_plain_.clear();
    diagnosis_text_->clear();
    canvas_->setHighlightedRanks({});
    canvas_->setData(nullptr);
    workEnded();
    return;
  }
  diagnosis_ = o.report;
  const analysis::Diagnosis& d = diagnosis_->diagnosis;
  run_title_->setText(tr("%1 - %2, %3 of %4 ranks, %5 step(s)")
                          .arg(name, QString::fromStdString(d.input == "trace" ? std::string("trace") : d.mode))
                          .arg(d.ranks_analysed)
                          .arg(d.world)
                          .arg(d.steps));
  if (!o.timeline_error.isEmpty()) {
    run_error_->setText(tr("The timeline could not be drawn: %1").arg(o.timeline_error));
    run_error_->show();
  }

  // The structured verdict: healthy or problem, outliers, stalls, links, hang.
  QStringList html, plain;
  const bool problem = diagnosis_->problem();
  const QString head = d.hang ? tr("HANG") : problem ? tr("PROBLEM") : tr("Healthy");
  html << QStringLiteral("<span style=\"font-size:large; font-weight:bold; color:%1\">%2</span>")
              .arg(problem || d.hang ? QStringLiteral("#c01c28") : QStringLiteral("#1a7f37"), head);
  plain << head;
  if (!d.hang) {
    const QString step = tr("Step time %1 (mean of %2 step(s))").arg(format_seconds(d.step_time_s)).arg(d.steps);
    html << step.toHtmlEscaped();
    plain << step;
  }
  std::set<int> outliers;
  for (const analysis::OutlierRank& r : d.outliers) {
    outliers.insert(r.rank);
    QString line = tr("Outlier rank %1 (node %2, stage %3): compute %4 vs %5 per step (%6 %), slow in %7/%8 "
                      "steps, late in %9")
                       .arg(r.rank)
                       .arg(r.node)
                       .arg(r.stage)
                       .arg(format_seconds(r.compute_s), format_seconds(r.median_compute_s))
                       .arg(r.compute_excess * 100.0, 0, 'f', 1)
                       .arg(r.compute_steps)
                       .arg(r.steps)
                       .arg(r.late_steps);
    for (const analysis::CausedWait& w : r.caused) {
      line += tr("; its %1 group (%2 ranks) waits %3 per step per peer")
                  .arg(QLatin1String(to_string(w.group)))
                  .arg(w.group_size)
                  .arg(format_seconds(w.per_peer_s));
    }
    html << QStringLiteral("<span style=\"color:#c01c28\">%1</span>").arg(line.toHtmlEscaped());
    plain << line;
  }
  for (const analysis::InputStall& s : d.stalls) {
    QStringList steps;
    for (int k : s.stalled_steps) steps << QString::number(k);
    const QString line = tr("Input stalls on host %1 (%2 rank(s)): steps %3, %4 longer than the median input; its "
                            "peers wait %5 per stalled step")
                             .arg(s.node)
                             .arg(s.ranks.size())
                             .arg(steps.join(QLatin1Char(',')), format_seconds(s.excess_s),
                                  format_seconds(s.peers_wait_s));
    html << line.toHtmlEscaped();
    plain << line;
  }
  for (const analysis::SlowLink& l : d.links) {
    QStringList ranks;
    for (int r : l.ranks) ranks << QString::number(r);
    const QString line = tr("Slow link at rank(s) %1").arg(ranks.join(QLatin1Char(',')));
    html << line.toHtmlEscaped();
    plain << line;
  }
  if (d.hang) {
    const QString line = tr("The run hangs; last collective per rank:\n%1").arg(QString::fromStdString(d.hang_report));
    html << QStringLiteral("<pre>%1</pre>").arg(line.toHtmlEscaped());
    plain << line;
  }
  for (const analysis::Finding& f : d.verdict) {
    if (f.problem) continue;  // problems are listed above in detail
    const QString line = tr("note: %1").arg(QString::fromStdString(f.text));
    html << line.toHtmlEscaped();
    plain << line;
  }
  if (!diagnosis_->note.empty()) {
    html << QString::fromStdString(diagnosis_->note).toHtmlEscaped();
    plain << QString::fromStdString(diagnosis_->note);
  }
  verdict_->setText(html.join(QStringLiteral("<br>")));
  verdict_plain_ = plain.join(QLatin1Char('\n'));
  diagnosis_text_->setPlainText(QString::fromStdString(app::diagnose_text(*diagnosis_)));

  canvas_->setData(o.data);
  canvas_->setHighlightedRanks(outliers);
  if (!outliers.empty()) canvas_->scrollToRank(*outliers.begin());
  workEnded();
}

void IncidentsView::compareFiles(const QString& a, const QString& b) {
  if (compare_worker_) return;
  compare_->setEnabled(false);
  compare_title_->setText(tr("Comparing A %1 with B %2 ...").arg(QDir::toNativeSeparators(a), QDir::toNativeSeparators(b)));
  compare_error_->hide();
  compare_worker_ = start_worker<CompareOutcome>(
      this,
      [a, b] {
        CompareOutcome o;
        o.a = a;
        o.b = b;
        try {
          Result<app::CompareReport> r = app::run_compare(app::CompareRequest{a.toStdString(), b.toStdString(), {}});
          if (r.ok()) {
            o.report = std::make_shared<const app::CompareReport>(std::move(r).value());
          } else {
            o.error = QString::fromStdString(r.error().message);
          }
        } catch (const std::exception& e) {
          o.error = QString::fromUtf8(e.what());
        }
        return o;
      },
      [this](CompareOutcome& o) { compareFinished(o); });
}

void IncidentsView::compareFinished(CompareOutcome& o) {
  compare_worker_ = nullptr;
  comparison_ = o.report;
  table_->setRowCount(0);
  chart_->removeAllSeries();
  for (QAbstractAxis* axis : chart_->axes()) {
    chart_->removeAxis(axis);
    delete axis;
  }
  compare_summary_->clear();
  compare_text_->clear();
  const QString names = tr("A %1 - B %2").arg(QFileInfo(o.a).fileName(), QFileInfo(o.b).fileName());
  if (!comparison_) {
    compare_title_->setText(tr("Could not compare %1").arg(names));
    compare_error_->setText(o.error);
    compare_error_->show();
    workEnded();
    return;
  }
  if (!comparison_->comparison) {
    compare_title_->setText(tr("%1: a side hangs, nothing to compare").arg(names));
    compare_error_->setText(QString::fromStdString(comparison_->hang));
    compare_error_->show();
    workEnded();
    return;
  }
  const analysis::Comparison& c = *comparison_->comparison;
  compare_title_->setText(tr("A: %1 (%2)   B: %3 (%4)")
                              .arg(QString::fromStdString(c.a.name), QFileInfo(o.a).fileName(),
                                   QString::fromStdString(c.b.name), QFileInfo(o.b).fileName()));
  const QString devices = c.a.on_gpus && c.b.on_gpus ? tr("GPU") : tr("rank");
  const double ta = per_device_tokens(c.a), tb = per_device_tokens(c.b);
  QString summary = tr("Step time %1 -> %2 (%3 s, %4 %).  Tokens/s per %5: %6 (%7) -> %8 (%9).  ")
                        .arg(format_seconds(c.a.step_time_s), format_seconds(c.b.step_time_s), signed4(c.step_delta_s))
                        .arg(c.a.step_time_s > 0 ? 100.0 * c.step_delta_s / c.a.step_time_s : 0.0, 0, 'f', 1)
                        .arg(devices, format_count(ta))
                        .arg(c.a.world)
                        .arg(format_count(tb))
                        .arg(c.b.world);
  if (c.scaling_kind == "layout") {
    summary += tr("Same device count: a layout comparison (B over A per device: %1 %).")
                   .arg(100.0 * c.scaling_efficiency, 0, 'f', 1);
  } else {
    summary += tr("%1 efficiency %2 %.")
                   .arg(c.scaling_kind == "strong"  ? tr("Strong-scaling")
                        : c.scaling_kind == "weak" ? tr("Weak-scaling")
                                                   : tr("Throughput ratio:"))
                   .arg(100.0 * c.scaling_efficiency, 0, 'f', 1);
  }
  // Both sides predicted: is B - A beyond what the model resolves between them (band.h's tie rule)?
  if (c.tie_log_threshold) {
    const double pct = 100.0 * (std::exp(*c.tie_log_threshold) - 1);
    summary += c.ties ? tr("  Within the model's resolution between these two steps (+-%1 %): too close to call.")
                            .arg(pct, 0, 'f', 1)
                      : tr("  Beyond the model's resolution between these two steps (+-%1 %).").arg(pct, 0, 'f', 1);
  }
  for (const std::string& w : c.warnings) summary += QStringLiteral("\nWARNING: %1").arg(QString::fromStdString(w));
  compare_summary_->setText(summary);

  // The table: step time, each part, and the sum of the parts' deltas.
  auto add_row = [&](const QString& label, const QVariant& key, double va, double vb, double delta, bool bold) {
    const int row = table_->rowCount();
    table_->insertRow(row);
    QTableWidgetItem* first = cell(label, {}, bold);
    if (key.isValid()) first->setData(Qt::UserRole, key);
    table_->setItem(row, 0, first);
    table_->setItem(row, 1, cell(std::isnan(va) ? QString() : seconds4(va), std::isnan(va) ? QVariant() : QVariant(va), bold));
    table_->setItem(row, 2, cell(std::isnan(vb) ? QString() : seconds4(vb), std::isnan(vb) ? QVariant() : QVariant(vb), bold));
    table_->setItem(row, 3, cell(signed4(delta), delta, bold));
    const QString share = c.step_delta_s != 0 ? QStringLiteral("%1 %").arg(100.0 * delta / c.step_delta_s, 0, 'f', 1)
                                              : QString();
    table_->setItem(row, 4, cell(share, {}, bold));
    if (key.isValid()) {
      const QColor col = part_color(part_key(key.toString().toStdString()));
      table_->item(row, 0)->setIcon([&] {
        QPixmap px(10, 10);
        px.fill(col);
        return QIcon(px);
      }());
    }
  };
  add_row(tr("step time"), {}, c.a.step_time_s, c.b.step_time_s, c.step_delta_s, true);
  for (const analysis::ComparePart& p : c.parts) {
    add_row(QString::fromStdString(p.name), QString::fromStdString(p.name), p.a_s, p.b_s, p.delta_s(), false);
  }
  add_row(tr("sum of parts"), {}, std::nan(""), std::nan(""), c.parts_delta_s, true);

  // The chart: one bar per part, in the part's colour (a stacked series with one set per
  // part, zero outside its own category, so each bar takes its part's colour).
  auto* series = new QHorizontalStackedBarSeries;
  QStringList categories;
  double lo = 0, hi = 0;
  const int n = static_cast<int>(c.parts.size());
  for (int i = 0; i < n; ++i) {
    const analysis::ComparePart& p = c.parts[static_cast<std::size_t>(i)];
    categories << QString::fromStdString(p.name);
    auto* set = new QBarSet(QString::fromStdString(p.name));
    for (int j = 0; j < n; ++j) *set << (j == i ? p.delta_s() : 0.0);
    set->setColor(part_color(part_key(p.name)));
    set->setBorderColor(part_color(part_key(p.name)).darker(120));
    series->append(set);
    lo = std::min(lo, p.delta_s());
    hi = std::max(hi, p.delta_s());
  }
  chart_->addSeries(series);
  auto* y = new QBarCategoryAxis;
  y->append(categories);
  auto* x = new QValueAxis;
  const double pad = 0.08 * std::max(hi - lo, 1e-9);
  x->setRange(lo - (lo < 0 ? pad : 0.0), hi + pad);
  x->setTitleText(tr("B - A, seconds per step"));
  x->setLabelFormat(QStringLiteral("%.3f"));
  chart_->addAxis(y, Qt::AlignLeft);
  chart_->addAxis(x, Qt::AlignBottom);
  series->attachAxis(y);
  series->attachAxis(x);
  compare_text_->setPlainText(QString::fromStdString(app::compare_text(*comparison_)));
  workEnded();
}

}  // namespace stepcast::gui

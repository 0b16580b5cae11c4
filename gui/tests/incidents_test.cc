// The Incidents view against direct calls of app::run_compare and app::run_diagnose: the
// 8 -> 64 GPU comparison part by part, the outlier ranks highlighted, a trace file, a
// malformed file.
#include <cmath>
#include <set>

#include <QChart>
#include <QFile>
#include <QHorizontalStackedBarSeries>
#include <QBarSet>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QtTest>

#include "document.h"
#include "incidents_view.h"
#include "stepcast/analysis/trace.h"
#include "stepcast/app/compare.h"
#include "stepcast/app/diagnose.h"
#include "stepcast/app/simulate.h"
#include "timeline_canvas.h"

using namespace stepcast;
using namespace stepcast::gui;

namespace {

QString source_path(const char* rel) {
  return QDir(QStringLiteral(STEPCAST_SOURCE_DIR)).filePath(QString::fromLatin1(rel));
}

}  // namespace

class IncidentsTest : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase();
  void findsTheRepository();
  void comparisonMatchesCompare();
  void outliersHighlighted();
  void traceFile();
  void malformedFile();
  void cleanupTestCase();

 private:
  ScenarioDocument* doc_ = nullptr;
  IncidentsView* view_ = nullptr;
};

void IncidentsTest::initTestCase() {
  doc_ = new ScenarioDocument(this);
  view_ = new IncidentsView(doc_);
  view_->resize(1400, 900);
  view_->show();
  QVERIFY(QTest::qWaitForWindowExposed(view_));
  // The screenshot state: 8gpu vs 64gpu compared, 64gpu diagnosed (found without a document).
  QSignalSpy idle(view_, &View::idle);
  view_->prepareScreenshot();
  QVERIFY(view_->busy());
  QVERIFY(wait_idle(view_, 120000));
  QCOMPARE(idle.count(), 1);
  QVERIFY2(view_->runError().isEmpty(), qPrintable(view_->runError()));
  QVERIFY2(view_->compareError().isEmpty(), qPrintable(view_->compareError()));
}

void IncidentsTest::cleanupTestCase() { delete view_; }

void IncidentsTest::findsTheRepository() {
  const QString root = find_stepcast_root(QString());
  QCOMPARE(QFileInfo(root).canonicalFilePath(), QFileInfo(QStringLiteral(STEPCAST_SOURCE_DIR)).canonicalFilePath());
  // From a document's folder too, whatever the working directory.
  const QString cwd = QDir::currentPath();
  QDir::setCurrent(QDir::tempPath());
  const QString from_doc = find_stepcast_root(source_path("scenarios/incident/hang.json"));
  QDir::setCurrent(cwd);
  QCOMPARE(QFileInfo(from_doc).canonicalFilePath(), QFileInfo(root).canonicalFilePath());
}

void IncidentsTest::comparisonMatchesCompare() {
  const Result<app::CompareReport> direct = app::run_compare(app::CompareRequest{
      source_path("scenarios/incident/8gpu.json").toStdString(), source_path("scenarios/incident/64gpu.json").toStdString(), {}});
  QVERIFY2(direct.ok(), direct.ok() ? "" : direct.error().message.c_str());
  QVERIFY(direct->comparison);
  const analysis::Comparison& c = *direct->comparison;
  QVERIFY(view_->comparison() && view_->comparison()->comparison);

  // The table, read back as the numbers it holds: each part's A, B and B - A.
  const QTableWidget* t = view_->compareTable();
  QCOMPARE(t->rowCount(), static_cast<int>(c.parts.size()) + 2);  // step time, parts, sum
  QCOMPARE(t->item(0, 3)->data(Qt::UserRole).toDouble(), c.step_delta_s);
  double sum = 0;
  std::size_t seen = 0;
  for (int row = 0; row < t->rowCount(); ++row) {
    const QString key = t->item(row, 0)->data(Qt::UserRole).toString();
    if (key.isEmpty()) continue;
    const auto it = std::find_if(c.parts.begin(), c.parts.end(),
                                 [&](const analysis::ComparePart& p) { return p.name == key.toStdString(); });
    QVERIFY2(it != c.parts.end(), qPrintable(key));
    QCOMPARE(t->item(row, 1)->data(Qt::UserRole).toDouble(), it->a_s);
    QCOMPARE(t->item(row, 2)->data(Qt::UserRole).toDouble(), it->b_s);
    QCOMPARE(t->item(row, 3)->data(Qt::UserRole).toDouble(), it->delta_s());
    sum += t->item(row, 3)->data(Qt::UserRole).toDouble();
    ++seen;
  }
  QCOMPARE(seen, c.parts.size());
  QVERIFY(seen >= 4);  // compute, exposed dp, wait, input, optimizer
  // The parts add up to the step-time difference (independently: B's step time minus A's).
  const double step_delta = c.b.step_time_s - c.a.step_time_s;
  QVERIFY(step_delta > 0.5);  // the 64-GPU run is slower
  QVERIFY2(std::abs(sum - step_delta) <= 1e-9 * std::abs(step_delta),
           qPrintable(QStringLiteral("%1 vs %2").arg(sum, 0, 'g', 17).arg(step_delta, 0, 'g', 17)));

  // The chart: one bar per part, its value the part's difference.
  const auto series = view_->compareChart()->series();
  QCOMPARE(series.size(), 1);
  const auto* bars = qobject_cast<QHorizontalStackedBarSeries*>(series.front());
  QVERIFY(bars);
  QCOMPARE(bars->count(), static_cast<int>(c.parts.size()));
  for (int i = 0; i < bars->count(); ++i) {
    QCOMPARE(bars->barSets()[i]->label(), QString::fromStdString(c.parts[static_cast<std::size_t>(i)].name));
    QCOMPARE(bars->barSets()[i]->at(i), c.parts[static_cast<std::size_t>(i)].delta_s());
  }
  QCOMPARE(view_->compareText(), QString::fromStdString(app::compare_text(*direct)));
  // Both sides are simulated: the summary judges B - A by the tie rule, as the CLI's report.
  QVERIFY(c.tie_log_threshold.has_value());
  QVERIFY(!c.ties);
  QVERIFY2(
      view_->compareSummary().contains(QStringLiteral("Beyond the model's resolution between these two steps (+-%1 %)")
                                           .arg(100.0 * (std::exp(*c.tie_log_threshold) - 1), 0, 'f', 1)),
      qPrintable(view_->compareSummary()));
}

void IncidentsTest::outliersHighlighted() {
  const Result<app::DiagnoseReport> direct =
      app::run_diagnose(app::DiagnoseRequest{source_path("scenarios/incident/64gpu.json").toStdString(), std::nullopt});
  QVERIFY(direct.ok());
  std::set<int> outliers;
  for (const analysis::OutlierRank& r : direct->diagnosis.outliers) outliers.insert(r.rank);
  QCOMPARE(outliers, std::set<int>{37});  // the scenario's slow rank
  QVERIFY(view_->diagnosis());
  QCOMPARE(view_->canvas()->highlightedRanks(), outliers);
  QVERIFY(view_->verdictText().startsWith(QStringLiteral("PROBLEM")));
  QVERIFY(view_->verdictText().contains(QStringLiteral("Outlier rank 37 ")));
  QCOMPARE(view_->diagnosisText(), QString::fromStdString(app::diagnose_text(*direct)));
  // The timeline is the run diagnose analysed: every rank, its steps.
  const TimelineData* d = view_->canvas()->data();
  QVERIFY(d);
  QCOMPARE(static_cast<int>(d->ranks().size()), direct->diagnosis.ranks_analysed);
  QCOMPARE(d->steps, direct->diagnosis.steps);
  QCOMPARE(static_cast<double>(d->step_end_ns.back()) / 1e9 / d->steps, direct->diagnosis.step_time_s);
}

void IncidentsTest::traceFile() {
  // A trace of a small full run, written as `simulate --trace` does.
  Result<Scenario> s = app::load(app::ScenarioInput::file(source_path("scenarios/incident/8gpu.json").toStdString()));
  QVERIFY(s.ok());
  app::SimulateRequest req;
  req.scenario = app::ScenarioInput::value(*s);
  req.full = true;
  req.steps = 2;
  req.trace = true;
  const Result<app::SimulateReport> sim = app::run_simulate(req);
  QVERIFY(sim.ok());
  QTemporaryDir dir;
  const QString path = dir.filePath(QStringLiteral("trace.json"));
  {
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(sim->trace_json.data(), static_cast<qint64>(sim->trace_json.size()));
  }
  view_->openRun(path);
  QVERIFY(wait_idle(view_, 60000));
  QVERIFY2(view_->runError().isEmpty(), qPrintable(view_->runError()));
  const Result<app::DiagnoseReport> direct = app::run_diagnose(app::DiagnoseRequest{path.toStdString(), std::nullopt});
  QVERIFY(direct.ok());
  QCOMPARE(direct->diagnosis.input, std::string("trace"));
  QCOMPARE(view_->diagnosisText(), QString::fromStdString(app::diagnose_text(*direct)));
  QVERIFY(view_->canvas()->highlightedRanks().empty());
  QCOMPARE(view_->verdictText().section(QLatin1Char('\n'), 0, 0),
           direct->problem() ? QStringLiteral("PROBLEM") : QStringLiteral("Healthy"));
  // Every op of the trace is drawn.
  const Result<analysis::Trace> trace = analysis::read_trace(sim->trace_json);
  QVERIFY(trace.ok());
  std::int64_t ops = 0;
  for (const analysis::TraceRank& r : trace->ranks) ops += static_cast<std::int64_t>(r.ops.size());
  QVERIFY(view_->canvas()->data());
  QCOMPARE(view_->canvas()->data()->ops, ops);
  QCOMPARE(static_cast<int>(view_->canvas()->data()->ranks().size()), 8);
}

void IncidentsTest::malformedFile() {
  QTemporaryDir dir;
  const QString path = dir.filePath(QStringLiteral("broken.json"));
  {
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("{");
  }
  view_->openRun(path);
  QVERIFY(wait_idle(view_, 30000));
  const Result<app::DiagnoseReport> direct = app::run_diagnose(app::DiagnoseRequest{path.toStdString(), std::nullopt});
  QVERIFY(!direct.ok());
  const QString error = view_->runError();
  QVERIFY2(error.contains(path), qPrintable(error));
  QVERIFY2(error.contains(QString::fromStdString(direct.error().message)), qPrintable(error));
  QVERIFY(error.contains(QStringLiteral("invalid JSON")));
  QVERIFY(!view_->diagnosis());
  QVERIFY(!view_->canvas()->data());
  QVERIFY(view_->canvas()->highlightedRanks().empty());
  // A missing file: the reader's message, and the view still works afterwards.
  view_->openRun(dir.filePath(QStringLiteral("missing.json")));
  QVERIFY(wait_idle(view_, 30000));
  QVERIFY(view_->runError().contains(QStringLiteral("missing.json")));
  // A bad compare side: the error names it, the last good table is cleared.
  view_->compareFiles(path, source_path("scenarios/incident/8gpu.json"));
  QVERIFY(wait_idle(view_, 30000));
  QVERIFY2(view_->compareError().contains(path), qPrintable(view_->compareError()));
  QVERIFY(!view_->comparison());
  QCOMPARE(view_->compareTable()->rowCount(), 0);
}

QTEST_MAIN(IncidentsTest)
#include "incidents_test.moc"

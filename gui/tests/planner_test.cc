// The planner view against app::run_plan called directly on the same scenario (the oracle):
// rows, order, sorting, Pareto points, adopting a layout (and undoing it), cancel, and the
// event loop staying responsive while a long search runs in the worker.
#include <QtTest>

#include <ctime>

#include <QElapsedTimer>
#include <QLabel>
#include <QPlainTextEdit>
#include <QScatterSeries>
#include <QSignalSpy>
#include <QSortFilterProxyModel>
#include <QTableView>
#include <QTimer>

#include <nlohmann/json.hpp>

#include "document.h"
#include "planner_view.h"
#include "stepcast/app/plan.h"
#include "stepcast/planner/layout.h"

using stepcast::gui::PlannerView;
using stepcast::gui::PlanTableModel;
using stepcast::gui::ScenarioDocument;

namespace {

const char* kScenario = STEPCAST_SOURCE_DIR "/scenarios/plan/llama3-70b-64xh100.json";

// A tiny MoE model (8 layers, 8 experts, top 2) on one DGX H100 node: the start of a
// scenario object, to be followed by its other keys.
constexpr const char* kTinyMoe = R"({"name": "tiny moe", "cluster": {"preset": "dgx-h100", "nodes": 1},
      "model": {"num_layers": 8, "hidden_size": 1024, "num_attention_heads": 16, "num_kv_heads": 4,
                "ffn_hidden_size": 2048, "vocab_size": 32000, "max_seq_len": 4096,
                "moe": {"num_experts": 8, "top_k": 2, "expert_ffn_hidden_size": 2048}},)";

// The 64-GPU plan scenario with 2 engine re-simulations instead of 20 (the same space of
// 22,400 layouts; a search takes a second or two).
// CPU time the calling thread has used, in ms: the GUI thread's own work, which scheduling
// delays (other processes on a loaded CI machine) do not inflate.
qint64 thread_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<qint64>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

// The GUI thread's budget of CPU between two event-loop turns. The product's is 100 ms (the
// plain build uses 12-25 ms of it at the worst turn, painting the result). Under
// AddressSanitizer every allocation in Qt's text layout and chart code goes through ASan's
// allocator, which makes that same paint 4-8x slower (55-106 ms measured on this search), so
// a sanitized build is held to 4x the budget: still far below the regression this test exists
// to catch (the search's own work on the GUI thread: 30 s there).
#if defined(__SANITIZE_ADDRESS__)
constexpr qint64 kGuiBudgetMs = 400;
#else
constexpr qint64 kGuiBudgetMs = 100;
#endif

bool open_small(ScenarioDocument& doc) {
  QString error;
  if (!doc.open(QString::fromUtf8(kScenario), &error)) {
    qWarning() << error;
    return false;
  }
  return doc.setValue({"search", "top_k"}, 2) && doc.planScenario().has_value();
}

stepcast::app::PlanReport run_direct(const ScenarioDocument& doc) {
  stepcast::app::PlanRequest request;
  request.scenario = stepcast::app::ScenarioInput::value(*doc.planScenario());
  request.scenario.plan_template = true;
  auto r = stepcast::app::run_plan(request);
  if (!r.ok()) qFatal("run_plan: %s", r.error().message.c_str());
  return std::move(r).value();
}

QString layout_of(const stepcast::planner::Candidate& c) {
  return QString::fromStdString(stepcast::planner::layout_string(c.plan));
}

}  // namespace

class PlannerTest : public QObject {
  Q_OBJECT

 private slots:
  void tableAndChartMatchADirectRun();
  void adoptingRowZeroWritesTheBestPlanAndUndoRestoresTheText();
  void adoptingAFoldedOffloadedLayoutWritesEtpAndOffload();
  void adoptingAnOverlappedMoeLayoutWritesTheAllToAllOverlap();
  void adoptingWritesTheRecomputedModulesAndRemovesKeysTheLayoutDoesNotTake();
  void cancelFromAProgressSignalLeavesNoResult();
  void eventLoopNeverBlocksDuringALongSearch();
};

void PlannerTest::tableAndChartMatchADirectRun() {
  ScenarioDocument doc;
  QVERIFY(open_small(doc));
  const stepcast::app::PlanReport want = run_direct(doc);
  const stepcast::planner::PlanResult& r = want.result;
  QVERIFY(r.ranked.size() > 100);

  PlannerView view(&doc);
  QSignalSpy finished(&view, &PlannerView::searchFinished);
  QSignalSpy idle(&view, &PlannerView::idle);
  view.startSearch();
  QVERIFY(view.busy());
  QTRY_VERIFY_WITH_TIMEOUT(!view.busy(), 120000);
  QCOMPARE(finished.count(), 1);
  QCOMPARE(idle.count(), 1);

  // Rows: every ranked layout, best first.
  QCOMPARE(view.table()->model()->rowCount(), static_cast<int>(r.ranked.size()));
  QCOMPARE(view.layoutAt(0), layout_of(r.ranked[0]));
  QCOMPARE(view.layoutAt(1), layout_of(r.ranked[1]));
  QCOMPARE(view.table()->model()->index(0, PlanTableModel::kRank).data().toInt(), 1);
  QCOMPARE(view.table()->model()->index(0, PlanTableModel::kGpus).data().toInt(), r.ranked[0].gpus());

  // Sorting by tokens/s (highest first) puts the planner's best_by_tokens first, and the
  // column is in order all the way down.
  view.table()->sortByColumn(PlanTableModel::kTokensPerS, Qt::DescendingOrder);
  QCOMPARE(view.layoutAt(0), layout_of(r.ranked[r.best_by_tokens]));
  const QAbstractItemModel* m = view.table()->model();
  for (int i = 1; i < m->rowCount(); ++i) {
    QVERIFY(m->index(i - 1, PlanTableModel::kTokensPerS).data(Qt::UserRole).toDouble() >=
            m->index(i, PlanTableModel::kTokensPerS).data(Qt::UserRole).toDouble());
  }
  // Back to rank order.
  view.table()->sortByColumn(PlanTableModel::kRank, Qt::AscendingOrder);
  QCOMPARE(view.layoutAt(0), layout_of(r.ranked[0]));

  // The Pareto chart: one point per front layout at (GPUs, time to train in days), and the
  // best marked.
  QCOMPARE(view.paretoSeries()->count(), static_cast<int>(r.pareto.size()));
  for (int i = 0; i < view.paretoSeries()->count(); ++i) {
    const stepcast::planner::Candidate& c = r.ranked[r.pareto[static_cast<std::size_t>(i)]];
    QCOMPARE(view.paretoSeries()->at(i).x(), static_cast<double>(c.gpus()));
    QVERIFY(qAbs(view.paretoSeries()->at(i).y() - c.figures().time_to_train_s / 86400.0) < 1e-9);
  }
  QCOMPARE(view.bestSeries()->count(), 1);
  QVERIFY(qAbs(view.bestSeries()->at(0).y() - r.ranked[0].figures().time_to_train_s / 86400.0) < 1e-9);

  // The explanation of the selected row (row 0 after a search) names its layout and rank.
  QVERIFY(view.explainPane()->toPlainText().contains(layout_of(r.ranked[0])));
}

void PlannerTest::adoptingRowZeroWritesTheBestPlanAndUndoRestoresTheText() {
  ScenarioDocument doc;
  QVERIFY(open_small(doc));
  const stepcast::app::PlanReport want = run_direct(doc);
  const stepcast::Plan& best = want.result.ranked[0].plan;
  // The scenario's own plan differs from the best (TP8 PP4 ranks far below).
  QVERIFY(doc.scenario()->plan.tp != best.tp || doc.scenario()->plan.pp != best.pp);

  PlannerView view(&doc);
  view.startSearch();
  QTRY_VERIFY_WITH_TIMEOUT(!view.busy(), 120000);
  view.table()->selectRow(0);
  const std::string before = doc.text();
  const int steps = doc.undoStack()->count();
  QSignalSpy adopted(&view, &PlannerView::layoutAdopted);
  view.adoptSelected();
  QCOMPARE(adopted.count(), 1);
  QCOMPARE(doc.undoStack()->count(), steps + 1);  // one undo step
  QVERIFY2(doc.scenario().has_value(), qPrintable(doc.error()));
  const stepcast::Plan& p = doc.scenario()->plan;
  QCOMPARE(p.tp, best.tp);
  QCOMPARE(p.pp, best.pp);
  QCOMPARE(p.dp, best.dp);
  QCOMPARE(p.cp, best.cp);
  QCOMPARE(p.ep, best.ep);
  QCOMPARE(p.sequence_parallel, best.sequence_parallel);
  QCOMPARE(p.tp_comm_overlap, best.tp_comm_overlap);
  QCOMPARE(p.schedule, best.schedule);
  QCOMPARE(p.virtual_stages, best.virtual_stages);
  QCOMPARE(p.microbatch, best.microbatch);
  QCOMPARE(p.global_batch, best.global_batch);
  QCOMPARE(p.zero, best.zero);
  QCOMPARE(p.recompute, best.recompute);
  QCOMPARE(p.stack, best.stack);
  QCOMPARE(QString::fromStdString(stepcast::planner::layout_string(p)), layout_of(want.result.ranked[0]));

  doc.undoStack()->undo();
  QVERIFY(doc.text() == before);
}

// A MoE layout that only runs folded (ep 8 > dp 4 on one node, tp 2) with the optimizer
// offloaded: adopting it must write etp and offload_optimizer, or the scenario would not load
// (ep 8 does not divide dp 4) or lose the offload.
void PlannerTest::adoptingAFoldedOffloadedLayoutWritesEtpAndOffload() {
  ScenarioDocument doc;
  doc.setText(std::string(kTinyMoe) + R"(
      "workload": {"seq_len": 4096},
      "search": {"tp": [2], "pp": [1], "cp": [1], "ep": [8], "global_batch": [8], "microbatch": [1],
                 "sequence_parallel": [true], "zero": [1], "recompute": ["none"], "top_k": 0,
                 "offload_optimizer": [1]}})");
  QVERIFY2(doc.planScenario().has_value(), qPrintable(doc.error()));
  PlannerView view(&doc);
  view.startSearch();
  QTRY_VERIFY_WITH_TIMEOUT(!view.busy(), 120000);
  view.table()->selectRow(0);
  view.adoptSelected();
  QVERIFY2(doc.scenario().has_value(), qPrintable(doc.error()));
  const stepcast::Plan& p = doc.scenario()->plan;
  QCOMPARE(p.ep, 8);
  QCOMPARE(p.expert_tp(), 1);
  QCOMPARE(p.offload_optimizer, 1.0);
  QCOMPARE(p.offload_activations, 0.0);
}

// The scenario asks for Megatron-Core's all-to-all overlap; the search applies it to its EP
// layouts without pipelining (docs/model-reference.md 5.8), and adopting one must keep it.
void PlannerTest::adoptingAnOverlappedMoeLayoutWritesTheAllToAllOverlap() {
  ScenarioDocument doc;
  doc.setText(std::string(kTinyMoe) + R"(
      "plan": {"dp": 8, "ep": 8, "global_batch": 16, "moe_a2a_overlap": true},
      "workload": {"seq_len": 4096},
      "search": {"tp": [1], "pp": [1], "cp": [1], "ep": [8], "global_batch": [16], "microbatch": [1],
                 "zero": [1], "recompute": ["none"], "top_k": 0}})");
  QVERIFY2(doc.planScenario().has_value(), qPrintable(doc.error()));
  PlannerView view(&doc);
  view.startSearch();
  QTRY_VERIFY_WITH_TIMEOUT(!view.busy(), 120000);
  QVERIFY(view.report() != nullptr);
  QVERIFY(view.report()->result.ranked.front().plan.moe_a2a_overlap);
  QVERIFY(view.layoutAt(0).contains(QStringLiteral(",a2a=true")));
  view.table()->selectRow(0);
  view.adoptSelected();
  QVERIFY2(doc.scenario().has_value(), qPrintable(doc.error()));
  QVERIFY(doc.scenario()->plan.moe_a2a_overlap);
}

// The scenario recomputes in full with recompute_method named; the search lists selective
// module sets. Adopting a selective layout must write its modules and remove
// recompute_method (the loader refuses it without "full"); adopting "none" after it must
// remove the modules.
void PlannerTest::adoptingWritesTheRecomputedModulesAndRemovesKeysTheLayoutDoesNotTake() {
  ScenarioDocument doc;
  doc.setText(std::string(kTinyMoe) + R"(
      "plan": {"dp": 8, "ep": 8, "global_batch": 16, "recompute": "full", "recompute_method": "block"},
      "workload": {"seq_len": 4096},
      "search": {"tp": [1], "pp": [1], "cp": [1], "ep": [8], "global_batch": [16], "microbatch": [2],
                 "zero": [1], "recompute": ["none", "selective"], "top_k": 0,
                 "recompute_modules": [["moe_act"], ["moe_act", "layernorm"]]}})");
  QVERIFY2(doc.scenario().has_value(), qPrintable(doc.error()));
  PlannerView view(&doc);
  view.startSearch();
  QTRY_VERIFY_WITH_TIMEOUT(!view.busy(), 120000);
  QVERIFY(view.report() != nullptr);
  // Selects the row whose layout contains `part` and adopts it; false when there is none.
  auto adopt = [&](const QString& part) {
    for (int i = 0; i < view.table()->model()->rowCount(); ++i) {
      if (!view.layoutAt(i).contains(part)) continue;
      view.table()->selectRow(i);
      view.adoptSelected();
      return true;
    }
    return false;
  };
  QVERIFY(adopt(QStringLiteral(",recompute_modules=layernorm+moe_act")));
  QVERIFY2(doc.scenario().has_value(), qPrintable(doc.error()));
  QCOMPARE(doc.scenario()->plan.recompute, stepcast::Recompute::kSelective);
  QCOMPARE(doc.scenario()->plan.recompute_modules, stepcast::module_bit(stepcast::RecomputeModule::kMoeAct) |
                                                       stepcast::module_bit(stepcast::RecomputeModule::kLayernorm));
  QVERIFY(!doc.value({"plan", "recompute_method"}));
  QVERIFY(adopt(QStringLiteral(",recompute=none")));
  QVERIFY2(doc.scenario().has_value(), qPrintable(doc.error()));
  QCOMPARE(doc.scenario()->plan.recompute, stepcast::Recompute::kNone);
  QVERIFY(!doc.value({"plan", "recompute_modules"}));
}

void PlannerTest::cancelFromAProgressSignalLeavesNoResult() {
  ScenarioDocument doc;
  QVERIFY(open_small(doc));
  PlannerView view(&doc);
  QElapsedTimer since_cancel;
  connect(&view, &PlannerView::searchProgress, &view, [&] {
    if (since_cancel.isValid()) return;
    since_cancel.start();
    view.cancelSearch();
  });
  QSignalSpy finished(&view, &PlannerView::searchFinished);
  view.startSearch();
  QTRY_VERIFY_WITH_TIMEOUT(since_cancel.isValid(), 60000);
  QTRY_VERIFY_WITH_TIMEOUT(!view.busy(), 5000);
  qInfo("busy() false %lld ms after the cancel", static_cast<long long>(since_cancel.elapsed()));
  QCOMPARE(finished.count(), 1);
  QVERIFY(view.report() == nullptr);
  QCOMPARE(view.table()->model()->rowCount(), 0);
  QCOMPARE(view.paretoSeries()->count(), 0);
  QVERIFY(view.statusLabel()->text().contains(QStringLiteral("cancelled")));

  // A new search after a cancelled one runs to the end.
  view.startSearch();
  QTRY_VERIFY_WITH_TIMEOUT(!view.busy(), 120000);
  QVERIFY(view.table()->model()->rowCount() > 0);
}

void PlannerTest::eventLoopNeverBlocksDuringALongSearch() {
  ScenarioDocument doc;
  QVERIFY(open_small(doc));
  // Five global batches and eight engine runs: five times the space (112,000 layouts),
  // seconds of search on every core.
  QVERIFY(doc.setValue({"search", "global_batch"}, nlohmann::json::array({64, 128, 256, 512, 1024})));
  QVERIFY(doc.setValue({"search", "top_k"}, 8));
  PlannerView view(&doc);
  view.resize(1400, 900);
  view.show();
  QVERIFY(QTest::qWaitForWindowExposed(&view));

  // Two measures between consecutive 10 ms ticks: the GUI thread's own CPU time (work the
  // event loop did in one go: the responsiveness the view controls) and the wall-clock gap
  // (which also holds the time the OS gave other processes: on a two-core CI machine running
  // other tests beside this one, that alone reaches 100 ms, so it only has a loose bound).
  QElapsedTimer clock;
  qint64 last = -1, last_cpu = -1, worst = 0, worst_cpu = 0;
  QTimer tick;
  tick.setInterval(10);
  qint64 worst_at = 0, worst_cpu_at = 0, finished_at = -1;
  connect(&tick, &QTimer::timeout, &view, [&] {
    const qint64 now = clock.elapsed();
    const qint64 cpu = thread_cpu_ms();
    if (last >= 0 && now - last > worst) {
      worst = now - last;
      worst_at = now;
    }
    if (last_cpu >= 0 && cpu - last_cpu > worst_cpu) {
      worst_cpu = cpu - last_cpu;
      worst_cpu_at = now;
    }
    last = now;
    last_cpu = cpu;
  });
  connect(&view, &PlannerView::searchFinished, &view, [&] { finished_at = clock.elapsed(); });
  clock.start();
  tick.start();
  view.startSearch();
  QTRY_VERIFY_WITH_TIMEOUT(!view.busy(), 300000);
  QTest::qWait(300);  // the table and chart repaint with the result
  tick.stop();
  const qint64 took = clock.elapsed();
  qInfo("search %lld ms, with display %lld ms; largest gap between 10 ms ticks %lld ms wall (ending at %lld ms), "
        "%lld ms of GUI-thread CPU (ending at %lld ms); %d rows",
        static_cast<long long>(finished_at), static_cast<long long>(took), static_cast<long long>(worst),
        static_cast<long long>(worst_at), static_cast<long long>(worst_cpu), static_cast<long long>(worst_cpu_at),
        view.table()->model()->rowCount());
  QVERIFY(view.table()->model()->rowCount() > 0);
  QVERIFY(view.paretoSeries()->count() > 0);
  QVERIFY2(worst_cpu < kGuiBudgetMs,
           qPrintable(QStringLiteral("the event loop worked %1 ms without returning").arg(worst_cpu)));
  QVERIFY2(worst < 1000, qPrintable(QStringLiteral("the event loop was blocked for %1 ms").arg(worst)));
}

QTEST_MAIN(PlannerTest)
#include "planner_test.moc"

// The collectives view against app::run_collective called directly (the oracle) and a hand
// calculation: the table's rows and numbers, one busbw curve per row whose last point is the
// row itself, the controls' request (cluster, algorithm, NCCL protocol), bad input shown as a
// message, and the scenario's cluster withdrawn while the scenario is invalid.
#include <QtTest>

#include <QComboBox>
#include <QLabel>
#include <QLineEdit>
#include <QLineSeries>
#include <QSpinBox>
#include <QStandardItemModel>
#include <QTableWidget>

#include "collectives_view.h"
#include "document.h"
#include "stepcast/app/collective.h"

using stepcast::gui::CollectivesView;
using stepcast::gui::ScenarioDocument;

namespace {

const char* kScenario = STEPCAST_SOURCE_DIR "/scenarios/llama3-70b-64xh100.json";

bool open(ScenarioDocument& doc) {
  QString error;
  if (!doc.open(QString::fromUtf8(kScenario), &error)) {
    qWarning() << error;
    return false;
  }
  return doc.scenario().has_value();
}

void choose(QComboBox* box, const QString& text) {
  const int i = box->findText(text);
  QVERIFY2(i >= 0, qPrintable(text));
  box->setCurrentIndex(i);
}

void set_size(CollectivesView& view, const QString& size) {
  view.sizeEdit()->setText(size);
  emit view.sizeEdit()->editingFinished();
}

}  // namespace

class CollectivesTest : public QObject {
  Q_OBJECT

 private slots:
  void tableAndCurvesMatchADirectRun();
  void allGatherOnSimpleMatchesTheHandCalculation();
  void badInputIsAMessageAndNoRows();
  void anInvalidScenarioFallsBackToAPreset();
  void thePlansGroupsSetGpusAndStride();
};

void CollectivesTest::tableAndCurvesMatchADirectRun() {
  ScenarioDocument doc;
  QVERIFY(open(doc));
  CollectivesView view(&doc);
  // Defaults: all_reduce of 1 GiB on 64 GPUs of the scenario's cluster, every algorithm.
  QCOMPARE(view.clusterBox()->currentIndex(), 0);
  QVERIFY2(view.report() != nullptr, qPrintable(view.messageLabel()->text()));

  stepcast::app::CollectiveRequest q;
  q.kind = stepcast::CollKind::kAllReduce;
  q.size_bytes = std::int64_t{1} << 30;
  q.gpus = 64;
  q.cluster_file = stepcast::app::ScenarioInput::file(kScenario);
  auto direct = stepcast::app::run_collective(q);
  QVERIFY2(direct.ok(), direct.ok() ? "" : direct.error().message.c_str());
  const auto& rows = direct->algorithms;
  QCOMPARE(view.table()->rowCount(), static_cast<int>(rows.size()));
  QVERIFY(rows.size() >= 2);  // ring and tree across 8 nodes, and the hierarchical what-if
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const int at = static_cast<int>(i);
    const QString label = QString::fromStdString(stepcast::app::collective_row_label(rows[i])) +
                          (rows[i].is_auto ? QStringLiteral(" *") : QString());
    QCOMPARE(view.table()->item(at, 0)->text(), label);
    QCOMPARE(view.table()->item(at, 1)->text(), QString::number(rows[i].time_s * 1e6, 'f', 2));
    QCOMPARE(view.table()->item(at, 3)->text(), QString::number(rows[i].busbw_GBps, 'f', 2));
    QCOMPARE(view.report()->algorithms[i].time_s, rows[i].time_s);
  }

  // One curve per row: 8 B doubling up to 1 GiB is 28 sizes, and its last point is the row
  // priced on its own at 1 GiB (a second path through the model: the sweep).
  QCOMPARE(view.curves().size(), rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const QLineSeries* s = view.curves()[i];
    QCOMPARE(s->count(), 28);
    QCOMPARE(s->at(0).x(), 3.0);   // log2(8 B)
    QCOMPARE(s->at(27).x(), 30.0);  // log2(1 GiB)
    QVERIFY(qFuzzyCompare(s->at(27).y(), rows[i].busbw_GBps));
  }
  // The all-reduce's busbw rises with the size: latency-bound at 8 B, near the links at 1 GiB.
  QVERIFY(view.curves()[0]->at(0).y() < 0.01 * view.curves()[0]->at(27).y());
}

void CollectivesTest::allGatherOnSimpleMatchesTheHandCalculation() {
  ScenarioDocument doc;
  QVERIFY(open(doc));
  CollectivesView view(&doc);
  choose(view.clusterBox(), QStringLiteral("dgx-h100"));
  choose(view.kindBox(), QStringLiteral("all_gather"));
  set_size(view, QStringLiteral("1MB"));
  view.gpusBox()->setValue(32);
  choose(view.algoBox(), QStringLiteral("ring"));
  choose(view.protoBox(), QStringLiteral("Simple"));
  QVERIFY2(view.report() != nullptr, qPrintable(view.messageLabel()->text()));
  // 10^6 B over 32 GPUs = 4 nodes of 8 of dgx-h100, ring, NCCL_PROTO=Simple: 31 steps, 3 of
  // them between nodes: 8.4 + 28 x 3.4 + 3 x 14.0 = 145.6 us, plus 31/32 x 10^6 B over a
  // node's 8 x 400 Gb/s NICs x 0.9 = 360 GB/s: 2.69 us.
  const double hand_us = 8.4 + 28 * 3.4 + 3 * 14.0 + 31.0 / 32.0 * 1e6 / 360e9 * 1e6;
  QCOMPARE(view.table()->rowCount(), 1);
  QCOMPARE(view.table()->item(0, 0)->text(), QStringLiteral("ring (Simple) *"));
  QCOMPARE(view.table()->item(0, 1)->text(), QString::number(hand_us, 'f', 2));
  QCOMPARE(view.table()->item(0, 1)->text(), QStringLiteral("148.29"));
  QVERIFY(view.summaryLabel()->text().contains(QStringLiteral("NCCL_PROTO=Simple")));
  QVERIFY(view.summaryLabel()->text().contains(QStringLiteral("8 per node on 4 nodes")));
  // Back to the tuner's choice: LL128 at this size, faster.
  view.protoBox()->setCurrentIndex(0);
  QCOMPARE(view.table()->item(0, 0)->text(), QStringLiteral("ring (LL128) *"));
  QVERIFY(view.report()->algorithms[0].time_s < hand_us * 1e-6);
}

void CollectivesTest::badInputIsAMessageAndNoRows() {
  ScenarioDocument doc;
  QVERIFY(open(doc));
  CollectivesView view(&doc);
  QVERIFY(view.table()->rowCount() > 0);
  set_size(view, QStringLiteral("1XB"));
  QVERIFY(view.report() == nullptr);
  QVERIFY2(view.messageLabel()->text().startsWith(QStringLiteral("Size: expected a size")),
           qPrintable(view.messageLabel()->text()));
  QCOMPARE(view.table()->rowCount(), 0);
  QVERIFY(view.curves().empty());
  QVERIFY(view.summaryLabel()->text().isEmpty());
  // A valid size again; then a protocol NCCL's tuner does not price for send/recv.
  set_size(view, QStringLiteral("64MiB"));
  QVERIFY(view.report() != nullptr);
  QVERIFY(view.messageLabel()->text().isEmpty());
  choose(view.kindBox(), QStringLiteral("send_recv"));
  choose(view.protoBox(), QStringLiteral("LL"));
  QVERIFY(view.report() == nullptr);
  QVERIFY2(view.messageLabel()->text().startsWith(QStringLiteral("--proto: NCCL's tuner prices protocols")),
           qPrintable(view.messageLabel()->text()));
  // More GPUs than the scenario's 8 nodes hold.
  view.protoBox()->setCurrentIndex(0);
  choose(view.kindBox(), QStringLiteral("all_reduce"));
  view.gpusBox()->setValue(128);
  QVERIFY(view.report() == nullptr);
  QVERIFY2(view.messageLabel()->text().startsWith(QStringLiteral("--gpus:")),
           qPrintable(view.messageLabel()->text()));
}

void CollectivesTest::anInvalidScenarioFallsBackToAPreset() {
  ScenarioDocument doc;
  QVERIFY(open(doc));
  CollectivesView view(&doc);
  QCOMPARE(view.clusterBox()->currentIndex(), 0);
  QVERIFY(doc.setValue({"plan", "tp"}, 3));
  QVERIFY(!doc.scenario().has_value());
  auto* model = qobject_cast<QStandardItemModel*>(view.clusterBox()->model());
  QVERIFY(model != nullptr);
  QVERIFY(!model->item(0)->isEnabled());
  QCOMPARE(view.clusterBox()->currentText(), QStringLiteral("dgx-h100"));
  QVERIFY(view.report() != nullptr);
  QCOMPARE(QString::fromStdString(view.report()->cluster_label), QStringLiteral("dgx-h100"));
  // Valid again: offered again (the preset stays chosen until the user picks the scenario's).
  doc.undoStack()->undo();
  QVERIFY(doc.scenario().has_value());
  QVERIFY(model->item(0)->isEnabled());
}

void CollectivesTest::thePlansGroupsSetGpusAndStride() {
  ScenarioDocument doc;
  QVERIFY(open(doc));
  CollectivesView view(&doc);
  // tp 8, pp 4, dp 2 in Megatron's order (tp innermost): the TP group is 8 consecutive
  // GPUs, the DP group 2 GPUs 8 apart; cp and ep are 1 (no group).
  QCOMPARE(view.groupBox()->count(), 3);
  QCOMPARE(view.groupBox()->itemText(1), QStringLiteral("TP group: 8 GPUs, stride 1"));
  QCOMPARE(view.groupBox()->itemText(2), QStringLiteral("DP group: 2 GPUs, stride 8"));
  choose(view.groupBox(), QStringLiteral("DP group: 2 GPUs, stride 8"));
  QCOMPARE(view.gpusBox()->value(), 2);
  QCOMPARE(view.strideBox()->value(), 8);
  QVERIFY(view.report() != nullptr);
  QCOMPARE(view.report()->shape.ranks_per_node, 1);  // one rank on each of two nodes
  QCOMPARE(view.report()->shape.nodes, 2);
  // The plan changes: the DP group stays chosen, with its new size and stride.
  const ScenarioDocument::Edits edits{{{"plan", "tp"}, 4}, {{"plan", "dp"}, 4}};
  QVERIFY(doc.setValues(edits, QStringLiteral("tp 4, dp 4")));
  QVERIFY2(doc.scenario().has_value(), qPrintable(doc.error()));
  QCOMPARE(view.groupBox()->currentText(), QStringLiteral("DP group: 4 GPUs, stride 4"));
  QCOMPARE(view.gpusBox()->value(), 4);
  QCOMPARE(view.strideBox()->value(), 4);
  QCOMPARE(view.report()->ranks, 4);
  // GPUs edited by hand: no longer the plan's group.
  view.gpusBox()->setValue(16);
  QCOMPARE(view.groupBox()->currentIndex(), 0);
  QCOMPARE(view.report()->ranks, 16);
}

QTEST_MAIN(CollectivesTest)
#include "collectives_test.moc"

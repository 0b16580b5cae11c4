// The reliability view on the Daly-limit scenario, against Young's formula computed here
// from the scenario's own numbers: the marked intervals, what the sliders write into the
// document (and undo), the curve's maximum, and the messages when inputs are missing; the
// checkpoint group's contents, sharded and mode controls against checkpoint_cost.
#include <QtTest>

#include <cmath>

#include <QCheckBox>
#include <QComboBox>
#include <QLabel>
#include <QLineSeries>
#include <QSlider>
#include <nlohmann/json.hpp>

#include "document.h"
#include "reliability_view.h"
#include "stepcast/models/reliability.h"

using stepcast::CheckpointCost;
using stepcast::CheckpointMode;
using stepcast::CheckpointSpec;
using stepcast::kAllStateParts;
using stepcast::Scenario;
using stepcast::state_part_name;
using stepcast::StatePart;
using stepcast::gui::ReliabilityView;
using stepcast::gui::ScenarioDocument;

namespace {

const char* kScenario = STEPCAST_SOURCE_DIR "/scenarios/llama3-8b-16xh100-daly-limit.json";
constexpr int kTimeoutMs = 120000;

bool open(ScenarioDocument& doc) {
  QString error;
  if (!doc.open(QString::fromUtf8(kScenario), &error)) {
    qWarning() << error;
    return false;
  }
  return doc.scenario().has_value();
}

double number(const ScenarioDocument& doc, const std::vector<std::string>& path) {
  const auto* v = doc.value(path);
  return v && v->is_number() ? v->get<double>() : std::nan("");
}

// The scenario's job MTBF, s: its one failure cause (software, per node-hour) on its nodes.
double mtbf_s(const ScenarioDocument& doc) {
  return 3600.0 / (number(doc, {"faults", "failures", "software", "rate_per_node_h"}) * number(doc, {"cluster", "nodes"}));
}

// The sync pause delta: 112.42 GB of checkpoint (the scenario's comment, `stepcast
// checkpoint`) over the store's write rate.
double delta_s(const ScenarioDocument& doc) { return 112.424 / number(doc, {"cluster", "storage", "write_GBps"}); }

bool near(double a, double b, double rel) { return std::abs(a - b) <= rel * std::abs(b); }

// The models' cost of one checkpoint of `s` with `spec` (what the checkpoint use case calls).
CheckpointCost cost_of(const Scenario& s, const CheckpointSpec& spec) {
  return stepcast::checkpoint_cost(s.model, s.cluster, s.plan, s.workload, spec);
}

constexpr auto kOptimizer = static_cast<std::size_t>(StatePart::kOptimizer);

}  // namespace

class ReliabilityTest : public QObject {
  Q_OBJECT

 private slots:
  void youngMarkerIsYoungsFormulaAndFollowsTheMtbfSlider();
  void writeBandwidthSliderHalvesThePause();
  void curveMaximumIsAtTheMarkedOptimum();
  void missingInputsAreNamedAndTheSlidersDisabled();
  void uncheckingTheOptimizerShrinksTheCheckpointAndMovesYoung();
  void theLastSavedPartCannotBeUnchecked();
  void shardedAndModeEditTheCheckpointSection();
};

void ReliabilityTest::youngMarkerIsYoungsFormulaAndFollowsTheMtbfSlider() {
  ScenarioDocument doc;
  QVERIFY(open(doc));
  ReliabilityView view(&doc);
  QTRY_VERIFY_WITH_TIMEOUT(!view.busy() && view.report() != nullptr, kTimeoutMs);
  QVERIFY(view.messageLabel()->text().isEmpty());

  // Young (1974): tau = sqrt(2 delta M); the scenario's comment: delta = 28.106 s, M = 3600 s, 449.8 s.
  const double m = mtbf_s(doc);
  QCOMPARE(m, 3600.0);
  const double young = std::sqrt(2 * delta_s(doc) * m);
  QVERIFY(near(young, 449.8, 1e-3));
  QCOMPARE(view.youngMarker()->count(), 2);
  const double marked = view.youngMarker()->at(0).x();
  QVERIFY2(near(marked, young, 2e-4), qPrintable(QStringLiteral("Young marked at %1 s, formula %2 s").arg(marked).arg(young)));
  QCOMPARE(view.youngMarker()->at(1).x(), marked);  // a vertical line

  // Drag the MTBF slider two octaves up: M x 4, so Young's interval x 2 (sqrt(4)).
  const std::string before = doc.text();
  const double rate = number(doc, {"faults", "failures", "software", "rate_per_node_h"});
  QSlider* s = view.mtbfSlider();
  QVERIFY(s->isEnabled());
  for (int i = 1; i <= 2 * ReliabilityView::kLogStepsPerOctave; ++i) s->setValue(s->value() + 1);  // a drag
  QTRY_VERIFY_WITH_TIMEOUT(!view.busy(), kTimeoutMs);
  QCOMPARE(number(doc, {"faults", "failures", "software", "rate_per_node_h"}), rate / 4);
  QCOMPARE(mtbf_s(doc), 4 * m);
  QVERIFY2(near(view.youngMarker()->at(0).x(), 2 * marked, 1e-9),
           qPrintable(QStringLiteral("Young moved to %1 s from %2 s").arg(view.youngMarker()->at(0).x()).arg(marked)));
  QVERIFY(view.knob(ReliabilityView::kMtbf).label->text().startsWith(QStringLiteral("M = 4 h")));

  // The whole drag was one edit: one undo restores the text and the marker.
  doc.undoStack()->undo();
  QVERIFY(doc.text() == before);
  QCOMPARE(number(doc, {"faults", "failures", "software", "rate_per_node_h"}), rate);
  QTRY_VERIFY_WITH_TIMEOUT(!view.busy(), kTimeoutMs);
  QVERIFY(near(view.youngMarker()->at(0).x(), marked, 1e-9));
}

void ReliabilityTest::writeBandwidthSliderHalvesThePause() {
  ScenarioDocument doc;
  QVERIFY(open(doc));
  ReliabilityView view(&doc);
  QTRY_VERIFY_WITH_TIMEOUT(!view.busy() && view.report() != nullptr, kTimeoutMs);
  const double young = std::sqrt(2 * delta_s(doc) * mtbf_s(doc));
  QSlider* s = view.writeBandwidthSlider();
  s->setValue(s->value() + ReliabilityView::kLogStepsPerOctave);  // one octave: 4 -> 8 GB/s
  QTRY_VERIFY_WITH_TIMEOUT(!view.busy(), kTimeoutMs);
  QCOMPARE(number(doc, {"cluster", "storage", "write_GBps"}), 8.0);
  // The write is storage-bound, so delta halves and Young's interval shrinks by sqrt(2).
  const double expected = std::sqrt(2 * delta_s(doc) * mtbf_s(doc));
  QVERIFY(near(expected, young / std::sqrt(2.0), 1e-9));
  QVERIFY2(near(view.youngMarker()->at(0).x(), expected, 2e-4),
           qPrintable(QStringLiteral("Young %1 s, expected %2 s").arg(view.youngMarker()->at(0).x()).arg(expected)));
}

void ReliabilityTest::curveMaximumIsAtTheMarkedOptimum() {
  ScenarioDocument doc;
  QVERIFY(open(doc));
  ReliabilityView view(&doc);
  QTRY_VERIFY_WITH_TIMEOUT(!view.busy() && view.report() != nullptr, kTimeoutMs);
  const QLineSeries* curve = view.curve();
  QVERIFY(curve->count() >= 5);
  int best = 0;
  for (int i = 1; i < curve->count(); ++i) {
    QVERIFY(curve->at(i).x() > curve->at(i - 1).x());  // ascending interval
    if (curve->at(i).y() > curve->at(best).y()) best = i;
  }
  QCOMPARE(view.optimumMarker()->count(), 2);
  const double optimum = view.optimumMarker()->at(0).x();
  // The sweep holds the optimum rounded to whole steps, and the optimum is the fitted
  // minimum of the wall time around the best grid point: it lies between the neighbours of
  // the curve's highest point, and the sweep point nearest it is as high as the highest to
  // within the curve's flatness there (0.05 percentage points; the top is flat: two points
  // 2.6 s apart differ by 0.006).
  int nearest = 0;
  for (int i = 1; i < curve->count(); ++i) {
    if (std::abs(curve->at(i).x() - optimum) < std::abs(curve->at(nearest).x() - optimum)) nearest = i;
  }
  qInfo("curve maximum %.3f%% at %.1f s; marked optimum %.1f s (%.3f%% there)", curve->at(best).y(),
        curve->at(best).x(), optimum, curve->at(nearest).y());

  QVERIFY(best > 0 && best + 1 < curve->count());
  // The sweep point that stands for the optimum (rounded to whole steps, so within a step
  // of it: under 1 %) is the highest point or, on a flat top, its neighbour.
  QVERIFY(std::abs(nearest - best) <= 1);
  QVERIFY(std::abs(curve->at(nearest).x() - optimum) < 0.01 * optimum);
  QVERIFY(curve->at(best - 1).x() < optimum + 0.01 * optimum && optimum < curve->at(best + 1).x());
  QVERIFY(curve->at(nearest).y() > curve->at(best).y() - 0.05);
  // Daly's and Young's lines are marked too, Daly's below Young's (Daly's correction).
  QVERIFY(view.dalyMarker()->at(0).x() < view.youngMarker()->at(0).x());
  QVERIFY(view.recommendationLabel()->text().contains(QStringLiteral("sync")));
  // The time to train carries the step time's band too (the CLI's time_to_train_band_h).
  const auto& adv = *view.report()->advice;
  QVERIFY(adv.step_time_band.has_value());
  const stepcast::Band b =
      stepcast::planner::time_to_train_band(adv.recommended.sim.wall_s, adv.step_time_s, *adv.step_time_band);
  QVERIFY(view.recommendationLabel()->text().contains(QStringLiteral("(p10-p90 %1 - %2 days with the step time's band)")
                                                          .arg(b.p10 / 86400, 0, 'f', 2)
                                                          .arg(b.p90 / 86400, 0, 'f', 2)));
}

void ReliabilityTest::missingInputsAreNamedAndTheSlidersDisabled() {
  ScenarioDocument doc;
  QVERIFY(open(doc));
  ReliabilityView view(&doc);
  QTRY_VERIFY_WITH_TIMEOUT(!view.busy() && view.report() != nullptr, kTimeoutMs);
  QVERIFY(doc.removeValue({"faults"}));
  QVERIFY(doc.scenario().has_value());
  QVERIFY2(view.messageLabel()->text().contains(QStringLiteral("faults.failures")),
           qPrintable(view.messageLabel()->text()));
  QVERIFY(!view.mtbfSlider()->isEnabled());
  QVERIFY(!view.writeBandwidthSlider()->isEnabled());
  QVERIFY(!view.detectionSlider()->isEnabled());
  QCOMPARE(view.curve()->count(), 0);
  QVERIFY(!view.busy());

  doc.undoStack()->undo();
  QTRY_VERIFY_WITH_TIMEOUT(!view.busy() && view.report() != nullptr, kTimeoutMs);
  QVERIFY(view.mtbfSlider()->isEnabled());
  QVERIFY(doc.removeValue({"workload", "train_tokens"}));
  QVERIFY2(view.messageLabel()->text().contains(QStringLiteral("workload.train_tokens")),
           qPrintable(view.messageLabel()->text()));
  QVERIFY(!view.initSlider()->isEnabled());
  QVERIFY(!view.partBox(StatePart::kOptimizer)->isEnabled());
  QVERIFY(!view.shardedBox()->isEnabled());
  QVERIFY(!view.modeBox()->isEnabled());
  doc.undoStack()->undo();
  QTRY_VERIFY_WITH_TIMEOUT(!view.busy() && view.report() != nullptr, kTimeoutMs);
  QVERIFY(view.partBox(StatePart::kConfig)->isEnabled());
  QVERIFY(view.shardedBox()->isEnabled());
  QVERIFY(view.modeBox()->isEnabled());
}

void ReliabilityTest::uncheckingTheOptimizerShrinksTheCheckpointAndMovesYoung() {
  ScenarioDocument doc;
  QVERIFY(open(doc));
  ReliabilityView view(&doc);
  QTRY_VERIFY_WITH_TIMEOUT(!view.busy() && view.report() != nullptr, kTimeoutMs);
  QVERIFY(doc.value({"checkpoint"}) == nullptr);  // the default: every part, sharded, sync
  for (StatePart p : kAllStateParts) {
    QVERIFY(view.partBox(p)->isChecked());
    QVERIFY(view.partBox(p)->isEnabled());
  }
  QVERIFY(view.shardedBox()->isChecked());
  QCOMPARE(view.modeBox()->currentText(), QStringLiteral("sync"));

  // The oracle: the models' cost of the scenario as loaded, all parts (the 112.42 GB of the
  // scenario's comment), sync; the view shows that size and recommends sync.
  const Scenario scenario = *doc.scenario();
  const CheckpointCost before_cost = cost_of(scenario, CheckpointSpec{});
  QVERIFY(near(before_cost.total_bytes, 112.42e9, 1e-4));
  QCOMPARE(view.checkpointBytes(), before_cost.total_bytes);
  QVERIFY2(view.sizeLabel()->text().startsWith(QStringLiteral("112.42 GB per checkpoint")),
           qPrintable(view.sizeLabel()->text()));
  QCOMPARE(view.report()->advice->mode, CheckpointMode::kSync);
  const double young = view.youngMarker()->at(0).x();
  const double sync_young = view.report()->advice->sync.young_s;
  QCOMPARE(young, sync_young);

  const std::string before = doc.text();
  const int steps = doc.undoStack()->count();
  view.partBox(StatePart::kOptimizer)->click();
  QTRY_VERIFY_WITH_TIMEOUT(!view.busy() && view.report() != nullptr, kTimeoutMs);
  QCOMPARE(doc.undoStack()->count(), steps + 1);  // one edit
  QVERIFY(!view.partBox(StatePart::kOptimizer)->isChecked());

  // The document lists every part but the optimizer, in order.
  nlohmann::ordered_json expected = nlohmann::ordered_json::array();
  for (StatePart p : kAllStateParts) {
    if (p != StatePart::kOptimizer) expected.push_back(state_part_name(p));
  }
  const auto* contents = doc.value({"checkpoint", "contents"});
  QVERIFY(contents != nullptr);
  QVERIFY2(*contents == expected, contents->dump().c_str());

  // The size drops by exactly the optimizer's bytes of the original cost (96.36 GB).
  const double shown = view.checkpointBytes();
  const double optimizer_bytes = before_cost.part_bytes[kOptimizer];
  QVERIFY(optimizer_bytes > 9e10);
  QVERIFY2(near(shown, before_cost.total_bytes - optimizer_bytes, 1e-12),
           qPrintable(QStringLiteral("shown %1 B, expected %2 B")
                          .arg(shown, 0, 'g', 17)
                          .arg(before_cost.total_bytes - optimizer_bytes, 0, 'g', 17)));
  CheckpointSpec without;
  without.contents.erase(without.contents.begin() + static_cast<std::ptrdiff_t>(kOptimizer));
  const CheckpointCost after_cost = cost_of(scenario, without);
  QCOMPARE(shown, after_cost.total_bytes);
  QVERIFY2(view.sizeLabel()->text().startsWith(QStringLiteral("16.06 GB per checkpoint")),
           qPrintable(view.sizeLabel()->text()));

  // Young's interval sqrt(2 delta M) with M unchanged: the sync line by sqrt of the write
  // times' ratio; the marked line (the recommended mode's) by sqrt of its pause's ratio.
  QVERIFY(after_cost.write_s < before_cost.write_s);
  QVERIFY(near(view.report()->advice->sync.young_s, sync_young * std::sqrt(after_cost.write_s / before_cost.write_s),
               1e-9));
  const CheckpointMode mode = view.report()->advice->mode;
  CheckpointSpec recommended = without;
  recommended.mode = mode;
  const double delta = cost_of(scenario, recommended).pause_s;
  const double moved = young * std::sqrt(delta / before_cost.pause_s);
  qInfo("without the optimizer: %.6g B, %s recommended, delta %.4f s (was %.4f s), Young %.2f s (was %.2f s)", shown,
        mode == CheckpointMode::kAsync ? "async" : "sync", delta, before_cost.pause_s, moved, young);
  QVERIFY2(near(view.youngMarker()->at(0).x(), moved, 1e-9),
           qPrintable(QStringLiteral("Young at %1 s, expected %2 s").arg(view.youngMarker()->at(0).x()).arg(moved)));

  // Undo restores the text byte for byte, the box, the size and the marker.
  doc.undoStack()->undo();
  QVERIFY(doc.text() == before);
  QVERIFY(view.partBox(StatePart::kOptimizer)->isChecked());
  QTRY_VERIFY_WITH_TIMEOUT(!view.busy() && view.report() != nullptr, kTimeoutMs);
  QCOMPARE(view.checkpointBytes(), before_cost.total_bytes);
  QCOMPARE(view.youngMarker()->at(0).x(), young);
}

void ReliabilityTest::theLastSavedPartCannotBeUnchecked() {
  ScenarioDocument doc;
  QVERIFY(open(doc));
  ReliabilityView view(&doc);
  QTRY_VERIFY_WITH_TIMEOUT(!view.busy() && view.report() != nullptr, kTimeoutMs);
  // Leave out every part but "step", one box at a time (the boxes follow the document).
  for (StatePart p : kAllStateParts) {
    if (p != StatePart::kStep) view.partBox(p)->click();
  }
  QTRY_VERIFY_WITH_TIMEOUT(!view.busy() && view.report() != nullptr, kTimeoutMs);
  QVERIFY(*doc.value({"checkpoint", "contents"}) == nlohmann::ordered_json::array({"step"}));
  for (StatePart p : kAllStateParts) QCOMPARE(view.partBox(p)->isChecked(), p == StatePart::kStep);

  const std::string before = doc.text();
  const int steps = doc.undoStack()->count();
  view.partBox(StatePart::kStep)->click();  // the last one: refused
  QVERIFY(view.partBox(StatePart::kStep)->isChecked());
  QVERIFY(doc.text() == before);
  QCOMPARE(doc.undoStack()->count(), steps);
  view.partBox(StatePart::kStep)->setChecked(false);  // programmatically too
  QVERIFY(view.partBox(StatePart::kStep)->isChecked());
  QVERIFY(doc.text() == before);
  QVERIFY(!view.busy());

  // A part checked again joins the list in kAllStateParts order.
  view.partBox(StatePart::kModel)->click();
  QVERIFY(*doc.value({"checkpoint", "contents"}) == nlohmann::ordered_json::array({"model", "step"}));
  QTRY_VERIFY_WITH_TIMEOUT(!view.busy() && view.report() != nullptr, kTimeoutMs);
}

void ReliabilityTest::shardedAndModeEditTheCheckpointSection() {
  ScenarioDocument doc;
  QVERIFY(open(doc));
  ReliabilityView view(&doc);
  QTRY_VERIFY_WITH_TIMEOUT(!view.busy() && view.report() != nullptr, kTimeoutMs);
  const Scenario scenario = *doc.scenario();

  // Gathered to rank 0: the same bytes through one GPU's share of the NICs.
  view.shardedBox()->click();
  QTRY_VERIFY_WITH_TIMEOUT(!view.busy() && view.report() != nullptr, kTimeoutMs);
  QVERIFY(*doc.value({"checkpoint", "sharded"}) == false);
  CheckpointSpec gathered;
  gathered.sharded = false;
  const CheckpointCost cost = cost_of(scenario, gathered);
  QCOMPARE(view.report()->advice->sync_cost.write_s, cost.write_s);
  QVERIFY(view.sizeLabel()->text().contains(QStringLiteral("gathered to rank 0")));
  QVERIFY2(view.sizeLabel()->text().contains(QString::fromLatin1(cost.write_bound)),
           qPrintable(view.sizeLabel()->text()));

  view.modeBox()->setCurrentIndex(view.modeBox()->findText(QStringLiteral("async")));
  QTRY_VERIFY_WITH_TIMEOUT(!view.busy() && view.report() != nullptr, kTimeoutMs);
  QVERIFY(*doc.value({"checkpoint", "mode"}) == "async");
  QCOMPARE(doc.scenario()->checkpoint->mode, CheckpointMode::kAsync);

  // Undo twice: the text as opened, the controls as the document says.
  doc.undoStack()->undo();
  QCOMPARE(view.modeBox()->currentText(), QStringLiteral("sync"));
  doc.undoStack()->undo();
  QVERIFY(view.shardedBox()->isChecked());
  QVERIFY(doc.value({"checkpoint"}) == nullptr);
  QTRY_VERIFY_WITH_TIMEOUT(!view.busy() && view.report() != nullptr, kTimeoutMs);
}

QTEST_MAIN(ReliabilityTest)
#include "reliability_test.moc"

// The whole window, driven as a planner engineer would: open a shipped scenario, change the
// layout in the editor and see the estimate move, run the search and adopt its best layout,
// see the timeline of the adopted layout, save. Oracles: app::run_estimate / run_plan /
// run_simulate called directly on the same scenario text.
#include <QSpinBox>
#include <QTabWidget>
#include <QTableView>
#include <QTemporaryDir>
#include <QtTest>

#include "document.h"
#include "editor_view.h"
#include "estimate_panel.h"
#include "main_window.h"
#include "planner_view.h"
#include "stepcast/app/estimate.h"
#include "stepcast/app/plan.h"
#include "stepcast/planner/layout.h"
#include "timeline_view.h"

using namespace stepcast::gui;

namespace {

const QString kScenario = QStringLiteral(STEPCAST_SOURCE_DIR "/scenarios/plan/llama3-70b-64xh100.json");

void type_into(QSpinBox* spin, int value) {
  spin->setFocus();
  spin->selectAll();
  QTest::keyClicks(spin, QString::number(value));
  QTest::keyClick(spin, Qt::Key_Enter);
}

double direct_step(const std::string& text) {
  const auto s = stepcast::parse_scenario(text);
  if (!s) qFatal("%s", s.error().message.c_str());
  return stepcast::estimate(*s).step_time_s;
}

}  // namespace

class FlowTest : public QObject {
  Q_OBJECT

 private slots:
  void editSearchAdoptSimulateSave() {
    MainWindow w;
    QVERIFY(w.openFile(kScenario, true));
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    QVERIFY(w.windowTitle().startsWith(QStringLiteral("llama3-70b-64xh100.json - ")));
    ScenarioDocument* doc = w.document();
    // Two engine re-simulations instead of 20: the same search, in seconds.
    QVERIFY(doc->setValue({"search", "top_k"}, 2));
    QVERIFY(w.windowTitle().startsWith(QStringLiteral("llama3-70b-64xh100.json* - ")));

    // Edit tp and pp: the estimate follows the text.
    const double before = w.estimate()->report()->estimate.step_time_s;
    QCOMPARE(before, direct_step(doc->text()));
    type_into(qobject_cast<QSpinBox*>(w.editor()->fieldWidget("plan.tp")), 4);
    type_into(qobject_cast<QSpinBox*>(w.editor()->fieldWidget("plan.pp")), 8);
    QVERIFY(w.estimate()->report());
    QCOMPARE(w.estimate()->report()->estimate.step_time_s, direct_step(doc->text()));
    QVERIFY(w.estimate()->report()->estimate.step_time_s != before);

    // Search, adopt the best: back on the Scenario tab with the best layout in the editor.
    stepcast::app::PlanRequest request;
    request.scenario = stepcast::app::ScenarioInput::value(*doc->planScenario());
    const auto direct = stepcast::app::run_plan(request);
    QVERIFY(direct);
    const stepcast::Plan& best = direct->result.ranked[0].plan;
    w.tabs()->setCurrentWidget(w.planner());
    w.planner()->startSearch();
    QTRY_VERIFY_WITH_TIMEOUT(!w.planner()->busy(), 180000);
    QCOMPARE(w.planner()->table()->model()->rowCount(), static_cast<int>(direct->result.ranked.size()));
    w.planner()->table()->selectRow(0);
    w.planner()->adoptSelected();
    QCOMPARE(w.tabs()->currentIndex(), 0);
    QVERIFY2(doc->scenario(), qPrintable(doc->error()));
    QCOMPARE(stepcast::planner::layout_string(doc->scenario()->plan), stepcast::planner::layout_string(best));
    QCOMPARE(qobject_cast<QSpinBox*>(w.editor()->fieldWidget("plan.tp"))->value(), best.tp);
    QCOMPARE(qobject_cast<QSpinBox*>(w.editor()->fieldWidget("plan.cp"))->value(), best.cp);
    QCOMPARE(w.estimate()->report()->estimate.step_time_s, direct_step(doc->text()));

    // The timeline of the adopted layout: simulated when its tab is shown.
    w.tabs()->setCurrentWidget(w.timeline());
    QTRY_VERIFY_WITH_TIMEOUT(!w.timeline()->busy(), 120000);

    // Save: the file holds the edited text; the title loses its star.
    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("adopted.json"));
    QVERIFY(doc->save(path));
    QVERIFY(w.windowTitle().startsWith(QStringLiteral("adopted.json - ")));
    ScenarioDocument again;
    QVERIFY(again.open(path));
    QVERIFY(again.scenario());
    QCOMPARE(stepcast::planner::layout_string(again.scenario()->plan), stepcast::planner::layout_string(best));
  }

  void screenshotsOfEveryView() {
    MainWindow w;
    QVERIFY(w.openFile(QStringLiteral(STEPCAST_SOURCE_DIR "/scenarios/llama3-70b-64xh100.json"), true));
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    QTemporaryDir dir;
    QVERIFY(!w.saveScreenshots(dir.path(), {QStringLiteral("nonsense")}));
    QVERIFY(w.saveScreenshots(dir.path(), {QStringLiteral("scenario"), QStringLiteral("timeline")}, QStringLiteral("x-")));
    for (const char* name : {"x-scenario.png", "x-timeline.png"}) {
      QImage image(dir.filePath(QString::fromLatin1(name)));
      QVERIFY2(!image.isNull(), name);
      QCOMPARE(image.size(), w.size());
    }
  }
};

QTEST_MAIN(FlowTest)
#include "flow_test.moc"

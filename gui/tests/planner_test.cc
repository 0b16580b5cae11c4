#include <QtTest>

class PlannerTest : public QObject {
  Q_OBJECT
 private slots:
  void placeholder() { QVERIFY(true); }
};

QTEST_MAIN(PlannerTest)
#include "planner_test.moc"

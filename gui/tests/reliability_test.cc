#include <QtTest>

class ReliabilityTest : public QObject {
  Q_OBJECT
 private slots:
  void placeholder() { QVERIFY(true); }
};

QTEST_MAIN(ReliabilityTest)
#include "reliability_test.moc"

#include <QtTest>

class FlowTest : public QObject {
  Q_OBJECT
 private slots:
  void placeholder() { QVERIFY(true); }
};

QTEST_MAIN(FlowTest)
#include "flow_test.moc"

#include <QtTest>

class IncidentsTest : public QObject {
  Q_OBJECT
 private slots:
  void placeholder() { QVERIFY(true); }
};

QTEST_MAIN(IncidentsTest)
#include "incidents_test.moc"

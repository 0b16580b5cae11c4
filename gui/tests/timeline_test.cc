#include <QtTest>

class TimelineTest : public QObject {
  Q_OBJECT
 private slots:
  void placeholder() { QVERIFY(true); }
};

QTEST_MAIN(TimelineTest)
#include "timeline_test.moc"

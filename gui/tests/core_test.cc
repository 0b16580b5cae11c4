#include <QtTest>

class CoreTest : public QObject {
  Q_OBJECT
 private slots:
  void placeholder() { QVERIFY(true); }
};

QTEST_MAIN(CoreTest)
#include "core_test.moc"

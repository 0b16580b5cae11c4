#include <QtTest>

class EditorTest : public QObject {
  Q_OBJECT
 private slots:
  void placeholder() { QVERIFY(true); }
};

QTEST_MAIN(EditorTest)
#include "editor_test.moc"

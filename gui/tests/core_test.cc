// The GUI's document layer: in-place JSON edits (comments kept), the loader's messages by
// field, undo, save. Oracles: hand-written expected texts, and the loader itself.
#include <QTemporaryDir>
#include <QtTest>

#include <fstream>
#include <sstream>

#include "document.h"
#include "json_edit.h"
#include "stepcast/models/scenario.h"

using stepcast::gui::error_path;
using stepcast::gui::remove_json_member;
using stepcast::gui::ScenarioDocument;
using stepcast::gui::set_json_value;

namespace {

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

const std::string kScenario = std::string(STEPCAST_SOURCE_DIR) + "/scenarios/llama3-70b-64xh100.json";

}  // namespace

class CoreTest : public QObject {
  Q_OBJECT

 private slots:
  void replacesAValueAndKeepsComments() {
    const std::string text = "// head\n{\n  \"plan\": { \"tp\": 8, /* eight */ \"pp\": 4 }, // tail\n  \"x\": \"a,b\"\n}\n";
    const auto out = set_json_value(text, {"plan", "tp"}, "4");
    QVERIFY(out);
    QCOMPARE(*out, std::string("// head\n{\n  \"plan\": { \"tp\": 4, /* eight */ \"pp\": 4 }, // tail\n  \"x\": \"a,b\"\n}\n"));
    // A key inside a string or a comment is not a key.
    const auto str = set_json_value("{ \"a\": \"\\\"tp\\\": 1\", \"tp\": 2 }", {"tp"}, "3");
    QVERIFY(str);
    QCOMPARE(*str, std::string("{ \"a\": \"\\\"tp\\\": 1\", \"tp\": 3 }"));
  }

  void appendsAMemberAfterTheLastOneAndItsComment() {
    const std::string text = "{\n  \"plan\": {\n    \"tp\": 8,\n    \"pp\": 4 // four\n  }\n}";
    const auto out = set_json_value(text, {"plan", "zero"}, "1");
    QVERIFY(out);
    QCOMPARE(*out, std::string("{\n  \"plan\": {\n    \"tp\": 8,\n    \"pp\": 4, // four\n    \"zero\": 1\n  }\n}"));
    // One line: appended on it. Missing parents: nested objects.
    const auto one = set_json_value("{ \"cluster\": { \"preset\": \"dgx-h100\", \"nodes\": 2 } }",
                                    {"cluster", "storage", "write_GBps"}, "5");
    QVERIFY(one);
    QCOMPARE(*one, std::string("{ \"cluster\": { \"preset\": \"dgx-h100\", \"nodes\": 2, \"storage\": { \"write_GBps\": 5 } } }"));
    const auto empty = set_json_value("{}", {"seed"}, "7");
    QVERIFY(empty);
    QCOMPARE(*empty, std::string("{\"seed\": 7}"));
  }

  void removesMembersWithTheirCommas() {
    const std::string text = "{ \"a\": 1, \"b\": 2, \"c\": 3 }";
    QCOMPARE(*remove_json_member(text, {"b"}), std::string("{ \"a\": 1, \"c\": 3 }"));
    QCOMPARE(*remove_json_member(text, {"c"}), std::string("{ \"a\": 1, \"b\": 2 }"));
    QCOMPARE(*remove_json_member("{ \"a\": 1 }", {"a"}), std::string("{  }"));
    QCOMPARE(*remove_json_member(text, {"z"}), text);
  }

  void refusesWhatItCannotScan() {
    std::string error;
    QVERIFY(!set_json_value("{ \"a\": ", {"a"}, "1", &error));
    QVERIFY(!error.empty());
    QVERIFY(!set_json_value("{ \"a\": 1 /* open", {"a"}, "2", &error));
    QCOMPARE(error, std::string("unterminated comment"));
    QVERIFY(!set_json_value("{ \"model\": \"llama3-8b\" }", {"model", "num_layers"}, "2", &error));
    QCOMPARE(error, std::string("\"model\" is not an object"));
  }

  void errorPathsAreJsonPaths() {
    QCOMPARE(error_path("plan.tp: 3 does not divide num_attention_heads (64)"), std::string("plan.tp"));
    QCOMPARE(error_path("faults.failures[1].rate: must be > 0"), std::string("faults.failures[1].rate"));
    QCOMPARE(error_path("unexpected end of input: line 3"), std::string(""));
  }

  void documentEditsValidateAndUndo() {
    ScenarioDocument doc;
    QVERIFY(doc.open(QString::fromStdString(kScenario)));
    const std::string original = read(kScenario);
    QCOMPARE(doc.text(), original);
    QVERIFY(doc.scenario());
    QCOMPARE(doc.scenario()->plan.tp, 8);
    QVERIFY(!doc.modified());

    QSignalSpy changed(&doc, &ScenarioDocument::changed);
    QVERIFY(doc.setValue({"plan", "tp"}, 3));
    QCOMPARE(changed.count(), 1);
    QVERIFY(!doc.scenario());
    QVERIFY(doc.modified());
    // The loader's own message for the same text, line by line.
    std::string edited = original;
    edited.replace(edited.find("\"tp\": 8"), 7, "\"tp\": 3");
    QCOMPARE(doc.text(), edited);
    const auto direct = stepcast::parse_scenario(edited);
    QVERIFY(!direct);
    QCOMPARE(doc.error().toStdString(), direct.error().message);
    QCOMPARE(doc.fieldError("plan.tp"), QStringLiteral("3 does not divide num_attention_heads (64)"));
    QVERIFY(doc.fieldError("plan").startsWith(QStringLiteral("tp x pp x cp x dp = 3 x 4 x 1 x 2 = 24")));

    // Every comment line of the file is still there.
    std::istringstream lines(original);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("//", 0) == 0) QVERIFY2(doc.text().find(line) != std::string::npos, line.c_str());
    }

    doc.undoStack()->undo();
    QCOMPARE(doc.text(), original);
    QVERIFY(doc.scenario());
    QVERIFY(doc.error().isEmpty());
    QVERIFY(!doc.modified());
    doc.undoStack()->redo();
    QCOMPARE(doc.text(), edited);
  }

  void savesWhatItShowsAtomically() {
    QTemporaryDir dir;
    ScenarioDocument doc;
    QVERIFY(doc.open(QString::fromStdString(kScenario)));
    QVERIFY(doc.setValues(ScenarioDocument::Edits{{{"plan", "tp"}, 4}, {{"plan", "pp"}, 8}}, QStringLiteral("tp 4, pp 8")));
    QCOMPARE(doc.undoStack()->count(), 1);
    QVERIFY(doc.scenario());
    QCOMPARE(doc.scenario()->plan.pp, 8);
    const QString path = dir.filePath(QStringLiteral("s.json"));
    QVERIFY(doc.save(path));
    QVERIFY(!doc.modified());
    QCOMPARE(read(path.toStdString()), doc.text());
    ScenarioDocument again;
    QVERIFY(again.open(path));
    QCOMPARE(again.text(), doc.text());
    QString error;
    QVERIFY(!again.open(dir.filePath(QStringLiteral("missing.json")), &error));
    QVERIFY(error.contains(QStringLiteral("missing.json")));
  }

  void malformedTextKeepsTheLoadersMessage() {
    ScenarioDocument doc;
    doc.setText("{ \"format\": 1, ");
    QVERIFY(!doc.scenario());
    QVERIFY(!doc.error().isEmpty());
    QVERIFY(doc.json().is_null());
    // Edits refuse text they cannot scan instead of corrupting it.
    QVERIFY(!doc.setValue({"plan", "tp"}, 2));
    QCOMPARE(doc.text(), std::string("{ \"format\": 1, "));
  }
};

QTEST_MAIN(CoreTest)
#include "core_test.moc"

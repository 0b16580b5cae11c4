// The editor and the live estimate, driven as a user would (spin boxes, drop-downs) on a
// shipped scenario. Oracles: app::run_estimate on the same edit made to the text directly,
// the loader's message for that text, the preset catalogue.
#include <QBarSet>
#include <QChart>
#include <QCheckBox>
#include <QComboBox>
#include <QHorizontalStackedBarSeries>
#include <QLineEdit>
#include <QSpinBox>
#include <QtTest>

#include <fstream>
#include <sstream>

#include "document.h"
#include "editor_view.h"
#include "estimate_panel.h"
#include "stepcast/app/estimate.h"
#include "stepcast/models/presets.h"
#include "stepcast/models/scenario.h"
#include "stepcast/models/search.h"

using namespace stepcast::gui;

namespace {

const QString kScenario = QStringLiteral(STEPCAST_SOURCE_DIR "/scenarios/llama3-70b-64xh100.json");

std::string read(const QString& path) {
  std::ifstream in(path.toStdString(), std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const std::size_t at = text.find(from);
  if (at == std::string::npos) return "<" + from + " not found>";
  return text.replace(at, from.size(), to);
}

stepcast::Estimate direct(const std::string& text) {
  const auto s = stepcast::parse_scenario(text);
  if (!s) qFatal("%s", s.error().message.c_str());
  return stepcast::estimate(*s);
}

// Types a value into a spin box as a user would (select all, type, Enter).
void type_into(QSpinBox* spin, int value) {
  spin->setFocus();
  spin->selectAll();
  QTest::keyClicks(spin, QString::number(value));
  QTest::keyClick(spin, Qt::Key_Enter);
}

double bar_sum(QChart* chart, bool skip_free) {
  double sum = 0;
  for (QAbstractSeries* s : chart->series()) {
    for (QBarSet* set : static_cast<QHorizontalStackedBarSeries*>(s)->barSets()) {
      if (skip_free && set->label().startsWith(QStringLiteral("free"))) continue;
      sum += set->at(0);
    }
  }
  return sum;
}

}  // namespace

class EditorTest : public QObject {
  Q_OBJECT

 private slots:
  void init() {
    doc_ = new ScenarioDocument(this);
    QVERIFY(doc_->open(kScenario));
    window_ = new QWidget();
    editor_ = new EditorView(doc_, window_);
    estimate_ = new EstimatePanel(doc_, window_);
    window_->show();
    QVERIFY(QTest::qWaitForWindowExposed(window_));
  }
  void cleanup() {
    delete window_;
    delete doc_;
    window_ = nullptr;
    doc_ = nullptr;
  }

  void showsTheScenarioAndItsEstimate() {
    auto* tp = qobject_cast<QSpinBox*>(editor_->fieldWidget("plan.tp"));
    QVERIFY(tp);
    QCOMPARE(tp->value(), 8);
    // Values the file does not state show what the loader resolved (the preset's).
    QCOMPARE(qobject_cast<QSpinBox*>(editor_->fieldWidget("model.num_layers"))->value(), 80);
    QCOMPARE(qobject_cast<QComboBox*>(editor_->fieldWidget("model"))->currentText(), QStringLiteral("llama3-70b"));
    QVERIFY(estimate_->report());
    const stepcast::Estimate e = direct(read(kScenario));
    QCOMPARE(estimate_->report()->estimate.step_time_s, e.step_time_s);
    // The memory bar adds up to the worst rank's total; the breakdown bar to the step.
    constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
    QVERIFY(std::abs(bar_sum(estimate_->memoryChart(), true) - e.memory.total / kGiB) < 1e-9 * e.memory.total);
    QVERIFY(std::abs(bar_sum(estimate_->breakdownChart(), false) - e.step_time_s) < 1e-9 * e.step_time_s);
    // 70B on 64 GPUs fits (47.8 of 76.0 GiB): the label says so, not "does not fit".
    QVERIFY(e.memory.fits);
    QCOMPARE(estimate_->figure(QStringLiteral("fits")), QStringLiteral("fits"));
    qInfo("re-estimate took %.3f ms (target < 50 ms)", estimate_->lastUpdateMs());
  }

  void editingTpAndPpReEstimates() {
    type_into(qobject_cast<QSpinBox*>(editor_->fieldWidget("plan.tp")), 4);
    type_into(qobject_cast<QSpinBox*>(editor_->fieldWidget("plan.pp")), 8);
    QCOMPARE(doc_->undoStack()->count(), 2);
    // The same edit made to the text by hand, estimated without the GUI.
    const std::string text = replaced(read(kScenario), "\"tp\": 8, \"pp\": 4", "\"tp\": 4, \"pp\": 8");
    QCOMPARE(doc_->text(), text);
    QVERIFY(estimate_->report());
    const stepcast::Estimate e = direct(text);
    QCOMPARE(estimate_->report()->estimate.step_time_s, e.step_time_s);
    QVERIFY(e.step_time_s != direct(read(kScenario)).step_time_s);
    QVERIFY(estimate_->figure(QStringLiteral("step")).startsWith(QStringLiteral("%1 s").arg(e.step_time_s, 0, 'f', 3)));
  }

  void anInvalidValueShowsTheLoadersMessageBesideItsField() {
    type_into(qobject_cast<QSpinBox*>(editor_->fieldWidget("plan.tp")), 3);
    const auto s = stepcast::parse_scenario(replaced(read(kScenario), "\"tp\": 8", "\"tp\": 3"));
    QVERIFY(!s);
    const std::string first = s.error().message.substr(0, s.error().message.find('\n'));
    QCOMPARE(QStringLiteral("plan.tp: ") + editor_->fieldMessage("plan.tp"), QString::fromStdString(first));
    QVERIFY(editor_->fieldMessage("plan").startsWith(QStringLiteral("tp x pp x cp x dp = 3 x 4")));
    QVERIFY(!estimate_->report());
    doc_->undoStack()->undo();
    QCOMPARE(doc_->text(), read(kScenario));
    QCOMPARE(qobject_cast<QSpinBox*>(editor_->fieldWidget("plan.tp"))->value(), 8);
    QVERIFY(editor_->fieldMessage("plan.tp").isEmpty());
    QVERIFY(estimate_->report());
  }

  void aPresetFieldBecomesAnOverride() {
    auto* layers = qobject_cast<QSpinBox*>(editor_->fieldWidget("model.num_layers"));
    type_into(layers, 40);
    const nlohmann::ordered_json* model = doc_->value({"model"});
    QVERIFY(model && model->is_object());
    QCOMPARE(model->dump(), std::string("{\"preset\":\"llama3-70b\",\"num_layers\":40}"));
    QVERIFY(doc_->scenario());
    QCOMPARE(doc_->scenario()->model.num_layers, 40);
    QCOMPARE(doc_->scenario()->model.hidden_size, stepcast::builtin_presets().models.at("llama3-70b").hidden_size);
    // Choosing another preset keeps the override object and changes its preset.
    auto* combo = qobject_cast<QComboBox*>(editor_->fieldWidget("model"));
    combo->setCurrentText(QStringLiteral("llama3-8b"));
    emit combo->activated(combo->currentIndex());
    QCOMPARE(doc_->value({"model"})->dump(), std::string("{\"preset\":\"llama3-8b\",\"num_layers\":40}"));
    // The store bandwidth of a cluster given as {"preset", "nodes"}: a nested member.
    auto* write = qobject_cast<QLineEdit*>(editor_->fieldWidget("cluster.storage.write_GBps"));
    write->setText(QStringLiteral("5"));
    emit write->editingFinished();
    QVERIFY(doc_->scenario());
    QCOMPARE(doc_->scenario()->cluster.storage_write_GBps, 5.0);
    QCOMPARE(doc_->undoStack()->count(), 3);
  }

  void moeRoutingFieldsPriceTokenDropping() {
    // The shipped Qwen3-30B-A3B scenario: the load imbalance shows the preset's 1 and the
    // capacity factor nothing (dropless). Padding without a capacity is refused beside the
    // field (the loader's message); with capacity factor 1.25 the estimate is the same edit
    // made by hand to the text.
    const QString qwen = QStringLiteral(STEPCAST_SOURCE_DIR "/scenarios/qwen3-30b-a3b-ep8-16xh100.json");
    QVERIFY(doc_->open(qwen));
    auto* imbalance = qobject_cast<QLineEdit*>(editor_->fieldWidget("model.moe.load_imbalance"));
    auto* cf = qobject_cast<QLineEdit*>(editor_->fieldWidget("model.moe.capacity_factor"));
    auto* pad = qobject_cast<QCheckBox*>(editor_->fieldWidget("model.moe.pad_to_capacity"));
    QVERIFY(imbalance && cf && pad);
    QCOMPARE(imbalance->text(), QStringLiteral("1"));
    QVERIFY(cf->text().isEmpty());
    QVERIFY(!pad->isChecked());
    pad->click();
    QVERIFY(!doc_->scenario());
    QCOMPARE(editor_->fieldMessage("model.moe.pad_to_capacity"),
             QStringLiteral("needs capacity_factor (the capacity it pads to)"));
    cf->setText(QStringLiteral("1.25"));
    emit cf->editingFinished();
    QVERIFY(doc_->scenario());
    QCOMPARE(doc_->value({"model"})->dump(),
             std::string("{\"preset\":\"qwen3-30b-a3b\",\"moe\":{\"pad_to_capacity\":true,\"capacity_factor\":1.25}}"));
    const std::string by_hand = replaced(
        read(qwen), "\"model\": \"qwen3-30b-a3b\"",
        "\"model\": {\"preset\": \"qwen3-30b-a3b\", \"moe\": {\"capacity_factor\": 1.25, \"pad_to_capacity\": true}}");
    QVERIFY(estimate_->report());
    QCOMPARE(estimate_->report()->estimate.step_time_s, direct(by_hand).step_time_s);
    QVERIFY(estimate_->report()->estimate.step_time_s > direct(read(qwen)).step_time_s);
    // Emptied, the capacity factor is removed (dropless) and padding is refused again.
    cf->clear();
    emit cf->editingFinished();
    QVERIFY(!doc_->scenario());
    // On a dense model the MoE numbers show nothing.
    QVERIFY(doc_->open(kScenario));
    QVERIFY(imbalance->text().isEmpty());
    QVERIFY(cf->text().isEmpty());
  }

  void recomputeModulesAreAListField() {
    // Unset, the field shows Megatron-Core's default module; with recompute "none" a list
    // is refused beside the field (the loader's message); with "selective" it is written
    // as a JSON array and the estimate is the same edit made by hand.
    auto* mods = qobject_cast<QLineEdit*>(editor_->fieldWidget("plan.recompute_modules"));
    QVERIFY(mods);
    QCOMPARE(mods->text(), QStringLiteral("core_attn"));
    mods->setText(QStringLiteral("core_attn, mlp"));
    emit mods->editingFinished();
    QVERIFY(!doc_->scenario());
    QVERIFY(editor_->fieldMessage("plan.recompute_modules").startsWith(QStringLiteral("applies to recompute")));
    auto* rc = qobject_cast<QComboBox*>(editor_->fieldWidget("plan.recompute"));
    rc->setCurrentText(QStringLiteral("selective"));
    emit rc->activated(rc->currentIndex());
    QVERIFY(doc_->scenario());
    QCOMPARE(doc_->value({"plan", "recompute_modules"})->dump(), std::string("[\"core_attn\",\"mlp\"]"));
    const std::string text = replaced(read(kScenario), "\"recompute\": \"none\"",
                                      "\"recompute\": \"selective\", \"recompute_modules\": [\"core_attn\", \"mlp\"]");
    QVERIFY(estimate_->report());
    QCOMPARE(estimate_->report()->estimate.step_time_s, direct(text).step_time_s);
    QCOMPARE(mods->text(), QStringLiteral("core_attn, mlp"));
  }

  void recomputeLayersPerChunkIsAnIntegerField() {
    // Unset, the field shows 0 (every layer); a count with recompute "none" is refused beside
    // the field (the loader's message); with "full" it is written and the estimate is the
    // same edit made by hand, between no and full recomputation of all 20 layers a stage.
    auto* layers = qobject_cast<QSpinBox*>(editor_->fieldWidget("plan.recompute_num_layers"));
    QVERIFY(layers);
    QCOMPARE(layers->value(), 0);
    const double none = estimate_->report()->estimate.step_time_s;
    type_into(layers, 5);
    QVERIFY(!doc_->scenario());
    QVERIFY(
        editor_->fieldMessage("plan.recompute_num_layers").startsWith(QStringLiteral("applies to recompute \"full\"")));
    auto* rc = qobject_cast<QComboBox*>(editor_->fieldWidget("plan.recompute"));
    rc->setCurrentText(QStringLiteral("full"));
    emit rc->activated(rc->currentIndex());
    QVERIFY(doc_->scenario());
    QCOMPARE(doc_->scenario()->plan.recompute_num_layers, 5);
    const std::string text =
        replaced(read(kScenario), "\"recompute\": \"none\"", "\"recompute\": \"full\", \"recompute_num_layers\": 5");
    QVERIFY(estimate_->report());
    const double part = estimate_->report()->estimate.step_time_s;
    QCOMPARE(part, direct(text).step_time_s);
    QVERIFY(part > none);
    QVERIFY(part < direct(replaced(read(kScenario), "\"recompute\": \"none\"", "\"recompute\": \"full\"")).step_time_s);
  }

  void microbatchGroupIsAnOptionalIntegerField() {
    // Unset, the field shows 0 (pp). Interleaved with 10 microbatches on pp 4, the loader's
    // message at the global batch names the group that runs (5); typing it there writes
    // plan.microbatch_group_size_per_vp_stage and the estimate is the same edit made by hand;
    // 0 removes the key again.
    auto* group = qobject_cast<QSpinBox*>(editor_->fieldWidget("plan.microbatch_group_size_per_vp_stage"));
    QVERIFY(group);
    QCOMPARE(group->value(), 0);
    auto* schedule = qobject_cast<QComboBox*>(editor_->fieldWidget("plan.schedule"));
    schedule->setCurrentText(QStringLiteral("interleaved"));
    emit schedule->activated(schedule->currentIndex());
    type_into(qobject_cast<QSpinBox*>(editor_->fieldWidget("plan.virtual_stages")), 2);
    QVERIFY2(doc_->scenario(), qPrintable(doc_->error()));
    type_into(qobject_cast<QSpinBox*>(editor_->fieldWidget("plan.global_batch")), 20);
    QVERIFY(!doc_->scenario());
    QVERIFY(editor_->fieldMessage("plan.global_batch").endsWith(QStringLiteral("(e.g. 5)")));
    type_into(group, 5);
    QVERIFY2(doc_->scenario(), qPrintable(doc_->error()));
    QCOMPARE(doc_->value({"plan", "microbatch_group_size_per_vp_stage"})->dump(), std::string("5"));
    std::string text = replaced(read(kScenario), "\"schedule\": \"1f1b\"", "\"schedule\": \"interleaved\"");
    text = replaced(text, "\"virtual_stages\": 1", "\"virtual_stages\": 2, \"microbatch_group_size_per_vp_stage\": 5");
    text = replaced(text, "\"global_batch\": 64", "\"global_batch\": 20");
    QVERIFY(estimate_->report());
    QCOMPARE(estimate_->report()->estimate.step_time_s, direct(text).step_time_s);
    type_into(group, 0);
    QVERIFY(!doc_->value({"plan", "microbatch_group_size_per_vp_stage"}));
    QVERIFY(!doc_->scenario());
  }

  void recomputeMethodIsAChoiceField() {
    // Unset, the field shows "block"; with recompute "full", "uniform" and 2 layers per group
    // write plan.recompute_method and re-estimate as the same edit made by hand: the step
    // is full recomputation's, the activations fewer (10 group inputs of each stage's 20
    // layers per microbatch in flight, 2 layers live instead of 1).
    auto* method = qobject_cast<QComboBox*>(editor_->fieldWidget("plan.recompute_method"));
    QVERIFY(method);
    QCOMPARE(method->currentText(), QStringLiteral("block"));
    auto* rc = qobject_cast<QComboBox*>(editor_->fieldWidget("plan.recompute"));
    rc->setCurrentText(QStringLiteral("full"));
    emit rc->activated(rc->currentIndex());
    QVERIFY(doc_->scenario());
    const double full = estimate_->report()->estimate.step_time_s;
    const double full_act = estimate_->report()->estimate.memory.activations;
    method->setCurrentText(QStringLiteral("uniform"));
    emit method->activated(method->currentIndex());
    type_into(qobject_cast<QSpinBox*>(editor_->fieldWidget("plan.recompute_num_layers")), 2);
    QVERIFY(doc_->scenario());
    QCOMPARE(doc_->scenario()->plan.recompute_group(), 2);
    const stepcast::Estimate by_hand = direct(replaced(read(kScenario), "\"recompute\": \"none\"",
                                                       "\"recompute\": \"full\", \"recompute_method\": \"uniform\", "
                                                       "\"recompute_num_layers\": 2"));
    QCOMPARE(estimate_->report()->estimate.step_time_s, by_hand.step_time_s);
    QCOMPARE(estimate_->report()->estimate.memory.activations, by_hand.memory.activations);
    QCOMPARE(by_hand.step_time_s, full);
    QVERIFY(by_hand.memory.activations < full_act);
  }

  void searchSectionIsEditedAsLists() {
    // The shipped scenario has no search section: every search field shows its default
    // (empty, "(default)"). Typed lists are written as JSON arrays (numbers as numbers, "fit"
    // as a string) and the planner's reading of the document is the loader's reading of the
    // same section written by hand; a bad element is refused beside its field with the
    // loader's message; emptying a field removes its key, and so does the objective's
    // "(default)".
    QVERIFY(!doc_->value({"search"}));
    auto* tp = qobject_cast<QLineEdit*>(editor_->fieldWidget("search.tp"));
    auto* layers = qobject_cast<QLineEdit*>(editor_->fieldWidget("search.recompute_num_layers"));
    auto* methods = qobject_cast<QLineEdit*>(editor_->fieldWidget("search.recompute_method"));
    auto* objective = qobject_cast<QComboBox*>(editor_->fieldWidget("search.objective"));
    QVERIFY(tp && layers && methods && objective);
    QCOMPARE(tp->text(), QString());
    QCOMPARE(objective->currentText(), QStringLiteral("(default)"));
    auto type = [](QLineEdit* e, const char* text) {
      e->setText(QString::fromLatin1(text));
      emit e->editingFinished();
    };
    type(tp, "4, 8");
    type(layers, "0, fit");
    type(methods, "block, uniform");
    QVERIFY(doc_->scenario());
    QCOMPARE(doc_->value({"search"})->dump(),
             std::string(R"({"tp":[4,8],"recompute_num_layers":[0,"fit"],"recompute_method":["block","uniform"]})"));
    auto with_search = [](const std::string& search) {
      return replaced(read(kScenario), "\"seed\": 1,", "\"seed\": 1, \"search\": " + search + ",");
    };
    stepcast::LoadOptions as_planner;
    as_planner.plan_template = true;
    const auto by_hand = stepcast::parse_scenario(
        with_search(R"({"tp": [4, 8], "recompute_num_layers": [0, "fit"], "recompute_method": ["block", "uniform"]})"),
        as_planner);
    QVERIFY(by_hand && by_hand->search);
    QVERIFY(doc_->planScenario() && doc_->planScenario()->search);
    const stepcast::SearchSpec& q = *doc_->planScenario()->search;
    QVERIFY(q.tp == by_hand->search->tp);
    QVERIFY(q.tp == (std::vector<int>{4, 8}));
    QVERIFY(q.recompute_num_layers == by_hand->search->recompute_num_layers);
    QVERIFY(q.recompute_num_layers_fit && by_hand->search->recompute_num_layers_fit);
    QCOMPARE(q.recompute_method.size(), std::size_t{2});
    QVERIFY(q.recompute_method == by_hand->search->recompute_method);
    QCOMPARE(layers->text(), QStringLiteral("0, fit"));
    // Module sets: a list of lists, typed and shown as JSON.
    auto* sets = qobject_cast<QLineEdit*>(editor_->fieldWidget("search.recompute_modules"));
    QVERIFY(sets);
    type(sets, R"([["moe_act"], ["moe_act", "layernorm"]])");
    QCOMPARE(doc_->value({"search", "recompute_modules"})->dump(),
             std::string(R"([["moe_act"],["moe_act","layernorm"]])"));
    QCOMPARE(sets->text(), QStringLiteral(R"([["moe_act"],["moe_act","layernorm"]])"));
    type(sets, R"([["core_attn"], ["layernorm", "mlp"]])");
    QVERIFY2(doc_->scenario(), qPrintable(doc_->error()));
    QCOMPARE(doc_->planScenario()->search->recompute_modules.size(), std::size_t{2});
    type(sets, "");
    QVERIFY(doc_->scenario());
    QVERIFY(!doc_->value({"search", "recompute_modules"}));
    // A bad element: the loader's message beside the field.
    type(tp, "4, x");
    QVERIFY(!doc_->scenario());
    const QString message = editor_->fieldMessage("search.tp");
    QVERIFY(!message.isEmpty());
    const auto refused = stepcast::parse_scenario(with_search(R"({"tp": [4, "x"]})"));
    QVERIFY(!refused);
    QVERIFY2(refused.error().message.find(message.toStdString()) != std::string::npos, qPrintable(message));
    // Emptied: the key goes, the rest stays.
    type(tp, "");
    QVERIFY(doc_->scenario());
    QVERIFY(!doc_->value({"search", "tp"}));
    QVERIFY(doc_->value({"search", "recompute_method"}));
    // The objective: "cost" without a price is refused beside it; "(default)" removes it.
    objective->setCurrentText(QStringLiteral("cost"));
    emit objective->activated(objective->currentIndex());
    QVERIFY(!doc_->scenario());
    QVERIFY(editor_->fieldMessage("search.objective").contains(QStringLiteral("price_per_gpu_hour")));
    objective->setCurrentText(QStringLiteral("(default)"));
    emit objective->activated(objective->currentIndex());
    QVERIFY(doc_->scenario());
    QVERIFY(!doc_->value({"search", "objective"}));
    QCOMPARE(objective->currentText(), QStringLiteral("(default)"));
  }

  void pipelineLayoutIsAStringOrAList() {
    // The shipped scenario (llama3-70b, pp 4) has no layout: the field is empty. Megatron's
    // string is written as a string, comma-separated counts as a list; the document's
    // estimate is the one of the same scenario edited by hand; a wrong count is refused
    // beside the field with the loader's message; emptying the field removes the key.
    auto* layout = qobject_cast<QLineEdit*>(editor_->fieldWidget("plan.pipeline_layout"));
    QVERIFY(layout);
    QCOMPARE(layout->text(), QString());
    auto type = [](QLineEdit* e, const char* text) {
      e->setText(QString::fromLatin1(text));
      emit e->editingFinished();
    };
    type(layout, "Et*19|t*21|t*21|t*19L");
    QCOMPARE(doc_->value({"plan", "pipeline_layout"})->dump(), std::string(R"("Et*19|t*21|t*21|t*19L")"));
    QVERIFY2(doc_->scenario(), qPrintable(doc_->error()));
    QCOMPARE(layout->text(), QStringLiteral("Et*19|t*21|t*21|t*19L"));
    const std::string by_hand =
        replaced(read(kScenario), "\"tp\": 8,", "\"pipeline_layout\": \"Et*19|t*21|t*21|t*19L\", \"tp\": 8,");
    QVERIFY(estimate_->report());
    QCOMPARE(estimate_->report()->estimate.step_time_s, direct(by_hand).step_time_s);
    QVERIFY(direct(by_hand).step_time_s != direct(read(kScenario)).step_time_s);
    type(layout, "19, 21, 21, 19");
    QCOMPARE(doc_->value({"plan", "pipeline_layout"})->dump(), std::string("[19,21,21,19]"));
    QCOMPARE(estimate_->report()->estimate.step_time_s, direct(by_hand).step_time_s);
    type(layout, "20, 20, 20");
    QVERIFY(!doc_->scenario());
    QCOMPARE(editor_->fieldMessage("plan.pipeline_layout"),
             QStringLiteral("3 model chunks (20x3), but pp x virtual_stages = 4 x 1 = 4"));
    type(layout, "");
    QVERIFY(doc_->scenario());
    QVERIFY(!doc_->value({"plan", "pipeline_layout"}));
  }

  void attentionKernelIsAChoiceField() {
    // Unset, the field shows "stack" (the stack's own family); choosing FlashAttention-3
    // writes plan.attention_kernel and re-estimates as the same edit made by hand, faster
    // than megatron-core's cuDNN kernels on Hopper (models/data/attention.json).
    auto* kernel = qobject_cast<QComboBox*>(editor_->fieldWidget("plan.attention_kernel"));
    QVERIFY(kernel);
    QCOMPARE(kernel->currentText(), QStringLiteral("stack"));
    // Every family the loader accepts, the two measured on an H200 included.
    QCOMPARE(kernel->count(), 6);
    QVERIFY(kernel->findText(QStringLiteral("sdpa-flash")) >= 0);
    QVERIFY(kernel->findText(QStringLiteral("sdpa-cudnn")) >= 0);
    kernel->setCurrentText(QStringLiteral("fa3"));
    emit kernel->activated(kernel->currentIndex());
    QVERIFY(doc_->scenario());
    QCOMPARE(doc_->scenario()->plan.attention_kernel, std::string("fa3"));
    QCOMPARE(doc_->value({"plan", "attention_kernel"})->dump(), std::string("\"fa3\""));
    QVERIFY(estimate_->report());
    const std::string text = doc_->text();
    QCOMPARE(estimate_->report()->estimate.step_time_s, direct(text).step_time_s);
    QVERIFY(estimate_->report()->estimate.step_time_s < direct(read(kScenario)).step_time_s);
    // The step bar splits the compute by kind of work: its "attn" segment (the attention
    // core) is the estimate's attention part.
    double attention = -1;
    for (QAbstractSeries* series : estimate_->breakdownChart()->series()) {
      for (QBarSet* set : static_cast<QHorizontalStackedBarSeries*>(series)->barSets()) {
        if (set->label() == QStringLiteral("attn")) attention = set->at(0);
      }
    }
    QCOMPARE(attention, direct(text).compute.attention);
  }

  void moeDispatcherOffersTheThreeDispatchers() {
    // The combo lists Megatron-Core's dispatchers as the loader names them; on the dense
    // shipped scenario DeepEP is refused with the loader's message, shown at the field.
    auto* dispatcher = qobject_cast<QComboBox*>(editor_->fieldWidget("plan.moe_dispatcher"));
    QVERIFY(dispatcher);
    QCOMPARE(dispatcher->count(), 3);
    QCOMPARE(dispatcher->itemText(2), QStringLiteral("deepep"));
    QCOMPARE(dispatcher->currentText(), QStringLiteral("alltoall"));
    dispatcher->setCurrentText(QStringLiteral("deepep"));
    emit dispatcher->activated(dispatcher->currentIndex());
    QVERIFY(!doc_->scenario());
    QVERIFY(editor_->fieldMessage("plan.moe_dispatcher")
                .startsWith(QStringLiteral("\"deepep\" needs a mixture-of-experts")));
  }

  void fp8RecipeIsAChoiceField() {
    // The four recipes as the loader names them. On the bf16 shipped scenario a recipe is
    // refused beside the field; with precision fp8 "delayed" prices the same estimate as the
    // edit made by hand, and "mxfp8" on an H100 shows the loader's message.
    auto* recipe = qobject_cast<QComboBox*>(editor_->fieldWidget("plan.fp8_recipe"));
    QVERIFY(recipe);
    QCOMPARE(recipe->count(), 4);
    QCOMPARE(recipe->currentText(), QStringLiteral("tensorwise"));
    auto choose = [](QComboBox* combo, const char* text) {
      combo->setCurrentText(QString::fromLatin1(text));
      emit combo->activated(combo->currentIndex());
    };
    choose(recipe, "delayed");
    QVERIFY(!doc_->scenario());
    QCOMPARE(editor_->fieldMessage("plan.fp8_recipe"),
             QStringLiteral("\"delayed\" applies to precision \"fp8\" (got \"bf16\")"));
    choose(qobject_cast<QComboBox*>(editor_->fieldWidget("plan.precision")), "fp8");
    QVERIFY(doc_->scenario());
    const std::string by_hand =
        replaced(read(kScenario), "\"precision\": \"bf16\"", "\"precision\": \"fp8\", \"fp8_recipe\": \"delayed\"");
    QCOMPARE(estimate_->report()->estimate.step_time_s, direct(by_hand).step_time_s);
    choose(recipe, "mxfp8");
    QVERIFY(!doc_->scenario());
    QCOMPARE(editor_->fieldMessage("plan.fp8_recipe"),
             QStringLiteral("\"mxfp8\" needs a Blackwell GPU (gpu h100-sxm is hopper)"));
  }

 private:
  ScenarioDocument* doc_ = nullptr;
  QWidget* window_ = nullptr;
  EditorView* editor_ = nullptr;
  EstimatePanel* estimate_ = nullptr;
};

QTEST_MAIN(EditorTest)
#include "editor_test.moc"

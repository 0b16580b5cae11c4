#include "editor_view.h"

#include <algorithm>

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleValidator>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QLocale>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QVBoxLayout>

#include "document.h"
#include "stepcast/app/presets.h"
#include "stepcast/models/attention.h"
#include "stepcast/models/names.h"
#include "stepcast/models/search.h"

namespace stepcast::gui {
namespace {

std::string dotted(const std::vector<std::string>& path) {
  std::string s;
  for (const std::string& k : path) s += (s.empty() ? "" : ".") + k;
  return s;
}

QVariant from_json(const nlohmann::ordered_json& j) {
  if (j.is_boolean()) return j.get<bool>();
  if (j.is_number_integer()) return QVariant::fromValue<qlonglong>(j.get<long long>());
  if (j.is_number()) return j.get<double>();
  if (j.is_string()) return QString::fromStdString(j.get<std::string>());
  if (j.is_object() && j.contains("preset") && j["preset"].is_string()) {
    return QString::fromStdString(j["preset"].get<std::string>());
  }
  if (j.is_array()) {
    QStringList items;
    for (const auto& e : j) items << QString::fromStdString(e.is_string() ? e.get<std::string>() : e.dump());
    return items;
  }
  return {};
}

template <typename Map>
QStringList keys(const Map& m) {
  QStringList out;
  for (const auto& [k, v] : m) out << QString::fromStdString(k);
  return out;
}

template <typename E>
QStringList names() {
  QStringList out;
  for (const auto& e : Names<E>::kTable) out << QString::fromLatin1(e.name);
  return out;
}

// The choice of an optional field that removes its key.
const QString kDefault = QStringLiteral("(default)");

// "8, 16, fit" as a JSON array: each item an integer, a number, or else a string. A text
// that is a JSON object or array ({"min": 8, "max": 64}) is taken as it is.
nlohmann::ordered_json values_of(const QString& text) {
  const std::string whole = text.trimmed().toStdString();
  if (!whole.empty() && (whole.front() == '{' || whole.front() == '[')) {
    auto j = nlohmann::ordered_json::parse(whole, nullptr, /*allow_exceptions=*/false);
    if (!j.is_discarded()) return j;
  }
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const QString& item : text.split(QLatin1Char(','), Qt::SkipEmptyParts)) {
    const QString t = item.trimmed();
    if (t.isEmpty()) continue;
    bool ok = false;
    if (const qlonglong n = t.toLongLong(&ok); ok) {
      out.push_back(static_cast<std::int64_t>(n));
    } else if (const double d = QLocale::c().toDouble(t, &ok); ok) {
      out.push_back(d);
    } else {
      out.push_back(t.toStdString());
    }
  }
  return out;
}

}  // namespace

EditorView::EditorView(ScenarioDocument* doc, QWidget* parent) : View(doc, parent) {
  setObjectName(QStringLiteral("editor"));
  const PresetCatalog& presets = builtin_presets();
  auto* top = new QVBoxLayout(this);
  banner_ = new QLabel(this);
  banner_->setObjectName(QStringLiteral("banner"));
  banner_->setWordWrap(true);
  banner_->setStyleSheet(QStringLiteral("QLabel { color: #b00020; }"));
  top->addWidget(banner_);

  auto group = [&](const QString& title, const std::string& path) {
    auto* box = new QGroupBox(title, this);
    auto* form = new QFormLayout(box);
    form->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
    auto* msg = new QLabel(box);
    msg->setWordWrap(true);
    msg->setStyleSheet(QStringLiteral("QLabel { color: #b00020; }"));
    msg->hide();
    form->addRow(msg);
    group_messages_.emplace_back(path, msg);
    top->addWidget(box);
    return form;
  };
  using S = const Scenario&;
  auto i64 = [](std::int64_t v) { return QVariant::fromValue<qlonglong>(v); };

  QFormLayout* model = group(tr("Model"), "model");
  addField(model, tr("Preset"), {{"model"}, Kind::kChoice, nullptr, nullptr, [](S s) {
                                   return QVariant(QString::fromStdString(s.model.name));
                                 }});
  static_cast<QComboBox*>(fields_.back().input)->addItems(keys(presets.models));
  addField(model, tr("Layers"), {{"model", "num_layers"}, Kind::kInt, nullptr, nullptr,
                                 [](S s) { return QVariant(s.model.num_layers); }});
  addField(model, tr("Hidden size"), {{"model", "hidden_size"}, Kind::kInt, nullptr, nullptr,
                                      [i64](S s) { return i64(s.model.hidden_size); }});
  addField(model, tr("Attention heads"), {{"model", "num_attention_heads"}, Kind::kInt, nullptr, nullptr,
                                          [](S s) { return QVariant(s.model.num_attention_heads); }});
  addField(model, tr("KV heads"), {{"model", "num_kv_heads"}, Kind::kInt, nullptr, nullptr,
                                   [](S s) { return QVariant(s.model.num_kv_heads); }});
  addField(model, tr("FFN hidden size"), {{"model", "ffn_hidden_size"}, Kind::kInt, nullptr, nullptr,
                                          [i64](S s) { return i64(s.model.ffn_hidden_size); }});
  addField(model, tr("Vocabulary"), {{"model", "vocab_size"}, Kind::kInt, nullptr, nullptr,
                                     [i64](S s) { return i64(s.model.vocab_size); }});
  // Mixture of experts: how the routed rows land (docs/model-reference.md 4.2). On a dense
  // model they show nothing, and setting one reports what a moe object needs.
  addField(model, tr("MoE load imbalance (busiest / mean)"),
           {{"model", "moe", "load_imbalance"}, Kind::kNumber, nullptr, nullptr, [](S s) {
              return s.model.moe ? QVariant(s.model.moe->load_imbalance) : QVariant();
            }});
  {
    Field cf{{"model", "moe", "capacity_factor"},
             Kind::kNumber,
             nullptr,
             nullptr,
             [](S s) {
               return s.model.moe && s.model.moe->capacity_factor > 0 ? QVariant(s.model.moe->capacity_factor)
                                                                      : QVariant();
             },
             true};
    addField(model, tr("MoE capacity factor (empty = dropless)"), std::move(cf));
  }
  addField(model, tr("MoE pad to capacity"),
           {{"model", "moe", "pad_to_capacity"}, Kind::kBool, nullptr, nullptr, [](S s) {
              return QVariant(s.model.moe && s.model.moe->pad_to_capacity);
            }});

  QFormLayout* cluster = group(tr("Cluster"), "cluster");
  addField(cluster, tr("Preset"), {{"cluster"}, Kind::kChoice, nullptr, nullptr, [](S s) {
                                     return QVariant(QString::fromStdString(s.cluster.name));
                                   }});
  static_cast<QComboBox*>(fields_.back().input)->addItems(keys(presets.clusters));
  addField(cluster, tr("GPU"), {{"cluster", "gpu"}, Kind::kChoice, nullptr, nullptr, [](S s) {
                                  return QVariant(QString::fromStdString(s.cluster.gpu.name));
                                }});
  static_cast<QComboBox*>(fields_.back().input)->addItems(keys(presets.gpus));
  addField(cluster, tr("Nodes"), {{"cluster", "nodes"}, Kind::kInt, nullptr, nullptr,
                                  [](S s) { return QVariant(s.cluster.nodes); }});
  addField(cluster, tr("GPUs per node"), {{"cluster", "gpus_per_node"}, Kind::kInt, nullptr, nullptr,
                                          [](S s) { return QVariant(s.cluster.gpus_per_node); }});
  addField(cluster, tr("Store write GB/s"), {{"cluster", "storage", "write_GBps"}, Kind::kNumber, nullptr, nullptr,
                                             [](S s) { return QVariant(s.cluster.storage_write_GBps); }});

  QFormLayout* plan = group(tr("Plan"), "plan");
  const char* dims[] = {"tp", "pp", "dp", "cp", "ep"};
  const char* dim_labels[] = {"Tensor parallel (tp)", "Pipeline parallel (pp)", "Data parallel (dp)",
                              "Context parallel (cp)", "Expert parallel (ep)"};
  for (int i = 0; i < 5; ++i) {
    const std::string key = dims[i];
    addField(plan, tr(dim_labels[i]), {{"plan", key}, Kind::kInt, nullptr, nullptr, [key](S s) {
                                         const Plan& p = s.plan;
                                         return QVariant(key == "tp" ? p.tp : key == "pp" ? p.pp
                                                                        : key == "dp" ? p.dp
                                                                        : key == "cp" ? p.cp
                                                                                      : p.ep);
                                       }});
  }
  addField(plan, tr("Expert tensor parallel (etp)"), {{"plan", "etp"}, Kind::kInt, nullptr, nullptr,
                                                      [](S s) { return QVariant(s.plan.expert_tp()); }});
  addField(plan, tr("Sequence parallel"), {{"plan", "sequence_parallel"}, Kind::kBool, nullptr, nullptr,
                                           [](S s) { return QVariant(s.plan.sequence_parallel); }});
  addField(plan, tr("TP comm overlap"), {{"plan", "tp_comm_overlap"}, Kind::kBool, nullptr, nullptr,
                                         [](S s) { return QVariant(s.plan.tp_comm_overlap); }});
  addField(plan, tr("All-to-all overlap (MoE)"), {{"plan", "moe_a2a_overlap"}, Kind::kBool, nullptr, nullptr, [](S s) {
                                                    return QVariant(s.plan.moe_a2a_overlap);
                                                  }});
  addField(plan, tr("MoE token dispatcher"),
           {{"plan", "moe_dispatcher"}, Kind::kChoice, nullptr, nullptr, [](S s) {
              return QVariant(QString::fromStdString(std::string(to_string(s.plan.moe_dispatcher))));
            }});
  static_cast<QComboBox*>(fields_.back().input)->addItems(names<MoeDispatcher>());
  addField(plan, tr("Schedule"), {{"plan", "schedule"}, Kind::kChoice, nullptr, nullptr, [](S s) {
                                    return QVariant(QString::fromStdString(std::string(to_string(s.plan.schedule))));
                                  }});
  static_cast<QComboBox*>(fields_.back().input)->addItems(names<Schedule>());
  addField(plan, tr("Virtual stages"), {{"plan", "virtual_stages"}, Kind::kInt, nullptr, nullptr,
                                        [](S s) { return QVariant(s.plan.virtual_stages); }});
  {
    // Megatron-Core's microbatch group of the interleaved schedule; 0: pp, its default.
    Field mb_group{{"plan", "microbatch_group_size_per_vp_stage"},        Kind::kInt, nullptr, nullptr,
                   [](S s) { return QVariant(s.plan.microbatch_group); }, true};
    addField(plan, tr("Microbatch group (interleaved; 0 = pp)"), std::move(mb_group));
  }
  {
    Field layout{{"plan", "pipeline_layout"}, Kind::kValues, nullptr, nullptr, [](S) { return QVariant(); }, true};
    layout.text_alone = true;
    addField(plan, tr("Layers per chunk (pipeline layout)"), std::move(layout));
  }
  addField(plan, tr("Microbatch"), {{"plan", "microbatch"}, Kind::kInt, nullptr, nullptr,
                                    [](S s) { return QVariant(s.plan.microbatch); }});
  addField(plan, tr("Global batch"), {{"plan", "global_batch"}, Kind::kInt, nullptr, nullptr,
                                      [i64](S s) { return i64(s.plan.global_batch); }});
  addField(plan, tr("ZeRO stage"), {{"plan", "zero"}, Kind::kInt, nullptr, nullptr,
                                    [](S s) { return QVariant(s.plan.zero); }});
  addField(plan, tr("Recompute"), {{"plan", "recompute"}, Kind::kChoice, nullptr, nullptr, [](S s) {
                                     return QVariant(QString::fromStdString(std::string(to_string(s.plan.recompute))));
                                   }});
  static_cast<QComboBox*>(fields_.back().input)->addItems(names<Recompute>());
  addField(plan, tr("Recompute modules"), {{"plan", "recompute_modules"}, Kind::kList, nullptr, nullptr, [](S s) {
             QStringList out;
             for (const std::string& n : recompute_module_names(s.plan.recompute_modules)) out << QString::fromStdString(n);
             return QVariant(out);
           }});
  addField(plan, tr("Recompute layers per chunk"),
           {{"plan", "recompute_num_layers"}, Kind::kInt, nullptr, nullptr, [](S s) {
              return QVariant(s.plan.recompute_num_layers);
            }});
  addField(plan, tr("Recompute method"),
           {{"plan", "recompute_method"}, Kind::kChoice, nullptr, nullptr, [](S s) {
              return QVariant(QString::fromStdString(std::string(name_of(s.plan.recompute_method))));
            }});
  static_cast<QComboBox*>(fields_.back().input)->addItems(names<RecomputeMethod>());
  addField(plan, tr("Precision"), {{"plan", "precision"}, Kind::kChoice, nullptr, nullptr, [](S s) {
                                     return QVariant(QString::fromStdString(std::string(to_string(s.plan.precision))));
                                   }});
  static_cast<QComboBox*>(fields_.back().input)->addItems(names<Precision>());
  addField(plan, tr("FP8 recipe (with fp8)"),
           {{"plan", "fp8_recipe"}, Kind::kChoice, nullptr, nullptr, [](S s) {
              return QVariant(QString::fromStdString(std::string(to_string(s.plan.fp8_recipe))));
            }});
  static_cast<QComboBox*>(fields_.back().input)->addItems(names<Fp8Recipe>());
  addField(plan, tr("Software stack"), {{"plan", "stack"}, Kind::kChoice, nullptr, nullptr, [](S s) {
                                          return QVariant(QString::fromStdString(std::string(to_string(s.plan.stack))));
                                        }});
  static_cast<QComboBox*>(fields_.back().input)->addItems(keys(presets.stacks));
  addField(plan, tr("Attention kernel"), {{"plan", "attention_kernel"}, Kind::kChoice, nullptr, nullptr, [](S s) {
                                            return QVariant(QString::fromStdString(
                                                s.plan.attention_kernel.empty() ? "stack" : s.plan.attention_kernel));
                                          }});
  static_cast<QComboBox*>(fields_.back().input)->addItem(QStringLiteral("stack"));
  for (const std::string& k : attention_kernel_names()) {
    static_cast<QComboBox*>(fields_.back().input)->addItem(QString::fromStdString(k));
  }
  addField(plan, tr("Offload optimizer"), {{"plan", "offload_optimizer"}, Kind::kNumber, nullptr, nullptr,
                                           [](S s) { return QVariant(s.plan.offload_optimizer); }});
  addField(plan, tr("Offload activations"), {{"plan", "offload_activations"}, Kind::kNumber, nullptr, nullptr,
                                             [](S s) { return QVariant(s.plan.offload_activations); }});
  addField(plan, tr("Offload weights"), {{"plan", "offload_weights"}, Kind::kNumber, nullptr, nullptr,
                                         [](S s) { return QVariant(s.plan.offload_weights); }});

  QFormLayout* workload = group(tr("Workload"), "workload");
  addField(workload, tr("Sequence length"), {{"workload", "seq_len"}, Kind::kInt, nullptr, nullptr,
                                             [i64](S s) { return i64(s.workload.seq_len); }});
  addField(workload, tr("Training tokens"), {{"workload", "train_tokens"}, Kind::kNumber, nullptr, nullptr,
                                             [](S s) { return QVariant(s.workload.train_tokens); }});
  // The planner's search section (docs/planner.md "The space"): each list's values separated
  // by commas, empty for the default; written only when edited.
  QFormLayout* search = group(tr("Search (planner)"), "search");
  auto none = [](S) { return QVariant(); };
  const std::pair<const char*, const char*> lists[] = {
      {"gpus", "GPU counts"},
      {"global_batch", "Global batches"},
      {"tp", "Tensor parallel (tp)"},
      {"pp", "Pipeline parallel (pp)"},
      {"cp", "Context parallel (cp)"},
      {"ep", "Expert parallel (ep)"},
      {"microbatch", "Microbatches"},
      {"zero", "ZeRO stages"},
      {"schedule", "Schedules"},
      {"recompute", "Recompute"},
      {"recompute_num_layers", "Recompute layers (or fit)"},
      {"recompute_method", "Recompute methods"},
      {"recompute_modules", "Recompute module sets"},
      {"stack", "Software stacks"},
  };
  for (const auto& [key, label] : lists) {
    addField(search, tr(label), {{"search", key}, Kind::kValues, nullptr, nullptr, none, true});
  }
  addField(search, tr("Objective"), {{"search", "objective"}, Kind::kChoice, nullptr, nullptr, none, true});
  static_cast<QComboBox*>(fields_.back().input)->addItems(names<Objective>());
  addField(search, tr("Price per GPU-hour"),
           {{"search", "price_per_gpu_hour"}, Kind::kNumber, nullptr, nullptr, none, true});
  top->addStretch(1);

  connect(doc, &ScenarioDocument::changed, this, &EditorView::refresh);
  refresh();
}

EditorView::~EditorView() = default;

void EditorView::addField(QFormLayout* form, const QString& label, Field field) {
  const std::vector<std::string> path = field.path;
  const QString name = QString::fromStdString(dotted(path));
  auto* row = new QWidget(this);
  auto* h = new QHBoxLayout(row);
  h->setContentsMargins(0, 0, 0, 0);
  switch (field.kind) {
    case Kind::kInt: {
      auto* spin = new QSpinBox(row);
      // Wide on purpose: a value the loader refuses (0, more GPUs than the cluster has) is
      // typed, and its message appears beside it.
      spin->setRange(-1, 1 << 30);
      spin->setKeyboardTracking(false);
      spin->setGroupSeparatorShown(true);
      // An optional integer key: 0 removes it (its default, which the field then shows as 0).
      const bool optional = field.optional;
      connect(spin, &QSpinBox::valueChanged, this, [this, path, optional](int v) {
        if (updating_) return;
        if (optional && v == 0) removeField(path);
        else writeField(path, v);
      });
      field.input = spin;
      break;
    }
    case Kind::kNumber: {
      auto* edit = new QLineEdit(row);
      // The C locale, as QString::toDouble below and the JSON file: "1.5e12", never "1,5".
      auto* validator = new QDoubleValidator(edit);
      validator->setLocale(QLocale::c());
      edit->setValidator(validator);
      const bool optional = field.optional;
      connect(edit, &QLineEdit::editingFinished, this, [this, path, edit, optional] {
        if (updating_) return;
        if (optional && edit->text().trimmed().isEmpty()) {
          removeField(path);
          return;
        }
        bool ok = false;
        const double v = edit->text().toDouble(&ok);
        if (ok) writeField(path, v);
      });
      field.input = edit;
      break;
    }
    case Kind::kBool: {
      auto* check = new QCheckBox(row);
      connect(check, &QCheckBox::toggled, this, [this, path](bool v) {
        if (!updating_) writeField(path, v);
      });
      field.input = check;
      break;
    }
    case Kind::kChoice: {
      auto* combo = new QComboBox(row);
      if (field.optional) combo->addItem(kDefault);
      connect(combo, &QComboBox::activated, this, [this, path, combo](int) {
        if (updating_) return;
        if (combo->currentText() == kDefault) {
          removeField(path);
        } else {
          writeField(path, combo->currentText());
        }
      });
      field.input = combo;
      break;
    }
    case Kind::kList: {
      auto* edit = new QLineEdit(row);
      connect(edit, &QLineEdit::editingFinished, this, [this, path, edit] {
        QStringList items;
        for (const QString& s : edit->text().split(QLatin1Char(','), Qt::SkipEmptyParts)) items << s.trimmed();
        if (!updating_) writeField(path, items);
      });
      field.input = edit;
      break;
    }
    case Kind::kValues: {
      auto* edit = new QLineEdit(row);
      edit->setPlaceholderText(tr("default"));
      connect(edit, &QLineEdit::editingFinished, this, [this, path, edit, alone = field.text_alone] {
        if (updating_) return;
        nlohmann::ordered_json v = values_of(edit->text());
        if (alone && v.is_array() && v.size() == 1 && v.front().is_string()) v = nlohmann::ordered_json(v.front());
        if (v.empty()) {
          removeField(path);
          return;
        }
        const QString what =
            QStringLiteral("%1 = %2").arg(QString::fromStdString(dotted(path)), QString::fromStdString(v.dump()));
        document()->setValue(path, v, what);
      });
      field.input = edit;
      break;
    }
  }
  field.input->setObjectName(name);
  field.message = new QLabel(row);
  field.message->setObjectName(name + QStringLiteral(".message"));
  field.message->setWordWrap(true);
  field.message->setStyleSheet(QStringLiteral("QLabel { color: #b00020; }"));
  h->addWidget(field.input, 1);
  h->addWidget(field.message, 2);
  form->addRow(label, row);
  fields_.push_back(std::move(field));
}

void EditorView::writeField(const std::vector<std::string>& path, const QVariant& value) {
  ScenarioDocument* doc = document();
  nlohmann::ordered_json v;
  switch (value.typeId()) {
    case QMetaType::Bool: v = value.toBool(); break;
    case QMetaType::Int:
    case QMetaType::LongLong: v = value.toLongLong(); break;
    case QMetaType::Double: {
      const double d = value.toDouble();
      v = d;
      break;
    }
    case QMetaType::QStringList: {
      v = nlohmann::ordered_json::array();
      for (const QString& s : value.toStringList()) v.push_back(s.toStdString());
      break;
    }
    default: v = value.toString().toStdString();
  }
  const QString shown = value.typeId() == QMetaType::QStringList ? value.toStringList().join(QStringLiteral(", "))
                                                                   : value.toString();
  const QString what = QStringLiteral("%1 = %2").arg(QString::fromStdString(dotted(path)), shown);
  // A preset chosen for an object that has one: keep the object's overrides.
  if (path.size() == 1 || (path.size() == 2 && path[1] == "gpu")) {
    const nlohmann::ordered_json* cur = doc->value(path);
    if (cur && cur->is_object() && cur->contains("preset")) {
      std::vector<std::string> p = path;
      p.push_back("preset");
      doc->setValue(p, v, what);
      return;
    }
  }
  // Inside a value given as a preset name: {"preset": name, <rest of path>: value}.
  for (std::size_t i = 1; i < path.size(); ++i) {
    const std::vector<std::string> prefix(path.begin(), path.begin() + static_cast<std::ptrdiff_t>(i));
    const nlohmann::ordered_json* cur = doc->value(prefix);
    if (cur && cur->is_string()) {
      nlohmann::ordered_json obj = {{"preset", *cur}};
      nlohmann::ordered_json* at = &obj;
      for (std::size_t k = i; k + 1 < path.size(); ++k) at = &((*at)[path[k]] = nlohmann::ordered_json::object());
      (*at)[path.back()] = v;
      doc->setValue(prefix, obj, what);
      return;
    }
  }
  doc->setValue(path, v, what);
}

void EditorView::removeField(const std::vector<std::string>& path) {
  if (!document()->value(path)) return;
  document()->removeValue(path, QStringLiteral("%1 = default").arg(QString::fromStdString(dotted(path))));
}

QWidget* EditorView::fieldWidget(const std::string& path) const {
  for (const Field& f : fields_) {
    if (dotted(f.path) == path) return f.input;
  }
  return nullptr;
}

QString EditorView::fieldMessage(const std::string& path) const {
  for (const Field& f : fields_) {
    if (dotted(f.path) == path) return f.message->text();
  }
  for (const auto& [p, label] : group_messages_) {
    if (p == path) return label->text();
  }
  return {};
}

void EditorView::refresh() {
  const ScenarioDocument* doc = document();
  updating_ = true;
  for (Field& f : fields_) {
    QVariant v;
    const nlohmann::ordered_json* raw = doc->value(f.path);
    // A list of lists or an object (module sets, a GPU range) shows as its JSON, which the
    // field reads back as it is.
    const bool as_json =
        raw && f.kind == Kind::kValues &&
        (raw->is_object() ||
         (raw->is_array() && std::any_of(raw->begin(), raw->end(), [](const auto& e) { return e.is_structured(); })));
    if (raw) v = as_json ? QVariant(QString::fromStdString(raw->dump())) : from_json(*raw);
    if (!v.isValid() && doc->scenario()) v = f.resolved(*doc->scenario());
    if (!v.isValid() && f.optional) v = f.kind == Kind::kChoice ? QVariant(kDefault) : QVariant(QString());
    const QSignalBlocker block(f.input);
    // A number the loaded scenario has no value for (an MoE field on a dense model) shows
    // empty rather than the last scenario's.
    if (!v.isValid() && doc->scenario() && f.kind == Kind::kNumber) static_cast<QLineEdit*>(f.input)->clear();
    if (v.isValid()) {
      switch (f.kind) {
        case Kind::kInt: static_cast<QSpinBox*>(f.input)->setValue(v.toInt()); break;
        case Kind::kNumber:
          static_cast<QLineEdit*>(f.input)->setText(
              v.typeId() == QMetaType::QString ? v.toString() : QString::number(v.toDouble(), 'g', 12));
          break;
        case Kind::kBool: static_cast<QCheckBox*>(f.input)->setChecked(v.toBool()); break;
        case Kind::kChoice: {
          auto* combo = static_cast<QComboBox*>(f.input);
          const QString s = v.toString();
          if (combo->findText(s) < 0) combo->addItem(s);
          combo->setCurrentText(s);
          break;
        }
        case Kind::kList: static_cast<QLineEdit*>(f.input)->setText(v.toStringList().join(QStringLiteral(", "))); break;
        case Kind::kValues:
          static_cast<QLineEdit*>(f.input)->setText(
              v.typeId() == QMetaType::QStringList ? v.toStringList().join(QStringLiteral(", ")) : v.toString());
          break;
      }
    }
    // A field shows its own path's message or the first under it (model.moe.*); a message
    // about a whole section (the model preset, the plan's product) shows at its group.
    const QString message = f.path.size() > 1 ? doc->fieldError(dotted(f.path)) : QString();
    const bool own = !message.isEmpty();
    f.message->setText(own ? message : QString());
    f.message->setVisible(own && !message.isEmpty());
  }
  for (const auto& [path, label] : group_messages_) {
    const auto it = doc->fieldErrors().find(path);
    label->setText(it == doc->fieldErrors().end() ? QString() : it->second);
    label->setVisible(it != doc->fieldErrors().end());
  }
  // Errors no field or group shows (another section, a parse error): the banner.
  QStringList rest;
  for (const std::string& line : doc->errorLines()) {
    const std::string p = error_path(line);
    bool shown = false;
    for (const auto& [gp, label] : group_messages_) shown = shown || gp == p;
    for (const Field& f : fields_) {
      const std::string fp = dotted(f.path);
      const bool under = p.size() > fp.size() && p.compare(0, fp.size(), fp) == 0 && (p[fp.size()] == '.' || p[fp.size()] == '[');
      shown = shown || (f.path.size() > 1 && (p == fp || under));
    }
    if (!shown) rest << QString::fromStdString(line);
  }
  banner_->setText(rest.join(QLatin1Char('\n')));
  banner_->setVisible(!rest.isEmpty());
  updating_ = false;
}

}  // namespace stepcast::gui

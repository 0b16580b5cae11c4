#include "reliability_view.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include <QChart>
#include <QChartView>
#include <QCheckBox>
#include <QComboBox>
#include <QGridLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QPlainTextEdit>
#include <QSlider>
#include <QSplitter>
#include <QThread>
#include <QTimer>
#include <QValueAxis>
#include <QVBoxLayout>
#include <nlohmann/json.hpp>

#include "document.h"
#include "stepcast/models/names.h"
#include "style.h"

namespace stepcast::gui {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr int kCentre = ReliabilityView::kLogStepsPerOctave * ReliabilityView::kLogOctaves;
constexpr int kDebounceMs = 150;

// Values written into the scenario text keep 6 significant digits (a slider position is
// not worth more, and the file stays readable).
// QString's conversions use the C locale both ways (std::stod would follow the locale
// QApplication sets, and read "1,5" in a German one).
double round6(double v) { return QString::number(v, 'g', 6).toDouble(); }

bool same_value(double a, double b) { return std::abs(a - b) <= 1e-4 * std::max(std::abs(a), std::abs(b)); }

QString seconds_text(double s) { return QStringLiteral("%1 s").arg(s, 0, 'f', s < 10 ? 1 : 0); }

// The job's failure model (the loader resolved presets and overrides) and its MTBF, h.
double mtbf_h(const Scenario& s) {
  const double rate = job_failure_rate_per_h(*s.faults.failures, s.cluster);
  return rate > 0 ? 1.0 / rate : 0.0;
}

double write_GBps(const Scenario& s) {
  if (s.checkpoint && s.checkpoint->write_GBps) return *s.checkpoint->write_GBps;
  return s.cluster.storage_write_GBps;
}

// Decimal units, as `stepcast checkpoint` prints sizes ("112.42 GB", "395.3 kB").
QString bytes_text(double b) {
  if (b >= 1e12) return QStringLiteral("%1 TB").arg(b / 1e12, 0, 'f', 2);
  if (b >= 1e9) return QStringLiteral("%1 GB").arg(b / 1e9, 0, 'f', 2);
  if (b >= 1e6) return QStringLiteral("%1 MB").arg(b / 1e6, 0, 'f', 2);
  if (b >= 1e3) return QStringLiteral("%1 kB").arg(b / 1e3, 0, 'f', 1);
  return QStringLiteral("%1 B").arg(b, 0, 'f', 0);
}

void set_vertical(QLineSeries* line, double x, double y_lo, double y_hi) {
  line->clear();
  if (!(x > 0)) return;
  line->append(x, y_lo);
  line->append(x, y_hi);
}

}  // namespace

double ReliabilityView::Knob::value(int pos) const {
  if (log) return anchor * std::exp2(static_cast<double>(pos - kCentre) / kLogStepsPerOctave);
  return pos * step;
}

int ReliabilityView::Knob::position(double v) const {
  if (log) return kCentre + static_cast<int>(std::lround(std::log2(v / anchor) * kLogStepsPerOctave));
  return static_cast<int>(std::lround(v / step));
}

ReliabilityView::ReliabilityView(ScenarioDocument* doc, QWidget* parent)
    : View(doc, parent), knobs_(kKnobs), written_(kKnobs, kNaN) {
  setObjectName(QStringLiteral("reliability"));
  auto* top = new QVBoxLayout(this);
  message_ = message_label(QStringLiteral("message"), this);
  top->addWidget(message_);

  auto* grid = new QGridLayout();
  grid->setColumnStretch(1, 1);
  top->addLayout(grid);
  const auto add_row = [this, grid](int row, const QString& name, QWidget* control, QLabel* value) {
    grid->addWidget(new QLabel(name, this), row, 0);
    grid->addWidget(control, row, 1);
    grid->addWidget(value, row, 2);
  };
  const QString tips[kKnobs] = {
      tr("Job mean time between failures (log scale): every failure rate of faults.failures is scaled by the "
         "same factor"),
      tr("cluster.storage.write_GBps (checkpoint.storage.write_GBps when the scenario gives it; log scale): "
         "the aggregate write rate of the checkpoint store"),
      tr("faults.failures.detection_s: failure until the job is stopped (causes that give their own keep it)"),
      tr("faults.failures.reschedule_s: allocate nodes and launch processes"),
      tr("faults.failures.init_s: process start, communicator initialisation, model build")};
  const QString names[kKnobs] = {tr("Failure rate (job MTBF)"), tr("Store write bandwidth"),
                                 tr("Restart: detection"), tr("Restart: reschedule"), tr("Restart: init")};
  for (int i = 0; i < kKnobs; ++i) buildKnob(static_cast<KnobId>(i), names[i], tips[i]);
  size_ = new QLabel(this);
  size_->setObjectName(QStringLiteral("checkpoint_size"));
  size_->setToolTip(tr("Derived from the model, the plan and checkpoint.contents (docs/reliability.md): the "
                       "scenario format has no size of its own"));
  add_row(0, names[kMtbf], knobs_[kMtbf].slider, knobs_[kMtbf].label);
  add_row(1, tr("Checkpoint size"), new QWidget(this), size_);
  for (int i = kWrite; i < kKnobs; ++i) add_row(i + 1, names[i], knobs_[i].slider, knobs_[i].label);
  buildCheckpointGroup();
  top->addWidget(checkpoint_group_);

  knobs_[kMtbf].log = true;
  knobs_[kMtbf].format = [this](double h) {
    return tr("M = %1 h (%2 failures per job-hour)").arg(h, 0, 'g', 3).arg(1.0 / h, 0, 'g', 3);
  };
  knobs_[kMtbf].commit = [this](double h) { writeFailureRates(h); };
  knobs_[kWrite].log = true;
  knobs_[kWrite].format = [](double v) { return QStringLiteral("%1 GB/s").arg(v, 0, 'g', 4); };
  knobs_[kWrite].commit = [this](double v) {
    ScenarioDocument* d = document();
    const double x = round6(v);
    if (d->value({"checkpoint", "storage", "write_GBps"})) {
      d->setValue({"checkpoint", "storage", "write_GBps"}, x, tr("set checkpoint write bandwidth"));
    } else if (const auto* c = d->value({"cluster"}); c && c->is_string()) {
      d->setValue({"cluster"}, {{"preset", c->get<std::string>()}, {"storage", {{"write_GBps", x}}}},
                  tr("set store write bandwidth"));
    } else {
      d->setValue({"cluster", "storage", "write_GBps"}, x, tr("set store write bandwidth"));
    }
  };
  const char* keys[] = {"detection_s", "reschedule_s", "init_s"};
  for (int i = kDetection; i < kKnobs; ++i) {
    knobs_[i].format = seconds_text;
    const char* key = keys[i - kDetection];
    knobs_[i].commit = [this, key](double v) { writeFailureField(key, v); };
  }

  auto* split = new QSplitter(Qt::Vertical, this);
  chart_ = new QChart();
  chart_->setTitle(tr("Goodput vs checkpoint interval"));
  chart_->legend()->setAlignment(Qt::AlignBottom);
  chart_->setMargins(QMargins(4, 4, 4, 4));
  curve_ = new QLineSeries();
  curve_->setName(tr("simulated (mean of the runs)"));
  curve_->setPointsVisible(true);
  daly_curve_ = new QLineSeries();
  daly_curve_->setName(tr("Daly's expected goodput"));
  daly_curve_->setPen(QPen(QColor(120, 120, 120), 1.5, Qt::DashLine));
  young_ = new QLineSeries();
  young_->setPen(QPen(QColor(0x1f, 0x77, 0xb4), 2, Qt::DotLine));
  daly_ = new QLineSeries();
  daly_->setPen(QPen(QColor(0xff, 0x7f, 0x0e), 2, Qt::DashLine));
  optimum_ = new QLineSeries();
  optimum_->setPen(QPen(QColor(0x2c, 0xa0, 0x2c), 2.5));
  auto* x = new QLogValueAxis();
  x->setBase(10);
  x->setTitleText(tr("compute between checkpoints (s, log scale)"));
  x->setLabelFormat(QStringLiteral("%.4g"));
  x->setMinorTickCount(8);
  auto* y = new QValueAxis();
  y->setTitleText(tr("goodput (%)"));
  y->setLabelFormat(QStringLiteral("%.2f"));
  chart_->addAxis(x, Qt::AlignBottom);
  chart_->addAxis(y, Qt::AlignLeft);
  for (QLineSeries* s : {curve_, daly_curve_, young_, daly_, optimum_}) {
    chart_->addSeries(s);
    s->attachAxis(x);
    s->attachAxis(y);
  }
  auto* view = new QChartView(chart_, split);
  view->setObjectName(QStringLiteral("goodput_chart"));
  view->setRenderHint(QPainter::Antialiasing);
  view->setMinimumHeight(260);
  auto* lower = new QWidget(split);
  auto* lower_layout = new QVBoxLayout(lower);
  lower_layout->setContentsMargins(0, 0, 0, 0);
  recommendation_ = new QLabel(lower);
  recommendation_->setObjectName(QStringLiteral("recommendation"));
  recommendation_->setWordWrap(true);
  recommendation_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  lower_layout->addWidget(recommendation_);
  details_ = new QPlainTextEdit(lower);
  details_->setObjectName(QStringLiteral("details"));
  details_->setReadOnly(true);
  details_->setLineWrapMode(QPlainTextEdit::NoWrap);
  QFont mono(QStringLiteral("monospace"));
  mono.setStyleHint(QFont::TypeWriter);
  details_->setFont(mono);
  lower_layout->addWidget(details_, 1);
  split->addWidget(view);
  split->addWidget(lower);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 2);
  top->addWidget(split, 1);

  debounce_ = new QTimer(this);
  debounce_->setSingleShot(true);
  debounce_->setInterval(kDebounceMs);
  connect(debounce_, &QTimer::timeout, this, &ReliabilityView::commitPending);
  connect(doc, &ScenarioDocument::changed, this, &ReliabilityView::syncFromDocument);
  syncFromDocument();
}

ReliabilityView::~ReliabilityView() {
  // run_checkpoint cannot be cancelled; the worker holds its own scenario copy and posts to
  // this view, so it is joined here (a sweep takes well under a second for most scenarios).
  if (thread_) {
    thread_->wait();
    delete thread_.data();
  }
}

void ReliabilityView::buildKnob(KnobId id, const QString& name, const QString& tip) {
  Knob& k = knobs_[static_cast<std::size_t>(id)];
  k.slider = new QSlider(Qt::Horizontal, this);
  k.slider->setObjectName(name);
  k.slider->setToolTip(tip);
  k.slider->setMinimumWidth(260);
  k.label = new QLabel(this);
  k.label->setMinimumWidth(300);
  connect(k.slider, &QSlider::valueChanged, this, [this, id] { knobMoved(id); });
  connect(k.slider, &QSlider::sliderReleased, this, &ReliabilityView::commitPending);
}

bool ReliabilityView::busy() const { return running_ || compute_pending_ || debounce_->isActive(); }

void ReliabilityView::prepareScreenshot() {
  if (!report_ && !busy()) scheduleCompute();
}

void ReliabilityView::setKnobsEnabled(bool on) {
  for (Knob& k : knobs_) k.slider->setEnabled(on);
  setCheckpointEnabled(on);
}

void ReliabilityView::buildCheckpointGroup() {
  checkpoint_group_ = new QGroupBox(tr("Checkpoint"), this);
  checkpoint_group_->setObjectName(QStringLiteral("checkpoint"));
  checkpoint_group_->setToolTip(
      tr("What-ifs of the checkpoint's size and cost: they edit the scenario's checkpoint section "
         "(docs/reliability.md)"));
  auto* layout = new QVBoxLayout(checkpoint_group_);
  auto* row = new QHBoxLayout();
  auto* saves = new QLabel(tr("Saves:"), checkpoint_group_);
  saves->setToolTip(tr("checkpoint.contents: the parts of the training state a checkpoint holds (at least one)"));
  row->addWidget(saves);
  const QString part_tips[kStateParts] = {
      tr("bf16 weights, 2 B per parameter"),
      tr("fp32 master weights and Adam's two moments, 12 B per parameter (8 for SGD): most of the size"),
      tr("learning-rate scheduler state (small)"),
      tr("gradient scaler state (small)"),
      tr("random number generator states, one per rank (small)"),
      tr("data sampler position, one per data-parallel replica (small)"),
      tr("step counter (small)"),
      tr("run configuration (small)")};
  for (StatePart part : kAllStateParts) {
    const auto i = static_cast<std::size_t>(part);
    const QString name = QString::fromLatin1(state_part_name(part));
    auto* box = new QCheckBox(name, checkpoint_group_);
    box->setObjectName(QStringLiteral("part_") + name);
    box->setToolTip(tr("checkpoint.contents \"%1\": %2").arg(name, part_tips[i]));
    box->setChecked(true);
    connect(box, &QCheckBox::toggled, this, [this, part](bool on) { partToggled(part, on); });
    parts_[i] = box;
    row->addWidget(box);
  }
  row->addStretch(1);
  layout->addLayout(row);

  auto* row2 = new QHBoxLayout();
  sharded_ = new QCheckBox(tr("Sharded"), checkpoint_group_);
  sharded_->setObjectName(QStringLiteral("sharded"));
  sharded_->setToolTip(
      tr("checkpoint.sharded: every rank writes its share; unchecked: the state is gathered to rank 0, which "
         "writes it all through its share of the node's NICs"));
  sharded_->setChecked(true);
  connect(sharded_, &QCheckBox::toggled, this, &ReliabilityView::shardedToggled);
  row2->addWidget(sharded_);
  row2->addSpacing(24);
  auto* mode_label = new QLabel(tr("Mode:"), checkpoint_group_);
  row2->addWidget(mode_label);
  mode_ = new QComboBox(checkpoint_group_);
  mode_->setObjectName(QStringLiteral("mode"));
  mode_->setToolTip(
      tr("checkpoint.mode, the scenario's own mode: sync pauses for the write; async pauses for a device-to-host "
         "snapshot, then writes in the background (sync when the snapshot does not fit in host memory). The "
         "recommendation above compares both; this mode is the one `check` uses at a configured interval"));
  for (CheckpointMode m : {CheckpointMode::kSync, CheckpointMode::kAsync}) {
    mode_->addItem(QString::fromUtf8(to_string(m).data(), static_cast<qsizetype>(to_string(m).size())),
                   static_cast<int>(m));
  }
  mode_label->setBuddy(mode_);
  connect(mode_, &QComboBox::currentIndexChanged, this, &ReliabilityView::modeChosen);
  row2->addWidget(mode_);
  row2->addStretch(1);
  layout->addLayout(row2);
}

void ReliabilityView::setCheckpointEnabled(bool on) {
  for (QCheckBox* box : parts_) box->setEnabled(on);
  sharded_->setEnabled(on);
  mode_->setEnabled(on);
}

void ReliabilityView::syncCheckpointControls(const Scenario& s) {
  const CheckpointSpec spec = s.checkpoint.value_or(CheckpointSpec{});
  for (StatePart part : kAllStateParts) {
    QCheckBox* box = parts_[static_cast<std::size_t>(part)];
    const QSignalBlocker block(box);
    box->setChecked(spec.saves(part));
  }
  {
    const QSignalBlocker block(sharded_);
    sharded_->setChecked(spec.sharded);
  }
  const QSignalBlocker block(mode_);
  mode_->setCurrentIndex(mode_->findData(static_cast<int>(spec.mode)));
}

void ReliabilityView::partToggled(StatePart part, bool on) {
  const std::optional<Scenario>& s = document()->scenario();
  QCheckBox* box = parts_[static_cast<std::size_t>(part)];
  if (!s) return;
  commitPending();  // a slider still resting writes first: the edits stay in the user's order
  // The document's list, in its own order (the loader keeps it for a resume audit): the
  // part leaves it, or joins it before the first listed part that follows it in
  // kAllStateParts order.
  std::vector<StatePart> list = s->checkpoint.value_or(CheckpointSpec{}).contents;
  const auto it = std::find(list.begin(), list.end(), part);
  if (on == (it != list.end())) return;  // already so
  if (on) {
    const auto after = std::find_if(list.begin(), list.end(), [part](StatePart p) { return p > part; });
    list.insert(after, part);
  } else {
    if (list.size() <= 1) {
      // The loader requires a non-empty list: the last part stays.
      const QSignalBlocker block(box);
      box->setChecked(true);
      return;
    }
    list.erase(it);
  }
  nlohmann::ordered_json array = nlohmann::ordered_json::array();
  for (StatePart p : list) array.push_back(state_part_name(p));
  const QString name = QString::fromLatin1(state_part_name(part));
  if (!document()->setValue({"checkpoint", "contents"}, array,
                            on ? tr("checkpoint saves %1").arg(name) : tr("checkpoint leaves out %1").arg(name))) {
    if (s) syncCheckpointControls(*s);  // the text cannot be edited: the boxes show the document
  }
  if (!busy()) emit idle();
}

void ReliabilityView::shardedToggled(bool on) {
  if (!document()->scenario()) return;
  commitPending();
  if (!document()->setValue({"checkpoint", "sharded"}, on,
                            on ? tr("sharded checkpoints") : tr("checkpoints gathered to rank 0"))) {
    if (document()->scenario()) syncCheckpointControls(*document()->scenario());
  }
  if (!busy()) emit idle();
}

void ReliabilityView::modeChosen(int index) {
  if (!document()->scenario() || index < 0) return;
  commitPending();
  const auto m = static_cast<CheckpointMode>(mode_->itemData(index).toInt());
  const std::string_view name = to_string(m);
  if (document()->scenario()->checkpoint.value_or(CheckpointSpec{}).mode == m) return;
  if (!document()->setValue(
          {"checkpoint", "mode"}, std::string(name),
          tr("%1 checkpoints").arg(QString::fromLatin1(name.data(), static_cast<qsizetype>(name.size()))))) {
    if (document()->scenario()) syncCheckpointControls(*document()->scenario());
  }
  if (!busy()) emit idle();
}

double ReliabilityView::checkpointBytes() const {
  if (!report_ || !report_->advice) return kNaN;
  return report_->advice->sync_cost.total_bytes;
}

void ReliabilityView::syncFromDocument() {
  const std::optional<Scenario>& s = document()->scenario();
  std::optional<Error> missing;
  if (!s) {
    missing = Error{document()->error().toStdString()};
  } else {
    missing = planner::campaign_input_error(*s);
  }
  if (missing) {
    // Without a failure model or a training length there is nothing to plan: say why.
    message_->setText(QString::fromStdString(missing->message));
    setKnobsEnabled(false);
    debounce_->stop();
    pending_knob_ = -1;
    compute_pending_ = false;
    report_.reset();
    showReport();
    return;
  }
  message_->clear();
  syncCheckpointControls(*s);
  const FailureSpec& f = *s->faults.failures;
  const double values[kKnobs] = {mtbf_h(*s), write_GBps(*s), f.detection_s, f.reschedule_s, f.init_s};
  for (int i = 0; i < kKnobs; ++i) {
    Knob& k = knobs_[static_cast<std::size_t>(i)];
    const double v = values[i];
    // The slider's own edit coming back: keep its position (re-centring would move the
    // handle under the user's mouse). Anything else (undo, the editor) re-centres it.
    if (!std::isnan(written_[static_cast<std::size_t>(i)]) && same_value(written_[static_cast<std::size_t>(i)], v)) {
      k.label->setText(k.format(v));
      continue;
    }
    written_[static_cast<std::size_t>(i)] = kNaN;
    if (pending_knob_ == i) continue;  // being dragged: its commit follows
    const QSignalBlocker block(k.slider);
    if (k.log) {
      k.anchor = v > 0 ? v : 1.0;
      int lo = 0;
      if (i == kMtbf) {
        // Rates are at most 1 per unit-hour (the loader's bound): the shortest MTBF keeps them there.
        double max_rate = 0;
        for (const ComponentFailures& c : f.components) max_rate = std::max(max_rate, c.rate_per_unit_h);
        if (max_rate > 0) {
          lo = std::max(0, kCentre - static_cast<int>(std::floor(std::log2(1.0 / max_rate) * kLogStepsPerOctave)));
        }
      }
      k.slider->setRange(lo, 2 * kCentre);
      k.slider->setValue(kCentre);
    } else {
      k.step = 1;
      k.slider->setRange(0, std::max(3600, static_cast<int>(std::ceil(2 * v))));
      k.slider->setValue(k.position(v));
    }
    k.label->setText(k.format(v));
  }
  setKnobsEnabled(true);
  scheduleCompute();
}

void ReliabilityView::knobMoved(KnobId id) {
  const Knob& k = knobs_[static_cast<std::size_t>(id)];
  k.label->setText(k.format(k.value(k.slider->value())));
  if (pending_knob_ >= 0 && pending_knob_ != id) commitPending();
  pending_knob_ = id;
  debounce_->start();
}

void ReliabilityView::commitPending() {
  debounce_->stop();
  if (pending_knob_ < 0) return;
  const auto id = static_cast<std::size_t>(pending_knob_);
  pending_knob_ = -1;
  const Knob& k = knobs_[id];
  double v = k.value(k.slider->value());
  if (!k.log) v = std::round(v);
  written_[id] = v;
  k.commit(v);  // changed() -> syncFromDocument() -> scheduleCompute()
  // An edit that changed nothing (the text already said so) does not signal: still idle.
  if (!busy()) emit idle();
}

void ReliabilityView::writeFailureRates(double new_mtbf_h) {
  const std::optional<Scenario>& s = document()->scenario();
  if (!s || !s->faults.failures) return;
  const FailureSpec& f = *s->faults.failures;
  const double old_mtbf_h = mtbf_h(*s);
  if (!(old_mtbf_h > 0) || !(new_mtbf_h > 0)) return;
  // Every cause's rate scales by the same factor: the mix of causes (and so the restart
  // and node-wait shares) stays, the job MTBF becomes the slider's value.
  const double k = old_mtbf_h / new_mtbf_h;
  std::vector<std::pair<std::vector<std::string>, nlohmann::json>> edits;
  nlohmann::ordered_json object = nlohmann::ordered_json::object();
  const nlohmann::ordered_json* current = document()->value({"faults", "failures"});
  const bool preset_name = current && current->is_string();
  if (preset_name) object["preset"] = current->get<std::string>();
  for (FailureCause cause : kAllFailureCauses) {
    const double rate = f.component(cause).rate_per_unit_h;
    if (!(rate > 0)) continue;
    const double r = round6(rate * k);
    if (preset_name) {
      object[failure_cause_name(cause)][failure_rate_key(cause)] = r;
    } else {
      edits.push_back({{"faults", "failures", failure_cause_name(cause), failure_rate_key(cause)}, r});
    }
  }
  const QString what = tr("set job MTBF to %1 h").arg(new_mtbf_h, 0, 'g', 3);
  if (preset_name) {
    document()->setValue({"faults", "failures"}, object, what);
  } else {
    document()->setValues(edits, what);
  }
}

void ReliabilityView::writeFailureField(const char* key, double value) {
  const nlohmann::ordered_json* current = document()->value({"faults", "failures"});
  const QString what = tr("set faults.failures.%1").arg(QString::fromLatin1(key));
  if (current && current->is_string()) {
    // A preset by name becomes {"preset": name, key: value}: the preset's other figures stay.
    document()->setValue({"faults", "failures"}, {{"preset", current->get<std::string>()}, {key, value}}, what);
  } else {
    document()->setValue({"faults", "failures", key}, value, what);
  }
}

void ReliabilityView::scheduleCompute() {
  if (running_) {
    compute_pending_ = true;  // one more run after this one, with the document as it is then
    return;
  }
  startCompute();
}

void ReliabilityView::startCompute() {
  const std::optional<app::ScenarioInput> input = document()->input();
  if (!input || (input->scenario && planner::campaign_input_error(*input->scenario))) return;
  app::CheckpointRequest request;
  request.scenario = *input;
  running_ = true;
  compute_pending_ = false;
  QThread* t = QThread::create([this, request] {
    auto result = std::make_shared<Result<app::CheckpointReport>>(app::run_checkpoint(request));
    QMetaObject::invokeMethod(
        this, [this, result] { finishCompute(result); }, Qt::QueuedConnection);
  });
  t->setObjectName(QStringLiteral("checkpoint-advice"));
  connect(t, &QThread::finished, t, &QObject::deleteLater);
  thread_ = t;
  t->start();
}

void ReliabilityView::finishCompute(std::shared_ptr<Result<app::CheckpointReport>> result) {
  running_ = false;
  const std::optional<Scenario>& now = document()->scenario();
  if (!now || planner::campaign_input_error(*now)) {
    // The document lost its failure model (or stopped loading) meanwhile: its message shows.
    compute_pending_ = false;
    report_.reset();
    showReport();
    if (!busy()) emit idle();
    return;
  }
  if (compute_pending_) {
    // The document changed meanwhile: this result is stale; compute the current one.
    startCompute();
    if (running_) return;
    compute_pending_ = false;
  }
  if (!result->ok()) {
    report_.reset();
    message_->setText(QString::fromStdString(result->error().message));
  } else {
    report_ = std::make_shared<const app::CheckpointReport>(std::move(*result).value());
    message_->setText(report_->advice ? QString()
                                      : tr("The simulated step failed: %1")
                                            .arg(QString::fromStdString(report_->run_failure)));
  }
  showReport();
  if (!busy()) emit idle();
}

void ReliabilityView::showReport() {
  for (QLineSeries* s : {curve_, daly_curve_, young_, daly_, optimum_}) s->clear();
  const planner::CheckpointAdvice* adv = report_ && report_->advice ? &*report_->advice : nullptr;
  if (!adv) {
    recommendation_->clear();
    details_->clear();
    size_->setText(QStringLiteral("-"));
    young_->setName(tr("Young"));
    daly_->setName(tr("Daly"));
    optimum_->setName(tr("simulated optimum"));
    return;
  }
  const planner::ModeAdvice& m = adv->mode == CheckpointMode::kAsync ? adv->async : adv->sync;
  double x_lo = 1e300, x_hi = 0, y_lo = 100, y_hi = 0;
  QList<QPointF> sim, daly;
  for (const planner::IntervalResult& r : m.sweep) {
    const double x = r.sim.interval_s;
    const double g = 100.0 * r.sim.goodput.mean;
    const double d = r.daly_wall_s > 0 ? 100.0 * adv->solve_s / r.daly_wall_s : 0.0;
    sim.append(QPointF(x, g));
    daly.append(QPointF(x, d));
    x_lo = std::min(x_lo, x);
    x_hi = std::max(x_hi, x);
    y_lo = std::min({y_lo, g, d});
    y_hi = std::max({y_hi, g, d});
  }
  curve_->replace(sim);
  daly_curve_->replace(daly);
  const double pad = std::max(0.05, 0.05 * (y_hi - y_lo));
  y_lo = std::max(0.0, y_lo - pad);
  y_hi = std::min(100.0, y_hi + pad);
  set_vertical(young_, m.young_s, y_lo, y_hi);
  set_vertical(daly_, m.daly_s, y_lo, y_hi);
  set_vertical(optimum_, m.optimum_s, y_lo, y_hi);
  young_->setName(tr("Young %1").arg(seconds_text(m.young_s)));
  daly_->setName(tr("Daly %1").arg(seconds_text(m.daly_s)));
  optimum_->setName(m.optimum_simulated ? tr("simulated optimum %1").arg(seconds_text(m.optimum_s))
                                        : tr("optimum = Daly (too few failures to fit)"));
  for (double v : {m.young_s, m.daly_s, m.optimum_s}) {
    if (v > 0) {
      x_lo = std::min(x_lo, v);
      x_hi = std::max(x_hi, v);
    }
  }
  if (auto* x = qobject_cast<QLogValueAxis*>(chart_->axes(Qt::Horizontal).value(0)); x && x_hi > 0) {
    x->setRange(x_lo / 1.25, x_hi * 1.25);
  }
  if (auto* y = qobject_cast<QValueAxis*>(chart_->axes(Qt::Vertical).value(0))) y->setRange(y_lo, y_hi);
  const char* mode_name = adv->mode == CheckpointMode::kAsync ? "async" : "sync";
  chart_->setTitle(tr("Goodput vs checkpoint interval (%1 checkpoints, %2 Monte Carlo runs per interval)")
                       .arg(QString::fromLatin1(mode_name))
                       .arg(adv->runs));

  const CheckpointCost& cost = adv->sync_cost;
  const std::size_t model = static_cast<std::size_t>(StatePart::kModel);
  const std::size_t optimizer = static_cast<std::size_t>(StatePart::kOptimizer);
  const double other = cost.total_bytes - cost.part_bytes[model] - cost.part_bytes[optimizer];
  size_->setText(tr("%1 per checkpoint (model %2, optimizer %3, other %4; %5) - write %6 at %7 GB/s, "
                    "bound: %8; restart R = %9")
                     .arg(bytes_text(cost.total_bytes), bytes_text(cost.part_bytes[model]),
                          bytes_text(cost.part_bytes[optimizer]), bytes_text(other),
                          report_->scenario.checkpoint.value_or(CheckpointSpec{}).sharded ? tr("sharded")
                                                                                         : tr("gathered to rank 0"))
                     .arg(seconds_text(cost.write_s))
                     .arg(cost.storage_write_Bps / 1e9, 0, 'g', 4)
                     .arg(QString::fromLatin1(cost.write_bound))
                     .arg(seconds_text(adv->restart_s)));
  const auto mode_line = [](const char* name, const planner::ModeAdvice& a) {
    if (!a.feasible) return tr("<b>%1</b>: not possible: %2").arg(QString::fromLatin1(name),
                                                                 QString::fromStdString(a.why_not).toHtmlEscaped());
    return tr("<b>%1</b>: pause %2; Young %3, Daly %4, simulated optimum %5 (%6 steps)")
        .arg(QString::fromLatin1(name), seconds_text(a.pause_s), seconds_text(a.young_s), seconds_text(a.daly_s),
             seconds_text(a.optimum_s))
        .arg(a.optimum_steps);
  };
  const sim::CampaignSummary& rec = adv->recommended.sim;
  // The time to train's p10-p90 with the step time's band as well (planner::time_to_train_band).
  QString band;
  if (const auto b = planner::time_to_train_band(*adv, adv->recommended)) {
    band = tr(" (p10-p90 %1 - %2 days with the step time's band)")
               .arg(b->p10 / 86400, 0, 'f', 2)
               .arg(b->p90 / 86400, 0, 'f', 2);
  }
  QString text = tr("<b>Recommendation: %1 checkpoints every %2 steps (%3 of compute)</b>; goodput %4% "
                    "(p10 %5%, p90 %6%); time to train %7 days%11.<br>%8<br>%9<br>%10")
                     .arg(QString::fromLatin1(mode_name))
                     .arg(adv->interval_steps)
                     .arg(seconds_text(adv->interval_s))
                     .arg(100 * rec.goodput.mean, 0, 'f', 2)
                     .arg(100 * rec.goodput.p10, 0, 'f', 2)
                     .arg(100 * rec.goodput.p90, 0, 'f', 2)
                     .arg(rec.wall_s.mean / 86400, 0, 'f', 2)
                     .arg(QString::fromStdString(adv->reason).toHtmlEscaped(), mode_line("sync", adv->sync),
                          mode_line("async", adv->async), band);
  recommendation_->setText(text);
  details_->setPlainText(QString::fromStdString(app::checkpoint_text(*report_)));
}

}  // namespace stepcast::gui

#include "collectives_view.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <utility>

#include <QCategoryAxis>
#include <QChart>
#include <QChartView>
#include <QComboBox>
#include <QGridLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QLineSeries>
#include <QSpinBox>
#include <QSplitter>
#include <QStandardItemModel>
#include <QTableWidget>
#include <QValueAxis>
#include <QVBoxLayout>

#include "document.h"
#include "stepcast/models/presets.h"
#include "style.h"

namespace stepcast::gui {
namespace {

constexpr std::array<CollKind, 6> kKinds{CollKind::kAllReduce, CollKind::kAllGather, CollKind::kReduceScatter,
                                         CollKind::kAllToAll,  CollKind::kBroadcast, CollKind::kSendRecv};
constexpr std::array<CollAlgo, 6> kAlgos{CollAlgo::kAuto,         CollAlgo::kRing,     CollAlgo::kTree,
                                         CollAlgo::kHierarchical, CollAlgo::kPairwise, CollAlgo::kDirect};
constexpr std::array<NcclProto, 3> kProtos{NcclProto::kLL, NcclProto::kLL128, NcclProto::kSimple};
constexpr int kScenarioCluster = 0;

// One colour per table row (the chart's curves), in the table's order.
const std::array<QColor, 6> kCurveColors{QColor(0x1f, 0x77, 0xb4), QColor(0xff, 0x7f, 0x0e), QColor(0x2c, 0xa0, 0x2c),
                                         QColor(0xd6, 0x27, 0x28), QColor(0x94, 0x67, 0xbd), QColor(0x8c, 0x56, 0x4b)};

QString text(const std::string& s) { return QString::fromStdString(s); }

QTableWidgetItem* number_item(double v, int decimals) {
  auto* item = new QTableWidgetItem(QString::number(v, 'f', decimals));
  item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
  return item;
}

}  // namespace

CollectivesView::CollectivesView(ScenarioDocument* doc, QWidget* parent) : View(doc, parent) {
  setObjectName(QStringLiteral("collectives"));
  auto* top = new QVBoxLayout(this);

  auto* grid = new QGridLayout();
  const auto add = [this, grid](int row, int col, const QString& name, QWidget* control, const QString& tip) {
    auto* label = new QLabel(name, this);
    label->setBuddy(control);
    control->setToolTip(tip);
    grid->addWidget(label, row, col);
    grid->addWidget(control, row, col + 1);
  };
  kind_ = new QComboBox(this);
  kind_->setObjectName(QStringLiteral("kind"));
  for (CollKind k : kKinds) kind_->addItem(QString::fromLatin1(to_string(k)));
  size_ = new QLineEdit(QStringLiteral("1GiB"), this);
  size_->setObjectName(QStringLiteral("size"));
  gpus_ = new QSpinBox(this);
  gpus_->setObjectName(QStringLiteral("gpus"));
  gpus_->setRange(2, 1048576);
  gpus_->setValue(64);
  stride_ = new QSpinBox(this);
  stride_->setObjectName(QStringLiteral("stride"));
  stride_->setRange(1, 1048576);
  group_ = new QComboBox(this);
  group_->setObjectName(QStringLiteral("group"));
  cluster_ = new QComboBox(this);
  cluster_->setObjectName(QStringLiteral("cluster"));
  cluster_->addItem(tr("the scenario's cluster"));
  for (const auto& [name, spec] : builtin_presets().clusters) cluster_->addItem(text(name));
  algo_ = new QComboBox(this);
  algo_->setObjectName(QStringLiteral("algorithm"));
  algo_->addItem(tr("every algorithm"));
  for (CollAlgo a : kAlgos) algo_->addItem(QString::fromLatin1(to_string(a)));
  proto_ = new QComboBox(this);
  proto_->setObjectName(QStringLiteral("protocol"));
  proto_->addItem(tr("the tuner's choice"));
  for (NcclProto p : kProtos) proto_->addItem(QString::fromLatin1(to_string(p)));

  add(0, 0, tr("Collective"), kind_, tr("What nccl-tests' *_perf binaries time"));
  add(0, 2, tr("Size"), size_,
      tr("The buffer as nccl-tests counts it: 1GiB, 512MiB, 64K (powers of 1024), 1GB (powers of 1000), 1e9 "
         "(bytes)"));
  add(0, 4, tr("GPUs"), gpus_, tr("Ranks in the group (send_recv: one transfer between two ranks)"));
  add(0, 6, tr("Stride"), stride_, tr("Members this many GPUs apart in rank order (8 on 8-GPU nodes: one per node)"));
  add(1, 6, tr("Group"), group_,
      tr("A group of the scenario's plan: its size and stride (Megatron's rank order, the plan's placement)"));
  add(1, 0, tr("Cluster"), cluster_, tr("The open scenario's cluster (calibration included), or a cluster preset"));
  add(1, 2, tr("Algorithm"), algo_, tr("Every algorithm the model has for the collective, or one (auto: NCCL's pick)"));
  add(1, 4, tr("NCCL protocol"), proto_,
      tr("The fastest of LL, LL128 and Simple as NCCL's tuner picks, or one protocol as NCCL_PROTO forces it"));
  grid->setColumnStretch(8, 1);
  top->addLayout(grid);

  message_ = message_label(QStringLiteral("message"), this);
  top->addWidget(message_);
  summary_ = new QLabel(this);
  summary_->setObjectName(QStringLiteral("summary"));
  summary_->setWordWrap(true);
  summary_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  top->addWidget(summary_);

  auto* split = new QSplitter(Qt::Vertical, this);
  table_ = new QTableWidget(0, 5, split);
  table_->setObjectName(QStringLiteral("algorithms"));
  table_->setHorizontalHeaderLabels(
      {tr("algorithm"), tr("time (us)"), tr("algbw (GB/s)"), tr("busbw (GB/s)"), tr("band (us)")});
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
  table_->verticalHeader()->setVisible(false);
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);

  chart_ = new QChart();
  chart_->setTitle(tr("busbw against size"));
  chart_->legend()->setAlignment(Qt::AlignBottom);
  chart_->setMargins(QMargins(4, 4, 4, 4));
  // x = log2(size), labelled in binary units (showReport).
  auto* x = new QCategoryAxis();
  x->setTitleText(tr("size (log scale)"));
  x->setLabelsPosition(QCategoryAxis::AxisLabelsPositionOnValue);
  auto* y = new QValueAxis();
  y->setTitleText(tr("busbw (GB/s)"));
  y->setLabelFormat(QStringLiteral("%.0f"));
  chart_->addAxis(x, Qt::AlignBottom);
  chart_->addAxis(y, Qt::AlignLeft);
  auto* chart_view = new QChartView(chart_, split);
  chart_view->setObjectName(QStringLiteral("busbw_chart"));
  chart_view->setRenderHint(QPainter::Antialiasing);
  chart_view->setMinimumHeight(260);
  split->addWidget(table_);
  split->addWidget(chart_view);
  split->setSizes({160, 560});
  top->addWidget(split, 1);

  for (QComboBox* box : {kind_, cluster_, algo_, proto_}) {
    connect(box, &QComboBox::currentIndexChanged, this, &CollectivesView::recompute);
  }
  for (QSpinBox* box : {gpus_, stride_}) {
    connect(box, &QSpinBox::valueChanged, this, [this] {
      const QSignalBlocker keep(group_);
      group_->setCurrentIndex(0);  // edited by hand: no longer the plan's group
      recompute();
    });
  }
  connect(group_, &QComboBox::currentIndexChanged, this, &CollectivesView::groupChosen);
  connect(size_, &QLineEdit::editingFinished, this, &CollectivesView::recompute);
  // An edit of the scenario may change its cluster, its plan's groups and whether it is
  // valid: the controls follow it without signals, then the collective is priced once.
  connect(doc, &ScenarioDocument::changed, this, [this] {
    syncGroups();
    syncClusters();
    recompute();
  });
  syncGroups();
  syncClusters();
  recompute();
}

CollectivesView::~CollectivesView() = default;

void CollectivesView::syncGroups() {
  const QSignalBlocker keep(group_);
  // Item data: {GroupKind, ranks, stride}; "custom" has none.
  const QVariantList was = group_->currentData().toList();
  group_->clear();
  group_->addItem(tr("custom"));
  const std::optional<Scenario>& s = document()->scenario();
  if (!s) return;
  for (const app::PlanGroup& g : app::plan_groups(*s)) {
    group_->addItem(tr("%1 group: %2 GPUs, stride %3")
                        .arg(QString::fromLatin1(to_string(g.kind)).toUpper())
                        .arg(g.ranks)
                        .arg(g.stride),
                    QVariantList{static_cast<int>(g.kind), g.ranks, g.stride});
  }
  // The same group stays chosen while the plan has it (its size or stride may have changed).
  for (int i = 1; i < group_->count() && !was.isEmpty(); ++i) {
    if (group_->itemData(i).toList().value(0) == was.value(0)) {
      group_->setCurrentIndex(i);
      applyGroup(i);
      return;
    }
  }
}

void CollectivesView::applyGroup(int index) {
  const QVariantList v = group_->itemData(index).toList();
  if (v.size() != 3) return;
  const QSignalBlocker keep_gpus(gpus_), keep_stride(stride_);
  gpus_->setValue(v[1].toInt());
  stride_->setValue(v[2].toInt());
}

void CollectivesView::groupChosen(int index) {
  if (index <= 0) return;
  applyGroup(index);
  recompute();
}

void CollectivesView::syncClusters() {
  // The scenario's cluster is offered while the scenario is valid; an invalid one falls
  // back to dgx-h100 (the CLI's default) until it is valid again.
  const bool valid = document()->scenario().has_value();
  if (auto* model = qobject_cast<QStandardItemModel*>(cluster_->model())) {
    if (QStandardItem* item = model->item(kScenarioCluster)) item->setEnabled(valid);
  }
  if (!valid && cluster_->currentIndex() == kScenarioCluster) {
    const QSignalBlocker keep(cluster_);  // the caller prices once
    const int h100 = cluster_->findText(QStringLiteral("dgx-h100"));
    if (h100 >= 0) cluster_->setCurrentIndex(h100);
  }
}

Result<app::CollectiveRequest> CollectivesView::request() const {
  app::CollectiveRequest q;
  q.kind = kKinds[static_cast<std::size_t>(std::max(0, kind_->currentIndex()))];
  auto size = app::parse_size_bytes(size_->text().trimmed().toStdString());
  if (!size.ok()) return Error{"Size: " + size.error().message};
  q.size_bytes = *size;
  q.gpus = gpus_->value();
  q.stride = stride_->value();
  if (cluster_->currentIndex() == kScenarioCluster) {
    std::optional<app::ScenarioInput> in = document()->input();
    if (!in) return Error{"Cluster: the scenario is invalid; choose a cluster preset"};
    q.cluster_file = std::move(*in);
  } else {
    q.cluster = cluster_->currentText().toStdString();
  }
  if (algo_->currentIndex() > 0) q.algo = kAlgos[static_cast<std::size_t>(algo_->currentIndex() - 1)];
  if (proto_->currentIndex() > 0) q.proto = kProtos[static_cast<std::size_t>(proto_->currentIndex() - 1)];
  return q;
}

void CollectivesView::recompute() {
  report_.reset();
  sweeps_.clear();
  auto q = request();
  if (!q.ok()) {
    message_->setText(text(q.error().message));
    showReport();
    return;
  }
  auto r = app::run_collective(*q);
  if (!r.ok()) {
    message_->setText(text(r.error().message));
    showReport();
    return;
  }
  message_->clear();
  report_ = std::make_unique<app::CollectiveReport>(std::move(*r));
  // Each row's curve: the same request with that algorithm only, swept from 8 B (a fit's
  // row, "calibrated", is what auto gives at every size).
  if (q->size_bytes >= 8) {
    for (const app::CollectiveRow& row : report_->algorithms) {
      app::CollectiveRequest one = *q;
      one.algo = row.algo;
      one.sweep = true;
      auto swept = app::run_collective(one);
      sweeps_.push_back(swept.ok() ? swept->sweep : std::vector<app::CollectiveRow>{});
    }
  }
  showReport();
}

void CollectivesView::showReport() {
  for (QLineSeries* s : curves_) {
    chart_->removeSeries(s);
    delete s;
  }
  curves_.clear();
  table_->setRowCount(0);
  if (!report_) {
    summary_->clear();
    return;
  }
  const app::CollectiveReport& r = *report_;
  QString protocols;
  if (r.forced_proto != NcclProto::kNone) {
    protocols = tr("; ring and tree on NCCL's %1 protocol only (NCCL_PROTO=%1)")
                    .arg(QString::fromLatin1(to_string(r.forced_proto)));
  } else if (r.cluster.collectives == CollectiveModel::kNccl) {
    protocols = tr("; ring and tree on the fastest of NCCL's protocols, as its tuner picks");
  }
  const QString cluster = cluster_->currentIndex() == kScenarioCluster
                              ? tr("the scenario's cluster (%1)").arg(text(r.cluster.name))
                              : tr("cluster %1").arg(text(r.cluster_label));
  summary_->setText(tr("%1 of %2 on %3 GPUs (%4 per node on %5 nodes), %6; busbw = algbw x %7%8. "
                       "* = what auto picks. Band: the model at the corners of its inputs' ranges, not a "
                       "statistical interval.")
                        .arg(QString::fromLatin1(to_string(r.kind)), text(app::format_size(r.size_bytes)))
                        .arg(r.ranks)
                        .arg(r.shape.ranks_per_node)
                        .arg(r.shape.nodes)
                        .arg(cluster)
                        .arg(r.bus_factor, 0, 'g', 6)
                        .arg(protocols));
  table_->setRowCount(static_cast<int>(r.algorithms.size()));
  for (std::size_t i = 0; i < r.algorithms.size(); ++i) {
    const app::CollectiveRow& row = r.algorithms[i];
    const int at = static_cast<int>(i);
    table_->setItem(at, 0, new QTableWidgetItem(text(app::collective_row_label(row)) +
                                                (row.is_auto ? QStringLiteral(" *") : QString())));
    table_->setItem(at, 1, number_item(row.time_s * 1e6, 2));
    table_->setItem(at, 2, number_item(row.algbw_GBps, 2));
    table_->setItem(at, 3, number_item(row.busbw_GBps, 2));
    auto* band = new QTableWidgetItem(
        QStringLiteral("%1 - %2").arg(row.band_low_s * 1e6, 0, 'f', 2).arg(row.band_high_s * 1e6, 0, 'f', 2));
    band->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
    table_->setItem(at, 4, band);
  }

  auto* x = qobject_cast<QCategoryAxis*>(chart_->axes(Qt::Horizontal).value(0));
  auto* y = qobject_cast<QValueAxis*>(chart_->axes(Qt::Vertical).value(0));
  double y_hi = 0;
  for (std::size_t i = 0; i < sweeps_.size() && i < r.algorithms.size(); ++i) {
    auto* s = new QLineSeries();
    s->setName(text(app::collective_row_label(r.algorithms[i])).section(QLatin1Char(' '), 0, 0));
    s->setPen(QPen(kCurveColors[i % kCurveColors.size()], 2));
    for (const app::CollectiveRow& p : sweeps_[i]) {
      if (!std::isfinite(p.busbw_GBps)) continue;
      s->append(std::log2(static_cast<double>(p.size_bytes)), p.busbw_GBps);
      y_hi = std::max(y_hi, p.busbw_GBps);
    }
    chart_->addSeries(s);
    s->attachAxis(x);
    s->attachAxis(y);
    curves_.push_back(s);
  }
  if (x) {
    // Labels every 32x from 8 B (8 B, 32 B, 1 KiB, 32 KiB, ...) up to SIZE.
    const double top = std::max(4.0, std::log2(static_cast<double>(r.size_bytes)));
    for (const QString& label : x->categoriesLabels()) x->remove(label);
    for (int e = 3; e <= top; e = e < 5 ? 5 : e + 5) {
      x->append(text(app::format_size(std::int64_t{1} << e)), e);
    }
    x->setRange(3, top);
  }
  if (y) {
    y->setRange(0, y_hi > 0 ? y_hi * 1.05 : 1);
    y->applyNiceNumbers();
  }
  chart_->setTitle(tr("busbw against size: %1 on %2 GPUs, 8 B doubling up to %3 (nccl-tests -b 8 -e SIZE -f 2)")
                       .arg(QString::fromLatin1(to_string(r.kind)))
                       .arg(r.ranks)
                       .arg(text(app::format_size(r.size_bytes))));
}

void CollectivesView::prepareScreenshot() {
  const QSignalBlocker b_kind(kind_), b_gpus(gpus_), b_stride(stride_), b_cluster(cluster_), b_algo(algo_),
      b_proto(proto_), b_group(group_);
  group_->setCurrentIndex(0);
  kind_->setCurrentIndex(0);
  size_->setText(QStringLiteral("1GiB"));
  gpus_->setValue(64);
  stride_->setValue(1);
  cluster_->setCurrentIndex(document()->scenario() ? kScenarioCluster : cluster_->findText(QStringLiteral("dgx-h100")));
  algo_->setCurrentIndex(0);
  proto_->setCurrentIndex(0);
  recompute();
}

}  // namespace stepcast::gui

#include "planner_view.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include <QChart>
#include <QChartView>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QLabel>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QScatterSeries>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QTableView>
#include <QThread>
#include <QValueAxis>
#include <QVBoxLayout>
#include <nlohmann/json.hpp>

#ifdef __linux__
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "document.h"
#include "stepcast/models/names.h"
#include "stepcast/planner/layout.h"
#include "stepcast/planner/report.h"
#include "style.h"

namespace stepcast::gui {
namespace {

constexpr double kDay = 86400;

QString percent(double fraction, int decimals = 1) {
  return QStringLiteral("%1%").arg(100.0 * fraction, 0, 'f', decimals);
}

// "$502.2k" as `stepcast plan` prints costs.
QString money(double v) {
  if (v >= 1e6) return QStringLiteral("$%1M").arg(v / 1e6, 0, 'f', 2);
  if (v >= 1e3) return QStringLiteral("$%1k").arg(v / 1e3, 0, 'f', 1);
  return QStringLiteral("$%1").arg(v, 0, 'f', 0);
}

// The tokens/s band follows from the step-time band (tokens per step are fixed).
std::pair<double, double> tokens_band(const planner::Candidate& c) {
  const planner::Figures& f = c.figures();
  if (!(c.step_time_band.p10 > 0 && c.step_time_band.p90 > 0)) return {f.tokens_per_s, f.tokens_per_s};
  const double tokens_per_step = f.tokens_per_s * f.step_time_s;
  return {tokens_per_step / c.step_time_band.p90, tokens_per_step / c.step_time_band.p10};
}

// Spare memory as a colour: red with nothing spare, green from 25% of the usable HBM up
// (the Pareto front's third axis, docs/planner.md).
QColor spare_color(const planner::Candidate& c) {
  const double f = c.usable_bytes > 0 ? std::clamp(c.spare_bytes() / c.usable_bytes / 0.25, 0.0, 1.0) : 0.0;
  return QColor::fromHsvF(static_cast<float>(f / 3.0), 0.85f, 0.85f);  // hue 0 (red) .. 120 deg (green)
}

// Sorts by the column's number; equal numbers keep rank order in either direction, so
// sorting by tokens/s puts the same layout first as the planner's best_by_tokens (the
// first of equals in rank order) whatever the table was sorted by before.
class PlanSortModel : public QSortFilterProxyModel {
 public:
  using QSortFilterProxyModel::QSortFilterProxyModel;

 protected:
  // Reads the numbers directly (no QVariant): a re-sort of ~20,000 rows compares ~300,000
  // pairs, which must stay well inside the GUI's 100 ms budget.
  bool lessThan(const QModelIndex& left, const QModelIndex& right) const override {
    const auto* m = static_cast<const PlanTableModel*>(sourceModel());
    const double l = m->sortValue(left.row(), left.column()), r = m->sortValue(right.row(), right.column());
    if (l != r) return l < r;
    // Source rows are in rank order; Qt sorts descending by calling lessThan(right, left).
    return sortOrder() == Qt::AscendingOrder ? left.row() < right.row() : left.row() > right.row();
  }
};

// Runs the search at a lower CPU priority than the GUI thread (Linux: per-thread nice,
// inherited by the search's pool threads), so on a machine with fewer cores than busy
// threads the event loop still gets the CPU within a few ms.
void lower_worker_priority() {
#ifdef __linux__
  const auto tid = static_cast<id_t>(::syscall(SYS_gettid));
  (void)::setpriority(PRIO_PROCESS, tid, 10);
#endif
}

}  // namespace

// ---------------------------------------------------------------------------------------
// PlanTableModel

void PlanTableModel::setReport(std::shared_ptr<const app::PlanReport> report) {
  beginResetModel();
  report_ = std::move(report);
  endResetModel();
}

int PlanTableModel::rowCount(const QModelIndex& parent) const {
  if (parent.isValid() || !report_) return 0;
  return static_cast<int>(report_->result.ranked.size());
}

int PlanTableModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : kColumns; }

QVariant PlanTableModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (role != Qt::DisplayRole) return {};
  if (orientation == Qt::Vertical) return {};
  switch (section) {
    case kRank: return tr("rank");
    case kLayout: return tr("layout");
    case kGpus: return tr("GPUs");
    case kStepTime: return tr("step time");
    case kTokensPerS: return tr("tokens/s (p10 - p90)");
    case kMfu: return tr("MFU");
    case kMemory: return tr("memory / usable");
    case kTimeToTrain: return tr("time to train");
    case kGoodput: return tr("goodput");
    case kCost: return tr("cost");
    case kTie: return tr("ties #1");
    default: return {};
  }
}

double PlanTableModel::sortValue(int row, int column) const {
  const planner::Candidate& c = report_->result.ranked[static_cast<std::size_t>(row)];
  const planner::Figures& f = c.figures();
  switch (column) {
    case kGpus: return c.gpus();
    case kStepTime: return f.step_time_s;
    case kTokensPerS: return f.tokens_per_s;
    case kMfu: return f.mfu;
    case kMemory: return c.peak_bytes();
    case kTimeToTrain: return f.time_to_train_s;
    case kGoodput: return f.goodput;
    case kCost: return f.cost;
    case kTie: return row == 0 ? 2.0 : c.ties_best ? 1.0 : 0.0;
    default: return row;  // rank, layout: rank order
  }
}

QVariant PlanTableModel::data(const QModelIndex& index, int role) const {
  if (!report_ || !index.isValid() || index.row() >= rowCount()) return {};
  const std::size_t row = static_cast<std::size_t>(index.row());
  const planner::Candidate& c = report_->result.ranked[row];
  const planner::Figures& f = c.figures();
  const bool trained = f.time_to_train_s > 0;
  const bool priced = report_->result.search.price_per_gpu_hour > 0;
  if (role == kRankRole) return index.row();
  if (role == Qt::UserRole) return sortValue(index.row(), index.column());
  if (role == Qt::TextAlignmentRole) {
    return index.column() == kLayout ? QVariant(Qt::AlignLeft | Qt::AlignVCenter)
                                     : QVariant(Qt::AlignRight | Qt::AlignVCenter);
  }
  if (role == Qt::ToolTipRole && index.column() == kStepTime) {
    return c.simulated ? tr("event engine (closed form %1)").arg(format_seconds(c.closed.step_time_s))
                       : tr("closed form (not re-simulated)");
  }
  if (role != Qt::DisplayRole) return {};
  switch (index.column()) {
    case kRank: return index.row() + 1;
    case kLayout: return QString::fromStdString(planner::layout_string(c.plan));
    case kGpus: return c.gpus();
    case kStepTime: return format_seconds(f.step_time_s) + (c.simulated ? QString() : tr(" (closed)"));
    case kTokensPerS: {
      const auto [lo, hi] = tokens_band(c);
      return QStringLiteral("%1 (%2 - %3)").arg(format_count(f.tokens_per_s), format_count(lo), format_count(hi));
    }
    case kMfu: return percent(f.mfu);
    case kMemory:
      return QStringLiteral("%1 / %2").arg(format_gib(c.peak_bytes()), format_gib(c.usable_bytes));
    case kTimeToTrain: return trained ? tr("%1 d").arg(f.time_to_train_s / kDay, 0, 'f', 1) : QStringLiteral("-");
    case kGoodput: return percent(f.goodput, 2);
    case kCost: return priced ? money(f.cost) : QStringLiteral("-");
    case kTie: return row == 0 ? tr("best") : c.ties_best ? tr("ties") : QString();
    default: return {};
  }
}

// ---------------------------------------------------------------------------------------
// PlannerView

PlannerView::PlannerView(ScenarioDocument* doc, QWidget* parent) : View(doc, parent) {
  setObjectName(QStringLiteral("planner"));
  auto* top = new QVBoxLayout(this);

  auto* bar = new QHBoxLayout();
  start_ = new QPushButton(tr("Search layouts"), this);
  start_->setObjectName(QStringLiteral("start"));
  cancel_button_ = new QPushButton(tr("Cancel"), this);
  cancel_button_->setObjectName(QStringLiteral("cancel"));
  progress_ = new QProgressBar(this);
  progress_->setObjectName(QStringLiteral("progress"));
  progress_->setRange(0, 1000);
  progress_->setValue(0);
  progress_->setTextVisible(true);
  progress_->setFormat(QStringLiteral("%p%"));
  adopt_ = new QPushButton(tr("Use this layout"), this);
  adopt_->setObjectName(QStringLiteral("adopt"));
  adopt_->setToolTip(tr("Write the selected layout into the scenario's plan (one undo step)"));
  bar->addWidget(start_);
  bar->addWidget(cancel_button_);
  bar->addWidget(progress_, 1);
  bar->addWidget(adopt_);
  top->addLayout(bar);

  status_ = new QLabel(this);
  status_->setObjectName(QStringLiteral("status"));
  status_->setWordWrap(true);
  status_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  top->addWidget(status_);

  auto* split = new QSplitter(Qt::Vertical, this);
  model_ = new PlanTableModel(this);
  proxy_ = new PlanSortModel(this);
  proxy_->setSourceModel(model_);
  proxy_->setSortRole(Qt::UserRole);
  table_ = new QTableView(split);
  table_->setObjectName(QStringLiteral("ranked"));
  table_->setModel(proxy_);
  table_->setSortingEnabled(true);
  table_->sortByColumn(PlanTableModel::kRank, Qt::AscendingOrder);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setSelectionMode(QAbstractItemView::SingleSelection);
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->verticalHeader()->hide();
  table_->verticalHeader()->setDefaultSectionSize(fontMetrics().height() + 6);
  // Fixed widths: sizing thousands of rows to their contents would stall the event loop.
  const int widths[PlanTableModel::kColumns] = {50, 520, 50, 90, 210, 60, 150, 90, 70, 70, 55};
  for (int i = 0; i < PlanTableModel::kColumns; ++i) table_->setColumnWidth(i, widths[i]);
  table_->horizontalHeader()->setStretchLastSection(true);

  auto* lower = new QSplitter(Qt::Horizontal, split);
  auto* chart_box = new QWidget(lower);
  auto* chart_layout = new QVBoxLayout(chart_box);
  chart_layout->setContentsMargins(0, 0, 0, 0);
  chart_ = new QChart();
  chart_->setTitle(tr("Pareto front"));
  chart_->legend()->setAlignment(Qt::AlignBottom);
  chart_->setMargins(QMargins(4, 4, 4, 4));
  pareto_ = new QScatterSeries();
  pareto_->setName(tr("Pareto layouts (colour: spare memory)"));
  pareto_->setMarkerSize(11);
  best_ = new QScatterSeries();
  best_->setName(tr("best (#1)"));
  best_->setMarkerShape(QScatterSeries::MarkerShapeRectangle);
  best_->setMarkerSize(16);
  best_->setColor(Qt::transparent);
  best_->setBorderColor(Qt::black);
  chart_->addSeries(pareto_);
  chart_->addSeries(best_);
  auto* x = new QValueAxis();
  x->setTitleText(tr("GPUs"));
  x->setLabelFormat(QStringLiteral("%d"));
  auto* y = new QValueAxis();
  y->setLabelFormat(QStringLiteral("%.4g"));
  chart_->addAxis(x, Qt::AlignBottom);
  chart_->addAxis(y, Qt::AlignLeft);
  for (QScatterSeries* s : {pareto_, best_}) {
    s->attachAxis(x);
    s->attachAxis(y);
  }
  chart_view_ = new QChartView(chart_, chart_box);
  chart_view_->setObjectName(QStringLiteral("pareto"));
  chart_view_->setRenderHint(QPainter::Antialiasing);
  chart_view_->setMinimumHeight(240);
  chart_layout->addWidget(chart_view_, 1);
  auto* key = new QLabel(tr("Point colour: spare memory beyond the headroom, red = none, green = 25% of usable HBM "
                            "or more. Click a point to select its row."),
                         chart_box);
  key->setWordWrap(true);
  chart_layout->addWidget(key);

  explain_ = new QPlainTextEdit(lower);
  explain_->setObjectName(QStringLiteral("explain"));
  explain_->setReadOnly(true);
  explain_->setLineWrapMode(QPlainTextEdit::NoWrap);
  QFont mono(QStringLiteral("monospace"));
  mono.setStyleHint(QFont::TypeWriter);
  explain_->setFont(mono);
  explain_->setPlaceholderText(tr("Select a row: why it ranks where it does and what limits it (--explain)."));
  lower->setStretchFactor(0, 2);
  lower->setStretchFactor(1, 3);
  split->addWidget(table_);
  split->addWidget(lower);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 2);
  top->addWidget(split, 1);

  connect(start_, &QPushButton::clicked, this, &PlannerView::startSearch);
  connect(cancel_button_, &QPushButton::clicked, this, &PlannerView::cancelSearch);
  connect(adopt_, &QPushButton::clicked, this, &PlannerView::adoptSelected);
  connect(table_->selectionModel(), &QItemSelectionModel::currentRowChanged, this, [this] {
    explainSelected();
    updateButtons();
  });
  connect(table_, &QTableView::doubleClicked, this, &PlannerView::adoptSelected);
  // A Pareto point selects its layout's row.
  connect(pareto_, &QScatterSeries::clicked, this, [this](const QPointF& p) {
    const app::PlanReport* r = report();
    if (!r) return;
    for (int i = 0; i < pareto_->count(); ++i) {
      if (pareto_->at(i) != p || static_cast<std::size_t>(i) >= r->result.pareto.size()) continue;
      const QModelIndex src = model_->index(static_cast<int>(r->result.pareto[static_cast<std::size_t>(i)]), 0);
      table_->setCurrentIndex(proxy_->mapFromSource(src));
      table_->scrollTo(table_->currentIndex());
      break;
    }
  });
  connect(doc, &ScenarioDocument::changed, this, &PlannerView::updateButtons);
  updateButtons();
}

PlannerView::~PlannerView() {
  // The worker holds its own copy of the scenario; a cancelled search stops within one
  // item or engine run, so this wait is short.
  if (cancel_) cancel_->store(true);
  if (thread_) {
    thread_->wait();
    delete thread_.data();
  }
}

bool PlannerView::busy() const { return running_; }

void PlannerView::prepareScreenshot() {
  if (!searched_ && !running_) startSearch();
}

void PlannerView::startSearch() {
  if (running_) return;
  const std::optional<Scenario>& s = document()->planScenario();
  if (!s) {
    status_->setText(tr("The scenario does not load: %1").arg(document()->error()));
    return;
  }
  app::PlanRequest request;
  request.scenario = app::ScenarioInput::value(*s);
  request.scenario.plan_template = true;
  request.rows = 20;
  cancel_ = std::make_shared<std::atomic<bool>>(false);
  request.cancel = cancel_.get();
  // Called on the worker thread about ten times a second: queued to the GUI thread. The
  // worker never outlives the view (the destructor cancels and joins it).
  request.progress = [this](std::int64_t done, std::int64_t total) {
    QMetaObject::invokeMethod(
        this, [this, done, total] { showProgress(done, total); }, Qt::QueuedConnection);
  };
  running_ = true;
  searched_ = true;
  model_->setReport(nullptr);
  updateChart();
  explain_->clear();
  progress_->setValue(0);
  status_->setText(tr("Searching..."));
  std::shared_ptr<std::atomic<bool>> keep = cancel_;  // the flag lives as long as the worker
  QThread* t = QThread::create([this, request = std::move(request), keep] {
    (void)keep;
    lower_worker_priority();
    auto result = std::make_shared<Result<app::PlanReport>>(app::run_plan(request));
    QMetaObject::invokeMethod(
        this, [this, result] { finishSearch(result); }, Qt::QueuedConnection);
  });
  t->setObjectName(QStringLiteral("planner-search"));
  connect(t, &QThread::finished, t, &QObject::deleteLater);
  thread_ = t;
  t->start();
  updateButtons();
}

void PlannerView::cancelSearch() {
  if (!running_ || !cancel_) return;
  cancel_->store(true);
  status_->setText(tr("Cancelling..."));
  updateButtons();
}

void PlannerView::showProgress(qint64 done, qint64 total) {
  if (!running_) return;
  progress_->setValue(total > 0 ? static_cast<int>(1000 * done / total) : 0);
  progress_->setFormat(QStringLiteral("%1 / %2").arg(format_count(static_cast<double>(done)),
                                                     format_count(static_cast<double>(total))));
  emit searchProgress(done, total);
}

void PlannerView::finishSearch(std::shared_ptr<Result<app::PlanReport>> result) {
  running_ = false;
  const bool cancelled = cancel_ && cancel_->load();
  cancel_.reset();
  if (!result->ok()) {
    model_->setReport(nullptr);
    updateChart();
    progress_->setValue(0);
    progress_->setFormat(QStringLiteral("%p%"));
    status_->setText(cancelled ? tr("Search cancelled: no result.")
                               : tr("Search failed: %1").arg(QString::fromStdString(result->error().message)));
  } else if (cancelled) {
    // Finished before it saw the flag: the user asked for no result.
    model_->setReport(nullptr);
    updateChart();
    status_->setText(tr("Search cancelled: no result."));
  } else {
    // Reset unsorted (rank order is the model's own: no comparisons), then sort only when
    // the table is sorted by something else: tens of thousands of rows stay within budget.
    const int column = proxy_->sortColumn();
    const Qt::SortOrder order = proxy_->sortOrder();
    proxy_->sort(-1);
    model_->setReport(std::make_shared<const app::PlanReport>(std::move(*result).value()));
    if (column >= 0 && !(column == PlanTableModel::kRank && order == Qt::AscendingOrder)) proxy_->sort(column, order);
    progress_->setValue(1000);
    showReport();
  }
  updateButtons();
  emit searchFinished();
  emit idle();
}

void PlannerView::showReport() {
  const app::PlanReport* r = report();
  updateChart();
  if (!r) return;
  const planner::PlanResult& res = r->result;
  QString text = tr("%1 layouts searched: %2 ranked, %3 rejected.")
                     .arg(format_count(static_cast<double>(res.counts.size)),
                          format_count(static_cast<double>(res.ranked.size())),
                          format_count(static_cast<double>(res.counts.rejected_total())));
  text += tr(" Ranked by %1; #1-#%2 re-simulated with the event engine.")
              .arg(QString::fromUtf8(objective_name(res.objective)))
              .arg(res.simulated);
  if (!res.ranked.empty()) {
    text += res.ties_with_best > 0 ? tr(" %n layout(s) tie with #1.", nullptr, res.ties_with_best)
                                   : tr(" No other layout ties with #1.");
  }
  if (res.scenario_layout) text += tr(" The scenario's own layout ranks %1.").arg(*res.scenario_layout + 1);
  if (res.ranked.empty()) text += tr(" Nothing fits: see the rejection counts (stepcast plan).");
  status_->setText(text);
  table_->setColumnHidden(PlanTableModel::kCost, !(res.search.price_per_gpu_hour > 0));
  table_->setColumnHidden(PlanTableModel::kTimeToTrain, !(r->scenario.workload.train_tokens > 0));
  if (!res.ranked.empty()) {
    table_->setCurrentIndex(proxy_->index(0, 0));
    table_->scrollToTop();
  }
}

void PlannerView::updateChart() {
  // Every change to a series or an axis re-lays the chart out at once, so the order matters
  // for the GUI's budget: empty the series, set the axes while they are empty (cheap), then
  // hand over the points and their colours in one call each.
  pareto_->clear();
  best_->clear();
  const app::PlanReport* r = report();
  auto* x = qobject_cast<QValueAxis*>(chart_->axes(Qt::Horizontal).value(0));
  auto* y = qobject_cast<QValueAxis*>(chart_->axes(Qt::Vertical).value(0));
  if (!r || r->result.ranked.empty()) {
    chart_->setTitle(tr("Pareto front"));
    return;
  }
  const planner::PlanResult& res = r->result;
  // Time to train when the workload gives its length, else the step time.
  const bool train = r->scenario.workload.train_tokens > 0;
  const auto y_of = [train](const planner::Candidate& c) {
    return train ? c.figures().time_to_train_s / kDay : c.figures().step_time_s;
  };
  double x_lo = 1e300, x_hi = 0, y_lo = 1e300, y_hi = 0;
  const auto extend = [&](const planner::Candidate& c) {
    x_lo = std::min(x_lo, static_cast<double>(c.gpus()));
    x_hi = std::max(x_hi, static_cast<double>(c.gpus()));
    y_lo = std::min(y_lo, y_of(c));
    y_hi = std::max(y_hi, y_of(c));
  };
  QList<QPointF> points;
  QHash<int, QHash<QXYSeries::PointConfiguration, QVariant>> colours;
  for (std::size_t i : res.pareto) {
    colours[static_cast<int>(points.size())][QXYSeries::PointConfiguration::Color] = spare_color(res.ranked[i]);
    points.append(QPointF(res.ranked[i].gpus(), y_of(res.ranked[i])));
    extend(res.ranked[i]);
  }
  const planner::Candidate& best = res.ranked.front();
  extend(best);

  const double x_pad = std::max(1.0, 0.1 * (x_hi - x_lo)), y_pad = std::max(1e-9, 0.08 * (y_hi - y_lo)) +
                                                                       0.02 * std::abs(y_hi);
  x->setRange(std::max(0.0, x_lo - x_pad), x_hi + x_pad);
  // GPU counts are integers: one tick per GPU count on a short axis, nice numbers otherwise
  // (the default five ticks on 63..65 would print "63 63 64 64 65").
  if (x->max() - x->min() <= 10) {
    x->setTickCount(static_cast<int>(std::lround(x->max() - x->min())) + 1);
  } else {
    x->applyNiceNumbers();
  }
  y->setRange(std::max(0.0, y_lo - y_pad), y_hi + y_pad);
  y->setTitleText(train ? tr("time to train (days)") : tr("step time (s)"));
  chart_->setTitle(tr("Pareto front: %1 layouts (fewer GPUs, %2, more spare memory)")
                       .arg(res.pareto.size())
                       .arg(train ? tr("shorter time to train") : tr("shorter step")));

  pareto_->replace(points);
  pareto_->setPointsConfiguration(colours);
  best_->append(best.gpus(), y_of(best));
}

const planner::Candidate* PlannerView::selectedCandidate() const {
  const app::PlanReport* r = report();
  const QModelIndex cur = table_->currentIndex();
  if (!r || !cur.isValid()) return nullptr;
  const int row = proxy_->mapToSource(cur).row();
  if (row < 0 || static_cast<std::size_t>(row) >= r->result.ranked.size()) return nullptr;
  return &r->result.ranked[static_cast<std::size_t>(row)];
}

QString PlannerView::layoutAt(int view_row) const {
  const QModelIndex i = proxy_->index(view_row, PlanTableModel::kLayout);
  return i.isValid() ? i.data().toString() : QString();
}

void PlannerView::explainSelected() {
  const planner::Candidate* c = selectedCandidate();
  const app::PlanReport* r = report();
  if (!c || !r) {
    explain_->clear();
    return;
  }
  // A ranked layout is found in the result (no engine run): cheap on the GUI thread.
  std::string layout = planner::layout_string(c->plan);
  if (r->result.search.gpus.size() > 1) layout += ",gpus=" + std::to_string(c->gpus());
  auto e = planner::explain_layout(r->scenario, r->result, layout);
  explain_->setPlainText(e.ok() ? QString::fromStdString(planner::explanation_text(r->result, *e))
                                : tr("explain: %1").arg(QString::fromStdString(e.error().message)));
}

void PlannerView::adoptSelected() {
  const planner::Candidate* c = selectedCandidate();
  if (!c || running_) return;
  const Plan& p = c->plan;
  using Path = std::vector<std::string>;
  std::vector<std::pair<Path, nlohmann::json>> edits = {
      {{"plan", "tp"}, p.tp},
      {{"plan", "pp"}, p.pp},
      {{"plan", "dp"}, p.dp},
      {{"plan", "cp"}, p.cp},
      {{"plan", "ep"}, p.ep},
      {{"plan", "sequence_parallel"}, p.sequence_parallel},
      {{"plan", "tp_comm_overlap"}, p.tp_comm_overlap},
      {{"plan", "schedule"}, std::string(name_of(p.schedule))},
      {{"plan", "virtual_stages"}, p.virtual_stages},
      {{"plan", "microbatch"}, p.microbatch},
      {{"plan", "global_batch"}, p.global_batch},
      {{"plan", "zero"}, p.zero},
      {{"plan", "recompute"}, std::string(name_of(p.recompute))},
      {{"plan", "stack"}, std::string(name_of(p.stack))},
  };
  // Folded experts and offload: written when the layout has them or the plan names them.
  if (p.expert_tp() != p.tp || document()->value({"plan", "etp"})) edits.push_back({{"plan", "etp"}, p.expert_tp()});
  for (const auto& [key, value] : {std::pair<const char*, double>{"offload_optimizer", p.offload_optimizer},
                                   {"offload_activations", p.offload_activations},
                                   {"offload_weights", p.offload_weights}}) {
    if (value > 0 || document()->value({"plan", key})) edits.push_back({{"plan", key}, value});
  }
  // Recomputation's own keys (partial or grouped full recomputation, the selective modules):
  // written when the layout has them or the plan names them, and removed where the layout's
  // recompute does not take them (the loader refuses them there).
  auto recompute_key = [&](const char* key, bool applies, bool has, const nlohmann::json& value) {
    const bool named = document()->value({"plan", key}) != nullptr;
    if (!applies) {
      if (named) edits.push_back({{"plan", key}, nullptr});
    } else if (has || named) {
      edits.push_back({{"plan", key}, value});
    }
  };
  const bool full = p.recompute == Recompute::kFull, selective = p.recompute == Recompute::kSelective;
  recompute_key("recompute_num_layers", full, p.recompute_count() > 0, p.recompute_count());
  recompute_key("recompute_method", full, p.recompute_group() > 1, std::string(name_of(p.recompute_method)));
  recompute_key("recompute_modules", selective, p.recompute_modules != kDefaultRecomputeModules,
                recompute_module_names(p.recompute_modules));
  // The interleaved schedule's microbatch group: written when the layout has one other than pp,
  // removed when the plan names one the layout does not take.
  if (p.microbatch_group > 0) {
    edits.push_back({{"plan", "microbatch_group_size_per_vp_stage"}, p.microbatch_group});
  } else if (document()->value({"plan", "microbatch_group_size_per_vp_stage"})) {
    edits.push_back({{"plan", "microbatch_group_size_per_vp_stage"}, nullptr});
  }
  // All-to-all overlap: written when the layout has it or the plan names it.
  if (p.moe_a2a_overlap || document()->value({"plan", "moe_a2a_overlap"})) {
    edits.push_back({{"plan", "moe_a2a_overlap"}, p.moe_a2a_overlap});
  }
  // Needed when tp exceeds the KV heads; written only then or when the plan names it.
  if (p.replicate_kv_heads || document()->value({"plan", "replicate_kv_heads"})) {
    edits.push_back({{"plan", "replicate_kv_heads"}, p.replicate_kv_heads});
  }
  const QString layout = QString::fromStdString(planner::layout_string(p));
  if (!document()->setValues(edits, tr("use layout %1").arg(layout))) {
    status_->setText(tr("Cannot write the layout: the scenario text is not a JSON object the editor can edit."));
    return;
  }
  if (!document()->scenario()) {
    status_->setText(tr("Layout written; the scenario does not load: %1").arg(document()->error()));
  } else {
    status_->setText(tr("The scenario's plan is now %1 (Edit > Undo restores it).").arg(layout));
  }
  emit layoutAdopted();
}

void PlannerView::updateButtons() {
  start_->setEnabled(!running_ && document()->planScenario().has_value());
  start_->setToolTip(document()->planScenario() ? QString() : document()->error());
  cancel_button_->setEnabled(running_ && cancel_ && !cancel_->load());
  adopt_->setEnabled(!running_ && selectedCandidate() != nullptr);
}

}  // namespace stepcast::gui

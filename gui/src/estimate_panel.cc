#include "estimate_panel.h"

#include <QBarCategoryAxis>
#include <QBarSet>
#include <QChart>
#include <QChartView>
#include <QElapsedTimer>
#include <QFormLayout>
#include <QHorizontalStackedBarSeries>
#include <QLabel>
#include <QValueAxis>
#include <QVBoxLayout>

#include "document.h"
#include "style.h"

namespace stepcast::gui {
namespace {

QLabel* figure_label(QWidget* parent, const char* name) {
  auto* l = new QLabel(parent);
  l->setObjectName(QString::fromLatin1(name));
  l->setTextInteractionFlags(Qt::TextSelectableByMouse);
  return l;
}

// One horizontal bar of stacked parts (name, value, colour key) on a value axis up to `max`.
void fill_bar(QChart* chart, const QString& category, const std::vector<std::tuple<QString, double, QColor>>& parts,
              double max, const QString& unit) {
  chart->removeAllSeries();
  for (QAbstractAxis* a : chart->axes()) {
    chart->removeAxis(a);
    delete a;
  }
  auto* series = new QHorizontalStackedBarSeries();
  for (const auto& [name, value, color] : parts) {
    if (!(value > 0)) continue;
    auto* set = new QBarSet(name);
    *set << value;
    set->setColor(color);
    set->setBorderColor(color);
    series->append(set);
  }
  series->setBarWidth(0.6);
  chart->addSeries(series);
  auto* y = new QBarCategoryAxis();
  y->append(category);
  chart->addAxis(y, Qt::AlignLeft);
  series->attachAxis(y);
  auto* x = new QValueAxis();
  x->setRange(0, max > 0 ? max : 1);
  x->setTitleText(unit);
  x->setLabelFormat(QStringLiteral("%.3g"));
  chart->addAxis(x, Qt::AlignBottom);
  series->attachAxis(x);
}

QChart* make_chart(QWidget* parent, const QString& title, QVBoxLayout* into) {
  auto* chart = new QChart();
  chart->setTitle(title);
  chart->legend()->setAlignment(Qt::AlignBottom);
  chart->setMargins(QMargins(4, 4, 4, 4));
  auto* view = new QChartView(chart, parent);
  view->setRenderHint(QPainter::Antialiasing);
  view->setMinimumHeight(220);
  into->addWidget(view, 1);
  return chart;
}

}  // namespace

EstimatePanel::EstimatePanel(ScenarioDocument* doc, QWidget* parent) : View(doc, parent) {
  setObjectName(QStringLiteral("estimate"));
  auto* top = new QVBoxLayout(this);
  message_ = figure_label(this, "message");
  message_->setWordWrap(true);
  message_->setStyleSheet(QStringLiteral("QLabel { color: #b00020; }"));
  top->addWidget(message_);
  auto* form = new QFormLayout();
  step_ = figure_label(this, "step");
  tokens_ = figure_label(this, "tokens");
  mfu_ = figure_label(this, "mfu");
  train_ = figure_label(this, "train");
  memory_ = figure_label(this, "memory");
  fits_ = figure_label(this, "fits");
  form->addRow(tr("Step time"), step_);
  form->addRow(tr("Throughput"), tokens_);
  form->addRow(tr("MFU / HFU"), mfu_);
  form->addRow(tr("Time to train"), train_);
  form->addRow(tr("Memory per GPU"), memory_);
  form->addRow(QString(), fits_);
  QFont big = step_->font();
  big.setPointSizeF(big.pointSizeF() * 1.3);
  big.setBold(true);
  step_->setFont(big);
  tokens_->setFont(big);
  top->addLayout(form);
  memory_chart_ = make_chart(this, tr("Memory per GPU (worst rank)"), top);
  breakdown_chart_ = make_chart(this, tr("Step time breakdown (slowest rank)"), top);
  connect(doc, &ScenarioDocument::changed, this, &EstimatePanel::update);
  update();
}

EstimatePanel::~EstimatePanel() = default;

QString EstimatePanel::figure(const QString& name) const {
  const auto* l = findChild<QLabel*>(name);
  return l ? l->text() : QString();
}

void EstimatePanel::update() {
  QElapsedTimer timer;
  timer.start();
  report_.reset();
  const std::optional<app::ScenarioInput> input = document()->input();
  QString problem;
  if (!input) {
    problem = document()->error().isEmpty() ? tr("No scenario.") : tr("The scenario is invalid (see the editor).");
  } else if (Result<app::EstimateReport> r = app::run_estimate({*input})) {
    report_ = std::move(r).value();
  } else {
    problem = QString::fromStdString(r.error().message);
  }
  message_->setText(problem);
  message_->setVisible(!problem.isEmpty());
  for (QLabel* l : {step_, tokens_, mfu_, train_, memory_, fits_}) l->setEnabled(report_.has_value());
  if (!report_) {
    last_ms_ = static_cast<double>(timer.nsecsElapsed()) / 1e6;
    return;
  }
  const Estimate& e = report_->estimate;
  const Scenario& s = report_->scenario;
  step_->setText(QStringLiteral("%1   (p10-p90 %2 - %3)")
                     .arg(format_seconds(e.step_time_s), format_seconds(e.step_time_band.p10),
                          format_seconds(e.step_time_band.p90)));
  tokens_->setText(QStringLiteral("%1 tokens/s   (p10-p90 %2 - %3; %4 per GPU)")
                       .arg(format_count(e.tokens_per_s), format_count(e.tokens_per_s_band.p10),
                            format_count(e.tokens_per_s_band.p90),
                            format_count(e.tokens_per_s / static_cast<double>(e.world))));
  mfu_->setText(QStringLiteral("%1 %  /  %2 %").arg(e.mfu * 100, 0, 'f', 1).arg(e.hfu * 100, 0, 'f', 1));
  if (s.workload.train_tokens > 0 && e.tokens_per_s > 0) {
    const double t = s.workload.train_tokens / e.tokens_per_s;
    const double lo = s.workload.train_tokens / e.tokens_per_s_band.p90;
    const double hi = s.workload.train_tokens / e.tokens_per_s_band.p10;
    train_->setText(QStringLiteral("%1 days for %2 tokens (p10-p90 %3 - %4 days; no failures)")
                        .arg(t / 86400, 0, 'f', 1)
                        .arg(s.workload.train_tokens, 0, 'g', 3)
                        .arg(lo / 86400, 0, 'f', 1)
                        .arg(hi / 86400, 0, 'f', 1));
  } else {
    train_->setText(tr("- (workload.train_tokens not set)"));
  }
  const MemoryBreakdown& m = e.memory;
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  memory_->setText(QStringLiteral("%1 of %2 usable (%3 HBM), pipeline stage %4")
                       .arg(format_gib(m.total), format_gib(m.usable), format_gib(m.capacity))
                       .arg(m.stage));
  fits_->setText(m.fits ? tr("fits") : tr("does not fit: %1 over").arg(format_gib(m.total - m.usable)));
  fits_->setStyleSheet(m.fits ? QStringLiteral("QLabel { color: #007a33; font-weight: bold; }")
                              : QStringLiteral("QLabel { color: #b00020; font-weight: bold; }"));
  fill_bar(memory_chart_, tr("stage %1").arg(m.stage),
           {{tr("params"), m.params / kGiB, part_color("params")},
            {tr("grads"), m.grads / kGiB, part_color("grads")},
            {tr("optimizer"), m.optimizer / kGiB, part_color("optimizer")},
            {tr("activations"), m.activations / kGiB, part_color("activations")},
            {tr("buffers"), m.buffers / kGiB, part_color("buffers")},
            {tr("free to usable"), std::max(0.0, (m.usable - m.total) / kGiB), QColor(0xEE, 0xEE, 0xEE)}},
           std::max(m.capacity, m.total) / kGiB, tr("GiB (axis ends at the larger of HBM and the need)"));
  memory_chart_->setTitle(tr("Memory per GPU: %1 of %2 usable").arg(format_gib(m.total), format_gib(m.usable)));
  const StepBreakdown& b = e.breakdown;
  const ExposedComm& x = e.exposed;
  fill_bar(breakdown_chart_, tr("step"),
           {{tr("GEMM"), e.compute.gemm, part_color("gemm")},
            {tr("attn"), e.compute.attention, part_color("attention")},
            {tr("memory"), e.compute.memory_bound, part_color("memory_bound")},
            {tr("recomp"), e.compute.recompute, part_color("recompute")},
            {tr("head"), e.compute.output, part_color("output")},
            {tr("interf"), e.compute.interference, part_color("interference")},
            {tr("tp"), x.tp, part_color("tp")},
            {tr("cp"), x.cp, part_color("cp")},
            {tr("ep"), x.ep, part_color("ep")},
            {tr("pp"), x.pp, part_color("pp")},
            {tr("dp"), x.dp, part_color("dp")},
            {tr("bubble"), b.bubble, part_color("bubble")},
            {tr("optimizer"), b.optimizer, part_color("optimizer")},
            {tr("host"), b.host, part_color("host")},
            {tr("wait"), b.wait, part_color("wait")},
            {tr("input"), b.input, part_color("input")}},
           e.step_time_s, tr("seconds"));
  breakdown_chart_->setTitle(tr("Step time %1: where it goes (slowest rank)").arg(format_seconds(e.step_time_s)));
  last_ms_ = static_cast<double>(timer.nsecsElapsed()) / 1e6;
}

}  // namespace stepcast::gui

#include "timeline_canvas.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include <QHBoxLayout>
#include <QHelpEvent>
#include <QLabel>
#include <QMouseEvent>
#include <QPainter>
#include <QScrollBar>
#include <QStringList>
#include <QToolTip>
#include <QWheelEvent>

#include "stepcast/analysis/breakdown.h"
#include "style.h"

namespace stepcast::gui {

namespace {

constexpr double kNsPerS = 1e9;

LanePart part_of(const analysis::TraceOp& o) {
  switch (o.stream) {
    case Stream::kCompute:
      if (o.cclass == ComputeClass::kOptimizer) return LanePart::kOptimizer;
      if (o.cclass == ComputeClass::kInput) return LanePart::kInput;
      if (o.cclass == ComputeClass::kHost) return LanePart::kHost;
      return LanePart::kCompute;
    case Stream::kTp: return LanePart::kTp;
    case Stream::kCp: return LanePart::kCp;
    case Stream::kEp: return LanePart::kEp;
    case Stream::kDp: return LanePart::kDp;
    case Stream::kPp:
    case Stream::kPpRecv: return LanePart::kPp;
    case Stream::kHostOut:
    case Stream::kHostIn: return LanePart::kHost;
  }
  return LanePart::kCompute;
}

// The intervals of [0, end) in which the rank is busy by the breakdown's rules (breakdown.h:
// compute of nonzero length, data moving, a collective waiting; sends do not block), merged.
std::vector<std::pair<std::int64_t, std::int64_t>> busy_intervals(const analysis::TraceRank& r, int pp) {
  std::vector<std::pair<std::int64_t, std::int64_t>> iv;
  iv.reserve(r.ops.size());
  for (const analysis::TraceOp& o : r.ops) {
    if (o.kind == analysis::TraceOpKind::kSend) continue;
    if (o.stream == Stream::kCompute) {
      if (o.end_ns > o.begin_ns) iv.emplace_back(o.begin_ns, o.end_ns);
      continue;
    }
    // A collective is busy from its post (waiting for peers), but at the gradient norm's
    // all-reduce, where waiting is the pipeline's flush (analysis::counts_as_wait).
    const bool waits = o.kind == analysis::TraceOpKind::kCollective && analysis::counts_as_wait(o.group, pp);
    const std::int64_t from = waits ? o.post_ns : o.begin_ns;
    if (o.end_ns > from) iv.emplace_back(from, o.end_ns);
  }
  std::sort(iv.begin(), iv.end());
  std::vector<std::pair<std::int64_t, std::int64_t>> merged;
  for (const auto& i : iv) {
    if (!merged.empty() && i.first <= merged.back().second) {
      merged.back().second = std::max(merged.back().second, i.second);
    } else {
      merged.push_back(i);
    }
  }
  return merged;
}

// Seconds with sub-microsecond detail for the hover text (format_seconds rounds for reports).
QString precise_seconds(double s) {
  const double a = std::abs(s);
  if (a < 1e-3) return QStringLiteral("%1 us").arg(s * 1e6, 0, 'f', 3);
  if (a < 1.0) return QStringLiteral("%1 ms").arg(s * 1e3, 0, 'f', 6);
  return QStringLiteral("%1 s").arg(s, 0, 'f', 9);
}

QString bytes_text(double b) {
  if (b >= 1024.0 * 1024.0 * 1024.0) return format_gib(b);
  if (b >= 1024.0 * 1024.0) return QStringLiteral("%1 MiB").arg(b / (1024.0 * 1024.0), 0, 'f', 2);
  if (b >= 1024.0) return QStringLiteral("%1 KiB").arg(b / 1024.0, 0, 'f', 2);
  return QStringLiteral("%1 B").arg(b, 0, 'f', 0);
}

// An axis label at tick spacing `step`: the unit and decimals that make consecutive ticks differ.
QString tick_label(double t, double step) {
  double unit = 1.0;
  const char* name = "s";
  if (step < 1e-6) {
    unit = 1e-9, name = "ns";
  } else if (step < 1e-3) {
    unit = 1e-6, name = "us";
  } else if (step < 1.0) {
    unit = 1e-3, name = "ms";
  }
  const int decimals = std::max(0, -static_cast<int>(std::floor(std::log10(step / unit) + 1e-9)));
  return QStringLiteral("%1 %2").arg(t / unit, 0, 'f', decimals).arg(QLatin1String(name));
}

}  // namespace

const char* lane_part_key(LanePart p) {
  switch (p) {
    case LanePart::kCompute: return "compute";
    case LanePart::kOptimizer: return "optimizer";
    case LanePart::kInput: return "input";
    case LanePart::kTp: return "tp";
    case LanePart::kCp: return "cp";
    case LanePart::kEp: return "ep";
    case LanePart::kDp: return "dp";
    case LanePart::kPp: return "pp";
    case LanePart::kBubble: return "bubble";
    case LanePart::kHost: return "host";
  }
  return "?";
}

TimelineData TimelineData::from_trace(const analysis::Trace& trace) {
  TimelineData d;
  d.names = trace.names;
  d.idle_name = static_cast<std::uint32_t>(d.names.size());
  d.names.emplace_back("idle (bubble)");
  d.step_end_ns = trace.step_end_ns;
  d.steps = trace.steps();
  const int pp = trace.placement.pp;
  std::int64_t last = 0;
  std::array<bool, kNumStreams> used{};
  used[static_cast<std::size_t>(Stream::kCompute)] = true;
  for (const analysis::TraceRank& r : trace.ranks) {
    for (const analysis::TraceOp& o : r.ops) {
      last = std::max(last, o.end_ns);
      used[static_cast<std::size_t>(o.stream)] = true;
    }
  }
  // A hang has no (or no increasing) last step end: idle time is counted up to the last op.
  d.end_ns = trace.complete() ? trace.step_end_ns.back() : last;

  for (const analysis::TraceRank& r : trace.ranks) {
    std::array<int, kNumStreams> lane_of{};
    for (int s = 0; s < kNumStreams; ++s) {
      if (!used[static_cast<std::size_t>(s)]) continue;
      lane_of[static_cast<std::size_t>(s)] = static_cast<int>(d.lanes.size());
      TimelineLane lane;
      lane.rank = r.rank;
      lane.stage = r.stage;
      lane.node = r.node;
      lane.stream = static_cast<Stream>(s);
      d.lanes.push_back(std::move(lane));
    }
    for (const analysis::TraceOp& o : r.ops) {
      TimelineItem it;
      it.post_ns = o.post_ns;
      it.begin_ns = o.begin_ns;
      it.end_ns = o.end_ns;
      it.bytes = o.bytes;
      it.name = o.name;
      it.step = o.step;
      it.part = part_of(o);
      if (o.begin_ns > o.post_ns) {
        it.lead_in = o.kind != analysis::TraceOpKind::kCollective ? LeadIn::kIdle
                     : analysis::counts_as_wait(o.group, pp)      ? LeadIn::kWait
                                                                  : LeadIn::kFlush;
      }
      d.lanes[static_cast<std::size_t>(lane_of[static_cast<std::size_t>(o.stream)])].items.push_back(it);
      ++d.ops;
    }
    // Bubbles: the complement of the busy time in [0, end), drawn on the compute lane.
    TimelineLane& compute = d.lanes[static_cast<std::size_t>(lane_of[0])];
    std::int64_t cursor = 0;
    auto add_idle = [&](std::int64_t from, std::int64_t to) {
      if (to <= from) return;
      TimelineItem it;
      it.post_ns = it.begin_ns = from;
      it.end_ns = to;
      it.name = d.idle_name;
      it.part = LanePart::kBubble;
      const auto step = std::upper_bound(d.step_end_ns.begin(), d.step_end_ns.end(), from);
      it.step = static_cast<std::int32_t>(std::min<std::ptrdiff_t>(step - d.step_end_ns.begin(),
                                                                   std::max(0, d.steps - 1)));
      compute.items.push_back(it);
    };
    for (const auto& [b, e] : busy_intervals(r, pp)) {
      add_idle(cursor, std::min(b, d.end_ns));
      cursor = std::max(cursor, e);
    }
    add_idle(cursor, d.end_ns);
  }
  for (TimelineLane& lane : d.lanes) {
    std::stable_sort(lane.items.begin(), lane.items.end(),
                     [](const TimelineItem& a, const TimelineItem& b) { return a.post_ns < b.post_ns; });
    lane.max_end.resize(lane.items.size());
    std::int64_t m = std::numeric_limits<std::int64_t>::min();
    for (std::size_t i = 0; i < lane.items.size(); ++i) lane.max_end[i] = m = std::max(m, lane.items[i].end_ns);
  }
  return d;
}

std::vector<int> TimelineData::ranks() const {
  std::vector<int> out;
  for (const TimelineLane& l : lanes) {
    if (out.empty() || out.back() != l.rank) out.push_back(l.rank);
  }
  return out;
}

bool parse_rank_list(const QString& text, std::set<int>* ranks, QString* error) {
  ranks->clear();
  const QStringList parts = text.split(QLatin1Char(','), Qt::SkipEmptyParts);
  for (const QString& raw : parts) {
    const QString part = raw.trimmed();
    if (part.isEmpty()) continue;
    const int dash = part.indexOf(QLatin1Char('-'));
    bool ok_a = false, ok_b = false;
    int a = 0, b = 0;
    if (dash < 0) {
      a = b = part.toInt(&ok_a);
      ok_b = ok_a;
    } else {
      a = part.left(dash).trimmed().toInt(&ok_a);
      b = part.mid(dash + 1).trimmed().toInt(&ok_b);
    }
    if (!ok_a || !ok_b || a < 0 || b < a || b - a > 1'000'000) {
      if (error) *error = QStringLiteral("\"%1\" is not a rank or a range (e.g. 0-7,12)").arg(part);
      ranks->clear();
      return false;
    }
    for (int r = a; r <= b; ++r) ranks->insert(r);
  }
  return true;
}

TimelineCanvas::TimelineCanvas(QWidget* parent) : QWidget(parent), vbar_(new QScrollBar(Qt::Vertical, this)) {
  setObjectName(QStringLiteral("timelineCanvas"));
  setMinimumSize(400, 160);
  setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Expanding);
  setAttribute(Qt::WA_OpaquePaintEvent);
  vbar_->hide();
  connect(vbar_, &QScrollBar::valueChanged, this, qOverload<>(&QWidget::update));
}

TimelineCanvas::~TimelineCanvas() = default;

void TimelineCanvas::setData(std::shared_ptr<const TimelineData> data) {
  data_ = std::move(data);
  relayout();
  vbar_->setValue(0);
  fitAll();
}

void TimelineCanvas::setPlaceholder(const QString& text) {
  placeholder_ = text;
  update();
}

void TimelineCanvas::setRankFilter(const std::set<int>& ranks) {
  filter_ = ranks;
  relayout();
  update();
}

void TimelineCanvas::setHighlightedRanks(const std::set<int>& ranks) {
  highlighted_ = ranks;
  update();
}

void TimelineCanvas::scrollToRank(int rank) {
  for (std::size_t k = 0; k < shown_.size(); ++k) {
    if (data_->lanes[static_cast<std::size_t>(shown_[k])].rank == rank) {
      vbar_->setValue(std::max(0, shown_y_[k] - 2 * kLaneHeight));
      return;
    }
  }
}

int TimelineCanvas::plotWidth() const {
  return std::max(1, width() - kLabelWidth - (vbar_->isVisible() ? vbar_->width() : 0));
}

void TimelineCanvas::setWindow(double start_s, double seconds) {
  spp_ = std::max(seconds / plotWidth(), 1e-12);
  t0_ = start_s;
  update();
  emit windowChanged();
}

void TimelineCanvas::fitAll() {
  const double span = data_ && data_->end_ns > 0 ? static_cast<double>(data_->end_ns) / kNsPerS : 1e-3;
  // A margin of 1 % on each side, so the first and last ops are not on the border.
  setWindow(-0.01 * span, 1.02 * span);
}

void TimelineCanvas::clampWindow() {
  const double span = data_ && data_->end_ns > 0 ? static_cast<double>(data_->end_ns) / kNsPerS : 1e-3;
  // Zoom: from a nanosecond across the plot to twice the run; the window keeps part of the run.
  spp_ = std::clamp(spp_, 1e-9 / plotWidth(), 2.0 * span / plotWidth());
  const double w = windowSeconds();
  t0_ = std::clamp(t0_, -0.5 * w, span - 0.5 * w);
}

void TimelineCanvas::relayout() {
  shown_.clear();
  shown_y_.clear();
  int y = 0;
  if (data_) {
    int prev_rank = -1;
    for (std::size_t i = 0; i < data_->lanes.size(); ++i) {
      const TimelineLane& l = data_->lanes[i];
      if (!filter_.empty() && !filter_.count(l.rank)) continue;
      if (!shown_.empty() && l.rank != prev_rank) y += kGroupGap;
      prev_rank = l.rank;
      shown_.push_back(static_cast<int>(i));
      shown_y_.push_back(y);
      y += kLaneHeight;
    }
  }
  content_height_ = y;
  const int view_h = std::max(0, height() - kAxisHeight);
  const int range = std::max(0, content_height_ - view_h);
  vbar_->setRange(0, range);
  vbar_->setPageStep(std::max(1, view_h));
  vbar_->setSingleStep(kLaneHeight);
  const int w = vbar_->sizeHint().width();
  vbar_->setGeometry(width() - w, kAxisHeight, w, std::max(0, height() - kAxisHeight));
  vbar_->setVisible(range > 0);
}

void TimelineCanvas::resizeEvent(QResizeEvent* e) {
  QWidget::resizeEvent(e);
  relayout();
}

int TimelineCanvas::laneTop(int shown_index) const {
  return kAxisHeight + shown_y_[static_cast<std::size_t>(shown_index)] - vbar_->value();
}

int TimelineCanvas::shownRankCount() const {
  int n = 0, prev = -1;
  for (int i : shown_) {
    const int r = data_->lanes[static_cast<std::size_t>(i)].rank;
    if (n == 0 || r != prev) ++n;
    prev = r;
  }
  return n;
}

int TimelineCanvas::laneCenterY(int rank, Stream stream) const {
  for (std::size_t k = 0; k < shown_.size(); ++k) {
    const TimelineLane& l = data_->lanes[static_cast<std::size_t>(shown_[k])];
    if (l.rank == rank && l.stream == stream) return laneTop(static_cast<int>(k)) + kLaneHeight / 2;
  }
  return -1;
}

const TimelineItem* TimelineCanvas::itemAt(const QPoint& pos, const TimelineLane** lane_out) const {
  if (!data_ || pos.x() < plotLeft() || pos.y() < kAxisHeight) return nullptr;
  const auto it = std::upper_bound(shown_y_.begin(), shown_y_.end(), pos.y() - kAxisHeight + vbar_->value());
  if (it == shown_y_.begin()) return nullptr;
  const std::size_t k = static_cast<std::size_t>(it - shown_y_.begin()) - 1;
  if (pos.y() >= laneTop(static_cast<int>(k)) + kLaneHeight) return nullptr;  // in a gap
  const TimelineLane& lane = data_->lanes[static_cast<std::size_t>(shown_[k])];
  const double t = timeAt(pos.x() + 0.5) * kNsPerS;
  const double tol = 2.0 * spp_ * kNsPerS;
  auto first = std::lower_bound(lane.max_end.begin(), lane.max_end.end(), static_cast<std::int64_t>(std::floor(t - tol)));
  const TimelineItem* best = nullptr;
  double best_dist = std::numeric_limits<double>::infinity();
  for (std::size_t i = static_cast<std::size_t>(first - lane.max_end.begin()); i < lane.items.size(); ++i) {
    const TimelineItem& item = lane.items[i];
    if (static_cast<double>(item.post_ns) > t + tol) break;
    const double dist = t < static_cast<double>(item.post_ns) ? static_cast<double>(item.post_ns) - t
                        : t > static_cast<double>(item.end_ns) ? t - static_cast<double>(item.end_ns)
                                                               : 0.0;
    if (dist > tol) continue;
    // Prefer the op containing the point, then ops over idle time, then the nearest.
    const bool better = dist < best_dist || (dist == best_dist && best && best->part == LanePart::kBubble &&
                                             item.part != LanePart::kBubble);
    if (better) {
      best = &item;
      best_dist = dist;
    }
  }
  if (best && lane_out) *lane_out = &lane;
  return best;
}

QString TimelineCanvas::toolTipAt(const QPoint& pos) const {
  const TimelineLane* lane = nullptr;
  const TimelineItem* item = itemAt(pos, &lane);
  if (!item) return {};
  QStringList lines;
  lines << QString::fromStdString(data_->names[item->name]);
  lines << QStringLiteral("rank %1 (stage %2, node %3) - %4 - step %5")
               .arg(lane->rank)
               .arg(lane->stage)
               .arg(lane->node)
               .arg(QLatin1String(to_string(lane->stream)))
               .arg(item->step);
  const double start = static_cast<double>(item->post_ns) / kNsPerS;
  const double dur = static_cast<double>(item->end_ns - item->post_ns) / kNsPerS;
  lines << QStringLiteral("start %1 - duration %2").arg(precise_seconds(start), precise_seconds(dur));
  if (item->lead_in != LeadIn::kNone) {
    const double lead = static_cast<double>(item->begin_ns - item->post_ns) / kNsPerS;
    lines << (item->lead_in == LeadIn::kWait    ? QStringLiteral("waited %1 for late group members")
              : item->lead_in == LeadIn::kFlush ? QStringLiteral("idle %1 waiting for the other stages' drain")
                                                : QStringLiteral("idle %1 waiting for the pipeline peer"))
                 .arg(precise_seconds(lead));
  }
  if (item->bytes > 0) lines << QStringLiteral("bytes %1").arg(bytes_text(item->bytes));
  return lines.join(QLatin1Char('\n'));
}

bool TimelineCanvas::event(QEvent* e) {
  if (e->type() == QEvent::ToolTip) {
    auto* help = static_cast<QHelpEvent*>(e);
    const QString text = toolTipAt(help->pos());
    if (text.isEmpty()) {
      QToolTip::hideText();
      e->ignore();
    } else {
      QToolTip::showText(help->globalPos(), text, this);
    }
    return true;
  }
  return QWidget::event(e);
}

void TimelineCanvas::wheelEvent(QWheelEvent* e) {
  const int delta = e->angleDelta().y() != 0 ? e->angleDelta().y() : e->angleDelta().x();
  if (!data_ || delta == 0) {
    e->ignore();
    return;
  }
  const double x = std::clamp(e->position().x(), static_cast<double>(plotLeft()),
                              static_cast<double>(plotLeft() + plotWidth()));
  const double anchor = timeAt(x);
  spp_ *= std::pow(kWheelZoom, delta / 120.0);
  t0_ = anchor - (x - plotLeft()) * spp_;
  clampWindow();
  e->accept();
  update();
  emit windowChanged();
}

void TimelineCanvas::mousePressEvent(QMouseEvent* e) {
  if (e->button() != Qt::LeftButton || !data_) return QWidget::mousePressEvent(e);
  dragging_ = true;
  drag_x_ = e->position().x();
  drag_t0_ = t0_;
  setCursor(Qt::ClosedHandCursor);
  e->accept();
}

void TimelineCanvas::mouseMoveEvent(QMouseEvent* e) {
  if (!dragging_) return QWidget::mouseMoveEvent(e);
  t0_ = drag_t0_ - (e->position().x() - drag_x_) * spp_;
  clampWindow();
  update();
  emit windowChanged();
  e->accept();
}

void TimelineCanvas::mouseReleaseEvent(QMouseEvent* e) {
  if (!dragging_) return QWidget::mouseReleaseEvent(e);
  dragging_ = false;
  unsetCursor();
  e->accept();
}

void TimelineCanvas::paintLane(QPainter& p, const TimelineLane& lane, int y) {
  const int right_edge = plotLeft() + plotWidth();
  const double t_lo = t0_ * kNsPerS, t_hi = (t0_ + windowSeconds()) * kNsPerS;
  const std::size_t first = static_cast<std::size_t>(
      std::lower_bound(lane.max_end.begin(), lane.max_end.end(), static_cast<std::int64_t>(std::floor(t_lo))) -
      lane.max_end.begin());
  const QColor wait = part_color("wait");
  const QColor idle = part_color("bubble").lighter(115);
  std::array<QColor, 10> colours;
  for (std::size_t i = 0; i < colours.size(); ++i) colours[i] = part_color(lane_part_key(static_cast<LanePart>(i)));
  const int top = y + 1, h = kLaneHeight - 2;
  // Pixel columns already filled: an op whose columns are all filled is merged into them, so a
  // zoomed-out lane of thousands of ops costs at most one rectangle per column.
  int filled_to = plotLeft();
  for (std::size_t i = first; i < lane.items.size(); ++i) {
    const TimelineItem& it = lane.items[i];
    if (static_cast<double>(it.post_ns) > t_hi) break;
    const double x0 = xOf(static_cast<double>(it.post_ns) / kNsPerS);
    const double x1 = xOf(static_cast<double>(it.end_ns) / kNsPerS);
    const int c1 = std::min(static_cast<int>(std::ceil(x1)), right_edge);
    if (c1 <= filled_to) continue;
    const int left = std::max(static_cast<int>(std::floor(x0)), filled_to);
    const int right = std::min(std::max(c1, left + 1), right_edge);
    if (right <= left) continue;
    int body = left;
    if (it.lead_in != LeadIn::kNone) {
      const int xb = std::clamp(static_cast<int>(std::lround(xOf(static_cast<double>(it.begin_ns) / kNsPerS))), left,
                                right);
      if (xb > left) {
        p.fillRect(QRect(left, top, xb - left, h), it.lead_in == LeadIn::kWait ? wait : idle);
        ++painted_rects_;
        body = xb;
      }
    }
    if (right > body) {
      p.fillRect(QRect(body, top, right - body, h), colours[static_cast<std::size_t>(it.part)]);
      ++painted_rects_;
    }
    filled_to = right;
  }
}

void TimelineCanvas::paintEvent(QPaintEvent*) {
  QPainter p(this);
  const QPalette& pal = palette();
  p.fillRect(rect(), pal.color(QPalette::Base));
  painted_rects_ = 0;
  if (!data_ || shown_.empty()) {
    p.setPen(pal.color(QPalette::PlaceholderText));
    const QString text = !data_ ? placeholder_ : tr("No rank matches the filter.");
    p.drawText(rect().adjusted(12, 12, -12, -12), Qt::AlignCenter | Qt::TextWordWrap, text);
    return;
  }
  const int pw = plotWidth();
  const int right_edge = plotLeft() + pw;
  const QColor lane_bg = pal.color(QPalette::AlternateBase);
  const QColor mark(0xC0, 0x1C, 0x28);
  const QColor mark_bg(0xFB, 0xE3, 0xE4);
  QFont small = font();
  small.setPointSizeF(std::max(6.0, small.pointSizeF() * 0.85));
  QFont bold = font();
  bold.setBold(true);

  // Lanes (clipped below the axis).
  p.save();
  p.setClipRect(QRect(0, kAxisHeight, width(), height() - kAxisHeight));
  int prev_rank = -1;
  for (std::size_t k = 0; k < shown_.size(); ++k) {
    const int y = laneTop(static_cast<int>(k));
    if (y + kLaneHeight < kAxisHeight) continue;
    if (y > height()) break;
    const TimelineLane& lane = data_->lanes[static_cast<std::size_t>(shown_[k])];
    const bool hot = highlighted_.count(lane.rank) > 0;
    p.fillRect(QRect(0, y, right_edge, kLaneHeight), hot ? mark_bg : lane_bg);
    p.save();
    p.setClipRect(QRect(plotLeft(), std::max(y, kAxisHeight), pw, kLaneHeight));
    paintLane(p, lane, y);
    p.restore();
    // Labels: the rank once per group (a mark when highlighted), the stream on every lane.
    p.setFont(small);
    p.setPen(pal.color(QPalette::Text));
    p.drawText(QRect(72, y, kLabelWidth - 76, kLaneHeight), Qt::AlignRight | Qt::AlignVCenter,
               QLatin1String(to_string(lane.stream)));
    if (lane.rank != prev_rank) {
      p.setFont(hot ? bold : font());
      p.setPen(hot ? mark : pal.color(QPalette::Text));
      const QString label = (hot ? QStringLiteral("! rank %1") : QStringLiteral("rank %1")).arg(lane.rank);
      p.drawText(QRect(4, y, 70, kLaneHeight), Qt::AlignLeft | Qt::AlignVCenter, label);
      const bool next_same = k + 1 < shown_.size() &&
                             data_->lanes[static_cast<std::size_t>(shown_[k + 1])].rank == lane.rank;
      if (next_same) {
        p.setFont(small);
        p.setPen(pal.color(QPalette::PlaceholderText));
        p.drawText(QRect(4, y + kLaneHeight, 70, kLaneHeight), Qt::AlignLeft | Qt::AlignVCenter,
                   QStringLiteral("s%1 n%2").arg(lane.stage).arg(lane.node));
      }
    }
    prev_rank = lane.rank;
  }
  // Step ends: dashed lines over the lanes.
  p.setClipRect(QRect(plotLeft(), kAxisHeight, pw, height() - kAxisHeight));
  p.setPen(QPen(pal.color(QPalette::Mid), 1, Qt::DashLine));
  for (std::int64_t e : data_->step_end_ns) {
    const double x = xOf(static_cast<double>(e) / kNsPerS);
    if (x >= plotLeft() && x <= right_edge) p.drawLine(QPointF(x, kAxisHeight), QPointF(x, height()));
  }
  p.restore();

  // Time axis: ticks 1-2-5 apart, at least ~90 pixels.
  p.fillRect(QRect(0, 0, width(), kAxisHeight), pal.color(QPalette::Window));
  p.setPen(pal.color(QPalette::Text));
  p.setFont(small);
  const double raw = 90.0 * spp_;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = 10 * mag;
  for (double m : {1.0, 2.0, 5.0}) {
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  }
  p.drawLine(plotLeft(), kAxisHeight - 1, right_edge, kAxisHeight - 1);
  for (double t = std::ceil(t0_ / step) * step; t <= t0_ + windowSeconds(); t += step) {
    const double x = xOf(t);
    p.drawLine(QPointF(x, kAxisHeight - 6), QPointF(x, kAxisHeight - 1));
    p.drawText(QRectF(x + 3, 0, 120, kAxisHeight - 4), Qt::AlignLeft | Qt::AlignVCenter,
               tick_label(std::abs(t) < step * 1e-6 ? 0.0 : t, step));
  }
  p.drawText(QRect(4, 0, kLabelWidth - 8, kAxisHeight - 2), Qt::AlignLeft | Qt::AlignVCenter,
             tr("%n rank(s)", nullptr, shownRankCount()));
}

QWidget* make_timeline_legend(QWidget* parent, bool with_highlight) {
  auto* w = new QWidget(parent);
  w->setObjectName(QStringLiteral("timelineLegend"));
  auto* row = new QHBoxLayout(w);
  row->setContentsMargins(0, 0, 0, 0);
  row->setSpacing(10);
  struct Entry {
    const char* key;
    const char* text;
  };
  const Entry entries[] = {{"compute", "compute"},       {"optimizer", "optimizer"},
                           {"input", "input"},           {"tp", "TP comm"},
                           {"cp", "CP comm"},            {"ep", "EP comm"},
                           {"dp", "DP comm"},            {"pp", "PP send/recv"},
                           {"wait", "wait for peers"},   {"bubble", "idle (bubble)"}};
  auto swatch = [&](const QColor& c, const QString& text) {
    auto* l = new QLabel(w);
    l->setText(QStringLiteral("<span style=\"background-color:%1\">&nbsp;&nbsp;&nbsp;&nbsp;</span>&nbsp;%2")
                   .arg(c.name(), text.toHtmlEscaped()));
    row->addWidget(l);
  };
  for (const Entry& e : entries) swatch(part_color(e.key), QString::fromLatin1(e.text));
  if (with_highlight) swatch(QColor(0xFB, 0xE3, 0xE4), QObject::tr("! outlier rank (diagnose)"));
  row->addStretch(1);
  return w;
}

}  // namespace stepcast::gui

// The per-rank timeline drawing shared by the Timeline and Incidents views: one lane group
// per rank, one lane per stream that has work, coloured by breakdown part (style.h), waits
// for peers and idle time (bubbles) shown; wheel zooms around the cursor, dragging pans,
// hovering names the op under the cursor. The data is built off the GUI thread from the
// neutral trace (analysis/trace.h), so a simulated run and a trace file draw alike.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <QString>
#include <QThread>
#include <QWidget>

#include "stepcast/analysis/trace.h"

class QScrollBar;

namespace stepcast::gui {

// Drawing parts: the breakdown's parts (analysis/breakdown.h) plus idle time.
enum class LanePart : std::uint8_t { kCompute, kOptimizer, kInput, kTp, kCp, kEp, kDp, kPp, kBubble, kHost };
// The part_color() key of a LanePart ("compute", "tp", ..., "bubble").
const char* lane_part_key(LanePart p);

// How the time before an op's data moved ([post, begin)) is drawn.
enum class LeadIn : std::uint8_t {
  kNone,   // compute, or nothing to wait for
  kWait,   // a collective waiting for late group members (the breakdown's "wait")
  kIdle,   // a send or recv waiting for its peer (the breakdown counts it as bubble)
  kFlush,  // the gradient norm's all-reduce waiting for the other stages' drain (bubble:
           // analysis::counts_as_wait)
};

struct TimelineItem {
  std::int64_t post_ns = 0, begin_ns = 0, end_ns = 0;  // post <= begin <= end
  double bytes = 0;                                    // communication; 0 when unknown
  std::uint32_t name = 0;                              // into TimelineData::names
  std::int32_t step = 0;
  LanePart part = LanePart::kCompute;
  LeadIn lead_in = LeadIn::kNone;
};

struct TimelineLane {
  int rank = 0, stage = 0, node = 0;
  Stream stream = Stream::kCompute;
  std::vector<TimelineItem> items;    // ascending post_ns (bubbles included on the compute lane)
  std::vector<std::int64_t> max_end;  // max_end[i] = max end_ns of items[0..i]: finds the window
};

struct TimelineData {
  std::vector<TimelineLane> lanes;      // ascending rank, then stream order; only streams with work
  std::vector<std::string> names;       // op names; the last one is kIdleName's text
  std::vector<std::int64_t> step_end_ns;
  std::int64_t end_ns = 0;              // the run's end (last step end, or the last op of a hang)
  int steps = 0;
  std::int64_t ops = 0;                 // executed ops drawn (bubbles not counted)
  std::uint32_t idle_name = 0;          // names[idle_name] == "idle (bubble)"

  // From a trace (read_trace or trace_from_timeline). Bubbles are the breakdown's: the time
  // of [0, end) in which a rank computes nothing, moves no data and waits at no collective.
  static TimelineData from_trace(const analysis::Trace& trace);
  std::vector<int> ranks() const;  // ascending, each once
};

// "0-7,12" -> {0..7, 12}; "" -> {} (every rank). False with `error` on a malformed list.
bool parse_rank_list(const QString& text, std::set<int>* ranks, QString* error);

class TimelineCanvas : public QWidget {
  Q_OBJECT

 public:
  static constexpr int kAxisHeight = 22;
  static constexpr int kLabelWidth = 150;
  static constexpr int kLaneHeight = 14;
  static constexpr int kGroupGap = 6;
  // One wheel notch (120 units) zooms by this factor (in: the window shrinks to it).
  static constexpr double kWheelZoom = 0.5;

  explicit TimelineCanvas(QWidget* parent = nullptr);
  ~TimelineCanvas() override;

  // Shows `data` (nullptr: nothing) and fits the whole run into the window.
  void setData(std::shared_ptr<const TimelineData> data);
  const TimelineData* data() const { return data_.get(); }
  // Shown instead of lanes when there is no data (e.g. "Simulating...").
  void setPlaceholder(const QString& text);

  // Ranks to show (empty: all).
  void setRankFilter(const std::set<int>& ranks);
  const std::set<int>& rankFilter() const { return filter_; }
  // Ranks drawn with a tinted background and a mark in their label (diagnose's outliers).
  void setHighlightedRanks(const std::set<int>& ranks);
  // Scrolls so `rank`'s lanes are near the top (when shown).
  void scrollToRank(int rank);
  const std::set<int>& highlightedRanks() const { return highlighted_; }

  // The visible time window, seconds from the start of the run.
  double windowStart() const { return t0_; }
  double windowSeconds() const { return spp_ * plotWidth(); }
  double secondsPerPixel() const { return spp_; }
  void setWindow(double start_s, double seconds);
  void fitAll();
  int plotLeft() const { return kLabelWidth; }
  int plotWidth() const;
  double timeAt(double x) const { return t0_ + (x - plotLeft()) * spp_; }
  double xOf(double t) const { return plotLeft() + (t - t0_) / spp_; }

  // Lanes drawn after the rank filter, in drawing order (indexes into data()->lanes).
  const std::vector<int>& shownLanes() const { return shown_; }
  int shownRankCount() const;
  // The vertical centre of `rank`'s lane for `stream` in widget coordinates (-1: not shown).
  int laneCenterY(int rank, Stream stream) const;
  // The item under `pos` (within two pixels), or nullptr; `lane` receives its lane.
  const TimelineItem* itemAt(const QPoint& pos, const TimelineLane** lane = nullptr) const;
  // The hover text at `pos` ("" when nothing is there): name, rank, stream, step, start,
  // duration, wait and bytes.
  QString toolTipAt(const QPoint& pos) const;
  // Rectangles the last paint filled for ops and bubbles (merging keeps it near the pixel count).
  int lastPaintedRects() const { return painted_rects_; }

 signals:
  void windowChanged();

 protected:
  bool event(QEvent* e) override;
  void paintEvent(QPaintEvent* e) override;
  void resizeEvent(QResizeEvent* e) override;
  void wheelEvent(QWheelEvent* e) override;
  void mousePressEvent(QMouseEvent* e) override;
  void mouseMoveEvent(QMouseEvent* e) override;
  void mouseReleaseEvent(QMouseEvent* e) override;

 private:
  void relayout();
  int laneTop(int shown_index) const;  // widget y of a shown lane's top
  void clampWindow();
  void paintLane(QPainter& p, const TimelineLane& lane, int y);

  std::shared_ptr<const TimelineData> data_;
  QString placeholder_;
  std::set<int> filter_, highlighted_;
  std::vector<int> shown_;      // lanes drawn
  std::vector<int> shown_y_;    // their top, in content coordinates (before scrolling)
  int content_height_ = 0;
  double t0_ = 0, spp_ = 1e-6;
  bool dragging_ = false;
  double drag_x_ = 0, drag_t0_ = 0;
  int painted_rects_ = 0;
  QScrollBar* vbar_;
};

// A row of colour swatches naming the parts the canvas draws (and the highlight mark when
// `with_highlight`).
QWidget* make_timeline_legend(QWidget* parent, bool with_highlight = false);

// Runs `work` on a new thread, then `done(result)` on `context`'s thread (the GUI's), so a
// simulation never blocks the event loop. The thread deletes itself after `done`; an owner
// destroyed first must wait() for the returned thread (its `done` is then never called).
template <class R>
QThread* start_worker(QObject* context, std::function<R()> work, std::function<void(R&)> done) {
  auto result = std::make_shared<std::optional<R>>();
  QThread* t = QThread::create([result, work = std::move(work)] { result->emplace(work()); });
  QObject::connect(t, &QThread::finished, context, [t, result, done = std::move(done)] {
    t->deleteLater();
    done(**result);
  });
  t->start();
  return t;
}

}  // namespace stepcast::gui

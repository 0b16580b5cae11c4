// The Timeline view against direct calls of app::run_simulate: lanes, events, bubbles,
// the pipeline bubble, DDP overlap, zoom/pan, rank filter, hover, the Perfetto trace, hangs.
#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include <QFile>
#include <QLineEdit>
#include <QSpinBox>
#include <QTemporaryDir>
#include <QToolTip>
#include <QtTest>

#include "document.h"
#include "stepcast/app/simulate.h"
#include "timeline_canvas.h"
#include "timeline_view.h"

using namespace stepcast;
using namespace stepcast::gui;

namespace {

QString source_path(const char* rel) {
  return QDir(QStringLiteral(STEPCAST_SOURCE_DIR)).filePath(QString::fromLatin1(rel));
}

app::SimulateReport simulate(const Scenario& s, int steps = 1) {
  app::SimulateRequest req;
  req.scenario = app::ScenarioInput::value(s);
  req.steps = steps;
  req.trace = true;
  Result<app::SimulateReport> r = app::run_simulate(req);
  if (!r.ok()) qFatal("run_simulate: %s", r.error().message.c_str());
  return std::move(r).value();
}

const Op& op_of(const sim::RunResult& run, const RankTimeline& r, const Span& s) {
  return run.program.roles[static_cast<std::size_t>(r.stage)].ops[s.op];
}

bool drawn_op(const Op& op) { return op.kind != OpKind::kAlloc && op.kind != OpKind::kFree; }

}  // namespace

class TimelineTest : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase();
  void ranksAndLanes();
  void eventsMatchRun();
  void bubblesMatchBreakdown();
  void pipelineBubbleVisible();
  void paintMergesNarrowEvents();
  void wheelZoomsAroundCursor();
  void dragPans();
  void rankFilter();
  void hoverNamesEvent();
  void hoverNamesTheNormsWaitAsTheDrain();
  void perfettoTraceIsTheRunsTrace();
  void deterministic();
  void ddpBucketsOverlapBackward();
  void hangShowsReport();
  void cleanupTestCase();

 private:
  void reopen(const char* rel);
  ScenarioDocument* doc_ = nullptr;
  TimelineView* view_ = nullptr;
  std::optional<app::SimulateReport> direct_;
};

void TimelineTest::initTestCase() {
  doc_ = new ScenarioDocument(this);
  QString error;
  QVERIFY2(doc_->open(source_path("scenarios/llama3-70b-64xh100.json"), &error), qPrintable(error));
  QVERIFY(doc_->scenario());
  view_ = new TimelineView(doc_);
  view_->resize(1400, 800);
  QSignalSpy idle(view_, &View::idle);
  view_->show();  // showing it simulates
  QVERIFY(QTest::qWaitForWindowExposed(view_));
  QVERIFY(wait_idle(view_, 60000));
  QVERIFY(idle.count() >= 1);
  QVERIFY(view_->report());
  direct_ = simulate(*doc_->scenario());
}

void TimelineTest::cleanupTestCase() { delete view_; }

void TimelineTest::reopen(const char* rel) {
  QString error;
  QVERIFY2(doc_->open(source_path(rel), &error), qPrintable(error));
  QVERIFY(doc_->scenario());
  QVERIFY(view_->busy());  // a change while visible schedules a run (coalesced)
  QVERIFY(wait_idle(view_, 60000));
}

void TimelineTest::ranksAndLanes() {
  const TimelineCanvas* c = view_->canvas();
  QVERIFY(c->data());
  std::vector<int> ranks;
  std::set<Stream> streams = {Stream::kCompute};
  for (const RankTimeline& r : direct_->run.out.timeline.ranks) {
    ranks.push_back(r.rank);
    for (const Span& s : r.spans) {
      if (drawn_op(op_of(direct_->run, r, s))) streams.insert(s.stream);
    }
  }
  QCOMPARE(c->data()->ranks(), ranks);
  QCOMPARE(ranks.size(), std::size_t{4});  // PP4, representative: one rank per stage
  QCOMPARE(c->shownRankCount(), static_cast<int>(ranks.size()));
  QCOMPARE(c->shownLanes().size(), ranks.size() * streams.size());
  for (int lane : c->shownLanes()) QVERIFY(streams.count(c->data()->lanes[static_cast<std::size_t>(lane)].stream));
}

void TimelineTest::eventsMatchRun() {
  // Per stream: the number of ops and their summed time from post to end, from the run's spans.
  std::map<Stream, std::pair<std::int64_t, std::int64_t>> want, got;
  std::int64_t total = 0;
  for (const RankTimeline& r : direct_->run.out.timeline.ranks) {
    for (const Span& s : r.spans) {
      if (!drawn_op(op_of(direct_->run, r, s))) continue;
      auto& w = want[s.stream];
      ++w.first;
      w.second += s.end.ns() - s.post.ns();
      ++total;
    }
  }
  const TimelineData* d = view_->canvas()->data();
  for (const TimelineLane& lane : d->lanes) {
    for (const TimelineItem& it : lane.items) {
      if (it.part == LanePart::kBubble) continue;
      auto& g = got[lane.stream];
      ++g.first;
      g.second += it.end_ns - it.post_ns;
    }
  }
  QVERIFY(total > 10000);
  QCOMPARE(d->ops, total);
  QCOMPARE(got, want);
}

void TimelineTest::bubblesMatchBreakdown() {
  // The idle time drawn per rank, per step, equals the breakdown's bubble (analysis::analyze).
  const TimelineData* d = view_->canvas()->data();
  const analysis::SimSummary& sum = direct_->run.summary;
  QCOMPARE(sum.ranks.size(), std::size_t{4});
  for (const analysis::RankBreakdown& b : sum.ranks) {
    std::int64_t idle = 0;
    for (const TimelineLane& lane : d->lanes) {
      if (lane.rank != b.rank) continue;
      for (const TimelineItem& it : lane.items) {
        if (it.part == LanePart::kBubble) idle += it.end_ns - it.post_ns;
      }
    }
    QVERIFY2(std::abs(static_cast<double>(idle) / 1e9 / d->steps - b.bubble) < 1e-9,
             qPrintable(QStringLiteral("rank %1: drawn %2 s, breakdown %3 s").arg(b.rank).arg(idle / 1e9).arg(b.bubble)));
    QVERIFY(b.bubble > 0.1);  // PP4: every stage idles for a pipeline fill or drain
  }
}

void TimelineTest::pipelineBubbleVisible() {
  // From the run: each stage's forward of the first microbatch lasts from its first compute
  // to its first send; the last stage cannot start before all earlier stages did theirs.
  const sim::RunResult& run = direct_->run;
  const int pp = run.program.placement.pp;
  QCOMPARE(pp, 4);
  std::int64_t fill = 0;
  for (const RankTimeline& r : run.out.timeline.ranks) {
    if (r.stage == pp - 1) continue;
    std::int64_t first_compute = -1, first_send = -1;
    for (const Span& s : r.spans) {
      const Op& op = op_of(run, r, s);
      if (op.kind == OpKind::kCompute && s.end > s.begin && (first_compute < 0 || s.begin.ns() < first_compute)) {
        first_compute = s.begin.ns();
      }
      if (op.kind == OpKind::kSend && (first_send < 0 || s.post.ns() < first_send)) first_send = s.post.ns();
    }
    QVERIFY(first_compute >= 0 && first_send > first_compute);
    fill += first_send - first_compute;
  }
  QVERIFY(fill > 0);
  // In the view: the last stage's compute lane starts with idle time from 0 to its first op,
  // and that op starts at least `fill` after stage 0's first compute.
  auto first_compute_in_view = [&](int stage, const TimelineItem** idle) {
    for (const TimelineLane& lane : view_->canvas()->data()->lanes) {
      if (lane.stage != stage || lane.stream != Stream::kCompute) continue;
      if (idle) *idle = lane.items.empty() ? nullptr : &lane.items.front();
      for (const TimelineItem& it : lane.items) {
        if (it.part != LanePart::kBubble && it.end_ns > it.begin_ns) return it.begin_ns;
      }
    }
    return std::int64_t{-1};
  };
  const TimelineItem* idle = nullptr;
  const std::int64_t last = first_compute_in_view(pp - 1, &idle);
  const std::int64_t first = first_compute_in_view(0, nullptr);
  QVERIFY(first >= 0 && last >= 0);
  QVERIFY2(last - first >= fill, qPrintable(QStringLiteral("%1 < %2").arg(last - first).arg(fill)));
  // Its idle time lasts at least until the previous stage sends the first activation.
  QVERIFY(idle);
  QCOMPARE(idle->part, LanePart::kBubble);
  QCOMPARE(idle->post_ns, std::int64_t{0});
  QVERIFY(idle->end_ns >= fill);
  QVERIFY(idle->end_ns <= last);
}

void TimelineTest::paintMergesNarrowEvents() {
  TimelineCanvas* c = view_->canvas();
  c->fitAll();
  c->grab();  // paints
  const int rects = c->lastPaintedRects();
  QVERIFY(rects > 0);
  // At most a wait and a body per pixel column per lane: ops narrower than a pixel are merged.
  QVERIFY(rects <= 2 * static_cast<int>(c->shownLanes().size()) * c->plotWidth());
  QVERIFY2(rects < c->data()->ops / 2, qPrintable(QStringLiteral("%1 rects for %2 ops").arg(rects).arg(c->data()->ops)));
}

void TimelineTest::wheelZoomsAroundCursor() {
  TimelineCanvas* c = view_->canvas();
  c->fitAll();
  const double window = c->windowSeconds();
  const QPointF pos(c->plotLeft() + 0.3 * c->plotWidth(), c->height() / 2.0);
  const double at = c->timeAt(pos.x());
  QWheelEvent in(pos, c->mapToGlobal(pos), QPoint(), QPoint(0, 120), Qt::NoButton, Qt::NoModifier, Qt::NoScrollPhase,
                 false);
  QApplication::sendEvent(c, &in);
  QCOMPARE(c->windowSeconds(), window * TimelineCanvas::kWheelZoom);  // one notch: half the window
  QVERIFY(std::abs(c->timeAt(pos.x()) - at) < 1e-12 * window);        // the time under the cursor stays
  QWheelEvent in2(pos, c->mapToGlobal(pos), QPoint(), QPoint(0, 240), Qt::NoButton, Qt::NoModifier,
                  Qt::NoScrollPhase, false);
  QApplication::sendEvent(c, &in2);
  QCOMPARE(c->windowSeconds(), window * 0.125);
  QVERIFY(std::abs(c->timeAt(pos.x()) - at) < 1e-12 * window);
  QWheelEvent out(pos, c->mapToGlobal(pos), QPoint(), QPoint(0, -360), Qt::NoButton, Qt::NoModifier,
                  Qt::NoScrollPhase, false);
  QApplication::sendEvent(c, &out);
  QVERIFY(std::abs(c->windowSeconds() - window) < 1e-12 * window);
}

void TimelineTest::dragPans() {
  TimelineCanvas* c = view_->canvas();
  c->fitAll();
  c->setWindow(0.25 * static_cast<double>(c->data()->end_ns) / 1e9, 0.25 * static_cast<double>(c->data()->end_ns) / 1e9);
  const double t0 = c->windowStart(), spp = c->secondsPerPixel(), window = c->windowSeconds();
  const QPointF a(c->plotLeft() + 400, 60), b(c->plotLeft() + 400 + 137, 75);
  QMouseEvent press(QEvent::MouseButtonPress, a, c->mapToGlobal(a), Qt::LeftButton, Qt::LeftButton, Qt::NoModifier);
  QMouseEvent move(QEvent::MouseMove, b, c->mapToGlobal(b), Qt::NoButton, Qt::LeftButton, Qt::NoModifier);
  QMouseEvent release(QEvent::MouseButtonRelease, b, c->mapToGlobal(b), Qt::LeftButton, Qt::NoButton, Qt::NoModifier);
  QApplication::sendEvent(c, &press);
  QApplication::sendEvent(c, &move);
  QApplication::sendEvent(c, &release);
  // Dragging right by 137 pixels shows what was 137 pixels to the left: earlier time.
  QVERIFY(std::abs(c->windowStart() - (t0 - 137 * spp)) < 1e-12 * window);
  QCOMPARE(c->windowSeconds(), window);
  c->fitAll();
}

void TimelineTest::rankFilter() {
  TimelineCanvas* c = view_->canvas();
  view_->rankFilter()->setText(QStringLiteral("0"));
  QCOMPARE(c->shownRankCount(), 1);
  for (int lane : c->shownLanes()) QCOMPARE(c->data()->lanes[static_cast<std::size_t>(lane)].rank, 0);
  view_->rankFilter()->setText(QStringLiteral("16, 40-48"));  // ranks 16 and 48 exist
  QCOMPARE(c->shownRankCount(), 2);
  QCOMPARE(c->rankFilter(), (std::set<int>{16, 40, 41, 42, 43, 44, 45, 46, 47, 48}));
  view_->rankFilter()->setText(QStringLiteral("3-x"));  // malformed: every rank
  QCOMPARE(c->shownRankCount(), 4);
  view_->rankFilter()->clear();
  QCOMPARE(c->shownRankCount(), 4);
  std::set<int> parsed;
  QString error;
  QVERIFY(parse_rank_list(QStringLiteral("0-7,12"), &parsed, &error));
  QCOMPARE(parsed, (std::set<int>{0, 1, 2, 3, 4, 5, 6, 7, 12}));
  QVERIFY(!parse_rank_list(QStringLiteral("7-3"), &parsed, &error));
  QVERIFY(error.contains(QStringLiteral("7-3")));
}

void TimelineTest::hoverNamesTheNormsWaitAsTheDrain() {
  // A stage that ends its last backward early waits at the gradient norm's all-reduce over
  // every rank for the others' drain: drawn and named as idle (bubble), not as a wait for late
  // group members (analysis::counts_as_wait).
  TimelineCanvas* c = view_->canvas();
  const sim::RunResult& run = direct_->run;
  const RankTimeline* rank = nullptr;
  const Span* norm = nullptr;
  for (const RankTimeline& r : run.out.timeline.ranks) {
    for (const Span& s : r.spans) {
      const Op& op = op_of(run, r, s);
      if (op.kind == OpKind::kCollective && op.group == GroupKind::kWorld && s.begin - s.post > SimTime::from_s(1e-3) &&
          (!norm || s.begin - s.post > norm->begin - norm->post)) {
        rank = &r;
        norm = &s;
      }
    }
  }
  QVERIFY(norm);
  const double p = norm->post.seconds(), b = norm->begin.seconds();
  c->setWindow(p - (b - p), 3 * (b - p));
  const QPoint pos(static_cast<int>(c->xOf((p + b) / 2)), c->laneCenterY(rank->rank, Stream::kDp));
  QVERIFY(pos.y() > 0);
  const QString text = c->toolTipAt(pos);
  QCOMPARE(text.section(QLatin1Char('\n'), 0, 0), QStringLiteral("world.ar gradient norm"));
  QVERIFY2(text.contains(QStringLiteral("waiting for the other stages' drain")), qPrintable(text));
  QVERIFY2(!text.contains(QStringLiteral("late group members")), qPrintable(text));
  c->fitAll();
}

void TimelineTest::hoverNamesEvent() {
  TimelineCanvas* c = view_->canvas();
  const sim::RunResult& run = direct_->run;
  // The longest compute op of rank 16 and the longest DP collective of rank 0, from the run.
  auto longest = [&](int rank, OpKind kind, Stream stream) {
    const RankTimeline* rt = nullptr;
    for (const RankTimeline& r : run.out.timeline.ranks) {
      if (r.rank == rank) rt = &r;
    }
    const Span* best = nullptr;
    for (const Span& s : rt->spans) {
      if (op_of(run, *rt, s).kind == kind && s.stream == stream && (!best || s.end - s.begin > best->end - best->begin)) {
        best = &s;
      }
    }
    return std::make_pair(best, &op_of(run, *rt, *best));
  };
  for (const auto& [rank, kind, stream] : {std::tuple{16, OpKind::kCompute, Stream::kCompute},
                                           std::tuple{0, OpKind::kCollective, Stream::kDp}}) {
    const auto [span, op] = longest(rank, kind, stream);
    QVERIFY(span);
    const double b = span->begin.seconds(), e = span->end.seconds();
    c->setWindow(b - (e - b), 3 * (e - b));  // the op fills the middle third
    const QPoint pos(static_cast<int>(c->xOf((b + e) / 2)), c->laneCenterY(rank, stream));
    QVERIFY(pos.y() > 0);
    const QString name = QString::fromStdString(run.program.names[op->name]);
    const QString text = c->toolTipAt(pos);
    QCOMPARE(text.section(QLatin1Char('\n'), 0, 0), name);
    QVERIFY2(text.contains(QStringLiteral("rank %1 ").arg(rank)), qPrintable(text));
    QVERIFY2(text.contains(QLatin1String(to_string(stream))), qPrintable(text));
    QVERIFY2(text.contains(QStringLiteral("duration %1 ms").arg((span->end - span->post).seconds() * 1e3, 0, 'f', 6)),
             qPrintable(text));
    if (kind == OpKind::kCollective) QVERIFY2(text.contains(QStringLiteral("bytes ")), qPrintable(text));
    // Through the widget's tooltip event too.
    QHelpEvent help(QEvent::ToolTip, pos, c->mapToGlobal(pos));
    QApplication::sendEvent(c, &help);
    QTRY_COMPARE(QToolTip::text(), text);
  }
  QToolTip::hideText();
  c->fitAll();
}

void TimelineTest::perfettoTraceIsTheRunsTrace() {
  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  const QString path = dir.filePath(QStringLiteral("t.json"));
  QString error;
  QVERIFY2(view_->writeTrace(path, &error), qPrintable(error));
  QFile f(path);
  QVERIFY(f.open(QIODevice::ReadOnly));
  const QByteArray bytes = f.readAll();
  QVERIFY(!direct_->trace_json.empty());
  QCOMPARE(bytes.size(), static_cast<qsizetype>(direct_->trace_json.size()));
  QVERIFY(bytes == QByteArray::fromStdString(direct_->trace_json));
}

void TimelineTest::deterministic() {
  const app::SimulateReport again = simulate(*doc_->scenario());
  QVERIFY(again.trace_json == direct_->trace_json);
  // The view's re-simulation gives the same trace as well.
  QSignalSpy idle(view_, &View::idle);
  view_->runSimulation();
  QVERIFY(view_->busy());
  QVERIFY(idle.wait(60000));
  QVERIFY(view_->report()->trace_json == direct_->trace_json);
}

void TimelineTest::ddpBucketsOverlapBackward() {
  reopen("scenarios/gpt-1.3b-ddp-16xh100.json");
  const app::SimulateReport direct = simulate(*doc_->scenario());
  // From the run: time in which a DP bucket moves data while the rank computes a backward.
  std::int64_t want = 0;
  int backward_ops = 0;
  for (const RankTimeline& r : direct.run.out.timeline.ranks) {
    for (const Span& dp : r.spans) {
      if (dp.stream != Stream::kDp) continue;
      for (const Span& s : r.spans) {
        const Op& op = op_of(direct.run, r, s);
        if (op.kind != OpKind::kCompute) continue;
        if (direct.run.program.names[op.name].rfind("B ", 0) != 0) continue;
        ++backward_ops;
        want += std::max<std::int64_t>(0, std::min(dp.end.ns(), s.end.ns()) - std::max(dp.begin.ns(), s.begin.ns()));
      }
    }
  }
  QVERIFY(backward_ops > 0);
  QVERIFY(want > 0);  // the buckets' all-reduce overlaps the backward
  // In the view: the same overlap between the DP lane's transfers and the compute lane's ops.
  const TimelineData* d = view_->canvas()->data();
  std::int64_t got = 0;
  for (const TimelineLane& dp : d->lanes) {
    if (dp.stream != Stream::kDp) continue;
    for (const TimelineLane& cl : d->lanes) {
      if (cl.rank != dp.rank || cl.stream != Stream::kCompute) continue;
      for (const TimelineItem& a : dp.items) {
        for (const TimelineItem& b : cl.items) {
          if (b.part != LanePart::kCompute || d->names[b.name].rfind("B ", 0) != 0) continue;
          got += std::max<std::int64_t>(0, std::min(a.end_ns, b.end_ns) - std::max(a.begin_ns, b.begin_ns));
        }
      }
    }
  }
  QCOMPARE(got, want);
}

void TimelineTest::hangShowsReport() {
  // rank 37 crashes in step 2: three steps hang.
  reopen("scenarios/incident/hang.json");
  auto* steps = view_->findChild<QSpinBox*>(QStringLiteral("steps"));
  QVERIFY(steps);
  steps->setValue(3);
  QVERIFY(view_->busy());
  QVERIFY(wait_idle(view_, 60000));
  const app::SimulateReport direct = simulate(*doc_->scenario(), 3);
  QVERIFY(direct.hang());
  QVERIFY(view_->report() && view_->report()->hang());
  QVERIFY(!direct.hang_report().empty());
  QVERIFY2(view_->messageText().contains(QString::fromStdString(direct.hang_report())), qPrintable(view_->messageText()));
  QVERIFY(view_->statusText().contains(QStringLiteral("hangs")));
  steps->setValue(1);
  QVERIFY(wait_idle(view_, 60000));
  QVERIFY(!view_->report()->hang());
  QVERIFY(view_->messageText().isEmpty());
}

QTEST_MAIN(TimelineTest)
#include "timeline_test.moc"

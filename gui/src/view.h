// What every view of the main window is: a widget over the one ScenarioDocument that may
// work in the background (a simulation, a search) and says when it is idle again, so the
// screenshot script and the tests can wait for it without sleeping.
#pragma once

#include <QWidget>

namespace stepcast::gui {

class ScenarioDocument;

class View : public QWidget {
  Q_OBJECT

 public:
  View(ScenarioDocument* doc, QWidget* parent) : QWidget(parent), doc_(doc) {}
  // True while background work (a worker thread) is running.
  virtual bool busy() const { return false; }
  // Puts the view in the state its screenshot in docs/gui/ shows (runs what it shows).
  virtual void prepareScreenshot() {}
  ScenarioDocument* document() const { return doc_; }

 signals:
  // Background work ended (finished, failed or cancelled).
  void idle();

 private:
  ScenarioDocument* doc_;
};

// Runs the event loop until `view` is not busy or `timeout_ms` passes; false on timeout.
bool wait_idle(const View* view, int timeout_ms);

}  // namespace stepcast::gui

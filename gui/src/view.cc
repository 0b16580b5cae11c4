#include "view.h"

#include <QCoreApplication>
#include <QElapsedTimer>
#include <QThread>

namespace stepcast::gui {

bool wait_idle(const View* view, int timeout_ms) {
  QElapsedTimer t;
  t.start();
  while (view->busy()) {
    if (t.elapsed() > timeout_ms) return false;
    QCoreApplication::processEvents(QEventLoop::AllEvents, 20);
    QThread::msleep(5);
  }
  QCoreApplication::processEvents();
  return true;
}

}  // namespace stepcast::gui

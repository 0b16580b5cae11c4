// stepcast-gui [SCENARIO] [--screenshots DIR [--views a,b] [--prefix P]]: the what-if
// desktop tool (docs/gui.md). --screenshots writes one PNG per view of SCENARIO into DIR
// and exits (scripts/gui-screenshots.sh regenerates docs/gui/ with it).
#include <QApplication>
#include <QCommandLineParser>
#include <QTimer>
#include <cstdio>

#include "main_window.h"

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QApplication::setApplicationName(QStringLiteral("stepcast-gui"));
  QCommandLineParser cli;
  cli.setApplicationDescription(QStringLiteral("stepcast: what-if planning for distributed training"));
  cli.addHelpOption();
  cli.addPositionalArgument(QStringLiteral("scenario"), QStringLiteral("A scenario file to open."), QStringLiteral("[SCENARIO]"));
  const QCommandLineOption shots(QStringLiteral("screenshots"),
                                 QStringLiteral("Write one PNG per view into DIR and exit."), QStringLiteral("DIR"));
  cli.addOption(shots);
  const QCommandLineOption views(QStringLiteral("views"),
                                 QStringLiteral("With --screenshots: only these views (scenario, timeline, planner, "
                                                "reliability, incidents, collectives), comma-separated."),
                                 QStringLiteral("LIST"));
  const QCommandLineOption prefix(QStringLiteral("prefix"), QStringLiteral("With --screenshots: file name prefix."),
                                  QStringLiteral("P"));
  cli.addOption(views);
  cli.addOption(prefix);
  cli.process(app);

  stepcast::gui::MainWindow window;
  const QStringList args = cli.positionalArguments();
  if (args.size() > 1) {
    std::fprintf(stderr, "stepcast-gui: one scenario at most\n");
    return 2;
  }
  if (!args.isEmpty() && !window.openFile(args.front(), cli.isSet(shots))) {
    if (cli.isSet(shots)) {
      std::fprintf(stderr, "stepcast-gui: cannot read %s\n", qPrintable(args.front()));
      return 2;
    }
  }
  window.show();
  if (cli.isSet(shots)) {
    int rc = 0;
    QTimer::singleShot(0, &window, [&] {
      const QStringList only = cli.value(views).split(QLatin1Char(','), Qt::SkipEmptyParts);
      if (!window.saveScreenshots(cli.value(shots), only, cli.value(prefix))) {
        std::fprintf(stderr, "stepcast-gui: could not write the screenshots into %s\n",
                     qPrintable(cli.value(shots)));
        rc = 1;
      }
      QApplication::exit(rc);
    });
    return QApplication::exec() == 0 ? rc : 1;
  }
  return QApplication::exec();
}

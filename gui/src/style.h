// Shared look: one colour per step-time part and stream, so the estimate's breakdown, the
// timeline and the comparison speak the same colours; number formats.
#pragma once

#include <string_view>

#include <QColor>
#include <QString>

class QLabel;
class QWidget;

namespace stepcast::gui {

// The colour of a breakdown part or timeline stream: "compute", "tp", "dp", "pp", "cp",
// "ep", "bubble", "wait", "optimizer", "host", "input", "checkpoint", ... (grey when unknown).
QColor part_color(std::string_view part);
// Seconds with a unit that suits them: "812 us", "41.3 ms", "7.212 s", "3.1 h".
QString format_seconds(double s);
// Bytes as GiB with two decimals: "63.41 GiB".
QString format_gib(double bytes);
// A count with thousands separators: "91,624".
QString format_count(double v);
// A label for messages (input errors): word-wrapped, selectable, in the error colour;
// `name` is its object name (tests find it by name).
QLabel* message_label(const QString& name, QWidget* parent);

}  // namespace stepcast::gui

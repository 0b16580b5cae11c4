#include "style.h"

#include <cmath>

#include <QLabel>

namespace stepcast::gui {

QColor part_color(std::string_view part) {
  // Okabe-Ito inspired, distinguishable for colour-blind readers.
  if (part == "compute" || part == "forward" || part == "backward") return QColor(0x00, 0x72, 0xB2);
  // The compute's kinds of work (estimate.h ComputeParts): shades of the compute blue.
  if (part == "gemm") return QColor(0x00, 0x72, 0xB2);
  if (part == "attention") return QColor(0x00, 0x3F, 0x66);
  if (part == "memory_bound") return QColor(0x7F, 0xB8, 0xD8);
  if (part == "recompute") return QColor(0x3D, 0x5A, 0x80);
  if (part == "output") return QColor(0xA6, 0xCE, 0xE3);
  if (part == "interference") return QColor(0x5B, 0x7F, 0x95);
  if (part == "tp") return QColor(0xE6, 0x9F, 0x00);
  if (part == "dp" || part == "fsdp") return QColor(0x00, 0x9E, 0x73);
  if (part == "pp") return QColor(0xCC, 0x79, 0xA7);
  if (part == "cp") return QColor(0x56, 0xB4, 0xE9);
  if (part == "ep") return QColor(0xD5, 0x5E, 0x00);
  if (part == "bubble") return QColor(0xBB, 0xBB, 0xBB);
  if (part == "wait") return QColor(0xF0, 0xE4, 0x42);
  if (part == "optimizer") return QColor(0x6A, 0x3D, 0x9A);
  if (part == "host") return QColor(0x99, 0x33, 0x33);
  if (part == "input") return QColor(0x88, 0x88, 0x44);
  if (part == "checkpoint") return QColor(0x44, 0x44, 0x44);
  if (part == "params" || part == "weights") return QColor(0x00, 0x72, 0xB2);
  if (part == "grads") return QColor(0x00, 0x9E, 0x73);
  if (part == "activations") return QColor(0xE6, 0x9F, 0x00);
  if (part == "buffers") return QColor(0xBB, 0xBB, 0xBB);
  return QColor(0x99, 0x99, 0x99);
}

QString format_seconds(double s) {
  const double a = std::abs(s);
  if (a < 1e-3) return QStringLiteral("%1 us").arg(s * 1e6, 0, 'f', 0);
  if (a < 1.0) return QStringLiteral("%1 ms").arg(s * 1e3, 0, 'f', 1);
  if (a < 3600.0) return QStringLiteral("%1 s").arg(s, 0, 'f', 3);
  if (a < 86400.0 * 3) return QStringLiteral("%1 h").arg(s / 3600.0, 0, 'f', 1);
  return QStringLiteral("%1 days").arg(s / 86400.0, 0, 'f', 1);
}

QString format_gib(double bytes) { return QStringLiteral("%1 GiB").arg(bytes / (1024.0 * 1024.0 * 1024.0), 0, 'f', 2); }

QString format_count(double v) {
  const long long n = std::llround(v);
  QString digits = QString::number(n < 0 ? -n : n);
  for (int i = digits.size() - 3; i > 0; i -= 3) digits.insert(i, QLatin1Char(','));
  return n < 0 ? QStringLiteral("-") + digits : digits;
}

QLabel* message_label(const QString& name, QWidget* parent) {
  auto* label = new QLabel(parent);
  label->setObjectName(name);
  label->setWordWrap(true);
  label->setTextInteractionFlags(Qt::TextSelectableByMouse);
  label->setStyleSheet(QStringLiteral("QLabel { color: #b00020; }"));
  return label;
}

}  // namespace stepcast::gui

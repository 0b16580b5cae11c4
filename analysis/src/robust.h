// Robust statistics for the detectors (private to analysis/).
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "stepcast/models/stats.h"

namespace stepcast::analysis {

using stepcast::median;  // stepcast/models/stats.h

// Robust z of a deviation from the median: Iglewicz & Hoaglin's modified z-score (1.4826
// MAD ~ sigma for normal data); with MAD = 0 (most values identical) any positive
// deviation is infinitely far.
inline double robust_z(double deviation, double mad) {
  if (mad > 0) return deviation / (1.4826 * mad);
  return deviation > 0 ? std::numeric_limits<double>::infinity() : 0.0;
}

struct Robust {
  double median = 0, mad = 0;
  double z(double x) const { return robust_z(x - median, mad); }
};

inline Robust robust(const std::vector<double>& v) {
  Robust r;
  r.median = analysis::median(v);
  std::vector<double> dev;
  dev.reserve(v.size());
  for (double x : v) dev.push_back(std::abs(x - r.median));
  r.mad = analysis::median(dev);
  return r;
}

}  // namespace stepcast::analysis

// Simulated time: integer nanoseconds (a strong type). Conversions from seconds happen
// once, at the edges (cost models produce seconds; the engine works in SimTime).
#pragma once

#include <cmath>
#include <compare>
#include <cstdint>

namespace stepcast {

class SimTime {
 public:
  constexpr SimTime() = default;
  static constexpr SimTime from_ns(std::int64_t ns) { return SimTime(ns); }
  static constexpr SimTime from_us(std::int64_t us) { return SimTime(us * 1000); }
  // Rounds to the nearest nanosecond. REQUIRES: finite, |s| < 9e9.
  static SimTime from_s(double s) { return SimTime(static_cast<std::int64_t>(std::llround(s * 1e9))); }

  constexpr std::int64_t ns() const { return ns_; }
  constexpr double seconds() const { return static_cast<double>(ns_) * 1e-9; }

  constexpr SimTime operator+(SimTime o) const { return SimTime(ns_ + o.ns_); }
  constexpr SimTime operator-(SimTime o) const { return SimTime(ns_ - o.ns_); }
  constexpr SimTime& operator+=(SimTime o) { ns_ += o.ns_; return *this; }
  constexpr SimTime& operator-=(SimTime o) { ns_ -= o.ns_; return *this; }
  constexpr auto operator<=>(const SimTime&) const = default;

 private:
  constexpr explicit SimTime(std::int64_t ns) : ns_(ns) {}
  std::int64_t ns_ = 0;
};

}  // namespace stepcast

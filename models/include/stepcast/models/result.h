// Result<T>: a value or an error message. Expected failures (bad input, infeasible
// requests) are values; bugs are checks. No library function of stepcast calls exit().
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace stepcast {

// An input or runtime error. `message` is complete and user-facing: it names the
// JSON path (or file) and the reason, e.g. "plan.tp: 3 does not divide attention heads (64)".
struct Error {
  std::string message;
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}          // NOLINT(google-explicit-constructor)
  Result(Error error) : v_(std::move(error)) {}      // NOLINT(google-explicit-constructor)

  bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }

  // REQUIRES: ok().
  const T& value() const& { return std::get<T>(v_); }
  T& value() & { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  const T& operator*() const& { return value(); }
  const T* operator->() const { return &value(); }

  // REQUIRES: !ok().
  const Error& error() const { return std::get<Error>(v_); }

 private:
  std::variant<T, Error> v_;
};

}  // namespace stepcast

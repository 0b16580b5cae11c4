// Lists in input files: a value or a list of values, each checked, as the scenario's
// plan and search blocks read them (internal to stepcast_models).
#pragma once

#include <algorithm>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "json_reader.h"
#include "stepcast/models/names.h"

namespace stepcast::detail {

inline constexpr std::size_t kMaxListLength = 256;

inline std::string at(const std::string& path, std::size_t i) { return fmt::format("{}[{}]", path, i); }

// The elements of a list value (or the one value), checked by `one`; sorted ascending
// without duplicates. nullopt (with messages) on any problem.
template <typename T, typename One>
std::optional<std::vector<T>> list_of(const json& v, const std::string& path, const char* what,
                                      Diagnostics& diag, One one) {
  std::vector<std::pair<T, std::size_t>> items;  // value, index in the file
  const std::size_t before = diag.size();
  if (v.is_array()) {
    if (v.empty()) {
      diag.add(path, "an empty list allows nothing (omit the key for the default)");
      return std::nullopt;
    }
    if (v.size() > kMaxListLength) {
      diag.add(path, fmt::format("{} values; at most {}", v.size(), kMaxListLength));
      return std::nullopt;
    }
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (auto x = one(v[i], at(path, i))) items.emplace_back(*x, i);
    }
  } else if (v.is_object() || v.is_null()) {
    diag.add(path, std::string("expected ") + what + ", got " + describe(v));
    return std::nullopt;
  } else if (auto x = one(v, path)) {
    items.emplace_back(*x, 0);
  }
  if (diag.size() != before) return std::nullopt;
  // Duplicates are reported at their second appearance, in file order.
  for (std::size_t i = 0; i < items.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (items[j].first == items[i].first) {
        diag.add(at(path, items[i].second), describe(v[items[i].second]) + " appears twice");
        break;
      }
    }
  }
  if (diag.size() != before) return std::nullopt;
  std::vector<T> out;
  for (const auto& [x, i] : items) out.push_back(x);
  std::sort(out.begin(), out.end());
  return out;
}

// One name of E as its enum value (the tables of stepcast/models/names.h); nullopt with a
// message naming `path` (and the nearest name) otherwise.
template <typename E>
std::optional<E> name_value(const json& e, const std::string& path, Diagnostics& diag) {
  if (!e.is_string()) {
    diag.add(path, "expected a string, got " + describe(e));
    return std::nullopt;
  }
  const std::string s = e.get<std::string>();
  if (auto value = parse_name<E>(s)) return value;
  const std::vector<std::string>& names = names_of<E>();
  std::string msg = "\"" + printable(s) + "\" is not one of ";
  for (std::size_t i = 0; i < names.size(); ++i) msg += (i ? ", \"" : "\"") + names[i] + "\"";
  const std::string near = closest(s, names);
  if (!near.empty()) msg += "; did you mean \"" + near + "\"?";
  diag.add(path, msg);
  return std::nullopt;
}

// A name of E (or a list of them) as enum values.
template <typename E>
std::optional<std::vector<E>> choices(ObjectReader& r, std::string_view key) {
  const json* v = r.raw(key);
  if (!v) return std::nullopt;
  return list_of<E>(*v, r.path_of(key), "a string or a list of strings", r.diag(),
                    [&](const json& e, const std::string& path) { return name_value<E>(e, path, r.diag()); });
}

}  // namespace stepcast::detail

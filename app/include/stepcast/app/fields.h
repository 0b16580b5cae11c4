// The fields a report offers to a scenario's `expect` block (`stepcast check`): dotted
// names ("breakdown_s.compute") to JSON values, taken from the report's own JSON value, so
// every field a report prints is expectable and a report declares its fields by printing
// them. check combines the fields of the reports a scenario needs.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace stepcast::app {

class Fields {
 public:
  // Every scalar of `report` under its dotted path (objects recurse; arrays are values).
  static Fields of(const nlohmann::ordered_json& report);

  // Sets `name` (replacing a value already there).
  void set(const std::string& name, nlohmann::json value) { values_[name] = std::move(value); }
  // Adds the fields of `other`; with `replace` false, fields already present are kept.
  void merge(const Fields& other, bool replace = true);
  // nullptr when absent.
  const nlohmann::json* find(const std::string& name) const;
  std::vector<std::string> names() const;  // sorted
  bool empty() const { return values_.empty(); }

 private:
  std::map<std::string, nlohmann::json> values_;
};

}  // namespace stepcast::app

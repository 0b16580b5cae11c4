#include "stepcast/app/fields.h"

namespace stepcast::app {

namespace {

void flatten(const nlohmann::ordered_json& j, const std::string& prefix, Fields& out) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string name = prefix.empty() ? it.key() : prefix + "." + it.key();
    if (it->is_object()) flatten(*it, name, out);
    else out.set(name, nlohmann::json(*it));
  }
}

}  // namespace

Fields Fields::of(const nlohmann::ordered_json& report) {
  Fields f;
  if (report.is_object()) flatten(report, "", f);
  return f;
}

void Fields::merge(const Fields& other, bool replace) {
  for (const auto& [k, v] : other.values_) {
    if (replace || !values_.count(k)) values_[k] = v;
  }
}

const nlohmann::json* Fields::find(const std::string& name) const {
  auto it = values_.find(name);
  return it == values_.end() ? nullptr : &it->second;
}

std::vector<std::string> Fields::names() const {
  std::vector<std::string> out;
  out.reserve(values_.size());
  for (const auto& [k, v] : values_) out.push_back(k);
  return out;
}

}  // namespace stepcast::app

// Edits one value of a JSON document's text in place, so that what a user wrote around it
// (comments, layout, key order) stays as it was: the GUI's editor saves the scenario file
// it opened with only the edited values changed.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace stepcast::gui {

// `text` with the value at `path` (object keys from the root) replaced by `value_json`
// (serialised JSON). A member that does not exist is appended to its object (with its
// missing parents as nested objects); a parent that exists and is not an object is an
// error. nullopt with `error` set when `text` is not a JSON object document as the loader
// reads it (comments allowed) or the path cannot be set.
std::optional<std::string> set_json_value(std::string_view text, const std::vector<std::string>& path,
                                          std::string_view value_json, std::string* error = nullptr);

// `text` without the member at `path` (and its separating comma); `text` unchanged when
// the member is absent. nullopt with `error` set when `text` cannot be scanned.
std::optional<std::string> remove_json_member(std::string_view text, const std::vector<std::string>& path,
                                              std::string* error = nullptr);

}  // namespace stepcast::gui

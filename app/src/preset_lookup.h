// The message for a preset name the catalogue does not hold, as the option-taking use cases
// (collective, gemm) word it: "--cluster: unknown cluster preset \"dgx-h1000\" (did you
// mean \"dgx-h100\"?) (presets: ...)".
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "stepcast/models/json_reader.h"
#include "stepcast/models/text.h"

namespace stepcast::app {

template <class PresetMap>
std::string unknown_preset_message(std::string_view option, std::string_view what, const std::string& name,
                                   const PresetMap& presets) {
  std::vector<std::string> names;
  std::string list;
  for (const auto& entry : presets) {
    names.push_back(entry.first);
    list += (list.empty() ? "" : ", ") + entry.first;
  }
  const std::string near = reader::closest(name, names);
  return std::string(option) + ": unknown " + std::string(what) + " preset \"" + printable(name) + "\"" +
         (near.empty() ? "" : " (did you mean \"" + near + "\"?)") + " (presets: " + list + ")";
}

}  // namespace stepcast::app

#include "stepcast/models/presets.h"

#include <cstdio>
#include <cstdlib>

#include "reliability_json.h"
#include "spec_json.h"

namespace stepcast::detail {
extern const char* const kPresetModelsJson;
extern const char* const kPresetGpusJson;
extern const char* const kPresetClustersJson;
extern const char* const kPresetFailuresJson;
}  // namespace stepcast::detail

namespace stepcast {

using detail::Diagnostics;
using detail::json;
using detail::ObjectReader;

const char* builtin_preset_text(const std::string& name) {
  if (name == "models") return detail::kPresetModelsJson;
  if (name == "gpus") return detail::kPresetGpusJson;
  if (name == "clusters") return detail::kPresetClustersJson;
  if (name == "failures") return detail::kPresetFailuresJson;
  return nullptr;
}

namespace {

template <typename Spec, typename ReadFn>
void read_section(const char* file, const char* section, std::map<std::string, Spec>& out,
                  Diagnostics& diag, ReadFn read) {
  const json doc = json::parse(builtin_preset_text(file));
  const std::string path = std::string(file) + ".json:" + section;
  for (auto it = doc.at(section).begin(); it != doc.at(section).end(); ++it) {
    ObjectReader r(it.value(), path + "." + it.key(), diag);
    Spec spec = read(r);
    r.finish();
    spec.name = it.key();
    out.emplace(it.key(), std::move(spec));
  }
}

PresetCatalog parse_catalog() {
  PresetCatalog cat;
  Diagnostics diag;
  read_section<ModelSpec>("models", "models", cat.models, diag, [](ObjectReader& r) {
    return detail::read_model(r, ModelSpec{}, /*from_preset=*/false);
  });
  read_section<GpuSpec>("gpus", "gpus", cat.gpus, diag, [](ObjectReader& r) {
    GpuSpec g = detail::read_gpu(r, GpuSpec{}, /*from_preset=*/false);
    return g;
  });
  read_section<ClusterSpec>("clusters", "clusters", cat.clusters, diag, [&](ObjectReader& r) {
    return detail::read_cluster(r, ClusterSpec{}, /*from_preset=*/false, cat.gpus);
  });
  read_section<FailureSpec>("failures", "failures", cat.failures, diag, [](ObjectReader& r) {
    return detail::read_failures(r, FailureSpec{}, /*from_preset=*/false);
  });
  for (auto& [key, model] : cat.models) {
    if (model.family.empty()) model.family = key;
  }
  if (!diag.empty()) {
    std::fprintf(stderr, "stepcast: built-in presets are invalid (build defect):\n%s\n",
                 diag.joined().c_str());
    std::abort();
  }
  return cat;
}

}  // namespace

const PresetCatalog& builtin_presets() {
  static const PresetCatalog catalog = parse_catalog();  // immutable after first use
  return catalog;
}

}  // namespace stepcast

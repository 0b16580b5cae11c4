// Private: JSON -> spec conversion shared by the preset catalog and scenario loader.
#pragma once

#include <map>
#include <string>

#include "json_reader.h"
#include "stepcast/models/specs.h"

namespace stepcast::detail {

// Reads model fields from `r` on top of `base` (a preset, or defaults when !from_preset).
// Derived defaults (head_dim = h/a, num_kv_heads = a, ffn_matrices from the activation)
// apply to fields neither the preset nor the object set.
ModelSpec read_model(ObjectReader& r, ModelSpec base, bool from_preset);
GpuSpec read_gpu(ObjectReader& r, GpuSpec base, bool from_preset);
// `gpus` resolves a "gpu" given by name.
ClusterSpec read_cluster(ObjectReader& r, ClusterSpec base, bool from_preset,
                         const std::map<std::string, GpuSpec>& gpus);

// Resolves a value that is a preset name, {"preset": name, ...overrides}, or a full
// object. `kind` is "model", "gpu" or "cluster" (for messages).
template <typename Spec, typename ReadFn>
std::optional<Spec> resolve_spec(const json& v, const std::string& path, Diagnostics& diag,
                                 const std::map<std::string, Spec>& presets, const Spec& defaults,
                                 const char* kind, ReadFn read);

std::string unknown_preset_message(const std::string& kind, const std::string& name,
                                   const std::vector<std::string>& names);

template <typename Spec, typename ReadFn>
std::optional<Spec> resolve_spec(const json& v, const std::string& path, Diagnostics& diag,
                                 const std::map<std::string, Spec>& presets, const Spec& defaults,
                                 const char* kind, ReadFn read) {
  std::vector<std::string> names;
  for (const auto& [k, _] : presets) names.push_back(k);
  auto lookup = [&](const std::string& name, const std::string& at) -> const Spec* {
    auto it = presets.find(name);
    if (it == presets.end()) {
      diag.add(at, unknown_preset_message(kind, name, names));
      return nullptr;
    }
    return &it->second;
  };
  if (v.is_string()) {
    const Spec* p = lookup(v.get<std::string>(), path);
    if (!p) return std::nullopt;
    return *p;
  }
  if (!v.is_object()) {
    diag.add(path, std::string("expected a ") + kind + " preset name or an object, got " +
                       describe(v));
    return std::nullopt;
  }
  const std::size_t before = diag.size();
  ObjectReader r(v, path, diag);
  const Spec* base = nullptr;
  if (auto name = r.string("preset")) {
    base = lookup(*name, r.path_of("preset"));
    if (!base) return std::nullopt;
  }
  Spec out = read(r, base ? *base : defaults, base != nullptr);
  r.finish();
  if (diag.size() != before) return std::nullopt;
  return out;
}

}  // namespace stepcast::detail

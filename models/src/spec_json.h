// Private: JSON -> spec conversion shared by the preset catalog and scenario loader.
#pragma once

#include <map>
#include <string>

#include "json_reader.h"
#include "stepcast/models/specs.h"

namespace stepcast::detail {

// A positive physical quantity's accepted range (docs/scenarios.md "Limits"): generous
// (orders of magnitude beyond today's hardware both ways) and tight enough that no cost
// model divides by a near-zero rate and produces an infinite step time.
struct PhysicalRange {
  double lo, hi;
  const char* unit;  // for the message: "TFLOP/s", "GiB", "GB/s", ...
};
inline constexpr PhysicalRange kTflopsRange{1e-3, 1e5, "TFLOP/s"};         // GPU peak rates
inline constexpr PhysicalRange kHbmGiBRange{0.1, 1e5, "GiB"};              // device memory
inline constexpr PhysicalRange kHbmGBpsRange{0.1, 1e6, "GB/s"};            // device memory bandwidth
inline constexpr PhysicalRange kLinkGBpsRange{0.01, 1e6, "GB/s"};          // scale-up, intra-node links
inline constexpr PhysicalRange kNicGbpsRange{0.1, 1e7, "Gb/s"};            // NICs
inline constexpr PhysicalRange kPowerWRange{1, 1e5, "W"};                  // a device's power limit
inline constexpr PhysicalRange kStorageGBpsRange{1e-3, 1e6, "GB/s"};       // storage, device-to-host
inline constexpr PhysicalRange kHostGiBRange{0.1, 1e7, "GiB"};             // host memory per node
inline constexpr PhysicalRange kEfficiencyRange{0.01, 1, "of the peak"};   // achieved / peak
inline constexpr double kMaxLatencyUs = 1e5;                               // 0.1 s per message

// `key` as a positive number within `range`; errors: not a positive number (as
// ObjectReader::number), or "<value> is outside the physical range (lo to hi unit)".
std::optional<double> physical(ObjectReader& r, std::string_view key, const PhysicalRange& range);

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

#include "stepcast/models/calibration.h"

#include <array>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "json_reader.h"
#include "stepcast/models/collectives.h"

namespace stepcast {

using detail::json;

namespace {

constexpr std::array<CollKind, 6> kKinds = {CollKind::kAllReduce, CollKind::kAllGather, CollKind::kReduceScatter,
                                           CollKind::kAllToAll, CollKind::kBroadcast, CollKind::kSendRecv};

std::vector<std::string> kind_names() {
  std::vector<std::string> v;
  for (CollKind k : kKinds) v.emplace_back(to_string(k));
  return v;
}

// Physical ranges of measured figures (docs/scenarios.md "Limits"): an efficiency of a
// hundredth of the peak or less, a latency over a second or a bandwidth under 1 MB/s is a
// broken measurement, and would make step times astronomically long.
constexpr double kMinEfficiency = 0.01;
constexpr double kMaxEfficiency = 10;
constexpr double kMaxAlphaS = 1;
constexpr double kMaxSecondsPerByte = 1e-6;
// More collective fits than any calibration run writes (kinds x scopes = 12).
constexpr std::size_t kMaxCollectiveFits = 1000;

json quality_json(const FitQuality& q) { return json{{"points", q.points}, {"rms_relative", q.rms_relative}}; }

void read_quality(detail::ObjectReader& r, FitQuality& q) {
  if (auto v = r.integer("points", 0, 1'000'000'000)) q.points = static_cast<int>(*v);
  if (auto v = r.number("rms_relative", 0, 1e9)) q.rms_relative = *v;
}

// A measured rate: 0 = not measured; otherwise between 1 MB/s and 100 TB/s.
void read_rate(detail::ObjectReader& r, detail::Diagnostics& diag, const char* key, double& out) {
  if (auto v = r.number(key, 0, 1e5)) {
    if (*v > 0 && *v < 1e-3) diag.add(r.path_of(key), fmt::format("{} GB/s is below 1 MB/s (0 = not measured)", *v));
    else out = *v;
  }
}

}  // namespace

void apply_calibration(const Calibration& cal, ClusterSpec& c) {
  if (cal.gemm_efficiency > 0) c.gpu.gemm_efficiency = cal.gemm_efficiency;
  if (cal.gemm_s_per_byte > 0) c.gpu.gemm_s_per_byte = cal.gemm_s_per_byte;
  if (cal.attention_efficiency > 0) c.gpu.attention_efficiency = cal.attention_efficiency;
  if (cal.memory_efficiency > 0) c.gpu.hbm_efficiency = cal.memory_efficiency;
  for (const CollectiveCalibration& cc : cal.collectives) {
    bool replaced = false;
    for (CollectiveFit& f : c.collective_fits) {
      if (f.kind == cc.fit.kind && f.scope == cc.fit.scope) {
        f = cc.fit;
        replaced = true;
      }
    }
    if (!replaced) c.collective_fits.push_back(cc.fit);
  }
  if (cal.checkpoint.write_GBps > 0) c.storage_write_GBps = cal.checkpoint.write_GBps;
  if (cal.checkpoint.read_GBps > 0) c.storage_read_GBps = cal.checkpoint.read_GBps;
  if (cal.checkpoint.saves + cal.checkpoint.snapshots > 0) c.storage_commit_s = cal.checkpoint.commit_s;
  const double eta = c.host_efficiency > 0 ? c.host_efficiency : 1.0;
  if (cal.host_rates.link_GBps > 0) c.host_link_GBps = cal.host_rates.link_GBps / eta;
  if (cal.host_rates.optimizer_GBps > 0)
    c.host_memory_bandwidth_GBps = cal.host_rates.optimizer_GBps * c.gpus_per_node / eta;
}

void apply_calibration(const Calibration& cal, CheckpointSpec& checkpoint) {
  if (cal.checkpoint.snapshot_GBps > 0) checkpoint.d2h_GBps = cal.checkpoint.snapshot_GBps;
}

std::string calibration_json(const Calibration& cal) {
  json colls = json::array();
  for (const CollectiveCalibration& cc : cal.collectives) {
    colls.push_back(json{{"kind", std::string(to_string(static_cast<CollKind>(cc.fit.kind)))},
                         {"scope", cc.fit.scope == CollScope::kIntraNode ? "intra_node" : "inter_node"},
                         {"alpha_s", cc.fit.alpha_s},
                         {"beta_s_per_byte", cc.fit.beta_s_per_byte},
                         {"busbw_GBps", cc.fit.beta_s_per_byte > 0 ? 1e-9 / cc.fit.beta_s_per_byte : 0.0},
                         {"max_bytes", cc.max_bytes},
                         {"fit", quality_json(cc.quality)}});
  }
  json j = {
      {"format", Calibration::kFormat},
      {"kind", "stepcast-calibration"},
      {"created", cal.created},
      {"fingerprint",
       {{"backend", cal.backend},
        {"device", cal.device},
        {"communicator", cal.communicator},
        {"host", cal.host},
        {"ranks", cal.ranks},
        {"gpu_spec", cal.gpu_spec},
        {"peak_flops", cal.peak_flops}}},
      {"compute",
       {{"gemm",
         {{"efficiency", cal.gemm_efficiency}, {"s_per_byte", cal.gemm_s_per_byte}, {"fit", quality_json(cal.gemm)}}},
        {"attention", {{"efficiency", cal.attention_efficiency}, {"fit", quality_json(cal.attention)}}},
        {"memory", {{"efficiency", cal.memory_efficiency}, {"fit", quality_json(cal.memory)}}}}},
      {"collectives", colls},
      {"checkpoint",
       {{"write_GBps", cal.checkpoint.write_GBps},
        {"read_GBps", cal.checkpoint.read_GBps},
        {"snapshot_GBps", cal.checkpoint.snapshot_GBps},
        {"commit_s", cal.checkpoint.commit_s},
        {"saves", cal.checkpoint.saves},
        {"restores", cal.checkpoint.restores},
        {"snapshots", cal.checkpoint.snapshots}}},
      {"host_rates",
       {{"link_GBps", cal.host_rates.link_GBps},
        {"link_fit", quality_json(cal.host_rates.link)},
        {"optimizer_GBps", cal.host_rates.optimizer_GBps},
        {"optimizer_fit", quality_json(cal.host_rates.optimizer)}}},
      {"sources", cal.sources},
  };
  return j.dump(2) + "\n";
}

Result<Calibration> parse_calibration(std::string_view text, const std::string& prefix) {
  auto parsed = reader::parse_document(text);
  if (!parsed.ok()) return Error{reader::prefix_lines(prefix, parsed.error().message)};
  const json& doc = *parsed;
  if (!doc.is_object()) return Error{prefix + ": expected an object, got " + detail::describe(doc)};
  detail::Diagnostics diag;
  detail::ObjectReader top(doc, prefix, diag);
  Calibration cal;
  if (auto f = top.integer("format", 1, 1'000'000); f && *f != Calibration::kFormat) {
    diag.add(top.path_of("format"), fmt::format("{} is not supported (this stepcast reads format {})", *f, Calibration::kFormat));
  }
  if (auto k = top.string("kind"); k && *k != "stepcast-calibration") {
    diag.add(top.path_of("kind"), fmt::format("\"{}\" is not a stepcast calibration", detail::printable(*k)));
  }
  if (auto v = top.string("created")) cal.created = *v;
  if (const json* fp = top.raw("fingerprint"); fp && fp->is_object()) {
    detail::ObjectReader r(*fp, top.path_of("fingerprint"), diag);
    if (auto v = r.string("backend")) cal.backend = *v;
    if (auto v = r.string("device")) cal.device = *v;
    if (auto v = r.string("communicator")) cal.communicator = *v;
    if (auto v = r.string("host")) cal.host = *v;
    if (auto v = r.integer("ranks", 0, 100'000'000)) cal.ranks = static_cast<int>(*v);
    if (auto v = r.string("gpu_spec")) cal.gpu_spec = *v;
    if (auto v = r.number("peak_flops", 0, 1e21)) cal.peak_flops = *v;
    r.finish();
  }
  if (const json* c = top.raw("compute"); c && c->is_object()) {
    detail::ObjectReader r(*c, top.path_of("compute"), diag);
    auto part = [&](const char* name, double& eff, FitQuality& q, double* per_byte) {
      const json* v = r.raw(name);
      if (!v) return;
      if (!v->is_object()) {
        diag.add(r.path_of(name), "expected an object, got " + detail::describe(*v));
        return;
      }
      detail::ObjectReader p(*v, r.path_of(name), diag);
      // > 1: the spec understates the peak; 0: not measured (the spec's value stays).
      if (auto e = p.number("efficiency", 0, kMaxEfficiency)) {
        if (*e > 0 && *e < kMinEfficiency) {
          diag.add(p.path_of("efficiency"),
                   fmt::format("{} is outside the physical range (0 = not measured, or {} to {})",
                               detail::describe(*p.raw("efficiency")), kMinEfficiency, kMaxEfficiency));
        } else {
          eff = *e;
        }
      }
      if (per_byte) {
        if (auto b = p.number("s_per_byte", 0, kMaxSecondsPerByte)) *per_byte = *b;
      }
      if (const json* f = p.raw("fit"); f && f->is_object()) {
        detail::ObjectReader fr(*f, p.path_of("fit"), diag);
        read_quality(fr, q);
        fr.finish();
      }
      p.finish();
    };
    part("gemm", cal.gemm_efficiency, cal.gemm, &cal.gemm_s_per_byte);
    part("attention", cal.attention_efficiency, cal.attention, nullptr);
    part("memory", cal.memory_efficiency, cal.memory, nullptr);
    r.finish();
  }
  if (const json* ck = top.raw("checkpoint")) {
    if (!ck->is_object()) {
      diag.add(top.path_of("checkpoint"), "expected an object, got " + detail::describe(*ck));
    } else {
      detail::ObjectReader r(*ck, top.path_of("checkpoint"), diag);
      read_rate(r, diag, "write_GBps", cal.checkpoint.write_GBps);
      read_rate(r, diag, "read_GBps", cal.checkpoint.read_GBps);
      read_rate(r, diag, "snapshot_GBps", cal.checkpoint.snapshot_GBps);
      if (auto v = r.number("commit_s", 0, 3600)) cal.checkpoint.commit_s = *v;
      if (auto v = r.integer("saves", 0, 1'000'000'000)) cal.checkpoint.saves = static_cast<int>(*v);
      if (auto v = r.integer("restores", 0, 1'000'000'000)) cal.checkpoint.restores = static_cast<int>(*v);
      if (auto v = r.integer("snapshots", 0, 1'000'000'000)) cal.checkpoint.snapshots = static_cast<int>(*v);
      r.finish();
    }
  }
  if (const json* h = top.raw("host_rates")) {
    if (!h->is_object()) {
      diag.add(top.path_of("host_rates"), "expected an object, got " + detail::describe(*h));
    } else {
      detail::ObjectReader r(*h, top.path_of("host_rates"), diag);
      auto quality = [&](const char* key, FitQuality& q) {
        if (const json* f = r.raw(key); f && f->is_object()) {
          detail::ObjectReader fr(*f, r.path_of(key), diag);
          read_quality(fr, q);
          fr.finish();
        }
      };
      read_rate(r, diag, "link_GBps", cal.host_rates.link_GBps);
      quality("link_fit", cal.host_rates.link);
      read_rate(r, diag, "optimizer_GBps", cal.host_rates.optimizer_GBps);
      quality("optimizer_fit", cal.host_rates.optimizer);
      r.finish();
    }
  }
  if (const json* cs = top.raw("collectives")) {
    if (!cs->is_array()) {
      diag.add(top.path_of("collectives"), "expected an array, got " + detail::describe(*cs));
    } else if (cs->size() > kMaxCollectiveFits) {
      diag.add(top.path_of("collectives"),
               fmt::format("{} entries, more than the {} stepcast supports", cs->size(), kMaxCollectiveFits));
    } else {
      for (std::size_t i = 0; i < cs->size(); ++i) {
        const json& e = (*cs)[i];
        const std::string path = fmt::format("{}[{}]", top.path_of("collectives"), i);
        if (!e.is_object()) {
          diag.add(path, "expected an object, got " + detail::describe(e));
          continue;
        }
        detail::ObjectReader r(e, path, diag);
        CollectiveCalibration cc;
        if (auto k = r.choice("kind", kind_names())) {
          for (CollKind kind : kKinds) if (to_string(kind) == *k) cc.fit.kind = static_cast<int>(kind);
        } else if (!r.has("kind")) {
          diag.add(r.path_of("kind"), "required");
        }
        if (auto s = r.choice("scope", {"intra_node", "inter_node"})) {
          cc.fit.scope = *s == "intra_node" ? CollScope::kIntraNode : CollScope::kInterNode;
        }
        if (auto v = r.number("alpha_s", 0, kMaxAlphaS)) cc.fit.alpha_s = *v;
        if (auto v = r.number("beta_s_per_byte", 0, kMaxSecondsPerByte)) cc.fit.beta_s_per_byte = *v;
        if (auto v = r.number("max_bytes", 0, 1e18)) cc.max_bytes = *v;
        r.ignore({"busbw_GBps"});
        if (const json* f = r.raw("fit"); f && f->is_object()) {
          detail::ObjectReader fr(*f, r.path_of("fit"), diag);
          read_quality(fr, cc.quality);
          fr.finish();
        }
        r.finish();
        cal.collectives.push_back(cc);
      }
    }
  }
  if (const json* s = top.raw("sources"); s && s->is_array()) {
    for (const json& e : *s) if (e.is_string()) cal.sources.push_back(e.get<std::string>());
  }
  top.finish();
  if (!diag.empty()) return Error{diag.joined()};
  return cal;
}

}  // namespace stepcast

#include "stepcast/app/train.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <system_error>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "stepcast/analysis/resume.h"
#include "stepcast/executor/launch.h"
#include "stepcast/executor/machine.h"
#include "stepcast/executor/scale_down.h"
#include "stepcast/models/json_reader.h"
#include "stepcast/models/reshard.h"
#include "stepcast/models/scenario.h"

namespace stepcast::app {

namespace {

using ojson = nlohmann::ordered_json;

// Little-endian fixed-width fields of the wire strings gathered to rank 0.
template <typename T>
void put(std::string& out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.append(b, sizeof(T));
}
template <typename T>
T take(const std::string& in, std::size_t& pos) {
  T v{};
  if (pos + sizeof(T) > in.size()) throw std::runtime_error("train: truncated rank report");
  std::memcpy(&v, in.data() + pos, sizeof(T));
  pos += sizeof(T);
  return v;
}

// What every rank sends rank 0 after the run: its step times, its saves, its restore.
struct RankReport {
  std::vector<double> step_s;
  std::vector<exec::SaveStats> saves;
  exec::LoadStats restore;
};

std::string rank_wire(const RankReport& r) {
  std::string w;
  put<std::uint64_t>(w, r.step_s.size());
  for (double s : r.step_s) put(w, s);
  put<std::uint64_t>(w, r.saves.size());
  for (const exec::SaveStats& s : r.saves) {
    put(w, s.generation);
    put(w, s.bytes);
    put(w, s.snapshot_s);
    put(w, s.write_s);
    put(w, s.data_s);
    put(w, s.commit_s);
    put(w, s.pause_s);
  }
  put(w, r.restore.generation);
  put(w, r.restore.bytes);
  put<std::int64_t>(w, r.restore.shards_read);
  put(w, r.restore.read_s);
  return w;
}

RankReport rank_from_wire(const std::string& w) {
  RankReport r;
  std::size_t pos = 0;
  r.step_s.resize(take<std::uint64_t>(w, pos));
  for (double& s : r.step_s) s = take<double>(w, pos);
  r.saves.resize(take<std::uint64_t>(w, pos));
  for (exec::SaveStats& s : r.saves) {
    s.generation = take<std::int64_t>(w, pos);
    s.bytes = take<double>(w, pos);
    s.snapshot_s = take<double>(w, pos);
    s.write_s = take<double>(w, pos);
    s.data_s = take<double>(w, pos);
    s.commit_s = take<double>(w, pos);
    s.pause_s = take<double>(w, pos);
  }
  r.restore.generation = take<std::int64_t>(w, pos);
  r.restore.bytes = take<double>(w, pos);
  r.restore.shards_read = static_cast<int>(take<std::int64_t>(w, pos));
  r.restore.read_s = take<double>(w, pos);
  return r;
}

// params.bin: for every tensor in name order, u32 name length, the name, i64 rows, i64
// cols, rows x cols f32 (little-endian). Rank 0 writes it from gather_parameters().
std::string params_bin(const std::vector<exec::TensorPiece>& tensors) {
  std::string out;
  for (const exec::TensorPiece& t : tensors) {
    put<std::uint32_t>(out, static_cast<std::uint32_t>(t.name.size()));
    out += t.name;
    put<std::int64_t>(out, t.rows);
    put<std::int64_t>(out, t.cols);
    out.append(reinterpret_cast<const char*>(t.data.data()), t.data.size() * sizeof(float));
  }
  return out;
}

std::vector<exec::TensorPiece> params_from_bin(const std::string& bin, const std::string& path) {
  std::vector<exec::TensorPiece> out;
  std::size_t pos = 0;
  try {
    while (pos < bin.size()) {
      exec::TensorPiece t;
      const auto n = take<std::uint32_t>(bin, pos);
      if (pos + n > bin.size()) throw std::runtime_error("truncated");
      t.name = bin.substr(pos, n);
      pos += n;
      t.rows = take<std::int64_t>(bin, pos);
      t.cols = take<std::int64_t>(bin, pos);
      if (t.rows < 0 || t.cols < 0 || pos + static_cast<std::size_t>(t.rows * t.cols) * sizeof(float) > bin.size()) {
        throw std::runtime_error("truncated");
      }
      t.data.resize(static_cast<std::size_t>(t.rows * t.cols));
      std::memcpy(t.data.data(), bin.data() + pos, t.data.size() * sizeof(float));
      pos += t.data.size() * sizeof(float);
      out.push_back(std::move(t));
    }
  } catch (const std::runtime_error&) {
    throw std::runtime_error(path + ": truncated parameters file");
  }
  return out;
}

std::vector<StatePart> all_but(const std::vector<StatePart>& omit) {
  std::vector<StatePart> keep;
  for (StatePart p : kAllStateParts) {
    if (std::find(omit.begin(), omit.end(), p) == omit.end()) keep.push_back(p);
  }
  return keep;
}

std::string part_list(const std::vector<StatePart>& parts) {
  std::string s;
  for (StatePart p : parts) s += (s.empty() ? "" : ",") + std::string(state_part_name(p));
  return s;
}

// An async save's figures known only once it is committed (save() returned its snapshot).
void add_commit(exec::SaveStats& save, const exec::SaveStats& committed) {
  save.bytes = committed.bytes;
  save.write_s = committed.write_s;
  save.data_s = committed.data_s;
  save.commit_s = committed.commit_s;
}

std::string train_layout_text(const exec::TrainLayout& l) {
  return fmt::format("tp={},dp={},zero={}", l.tp, l.dp, l.zero1 ? 1 : 0);
}

Result<exec::TrainConfig> request_config(const TrainRequest& a, const Scenario& sc) {
  auto cfg = exec::train_config(sc);
  if (!cfg.ok()) return cfg.error();
  exec::TrainConfig& c = cfg.value();
  if (a.lr > 0) c.lr = a.lr;
  if (a.dropout >= 0) c.dropout = a.dropout;
  if (a.warmup_steps >= 0) c.warmup_steps = a.warmup_steps;
  if (a.total_steps >= 0) c.total_steps = a.total_steps;
  return cfg;
}

}  // namespace

Result<Scenario> train_scenario(const std::string& path, int scale_down, const std::string& layout) {
  auto loaded = load_scenario_file(path);
  if (!loaded.ok()) return loaded.error();
  auto sc = exec::scale_down_scenario(*loaded, scale_down);
  if (!sc.ok()) return sc.error();
  if (!layout.empty()) {
    auto to = parse_reshard_layout(layout, sc->plan, "--layout");
    if (!to.ok()) return to.error();
    Scenario& s = sc.value();
    s.plan = *to;
    s.cluster.nodes = 1;
    s.cluster.gpus_per_node = s.plan.world();
  }
  return sc;
}

Result<std::vector<StatePart>> parse_state_parts(const std::string& list, const std::string& option) {
  std::vector<StatePart> parts;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    std::optional<StatePart> p;
    if (item == "sampler") p = StatePart::kDataSampler;
    if (item == "scheduler") p = StatePart::kLrScheduler;
    for (StatePart q : kAllStateParts) {
      if (item == state_part_name(q)) p = q;
    }
    if (!p) {
      return Error{fmt::format("{}: \"{}\" is not a part of the training state (model, optimizer, scheduler, "
                               "grad_scaler, rng, sampler, step, config)",
                               option, item)};
    }
    if (std::find(parts.begin(), parts.end(), *p) == parts.end()) parts.push_back(*p);
  }
  if (parts.empty()) return Error{option + ": empty list"};
  return parts;
}

Result<TrainReport> run_train(const TrainRequest& a) {
  if (a.steps < 1) return Error{fmt::format("--steps: {} must be at least 1", a.steps)};
  if (a.checkpoint_every < 0) return Error{fmt::format("--checkpoint-every: {} must not be negative", a.checkpoint_every)};
  if (a.keep < 1) return Error{fmt::format("--keep: {} must be at least 1", a.keep)};
  if (a.scale_down < 1) return Error{fmt::format("--scale-down: {} must be at least 1", a.scale_down)};
  if (a.backend != "cpu_mpi") {
    return Error{fmt::format("--backend: --train runs on cpu_mpi (f32 on the host); \"{}\" is not supported", a.backend)};
  }
  auto sc = train_scenario(a.scenario, a.scale_down, a.layout);
  if (!sc.ok()) return sc.error();
  auto cfg = request_config(a, *sc);
  if (!cfg.ok()) return cfg.error();
  exec::CrashPoint crash;
  std::string crash_text = a.crash;
  if (crash_text.empty()) {
    if (const char* env = std::getenv("STEPCAST_CHECKPOINT_CRASH")) crash_text = env;
  }
  if (!crash_text.empty()) {
    auto c = exec::parse_crash_point(crash_text);
    if (!c.ok()) return Error{"--crash: " + c.error().message};
    crash = *c;
  }
  auto machine = exec::open_machine(a.backend);
  if (!machine.ok()) return machine.error();
  exec::Communicator& comm = machine.value().data();
  exec::Device& device = *machine.value().device;
  TrainReport rep;
  rep.root = comm.rank() == 0;
  if (comm.world() != cfg->layout.world()) {
    if (!rep.root) return Error{""};
    return Error{fmt::format("{}: --train with {} needs {} ranks but {} were launched (mpirun -np {} ...)", a.scenario,
                             train_layout_text(cfg->layout), cfg->layout.world(), comm.world(), cfg->layout.world())};
  }
  rep.scenario_name = sc->name;
  rep.config = *cfg;

  const std::string ckpt_dir =
      a.checkpoint_dir.empty() ? (std::filesystem::path(a.out) / "checkpoints").string() : a.checkpoint_dir;
  RankReport mine;
  try {
    exec::Trainer trainer(*cfg, comm, device);
    rep.parameters = trainer.parameter_count();
    if (!a.resume.empty()) {
      // Every rank looks for the newest loadable generation itself (the same files); rank
      // 0's answer is the one used, so a disagreement cannot split the ranks.
      auto gen = exec::latest_loadable_generation(a.resume);
      const double chosen = comm.max_all(rep.root && gen.ok() ? static_cast<double>(*gen) : -1.0);
      if (chosen < 0) {
        if (!rep.root) return Error{""};
        return Error{"--resume: " + (gen.ok() ? std::string("no generation") : gen.error().message)};
      }
      auto loaded = exec::load_generation(a.resume, static_cast<std::int64_t>(chosen), comm.rank(), cfg->layout,
                                          trainer.wanted_pieces());
      // The lowest failing rank prints why; the others exit quietly.
      const double first_failed = -comm.max_all(loaded.ok() ? -1e9 : -static_cast<double>(comm.rank()));
      if (first_failed < 1e9) {
        if (first_failed != comm.rank()) return Error{""};
        return Error{fmt::format("--resume: rank {}: {}", comm.rank(), loaded.error().message)};
      }
      trainer.import_state(loaded->state, loaded->contents);
      rep.resumed_from = static_cast<std::int64_t>(chosen);
      rep.resumed_layout = loaded->written_layout;
      rep.resumed_contents = loaded->contents;
      mine.restore = loaded->stats;
    }
    rep.first_step = trainer.steps_done() + 1;
    exec::CheckpointOptions opt;
    opt.dir = ckpt_dir;
    opt.keep = a.keep;
    opt.async = a.async;
    opt.contents = all_but(a.omit);
    opt.crash = crash;
    std::optional<exec::CheckpointStore> store;
    if (a.checkpoint_every > 0) store.emplace(comm, opt);
    for (int i = 0; i < a.steps; ++i) {
      const exec::StepResult s = trainer.step();
      rep.losses.push_back(s.loss);
      rep.grad_norms.push_back(s.grad_norm);
      rep.lrs.push_back(s.lr);
      mine.step_s.push_back(s.seconds);
      if (store && s.step % a.checkpoint_every == 0) {
        mine.saves.push_back(store->save(trainer.export_state(), s.step));
        // An async save's write and commit times arrive when the next save commits it.
        if (auto done = store->take_committed(); done && mine.saves.size() >= 2) {
          add_commit(mine.saves[mine.saves.size() - 2], *done);
        }
      }
      if (rep.root && a.progress) a.progress(i + 1, a.steps);
    }
    if (store) {
      // The last async save's write and commit times arrive with finish().
      if (auto last = store->finish(); last && !mine.saves.empty()) add_commit(mine.saves.back(), *last);
    }
    const std::vector<exec::TensorPiece> params = trainer.gather_parameters();
    if (rep.root) rep.params_bin = params_bin(params);
  } catch (const std::exception& e) {
    rep.run_error = fmt::format("rank {}: error: {}", comm.rank(), e.what());
    return rep;
  }
  const std::vector<std::string> wires = comm.gather(rank_wire(mine));
  if (!rep.root) return rep;

  std::vector<RankReport> ranks;
  for (const std::string& w : wires) ranks.push_back(rank_from_wire(w));
  rep.step_s.assign(rep.losses.size(), 0.0);
  for (const RankReport& r : ranks) {
    for (std::size_t i = 0; i < r.step_s.size() && i < rep.step_s.size(); ++i) rep.step_s[i] = std::max(rep.step_s[i], r.step_s[i]);
    rep.restore_bytes += r.restore.bytes;
    rep.restore_s = std::max(rep.restore_s, r.restore.read_s);
    rep.restore_shards = std::max(rep.restore_shards, r.restore.shards_read);
  }
  for (std::size_t k = 0; k < ranks.front().saves.size(); ++k) {
    TrainCheckpoint c;
    c.generation = ranks.front().saves[k].generation;
    for (const RankReport& r : ranks) {
      if (k >= r.saves.size()) continue;
      const exec::SaveStats& s = r.saves[k];
      c.bytes += s.bytes;
      c.rank_bytes = std::max(c.rank_bytes, s.bytes);
      c.snapshot_s = std::max(c.snapshot_s, s.snapshot_s);
      c.write_s = std::max(c.write_s, s.write_s);
      c.data_s = std::max(c.data_s, s.data_s);
      c.commit_s = std::max(c.commit_s, s.commit_s);
      c.pause_s = std::max(c.pause_s, s.pause_s);
    }
    rep.checkpoints.push_back(c);
  }
  rep.params_crc = exec::crc32(rep.params_bin.data(), rep.params_bin.size());
  std::error_code ec;
  std::filesystem::create_directories(a.out, ec);
  if (ec) return Error{fmt::format("--out: cannot create directory \"{}\": {}", a.out, ec.message())};
  rep.measured_path = (std::filesystem::path(a.out) / "measured.json").string();
  rep.params_path = (std::filesystem::path(a.out) / "params.bin").string();

  ojson steps = ojson::array();
  for (std::size_t i = 0; i < rep.losses.size(); ++i) {
    steps.push_back({{"step", rep.first_step + static_cast<std::int64_t>(i)}, {"loss", rep.losses[i]},
                     {"grad_norm", rep.grad_norms[i]}, {"lr", rep.lrs[i]}, {"seconds", rep.step_s[i]}});
  }
  ojson saves = ojson::array();
  for (const TrainCheckpoint& c : rep.checkpoints) {
    saves.push_back({{"generation", c.generation}, {"bytes", c.bytes}, {"rank_bytes", c.rank_bytes},
                     {"snapshot_s", c.snapshot_s}, {"write_s", c.write_s}, {"data_s", c.data_s},
                     {"commit_s", c.commit_s},
                     {"pause_s", c.pause_s}});
  }
  const exec::TrainConfig& k = rep.config;
  ojson j = {{"format", 1},
             {"kind", "stepcast-train"},
             {"scenario", std::filesystem::absolute(a.scenario).string()},
             {"name", rep.scenario_name},
             {"host", exec::host_name()},
             {"backend", a.backend},
             {"device", device.describe()},
             {"ranks", comm.world()},
             {"scale_down", a.scale_down},
             {"layout", {{"tp", k.layout.tp}, {"dp", k.layout.dp}, {"zero1", k.layout.zero1}}},
             {"model", {{"layers", k.layers}, {"hidden", k.hidden}, {"heads", k.heads}, {"ffn", k.ffn},
                        {"vocab", k.vocab}, {"seq", k.seq}}},
             {"batch", {{"microbatch", k.microbatch}, {"accumulation", k.accumulation},
                        {"global", k.microbatch * k.accumulation * k.layout.dp}}},
             {"parameters", rep.parameters},
             {"seed", k.seed},
             {"first_step", rep.first_step},
             {"steps", steps},
             {"checkpoint", {{"dir", ckpt_dir}, {"every", a.checkpoint_every}, {"async", a.async},
                             {"contents", part_list(all_but(a.omit))}, {"saves", saves}}}};
  if (rep.resumed_from >= 0) {
    j["restore"] = {{"dir", a.resume}, {"generation", rep.resumed_from},
                    {"written_layout", {{"tp", rep.resumed_layout.tp}, {"dp", rep.resumed_layout.dp},
                                        {"zero1", rep.resumed_layout.zero1}}},
                    {"contents", part_list(rep.resumed_contents)}, {"bytes", rep.restore_bytes},
                    {"read_s", rep.restore_s}, {"shards_read", rep.restore_shards}};
  }
  j["final_parameters"] = {{"file", "params.bin"}, {"bytes", rep.params_bin.size()}, {"crc32", rep.params_crc}};
  rep.measured_json = j.dump(2) + "\n";
  return rep;
}

std::string train_json(const TrainReport& r) { return r.measured_json; }

std::string train_text(const TrainReport& r) {
  const exec::TrainConfig& k = r.config;
  std::string out = fmt::format("stepcast execute --train: {} ({} parameters; {} layers, hidden {}, {} heads, ffn {}, "
                                "vocab {}, seq {}) on {}\n",
                                r.scenario_name, r.parameters, k.layers, k.hidden, k.heads, k.ffn, k.vocab, k.seq,
                                train_layout_text(k.layout));
  if (r.resumed_from >= 0) {
    out += fmt::format("Resumed    generation {} (written by {}; contents {}): {:.2f} MB read in {:.3f} s, up to {} "
                       "shard file(s) per rank\n",
                       r.resumed_from, train_layout_text(r.resumed_layout), part_list(r.resumed_contents),
                       r.restore_bytes / 1e6, r.restore_s, r.restore_shards);
  }
  for (std::size_t i = 0; i < r.losses.size(); ++i) {
    out += fmt::format("Step {:>5}  loss {:.6f}  grad norm {:.4f}  lr {:.3e}  {:.3f} s\n", r.first_step + static_cast<std::int64_t>(i),
                       r.losses[i], r.grad_norms[i], r.lrs[i], r.step_s[i]);
  }
  for (const TrainCheckpoint& c : r.checkpoints) {
    out += fmt::format("Checkpoint generation {}: {:.2f} MB ({:.2f} MB largest shard), pause {:.3f} s (snapshot {:.3f} s), "
                       "write {:.3f} s (data {:.3f} s), commit {:.3f} s\n",
                       c.generation, c.bytes / 1e6, c.rank_bytes / 1e6, c.pause_s, c.snapshot_s, c.write_s, c.data_s,
                       c.commit_s);
  }
  out += fmt::format("Parameters CRC-32 {:08x} ({})\nWrote      {} and {}\n", r.params_crc, r.params_path, r.measured_path,
                     r.params_path);
  return out;
}

// --- resume-check -----------------------------------------------------------------------

namespace {

struct TrainRun {
  std::vector<double> losses;   // by step, from first_step
  std::int64_t first_step = 1;
  std::vector<exec::TensorPiece> params;
};

Result<TrainRun> read_run(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / "measured.json").string();
  auto text = reader::read_input_file(path);
  if (!text.ok()) return text.error();
  auto doc = reader::parse_document(*text);
  if (!doc.ok()) return Error{reader::prefix_lines(path, doc.error().message)};
  TrainRun run;
  try {
    if (doc->value("kind", "") != "stepcast-train") return Error{path + ": kind: not written by `stepcast execute --train`"};
    run.first_step = doc->at("first_step").get<std::int64_t>();
    for (const auto& s : doc->at("steps")) run.losses.push_back(s.at("loss").get<double>());
  } catch (const nlohmann::json::exception& e) {
    return Error{fmt::format("{}: {}", path, e.what())};
  }
  const std::string ppath = (std::filesystem::path(dir) / "params.bin").string();
  std::ifstream in(ppath, std::ios::binary);
  if (!in) return Error{ppath + ": cannot open"};
  const std::string bin((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  try {
    run.params = params_from_bin(bin, ppath);
  } catch (const std::runtime_error& e) {
    return Error{e.what()};
  }
  return run;
}

}  // namespace

Result<ResumeCheckReport> run_resume_check(const ResumeCheckRequest& a, const TrainLauncher& launch) {
  if (a.n < 1) return Error{fmt::format("--resume-check: {} must be at least 1", a.n)};
  if (!(a.tolerance >= 0)) return Error{fmt::format("--tolerance: {} must not be negative", a.tolerance)};
  auto sc = train_scenario(a.scenario, a.scale_down, a.layout);
  if (!sc.ok()) return sc.error();
  auto cfg = exec::train_config(*sc);
  if (!cfg.ok()) return cfg.error();
  exec::TrainLayout resumed = cfg->layout;
  if (!a.reshard_to.empty()) {
    auto rs = train_scenario(a.scenario, a.scale_down, a.reshard_to);
    if (!rs.ok()) return Error{"--reshard-to: " + rs.error().message};
    auto rc = exec::train_config(*rs);
    if (!rc.ok()) return Error{"--reshard-to: " + rc.error().message};
    resumed = rc->layout;
  }
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::remove_all(a.out, ec);
  fs::create_directories(a.out, ec);
  if (ec) return Error{fmt::format("--out: cannot create directory \"{}\": {}", a.out, ec.message())};
  const std::string straight = (fs::path(a.out) / "straight").string();
  const std::string first = (fs::path(a.out) / "first").string();
  const std::string second = (fs::path(a.out) / "resumed").string();
  std::vector<std::string> common = {"--scale-down", std::to_string(a.scale_down)};
  if (!a.layout.empty()) common.insert(common.end(), {"--layout", a.layout});
  auto with = [&](std::vector<std::string> args, const std::vector<std::string>& more) {
    args.insert(args.end(), more.begin(), more.end());
    return args;
  };
  const std::string n = std::to_string(a.n);
  struct Launch {
    const char* what;
    int ranks;
    std::vector<std::string> args;
  };
  std::vector<std::string> save_args = {"execute", "--train", a.scenario, "--steps", n, "--out", first,
                                        "--checkpoint-every", n};
  if (!a.omit.empty()) save_args.insert(save_args.end(), {"--omit", part_list(a.omit)});
  std::vector<std::string> resume_args = {"execute", "--train", a.scenario, "--steps", n, "--out", second, "--resume",
                                          (fs::path(first) / "checkpoints").string(), "--scale-down",
                                          std::to_string(a.scale_down)};
  if (!a.reshard_to.empty()) resume_args.insert(resume_args.end(), {"--layout", a.reshard_to});
  else if (!a.layout.empty()) resume_args.insert(resume_args.end(), {"--layout", a.layout});
  const std::vector<Launch> launches = {
      {"the straight run", cfg->layout.world(),
       with({"execute", "--train", a.scenario, "--steps", std::to_string(2 * a.n), "--out", straight}, common)},
      {"the first half (with the save)", cfg->layout.world(), with(save_args, common)},
      {"the resumed half (new processes)", resumed.world(), resume_args},
  };
  for (const Launch& l : launches) {
    const int rc = launch(l.ranks, l.args);
    if (rc != 0) return Error{fmt::format("--resume-check: {} failed (exit code {})", l.what, rc)};
  }
  auto s = read_run(straight);
  if (!s.ok()) return s.error();
  auto r = read_run(second);
  if (!r.ok()) return r.error();

  ResumeCheckReport rep;
  rep.scenario_name = sc->name;
  rep.n = a.n;
  rep.layout = cfg->layout;
  rep.resumed_layout = resumed;
  rep.omitted = a.omit;
  rep.tolerance = a.tolerance;
  rep.straight.assign(s->losses.begin() + a.n, s->losses.end());
  rep.resumed = r->losses;
  bool bitwise = rep.straight.size() == rep.resumed.size();
  for (std::size_t i = 0; i < rep.straight.size() && i < rep.resumed.size(); ++i) {
    const double d = std::abs(rep.straight[i] - rep.resumed[i]) / std::max(1e-30, std::abs(rep.straight[i]));
    if (rep.straight[i] != rep.resumed[i]) {
      bitwise = false;
      if (rep.first_diverging_step < 0 && d > a.tolerance) rep.first_diverging_step = a.n + 1 + static_cast<int>(i);
    }
    rep.max_loss_diff = std::max(rep.max_loss_diff, d);
  }
  if (s->params.size() != r->params.size()) return Error{"--resume-check: the two runs have different parameter sets"};
  for (std::size_t t = 0; t < s->params.size(); ++t) {
    const auto& x = s->params[t].data;
    const auto& y = r->params[t].data;
    if (x.size() != y.size()) return Error{"--resume-check: parameter " + s->params[t].name + " differs in shape"};
    for (std::size_t i = 0; i < x.size(); ++i) {
      if (x[i] != y[i]) bitwise = false;
      rep.max_param_diff = std::max(rep.max_param_diff, static_cast<double>(std::abs(x[i] - y[i])));
    }
  }
  rep.bitwise = bitwise;
  const bool same_layout = resumed.tp == cfg->layout.tp && resumed.dp == cfg->layout.dp && resumed.zero1 == cfg->layout.zero1;
  rep.pass = same_layout ? bitwise : rep.max_loss_diff <= a.tolerance;
  CheckpointSpec spec;
  spec.contents = all_but(a.omit);
  // The trainer keeps the fp32 master in its optimizer part, as Megatron-Core does.
  const analysis::ResumeAudit audit = analysis::resume_audit(spec, false, true);
  for (const analysis::ResumeItem& m : audit.missing) {
    rep.audit += fmt::format("{}{}: {}{}", rep.audit.empty() ? "" : "\n", state_part_name(m.part), m.consequence,
                             m.matters ? "" : " (no effect here)");
  }
  const bool diverged = rep.first_diverging_step > 0 || (same_layout && !bitwise && rep.max_param_diff > 0);
  rep.audit_agrees = audit.ok() != diverged;
  return rep;
}

std::string resume_check_text(const ResumeCheckReport& r) {
  std::string out = fmt::format("stepcast execute --resume-check {}: {}\n", r.n, r.scenario_name);
  out += fmt::format("Runs       {} steps straight on {}; {} steps + save, then restore in new processes on {} + {} "
                     "steps{}\n",
                     2 * r.n, train_layout_text(r.layout), r.n, train_layout_text(r.resumed_layout), r.n,
                     r.omitted.empty() ? "" : " (saved without " + part_list(r.omitted) + ")");
  out += fmt::format("  {:>5}  {:>14}  {:>14}  {:>10}\n", "step", "straight", "resumed", "rel. diff");
  for (std::size_t i = 0; i < r.straight.size() && i < r.resumed.size(); ++i) {
    out += fmt::format("  {:>5}  {:>14.8f}  {:>14.8f}  {:>10.2e}\n", r.n + 1 + static_cast<int>(i), r.straight[i],
                       r.resumed[i], std::abs(r.straight[i] - r.resumed[i]) / std::max(1e-30, std::abs(r.straight[i])));
  }
  if (r.bitwise) {
    out += "Result     PASS: losses and final parameters are bitwise identical\n";
  } else if (r.first_diverging_step < 0 && r.pass) {
    out += fmt::format("Result     PASS within tolerance {:.0e}: max loss difference {:.2e}, max parameter difference "
                       "{:.2e} (a reshard changes the order of float sums)\n",
                       r.tolerance, r.max_loss_diff, r.max_param_diff);
  } else {
    out += fmt::format("Result     {}: the losses part at step {} (max relative difference {:.2e}); final "
                       "parameters differ by up to {:.2e}\n",
                       r.pass ? "PASS" : "DIVERGED", r.first_diverging_step, r.max_loss_diff, r.max_param_diff);
  }
  if (!r.omitted.empty()) {
    out += "Audit      stepcast's resume audit of the saved contents says:\n";
    std::stringstream ss(r.audit);
    std::string line;
    while (std::getline(ss, line)) out += "  " + line + "\n";
    out += fmt::format("           {}\n", r.audit_agrees ? "and the measured run agrees" : "but the measured run DISAGREES");
  }
  return out;
}

std::string resume_check_json(const ResumeCheckReport& r) {
  auto layout = [](const exec::TrainLayout& l) { return ojson{{"tp", l.tp}, {"dp", l.dp}, {"zero1", l.zero1}}; };
  ojson j = {{"scenario", r.scenario_name},
             {"n", r.n},
             {"layout", layout(r.layout)},
             {"resumed_layout", layout(r.resumed_layout)},
             {"omitted", part_list(r.omitted)},
             {"straight_losses", r.straight},
             {"resumed_losses", r.resumed},
             {"first_diverging_step", r.first_diverging_step},
             {"max_loss_diff", r.max_loss_diff},
             {"max_param_diff", r.max_param_diff},
             {"bitwise", r.bitwise},
             {"tolerance", r.tolerance},
             {"pass", r.pass},
             {"audit", r.audit},
             {"audit_agrees", r.audit_agrees}};
  return j.dump(2) + "\n";
}

}  // namespace stepcast::app

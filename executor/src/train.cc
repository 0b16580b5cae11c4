// The trainer (train.h): the optimizer step around the model of train_model.cc (gradient
// reduction over dp, global-norm clipping, AdamW, ZeRO-1), the state it exports and
// imports in global coordinates, and its configuration from a scenario.
#include "stepcast/executor/train.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <numbers>
#include <stdexcept>
#include <tuple>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "train_internal.h"

namespace stepcast::exec {

using train::Mat;
using train::Param;

// The trainer implements a plain GELU MLP with multi-head attention: the scenario's
// ffn_activation, num_kv_heads and sequence_parallel describe the simulated model and are
// not reproduced (docs/checkpoints.md "The trainer").
Result<TrainConfig> train_config(const Scenario& scenario) {
  const ModelSpec& m = scenario.model;
  const Plan& p = scenario.plan;
  std::vector<std::string> errors;
  auto layout_only = [&](const char* field, int value) {
    if (value != 1)
      errors.push_back(fmt::format("plan.{}: --train runs tp x dp layouts ({} = {})", field, field, value));
  };
  layout_only("pp", p.pp);
  layout_only("cp", p.cp);
  layout_only("ep", p.ep);
  if (p.zero > 1)
    errors.push_back(fmt::format("plan.zero: --train shards optimizer moments only (zero 0 or 1, got {})", p.zero));
  if (m.moe) errors.push_back("model.moe: --train runs dense models");
  if (m.mla) errors.push_back("model.mla: --train runs multi-head attention");
  if (m.num_layers < 1 || m.hidden_size < 1 || m.num_attention_heads < 1 || m.ffn_hidden_size < 1) {
    errors.push_back("model: --train needs num_layers, hidden_size, num_attention_heads and ffn_hidden_size");
  } else {
    if (m.hidden_size % m.num_attention_heads != 0) {
      errors.push_back(fmt::format("model.hidden_size: {} is not a multiple of num_attention_heads ({})", m.hidden_size,
                                   m.num_attention_heads));
    } else if (m.head_dim != 0 && m.head_dim * m.num_attention_heads != m.hidden_size) {
      errors.push_back(fmt::format("model.head_dim: --train needs hidden_size / num_attention_heads ({}), got {}",
                                   m.hidden_size / m.num_attention_heads, m.head_dim));
    }
    if (p.tp < 1 || m.num_attention_heads % p.tp != 0) {
      errors.push_back(
          fmt::format("plan.tp: {} does not divide model.num_attention_heads ({})", p.tp, m.num_attention_heads));
    }
    if (p.tp < 1 || m.ffn_hidden_size % p.tp != 0) {
      errors.push_back(fmt::format("plan.tp: {} does not divide model.ffn_hidden_size ({})", p.tp, m.ffn_hidden_size));
    }
  }
  if (m.vocab_size < 2)
    errors.push_back(fmt::format("model.vocab_size: --train needs at least 2 tokens, got {}", m.vocab_size));
  const std::int64_t seq = scenario.workload.seq_len > 0 ? scenario.workload.seq_len : m.train_seq_len;
  if (seq < 1) errors.push_back("workload.seq_len: --train needs a sequence length");
  const std::int64_t per_step = std::int64_t{std::max(p.microbatch, 1)} * std::max(p.dp, 1);
  if (p.microbatch < 1 || p.dp < 1 || p.global_batch < per_step || p.global_batch % per_step != 0) {
    errors.push_back(fmt::format("plan.global_batch: {} is not a positive multiple of microbatch x dp ({} x {})",
                                 p.global_batch, p.microbatch, p.dp));
  }
  if (!errors.empty()) {
    std::string msg = errors.front();
    for (std::size_t i = 1; i < errors.size(); ++i) msg += "\n" + errors[i];
    return Error{msg};
  }
  TrainConfig c;
  c.layers = m.num_layers;
  c.hidden = static_cast<int>(m.hidden_size);
  c.heads = m.num_attention_heads;
  c.ffn = static_cast<int>(m.ffn_hidden_size);
  c.vocab = static_cast<int>(m.vocab_size);
  c.seq = static_cast<int>(seq);
  c.microbatch = p.microbatch;
  c.accumulation = static_cast<int>(p.accumulation());
  c.seed = scenario.seed;
  c.layout = TrainLayout{p.tp, p.dp, p.zero >= 1};
  return c;
}

namespace {

void check_config(const TrainConfig& c) {
  auto fail = [](const std::string& why) { throw std::invalid_argument("trainer config: " + why); };
  if (c.layers < 1 || c.hidden < 1 || c.heads < 1 || c.ffn < 1 || c.seq < 1 || c.vocab < 2)
    fail("non-positive model size");
  if (c.hidden % c.heads != 0) fail("hidden is not a multiple of heads");
  if (c.layout.tp < 1 || c.layout.dp < 1) fail("tp and dp must be at least 1");
  if (c.heads % c.layout.tp != 0 || c.ffn % c.layout.tp != 0) fail("tp must divide heads and ffn");
  if (c.microbatch < 1 || c.accumulation < 1 || c.corpus_sequences < 1)
    fail("microbatch, accumulation and corpus must be positive");
  if (!(c.dropout >= 0 && c.dropout < 1)) fail("dropout must be in [0, 1)");
}

// lr at 1-based step t: linear warm-up to lr (t < warmup), cosine to min_lr at total_steps,
// min_lr after.
double learning_rate(const TrainConfig& c, std::int64_t t) {
  if (t < c.warmup_steps) return c.lr * static_cast<double>(t) / static_cast<double>(c.warmup_steps);
  if (t >= c.total_steps) return c.min_lr;
  const double progress = static_cast<double>(t - c.warmup_steps) / static_cast<double>(c.total_steps - c.warmup_steps);
  return c.min_lr + 0.5 * (c.lr - c.min_lr) * (1.0 + std::cos(std::numbers::pi * progress));
}

nlohmann::json model_json(const TrainConfig& c) {
  return {{"layers", c.layers}, {"hidden", c.hidden}, {"heads", c.heads},
          {"ffn", c.ffn},       {"vocab", c.vocab},   {"seq", c.seq}};
}

// ZeRO-1 row blocks: a tensor slice of R rows is cut into ceil(R / dp)-row blocks, dp rank
// d owning [d * B, min(R, (d + 1) * B)) (possibly empty: a 1 x n gain lives on dp rank 0).
// The all-gather pads every block to B rows.
std::int64_t block_rows(std::int64_t rows, int dp) { return (rows + dp - 1) / dp; }
std::int64_t block_start(std::int64_t rows, int dp, int d) { return std::min(rows, d * block_rows(rows, dp)); }
std::int64_t block_size(std::int64_t rows, int dp, int d) {
  return std::min(rows, block_start(rows, dp, d) + block_rows(rows, dp)) - block_start(rows, dp, d);
}

// Tensor kinds a rank exports per parameter: "w." (bf16 weights), "master." (fp32 master
// weights), "adam_m.", "adam_v.".
enum class Kind { kWeight, kMaster, kAdamM, kAdamV };

// Host-side serialisation of pieces for Communicator::gather (binary in a std::string).
void put_i64(std::string& out, std::int64_t v) { out.append(reinterpret_cast<const char*>(&v), sizeof v); }
std::int64_t get_i64(const std::string& in, std::size_t& at) {
  std::int64_t v = 0;
  std::memcpy(&v, in.data() + at, sizeof v);
  at += sizeof v;
  return v;
}

// A slice: name length, name, global rows and cols, row0, rows, col0, cols, floats.
void pack_slice(std::string& out, const Param& p) {
  put_i64(out, static_cast<std::int64_t>(p.name.size()));
  out += p.name;
  for (std::int64_t v :
       {p.global_rows, p.global_cols, p.row0, std::int64_t{p.w.rows()}, p.col0, std::int64_t{p.w.cols()}}) {
    put_i64(out, v);
  }
  out.append(reinterpret_cast<const char*>(p.w.data()), static_cast<std::size_t>(p.w.size()) * sizeof(float));
}

// Copies the slice at `at` into its global tensor in `full` (created on first sight).
void unpack_slice(const std::string& in, std::size_t& at, std::map<std::string, TensorPiece>& full) {
  const auto len = static_cast<std::size_t>(get_i64(in, at));
  const std::string name = in.substr(at, len);
  at += len;
  std::int64_t f[6];  // global rows, global cols, row0, rows, col0, cols
  for (std::int64_t& v : f) v = get_i64(in, at);
  TensorPiece& t = full[name];
  if (t.data.empty()) {
    t.name = name;
    t.global_rows = t.rows = f[0];
    t.global_cols = t.cols = f[1];
    t.data.assign(static_cast<std::size_t>(f[0] * f[1]), 0.0f);
  }
  const auto row_bytes = static_cast<std::size_t>(f[5]) * sizeof(float);
  for (std::int64_t r = 0; r < f[3]; ++r, at += row_bytes) {
    std::memcpy(t.data.data() + (f[2] + r) * f[1] + f[4], in.data() + at, row_bytes);
  }
}

}  // namespace

struct Trainer::Impl {
  struct Moments {
    std::int64_t r0 = 0, rows = 0;  // local rows of the tp slice this rank updates
    Mat m, v;
  };

  Impl(const TrainConfig& c, Communicator& comm, Device& device)
      : cfg((check_config(c), c)), comms(comm, device, c.layout), model(cfg, comms), sampler(cfg.corpus_sequences) {
    for (const Param& p : model.params()) {
      Moments mo;
      const std::int64_t rows = p.w.rows();
      const bool shard = cfg.layout.zero1 && comms.dp() > 1;
      mo.r0 = shard ? block_start(rows, comms.dp(), comms.dp_index()) : 0;
      mo.rows = shard ? block_size(rows, comms.dp(), comms.dp_index()) : rows;
      moments.push_back(std::move(mo));
    }
    reset_optimizer();
    scalars = fresh_scalars();
  }

  TrainScalars fresh_scalars() const {
    TrainScalars s;
    s.sampler_seed = train::hash_of(cfg.seed, train::hash_name("sampler"));
    s.rng_seed = train::hash_of(cfg.seed, train::hash_name("dropout"));
    return s;
  }
  void reset_optimizer() {
    for (std::size_t i = 0; i < moments.size(); ++i) {
      moments[i].m = Mat::Zero(moments[i].rows, model.params()[i].w.cols());
      moments[i].v = moments[i].m;
    }
  }

  StepResult step();
  double accumulate_gradients();               // returns the local loss sum
  double reduce_gradients(double local_loss);  // returns the global mean loss
  double gradient_norm();
  void adamw(double lr, float coef);
  void gather_zero1();

  bool zero1_sharded() const { return cfg.layout.zero1 && comms.dp() > 1; }
  // The rectangle of kind k of parameter i: exported (load = false) or wanted (load =
  // true; they differ for kMaster only: exported over the moments' rows, wanted whole).
  PieceRequest rect(std::size_t i, Kind k, bool load) const;
  // TensorPiece::replicas and replica of an exported piece.
  std::pair<int, int> replication(std::size_t i, Kind k) const;
  // What export_state writes and what wanted_pieces asks for, in order.
  std::vector<std::pair<std::size_t, Kind>> exported() const;
  std::vector<std::pair<std::size_t, Kind>> wanted() const;
  // The exported rectangle's data (contiguous: row-major rows of a slice).
  const float* exported_data(std::size_t i, Kind k) const;
  // Checks (apply = false) the wanted pieces of the parts in `contents`, or copies them
  // (apply = true): parameters from the master pieces when `optimizer`, else from the
  // weights when `weights`; moments when `optimizer`.
  void import_tensors(const RankState& state, bool weights, bool optimizer, bool apply);
  void check_config_json(const std::string& text) const;

  TrainConfig cfg;
  train::Comms comms;
  train::Model model;
  train::Sampler sampler;
  std::vector<Moments> moments;  // per model.params()
  TrainScalars scalars;
  std::vector<float> flat;  // gradients + loss, reduced over dp
  std::vector<float> gather_send, gather_recv;
};

double Trainer::Impl::accumulate_gradients() {
  const std::int64_t per_rank = std::int64_t{cfg.microbatch} * cfg.accumulation;
  const std::vector<std::int64_t> batch =
      sampler.next(scalars.sampler_seed, scalars.sampler_epoch, scalars.sampler_position, per_rank * comms.dp());
  const train::DropoutKey key{static_cast<float>(cfg.dropout), scalars.rng_seed, scalars.rng_counter};
  model.zero_grad();
  double local = 0;
  for (int k = 0; k < cfg.accumulation; ++k) {
    train::Microbatch mb;
    for (int i = 0; i < cfg.microbatch; ++i) {
      // Global batch position j goes to dp rank j / (microbatch x accumulation).
      const std::int64_t j = comms.dp_index() * per_rank + std::int64_t{k} * cfg.microbatch + i;
      mb.tokens.push_back(train::corpus_sequence(cfg.seed, cfg.vocab, cfg.seq, batch[static_cast<std::size_t>(j)]));
      mb.ids.push_back(j);
    }
    local += model.forward_backward(mb, key);
  }
  return local;
}

double Trainer::Impl::reduce_gradients(double local_loss) {
  std::size_t total = 1;
  for (const Param& p : model.params()) total += static_cast<std::size_t>(p.g.size());
  flat.resize(total);
  std::size_t at = 0;
  for (const Param& p : model.params()) {
    std::copy_n(p.g.data(), p.g.size(), flat.data() + at);
    at += static_cast<std::size_t>(p.g.size());
  }
  flat[at] = static_cast<float>(local_loss);
  comms.all_reduce_dp(flat.data(), flat.size());
  // Gradients of the summed loss -> of the mean over the global batch's tokens.
  const double tokens = static_cast<double>(cfg.microbatch) * cfg.accumulation * comms.dp() * cfg.seq;
  const float inv = static_cast<float>(1.0 / tokens);
  at = 0;
  for (Param& p : model.params()) {
    p.g = Eigen::Map<const Mat>(flat.data() + at, p.g.rows(), p.g.cols()) * inv;
    at += static_cast<std::size_t>(p.g.size());
  }
  return static_cast<double>(flat[at]) / tokens;
}

// Each element counted once: tp-sharded slices summed over tp, replicated tensors taken
// from this rank (identical on every tp rank).
double Trainer::Impl::gradient_norm() {
  double sharded = 0, replicated = 0;
  for (const Param& p : model.params()) (p.sharded ? sharded : replicated) += p.g.cast<double>().squaredNorm();
  float sum = static_cast<float>(sharded);
  comms.all_reduce_tp(&sum, 1);
  return std::sqrt(static_cast<double>(sum) + replicated);
}

void Trainer::Impl::adamw(double lr, float coef) {
  const auto t = static_cast<double>(scalars.step + 1);
  const auto b1 = static_cast<float>(cfg.beta1), b2 = static_cast<float>(cfg.beta2);
  const auto c1 = static_cast<float>(1.0 / (1.0 - std::pow(cfg.beta1, t)));
  const auto c2 = static_cast<float>(1.0 / (1.0 - std::pow(cfg.beta2, t)));
  const auto lr_f = static_cast<float>(lr), eps = static_cast<float>(cfg.eps);
  const auto decay = static_cast<float>(1.0 - lr * cfg.weight_decay);
  for (std::size_t i = 0; i < moments.size(); ++i) {
    Moments& mo = moments[i];
    Param& p = model.params()[i];
    if (mo.rows == 0) continue;
    auto w = p.w.middleRows(mo.r0, mo.rows).array();
    const auto g = p.g.middleRows(mo.r0, mo.rows).array() * coef;
    mo.m.array() = b1 * mo.m.array() + (1.0f - b1) * g;
    mo.v.array() = b2 * mo.v.array() + (1.0f - b2) * g.square();
    if (p.decay) w *= decay;  // decoupled weight decay
    w -= lr_f * (mo.m.array() * c1) / ((mo.v.array() * c2).sqrt() + eps);
  }
}

// Every dp rank updated its row block of every tensor; one all-gather rebuilds the slices.
void Trainer::Impl::gather_zero1() {
  const int dp = comms.dp();
  std::size_t chunk = 0;
  for (const Param& p : model.params()) chunk += static_cast<std::size_t>(block_rows(p.w.rows(), dp) * p.w.cols());
  gather_send.assign(chunk, 0.0f);
  gather_recv.resize(chunk * static_cast<std::size_t>(dp));
  std::size_t at = 0;
  for (std::size_t i = 0; i < moments.size(); ++i) {
    const Mat& w = model.params()[i].w;
    if (moments[i].rows > 0)
      std::copy_n(w.row(moments[i].r0).data(), moments[i].rows * w.cols(), gather_send.data() + at);
    at += static_cast<std::size_t>(block_rows(w.rows(), dp) * w.cols());
  }
  comms.all_gather_dp(gather_send.data(), chunk, gather_recv.data());
  for (int d = 0; d < dp; ++d) {
    at = static_cast<std::size_t>(d) * chunk;
    for (Param& p : model.params()) {
      const std::int64_t rows = p.w.rows(), r0 = block_start(rows, dp, d), n = block_size(rows, dp, d);
      if (n > 0) std::copy_n(gather_recv.data() + at, n * p.w.cols(), p.w.row(r0).data());
      at += static_cast<std::size_t>(block_rows(rows, dp) * p.w.cols());
    }
  }
}

// The grad scaler's loss_scale is carried (1.0), not applied: f32 gradients do not overflow.
StepResult Trainer::Impl::step() {
  const auto start = std::chrono::steady_clock::now();
  StepResult r;
  r.loss = reduce_gradients(accumulate_gradients());
  r.grad_norm = gradient_norm();
  const float coef =
      cfg.clip > 0 && r.grad_norm > cfg.clip ? static_cast<float>(cfg.clip / (r.grad_norm + 1e-6)) : 1.0f;
  r.lr = learning_rate(cfg, scalars.scheduler_step + 1);
  adamw(r.lr, coef);
  if (cfg.layout.zero1 && comms.dp() > 1) gather_zero1();
  ++scalars.step;
  ++scalars.scheduler_step;
  ++scalars.rng_counter;
  r.step = scalars.step;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

PieceRequest Trainer::Impl::rect(std::size_t i, Kind k, bool load) const {
  const Param& p = model.params()[i];
  PieceRequest r;
  r.col0 = p.col0;
  r.cols = p.w.cols();
  const std::string base = p.name.substr(2);  // without "w."
  if (k == Kind::kWeight || (k == Kind::kMaster && load)) {
    r.name = k == Kind::kWeight ? p.name : "master." + base;
    r.row0 = p.row0;
    r.rows = p.w.rows();
  } else {
    r.name = (k == Kind::kMaster ? "master." : k == Kind::kAdamM ? "adam_m." : "adam_v.") + base;
    r.row0 = p.row0 + moments[i].r0;
    r.rows = moments[i].rows;
  }
  return r;
}

// Who else holds the same rectangle with the same values (TensorPiece::replicas):
//   weights: a tp slice is held by the dp ranks of its tp index; a tensor replicated over
//     tp (embedding, head, norm gains) by all tp x dp ranks.
//   master, moments: without ZeRO-1 as the weights; with it, a tp slice's row block is
//     this rank's alone, and a replicated tensor's block is held by the tp ranks of this
//     dp index.
std::pair<int, int> Trainer::Impl::replication(std::size_t i, Kind k) const {
  const bool sharded = model.params()[i].sharded;
  const int tp = comms.tp(), dp = comms.dp(), t = comms.tp_index(), d = comms.dp_index();
  if (k != Kind::kWeight && zero1_sharded()) return sharded ? std::pair(1, 0) : std::pair(tp, t);
  return sharded ? std::pair(dp, d) : std::pair(tp * dp, d * tp + t);
}

// Every weight slice, then master weights and moments of every non-empty ZeRO-1 block.
std::vector<std::pair<std::size_t, Kind>> Trainer::Impl::exported() const {
  std::vector<std::pair<std::size_t, Kind>> out;
  for (std::size_t i = 0; i < moments.size(); ++i) out.emplace_back(i, Kind::kWeight);
  for (std::size_t i = 0; i < moments.size(); ++i) {
    if (moments[i].rows == 0) continue;
    out.emplace_back(i, Kind::kMaster);
    out.emplace_back(i, Kind::kAdamM);
    out.emplace_back(i, Kind::kAdamV);
  }
  return out;
}

// Every weight slice, every master slice whole (ZeRO-1 or not: the loader assembles it
// from whichever shards hold it, so import_state needs no all-gather), then the moments
// of every non-empty ZeRO-1 block.
std::vector<std::pair<std::size_t, Kind>> Trainer::Impl::wanted() const {
  std::vector<std::pair<std::size_t, Kind>> out;
  for (std::size_t i = 0; i < moments.size(); ++i) out.emplace_back(i, Kind::kWeight);
  for (std::size_t i = 0; i < moments.size(); ++i) out.emplace_back(i, Kind::kMaster);
  for (std::size_t i = 0; i < moments.size(); ++i) {
    if (moments[i].rows == 0) continue;
    out.emplace_back(i, Kind::kAdamM);
    out.emplace_back(i, Kind::kAdamV);
  }
  return out;
}

const float* Trainer::Impl::exported_data(std::size_t i, Kind k) const {
  const Mat& w = model.params()[i].w;
  switch (k) {
    case Kind::kWeight: return w.data();
    case Kind::kMaster: return w.data() + moments[i].r0 * w.cols();
    case Kind::kAdamM: return moments[i].m.data();
    case Kind::kAdamV: return moments[i].v.data();
  }
  return nullptr;
}

void Trainer::Impl::import_tensors(const RankState& state, bool weights, bool optimizer, bool apply) {
  std::map<std::string, const TensorPiece*> by_name;
  for (const TensorPiece& p : state.pieces) by_name[p.name] = &p;
  for (const auto& [i, kind] : wanted()) {
    if (kind == Kind::kWeight ? !weights : !optimizer) continue;
    // With the optimizer part the parameters come from the exact master weights.
    if (apply && kind == Kind::kWeight && optimizer) continue;
    const PieceRequest want = rect(i, kind, true);
    const Param& p = model.params()[i];
    const auto it = by_name.find(want.name);
    if (it == by_name.end()) throw std::invalid_argument("import_state: missing piece " + want.name);
    const TensorPiece& got = *it->second;
    if (got.global_rows != p.global_rows || got.global_cols != p.global_cols || got.row0 != want.row0 ||
        got.rows != want.rows || got.col0 != want.col0 || got.cols != want.cols ||
        got.data.size() != static_cast<std::size_t>(want.rows * want.cols)) {
      throw std::invalid_argument(
          fmt::format("import_state: piece {} is {}x{} rows [{}, +{}) cols [{}, +{}) ({} floats), wanted {}x{} rows "
                      "[{}, +{}) cols [{}, +{})",
                      want.name, got.global_rows, got.global_cols, got.row0, got.rows, got.col0, got.cols,
                      got.data.size(), p.global_rows, p.global_cols, want.row0, want.rows, want.col0, want.cols));
    }
    if (!apply) continue;
    const Eigen::Map<const Mat> in(got.data.data(), want.rows, want.cols);
    if (kind == Kind::kAdamM) {
      moments[i].m = in;
    } else if (kind == Kind::kAdamV) {
      moments[i].v = in;
    } else {
      model.params()[i].w = in;
    }
  }
}

void Trainer::Impl::check_config_json(const std::string& text) const {
  if (text.empty()) return;
  const nlohmann::json saved = nlohmann::json::parse(text, nullptr, false);
  if (saved.is_discarded() || !saved.contains("model"))
    throw std::invalid_argument("import_state: config_json is not a trainer config");
  const nlohmann::json mine = model_json(cfg);
  for (const auto& [key, value] : mine.items()) {
    if (saved["model"].value(key, nlohmann::json()) != value) {
      throw std::invalid_argument(fmt::format("import_state: the checkpoint's model.{} is {}, this run's is {}", key,
                                              saved["model"].value(key, nlohmann::json()).dump(), value.dump()));
    }
  }
}

Trainer::Trainer(const TrainConfig& config, Communicator& comm, Device& device)
    : impl_(std::make_unique<Impl>(config, comm, device)) {}
Trainer::~Trainer() = default;

StepResult Trainer::step() { return impl_->step(); }
std::int64_t Trainer::steps_done() const { return impl_->scalars.step; }

RankState Trainer::export_state() const {
  const Impl& im = *impl_;
  RankState st;
  st.rank = im.comms.dp_index() * im.comms.tp() + im.comms.tp_index();
  st.layout = im.cfg.layout;
  st.scalars = im.scalars;
  for (const auto& [i, kind] : im.exported()) {
    const PieceRequest r = im.rect(i, kind, false);
    const float* data = im.exported_data(i, kind);
    TensorPiece p;
    p.name = r.name;
    p.global_rows = im.model.params()[i].global_rows;
    p.global_cols = im.model.params()[i].global_cols;
    p.row0 = r.row0;
    p.rows = r.rows;
    p.col0 = r.col0;
    p.cols = r.cols;
    p.data.assign(data, data + r.rows * r.cols);
    p.bf16 = kind == Kind::kWeight;
    std::tie(p.replicas, p.replica) = im.replication(i, kind);
    st.pieces.push_back(std::move(p));
  }
  st.config_json =
      nlohmann::json{{"model", model_json(im.cfg)},
                     {"seed", im.cfg.seed},
                     {"layout", {{"tp", im.cfg.layout.tp}, {"dp", im.cfg.layout.dp}, {"zero1", im.cfg.layout.zero1}}}}
          .dump();
  return st;
}

std::vector<PieceRequest> Trainer::wanted_pieces() const {
  std::vector<PieceRequest> out;
  for (const auto& [i, kind] : impl_->wanted()) out.push_back(impl_->rect(i, kind, true));
  return out;
}

void Trainer::import_state(const RankState& state, const std::vector<StatePart>& contents) {
  Impl& im = *impl_;
  auto has = [&](StatePart p) { return std::find(contents.begin(), contents.end(), p) != contents.end(); };
  if (has(StatePart::kConfig)) im.check_config_json(state.config_json);
  const bool weights = has(StatePart::kModel), optimizer = has(StatePart::kOptimizer);
  im.import_tensors(state, weights, optimizer, false);  // every wanted piece, before any change
  // Parameters: from the fp32 master pieces when the optimizer part is there (exact, with
  // or without the model part); else from the "w." pieces, which the store keeps as bf16:
  // a model-only resume continues from bf16-rounded parameters (as a real bf16 checkpoint
  // without its optimizer state would), with zero moments; else the initial weights.
  if (!weights && !optimizer) im.model.init_weights();
  if (!optimizer) im.reset_optimizer();
  im.import_tensors(state, weights, optimizer, true);
  const TrainScalars fresh = im.fresh_scalars();
  const TrainScalars& in = state.scalars;
  TrainScalars& s = im.scalars;
  s.step = has(StatePart::kStep) ? in.step : fresh.step;
  s.scheduler_step = has(StatePart::kLrScheduler) ? in.scheduler_step : fresh.scheduler_step;
  const bool sampler = has(StatePart::kDataSampler);
  s.sampler_seed = sampler ? in.sampler_seed : fresh.sampler_seed;
  s.sampler_epoch = sampler ? in.sampler_epoch : fresh.sampler_epoch;
  s.sampler_position = sampler ? in.sampler_position : fresh.sampler_position;
  s.rng_seed = has(StatePart::kRng) ? in.rng_seed : fresh.rng_seed;
  s.rng_counter = has(StatePart::kRng) ? in.rng_counter : fresh.rng_counter;
  s.loss_scale = has(StatePart::kGradScaler) ? in.loss_scale : fresh.loss_scale;
  s.loss_scale_growth = has(StatePart::kGradScaler) ? in.loss_scale_growth : fresh.loss_scale_growth;
}

std::vector<TensorPiece> Trainer::gather_parameters() {
  Impl& im = *impl_;
  // Each element sent once: dp rank 0's slices, replicated tensors from tp rank 0 only.
  std::string mine;
  if (im.comms.dp_index() == 0) {
    for (const Param& p : im.model.params()) {
      if (p.sharded || im.comms.tp_index() == 0) pack_slice(mine, p);
    }
  }
  std::map<std::string, TensorPiece> full;
  for (const std::string& in : im.comms.comm().gather(mine)) {
    for (std::size_t at = 0; at < in.size();) unpack_slice(in, at, full);
  }
  std::vector<TensorPiece> out;
  for (auto& [name, t] : full) out.push_back(std::move(t));
  return out;
}

std::int64_t Trainer::parameter_count() const {
  std::int64_t n = 0;
  for (const Param& p : impl_->model.params()) n += p.global_rows * p.global_cols;
  return n;
}

}  // namespace stepcast::exec

// Internals of the trainer (train.h), shared by train*.cc and the unit tests: counter-based
// hashing, the synthetic corpus and its sampler, the tp / dp collectives, and the model
// (parameters, forward and backward of one microbatch).
#pragma once

#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <Eigen/Core>

#include "stepcast/executor/train.h"

namespace stepcast::exec::train {

// Row-major, so that a matrix's data is a TensorPiece's data and a block of rows is
// contiguous (ZeRO-1 shards by rows).
using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// ---- Counter-based randomness: every random number is a pure function of its coordinates.

inline std::uint64_t mix64(std::uint64_t x) {  // splitmix64's finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
inline std::uint64_t hash_of(std::uint64_t a) { return mix64(a); }
template <typename... Rest>
std::uint64_t hash_of(std::uint64_t a, std::uint64_t b, Rest... rest) {
  return hash_of(mix64(a) ^ b, static_cast<std::uint64_t>(rest)...);
}
std::uint64_t hash_name(std::string_view s);  // FNV-1a
// [0, 1) from the top 24 bits (exact in a float).
inline float unit_float(std::uint64_t h) { return static_cast<float>(h >> 40) * 0x1p-24f; }

// ---- Data.

// Sequence `index` of the synthetic corpus: seq + 1 tokens of a sparse Markov chain (each
// token has four successors with probabilities 1/2, 1/4, 1/8, 1/8), seeded by `seed`.
std::vector<int> corpus_sequence(std::uint64_t seed, int vocab, int seq, std::int64_t index);

// The shuffling sampler: epoch e visits the corpus in a Fisher-Yates permutation seeded by
// hash(seed, e). State = (epoch, position); the permutation is cached per epoch.
class Sampler {
 public:
  explicit Sampler(std::int64_t corpus) : corpus_(corpus) {}
  // The next `n` corpus indices; advances the state, rolling over to the next epoch when
  // the current one is exhausted.
  std::vector<std::int64_t> next(std::uint64_t seed, std::int64_t& epoch, std::int64_t& position, std::int64_t n);

 private:
  const std::vector<std::int64_t>& permutation(std::uint64_t seed, std::int64_t epoch);
  std::int64_t corpus_;
  std::uint64_t cached_seed_ = 0;
  std::int64_t cached_epoch_ = -1;
  std::vector<std::int64_t> perm_;
};

// ---- Collectives over this rank's tp and dp groups (world rank = dp_index * tp + tp_index).

class Comms {
 public:
  // Collective: creates the tp group (color dp_index), then the dp group (color tp_index).
  Comms(Communicator& comm, Device& device, const TrainLayout& layout);
  ~Comms();
  Comms(const Comms&) = delete;
  Comms& operator=(const Comms&) = delete;

  int tp_index() const { return tp_.index; }
  int dp_index() const { return dp_.index; }
  int tp() const { return tp_.size(); }
  int dp() const { return dp_.size(); }
  Communicator& comm() { return comm_; }

  // In place, sums. No-ops on groups of one.
  void all_reduce_tp(float* data, std::size_t n) { all_reduce(tp_, Stream::kTp, data, n); }
  void all_reduce_dp(float* data, std::size_t n) { all_reduce(dp_, Stream::kDp, data, n); }
  // `all` receives dp blocks of n floats, dp rank d's at d * n.
  void all_gather_dp(const float* mine, std::size_t n, float* all);

 private:
  struct Pair {
    Buffer send, recv;
  };
  void all_reduce(const CommGroup& g, Stream s, float* data, std::size_t n);
  Pair& buffers(std::size_t send_count, std::size_t recv_count);  // allocated once per size

  Communicator& comm_;
  Device& device_;
  CommGroup tp_, dp_;
  std::map<std::pair<std::size_t, std::size_t>, Pair> pool_;
};

// ---- The model.

struct Param {
  std::string name;  // "w.layer0.attn.qkv"
  std::int64_t global_rows = 0, global_cols = 0;
  std::int64_t row0 = 0, col0 = 0;  // this rank's tp slice in global coordinates
  bool sharded = false;             // split over tp (else replicated on every tp rank)
  bool decay = true;                // weight decay (not on norm gains)
  Mat w, g;                         // the slice and its gradient
};

// Dropout of one optimizer step: an element is dropped when
// unit(hash(seed, counter, layer, sequence, token, global column)) < p.
struct DropoutKey {
  float p = 0;
  std::uint64_t seed = 0, counter = 0;
};

// One microbatch's input: sequences of seq + 1 tokens and their positions in the global
// batch (the dropout key's sequence index: the same in every layout).
struct Microbatch {
  std::vector<std::vector<int>> tokens;
  std::vector<std::int64_t> ids;
};

// Attention of this rank's heads: `seqs` sequences of s_len rows, `heads` heads of hd
// columns each.
struct AttnShape {
  Eigen::Index seqs = 0, s_len = 0, heads = 0, hd = 0;
  float scale() const { return 1.0f / std::sqrt(static_cast<float>(hd)); }
};

class Model {
 public:
  // This rank's tp slice of every parameter, initialised from (seed, name, row, col).
  Model(const TrainConfig& config, Comms& comms);
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  std::vector<Param>& params() { return params_; }
  const std::vector<Param>& params() const { return params_; }
  // Re-initialises the weights (not the gradients) as at construction.
  void init_weights();
  // The value of global element (row, col) of `p` at initialisation.
  float init_value(const Param& p, std::int64_t row, std::int64_t col) const;

  // Forward and backward of one microbatch: returns the summed cross-entropy of its
  // tokens and adds the gradient of that sum to every Param::g. Collective over tp.
  double forward_backward(const Microbatch& mb, const DropoutKey& dropout);
  // Forward only: the summed cross-entropy (dropout as in forward_backward).
  double loss(const Microbatch& mb, const DropoutKey& dropout);
  void zero_grad();

 private:
  struct Cache;
  double forward(const Microbatch& mb, const DropoutKey& dropout);
  void layer_forward(int layer, Mat& x, const Microbatch& mb, const DropoutKey& dropout);
  void backward(const Microbatch& mb);
  void layer_backward(int layer, Mat& dx, const Microbatch& mb);
  AttnShape attn_shape(const Microbatch& mb) const;

  TrainConfig cfg_;
  Comms& comms_;
  std::vector<Param> params_;
  std::unique_ptr<Cache> cache_;
};

}  // namespace stepcast::exec::train

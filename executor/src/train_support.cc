// The trainer's plumbing (train_internal.h): hashing, the synthetic corpus, the sampler and
// the tp / dp collectives.
#include <algorithm>
#include <numeric>
#include <span>
#include <stdexcept>

#include <fmt/format.h>

#include "train_internal.h"

namespace stepcast::exec::train {

std::uint64_t hash_name(std::string_view s) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (const char ch : s) {
    h ^= static_cast<unsigned char>(ch);
    h *= 0x100000001b3ull;
  }
  return h;
}

std::vector<int> corpus_sequence(std::uint64_t seed, int vocab, int seq, std::int64_t index) {
  static const std::uint64_t kStart = hash_name("corpus.start"), kSucc = hash_name("corpus.successor"),
                             kPick = hash_name("corpus.pick");
  const auto v = static_cast<std::uint64_t>(vocab);
  const auto i = static_cast<std::uint64_t>(index);
  std::vector<int> out(static_cast<std::size_t>(seq) + 1);
  out[0] = static_cast<int>(hash_of(seed, kStart, i) % v);
  for (std::size_t t = 1; t < out.size(); ++t) {
    // Successor k of the previous token with probability 1/2, 1/4, 1/8, 1/8.
    const std::uint64_t u = hash_of(seed, kPick, i, t) & 7u;
    const std::uint64_t k = u < 4 ? 0 : u < 6 ? 1 : u - 4;
    out[t] = static_cast<int>(hash_of(seed, kSucc, static_cast<std::uint64_t>(out[t - 1]), k) % v);
  }
  return out;
}

const std::vector<std::int64_t>& Sampler::permutation(std::uint64_t seed, std::int64_t epoch) {
  if (seed == cached_seed_ && epoch == cached_epoch_) return perm_;
  perm_.resize(static_cast<std::size_t>(corpus_));
  std::iota(perm_.begin(), perm_.end(), std::int64_t{0});
  const std::uint64_t key = hash_of(seed, static_cast<std::uint64_t>(epoch));
  for (std::size_t i = perm_.size(); i-- > 1;) {
    const std::size_t j = hash_of(key, i) % (i + 1);
    std::swap(perm_[i], perm_[j]);
  }
  cached_seed_ = seed;
  cached_epoch_ = epoch;
  return perm_;
}

std::vector<std::int64_t> Sampler::next(std::uint64_t seed, std::int64_t& epoch, std::int64_t& position,
                                        std::int64_t n) {
  std::vector<std::int64_t> out;
  out.reserve(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    if (position >= corpus_) {  // a restored state may sit at the end of an epoch
      ++epoch;
      position = 0;
    }
    out.push_back(permutation(seed, epoch)[static_cast<std::size_t>(position)]);
    if (++position == corpus_) {
      ++epoch;
      position = 0;
    }
  }
  return out;
}

Comms::Comms(Communicator& comm, Device& device, const TrainLayout& layout) : comm_(comm), device_(device) {
  if (comm.world() != layout.world()) {
    throw std::invalid_argument(fmt::format("the trainer's layout tp {} x dp {} needs {} ranks but {} were launched",
                                            layout.tp, layout.dp, layout.world(), comm.world()));
  }
  const int rank = comm.rank();
  tp_ = comm.create_group(rank / layout.tp);  // color dp_index
  dp_ = comm.create_group(rank % layout.tp);  // color tp_index
}

Comms::~Comms() {
  for (auto& [sizes, pair] : pool_) {
    device_.release(pair.send);
    device_.release(pair.recv);
  }
}

Comms::Pair& Comms::buffers(std::size_t send_count, std::size_t recv_count) {
  auto [it, added] = pool_.try_emplace({send_count, recv_count});
  if (added) {
    it->second.send = device_.alloc(send_count);
    it->second.recv = device_.alloc(recv_count);
  }
  return it->second;
}

void Comms::all_reduce(const CommGroup& g, Stream s, float* data, std::size_t n) {
  if (g.size() == 1 || n == 0) return;
  Pair& b = buffers(n, n);
  device_.upload(b.send, std::span<const float>(data, n));
  comm_.collective(device_, s, CollKind::kAllReduce, g, b.send, b.recv)->wait();
  device_.download(b.recv, std::span<float>(data, n));
}

void Comms::all_gather_dp(const float* mine, std::size_t n, float* all) {
  if (dp_.size() == 1 || n == 0) {
    std::copy_n(mine, n, all);
    return;
  }
  const std::size_t total = n * static_cast<std::size_t>(dp_.size());
  Pair& b = buffers(n, total);
  device_.upload(b.send, std::span<const float>(mine, n));
  comm_.collective(device_, Stream::kDp, CollKind::kAllGather, dp_, b.send, b.recv)->wait();
  device_.download(b.recv, std::span<float>(all, total));
}

}  // namespace stepcast::exec::train

// The cuda_nccl backend's Communicator: one ncclComm per CommGroup, p2p on the device's
// send/recv streams, control plane through a host communicator or the world ncclComm.
#include <fmt/format.h>
#include <nccl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <utility>

#include "cuda_check.h"
#include "cuda_device.h"
#include "cuda_backend.h"

namespace stepcast::exec {
namespace cuda_detail {
namespace {

constexpr double kIdFileTimeoutS = 600;
constexpr const char* kIdFileMagic = "stepcast-nccl-id-v1";

std::string hex(const unsigned char* p, std::size_t n) {
  std::string s;
  s.reserve(2 * n);
  for (std::size_t i = 0; i < n; ++i) s += fmt::format("{:02x}", p[i]);
  return s;
}

bool unhex(const std::string& s, unsigned char* p, std::size_t n) {
  if (s.size() != 2 * n) return false;
  for (std::size_t i = 0; i < n; ++i) {
    unsigned v = 0;
    if (std::sscanf(s.c_str() + 2 * i, "%2x", &v) != 1) return false;
    p[i] = static_cast<unsigned char>(v);
  }
  return true;
}

// Rank 0's bytes to every rank with only max_all (Communicator has no broadcast): six bytes
// per call as an integer below 2^48, exact in a double; the other ranks contribute -1.
void broadcast_with_max_all(Communicator& host, bool root, unsigned char* p, std::size_t n) {
  for (std::size_t off = 0; off < n; off += 6) {
    std::uint64_t v = 0;
    const std::size_t len = std::min<std::size_t>(6, n - off);
    for (std::size_t j = 0; j < len; ++j) v |= static_cast<std::uint64_t>(p[off + j]) << (8 * j);
    const double got = host.max_all(root ? static_cast<double>(v) : -1.0);
    if (got < 0) throw std::runtime_error("nccl communicator: rank 0 did not share the ncclUniqueId through max_all");
    v = static_cast<std::uint64_t>(got);
    for (std::size_t j = 0; j < len; ++j) p[off + j] = static_cast<unsigned char>(v >> (8 * j));
  }
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(CudaDevice& dev, Communicator* host, int rank, int world, const CudaOptions& o)
      : dev_(dev), host_(host), rank_(rank), world_(world), ctx_(dev.context()) {
    ctx_->rank = rank;
    try {
      SC_CHECK(ctx(), cudaSetDevice(dev_.gpu()));
      SC_CHECK(ctx(), cudaStreamCreateWithFlags(&ctl_stream_, cudaStreamNonBlocking));
      ncclUniqueId id{};
      if (rank_ == 0) SC_CHECK(ctx(), ncclGetUniqueId(&id));
      const std::string id_path = o.id_file.empty() ? std::string() : o.id_file + ".world";
      auto* bytes = reinterpret_cast<unsigned char*>(&id);
      if (world_ > 1) {
        if (host_) {
          broadcast_with_max_all(*host_, rank_ == 0, bytes, sizeof(id));
        } else if (rank_ == 0) {
          write_id_file(id_path, bytes, sizeof(id));
        } else {
          read_id_file(id_path, bytes, sizeof(id));
        }
      }
      SC_CHECK(ctx(), ncclCommInitRank(&world_comm_, world_, id, rank_));
      // Every rank has joined, so every rank has read the file.
      if (world_ > 1 && !host_ && rank_ == 0) (void)std::remove(id_path.c_str());
      // Sends to higher ranks and to lower ranks on separate communicators: NCCL orders the
      // operations of one communicator, and forward and backward pipeline traffic must not
      // queue behind each other.
      SC_CHECK(ctx(), ncclCommSplit(world_comm_, 0, rank_, &up_, nullptr));
      SC_CHECK(ctx(), ncclCommSplit(world_comm_, 0, rank_, &down_, nullptr));
    } catch (...) {
      cleanup(/*abort=*/true);
      throw;
    }
  }

  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;
  ~NcclCommunicator() override { cleanup(std::uncaught_exceptions() > 0); }

  int rank() const override { return rank_; }
  int world() const override { return world_; }

  std::string describe() const override {
    int v = 0;
    (void)ncclGetVersion(&v);
    return fmt::format("NCCL {}.{}.{}", v / 10000, v % 10000 / 100, v % 100);
  }

  CommGroup create_group(int color) override {
    require_no_group("create_group");
    if (color < 0) throw std::invalid_argument(fmt::format("create_group: color must be >= 0, got {}", color));
    const std::vector<int> colors = allgather_int(color);
    CommGroup g;
    for (int r = 0; r < world_; ++r) {
      if (colors[static_cast<std::size_t>(r)] != color) continue;
      if (r == rank_) g.index = static_cast<int>(g.members.size());
      g.members.push_back(r);
    }
    ncclComm_t c = nullptr;
    SC_CHECK(ctx(), ncclCommSplit(world_comm_, color, rank_, &c, nullptr));
    groups_.push_back({c, g.members});
    g.id = static_cast<int>(groups_.size()) - 1;
    return g;
  }

  EventPtr collective(Device& device, Stream s, CollKind kind, const CommGroup& g, const Buffer& send,
                      const Buffer& recv) override {
    check_device(device);
    const ncclComm_t comm = group_comm(g);
    const auto n = static_cast<std::size_t>(g.size());
    check_bf16(send, "send");
    check_bf16(recv, "recv");
    auto bad = [&](const char* rule) {
      return std::invalid_argument(fmt::format("{} over {} ranks: {} (send.count {}, recv.count {})", to_string(kind), n,
                                               rule, send.count, recv.count));
    };
    const cudaStream_t st = dev_.stream(s);
    dev_.join_p2p(s);
    switch (kind) {
      case CollKind::kAllReduce:
        if (send.count != recv.count) throw bad("needs send.count == recv.count");
        SC_CHECK(ctx(), ncclAllReduce(send.data, recv.data, send.count, ncclBfloat16, ncclSum, comm, st));
        break;
      case CollKind::kAllGather:
        if (recv.count != n * send.count) throw bad("needs recv.count == n * send.count");
        SC_CHECK(ctx(), ncclAllGather(send.data, recv.data, send.count, ncclBfloat16, comm, st));
        break;
      case CollKind::kReduceScatter:
        if (send.count != n * recv.count) throw bad("needs send.count == n * recv.count");
        SC_CHECK(ctx(), ncclReduceScatter(send.data, recv.data, recv.count, ncclBfloat16, ncclSum, comm, st));
        break;
      case CollKind::kAllToAll: {
        if (send.count != recv.count || send.count % n != 0) throw bad("needs send.count == recv.count, a multiple of n");
        const std::size_t block = send.count / n;
        const auto* in = static_cast<const unsigned char*>(send.data);
        auto* out = static_cast<unsigned char*>(recv.data);
        SC_CHECK(ctx(), ncclGroupStart());
        for (std::size_t j = 0; j < n; ++j) {
          const int peer = static_cast<int>(j);
          const ncclResult_t a = ncclSend(in + j * block * 2, block, ncclBfloat16, peer, comm, st);
          const ncclResult_t b = a == ncclSuccess ? ncclRecv(out + j * block * 2, block, ncclBfloat16, peer, comm, st) : a;
          if (b != ncclSuccess) {
            (void)ncclGroupEnd();
            SC_CHECK(ctx(), b);
          }
        }
        SC_CHECK(ctx(), ncclGroupEnd());
        break;
      }
      case CollKind::kBroadcast:
        if (send.count != recv.count) throw bad("needs send.count == recv.count");
        SC_CHECK(ctx(), ncclBroadcast(send.data, recv.data, send.count, ncclBfloat16, 0, comm, st));
        break;
      case CollKind::kSendRecv:
        throw std::invalid_argument("collective(kSendRecv): use Communicator::send and recv");
    }
    return finish(st);
  }

  EventPtr send(Device& device, Stream s, int peer, std::uint32_t /*tag: NCCL matches in order*/,
                const Buffer& b) override {
    check_device(device);
    check_peer(peer);
    check_bf16(b, "send");
    const cudaStream_t st = dev_.send_stream();
    dev_.stream_after(st, s);
    SC_CHECK(ctx(), ncclSend(b.data, b.count, ncclBfloat16, peer, peer >= rank_ ? up_ : down_, st));
    auto e = finish(st);
    dev_.add_pending_p2p(s, e);
    return e;
  }

  EventPtr recv(Device& device, Stream s, int peer, std::uint32_t /*tag*/, const Buffer& b) override {
    check_device(device);
    check_peer(peer);
    check_bf16(b, "recv");
    const cudaStream_t st = dev_.recv_stream();
    dev_.stream_after(st, s);
    // The peer sent "up" when it is below us (or us), "down" when above.
    SC_CHECK(ctx(), ncclRecv(b.data, b.count, ncclBfloat16, peer, peer <= rank_ ? up_ : down_, st));
    auto e = finish(st);
    dev_.add_pending_p2p(s, e);
    return e;
  }

  void group_begin() override {
    SC_CHECK(ctx(), ncclGroupStart());
    ++group_depth_;
  }

  void group_end() override {
    if (group_depth_ == 0) throw std::logic_error("group_end() without group_begin()");
    --group_depth_;
    SC_CHECK(ctx(), ncclGroupEnd());
    if (group_depth_ == 0) {
      // The group's operations are enqueued only now: record their events after them.
      auto deferred = std::move(deferred_);
      deferred_.clear();
      for (auto& [e, st] : deferred) dev_.record_event(*e, st);
    }
  }

  void barrier() override {
    if (host_) return host_->barrier();
    require_no_group("barrier");
    (void)allreduce_max(0.0);
  }

  std::vector<std::string> gather(const std::string& mine) override {
    if (host_) return host_->gather(mine);
    require_no_group("gather");
    // Lengths everywhere, then each rank's bytes to rank 0 in rank order (one buffer of the
    // longest string, not world x longest).
    const std::vector<int> lens = allgather_int(static_cast<int>(mine.size()));
    std::size_t longest = 1;
    for (int l : lens) longest = std::max(longest, static_cast<std::size_t>(l));
    void* buf = ctl_buffer(longest);
    std::vector<std::string> all;
    if (rank_ == 0) {
      all.resize(static_cast<std::size_t>(world_));
      all[0] = mine;
      for (int r = 1; r < world_; ++r) {
        const auto len = static_cast<std::size_t>(lens[static_cast<std::size_t>(r)]);
        std::string& s = all[static_cast<std::size_t>(r)];
        s.resize(len);
        if (len == 0) continue;
        SC_CHECK(ctx(), ncclRecv(buf, len, ncclUint8, r, world_comm_, ctl_stream_));
        SC_CHECK(ctx(), cudaMemcpyAsync(s.data(), buf, len, cudaMemcpyDeviceToHost, ctl_stream_));
        SC_CHECK(ctx(), cudaStreamSynchronize(ctl_stream_));
      }
    } else if (!mine.empty()) {
      SC_CHECK(ctx(), cudaMemcpyAsync(buf, mine.data(), mine.size(), cudaMemcpyHostToDevice, ctl_stream_));
      SC_CHECK(ctx(), ncclSend(buf, mine.size(), ncclUint8, 0, world_comm_, ctl_stream_));
      SC_CHECK(ctx(), cudaStreamSynchronize(ctl_stream_));
    }
    return all;
  }

  double max_all(double x) override {
    if (host_) return host_->max_all(x);
    require_no_group("max_all");
    return allreduce_max(x);
  }

 private:
  struct Group {
    ncclComm_t comm = nullptr;
    std::vector<int> members;
  };

  const ErrorContext& ctx() const { return *ctx_; }

  // While an exception unwinds (a failed call, a peer gone), abort the communicators rather
  // than wait for operations that may never finish.
  void cleanup(bool abort) noexcept {
    if (group_depth_ > 0) (void)ncclGroupEnd();
    group_depth_ = 0;
    if (!abort) (void)cudaDeviceSynchronize();
    auto close = [abort](ncclComm_t& c) {
      if (c) (void)(abort ? ncclCommAbort(c) : ncclCommDestroy(c));
      c = nullptr;
    };
    for (Group& g : groups_) close(g.comm);
    groups_.clear();
    close(down_);
    close(up_);
    close(world_comm_);
    if (ctl_buf_) (void)cudaFree(ctl_buf_);
    ctl_buf_ = nullptr;
    if (ctl_stream_) (void)cudaStreamDestroy(ctl_stream_);
    ctl_stream_ = nullptr;
    (void)cudaGetLastError();
  }

  void check_device(const Device& device) const {
    if (&device != &dev_)
      throw std::invalid_argument("nccl communicator: called with another Device than the one it was made for");
  }

  void check_peer(int peer) const {
    if (peer < 0 || peer >= world_)
      throw std::invalid_argument(fmt::format("nccl communicator: peer {} outside world of {}", peer, world_));
  }

  static void check_bf16(const Buffer& b, const char* what) {
    if (b.dtype != Dtype::kBf16 || (b.count > 0 && !b.data))
      throw std::invalid_argument(fmt::format("nccl communicator: {} buffer must be a bf16 buffer from Device::alloc", what));
  }

  ncclComm_t group_comm(const CommGroup& g) const {
    if (g.id < 0 || static_cast<std::size_t>(g.id) >= groups_.size() ||
        groups_[static_cast<std::size_t>(g.id)].members != g.members)
      throw std::invalid_argument(fmt::format("nccl communicator: CommGroup id {} was not made by this communicator's "
                                              "create_group",
                                              g.id));
    if (g.index < 0) throw std::invalid_argument(fmt::format("nccl communicator: rank {} is not in group {}", rank_, g.id));
    return groups_[static_cast<std::size_t>(g.id)].comm;
  }

  void require_no_group(const char* what) const {
    if (group_depth_ > 0) throw std::logic_error(fmt::format("nccl communicator: {} inside group_begin/group_end", what));
  }

  // An event after the work just enqueued on `st`; inside a group, recorded at group_end.
  std::shared_ptr<CudaEvent> finish(cudaStream_t st) {
    auto e = dev_.new_event();
    if (group_depth_ > 0) {
      deferred_.emplace_back(e, st);
    } else {
      dev_.record_event(*e, st);
    }
    return e;
  }

  void* ctl_buffer(std::size_t bytes) {
    if (bytes > ctl_bytes_) {
      SC_CHECK(ctx(), cudaStreamSynchronize(ctl_stream_));
      if (ctl_buf_) SC_CHECK(ctx(), cudaFree(ctl_buf_));
      ctl_buf_ = nullptr;
      ctl_bytes_ = 0;
      SC_CHECK(ctx(), cudaMalloc(&ctl_buf_, bytes));
      ctl_bytes_ = bytes;
    }
    return ctl_buf_;
  }

  std::vector<int> allgather_int(int mine) {
    const std::size_t n = static_cast<std::size_t>(world_);
    auto* buf = static_cast<int*>(ctl_buffer(n * sizeof(int)));
    std::vector<int> all(n);
    SC_CHECK(ctx(), cudaMemcpyAsync(buf + rank_, &mine, sizeof(int), cudaMemcpyHostToDevice, ctl_stream_));
    SC_CHECK(ctx(), ncclAllGather(buf + rank_, buf, 1, ncclInt32, world_comm_, ctl_stream_));
    SC_CHECK(ctx(), cudaMemcpyAsync(all.data(), buf, n * sizeof(int), cudaMemcpyDeviceToHost, ctl_stream_));
    SC_CHECK(ctx(), cudaStreamSynchronize(ctl_stream_));
    return all;
  }

  double allreduce_max(double x) {
    auto* buf = static_cast<double*>(ctl_buffer(sizeof(double)));
    SC_CHECK(ctx(), cudaMemcpyAsync(buf, &x, sizeof(double), cudaMemcpyHostToDevice, ctl_stream_));
    SC_CHECK(ctx(), ncclAllReduce(buf, buf, 1, ncclFloat64, ncclMax, world_comm_, ctl_stream_));
    SC_CHECK(ctx(), cudaMemcpyAsync(&x, buf, sizeof(double), cudaMemcpyDeviceToHost, ctl_stream_));
    SC_CHECK(ctx(), cudaStreamSynchronize(ctl_stream_));
    return x;
  }

  void write_id_file(const std::string& path, const unsigned char* p, std::size_t n) const {
    const std::string tmp = fmt::format("{}.tmp.{}", path, static_cast<long>(getpid()));
    {
      std::ofstream f(tmp, std::ios::trunc);
      f << kIdFileMagic << ' ' << world_ << ' ' << hex(p, n) << '\n';
      f.close();
      if (!f) throw std::runtime_error(fmt::format("{}: cannot write the NCCL id file {}", ctx().where(), tmp));
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0)  // atomic: readers never see half a file
      throw std::runtime_error(
          fmt::format("{}: cannot rename {} to {}: {}", ctx().where(), tmp, path, std::strerror(errno)));
  }

  void read_id_file(const std::string& path, unsigned char* p, std::size_t n) const {
    const auto start = std::chrono::steady_clock::now();
    for (;;) {
      std::ifstream f(path);
      std::string magic, id;
      int world = 0;
      if (f && (f >> magic >> world >> id)) {
        if (magic != kIdFileMagic || !unhex(id, p, n))
          throw std::runtime_error(fmt::format("{}: {} is not a stepcast NCCL id file", ctx().where(), path));
        if (world != world_)
          throw std::runtime_error(fmt::format("{}: {} was written for a world of {} ranks, this run has {} (a stale "
                                               "file from another run? use a fresh id_file path per job)",
                                               ctx().where(), path, world, world_));
        return;
      }
      const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (waited > kIdFileTimeoutS)
        throw std::runtime_error(fmt::format("{}: waited {:.0f} s for {} (written by rank 0); is the path on a file "
                                             "system every node shares, and did rank 0 start?",
                                             ctx().where(), waited, path));
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  CudaDevice& dev_;
  Communicator* host_;
  int rank_, world_;
  ErrorContextPtr ctx_;
  ncclComm_t world_comm_ = nullptr, up_ = nullptr, down_ = nullptr;
  std::vector<Group> groups_;
  cudaStream_t ctl_stream_ = nullptr;
  void* ctl_buf_ = nullptr;
  std::size_t ctl_bytes_ = 0;
  int group_depth_ = 0;
  std::vector<std::pair<std::shared_ptr<CudaEvent>, cudaStream_t>> deferred_;
};

}  // namespace
}  // namespace cuda_detail

std::unique_ptr<Communicator> make_nccl_communicator(Device& device, Communicator* host, int rank, int world,
                                                     const CudaOptions& o) {
  auto* dev = dynamic_cast<cuda_detail::CudaDevice*>(&device);
  if (!dev) throw std::invalid_argument("make_nccl_communicator: the device must come from make_cuda_device");
  if (world < 1 || rank < 0 || rank >= world)
    throw std::invalid_argument(fmt::format("make_nccl_communicator: rank {} of world {} is out of range", rank, world));
  if (host && (host->rank() != rank || host->world() != world))
    throw std::invalid_argument(fmt::format("make_nccl_communicator: rank {} of {} but the host communicator ({}) says "
                                            "rank {} of {}",
                                            rank, world, host->describe(), host->rank(), host->world()));
  if (!host && o.id_file.empty() && world > 1)
    throw std::invalid_argument(
        "make_nccl_communicator: with more than one rank, give a host communicator (e.g. MPI) or CudaOptions::id_file "
        "(a path on a file system all nodes share) to exchange the ncclUniqueId");
  return std::make_unique<cuda_detail::NcclCommunicator>(*dev, host, rank, world, o);
}

}  // namespace stepcast::exec

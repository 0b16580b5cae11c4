#include "stepcast/executor/fake_comm.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <stdexcept>
#include <tuple>

#include <fmt/format.h>

#include "stepcast/executor/cpu_device.h"

namespace stepcast::exec {

namespace {

// One collective call of one group: filled as members arrive.
struct Slot {
  std::vector<std::vector<float>> send;   // by member index
  std::vector<float*> recv;
  std::vector<std::size_t> recv_count;
  int arrived = 0;
  bool done = false;
  double time = 0;
};

}  // namespace

struct FakeWorld::State {
  explicit State(int n) : ranks(n), round_of(static_cast<std::size_t>(n), 0) {}
  int ranks;
  std::mutex mu;
  std::condition_variable cv;
  // Control plane: round r of world-wide exchanges.
  struct Round {
    std::vector<std::string> data;
    int arrived = 0, left = 0;
  };
  std::map<long, Round> rounds;
  std::vector<long> round_of;
  // Groups by member list.
  std::map<std::vector<int>, int> group_ids;
  // Data plane.
  std::map<std::pair<int, long>, std::shared_ptr<Slot>> slots;   // (group id, call number)
  std::map<std::tuple<int, int, std::uint32_t>, std::deque<std::vector<float>>> mail;  // (src, dst, tag)

  std::vector<std::string> exchange(int rank, std::string mine) {
    std::unique_lock lock(mu);
    const long r = round_of[static_cast<std::size_t>(rank)]++;
    Round& rd = rounds[r];
    if (rd.data.empty()) rd.data.resize(static_cast<std::size_t>(ranks));
    rd.data[static_cast<std::size_t>(rank)] = std::move(mine);
    ++rd.arrived;
    cv.notify_all();
    cv.wait(lock, [&] { return rd.arrived == ranks; });
    std::vector<std::string> out = rd.data;
    if (++rd.left == ranks) rounds.erase(r);
    return out;
  }
};

namespace {

class SlotEvent final : public Event {
 public:
  SlotEvent(std::shared_ptr<FakeWorld::State> st, std::shared_ptr<Slot> slot) : st_(std::move(st)), slot_(std::move(slot)) {}
  bool done() override {
    std::lock_guard lock(st_->mu);
    return slot_->done;
  }
  void wait() override {
    std::unique_lock lock(st_->mu);
    st_->cv.wait(lock, [&] { return slot_->done; });
  }
  double time_s() override {
    wait();
    return slot_->time;
  }

 private:
  std::shared_ptr<FakeWorld::State> st_;
  std::shared_ptr<Slot> slot_;
};

class RecvEvent final : public Event {
 public:
  RecvEvent(std::shared_ptr<FakeWorld::State> st, std::tuple<int, int, std::uint32_t> key, Buffer b)
      : st_(std::move(st)), key_(key), buf_(b) {}
  bool done() override {
    std::lock_guard lock(st_->mu);
    return take();
  }
  void wait() override {
    std::unique_lock lock(st_->mu);
    st_->cv.wait(lock, [&] { return take(); });
  }
  double time_s() override {
    wait();
    return time_;
  }

 private:
  bool take() {  // under the lock
    if (done_) return true;
    auto it = st_->mail.find(key_);
    if (it == st_->mail.end() || it->second.empty()) return false;
    const std::vector<float>& v = it->second.front();
    std::copy_n(v.data(), std::min(v.size(), buf_.count), static_cast<float*>(buf_.data));
    it->second.pop_front();
    done_ = true;
    time_ = host_now_s();
    return true;
  }
  std::shared_ptr<FakeWorld::State> st_;
  std::tuple<int, int, std::uint32_t> key_;
  Buffer buf_;
  bool done_ = false;
  double time_ = 0;
};

void complete(Slot& s, CollKind kind, std::size_t n) {
  for (std::size_t me = 0; me < n; ++me) {
    float* out = s.recv[me];
    const std::size_t cnt = s.recv_count[me];
    switch (kind) {
      case CollKind::kAllReduce:
      case CollKind::kSendRecv:
        for (std::size_t k = 0; k < cnt; ++k) {
          float sum = 0;
          for (std::size_t j = 0; j < n; ++j) sum += k < s.send[j].size() ? s.send[j][k] : 0.0f;
          out[k] = sum;
        }
        break;
      case CollKind::kAllGather: {
        const std::size_t c = cnt / n;
        for (std::size_t j = 0; j < n; ++j)
          for (std::size_t k = 0; k < c && k < s.send[j].size(); ++k) out[j * c + k] = s.send[j][k];
        break;
      }
      case CollKind::kReduceScatter:
        for (std::size_t k = 0; k < cnt; ++k) {
          float sum = 0;
          for (std::size_t j = 0; j < n; ++j) sum += s.send[j][me * cnt + k];
          out[k] = sum;
        }
        break;
      case CollKind::kAllToAll: {
        const std::size_t c = cnt / n;
        for (std::size_t j = 0; j < n; ++j)
          for (std::size_t k = 0; k < c; ++k) out[j * c + k] = s.send[j][me * c + k];
        break;
      }
      case CollKind::kBroadcast:
        for (std::size_t k = 0; k < cnt && k < s.send[0].size(); ++k) out[k] = s.send[0][k];
        break;
    }
  }
  s.done = true;
  s.time = host_now_s();
}

class FakeComm final : public Communicator {
 public:
  FakeComm(std::shared_ptr<FakeWorld::State> st, int rank) : st_(std::move(st)), rank_(rank) {}
  int rank() const override { return rank_; }
  int world() const override { return st_->ranks; }
  std::string describe() const override { return "in-memory fake communicator (threads)"; }

  CommGroup create_group(int color) override {
    const std::vector<std::string> colors = st_->exchange(rank_, std::to_string(color));
    CommGroup g;
    for (int r = 0; r < st_->ranks; ++r) {
      if (colors[static_cast<std::size_t>(r)] == std::to_string(color)) g.members.push_back(r);
    }
    g.index = static_cast<int>(std::find(g.members.begin(), g.members.end(), rank_) - g.members.begin());
    std::lock_guard lock(st_->mu);
    auto [it, added] = st_->group_ids.try_emplace(g.members, static_cast<int>(st_->group_ids.size()));
    g.id = it->second;
    return g;
  }

  EventPtr collective(Device&, Stream, CollKind kind, const CommGroup& g, const Buffer& send,
                      const Buffer& recv) override {
    const long call = calls_[g.id]++;
    const std::size_t n = static_cast<std::size_t>(g.size());
    std::lock_guard lock(st_->mu);
    std::shared_ptr<Slot>& sp = st_->slots[{g.id, call}];
    if (!sp) {
      sp = std::make_shared<Slot>();
      sp->send.resize(n);
      sp->recv.resize(n);
      sp->recv_count.resize(n);
    }
    std::shared_ptr<Slot> slot = sp;
    const auto me = static_cast<std::size_t>(g.index);
    const float* src = static_cast<const float*>(send.data);
    slot->send[me].assign(src, src + send.count);
    slot->recv[me] = static_cast<float*>(recv.data);
    slot->recv_count[me] = recv.count;
    if (++slot->arrived == g.size()) {
      complete(*slot, kind, n);
      st_->slots.erase({g.id, call});
      st_->cv.notify_all();
    }
    return std::make_shared<SlotEvent>(st_, slot);
  }

  EventPtr send(Device&, Stream, int peer, std::uint32_t tag, const Buffer& b) override {
    const float* src = static_cast<const float*>(b.data);
    std::lock_guard lock(st_->mu);
    st_->mail[{rank_, peer, tag}].emplace_back(src, src + b.count);
    st_->cv.notify_all();
    return done_event(host_now_s());
  }
  EventPtr recv(Device&, Stream, int peer, std::uint32_t tag, const Buffer& b) override {
    return std::make_shared<RecvEvent>(st_, std::make_tuple(peer, rank_, tag), b);
  }
  void barrier() override { st_->exchange(rank_, {}); }
  std::vector<std::string> gather(const std::string& mine) override {
    std::vector<std::string> all = st_->exchange(rank_, mine);
    if (rank_ != 0) return {};
    return all;
  }
  double max_all(double x) override {
    double m = x;
    for (const std::string& s : st_->exchange(rank_, fmt::format("{:.17g}", x))) m = std::max(m, std::stod(s));
    return m;
  }

 private:
  std::shared_ptr<FakeWorld::State> st_;
  int rank_;
  std::map<int, long> calls_;
};

}  // namespace

FakeWorld::FakeWorld(int ranks) : state_(std::make_shared<State>(ranks)) {
  if (ranks < 1) throw std::invalid_argument("FakeWorld: ranks must be at least 1");
}
FakeWorld::~FakeWorld() = default;

std::unique_ptr<Communicator> FakeWorld::communicator(int rank) { return std::make_unique<FakeComm>(state_, rank); }

}  // namespace stepcast::exec

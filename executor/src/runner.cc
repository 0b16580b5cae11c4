#include "stepcast/executor/runner.h"

#include <algorithm>
#include <array>
#include <map>
#include <stdexcept>
#include <tuple>

#include <fmt/format.h>

namespace stepcast::exec {

float pattern_value(int rank, std::uint64_t seq, std::size_t i) {
  const std::uint64_t x = static_cast<std::uint64_t>(i) + 3u * static_cast<std::uint64_t>(rank) + 7u * seq;
  return static_cast<float>(x & 3u);
}

namespace {

// Bits 24-27 name the group kind (kind + 1), clear of p2p_seed's bit 31 and ring_seed's 29-30.
std::uint64_t collective_seed(int step, GroupKind g, std::uint32_t seq) {
  return (static_cast<std::uint64_t>(step + 1) << 32) ^ ((static_cast<std::uint64_t>(g) + 1) << 24) ^ seq;
}
std::uint64_t p2p_seed(int step, std::uint32_t tag) {
  return (static_cast<std::uint64_t>(step + 1) << 32) ^ (1ull << 31) ^ tag;
}
std::uint64_t ring_seed(int step, std::uint32_t op) {
  return (static_cast<std::uint64_t>(step + 1) << 32) ^ (3ull << 29) ^ op;
}

// Ring ops get MPI/NCCL tags of their own, above every pipeline tag.
constexpr std::uint32_t kRingTagBase = 1u << 22;

struct CommBuffers {
  Buffer send, recv;
  std::size_t chunk = 0;   // per-rank block (all-gather, reduce-scatter, all-to-all)
  int peer = -1;           // p2p and ring: the rank data comes from
  int to = -1;             // ring: the rank data goes to
  std::uint64_t seed = 0;  // of the data expected in `recv`
};

class Runner {
 public:
  Runner(const Program& program, const ExecContext& ctx, Device& device, Communicator& comm, const RunOptions& o)
      : prog_(program), ctx_(ctx), dev_(device), comm_(comm), opt_(o), rank_(comm.rank()),
        pl_(program.placement) {
    if (comm.world() != pl_.world()) {
      throw std::runtime_error(fmt::format("the plan needs {} ranks (tp {} x cp {} x dp {} x pp {}) but {} were launched",
                                           pl_.world(), pl_.tp, pl_.cp, pl_.dp, pl_.pp, comm.world()));
    }
    role_ = &program.roles.at(static_cast<std::size_t>(pl_.coords(rank_).p));
    bool ag_dispatch = false;  // the same on every rank: the Program is
    for (const RoleTemplate& role : program.roles) {
      for (const Op& op : role.ops) ag_dispatch |= op.kind == OpKind::kCollective && op.group == GroupKind::kEtpEp;
    }
    for (GroupKind g : kAllGroupKinds) {
      // The expert-TP group is the TP group unless the experts are folded, and the
      // all-gather dispatcher's group exists only for it: no needless split.
      const bool alias = (g == GroupKind::kEtp && !pl_.folded()) || (g == GroupKind::kEtpEp && !ag_dispatch);
      groups_[static_cast<std::size_t>(g)] =
          alias ? groups_[static_cast<std::size_t>(GroupKind::kTp)] : comm.create_group(pl_.group_root(g, rank_));
    }
    const std::size_t n = role_->ops.size();
    work_.reserve(n);
    for (const Op& op : role_->ops) work_.push_back(op_work(ctx, op));
    seq_ = collective_sequence(*role_);
    bufs_.resize(n);
    start_.resize(n);
    end_.resize(n);
  }

  RankResult run() {
    RankResult res;
    res.timeline.rank = rank_;
    res.timeline.stage = role_->stage;
    void* static_mem = dev_.alloc_bytes(role_->static_bytes);
    dev_.reset_peak_memory();
    double base = 0;
    const int total = opt_.warmup + opt_.steps;
    for (int step = 0; step < total; ++step) {
      const bool measured = step >= opt_.warmup;
      const int mstep = step - opt_.warmup;
      prepare(step);
      dev_.synchronize();
      comm_.barrier();
      const double t0 = dev_.now_s();
      if (mstep == 0) base = -comm_.max_all(-t0);  // earliest start over ranks
      execute_step();
      dev_.synchronize();
      for (const EventPtr& e : end_) if (e) e->wait();
      double step_end = t0;
      for (std::size_t i = 0; i < end_.size(); ++i) {
        if (!end_[i]) continue;
        const double a = start_[i]->time_s(), b = std::max(a, end_[i]->time_s());
        step_end = std::max(step_end, b);
        if (measured) {
          Span sp;
          sp.post = SimTime::from_s(std::max(0.0, a - base));
          sp.begin = sp.post;
          sp.end = SimTime::from_s(std::max(0.0, b - base));
          sp.op = static_cast<std::uint32_t>(i);
          sp.step = static_cast<std::uint16_t>(mstep);
          sp.stream = role_->ops[i].stream;
          res.timeline.spans.push_back(sp);
        }
      }
      if (measured) {
        res.step_s.push_back(step_end - t0);
        res.timeline.step_end.push_back(SimTime::from_s(std::max(0.0, step_end - base)));
      }
      if (opt_.verify) verify(step, res);
      if (opt_.on_step) opt_.on_step(step + 1, total);
    }
    std::stable_sort(res.timeline.spans.begin(), res.timeline.spans.end(),
                     [](const Span& a, const Span& b) { return std::tie(a.end, a.step, a.op) < std::tie(b.end, b.step, b.op); });
    res.peak_memory_bytes = dev_.peak_memory_bytes();
    res.predicted_peak_bytes = role_->static_bytes + predicted_live_peak_;
    res.timeline.peak_bytes = res.peak_memory_bytes;
    dev_.free_bytes(static_mem);
    for (CommBuffers& b : bufs_) {
      if (b.send.data) dev_.release(b.send);
      if (b.recv.data) dev_.release(b.recv);
    }
    return res;
  }

 private:
  const CommGroup& group(GroupKind g) const { return groups_[static_cast<std::size_t>(g)]; }

  std::size_t elements(double bytes) const {
    return static_cast<std::size_t>(std::max(1.0, bytes / static_cast<double>(dtype_bytes(dev_.comm_dtype()))));
  }

  Buffer alloc(std::size_t count) { return dev_.alloc(std::max<std::size_t>(1, count)); }

  void fill(const Buffer& b, int rank, std::uint64_t seed) {
    host_.resize(b.count);
    for (std::size_t i = 0; i < b.count; ++i) host_[i] = pattern_value(rank, seed, i);
    dev_.upload(b, host_);
  }

  // Allocates communication buffers on first use and fills what each op sends.
  void prepare(int step) {
    const auto& ops = role_->ops;
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const Op& op = ops[i];
      const OpWork& w = work_[i];
      CommBuffers& b = bufs_[i];
      switch (w.kind) {
        case OpWork::Kind::kCollective: {
          const CommGroup& g = group(op.group);
          const std::size_t n = static_cast<std::size_t>(g.size());
          if (!b.send.data) {
            const std::size_t total = elements(w.bytes);
            b.chunk = std::max<std::size_t>(1, total / n);
            switch (op.coll) {
              case CollKind::kAllGather: b.send = alloc(b.chunk); b.recv = alloc(b.chunk * n); break;
              case CollKind::kReduceScatter: b.send = alloc(b.chunk * n); b.recv = alloc(b.chunk); break;
              case CollKind::kAllToAll: b.send = alloc(b.chunk * n); b.recv = alloc(b.chunk * n); break;
              default: b.send = alloc(total); b.recv = alloc(total); break;
            }
          }
          b.seed = collective_seed(step, op.group, seq_[i]);
          fill(b.send, rank_, b.seed);
          break;
        }
        case OpWork::Kind::kSend:
        case OpWork::Kind::kRecv: {
          if (!b.send.data) {
            b.send = alloc(elements(w.bytes));
            b.peer = pl_.stage_peer(rank_, op.peer_stage);
          }
          b.seed = p2p_seed(step, op.tag);
          if (w.kind == OpWork::Kind::kSend) fill(b.send, rank_, b.seed);
          break;
        }
        case OpWork::Kind::kRing: {
          const CommGroup& g = group(GroupKind::kCp);
          if (!b.send.data) {
            b.send = alloc(elements(w.bytes));
            b.recv = alloc(elements(w.bytes));
            const int n = g.size();
            b.to = g.members[static_cast<std::size_t>((g.index + 1) % n)];
            b.peer = g.members[static_cast<std::size_t>((g.index + n - 1) % n)];
          }
          b.seed = ring_seed(step, static_cast<std::uint32_t>(i));
          fill(b.send, rank_, b.seed);
          break;
        }
        default: break;
      }
    }
  }

  void execute_step() {
    const auto& ops = role_->ops;
    std::multimap<double, void*> allocs;
    double live_bytes = 0;
    std::vector<std::size_t> pending;
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const Op& op = ops[i];
      const OpWork& w = work_[i];
      const Stream s = op.stream;
      for (std::uint32_t k = 0; k < op.dep_count; ++k) {
        const std::uint32_t d = role_->deps[op.dep_begin + k];
        if (end_[d] && ops[d].stream != s) dev_.wait(s, end_[d]);
      }
      start_[i] = dev_.record(s);
      end_[i] = nullptr;
      CommBuffers& b = bufs_[i];
      switch (w.kind) {
        case OpWork::Kind::kNone: break;
        case OpWork::Kind::kCompute:
          if (w.has_gemm) dev_.gemm(s, w.gemm);
          if (w.has_attention) dev_.attention(s, w.attention);
          if (w.bytes > 0) dev_.elementwise(s, w.bytes);
          break;
        case OpWork::Kind::kHostCopy: dev_.host_copy(s, w.bytes, w.to_host); break;
        case OpWork::Kind::kHostStep: dev_.host_optimizer(s, w.elements, w.adam); break;
        case OpWork::Kind::kCollective:
          end_[i] = comm_.collective(dev_, s, op.coll, group(op.group), b.send, b.recv);
          break;
        case OpWork::Kind::kSend: end_[i] = comm_.send(dev_, s, b.peer, op.tag, b.send); break;
        case OpWork::Kind::kRecv: end_[i] = comm_.recv(dev_, s, b.peer, op.tag, b.send); break;
        case OpWork::Kind::kRing: {
          const std::uint32_t tag = kRingTagBase + static_cast<std::uint32_t>(i);
          for (int r = 0; r < w.ring_steps; ++r) {
            comm_.group_begin();
            EventPtr a = comm_.send(dev_, s, b.to, tag, b.send);
            EventPtr c = comm_.recv(dev_, s, b.peer, tag, b.recv);
            comm_.group_end();
            a->wait();
            c->wait();
            end_[i] = c;
          }
          break;
        }
        case OpWork::Kind::kAlloc: {
          allocs.emplace(w.bytes, dev_.alloc_bytes(w.bytes));
          live_bytes += w.bytes;
          predicted_live_peak_ = std::max(predicted_live_peak_, live_bytes);
          break;
        }
        case OpWork::Kind::kFree: {
          auto it = allocs.find(w.bytes);
          if (it != allocs.end()) {
            dev_.free_bytes(it->second);
            allocs.erase(it);
          }
          live_bytes -= w.bytes;
          break;
        }
      }
      if (!end_[i]) {
        end_[i] = dev_.record(s);
      } else {
        pending.push_back(i);
      }
      // Let the communicator notice completions now (progress and completion times).
      std::erase_if(pending, [&](std::size_t j) { return end_[j]->done(); });
    }
    for (auto& [bytes, p] : allocs) dev_.free_bytes(p);
  }

  void check(int step, std::size_t i, const Buffer& got_buf, const std::vector<float>& expected, RankResult& res) {
    got_.resize(got_buf.count);
    dev_.download(got_buf, got_);
    std::int64_t wrong = 0;
    std::size_t first = 0;
    for (std::size_t k = 0; k < expected.size() && k < got_.size(); ++k) {
      if (got_[k] != expected[k]) {
        if (wrong == 0) first = k;
        ++wrong;
      }
    }
    res.verified_elements += static_cast<std::int64_t>(expected.size());
    res.wrong_elements += wrong;
    if (wrong > 0 && res.errors.size() < 8) {
      res.errors.push_back(fmt::format("rank {} step {} op {} \"{}\": {} of {} elements wrong, first at {}: got {} expected {}",
                                       rank_, step, i, prog_.names[role_->ops[i].name], wrong, expected.size(), first,
                                       got_[first], expected[first]));
    }
  }

  void verify(int step, RankResult& res) {
    const auto& ops = role_->ops;
    std::vector<float> exp;
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const Op& op = ops[i];
      const OpWork& w = work_[i];
      const CommBuffers& b = bufs_[i];
      if (w.kind == OpWork::Kind::kRecv || w.kind == OpWork::Kind::kRing) {
        const Buffer& got = w.kind == OpWork::Kind::kRecv ? b.send : b.recv;
        exp.resize(got.count);
        for (std::size_t k = 0; k < exp.size(); ++k) exp[k] = pattern_value(b.peer, b.seed, k);
        check(step, i, got, exp, res);
        continue;
      }
      if (w.kind != OpWork::Kind::kCollective) continue;
      const CommGroup& g = group(op.group);
      const std::size_t n = static_cast<std::size_t>(g.size()), c = b.chunk;
      const std::size_t me = static_cast<std::size_t>(g.index);
      exp.assign(b.recv.count, 0.0f);
      switch (op.coll) {
        case CollKind::kAllGather:
          for (std::size_t j = 0; j < n; ++j)
            for (std::size_t k = 0; k < c; ++k) exp[j * c + k] = pattern_value(g.members[j], b.seed, k);
          break;
        case CollKind::kReduceScatter:
          for (std::size_t k = 0; k < c; ++k)
            for (std::size_t j = 0; j < n; ++j) exp[k] += pattern_value(g.members[j], b.seed, me * c + k);
          break;
        case CollKind::kAllToAll:
          for (std::size_t j = 0; j < n; ++j)
            for (std::size_t k = 0; k < c; ++k) exp[j * c + k] = pattern_value(g.members[j], b.seed, me * c + k);
          break;
        case CollKind::kBroadcast:
          for (std::size_t k = 0; k < exp.size(); ++k) exp[k] = pattern_value(g.members[0], b.seed, k);
          break;
        case CollKind::kAllReduce:
        case CollKind::kSendRecv:
          for (std::size_t k = 0; k < exp.size(); ++k)
            for (std::size_t j = 0; j < n; ++j) exp[k] += pattern_value(g.members[j], b.seed, k);
          break;
      }
      check(step, i, b.recv, exp, res);
    }
  }

  const Program& prog_;
  const ExecContext& ctx_;
  Device& dev_;
  Communicator& comm_;
  RunOptions opt_;
  int rank_;
  Placement pl_;
  const RoleTemplate* role_ = nullptr;
  std::array<CommGroup, kNumGroupKinds> groups_;
  std::vector<OpWork> work_;
  std::vector<std::uint32_t> seq_;
  std::vector<CommBuffers> bufs_;
  std::vector<EventPtr> start_, end_;
  std::vector<float> host_, got_;
  double predicted_live_peak_ = 0;
};

}  // namespace

RankResult run_rank(const Program& program, const ExecContext& ctx, Device& device, Communicator& comm,
                    const RunOptions& options) {
  if (options.steps < 1) throw std::invalid_argument("steps: must be at least 1");
  if (options.warmup < 0) throw std::invalid_argument("warmup: must not be negative");
  Runner r(program, ctx, device, comm, options);
  return r.run();
}

Timeline merge_timelines(const Program& program, std::vector<RankTimeline> ranks) {
  Timeline t;
  std::sort(ranks.begin(), ranks.end(), [](const RankTimeline& a, const RankTimeline& b) { return a.rank < b.rank; });
  // Last post per (group kind, group root, sequence number, step).
  using Key = std::tuple<int, int, std::uint32_t, int>;
  std::map<Key, SimTime> last_post;
  std::vector<std::vector<std::uint32_t>> seqs(program.roles.size());
  for (std::size_t s = 0; s < program.roles.size(); ++s) seqs[s] = collective_sequence(program.roles[s]);
  auto key_of = [&](const RankTimeline& r, const Span& sp) -> std::optional<Key> {
    const RoleTemplate& role = program.roles[static_cast<std::size_t>(r.stage)];
    const Op& op = role.ops[sp.op];
    if (op.kind != OpKind::kCollective) return std::nullopt;
    return Key{static_cast<int>(op.group), program.placement.group_root(op.group, r.rank),
               seqs[static_cast<std::size_t>(r.stage)][sp.op], sp.step};
  };
  for (const RankTimeline& r : ranks) {
    for (const Span& sp : r.spans) {
      if (auto k = key_of(r, sp)) {
        SimTime& m = last_post[*k];
        m = std::max(m, sp.post);
      }
    }
  }
  for (RankTimeline& r : ranks) {
    for (Span& sp : r.spans) {
      if (auto k = key_of(r, sp)) sp.begin = std::min(sp.end, std::max(sp.post, last_post[*k]));
    }
    if (t.step_end.size() < r.step_end.size()) t.step_end.resize(r.step_end.size());
    for (std::size_t s = 0; s < r.step_end.size(); ++s) t.step_end[s] = std::max(t.step_end[s], r.step_end[s]);
  }
  t.ranks = std::move(ranks);
  return t;
}

}  // namespace stepcast::exec

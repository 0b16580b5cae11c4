#include "stepcast/sim/engine.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <unordered_map>

#include <fmt/format.h>

namespace stepcast::sim {

namespace {

// Per-template data derived once: dependents (CSR), initial dependency counts, roots,
// durations from the backend.
struct TemplateIndex {
  std::vector<std::uint32_t> seq;  // collectives: 1-based sequence number on their group kind
  std::vector<std::uint32_t> dep_begin, dependents;
  std::vector<std::uint32_t> initial;
  std::vector<std::uint32_t> roots;
  std::vector<SimTime> duration;
  // kRecv: its slot among the stage's receives; kSend: the slot of the receive it feeds in
  // the peer stage's template (set by link_p2p_slots; kNoSlot when the peer has none).
  std::vector<std::uint32_t> p2p_slot;
  std::uint32_t recv_slots = 0;
};

constexpr std::uint32_t kNoSlot = UINT32_MAX;

TemplateIndex index_template(const Program& program, const RoleTemplate& role,
                             NetworkBackend& backend) {
  TemplateIndex ix;
  const std::size_t n = role.ops.size();
  ix.initial.assign(n, 0);
  ix.duration.resize(n);
  ix.p2p_slot.assign(n, kNoSlot);
  ix.seq = collective_sequence(role);
  std::vector<std::vector<std::uint32_t>> out(n);
  std::uint32_t last_on_stream[kNumStreams];
  std::fill(std::begin(last_on_stream), std::end(last_on_stream), UINT32_MAX);
  for (std::uint32_t i = 0; i < n; ++i) {
    const Op& op = role.ops[i];
    const auto s = static_cast<std::size_t>(op.stream);
    if (last_on_stream[s] != UINT32_MAX) {
      out[last_on_stream[s]].push_back(i);
      ++ix.initial[i];
    }
    last_on_stream[s] = i;
    for (std::uint32_t k = 0; k < op.dep_count; ++k) {
      const std::uint32_t d = role.deps[op.dep_begin + k];
      out[d].push_back(i);
      ++ix.initial[i];
    }
    switch (op.kind) {
      case OpKind::kCompute:
        // Interference: a share of the overlapping collective's nominal duration
        // (program.h; the collective precedes it in the template).
        ix.duration[i] = op.cclass == ComputeClass::kInterference && op.contends < i
                             ? SimTime::from_ns(static_cast<std::int64_t>(
                                   std::llround(program.interference * static_cast<double>(ix.duration[op.contends].ns()))))
                             : op.duration;
        break;
      case OpKind::kCollective: ix.duration[i] = backend.collective_time(program, op); break;
      case OpKind::kRecv:
        ix.duration[i] = backend.p2p_time(program, op, op.peer_stage, role.stage);
        ix.p2p_slot[i] = ix.recv_slots++;
        break;
      case OpKind::kSend: ix.duration[i] = backend.p2p_time(program, op, role.stage, op.peer_stage); break;
      default: break;
    }
  }
  ix.dep_begin.resize(n + 1);
  for (std::uint32_t i = 0; i < n; ++i) {
    ix.dep_begin[i] = static_cast<std::uint32_t>(ix.dependents.size());
    ix.dependents.insert(ix.dependents.end(), out[i].begin(), out[i].end());
    if (ix.initial[i] == 0) ix.roots.push_back(i);
  }
  ix.dep_begin[n] = static_cast<std::uint32_t>(ix.dependents.size());
  return ix;
}

// Points every send at the slot of the receive that takes it: the receive in the peer
// stage with this stage as its peer and the same tag.
void link_p2p_slots(const Program& program, std::vector<TemplateIndex>& index) {
  std::map<std::tuple<int, int, std::uint32_t>, std::uint32_t> recv_slot;  // (stage, peer stage, tag)
  for (std::size_t s = 0; s < program.roles.size(); ++s) {
    const auto& ops = program.roles[s].ops;
    for (std::uint32_t i = 0; i < ops.size(); ++i) {
      if (ops[i].kind == OpKind::kRecv) recv_slot[{static_cast<int>(s), ops[i].peer_stage, ops[i].tag}] = index[s].p2p_slot[i];
    }
  }
  for (std::size_t s = 0; s < program.roles.size(); ++s) {
    const auto& ops = program.roles[s].ops;
    for (std::uint32_t i = 0; i < ops.size(); ++i) {
      if (ops[i].kind != OpKind::kSend) continue;
      const auto it = recv_slot.find({ops[i].peer_stage, static_cast<int>(s), ops[i].tag});
      index[s].p2p_slot[i] = it == recv_slot.end() ? kNoSlot : it->second;
    }
  }
}

// A completion. The op began at time - duration (compute, collective once complete,
// recv transfer); `post` is when the rank reached it.
struct Event {
  std::int64_t time;
  std::uint32_t rank;  // index into the simulated ranks
  std::uint32_t op;
  std::int64_t post;
};

// The pending completions, popped in (time, push order): exactly the order of a binary heap
// on (time, sequence number), which is what makes runs deterministic. The ranks of a
// symmetric job complete at the same instants (all data-parallel replicas of a stage, all
// tensor-parallel peers), so the events fall on few distinct times: a small heap of distinct
// times, each with a FIFO of its events, replaces a heap of every event (the full 405B run
// keeps tens of thousands in flight; sifting them was a third of its time).
class EventQueue {
 public:
  bool empty() const { return heap_.empty(); }
  std::int64_t top_time() const { return heap_.front().time; }  // REQUIRES: !empty()

  void push(const Event& e) {
    if (e.time != last_time_ || last_bucket_ == kNone) {
      auto [it, inserted] = index_.try_emplace(e.time, kNone);
      if (inserted) {
        it->second = new_bucket();
        heap_.push_back({e.time, it->second});
        std::push_heap(heap_.begin(), heap_.end(), later);
      }
      last_time_ = e.time;
      last_bucket_ = it->second;
    }
    buckets_[last_bucket_].events.push_back(e);
  }

  Event pop() {  // REQUIRES: !empty()
    const std::uint32_t b = heap_.front().bucket;
    Bucket& bucket = buckets_[b];
    const Event e = bucket.events[bucket.next++];
    if (bucket.next == bucket.events.size()) {  // the instant is drained
      index_.erase(heap_.front().time);
      std::pop_heap(heap_.begin(), heap_.end(), later);
      heap_.pop_back();
      bucket.events.clear();
      bucket.next = 0;
      free_.push_back(b);
      if (last_bucket_ == b) last_bucket_ = kNone;
    }
    return e;
  }

 private:
  static constexpr std::uint32_t kNone = UINT32_MAX;
  struct Instant {
    std::int64_t time;
    std::uint32_t bucket;
  };
  struct Bucket {
    std::vector<Event> events;  // in push order; capacity kept when the bucket is reused
    std::size_t next = 0;
  };
  static bool later(const Instant& a, const Instant& b) { return a.time > b.time; }  // times are distinct

  std::uint32_t new_bucket() {
    if (!free_.empty()) {
      const std::uint32_t b = free_.back();
      free_.pop_back();
      return b;
    }
    buckets_.emplace_back();
    return static_cast<std::uint32_t>(buckets_.size() - 1);
  }

  std::vector<Instant> heap_;  // min-heap on time
  std::unordered_map<std::int64_t, std::uint32_t> index_;  // time -> bucket, for the times in heap_
  std::vector<Bucket> buckets_;
  std::vector<std::uint32_t> free_;
  std::int64_t last_time_ = 0;
  std::uint32_t last_bucket_ = kNone;  // bucket of last_time_ (pushes come in runs of one time)
};

struct RankState {
  int rank = 0;
  int stage = 0;
  int step = 0;
  bool stopped = false;                 // a crash: starts no further op
  std::uint32_t stop_op = 0;
  SimTime stop_time;
  std::uint32_t last_coll = UINT32_MAX;  // last collective entered (template op) ...
  int last_coll_step = 0;                // ... in this step
  bool last_coll_done = false;
  std::uint32_t done = 0;
  std::uint32_t slot_base = 0;  // its receives' slots in Engine::p2p_
  double mem = 0;
  std::vector<std::uint32_t> remaining;
};

// A collective of one step on one group: the group's lowest rank and the op's index in the
// members' template, or, for the world group (whose members run different stages'
// templates), root -1 and the op's sequence number among the world collectives.
struct CollKey {
  int root;
  int step;
  std::uint32_t op;
  bool operator==(const CollKey&) const = default;
};
struct CollKeyHash {
  std::size_t operator()(const CollKey& k) const {
    return (static_cast<std::size_t>(k.root) * 1000003u) ^ (static_cast<std::size_t>(k.step) << 40) ^
           (static_cast<std::size_t>(k.op) * 2654435761u);
  }
};
// One member of a collective or transfer in flight: its sim rank, the op's index in that
// rank's template (members of the world group run different templates) and when it posted.
struct OpMember {
  std::uint32_t rank, op;
  SimTime post;
};
struct PendingColl {
  int arrived = 0;
  bool mismatch = false;
  double bytes = 0;  // the first member's size
  SimTime last;
  std::vector<OpMember> members;
};

// A transfer to one receive of one step: its send, its receive, or both once matched.
struct PendingP2p {
  int step = -1;  // -1: unused
  bool sent = false, received = false;
  SimTime send_post, recv_post;
  std::uint32_t send_rank = 0, send_op = 0, recv_rank = 0, recv_op = 0;
  int send_step = 0;
};

// The pending transfers to one receive op of one simulated rank, one per step: almost always
// at most one (a sender runs at most about a step ahead), kept inline; more spill to `more`.
// Slots replace a hash map keyed by (source, destination, step, tag): the full 405B run
// keeps about 24,000 transfers pending, and hashing them was a sixth of its time.
struct P2pSlot {
  PendingP2p first;
  std::vector<PendingP2p> more;

  PendingP2p& find_or_add(int step) {
    if (first.step == step) return first;
    for (PendingP2p& p : more) {
      if (p.step == step) return p;
    }
    PendingP2p& p = first.step < 0 ? first : more.emplace_back();
    p.step = step;
    return p;
  }
  void erase(const PendingP2p& p) {
    if (&p == &first) {
      if (more.empty()) {
        first = PendingP2p{};
      } else {
        first = more.front();
        more.erase(more.begin());
      }
    } else {
      more.erase(more.begin() + (&p - more.data()));
    }
  }
};

class Engine {
 public:
  Engine(const Program& program, NetworkBackend& backend, const EngineOptions& opt)
      : program_(program), opt_(opt), flows_(backend.flows()) {
    for (const RoleTemplate& role : program.roles) index_.push_back(index_template(program, role, backend));
    link_p2p_slots(program, index_);
    const Placement& pl = program.placement;
    sim_index_.assign(static_cast<std::size_t>(pl.world()), UINT32_MAX);
    if (opt.full) {
      for (int r = 0; r < pl.world(); ++r) add_rank(r);
    } else {
      for (int s = 0; s < pl.pp; ++s) add_rank(pl.stage_peer(0, s));
    }
  }

  SimOutput run() {
    if (flows_) {
      flows_->run([this] { loop(); });
    } else {
      loop();
    }
    SimOutput out;
    out.events = events_;
    finish(out);
    return out;
  }

 private:
  void loop() {
    for (std::uint32_t i = 0; i < ranks_.size(); ++i) start_step(i, SimTime{});
    std::vector<std::pair<std::uint64_t, SimTime>> done;
    while (true) {
      if (flows_ && flows_->busy()) {
        // Let the network run up to the next engine event, or until transfers end.
        const SimTime until = queue_.empty() ? SimTime::from_ns(INT64_MAX) : SimTime::from_ns(queue_.top_time());
        done.clear();
        flows_->advance(until, done);
        for (const auto& [handle, end] : done) transfer_done(handle, end);
        if (!done.empty()) continue;
      } else if (flows_ && !queue_.empty()) {
        done.clear();
        flows_->advance(SimTime::from_ns(queue_.top_time()), done);  // moves the network's clock
      }
      if (queue_.empty()) break;
      complete(queue_.pop());
    }
  }

  // A flow-level transfer ended: its ops complete at `end`.
  void transfer_done(std::uint64_t handle, SimTime end) {
    auto it = dynamic_.find(handle);
    const Dynamic d = std::move(it->second);
    dynamic_.erase(it);
    for (const auto& [r, op, post] : d.members) {
      dyn_begin_[key_of(r, op)] = d.begin;
      queue_.push(Event{end.ns(), r, op, post.ns()});
    }
  }

  static std::uint64_t key_of(std::uint32_t r, std::uint32_t op) { return (std::uint64_t{r} << 32) | op; }

  void add_rank(int rank) {
    RankState st;
    st.rank = rank;
    st.stage = program_.stage_of(rank);
    sim_index_[static_cast<std::size_t>(rank)] = static_cast<std::uint32_t>(ranks_.size());
    st.mem = program_.roles[static_cast<std::size_t>(st.stage)].static_bytes;
    st.slot_base = static_cast<std::uint32_t>(p2p_.size());
    p2p_.resize(p2p_.size() + index_[static_cast<std::size_t>(st.stage)].recv_slots);
    ranks_.push_back(std::move(st));
    RankTimeline tl;
    tl.spans.reserve(program_.roles[static_cast<std::size_t>(ranks_.back().stage)].ops.size() *
                     static_cast<std::size_t>(opt_.steps));
    tl.rank = rank;
    tl.stage = ranks_.back().stage;
    tl.peak_bytes = ranks_.back().mem;
    if (opt_.record_memory) tl.memory.push_back({SimTime{}, tl.peak_bytes});
    timelines_.push_back(std::move(tl));
  }

  const RoleTemplate& role(std::uint32_t r) const {
    return program_.roles[static_cast<std::size_t>(ranks_[r].stage)];
  }

  // REQUIRES: end - begin == the op's duration (how complete() recovers `begin`).
  void push(std::uint32_t r, std::uint32_t op, SimTime end, SimTime post, SimTime begin) {
    (void)begin;
    queue_.push(Event{end.ns(), r, op, post.ns()});
  }

  void start_step(std::uint32_t r, SimTime now) {
    RankState& st = ranks_[r];
    const TemplateIndex& ix = index_[static_cast<std::size_t>(st.stage)];
    st.remaining = ix.initial;
    st.done = 0;
    for (std::uint32_t op : ix.roots) start(r, op, now);
  }

  void start(std::uint32_t r, std::uint32_t i, SimTime now) {
    RankState& st = ranks_[r];
    if (st.stopped) return;
    const Op& op = role(r).ops[i];
    const TemplateIndex& ix = index_[static_cast<std::size_t>(st.stage)];
    if (opt_.perturb && opt_.perturb->stops(st.rank, st.step, i, now)) {
      st.stopped = true;
      st.stop_op = i;
      st.stop_time = now;
      return;
    }
    switch (op.kind) {
      case OpKind::kCompute: {
        SimTime d = ix.duration[i];
        if (opt_.perturb) d = opt_.perturb->compute(st.rank, st.step, i, op, d);
        push(r, i, now + d, now, now);
        break;
      }
      case OpKind::kAlloc:
      case OpKind::kFree: {
        st.mem += op.kind == OpKind::kAlloc ? op.bytes : -op.bytes;
        RankTimeline& tl = timelines_[r];
        tl.peak_bytes = std::max(tl.peak_bytes, st.mem);
        if (opt_.record_memory) tl.memory.push_back({now, st.mem});
        finish_op(r, i, now, now, now, /*record=*/false);  // instantaneous: no event
        break;
      }
      case OpKind::kCollective: arrive(r, i, now); break;
      case OpKind::kSend: post_send(r, i, now); break;
      case OpKind::kRecv: post_recv(r, i, now); break;
    }
  }

  // Hands a complete collective to the flow network; false when it prices it statically.
  bool start_flows(const Op& op, int any_rank, const std::vector<OpMember>& members, SimTime begin) {
    if (!flows_) return false;
    const Placement& pl = program_.placement;
    const int n = pl.group_size(op.group);
    const int root = pl.group_root(op.group, any_rank);
    group_ranks_.resize(static_cast<std::size_t>(n));
    for (int k = 0; k < n; ++k) group_ranks_[static_cast<std::size_t>(k)] = pl.group_member(op.group, root, k);
    if (!flows_->handles(program_, op, group_ranks_)) return false;
    const std::uint64_t h = next_handle_++;
    Dynamic d;
    d.begin = begin;
    d.members = members;
    dynamic_.emplace(h, std::move(d));
    flows_->start(h, program_, op, group_ranks_, begin);
    return true;
  }

  void arrive(std::uint32_t r, std::uint32_t i, SimTime now) {
    RankState& st = ranks_[r];
    const Op& op = role(r).ops[i];
    const Placement& pl = program_.placement;
    // Symmetric runs simulate one rank per stage: the world group's members are those.
    const bool world = op.group == GroupKind::kWorld;
    const int expected = opt_.full ? pl.group_size(op.group) : world ? pl.pp : 1;
    st.last_coll = i;
    st.last_coll_step = st.step;
    st.last_coll_done = false;
    if (expected <= 1) {
      if (flows_ && pl.group_size(op.group) > 1) {
        const std::vector<OpMember> self{{r, i, now}};
        if (start_flows(op, st.rank, self, now)) return;
      }
      const SimTime d = index_[static_cast<std::size_t>(st.stage)].duration[i];
      push(r, i, now + d, now, now);
      return;
    }
    const CollKey key = world ? CollKey{-1, st.step, index_[static_cast<std::size_t>(st.stage)].seq[i]}
                              : CollKey{pl.group_root(op.group, st.rank), st.step, i};
    PendingColl& p = colls_[key];
    const double bytes = opt_.perturb ? opt_.perturb->collective_bytes(st.rank, st.step, i, op) : op.bytes;
    if (p.arrived == 0) p.bytes = bytes;
    else if (bytes != p.bytes) p.mismatch = true;
    ++p.arrived;
    p.last = std::max(p.last, now);
    p.members.push_back({r, i, now});
    if (p.arrived < expected) return;
    if (p.mismatch) {  // members disagree: the collective never completes
      std::vector<std::pair<int, double>> sizes;
      for (const auto& [m, mi, arrival] : p.members) {
        sizes.emplace_back(ranks_[m].rank,
                           opt_.perturb ? opt_.perturb->collective_bytes(ranks_[m].rank, st.step, mi, op) : op.bytes);
      }
      std::sort(sizes.begin(), sizes.end());
      std::map<double, std::vector<int>> by_size;
      for (const auto& [rk, b] : sizes) by_size[b].push_back(rk);
      std::string detail;
      for (const auto& [b, rs] : by_size) {
        detail += fmt::format("{}{} {} bytes", detail.empty() ? "" : "; ", rank_ranges(rs), b);
      }
      mismatches_.push_back(
          fmt::format("{} #{} '{}' on the {} group of rank {} (step {}): members passed different sizes: {}",
                      to_string(op.coll), index_[static_cast<std::size_t>(st.stage)].seq[i], program_.names[op.name],
                      to_string(op.group), pl.group_root(op.group, st.rank), st.step, detail));
      return;  // stays pending: a hang
    }
    if (start_flows(op, st.rank, p.members, p.last)) {
      colls_.erase(key);
      return;
    }
    SimTime d = index_[static_cast<std::size_t>(st.stage)].duration[i];
    if (opt_.perturb) {
      const int root = pl.group_root(op.group, st.rank);
      group_ranks_.resize(static_cast<std::size_t>(pl.group_size(op.group)));
      for (int k = 0; k < pl.group_size(op.group); ++k) {
        group_ranks_[static_cast<std::size_t>(k)] = pl.group_member(op.group, root, k);
      }
      const SimTime nominal = d;
      d = opt_.perturb->comm(group_ranks_, op, d);
      if (d != nominal) {
        for (const auto& [m, mi, arrival] : p.members) dyn_begin_[key_of(m, mi)] = p.last;
      }
    }
    for (const auto& [m, mi, arrival] : p.members) push(m, mi, p.last + d, arrival, p.last);
    colls_.erase(key);
  }

  // The slot of the receive that op `i` (a send or a receive) of sim rank `r` feeds, or
  // nullptr for a send nobody simulated receives.
  P2pSlot* p2p_slot(std::uint32_t r, std::uint32_t i) {
    const RankState& st = ranks_[r];
    const std::uint32_t slot = index_[static_cast<std::size_t>(st.stage)].p2p_slot[i];
    const Op& op = role(r).ops[i];
    if (op.kind == OpKind::kRecv) return &p2p_[st.slot_base + slot];
    const std::uint32_t dst = sim_index_[static_cast<std::size_t>(program_.placement.stage_peer(st.rank, op.peer_stage))];
    if (slot == kNoSlot || dst == UINT32_MAX) return nullptr;
    return &p2p_[ranks_[dst].slot_base + slot];
  }

  void post_send(std::uint32_t r, std::uint32_t i, SimTime now) {
    // The send does not block its stream: it completes for its rank at once (its span,
    // the transfer, is recorded when the matching recv is posted). A send that no simulated
    // receive takes is never recorded.
    if (P2pSlot* slot = p2p_slot(r, i)) {
      PendingP2p& p = slot->find_or_add(ranks_[r].step);
      p.sent = true;
      p.send_post = now;
      p.send_rank = r;
      p.send_op = i;
      p.send_step = ranks_[r].step;
      if (p.received) match(*slot, p);
    }
    finish_op(r, i, now, now, now, /*record=*/false);
  }

  void post_recv(std::uint32_t r, std::uint32_t i, SimTime now) {
    P2pSlot& slot = *p2p_slot(r, i);
    PendingP2p& p = slot.find_or_add(ranks_[r].step);
    p.received = true;
    p.recv_post = now;
    p.recv_rank = r;
    p.recv_op = i;
    if (p.sent) match(slot, p);
  }

  void match(P2pSlot& slot, PendingP2p& p) {
    const std::uint32_t r = p.recv_rank;
    const Op& recv = role(r).ops[p.recv_op];
    const int pair[2] = {program_.placement.stage_peer(ranks_[r].rank, recv.peer_stage), ranks_[r].rank};  // src, dst
    const SimTime begin = std::max(p.send_post, p.recv_post);
    if (flows_ && flows_->handles(program_, recv, pair)) {
      // The sender's span is not recorded for flow transfers (its stream never waited).
      const std::uint64_t h = next_handle_++;
      Dynamic d;
      d.begin = begin;
      d.members.push_back({r, p.recv_op, p.recv_post});
      dynamic_.emplace(h, std::move(d));
      flows_->start(h, program_, recv, pair, begin);
      slot.erase(p);
      return;
    }
    SimTime d = index_[static_cast<std::size_t>(ranks_[r].stage)].duration[p.recv_op];
    if (opt_.perturb) {
      const SimTime nominal = d;
      d = opt_.perturb->comm(pair, recv, d);
      if (d != nominal) dyn_begin_[key_of(r, p.recv_op)] = begin;
    }
    push(r, p.recv_op, begin + d, p.recv_post, begin);
    // The sender's span shows the transfer (its stream was not blocked).
    Span s{p.send_post, begin, begin + d, p.send_op, static_cast<std::uint16_t>(p.send_step),
           role(p.send_rank).ops[p.send_op].stream};
    send_spans_.push_back({p.send_rank, s});
    slot.erase(p);
  }

  void complete(const Event& e) {
    const SimTime end = SimTime::from_ns(e.time);
    const Op& op = role(e.rank).ops[e.op];
    // Compute ops begin when posted; communication began `duration` before its end unless
    // the flow network or a perturbation set it.
    SimTime begin = op.kind == OpKind::kCompute ? SimTime::from_ns(e.post)
                                                : end - index_[static_cast<std::size_t>(ranks_[e.rank].stage)].duration[e.op];
    if (!dyn_begin_.empty()) {
      if (auto it = dyn_begin_.find(key_of(e.rank, e.op)); it != dyn_begin_.end()) {
        begin = it->second;
        dyn_begin_.erase(it);
      }
    }
    finish_op(e.rank, e.op, end, SimTime::from_ns(e.post), begin, /*record=*/true);
  }

  // Marks op `i` of sim rank `r` done at `now` and starts the ops it releases, in
  // dependents order (deterministic).
  void finish_op(std::uint32_t r, std::uint32_t i, SimTime now, SimTime post, SimTime begin, bool record) {
    ++events_;
    RankState& st = ranks_[r];
    const RoleTemplate& rl = role(r);
    const Op& op = rl.ops[i];
    if (record) {
      timelines_[r].spans.push_back(Span{post, begin, now, i, static_cast<std::uint16_t>(st.step), op.stream});
    }
    if (op.kind == OpKind::kCollective && st.last_coll == i) st.last_coll_done = true;
    const TemplateIndex& ix = index_[static_cast<std::size_t>(st.stage)];
    for (std::uint32_t k = ix.dep_begin[i]; k < ix.dep_begin[i + 1]; ++k) {
      const std::uint32_t d = ix.dependents[k];
      if (--st.remaining[d] == 0) start(r, d, now);
    }
    if (++st.done == rl.ops.size()) {
      timelines_[r].step_end.push_back(now);
      if (st.step + 1 < opt_.steps) {
        ++st.step;
        start_step(r, now);
      } else {
        st.step = opt_.steps;  // finished
      }
    }
  }

  void finish(SimOutput& out) {
    // Sender spans go to their ranks, then every rank's spans in (end, op) order is not
    // needed: completion order is already deterministic.
    for (auto& [r, s] : send_spans_) timelines_[r].spans.push_back(s);
    out.timeline.step_end.assign(static_cast<std::size_t>(opt_.steps), SimTime{});
    std::vector<std::string> blocked;
    for (std::uint32_t r = 0; r < ranks_.size(); ++r) {
      const RankState& st = ranks_[r];
      RankTimeline& tl = timelines_[r];
      for (std::size_t k = 0; k < tl.step_end.size(); ++k) {
        out.timeline.step_end[k] = std::max(out.timeline.step_end[k], tl.step_end[k]);
      }
      if (st.step < opt_.steps) out.deadlock = true;
    }
    if (out.deadlock) out.deadlock_report = deadlock_report();
    out.mismatches = mismatches_;
    // Ascending rank order.
    std::vector<std::uint32_t> order(ranks_.size());
    for (std::uint32_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](auto a, auto b) { return ranks_[a].rank < ranks_[b].rank; });
    for (auto i : order) out.timeline.ranks.push_back(std::move(timelines_[i]));
  }

  // "0-3,5,7-9": ascending ranks as ranges.
  static std::string rank_ranges(std::vector<int> ranks) {
    std::sort(ranks.begin(), ranks.end());
    ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
    std::string out;
    for (std::size_t i = 0; i < ranks.size();) {
      std::size_t j = i;
      while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
      if (!out.empty()) out += ",";
      out += j == i ? std::to_string(ranks[i]) : fmt::format("{}-{}", ranks[i], ranks[j]);
      i = j + 1;
    }
    return out;
  }

  std::string coll_label(std::uint32_t r, std::uint32_t op_index) const {
    const Op& op = role(r).ops[op_index];
    return fmt::format("{} #{} '{}' on the {} group", to_string(op.coll),
                       index_[static_cast<std::size_t>(ranks_[r].stage)].seq[op_index], program_.names[op.name],
                       to_string(op.group));
  }

  // The hang report: ranks grouped by what they are stuck on (same template op, same step),
  // so that thousands of ranks read in a few lines.
  std::string deadlock_report() const {
    const Placement& pl = program_.placement;
    // Where each waiting rank is: its pending collective (with the group's missing ranks)
    // or its unmatched recv.
    std::map<std::uint32_t, std::string> state;        // sim rank -> what it waits in
    std::map<std::uint32_t, std::vector<int>> missing;  // sim rank -> ranks its group lacks
    std::map<std::tuple<int, int, std::uint32_t>, const PendingColl*> colls;  // sorted
    for (const auto& [k, p] : colls_) colls[{k.root, k.step, k.op}] = &p;
    for (const auto& [k, p] : colls) {
      const int step = std::get<1>(k);
      const OpMember& first = p->members.front();
      const Op& op = role(first.rank).ops[first.op];
      const int root = pl.group_root(op.group, ranks_[first.rank].rank);
      std::vector<int> arrived;
      for (const auto& m : p->members) arrived.push_back(ranks_[m.rank].rank);
      std::sort(arrived.begin(), arrived.end());
      // A symmetric run's rank stands for its stage's ranks (the world group's case).
      std::vector<bool> stage_arrived(static_cast<std::size_t>(pl.pp), false);
      for (int a : arrived) stage_arrived[static_cast<std::size_t>(pl.coords(a).p)] = true;
      std::vector<int> lack;
      for (int i = 0; i < pl.group_size(op.group); ++i) {
        const int member = pl.group_member(op.group, root, i);
        const bool present = opt_.full ? std::binary_search(arrived.begin(), arrived.end(), member)
                                       : stage_arrived[static_cast<std::size_t>(pl.coords(member).p)];
        if (!present) lack.push_back(member);
      }
      for (const auto& m : p->members) {
        state[m.rank] = fmt::format("in {} (step {}){}", coll_label(m.rank, m.op), step,
                                    p->mismatch ? ", whose members passed different sizes" : "");
        missing[m.rank] = lack;
      }
    }
    std::map<std::tuple<int, int, int, std::uint32_t>, const PendingP2p*> p2ps;
    for (const P2pSlot& slot : p2p_) {
      for (std::size_t k = 0; k <= slot.more.size(); ++k) {
        const PendingP2p& p = k == 0 ? slot.first : slot.more[k - 1];
        if (p.step < 0 || !p.received) continue;
        const Op& recv = role(p.recv_rank).ops[p.recv_op];
        const int dst = ranks_[p.recv_rank].rank;
        p2ps[{pl.stage_peer(dst, recv.peer_stage), dst, p.step, recv.tag}] = &p;
      }
    }
    for (const auto& [k, p] : p2ps) {
      const auto [src, dst, step, tag] = k;
      if (p->received) {
        state[p->recv_rank] = fmt::format("in recv '{}' from its stage-{} peer (step {})",
                                          program_.names[role(p->recv_rank).ops[p->recv_op].name],
                                          pl.coords(src).p, step);
        missing[p->recv_rank] = {src};
      }
    }
    struct Line {
      std::vector<int> ranks;
      std::vector<int> never;
    };
    std::map<std::string, Line> lines;
    for (std::uint32_t r = 0; r < ranks_.size(); ++r) {
      const RankState& st = ranks_[r];
      if (st.step >= opt_.steps) continue;  // finished
      std::string what;
      if (st.stopped) {
        what = fmt::format("stopped before '{}' (step {}) at {:.6f} s", program_.names[role(r).ops[st.stop_op].name],
                           st.step, st.stop_time.seconds());
      } else if (auto it = state.find(r); it != state.end()) {
        what = it->second;
      } else {
        what = fmt::format("blocked in step {} behind its own unfinished work", st.step);
      }
      if (st.last_coll != UINT32_MAX && !(state.count(r) && st.last_coll_step == st.step && !st.last_coll_done)) {
        what += fmt::format("; last collective entered: {} (step {}, {})", coll_label(r, st.last_coll),
                            st.last_coll_step, st.last_coll_done ? "completed" : "pending");
      }
      Line& l = lines[what];
      l.ranks.push_back(st.rank);
      if (auto it = missing.find(r); it != missing.end()) l.never.insert(l.never.end(), it->second.begin(), it->second.end());
    }
    std::vector<std::pair<int, std::string>> sorted;
    for (const auto& [what, l] : lines) {
      std::string text = fmt::format("{} {} ({}): {}", l.ranks.size() == 1 ? "rank" : "ranks", rank_ranges(l.ranks),
                                     l.ranks.size() == 1 ? fmt::format("node {}", pl.node(l.ranks.front()))
                                                         : fmt::format("{} ranks", l.ranks.size()),
                                     what);
      if (!l.never.empty()) text += "; never arrived: " + rank_ranges(l.never);
      sorted.emplace_back(*std::min_element(l.ranks.begin(), l.ranks.end()), std::move(text));
    }
    std::sort(sorted.begin(), sorted.end());
    std::string out = "hang: the program cannot finish";
    if (sorted.empty()) out += "\n  ranks stopped with unfinished ops but nothing pending (inconsistent dependencies)";
    for (const auto& [first, text] : sorted) out += "\n  " + text;
    for (const auto& m : mismatches_) out += "\n  collective mismatch: " + m;
    return out;
  }

  struct Dynamic {
    SimTime begin;
    std::vector<OpMember> members;
  };

  const Program& program_;
  EngineOptions opt_;
  FlowNetwork* flows_ = nullptr;
  std::uint64_t next_handle_ = 0;
  std::map<std::uint64_t, Dynamic> dynamic_;
  std::unordered_map<std::uint64_t, SimTime> dyn_begin_;
  std::vector<int> group_ranks_;
  std::vector<std::string> mismatches_;
  std::vector<TemplateIndex> index_;
  std::vector<std::uint32_t> sim_index_;
  std::vector<RankState> ranks_;
  std::vector<RankTimeline> timelines_;
  EventQueue queue_;
  std::uint64_t events_ = 0;
  std::unordered_map<CollKey, PendingColl, CollKeyHash> colls_;
  std::vector<P2pSlot> p2p_;  // every simulated rank's receive slots (RankState::slot_base)
  std::vector<std::pair<std::uint32_t, Span>> send_spans_;
};

}  // namespace

SimOutput simulate(const Program& program, NetworkBackend& backend, const EngineOptions& options) {
  Engine engine(program, backend, options);
  return engine.run();
}

}  // namespace stepcast::sim

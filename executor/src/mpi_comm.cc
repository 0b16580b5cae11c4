#include "mpi_comm.h"

#include <mpi.h>

#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "stepcast/executor/cpu_device.h"

namespace stepcast::exec {

namespace {

void check(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  throw std::runtime_error(fmt::format("rank {}: {} failed: {}", rank, call, std::string(msg, static_cast<std::size_t>(len))));
}
#define STEPCAST_MPI(call) check((call), #call)

struct MpiRuntime {
  MpiRuntime() {
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
      int provided = 0;
      MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
      owned = true;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  }
  ~MpiRuntime() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (owned && !finalized) MPI_Finalize();
  }
  bool owned = false;
};

MpiRuntime& runtime() {
  static MpiRuntime rt;
  return rt;
}

class RequestEvent final : public Event {
 public:
  explicit RequestEvent(MPI_Request r) : req_(r) {}
  bool done() override {
    if (done_) return true;
    int flag = 0;
    STEPCAST_MPI(MPI_Test(&req_, &flag, MPI_STATUS_IGNORE));
    if (flag) {
      done_ = true;
      time_ = host_now_s();
    }
    return done_;
  }
  void wait() override {
    // Poll with short sleeps: a blocked rank leaves its core to ranks that compute.
    for (int spins = 0; !done(); ++spins) {
      if (spins > 64) std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }
  double time_s() override {
    wait();
    return time_;
  }

 private:
  MPI_Request req_;
  bool done_ = false;
  double time_ = 0;
};

class MpiComm final : public Communicator {
 public:
  MpiComm() {
    runtime();
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &world_);
  }
  ~MpiComm() override {
    for (MPI_Comm& c : comms_) MPI_Comm_free(&c);
  }
  int rank() const override { return rank_; }
  int world() const override { return world_; }
  std::string describe() const override { return mpi_library_version(); }

  CommGroup create_group(int color) override {
    MPI_Comm c;
    STEPCAST_MPI(MPI_Comm_split(MPI_COMM_WORLD, color, rank_, &c));
    MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
    int n = 0, me = 0;
    MPI_Comm_size(c, &n);
    MPI_Comm_rank(c, &me);
    CommGroup g;
    g.members.resize(static_cast<std::size_t>(n));
    STEPCAST_MPI(MPI_Allgather(&rank_, 1, MPI_INT, g.members.data(), 1, MPI_INT, c));
    g.index = me;
    g.id = static_cast<int>(comms_.size());
    comms_.push_back(c);
    return g;
  }

  EventPtr collective(Device&, Stream, CollKind kind, const CommGroup& g, const Buffer& send,
                      const Buffer& recv) override {
    MPI_Comm c = comms_.at(static_cast<std::size_t>(g.id));
    MPI_Request r;
    const int n = g.size();
    void* out = recv.data;
    const void* in = send.data;
    switch (kind) {
      case CollKind::kAllReduce:
      case CollKind::kSendRecv:
        STEPCAST_MPI(MPI_Iallreduce(in, out, count(recv.count), MPI_FLOAT, MPI_SUM, c, &r));
        break;
      case CollKind::kAllGather:
        STEPCAST_MPI(MPI_Iallgather(in, count(send.count), MPI_FLOAT, out, count(send.count), MPI_FLOAT, c, &r));
        break;
      case CollKind::kReduceScatter:
        STEPCAST_MPI(MPI_Ireduce_scatter_block(in, out, count(recv.count), MPI_FLOAT, MPI_SUM, c, &r));
        break;
      case CollKind::kAllToAll:
        STEPCAST_MPI(MPI_Ialltoall(in, count(send.count / static_cast<std::size_t>(n)), MPI_FLOAT, out,
                                   count(recv.count / static_cast<std::size_t>(n)), MPI_FLOAT, c, &r));
        break;
      case CollKind::kBroadcast:
        if (g.index == 0) std::copy_n(static_cast<const float*>(in), recv.count, static_cast<float*>(out));
        STEPCAST_MPI(MPI_Ibcast(out, count(recv.count), MPI_FLOAT, 0, c, &r));
        break;
    }
    return std::make_shared<RequestEvent>(r);
  }

  EventPtr send(Device&, Stream, int peer, std::uint32_t tag, const Buffer& b) override {
    MPI_Request r;
    STEPCAST_MPI(MPI_Isend(b.data, count(b.count), MPI_FLOAT, peer, mpi_tag(tag), MPI_COMM_WORLD, &r));
    return std::make_shared<RequestEvent>(r);
  }
  EventPtr recv(Device&, Stream, int peer, std::uint32_t tag, const Buffer& b) override {
    MPI_Request r;
    STEPCAST_MPI(MPI_Irecv(b.data, count(b.count), MPI_FLOAT, peer, mpi_tag(tag), MPI_COMM_WORLD, &r));
    return std::make_shared<RequestEvent>(r);
  }

  void barrier() override { STEPCAST_MPI(MPI_Barrier(MPI_COMM_WORLD)); }

  std::vector<std::string> gather(const std::string& mine) override {
    int len = static_cast<int>(mine.size());
    std::vector<int> lens(static_cast<std::size_t>(world_));
    STEPCAST_MPI(MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, MPI_COMM_WORLD));
    std::vector<int> displs(static_cast<std::size_t>(world_), 0);
    std::string all;
    if (rank_ == 0) {
      int total = 0;
      for (std::size_t r = 0; r < lens.size(); ++r) {
        displs[r] = total;
        total += lens[r];
      }
      all.resize(static_cast<std::size_t>(total));
    }
    STEPCAST_MPI(MPI_Gatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(), MPI_CHAR, 0,
                             MPI_COMM_WORLD));
    if (rank_ != 0) return {};
    std::vector<std::string> out;
    for (std::size_t r = 0; r < lens.size(); ++r) {
      out.push_back(all.substr(static_cast<std::size_t>(displs[r]), static_cast<std::size_t>(lens[r])));
    }
    return out;
  }

  double max_all(double x) override {
    double m = 0;
    STEPCAST_MPI(MPI_Allreduce(&x, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
    return m;
  }

 private:
  static int count(std::size_t n) {
    if (n > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
      throw std::runtime_error(fmt::format("buffer of {} elements exceeds MPI's int count", n));
    }
    return static_cast<int>(n);
  }
  static int mpi_tag(std::uint32_t tag) {
    int* ub = nullptr;
    int flag = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
    const std::uint32_t limit = flag && ub ? static_cast<std::uint32_t>(*ub) : 32767u;
    return static_cast<int>(tag % limit);
  }
  int rank_ = 0, world_ = 1;
  std::vector<MPI_Comm> comms_;
};

}  // namespace

std::string mpi_library_version() {
  char v[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(v, &len);
  std::string s(v, static_cast<std::size_t>(len));
  const auto nl = s.find_first_of("\n,");
  return s.substr(0, nl);
}

std::unique_ptr<Communicator> make_mpi_communicator() { return std::make_unique<MpiComm>(); }

}  // namespace stepcast::exec

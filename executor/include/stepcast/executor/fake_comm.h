// An in-memory Communicator for unit tests of the runner: the ranks of one FakeWorld are
// threads of one process, buffers are host f32 (use it with the cpu Device). Collectives
// are non-blocking like NCCL's: a rank deposits its data and goes on; the collective
// completes, with exact results, when the last member has deposited.
#pragma once

#include <memory>

#include "stepcast/executor/backend.h"

namespace stepcast::exec {

class FakeWorld {
 public:
  explicit FakeWorld(int ranks);
  ~FakeWorld();
  FakeWorld(const FakeWorld&) = delete;
  FakeWorld& operator=(const FakeWorld&) = delete;
  // The communicator of `rank`; call once per rank, use from that rank's thread.
  std::unique_ptr<Communicator> communicator(int rank);

  struct State;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace stepcast::exec

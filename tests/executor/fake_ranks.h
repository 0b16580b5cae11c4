// Ranks as threads of one exec::FakeWorld, for the executor's unit tests (trainer,
// checkpoint store): each rank gets its communicator and a cpu device.
#pragma once

#include <exception>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "stepcast/executor/cpu_device.h"
#include "stepcast/executor/fake_comm.h"

namespace stepcast::exec {

// Runs body(rank, comm, device) on `n` threads of one fake world; rethrows the first
// rank's error (in rank order) after every thread has ended.
inline void on_ranks(int n, const std::function<void(int, Communicator&, Device&)>& body) {
  FakeWorld world(n);
  std::vector<std::unique_ptr<Communicator>> comms;
  for (int r = 0; r < n; ++r) comms.push_back(world.communicator(r));
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        auto dev = make_cpu_device();
        body(r, *comms[static_cast<std::size_t>(r)], *dev);
      } catch (...) {
        errors[static_cast<std::size_t>(r)] = std::current_exception();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const std::exception_ptr& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

}  // namespace stepcast::exec

#include "stepcast/executor/launch.h"

#include <unistd.h>

#include <array>
#include <cstdlib>
#include <stdexcept>

#include <fmt/format.h>

namespace stepcast::exec {

namespace {

int parse(const char* name, const char* v, int min) {
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  if (end == v || *end != '\0' || x < min || x > 1'000'000) {
    throw std::invalid_argument(fmt::format("{}: \"{}\" is not an integer >= {}", name, v, min));
  }
  return static_cast<int>(x);
}

struct Scheme {
  const char* source;
  const char* rank;
  const char* world;
  const char* local;   // may be absent
};

}  // namespace

LaunchInfo detect_launch(const std::function<const char*(const char*)>& getenv) {
  static constexpr std::array<Scheme, 4> kSchemes = {{
      {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
      {"PMI", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"},
      {"Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
      {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
  }};
  for (const Scheme& s : kSchemes) {
    const char* r = getenv(s.rank);
    const char* w = getenv(s.world);
    if (!r || !w) continue;
    LaunchInfo li;
    li.source = s.source;
    li.rank = parse(s.rank, r, 0);
    li.world = parse(s.world, w, 1);
    if (li.rank >= li.world) {
      throw std::invalid_argument(fmt::format("{}: {} is not below {} ({})", s.rank, li.rank, s.world, li.world));
    }
    const char* l = getenv(s.local);
    li.local_rank = l ? parse(s.local, l, 0) : 0;
    return li;
  }
  return {};
}

LaunchInfo detect_launch() {
  return detect_launch([](const char* n) { return std::getenv(n); });
}

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

}  // namespace stepcast::exec

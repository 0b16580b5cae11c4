// The checkpoint store (checkpoint_store.h): writing side. Every rank writes its shard,
// rank 0 commits the generation with manifest.json and collects garbage. The reading side
// (manifest parsing, verify, load, reshard plans) is checkpoint_store_load.cc.
//
// Shard file DIR/gen-<10 digits>/shard-<5 digits>.bin. Integers and floats are
// little-endian (IEEE-754 binary32 / binary64):
//   offset  size  field
//   0       8     magic "STEPCKPT"
//   8       4     u32 shard format version (2; version 1 is read too)
//   12      4     u32 rank of the writing layout
//   16      4     u32 tp
//   20      4     u32 dp
//   24      4     u32 zero1 (0 or 1)
//   28      4     u32 parts present: bit i set <=> StatePart i was saved
//   32      ...   the scalars of the present scalar parts, in StatePart order:
//                   kLrScheduler  i64 scheduler_step
//                   kGradScaler   f64 loss_scale, i64 loss_scale_growth
//                   kRng          u64 rng_seed, u64 rng_counter
//                   kDataSampler  u64 sampler_seed, i64 sampler_epoch, i64 sampler_position
//                   kStep         i64 step
//                   kConfig       u64 n, then n bytes of config_json
//           8     u64 number of pieces P
//   H       ...   the P pieces' data back to back, each rows * cols elements, row-major,
//                 of its dtype: f32, or bf16 (the upper half of the f32 rounded to
//                 nearest even: 2 bytes an element)
// Bytes [0, H) are the header. The shard does not describe its pieces: the manifest does
// (a piece is read by its byte offset), so a loader reads only what it needs.
//
// Deduplicated save: a piece of TensorPiece::replicas > 1 (the same rectangle held by that
// many ranks) is written as this rank's share only (share_of(): a block of its rows, else
// of its columns, else the whole piece by replica 0), a rectangle of its own in the
// manifest. Every element of a replicated tensor is thus in exactly one shard, and the
// replicas' shards hold equal parts of it (models/src/reliability.cc checkpoint_cost).
//
// manifest.json (written by rank 0 after every shard is durable; its rename commits):
//   {"format": 2, "kind": "stepcast-checkpoint", "generation": 20,
//    "layout": {"tp": 2, "dp": 2, "zero1": false},
//    "contents": ["model", "optimizer", ...],          // state_part_name(), StatePart order
//    "shards": [{"rank": 0, "file": "shard-00000.bin", "bytes": 4096, "crc32": 1234,
//                "header_bytes": 120, "header_crc32": 5678,
//                "pieces": [{"name": "w.a", "global_shape": [4, 6], "row0": 0, "rows": 2,
//                            "col0": 0, "cols": 3, "dtype": "bf16", "offset": 120,
//                            "crc32": 91011}, ...]},
//               ...]}                                 // one per rank, in rank order
// crc32 is CRC-32/IEEE (zlib's) of the whole file, header_crc32 of bytes [0, H), a
// piece's crc32 of its bytes as stored (rows * cols * 4 for "f32", * 2 for "bf16"). A
// format 1 manifest has no "dtype" (every piece f32).
#include "stepcast/executor/checkpoint_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <limits>
#include <optional>
#include <set>
#include <stdexcept>
#include <system_error>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <zlib.h>

#include "checkpoint_store_format.h"

namespace stepcast::exec {

namespace checkpoint_detail {

// CRC-32/IEEE (reflected polynomial 0xEDB88320), zlib's: its braided implementation runs at
// several GB/s, so checksumming is not what a save's time measures (docs/checkpoints.md).
std::uint32_t crc32(std::uint32_t crc, const void* data, std::size_t n) {
  return static_cast<std::uint32_t>(::crc32_z(crc, static_cast<const Bytef*>(data), n));
}

// The CRC of A followed by B from their CRCs and B's length (zlib's crc32_combine).
std::uint32_t crc32_combine(std::uint32_t crc_a, std::uint32_t crc_b, std::uint64_t bytes_b) {
  return static_cast<std::uint32_t>(::crc32_combine64(crc_a, crc_b, static_cast<z_off64_t>(bytes_b)));
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string gen_name(std::int64_t generation) { return fmt::format("gen-{:010d}", generation); }
std::string shard_name(int rank) { return fmt::format("shard-{:05d}.bin", rank); }
std::string path_join(const std::string& dir, const std::string& name) { return (std::filesystem::path(dir) / name).string(); }

std::uint32_t parts_mask(const std::vector<StatePart>& parts) {
  std::uint32_t m = 0;
  for (StatePart p : parts) m |= 1U << static_cast<int>(p);
  return m;
}
bool has_part(std::uint32_t mask, StatePart p) { return (mask & (1U << static_cast<int>(p))) != 0; }
std::vector<StatePart> parts_of(std::uint32_t mask) {
  std::vector<StatePart> out;
  for (StatePart p : kAllStateParts) {
    if (has_part(mask, p)) out.push_back(p);
  }
  return out;
}

bool same_layout(const TrainLayout& a, const TrainLayout& b) {
  return a.tp == b.tp && a.dp == b.dp && a.zero1 == b.zero1;
}

[[noreturn]] void fail_errno(const std::string& path, const char* what) {
  const int e = errno;
  // std::generic_category's message is thread-safe (strerror need not be).
  throw std::runtime_error(fmt::format("{}: {}: {}", path, what, std::generic_category().message(e)));
}

Fd::~Fd() {
  if (fd_ >= 0) ::close(fd_);
}

void Fd::close_checked(const std::string& path) {
  const int fd = std::exchange(fd_, -1);
  if (fd >= 0 && ::close(fd) != 0) fail_errno(path, "close");
}

Fd open_checked(const std::string& path, int flags, const char* what) {
  int fd = -1;
  do {
    fd = ::open(path.c_str(), flags | O_CLOEXEC, 0644);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) fail_errno(path, what);
  return Fd(fd);
}

std::string shard_header(const RankState& s, std::uint32_t mask, std::uint64_t pieces) {
  ByteWriter w;
  w.bytes(kShardMagic.data(), kShardMagic.size());
  w.u32(kShardFormat);
  w.u32(static_cast<std::uint32_t>(s.rank));
  w.u32(static_cast<std::uint32_t>(s.layout.tp));
  w.u32(static_cast<std::uint32_t>(s.layout.dp));
  w.u32(s.layout.zero1 ? 1U : 0U);
  w.u32(mask);
  const TrainScalars& c = s.scalars;
  if (has_part(mask, StatePart::kLrScheduler)) w.i64(c.scheduler_step);
  if (has_part(mask, StatePart::kGradScaler)) {
    w.f64(c.loss_scale);
    w.i64(c.loss_scale_growth);
  }
  if (has_part(mask, StatePart::kRng)) {
    w.u64(c.rng_seed);
    w.u64(c.rng_counter);
  }
  if (has_part(mask, StatePart::kDataSampler)) {
    w.u64(c.sampler_seed);
    w.i64(c.sampler_epoch);
    w.i64(c.sampler_position);
  }
  if (has_part(mask, StatePart::kStep)) w.i64(c.step);
  if (has_part(mask, StatePart::kConfig)) {
    w.u64(s.config_json.size());
    w.bytes(s.config_json.data(), s.config_json.size());
  }
  w.u64(pieces);
  return std::move(w.out);
}

}  // namespace checkpoint_detail

using namespace checkpoint_detail;

namespace {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

// ---------------------------------------------------------------------------------------
// Fault injection

const std::vector<std::string> kCrashPoints = {
    "shard-open",       "shard-partial",          "shard-before-fsync",
    "shard-before-rename", "shard-after-rename",  "manifest-partial",
    "manifest-before-rename", "manifest-after-rename", "gc"};

// Where a save is: the crash point is matched against it.
struct Site {
  const CrashPoint* crash;
  int rank;
  std::int64_t generation;
  bool matches(const char* point) const {
    return !crash->point.empty() && crash->point == point && (crash->rank < 0 || crash->rank == rank) &&
           (crash->generation < 0 || crash->generation == generation);
  }
};

[[noreturn]] void die() {
  std::raise(SIGKILL);
  std::abort();   // not reached: SIGKILL cannot be caught or blocked
}

void crash_at(const Site& site, const char* point) {
  if (site.matches(point)) die();
}

// Bytes to write before dying at a "-partial" point (the file is always torn), or -1.
std::int64_t kill_offset(const Site& site, const char* point, std::uint64_t size) {
  if (!site.matches(point)) return -1;
  const auto last = static_cast<std::int64_t>(size) - 1;
  return std::clamp<std::int64_t>(site.crash->byte_offset, 0, std::max<std::int64_t>(last, 0));
}

// ---------------------------------------------------------------------------------------
// POSIX file operations: every failure throws, naming the path

void write_all(int fd, const char* p, std::size_t n, const std::string& path) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      fail_errno(path, "write");
    }
    p += w;
    n -= static_cast<std::size_t>(w);
  }
}

void fsync_fd(int fd, const std::string& path) {
  if (::fsync(fd) != 0) fail_errno(path, "fsync");
}

// A rename or create inside `dir` is durable only once the directory itself is synced.
void fsync_dir(const std::string& dir) {
  Fd fd = open_checked(dir, O_RDONLY | O_DIRECTORY, "open the directory");
  fsync_fd(fd.get(), dir);
  fd.close_checked(dir);
}

void rename_checked(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) {
    const int e = errno;   // before anything that allocates
    throw std::runtime_error(fmt::format("{}: rename to {}: {}", from, to, std::generic_category().message(e)));
  }
}

void unlink_checked(const std::string& path) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) fail_errno(path, "unlink");
}

void make_dirs(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw std::runtime_error(fmt::format("{}: cannot create the directory: {}", dir, ec.message()));
}

std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    names.push_back(it->path().filename().string());
  }
  if (ec) throw std::runtime_error(fmt::format("{}: cannot list the directory: {}", dir, ec.message()));
  std::sort(names.begin(), names.end());
  return names;
}

// Appends to a file while computing its CRC-32; dies after `kill_at` bytes when >= 0.
class CrcWriter {
 public:
  CrcWriter(int fd, std::string path, std::int64_t kill_at) : fd_(fd), path_(std::move(path)), kill_at_(kill_at) {}
  void write(const void* data, std::size_t n) { write(data, n, crc32(0, data, n)); }
  // `crc`: the CRC-32 of the n bytes, already computed (each byte is checksummed once).
  void write(const void* data, std::size_t n, std::uint32_t crc) {
    const char* p = static_cast<const char*>(data);
    if (kill_at_ >= 0 && static_cast<std::uint64_t>(kill_at_) < offset_ + n) {
      write_all(fd_, p, static_cast<std::size_t>(static_cast<std::uint64_t>(kill_at_) - offset_), path_);
      die();
    }
    write_all(fd_, p, n, path_);
    crc_ = crc32_combine(crc_, crc, n);
    offset_ += n;
  }
  std::uint64_t offset() const { return offset_; }
  std::uint32_t crc() const { return crc_; }

 private:
  int fd_;
  std::string path_;
  std::int64_t kill_at_;
  std::uint64_t offset_ = 0;
  std::uint32_t crc_ = 0;
};

// ---------------------------------------------------------------------------------------
// Writing a shard (any thread: no Communicator calls)

// What a rank's write needs; copied into the background thread of an async save.
struct WriteJob {
  std::string dir;
  std::int64_t generation = 0;
  int rank = 0;
  int world = 1;
  std::uint32_t mask = 0;
  CrashPoint crash;
};

void check_piece(const TensorPiece& p) {
  const bool ok = p.global_rows >= 0 && p.global_cols >= 0 && p.row0 >= 0 && p.rows >= 0 && p.col0 >= 0 &&
                  p.cols >= 0 && p.row0 <= p.global_rows - p.rows && p.col0 <= p.global_cols - p.cols &&
                  (p.rows == 0 || p.cols <= kMaxElements / p.rows) &&
                  p.data.size() == static_cast<std::size_t>(p.rows * p.cols);
  if (!ok) {
    throw std::invalid_argument(fmt::format(
        "checkpoint: piece {} rows [{}, +{}) x cols [{}, +{}) of {} x {} with {} floats is not a rectangle "
        "of its tensor",
        p.name, p.row0, p.rows, p.col0, p.cols, p.global_rows, p.global_cols, p.data.size()));
  }
  if (p.replicas < 1 || p.replica < 0 || p.replica >= p.replicas) {
    throw std::invalid_argument(fmt::format("checkpoint: piece {}: replica {} of {} replicas", p.name, p.replica,
                                            p.replicas));
  }
}

// The part of a piece this rank writes: rows [r0, r0 + rows) x cols [c0, c0 + cols) of the
// piece (offsets inside it, not global).
struct Share {
  const TensorPiece* piece = nullptr;
  std::int64_t r0 = 0, rows = 0, c0 = 0, cols = 0;
};

// Block `i` of `n` near-equal consecutive blocks of `len` (the first len % n one longer).
std::pair<std::int64_t, std::int64_t> even_block(std::int64_t len, int n, int i) {
  const std::int64_t base = len / n, extra = len % n;
  return {i * base + std::min<std::int64_t>(i, extra), base + (i < extra ? 1 : 0)};
}

// TensorPiece::replicas' rule: this rank's share of `p`, or none.
std::optional<Share> share_of(const TensorPiece& p) {
  if (p.replicas <= 1) return Share{&p, 0, p.rows, 0, p.cols};
  if (p.rows >= p.replicas) {
    const auto [r0, n] = even_block(p.rows, p.replicas, p.replica);
    return Share{&p, r0, n, 0, p.cols};
  }
  if (p.cols >= p.replicas) {
    const auto [c0, n] = even_block(p.cols, p.replicas, p.replica);
    return Share{&p, 0, p.rows, c0, n};
  }
  if (p.replica == 0) return Share{&p, 0, p.rows, 0, p.cols};
  return std::nullopt;
}

// The shares this rank writes of the pieces of the saved parts, checked.
std::vector<Share> saved_shares(const RankState& s, std::uint32_t mask) {
  std::vector<Share> out;
  for (const TensorPiece& p : s.pieces) {
    if (!has_part(mask, tensor_part(p.name))) continue;
    check_piece(p);
    if (const std::optional<Share> sh = share_of(p)) out.push_back(*sh);
  }
  return out;
}

std::uint64_t stored_bytes(const Share& sh) {
  return static_cast<std::uint64_t>(sh.rows * sh.cols) * (sh.piece->bf16 ? 2U : 4U);
}

// A share's bytes as stored: its rows of the piece, f32 as in memory or rounded to bf16.
void encode(const Share& sh, std::string& out) {
  const TensorPiece& p = *sh.piece;
  out.resize(stored_bytes(sh));
  char* dst = out.data();
  for (std::int64_t r = sh.r0; r < sh.r0 + sh.rows; ++r) {
    const float* src = p.data.data() + r * p.cols + sh.c0;
    if (!p.bf16) {
      std::memcpy(dst, src, static_cast<std::size_t>(sh.cols) * sizeof(float));
      dst += sh.cols * static_cast<std::int64_t>(sizeof(float));
      continue;
    }
    for (std::int64_t c = 0; c < sh.cols; ++c, dst += 2) {
      const std::uint16_t h = to_bf16(src[c]);
      std::memcpy(dst, &h, 2);
    }
  }
}

// Writes shard-R.bin.tmp, fsyncs it, renames it to shard-R.bin and fsyncs the directory.
// `data_s`: the seconds spent creating, filling and fsyncing the shard file (the part of a
// save that grows with its bytes; the directory entries and renames around it do not).
ShardEntry write_shard(const RankState& s, const WriteJob& job, double& data_s) {
  if (s.rank != job.rank || s.layout.world() != job.world) {
    throw std::invalid_argument(fmt::format(
        "checkpoint: the state of rank {} (layout tp {} x dp {}) is saved by rank {} of a world of {}", s.rank,
        s.layout.tp, s.layout.dp, job.rank, job.world));
  }
  const Site site{&job.crash, job.rank, job.generation};
  const std::vector<Share> shares = saved_shares(s, job.mask);
  const std::string header = shard_header(s, job.mask, shares.size());
  std::uint64_t total = header.size();
  for (const Share& sh : shares) total += stored_bytes(sh);

  const std::string gen_dir = path_join(job.dir, gen_name(job.generation));
  make_dirs(gen_dir);
  fsync_dir(job.dir);   // the generation directory's own entry
  const std::string final_path = path_join(gen_dir, shard_name(job.rank));
  const std::string tmp_path = final_path + ".tmp";

  crash_at(site, "shard-open");
  const double d0 = now_s();
  Fd fd = open_checked(tmp_path, O_WRONLY | O_CREAT | O_TRUNC, "create");
  CrcWriter w(fd.get(), tmp_path, kill_offset(site, "shard-partial", total));
  ShardEntry e;
  e.rank = job.rank;
  e.layout = s.layout;
  e.file = shard_name(job.rank);
  e.header_bytes = header.size();
  e.header_crc = crc32(0, header.data(), header.size());
  w.write(header.data(), header.size(), e.header_crc);
  std::string bytes;
  for (const Share& sh : shares) {
    const TensorPiece& p = *sh.piece;
    encode(sh, bytes);
    const std::uint32_t crc = crc32(0, bytes.data(), bytes.size());
    e.pieces.push_back(PieceEntry{p.name, p.global_rows, p.global_cols, p.row0 + sh.r0, sh.rows, p.col0 + sh.c0,
                                  sh.cols, p.bf16, w.offset(), crc});
    w.write(bytes.data(), bytes.size(), crc);
  }
  e.bytes = w.offset();
  e.crc = w.crc();
  crash_at(site, "shard-before-fsync");
  fsync_fd(fd.get(), tmp_path);
  fd.close_checked(tmp_path);
  data_s = now_s() - d0;
  crash_at(site, "shard-before-rename");
  rename_checked(tmp_path, final_path);
  fsync_dir(gen_dir);
  crash_at(site, "shard-after-rename");
  return e;
}

// The result of one rank's write: its shard's entry, or the exception it threw.
struct WriteOutcome {
  std::optional<ShardEntry> entry;
  std::exception_ptr error;
  double write_s = 0;
  double data_s = 0;
};

WriteOutcome run_write(const RankState& s, const WriteJob& job) {
  WriteOutcome out;
  const double t0 = now_s();
  try {
    out.entry = write_shard(s, job, out.data_s);
  } catch (...) {
    out.error = std::current_exception();
  }
  out.write_s = now_s() - t0;
  return out;
}

std::string what(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "unknown error";
  }
}

// The async snapshot: only what will be written (this rank's shares, each a piece of one
// replica), so the host copy is no larger than needed. A malformed piece is copied whole:
// the background write rejects it, and the commit reports it on every rank (throwing here
// would leave the other ranks waiting in the commit).
RankState snapshot_of(const RankState& s, std::uint32_t mask) {
  RankState c;
  c.rank = s.rank;
  c.layout = s.layout;
  c.scalars = s.scalars;
  if (has_part(mask, StatePart::kConfig)) c.config_json = s.config_json;
  for (const TensorPiece& p : s.pieces) {
    if (!has_part(mask, tensor_part(p.name))) continue;
    try {
      check_piece(p);
    } catch (const std::invalid_argument&) {
      c.pieces.push_back(p);
      continue;
    }
    const std::optional<Share> share = share_of(p);
    if (!share) continue;
    const Share& sh = *share;
    TensorPiece q;
    q.name = p.name;
    q.global_rows = p.global_rows;
    q.global_cols = p.global_cols;
    q.row0 = p.row0 + sh.r0;
    q.rows = sh.rows;
    q.col0 = p.col0 + sh.c0;
    q.cols = sh.cols;
    q.bf16 = p.bf16;
    q.data.reserve(static_cast<std::size_t>(sh.rows * sh.cols));
    for (std::int64_t r = sh.r0; r < sh.r0 + sh.rows; ++r) {
      const auto* row = p.data.data() + r * p.cols + sh.c0;
      q.data.insert(q.data.end(), row, row + sh.cols);
    }
    c.pieces.push_back(std::move(q));
  }
  return c;
}

// ---------------------------------------------------------------------------------------
// The commit (rank 0): manifest, then garbage collection

void write_manifest(const std::string& gen_dir, const std::string& text, const Site& site) {
  const std::string final_path = path_join(gen_dir, kManifestName);
  const std::string tmp_path = final_path + ".tmp";
  Fd fd = open_checked(tmp_path, O_WRONLY | O_CREAT | O_TRUNC, "create");
  CrcWriter w(fd.get(), tmp_path, kill_offset(site, "manifest-partial", text.size()));
  w.write(text.data(), text.size());
  fsync_fd(fd.get(), tmp_path);
  fd.close_checked(tmp_path);
  crash_at(site, "manifest-before-rename");
  rename_checked(tmp_path, final_path);
  fsync_dir(gen_dir);
  crash_at(site, "manifest-after-rename");
}

// Deletes files and generation directories; the "gc" crash point fires after the first
// removal (of a stray file in the new generation, else of the oldest generation's
// manifest), so a test sees a torn GC.
class Collector {
 public:
  explicit Collector(const Site& site) : site_(site) {}

  // The manifest goes first (and durably): a generation killed half-deleted is then
  // incomplete, never committed with shards missing.
  void remove_generation(const std::string& gen_dir) {
    const std::string manifest = path_join(gen_dir, kManifestName);
    if (::access(manifest.c_str(), F_OK) == 0) {
      unlink_checked(manifest);
      fsync_dir(gen_dir);
      removed();
    }
    for (const std::string& name : list_dir(gen_dir)) remove_entry(path_join(gen_dir, name));
    if (::rmdir(gen_dir.c_str()) != 0 && errno != ENOENT) fail_errno(gen_dir, "rmdir");
    removed();
  }

  void remove_entry(const std::string& path) {
    std::error_code ec;
    if (fs::is_directory(fs::symlink_status(path, ec))) {
      fs::remove_all(path, ec);
      if (ec) throw std::runtime_error(fmt::format("{}: cannot remove: {}", path, ec.message()));
    } else {
      unlink_checked(path);
    }
    removed();
  }

 private:
  void removed() {
    if (first_) crash_at(site_, "gc");
    first_ = false;
  }
  Site site_;
  bool first_ = true;
};

// After generation `site.generation` committed: drops stray files from its directory
// (tmp files and shards of an earlier, larger write of the same generation), the committed
// generations older than it beyond the newest `keep`, and the incomplete ones older than it.
// Newer generations (from a run that was abandoned for an older checkpoint) are left alone.
void collect_garbage(const std::string& dir, int keep, int world, const Site& site) {
  Collector c(site);
  const std::string new_dir = path_join(dir, gen_name(site.generation));
  std::set<std::string> wanted = {kManifestName};
  for (int r = 0; r < world; ++r) wanted.insert(shard_name(r));
  for (const std::string& name : list_dir(new_dir)) {
    if (wanted.count(name) == 0) c.remove_entry(path_join(new_dir, name));
  }
  std::vector<std::int64_t> committed_older, incomplete_older;
  for (const GenerationDir& g : generation_dirs(dir)) {
    if (g.generation >= site.generation) continue;
    (g.committed ? committed_older : incomplete_older).push_back(g.generation);
  }
  // committed_older is ascending: the newest keep - 1 at its end stay.
  const std::size_t kept = static_cast<std::size_t>(keep - 1);
  const std::size_t drop = committed_older.size() > kept ? committed_older.size() - kept : 0;
  std::vector<std::int64_t> doomed(committed_older.begin(), committed_older.begin() + static_cast<std::ptrdiff_t>(drop));
  doomed.insert(doomed.end(), incomplete_older.begin(), incomplete_older.end());
  for (std::int64_t g : doomed) c.remove_generation(path_join(dir, gen_name(g)));
  if (!doomed.empty()) fsync_dir(dir);
}

std::string manifest_text(std::int64_t generation, const TrainLayout& layout, std::uint32_t mask,
                          const std::vector<ShardEntry>& shards) {
  ojson contents = ojson::array();
  for (StatePart p : parts_of(mask)) contents.push_back(state_part_name(p));
  ojson list = ojson::array();
  for (const ShardEntry& s : shards) list.push_back(shard_entry_json(s));
  ojson j;
  j["format"] = kManifestFormat;
  j["kind"] = "stepcast-checkpoint";
  j["generation"] = generation;
  j["layout"] = {{"tp", layout.tp}, {"dp", layout.dp}, {"zero1", layout.zero1}};
  j["contents"] = contents;
  j["shards"] = list;
  return j.dump(1) + "\n";
}

}  // namespace

namespace checkpoint_detail {

// Rank 0's garbage collection after a commit, in a thread: it overlaps the training steps
// until the next save, which (collectively, settle()) waits for it and reports a failure
// on every rank. Crash points in it kill the whole process, as in the foreground.
class BackgroundGc {
 public:
  BackgroundGc() = default;
  BackgroundGc(const BackgroundGc&) = delete;
  BackgroundGc& operator=(const BackgroundGc&) = delete;
  ~BackgroundGc() {
    if (thread_.joinable()) thread_.join();
    if (!error_.empty()) fmt::print(stderr, "stepcast: checkpoint: {}\n", error_);
  }

  // Rank 0, after generation job.generation committed.
  void start(const CheckpointOptions& o, const WriteJob& job) {
    join();
    // The thread owns copies of what it reads: the job and its crash point are gone when
    // it runs.
    thread_ = std::thread([this, dir = o.dir, keep = o.keep, world = job.world, crash = job.crash, rank = job.rank,
                           generation = job.generation] {
      try {
        collect_garbage(dir, keep, world, Site{&crash, rank, generation});
      } catch (const std::exception& e) {
        error_ = fmt::format("checkpoint generation {} in {} was committed, but removing old files failed: {}",
                             generation, dir, e.what());
      }
    });
  }

  // Collective: waits for rank 0's collection; throws on every rank when it failed.
  void settle(Communicator& comm) {
    join();
    const int failed = comm.max_all(error_.empty() ? 0 : 1);
    if (failed == 0) return;
    std::string message =
        comm.rank() == 0 ? error_ : "checkpoint: removing old generations failed (rank 0 reports why)";
    error_.clear();
    throw std::runtime_error(message);
  }

 private:
  void join() {
    if (thread_.joinable()) thread_.join();
  }
  std::thread thread_;
  std::string error_;   // written by thread_, read after join()
};

}  // namespace checkpoint_detail

namespace {

using checkpoint_detail::BackgroundGc;

// How a commit ended, as rank 0 tells every rank (max_all: the worse wins).
enum CommitStatus { kCommitted = 0, kNotCommitted = 1 };
struct CommitResult {
  CommitStatus status = kCommitted;
  std::string message;
};

// Rank 0: the gathered outcomes of every rank; commits when all wrote their shard.
CommitResult commit_on_rank0(const CheckpointOptions& o, const WriteJob& job, const std::vector<std::string>& all) {
  std::vector<ShardEntry> shards;
  std::vector<std::string> errors;
  for (std::size_t r = 0; r < all.size(); ++r) {
    const nlohmann::json j = nlohmann::json::parse(all[r]);
    if (j.contains("error")) {
      errors.push_back(fmt::format("rank {}: {}", r, j.at("error").get<std::string>()));
      continue;
    }
    Result<ShardEntry> e = shard_entry_from_json(j, fmt::format("rank {}", r));
    if (!e.ok()) throw std::runtime_error(e.error().message);
    shards.push_back(*e);
  }
  for (const ShardEntry& s : shards) {
    if (!same_layout(s.layout, shards.front().layout)) {
      errors.push_back(fmt::format("rank {} saves layout tp {} x dp {}, rank {} tp {} x dp {}", s.rank, s.layout.tp,
                                   s.layout.dp, shards.front().rank, shards.front().layout.tp,
                                   shards.front().layout.dp));
    }
  }
  if (!errors.empty()) {
    std::string msg = fmt::format("checkpoint generation {} in {} was not committed", job.generation, o.dir);
    for (const std::string& e : errors) msg += "; " + e;
    return {kNotCommitted, msg};
  }
  const Site site{&job.crash, job.rank, job.generation};
  const std::string gen_dir = path_join(o.dir, gen_name(job.generation));
  try {
    write_manifest(gen_dir, manifest_text(job.generation, shards.front().layout, job.mask, shards), site);
  } catch (const std::exception& e) {
    return {kNotCommitted, fmt::format("checkpoint generation {} in {} was not committed: {}", job.generation, o.dir, e.what())};
  }
  return {};
}

// Collective: gathers every rank's outcome to rank 0, which commits; max_all then tells
// every rank how it went, and, as a collective, is the barrier that returns no rank before
// the commit. Every rank takes part even after its own write failed, so none waits forever.
// After a commit rank 0 starts the garbage collection in `gc` (the background: removing a
// generation is not part of the pause).
void commit(Communicator& comm, const CheckpointOptions& o, const WriteJob& job, const WriteOutcome& w,
            BackgroundGc& gc) {
  std::string mine;
  if (w.entry) {
    ojson m = shard_entry_json(*w.entry);
    m["layout"] = layout_json(w.entry->layout);
    mine = m.dump();
  } else {
    mine = nlohmann::json{{"error", what(w.error)}}.dump();
  }
  const std::vector<std::string> all = comm.gather(mine);
  CommitResult mine_result;
  if (comm.rank() == 0) {
    try {
      mine_result = commit_on_rank0(o, job, all);
    } catch (const std::exception& e) {
      mine_result = {kNotCommitted, e.what()};
    }
  }
  const auto status = static_cast<CommitStatus>(comm.max_all(mine_result.status));
  if (status == kCommitted && comm.rank() == 0) gc.start(o, job);
  if (w.error) std::rethrow_exception(w.error);
  if (status == kCommitted) return;
  if (comm.rank() == 0) throw std::runtime_error(mine_result.message);
  throw std::runtime_error(
      fmt::format("checkpoint generation {} in {} was not committed (rank 0 reports why)", job.generation, o.dir));
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Public API

const std::vector<std::string>& crash_point_names() { return kCrashPoints; }

namespace {

std::string points_list() {
  std::string s;
  for (const std::string& p : kCrashPoints) s += (s.empty() ? "" : ", ") + p;
  return s;
}

// A non-negative decimal integer spanning all of `text`.
std::optional<std::int64_t> parse_count(std::string_view text) {
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || v < 0) return std::nullopt;
  return v;
}

}  // namespace

Result<CrashPoint> parse_crash_point(const std::string& text) {
  const std::string form = "crash point '" + text + "' (POINT[:RANK][@GENERATION][+BYTES], POINT one of " +
                           points_list() + ")";
  const std::size_t name_end = std::min(text.find_first_of(":@+"), text.size());
  CrashPoint c;
  c.point = text.substr(0, name_end);
  if (std::find(kCrashPoints.begin(), kCrashPoints.end(), c.point) == kCrashPoints.end()) {
    return Error{fmt::format("{}: unknown point '{}'", form, c.point)};
  }
  // The optional fields, each once and in this order.
  static constexpr std::array<std::pair<char, const char*>, 3> kFields = {
      {{':', "RANK"}, {'@', "GENERATION"}, {'+', "BYTES"}}};
  std::size_t pos = name_end;
  for (const auto& [sep, field] : kFields) {
    if (pos >= text.size() || text[pos] != sep) continue;
    const std::size_t end = std::min(text.find_first_of(":@+", pos + 1), text.size());
    const std::optional<std::int64_t> v = parse_count(std::string_view(text).substr(pos + 1, end - pos - 1));
    if (!v) {
      return Error{fmt::format("{}: {} '{}' is not a non-negative integer", form, field, text.substr(pos + 1, end - pos - 1))};
    }
    if (sep == ':') {
      if (*v > std::numeric_limits<int>::max()) return Error{fmt::format("{}: RANK {} is too large", form, *v)};
      c.rank = static_cast<int>(*v);
    } else if (sep == '@') {
      c.generation = *v;
    } else {
      c.byte_offset = *v;
    }
    pos = end;
  }
  if (pos != text.size()) {
    return Error{fmt::format("{}: unexpected '{}' (fields out of order or repeated?)", form, text.substr(pos))};
  }
  if (text.find('+') != std::string::npos && c.point != "shard-partial" && c.point != "manifest-partial") {
    return Error{fmt::format("{}: +BYTES applies to shard-partial and manifest-partial only", form)};
  }
  return c;
}

struct CheckpointStore::Pending {
  std::int64_t generation = 0;
  RankState snapshot;
  SaveStats stats;
  WriteJob job;
  WriteOutcome outcome;   // written by `thread`, read after join()
  std::thread thread;
};

namespace {

WriteJob make_job(const Communicator& comm, const CheckpointOptions& o, std::int64_t generation) {
  return WriteJob{o.dir, generation, comm.rank(), comm.world(), parts_mask(o.contents), o.crash};
}

}  // namespace

CheckpointStore::CheckpointStore(Communicator& comm, CheckpointOptions options)
    : comm_(comm), options_(std::move(options)), gc_(std::make_unique<checkpoint_detail::BackgroundGc>()) {
  if (options_.keep < 1) throw std::invalid_argument(fmt::format("checkpoint: keep must be >= 1, got {}", options_.keep));
  if (options_.dir.empty()) throw std::invalid_argument("checkpoint: empty directory");
  make_dirs(options_.dir);
  // The checkpoint directory's own entry, once: generation directories are synced in it.
  const fs::path parent = fs::path(options_.dir).parent_path();
  fsync_dir(parent.empty() ? "." : parent.string());
}

CheckpointStore::~CheckpointStore() {
  if (!pending_) return;
  try {
    finish();
  } catch (const std::exception& e) {
    // A destructor must not throw; the save is lost, and says so.
    fmt::print(stderr, "stepcast: checkpoint: {}\n", e.what());
  }
}

SaveStats CheckpointStore::save(const RankState& state, std::int64_t generation) {
  if (generation < 0 || generation > kMaxGeneration) {
    throw std::invalid_argument(fmt::format("checkpoint: generation {} outside [0, {}]", generation, kMaxGeneration));
  }
  const double t0 = now_s();
  gc_->settle(comm_);
  committed_ = commit_pending();
  SaveStats st;
  st.generation = generation;
  WriteJob job = make_job(comm_, options_, generation);
  if (!options_.async) {
    const WriteOutcome w = run_write(state, job);
    st.write_s = w.write_s;
    st.data_s = w.data_s;
    if (w.entry) st.bytes = static_cast<double>(w.entry->bytes);
    const double c0 = now_s();
    commit(comm_, options_, job, w, *gc_);
    st.commit_s = now_s() - c0;
    st.pause_s = now_s() - t0;
    return st;
  }
  auto p = std::make_unique<Pending>();
  p->generation = generation;
  p->job = std::move(job);
  const double s0 = now_s();
  p->snapshot = snapshot_of(state, p->job.mask);
  st.snapshot_s = now_s() - s0;
  Pending* raw = p.get();
  p->thread = std::thread([raw] { raw->outcome = run_write(raw->snapshot, raw->job); });
  st.pause_s = now_s() - t0;
  p->stats = st;
  pending_ = std::move(p);
  return st;
}

std::optional<SaveStats> CheckpointStore::finish() {
  gc_->settle(comm_);
  std::optional<SaveStats> st = commit_pending();
  gc_->settle(comm_);   // nothing left running: the last generation's GC is done too
  return st;
}

std::optional<SaveStats> CheckpointStore::take_committed() {
  std::optional<SaveStats> out = std::move(committed_);
  committed_.reset();
  return out;
}

std::optional<SaveStats> CheckpointStore::commit_pending() {
  if (!pending_) return std::nullopt;
  const std::unique_ptr<Pending> p = std::move(pending_);
  p->thread.join();
  SaveStats st = p->stats;
  st.write_s = p->outcome.write_s;
  st.data_s = p->outcome.data_s;
  if (p->outcome.entry) st.bytes = static_cast<double>(p->outcome.entry->bytes);
  const double c0 = now_s();
  commit(comm_, options_, p->job, p->outcome, *gc_);
  st.commit_s = now_s() - c0;
  return st;
}

std::uint32_t crc32(const void* data, std::size_t bytes) { return checkpoint_detail::crc32(0, data, bytes); }

}  // namespace stepcast::exec

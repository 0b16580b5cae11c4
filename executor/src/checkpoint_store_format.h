// Private to the checkpoint store (checkpoint_store.cc writes, checkpoint_store_load.cc
// reads): the on-disk format's constants, its byte codecs, the manifest's shard entries,
// and the POSIX helpers both sides share. The format itself is documented at the top of
// checkpoint_store.cc.
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "stepcast/executor/checkpoint_store.h"

namespace stepcast::exec::checkpoint_detail {

// Piece data is written and read as the floats (and bf16 halves) lie in memory.
static_assert(std::endian::native == std::endian::little, "the checkpoint format is little-endian");

inline constexpr std::array<char, 8> kShardMagic = {'S', 'T', 'E', 'P', 'C', 'K', 'P', 'T'};
// Version 2: pieces may be bf16 (the manifest's "dtype") and deduplicated shares.
// Version 1 (all f32, no "dtype") is still read.
inline constexpr std::uint32_t kShardFormat = 2;
inline constexpr int kManifestFormat = 2;
inline constexpr const char* kManifestName = "manifest.json";
inline constexpr std::int64_t kMaxGeneration = 9'999'999'999;   // gen-<10 digits>
// Bounds that keep every size computed from a (possibly corrupted) manifest in range.
inline constexpr std::int64_t kMaxDim = std::int64_t{1} << 40;
inline constexpr std::int64_t kMaxElements = std::int64_t{1} << 58;

// CRC-32/IEEE (zlib's crc32()): crc32(crc32(0, a), b) is the CRC of a followed by b.
std::uint32_t crc32(std::uint32_t crc, const void* data, std::size_t n);
// The CRC of a followed by b from crc32(0, a), crc32(0, b) and b's length.
std::uint32_t crc32_combine(std::uint32_t crc_a, std::uint32_t crc_b, std::uint64_t bytes_b);
double now_s();   // steady clock

std::string gen_name(std::int64_t generation);   // "gen-0000000020"
std::string shard_name(int rank);                // "shard-00001.bin"
std::string path_join(const std::string& dir, const std::string& name);

std::uint32_t parts_mask(const std::vector<StatePart>& parts);   // bit i: StatePart i
bool has_part(std::uint32_t mask, StatePart p);
std::vector<StatePart> parts_of(std::uint32_t mask);             // StatePart order
bool same_layout(const TrainLayout& a, const TrainLayout& b);

// Throws std::runtime_error "PATH: WHAT: <errno's message>".
[[noreturn]] void fail_errno(const std::string& path, const char* what);

// An owned file descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd();
  Fd(Fd&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Fd& operator=(Fd&&) = delete;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  void close_checked(const std::string& path);   // close() can report a failed write

 private:
  int fd_ = -1;
};
// open(2) with O_CLOEXEC (mode 0644 when creating); throws naming `path` and `what`.
Fd open_checked(const std::string& path, int flags, const char* what);

// Little-endian encoding of the shard header.
struct ByteWriter {
  std::string out;
  void bytes(const void* p, std::size_t n) { out.append(static_cast<const char*>(p), n); }
  void u32(std::uint32_t v) { bytes(&v, sizeof v); }
  void u64(std::uint64_t v) { bytes(&v, sizeof v); }
  void i64(std::int64_t v) { u64(static_cast<std::uint64_t>(v)); }
  void f64(double v) { u64(std::bit_cast<std::uint64_t>(v)); }
};
// Its decoder: reading past the end sets !ok and yields zeros.
struct ByteReader {
  const std::string& in;
  std::size_t pos = 0;
  bool ok = true;
  bool bytes(void* p, std::size_t n) {
    if (!ok || in.size() - pos < n) return ok = false;
    std::memcpy(p, in.data() + pos, n);
    pos += n;
    return true;
  }
  std::uint32_t u32() { std::uint32_t v = 0; bytes(&v, sizeof v); return v; }
  std::uint64_t u64() { std::uint64_t v = 0; bytes(&v, sizeof v); return v; }
  std::int64_t i64() { return static_cast<std::int64_t>(u64()); }
  double f64() { return std::bit_cast<double>(u64()); }
};

// bf16 <-> f32. to_bf16 rounds to nearest, ties to even (a NaN stays a quiet NaN; a value
// beyond bf16's largest finite rounds to infinity, as IEEE rounding does); from_bf16 is
// exact.
inline std::uint16_t to_bf16(float f) {
  const auto bits = std::bit_cast<std::uint32_t>(f);
  if ((bits & 0x7FFFFFFFU) > 0x7F800000U) return static_cast<std::uint16_t>((bits >> 16) | 0x0040U);
  const std::uint32_t bias = 0x7FFFU + ((bits >> 16) & 1U);
  return static_cast<std::uint16_t>((bits + bias) >> 16);
}
inline float from_bf16(std::uint16_t h) { return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16); }

// The header of `s`'s shard: everything before the pieces' data.
std::string shard_header(const RankState& s, std::uint32_t mask, std::uint64_t pieces);

// The manifest's index entries.
struct PieceEntry {
  std::string name;
  std::int64_t global_rows = 0, global_cols = 0;
  std::int64_t row0 = 0, rows = 0, col0 = 0, cols = 0;
  bool bf16 = false;          // dtype "bf16" (2 bytes an element), else "f32" (4)
  std::uint64_t offset = 0;   // in the shard file
  std::uint32_t crc = 0;      // of its stored bytes
  std::uint64_t element_bytes() const { return bf16 ? 2 : 4; }
  std::uint64_t bytes() const { return static_cast<std::uint64_t>(rows * cols) * element_bytes(); }
};
struct ShardEntry {
  int rank = 0;
  TrainLayout layout;         // carried to rank 0 (checked equal); the manifest has one
  std::string file;
  std::uint64_t bytes = 0;
  std::uint32_t crc = 0;
  std::uint64_t header_bytes = 0;
  std::uint32_t header_crc = 0;
  std::vector<PieceEntry> pieces;
};
nlohmann::ordered_json layout_json(const TrainLayout& l);
nlohmann::ordered_json shard_entry_json(const ShardEntry& e);   // without the layout
// Validates what the manifest (or a gathered message) says; errors start with `where`.
Result<ShardEntry> shard_entry_from_json(const nlohmann::json& j, const std::string& where);

// The generation directories in `dir` (gen-<10 digits>), ascending; none when `dir` is
// missing or unreadable.
struct GenerationDir {
  std::int64_t generation = 0;
  bool committed = false;   // manifest.json present
};
std::vector<GenerationDir> generation_dirs(const std::string& dir);

}  // namespace stepcast::exec::checkpoint_detail

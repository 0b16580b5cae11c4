// The checkpoint store (checkpoint_store.h): reading side. Parses and checks manifests,
// verifies generations, and loads any rectangle of any tensor from the shards that hold
// it (resharding). Every number taken from a manifest is range-checked before it sizes a
// read, and every byte read is checked against its CRC-32. The format is documented at
// the top of checkpoint_store.cc.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <map>
#include <set>
#include <system_error>
#include <tuple>

#include <fmt/format.h>

#include "checkpoint_store_format.h"

namespace stepcast::exec {

using namespace checkpoint_detail;
using nlohmann::json;
using ojson = nlohmann::ordered_json;

namespace {

// A load's user-facing failure, thrown inside this file and returned as an Error at the
// public functions (keeps the readers free of Result plumbing).
struct Failure {
  std::string message;
};

std::string errno_text() { return std::generic_category().message(errno); }

// ---------------------------------------------------------------------------------------
// JSON fields, checked

const json& field(const json& j, const std::string& where, const char* key) {
  if (!j.is_object()) throw Failure{where + ": not an object"};
  const auto it = j.find(key);
  if (it == j.end()) throw Failure{fmt::format("{}.{}: missing", where, key)};
  return *it;
}

std::int64_t integer(const json& j, const std::string& where, const char* key, std::int64_t lo, std::int64_t hi) {
  const json& v = field(j, where, key);
  std::int64_t x = 0;
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(hi)) throw Failure{fmt::format("{}.{}: {} is larger than {}", where, key, u, hi)};
    x = static_cast<std::int64_t>(u);
  } else if (v.is_number_integer()) {
    x = v.get<std::int64_t>();
  } else {
    throw Failure{fmt::format("{}.{}: expected an integer, got {}", where, key, v.dump())};
  }
  if (x < lo || x > hi) throw Failure{fmt::format("{}.{}: {} outside [{}, {}]", where, key, x, lo, hi)};
  return x;
}

std::string text(const json& j, const std::string& where, const char* key) {
  const json& v = field(j, where, key);
  if (!v.is_string()) throw Failure{fmt::format("{}.{}: expected a string, got {}", where, key, v.dump())};
  return v.get<std::string>();
}

const json& array(const json& j, const std::string& where, const char* key) {
  const json& v = field(j, where, key);
  if (!v.is_array()) throw Failure{fmt::format("{}.{}: expected a list, got {}", where, key, v.dump())};
  return v;
}

constexpr std::int64_t kMaxRanks = 1 << 20;
constexpr std::int64_t kMaxBytes = std::int64_t{1} << 62;
constexpr std::int64_t kMaxCrc = 0xFFFFFFFF;

TrainLayout parse_layout(const json& j, const std::string& where) {
  TrainLayout l;
  l.tp = static_cast<int>(integer(j, where, "tp", 1, kMaxRanks));
  l.dp = static_cast<int>(integer(j, where, "dp", 1, kMaxRanks));
  const json& z = field(j, where, "zero1");
  if (!z.is_boolean()) throw Failure{fmt::format("{}.zero1: expected true or false, got {}", where, z.dump())};
  l.zero1 = z.get<bool>();
  if (static_cast<std::int64_t>(l.tp) * l.dp > kMaxRanks) throw Failure{where + ": more than 2^20 ranks"};
  return l;
}

PieceEntry parse_piece(const json& j, const std::string& where) {
  PieceEntry p;
  p.name = text(j, where, "name");
  const json& shape = array(j, where, "global_shape");
  if (shape.size() != 2 || !shape[0].is_number_integer() || !shape[1].is_number_integer()) {
    throw Failure{fmt::format("{}.global_shape: expected [rows, cols], got {}", where, shape.dump())};
  }
  p.global_rows = shape[0].get<std::int64_t>();
  p.global_cols = shape[1].get<std::int64_t>();
  if (p.global_rows < 0 || p.global_rows > kMaxDim || p.global_cols < 0 || p.global_cols > kMaxDim) {
    throw Failure{fmt::format("{}.global_shape: {} is out of range", where, shape.dump())};
  }
  p.row0 = integer(j, where, "row0", 0, p.global_rows);
  p.rows = integer(j, where, "rows", 0, p.global_rows - p.row0);
  p.col0 = integer(j, where, "col0", 0, p.global_cols);
  p.cols = integer(j, where, "cols", 0, p.global_cols - p.col0);
  if (p.rows != 0 && p.cols > kMaxElements / p.rows) throw Failure{where + ": too many elements"};
  if (j.contains("dtype")) {   // absent in format 1: f32
    const std::string dtype = text(j, where, "dtype");
    if (dtype != "f32" && dtype != "bf16") throw Failure{fmt::format("{}.dtype: '{}' (expected f32 or bf16)", where, dtype)};
    p.bf16 = dtype == "bf16";
  }
  p.offset = static_cast<std::uint64_t>(integer(j, where, "offset", 0, kMaxBytes));
  p.crc = static_cast<std::uint32_t>(integer(j, where, "crc32", 0, kMaxCrc));
  return p;
}

ShardEntry parse_shard_entry(const json& j, const std::string& where) {
  ShardEntry e;
  e.rank = static_cast<int>(integer(j, where, "rank", 0, kMaxRanks));
  e.file = text(j, where, "file");
  e.bytes = static_cast<std::uint64_t>(integer(j, where, "bytes", 0, kMaxBytes));
  e.crc = static_cast<std::uint32_t>(integer(j, where, "crc32", 0, kMaxCrc));
  e.header_bytes = static_cast<std::uint64_t>(integer(j, where, "header_bytes", 0, static_cast<std::int64_t>(e.bytes)));
  e.header_crc = static_cast<std::uint32_t>(integer(j, where, "header_crc32", 0, kMaxCrc));
  if (j.contains("layout")) e.layout = parse_layout(j.at("layout"), where + ".layout");
  const json& pieces = array(j, where, "pieces");
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    const std::string at = fmt::format("{}.pieces[{}]", where, i);
    PieceEntry p = parse_piece(pieces[i], at);
    if (p.offset < e.header_bytes || p.bytes() > e.bytes - p.offset) {
      throw Failure{fmt::format("{}: bytes [{}, +{}) are not in the shard's data ({} header bytes of {})", at,
                                p.offset, p.bytes(), e.header_bytes, e.bytes)};
    }
    e.pieces.push_back(std::move(p));
  }
  return e;
}

// ---------------------------------------------------------------------------------------
// Manifests

struct Manifest {
  std::int64_t generation = 0;
  TrainLayout layout;
  std::uint32_t mask = 0;
  std::vector<ShardEntry> shards;   // index = rank
  std::uint64_t file_bytes = 0;
  // name -> global (rows, cols), the same in every shard
  std::map<std::string, std::pair<std::int64_t, std::int64_t>> shapes;
};

std::uint32_t parse_contents(const json& list, const std::string& where) {
  std::uint32_t mask = 0;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const auto known = std::find_if(kAllStateParts.begin(), kAllStateParts.end(), [&](StatePart p) {
      return list[i].is_string() && list[i].get<std::string>() == state_part_name(p);
    });
    if (known == kAllStateParts.end()) throw Failure{fmt::format("{}[{}]: unknown state part {}", where, i, list[i].dump())};
    mask |= parts_mask({*known});
  }
  return mask;
}

// Every piece's part is saved, and a tensor has one global shape in all shards.
void check_pieces(Manifest& m, const std::string& where) {
  for (const ShardEntry& s : m.shards) {
    for (const PieceEntry& p : s.pieces) {
      if (!has_part(m.mask, tensor_part(p.name))) {
        throw Failure{fmt::format("{}: {} (in {}) belongs to {}, which the contents do not list", where, p.name, s.file,
                                  state_part_name(tensor_part(p.name)))};
      }
      const auto [it, added] = m.shapes.try_emplace(p.name, p.global_rows, p.global_cols);
      if (!added && it->second != std::pair(p.global_rows, p.global_cols)) {
        throw Failure{fmt::format("{}: {} is {} x {} in {} but {} x {} elsewhere (global shape mismatch)", where, p.name,
                                  p.global_rows, p.global_cols, s.file, it->second.first, it->second.second)};
      }
    }
  }
}

Manifest parse_manifest(const std::string& bytes, std::int64_t generation, const std::string& where) {
  json j;
  try {
    j = json::parse(bytes);
  } catch (const json::exception& e) {
    throw Failure{fmt::format("{}: malformed JSON: {}", where, e.what())};
  }
  Manifest m;
  m.file_bytes = bytes.size();
  const std::int64_t format = integer(j, where, "format", 0, kMaxBytes);
  if (format != 1 && format != kManifestFormat) {
    throw Failure{fmt::format("{}: format {} (this stepcast reads 1 to {})", where, format, kManifestFormat)};
  }
  m.generation = integer(j, where, "generation", 0, kMaxGeneration);
  if (m.generation != generation) {
    throw Failure{fmt::format("{}: says generation {}, its directory is generation {}", where, m.generation, generation)};
  }
  m.layout = parse_layout(field(j, where, "layout"), where + ".layout");
  m.mask = parse_contents(array(j, where, "contents"), where + ".contents");
  const json& shards = array(j, where, "shards");
  if (static_cast<std::int64_t>(shards.size()) != m.layout.world()) {
    throw Failure{fmt::format("{}: {} shards for a layout of {} ranks", where, shards.size(), m.layout.world())};
  }
  for (std::size_t r = 0; r < shards.size(); ++r) {
    ShardEntry e = parse_shard_entry(shards[r], fmt::format("{}.shards[{}]", where, r));
    // The names are fixed: a manifest cannot point outside its generation directory.
    if (e.rank != static_cast<int>(r) || e.file != shard_name(static_cast<int>(r))) {
      throw Failure{fmt::format("{}.shards[{}]: rank {} file '{}', expected rank {} file '{}'", where, r, e.rank,
                                e.file, r, shard_name(static_cast<int>(r)))};
    }
    m.shards.push_back(std::move(e));
  }
  check_pieces(m, where);
  return m;
}

// Reads all of `path` into `out`; 0, or the errno of the failure.
int read_whole(const std::string& path, std::string& out) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  const Fd owned(fd);
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;   // before ~Fd's close() can change it
    if (n == 0) return 0;
    out.append(buf, static_cast<std::size_t>(n));
  }
}

Manifest read_manifest(const std::string& dir, std::int64_t generation) {
  const std::string label = gen_name(generation);
  const std::string path = path_join(path_join(dir, label), kManifestName);
  std::string bytes;
  if (const int e = read_whole(path, bytes); e != 0) {
    if (e == ENOENT) throw Failure{label + ": not committed (no manifest.json)"};
    throw Failure{fmt::format("{}/{}: cannot read: {}", label, kManifestName, std::generic_category().message(e))};
  }
  return parse_manifest(bytes, generation, label + "/" + kManifestName);
}

std::string shard_label(std::int64_t generation, int rank) { return gen_name(generation) + "/" + shard_name(rank); }

// Opens a shard and checks its size against the manifest; throws "missing"/"truncated".
Fd open_shard(const std::string& dir, std::int64_t generation, const ShardEntry& s) {
  const std::string label = shard_label(generation, s.rank);
  const std::string path = path_join(path_join(dir, gen_name(generation)), s.file);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Failure{label + (errno == ENOENT ? ": missing" : ": cannot open: " + errno_text())};
  Fd owned(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw Failure{label + ": cannot stat: " + errno_text()};
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (size < s.bytes) throw Failure{fmt::format("{}: truncated: {} bytes, the manifest says {}", label, size, s.bytes)};
  if (size > s.bytes) throw Failure{fmt::format("{}: {} bytes, the manifest says {}", label, size, s.bytes)};
  return owned;
}

void pread_all(int fd, void* buf, std::uint64_t n, std::uint64_t offset, const std::string& label) {
  auto* p = static_cast<char*>(buf);
  while (n > 0) {
    const ssize_t got = ::pread(fd, p, n, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw Failure{fmt::format("{}: read at byte {}: {}", label, offset, errno_text())};
    if (got == 0) throw Failure{fmt::format("{}: truncated: ends before byte {}", label, offset)};
    p += got;
    n -= static_cast<std::uint64_t>(got);
    offset += static_cast<std::uint64_t>(got);
  }
}

std::string crc_mismatch(std::uint32_t got, std::uint32_t want) {
  return fmt::format("checksum mismatch: CRC-32 0x{:08x}, the manifest says 0x{:08x}", got, want);
}

// The whole-file check of verify_generation.
void verify_shard(const std::string& dir, std::int64_t generation, const ShardEntry& s) {
  const Fd fd = open_shard(dir, generation, s);
  std::vector<char> buf(std::size_t{1} << 20);
  std::uint32_t crc = 0;
  for (std::uint64_t off = 0; off < s.bytes;) {
    const std::uint64_t n = std::min<std::uint64_t>(buf.size(), s.bytes - off);
    pread_all(fd.get(), buf.data(), n, off, shard_label(generation, s.rank));
    crc = crc32(crc, buf.data(), n);
    off += n;
  }
  if (crc != s.crc) throw Failure{shard_label(generation, s.rank) + ": " + crc_mismatch(crc, s.crc)};
}

// ---------------------------------------------------------------------------------------
// Reshard planning: which pieces cover each wanted rectangle

struct Rect {
  std::int64_t r0 = 0, r1 = 0, c0 = 0, c1 = 0;
  bool empty() const { return r0 >= r1 || c0 >= c1; }
};
Rect rect_of(const PieceEntry& p) { return {p.row0, p.row0 + p.rows, p.col0, p.col0 + p.cols}; }
Rect rect_of(const PieceRequest& w) { return {w.row0, w.row0 + w.rows, w.col0, w.col0 + w.cols}; }
Rect intersect(const Rect& a, const Rect& b) {
  return {std::max(a.r0, b.r0), std::min(a.r1, b.r1), std::max(a.c0, b.c0), std::min(a.c1, b.c1)};
}

std::string describe(const PieceRequest& w) {
  return fmt::format("{} rows [{}, {}) x cols [{}, {})", w.name, w.row0, w.row0 + w.rows, w.col0, w.col0 + w.cols);
}

std::string contents_list(std::uint32_t mask) {
  std::string s;
  for (StatePart p : parts_of(mask)) s += (s.empty() ? "" : ", ") + std::string(state_part_name(p));
  return s;
}

// The wanted rectangles of the parts the generation holds: the others are skipped (the
// caller learns from LoadedState::contents what came back).
std::vector<PieceRequest> present(const Manifest& m, const std::vector<PieceRequest>& wants) {
  std::vector<PieceRequest> out;
  for (const PieceRequest& w : wants) {
    if (has_part(m.mask, tensor_part(w.name))) out.push_back(w);
  }
  return out;
}

// A wanted rectangle's tensor exists, and the rectangle fits its global shape.
void check_want(const Manifest& m, const PieceRequest& w) {
  const std::string gen = gen_name(m.generation);
  const auto it = m.shapes.find(w.name);
  if (it == m.shapes.end()) {
    throw Failure{fmt::format("{}: no tensor {} in the checkpoint (contents: {})", gen, w.name, contents_list(m.mask))};
  }
  const auto [rows, cols] = it->second;
  const bool fits = w.row0 >= 0 && w.rows >= 0 && w.col0 >= 0 && w.cols >= 0 && w.rows <= rows &&
                    w.row0 <= rows - w.rows && w.cols <= cols && w.col0 <= cols - w.cols;
  if (!fits) {
    throw Failure{fmt::format("{}: wanted {} does not fit the checkpoint's global shape {} x {} (global shape mismatch)",
                              gen, describe(w), rows, cols)};
  }
}

struct Use {
  int shard = 0;
  std::size_t piece = 0;   // in the shard's index
  std::size_t want = 0;
};

// Greedy, per wanted rectangle: pieces of the `preferred` shard first (the same rank when
// the layout is unchanged), then of shards already chosen (fewer files opened), then by
// shard; a piece is used when it covers something not yet covered. Replicated pieces
// (tp pieces over dp) are thus read once.
std::vector<Use> plan(const Manifest& m, const std::vector<PieceRequest>& wants, int preferred) {
  std::vector<Use> uses;
  std::set<int> chosen;
  for (std::size_t i = 0; i < wants.size(); ++i) {
    const PieceRequest& w = wants[i];
    check_want(m, w);
    const Rect want = rect_of(w);
    std::vector<std::pair<int, std::size_t>> cands;
    for (const ShardEntry& s : m.shards) {
      for (std::size_t k = 0; k < s.pieces.size(); ++k) {
        if (s.pieces[k].name == w.name && !intersect(rect_of(s.pieces[k]), want).empty()) cands.emplace_back(s.rank, k);
      }
    }
    const auto key = [&](const std::pair<int, std::size_t>& c) {
      return std::tuple(c.first != preferred, chosen.count(c.first) == 0, c.first, c.second);
    };
    std::sort(cands.begin(), cands.end(), [&](const auto& a, const auto& b) { return key(a) < key(b); });
    std::vector<char> covered(static_cast<std::size_t>(w.rows * w.cols), 0);
    std::int64_t missing = w.rows * w.cols;
    for (const auto& [shard, k] : cands) {
      if (missing == 0) break;
      const Rect o = intersect(rect_of(m.shards[static_cast<std::size_t>(shard)].pieces[k]), want);
      std::int64_t added = 0;
      for (std::int64_t r = o.r0; r < o.r1; ++r) {
        for (std::int64_t c = o.c0; c < o.c1; ++c) {
          char& cell = covered[static_cast<std::size_t>((r - w.row0) * w.cols + (c - w.col0))];
          added += cell == 0 ? 1 : 0;
          cell = 1;
        }
      }
      if (added == 0) continue;
      missing -= added;
      uses.push_back({shard, k, i});
      chosen.insert(shard);
    }
    if (missing > 0) {
      throw Failure{fmt::format("{}: wanted {} is not fully covered: {} of {} elements are in no shard",
                                gen_name(m.generation), describe(w), missing, w.rows * w.cols)};
    }
  }
  return uses;
}

// ---------------------------------------------------------------------------------------
// Loading

// The shard files one load opens, each once.
class ShardFiles {
 public:
  ShardFiles(std::string dir, const Manifest& m) : dir_(std::move(dir)), m_(m) {}
  void read(int shard, void* buf, std::uint64_t n, std::uint64_t offset) {
    auto it = fds_.find(shard);
    if (it == fds_.end()) {
      it = fds_.emplace(shard, open_shard(dir_, m_.generation, m_.shards[static_cast<std::size_t>(shard)])).first;
    }
    pread_all(it->second.get(), buf, n, offset, shard_label(m_.generation, shard));
    bytes_ += static_cast<double>(n);
  }
  int opened() const { return static_cast<int>(fds_.size()); }
  double bytes() const { return bytes_; }

 private:
  std::string dir_;
  const Manifest& m_;
  std::map<int, Fd> fds_;
  double bytes_ = 0;
};

// The scalars (and config) of shard `shard`'s header, checked against the manifest.
void read_scalars(ShardFiles& files, const Manifest& m, int shard, RankState& out) {
  const ShardEntry& s = m.shards[static_cast<std::size_t>(shard)];
  const std::string label = shard_label(m.generation, shard);
  std::string header(s.header_bytes, '\0');
  files.read(shard, header.data(), header.size(), 0);
  const std::uint32_t crc = crc32(0, header.data(), header.size());
  if (crc != s.header_crc) throw Failure{fmt::format("{}: header: {}", label, crc_mismatch(crc, s.header_crc))};
  ByteReader r{header};
  std::array<char, 8> magic{};
  r.bytes(magic.data(), magic.size());
  const std::uint32_t version = r.u32();
  const std::uint32_t rank = r.u32();
  TrainLayout l;
  l.tp = static_cast<int>(r.u32());
  l.dp = static_cast<int>(r.u32());
  l.zero1 = r.u32() != 0;
  const std::uint32_t mask = r.u32();
  const bool consistent = r.ok && magic == kShardMagic && (version == 1 || version == kShardFormat) &&
                          rank == static_cast<std::uint32_t>(shard) && same_layout(l, m.layout) && mask == m.mask;
  if (!consistent) throw Failure{label + ": header disagrees with the manifest (magic, version, rank, layout or contents)"};
  TrainScalars& c = out.scalars;
  if (has_part(mask, StatePart::kLrScheduler)) c.scheduler_step = r.i64();
  if (has_part(mask, StatePart::kGradScaler)) {
    c.loss_scale = r.f64();
    c.loss_scale_growth = r.i64();
  }
  if (has_part(mask, StatePart::kRng)) {
    c.rng_seed = r.u64();
    c.rng_counter = r.u64();
  }
  if (has_part(mask, StatePart::kDataSampler)) {
    c.sampler_seed = r.u64();
    c.sampler_epoch = r.i64();
    c.sampler_position = r.i64();
  }
  if (has_part(mask, StatePart::kStep)) c.step = r.i64();
  if (has_part(mask, StatePart::kConfig)) {
    const std::uint64_t n = r.u64();
    if (n > header.size()) throw Failure{label + ": header: config length out of range"};
    out.config_json.resize(n);
    r.bytes(out.config_json.data(), n);
  }
  const std::uint64_t pieces = r.u64();
  if (!r.ok || r.pos != header.size() || pieces != s.pieces.size()) {
    throw Failure{label + ": header disagrees with the manifest (length or piece count)"};
  }
}

void copy_overlap(const PieceEntry& p, const std::vector<float>& data, TensorPiece& out) {
  const Rect o = intersect(rect_of(p), Rect{out.row0, out.row0 + out.rows, out.col0, out.col0 + out.cols});
  for (std::int64_t r = o.r0; r < o.r1; ++r) {
    const float* src = data.data() + (r - p.row0) * p.cols + (o.c0 - p.col0);
    float* dst = out.data.data() + (r - out.row0) * out.cols + (o.c0 - out.col0);
    std::copy(src, src + (o.c1 - o.c0), dst);
  }
}

// Reads each planned piece once (checking its CRC-32 over the stored bytes), widens bf16
// to f32, and copies it into every wanted rectangle it overlaps.
std::vector<TensorPiece> assemble(ShardFiles& files, const Manifest& m, const std::vector<PieceRequest>& wants,
                                  std::vector<Use> uses) {
  std::vector<TensorPiece> out;
  for (const PieceRequest& w : wants) {
    const auto [rows, cols] = m.shapes.at(w.name);
    TensorPiece t;
    t.name = w.name;
    t.global_rows = rows;
    t.global_cols = cols;
    t.row0 = w.row0;
    t.rows = w.rows;
    t.col0 = w.col0;
    t.cols = w.cols;
    t.data.assign(static_cast<std::size_t>(w.rows * w.cols), 0.0f);
    out.push_back(std::move(t));
  }
  std::sort(uses.begin(), uses.end(), [](const Use& a, const Use& b) {
    return std::tie(a.shard, a.piece, a.want) < std::tie(b.shard, b.piece, b.want);
  });
  std::vector<float> data;
  std::vector<std::uint16_t> halves;
  for (std::size_t i = 0; i < uses.size(); ++i) {
    const PieceEntry& p = m.shards[static_cast<std::size_t>(uses[i].shard)].pieces[uses[i].piece];
    if (i == 0 || uses[i].shard != uses[i - 1].shard || uses[i].piece != uses[i - 1].piece) {
      const auto n = static_cast<std::size_t>(p.rows * p.cols);
      data.assign(n, 0.0f);
      void* stored = data.data();
      if (p.bf16) {
        halves.assign(n, 0);
        stored = halves.data();
      }
      files.read(uses[i].shard, stored, p.bytes(), p.offset);
      const std::uint32_t crc = crc32(0, stored, p.bytes());
      if (crc != p.crc) {
        throw Failure{fmt::format("{}: piece {} rows [{}, {}) x cols [{}, {}): {}", shard_label(m.generation, uses[i].shard),
                                  p.name, p.row0, p.row0 + p.rows, p.col0, p.col0 + p.cols, crc_mismatch(crc, p.crc))};
      }
      if (p.bf16) std::transform(halves.begin(), halves.end(), data.begin(), from_bf16);
    }
    copy_overlap(p, data, out[uses[i].want]);
  }
  return out;
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Shared with the writer (checkpoint_store_format.h)

namespace checkpoint_detail {

ojson layout_json(const TrainLayout& l) { return {{"tp", l.tp}, {"dp", l.dp}, {"zero1", l.zero1}}; }

ojson shard_entry_json(const ShardEntry& e) {
  ojson pieces = ojson::array();
  for (const PieceEntry& p : e.pieces) {
    ojson j;
    j["name"] = p.name;
    j["global_shape"] = {p.global_rows, p.global_cols};
    j["row0"] = p.row0;
    j["rows"] = p.rows;
    j["col0"] = p.col0;
    j["cols"] = p.cols;
    j["dtype"] = p.bf16 ? "bf16" : "f32";
    j["offset"] = p.offset;
    j["crc32"] = p.crc;
    pieces.push_back(std::move(j));
  }
  ojson j;
  j["rank"] = e.rank;
  j["file"] = e.file;
  j["bytes"] = e.bytes;
  j["crc32"] = e.crc;
  j["header_bytes"] = e.header_bytes;
  j["header_crc32"] = e.header_crc;
  j["pieces"] = std::move(pieces);
  return j;
}

Result<ShardEntry> shard_entry_from_json(const json& j, const std::string& where) {
  try {
    return parse_shard_entry(j, where);
  } catch (const Failure& f) {
    return Error{f.message};
  }
}

std::vector<GenerationDir> generation_dirs(const std::string& dir) {
  namespace fs = std::filesystem;
  std::vector<GenerationDir> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const bool digits = name.size() == 14 && name.rfind("gen-", 0) == 0 &&
                        std::all_of(name.begin() + 4, name.end(), [](char c) { return c >= '0' && c <= '9'; });
    std::error_code ec2;
    if (!digits || !fs::is_directory(it->path(), ec2)) continue;
    const bool committed = fs::is_regular_file(it->path() / kManifestName, ec2);
    out.push_back({std::stoll(name.substr(4)), committed});
  }
  std::sort(out.begin(), out.end(), [](const GenerationDir& a, const GenerationDir& b) { return a.generation < b.generation; });
  return out;
}

}  // namespace checkpoint_detail

// ---------------------------------------------------------------------------------------
// Public API

std::vector<std::int64_t> committed_generations(const std::string& dir) {
  std::vector<std::int64_t> out;
  for (const GenerationDir& g : generation_dirs(dir)) {
    if (g.committed) out.push_back(g.generation);
  }
  return out;
}

Result<std::monostate> verify_generation(const std::string& dir, std::int64_t generation) {
  try {
    const Manifest m = read_manifest(dir, generation);
    // Every shard is checked, so one report names all the damage.
    std::string problems;
    for (const ShardEntry& s : m.shards) {
      try {
        verify_shard(dir, generation, s);
      } catch (const Failure& f) {
        problems += (problems.empty() ? "" : "; ") + f.message;
      }
    }
    if (!problems.empty()) return Error{problems};
    return std::monostate{};
  } catch (const Failure& f) {
    return Error{f.message};
  }
}

Result<std::int64_t> latest_loadable_generation(const std::string& dir) {
  std::vector<std::int64_t> gens = committed_generations(dir);
  if (gens.empty()) return Error{fmt::format("no complete checkpoint in {}", dir)};
  std::string problems;
  for (auto it = gens.rbegin(); it != gens.rend(); ++it) {
    const Result<std::monostate> v = verify_generation(dir, *it);
    if (v.ok()) return *it;
    problems += (problems.empty() ? "" : "; ") + v.error().message;
  }
  return Error{fmt::format("no complete checkpoint in {}: {}", dir, problems)};
}

Result<LoadedState> load_generation(const std::string& dir, std::int64_t generation, int rank,
                                    const TrainLayout& layout, const std::vector<PieceRequest>& wants) {
  try {
    const double t0 = now_s();
    const Manifest m = read_manifest(dir, generation);
    if (layout.tp < 1 || layout.dp < 1 || rank < 0 || rank >= layout.world()) {
      throw Failure{fmt::format("{}: rank {} is not a rank of the layout tp {} x dp {}", gen_name(generation), rank,
                                layout.tp, layout.dp)};
    }
    const bool same = same_layout(layout, m.layout);
    const std::vector<PieceRequest> kept = present(m, wants);
    std::vector<Use> uses = plan(m, kept, same ? rank : -1);
    ShardFiles files(dir, m);
    LoadedState out;
    out.contents = parts_of(m.mask);
    out.written_layout = m.layout;
    out.state.rank = rank;
    out.state.layout = layout;
    read_scalars(files, m, same ? rank : 0, out.state);
    out.state.pieces = assemble(files, m, kept, std::move(uses));
    out.stats.generation = generation;
    out.stats.bytes = static_cast<double>(m.file_bytes) + files.bytes();
    out.stats.shards_read = files.opened();
    out.stats.read_s = now_s() - t0;
    return out;
  } catch (const Failure& f) {
    return Error{f.message};
  }
}

Result<std::vector<ShardRead>> plan_reads(const std::string& dir, std::int64_t generation,
                                          const std::vector<PieceRequest>& wants) {
  try {
    const Manifest m = read_manifest(dir, generation);
    std::set<std::pair<int, std::size_t>> pieces;
    for (const Use& u : plan(m, present(m, wants), -1)) pieces.emplace(u.shard, u.piece);
    std::vector<ShardRead> out;
    for (const auto& [shard, k] : pieces) {
      if (out.empty() || out.back().shard != shard) out.push_back({shard, 0});
      out.back().bytes += static_cast<double>(m.shards[static_cast<std::size_t>(shard)].pieces[k].bytes());
    }
    return out;
  } catch (const Failure& f) {
    return Error{f.message};
  }
}

}  // namespace stepcast::exec

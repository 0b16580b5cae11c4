// The checkpoint store (checkpoint_store.h) on the in-memory fake communicator: ranks are
// threads, states are small hand-built pieces whose every value is a function of
// (generation, tensor, global row, global col), so any load, in any layout, has an exact
// oracle. The crash suite forks a child per crash point and kills it with SIGKILL there.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <algorithm>
#include <bit>
#include <fstream>
#include <iterator>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "stepcast/executor/checkpoint_store.h"

#include "fake_ranks.h"
#include "stepcast/executor/fake_comm.h"

// Defined in executor/src/checkpoint_store.cc; not part of the public header.
namespace stepcast::exec::checkpoint_detail {
std::uint32_t crc32(std::uint32_t crc, const void* data, std::size_t n);
}

namespace stepcast::exec {
namespace {

namespace fs = std::filesystem;

// ---------------------------------------------------------------------------------------
// Hand-built states

// Exact in float for every generation, tensor and index used here.
float value(std::int64_t gen, const std::string& name, std::int64_t r, std::int64_t c) {
  int tag = 0;
  for (char ch : name) tag = (tag * 31 + ch) % 97;
  return static_cast<float>(gen * 10000 + tag * 100 + r * 10 + c);
}

TensorPiece piece(std::int64_t gen, const std::string& name, std::int64_t grows, std::int64_t gcols, std::int64_t row0,
                  std::int64_t rows, std::int64_t col0, std::int64_t cols) {
  TensorPiece p{name, grows, gcols, row0, rows, col0, cols, {}};
  for (std::int64_t r = row0; r < row0 + rows; ++r) {
    for (std::int64_t c = col0; c < col0 + cols; ++c) p.data.push_back(value(gen, name, r, c));
  }
  return p;
}

// A Megatron-like state of rank `r` (tp index r % tp, dp index r / tp):
//   w.a, adam_m.a, adam_v.a  4 x 6, rows split over dp, cols over tp (tp2 x dp2: quadrants)
//   w.b                      1 x 8, cols split over tp (replicated over dp)
//   adam_m.b                 1 x 8, cols split over all ranks (ZeRO-1-like)
RankState make_state(int r, const TrainLayout& l, std::int64_t gen) {
  RankState s;
  s.rank = r;
  s.layout = l;
  const int tp = r % l.tp, dp = r / l.tp;
  const std::int64_t ar = 4 / l.dp, ac = 6 / l.tp;
  for (const char* name : {"w.a", "adam_m.a", "adam_v.a"}) s.pieces.push_back(piece(gen, name, 4, 6, dp * ar, ar, tp * ac, ac));
  s.pieces.push_back(piece(gen, "w.b", 1, 8, 0, 1, tp * (8 / l.tp), 8 / l.tp));
  s.pieces.push_back(piece(gen, "adam_m.b", 1, 8, 0, 1, r * (8 / l.world()), 8 / l.world()));
  s.scalars = TrainScalars{gen, gen + 1, 7, 2, 100 * gen + r, 11, static_cast<std::uint64_t>(3 * gen), 1024.5 + r, r};
  s.config_json = R"({"model": "tiny"})";
  return s;
}

std::vector<PieceRequest> requests_of(const RankState& s) {
  std::vector<PieceRequest> out;
  for (const TensorPiece& p : s.pieces) out.push_back({p.name, p.row0, p.rows, p.col0, p.cols});
  return out;
}

// The expected piece of a request: the generation's values over the rectangle.
TensorPiece expected(std::int64_t gen, const PieceRequest& w, std::int64_t grows, std::int64_t gcols) {
  return piece(gen, w.name, grows, gcols, w.row0, w.rows, w.col0, w.cols);
}

void expect_piece_eq(const TensorPiece& got, const TensorPiece& want) {
  EXPECT_EQ(got.name, want.name);
  EXPECT_EQ(got.global_rows, want.global_rows);
  EXPECT_EQ(got.global_cols, want.global_cols);
  EXPECT_EQ(got.row0, want.row0);
  EXPECT_EQ(got.rows, want.rows);
  EXPECT_EQ(got.col0, want.col0);
  EXPECT_EQ(got.cols, want.cols);
  EXPECT_EQ(got.data, want.data) << want.name;
}

void expect_scalars_eq(const TrainScalars& a, const TrainScalars& b) {
  EXPECT_EQ(a.step, b.step);
  EXPECT_EQ(a.scheduler_step, b.scheduler_step);
  EXPECT_EQ(a.sampler_seed, b.sampler_seed);
  EXPECT_EQ(a.sampler_epoch, b.sampler_epoch);
  EXPECT_EQ(a.sampler_position, b.sampler_position);
  EXPECT_EQ(a.rng_seed, b.rng_seed);
  EXPECT_EQ(a.rng_counter, b.rng_counter);
  EXPECT_EQ(a.loss_scale, b.loss_scale);
  EXPECT_EQ(a.loss_scale_growth, b.loss_scale_growth);
}

constexpr TrainLayout kTp2Dp2{2, 2, false};
constexpr TrainLayout kTp2{2, 1, false};

// ---------------------------------------------------------------------------------------
// Ranks as threads, files

// Runs fn(comm, rank) on `n` threads of one FakeWorld; rethrows the first rank's error.
template <typename F>
void run_ranks(int n, F fn) {
  on_ranks(n, [&](int r, Communicator& comm, Device&) { fn(comm, r); });
}

CheckpointOptions options(const std::string& dir, int keep = 2) {
  CheckpointOptions o;
  o.dir = dir;
  o.keep = keep;
  return o;
}

// Saves make_state(., layout, g) for every g of `gens`, one store per rank.
void save_all(const CheckpointOptions& o, const TrainLayout& layout, const std::vector<std::int64_t>& gens) {
  run_ranks(layout.world(), [&](Communicator& comm, int r) {
    CheckpointStore store(comm, o);
    for (std::int64_t g : gens) store.save(make_state(r, layout, g), g);
  });
}

std::string gen_dir(const std::string& dir, std::int64_t g) {
  char name[32];
  std::snprintf(name, sizeof name, "gen-%010lld", static_cast<long long>(g));
  return (fs::path(dir) / name).string();
}
std::string shard_path(const std::string& dir, std::int64_t g, int r) {
  char name[32];
  std::snprintf(name, sizeof name, "shard-%05d.bin", r);
  return (fs::path(gen_dir(dir, g)) / name).string();
}
std::string manifest_path(const std::string& dir, std::int64_t g) { return gen_dir(dir, g) + "/manifest.json"; }

std::set<std::string> listing(const std::string& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.insert(e.path().filename().string());
  return out;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void flip_byte(const std::string& path, std::uint64_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  f.get(c);
  f.seekp(static_cast<std::streamoff>(offset));
  f.put(static_cast<char>(c ^ 0x5A));
}

// A fresh directory per test, removed afterwards.
class CheckpointStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string t = (fs::path(::testing::TempDir()) / "stepcast-ckpt-XXXXXX").string();
    ASSERT_NE(::mkdtemp(t.data()), nullptr) << t;
    root_ = t;
    dir_ = root_ + "/ckpt";
  }
  void TearDown() override { fs::remove_all(root_); }
  std::string root_, dir_;
};

// ---------------------------------------------------------------------------------------
// CRC-32

// Oracle: the CRC-32/IEEE check value (the catalogue's "check" for CRC-32, zlib's crc32).
TEST(CheckpointCrc32, CheckValue) {
  using checkpoint_detail::crc32;
  EXPECT_EQ(crc32(0, "123456789", 9), 0xCBF43926U);
  EXPECT_EQ(crc32(0, "", 0), 0U);
  // Incremental: the CRC of a followed by b, as the writer computes a file's CRC.
  EXPECT_EQ(crc32(crc32(0, "1234", 4), "56789", 5), 0xCBF43926U);
}

// ---------------------------------------------------------------------------------------
// Round trip, reshard, contents, keep

// Oracle: every rank of tp2 x dp2 loads exactly the pieces and scalars it saved; with the
// same layout each rank reads only its own shard (manifest + the whole shard file); the
// shard starts with the documented header and the manifest names every saved part.
TEST_F(CheckpointStoreTest, RoundTripSameLayout) {
  std::vector<SaveStats> stats(4);
  run_ranks(4, [&](Communicator& comm, int r) {
    CheckpointStore store(comm, options(dir_));
    stats[static_cast<std::size_t>(r)] = store.save(make_state(r, kTp2Dp2, 10), 10);
  });
  EXPECT_EQ(committed_generations(dir_), std::vector<std::int64_t>{10});
  ASSERT_TRUE(verify_generation(dir_, 10).ok());
  const double manifest_bytes = static_cast<double>(fs::file_size(manifest_path(dir_, 10)));
  for (int r = 0; r < 4; ++r) {
    SCOPED_TRACE(r);
    const RankState want = make_state(r, kTp2Dp2, 10);
    const double shard_bytes = static_cast<double>(fs::file_size(shard_path(dir_, 10, r)));
    EXPECT_EQ(stats[static_cast<std::size_t>(r)].bytes, shard_bytes);
    EXPECT_EQ(stats[static_cast<std::size_t>(r)].generation, 10);
    Result<LoadedState> got = load_generation(dir_, 10, r, kTp2Dp2, requests_of(want));
    ASSERT_TRUE(got.ok()) << got.error().message;
    ASSERT_EQ(got->state.pieces.size(), want.pieces.size());
    for (std::size_t i = 0; i < want.pieces.size(); ++i) expect_piece_eq(got->state.pieces[i], want.pieces[i]);
    expect_scalars_eq(got->state.scalars, want.scalars);
    EXPECT_EQ(got->state.config_json, want.config_json);
    EXPECT_EQ(got->contents, std::vector<StatePart>(kAllStateParts.begin(), kAllStateParts.end()));
    EXPECT_EQ(got->written_layout.tp, 2);
    EXPECT_EQ(got->written_layout.dp, 2);
    EXPECT_EQ(got->stats.shards_read, 1);
    EXPECT_EQ(got->stats.bytes, manifest_bytes + shard_bytes);
  }
  const std::string shard = slurp(shard_path(dir_, 10, 2));
  ASSERT_GE(shard.size(), 28U);
  EXPECT_EQ(shard.substr(0, 8), "STEPCKPT");
  const auto u32_at = [&](std::size_t at) {
    std::uint32_t v = 0;
    std::memcpy(&v, shard.data() + at, 4);
    return v;
  };
  EXPECT_EQ(u32_at(8), 2U);    // format version
  EXPECT_EQ(u32_at(12), 2U);   // rank
  EXPECT_EQ(u32_at(16), 2U);   // tp
  EXPECT_EQ(u32_at(20), 2U);   // dp
  const std::string manifest = slurp(manifest_path(dir_, 10));
  for (StatePart p : kAllStateParts) EXPECT_NE(manifest.find('"' + std::string(state_part_name(p)) + '"'), std::string::npos);
}

// Oracle: pieces written as 2 x 2 quadrants (2 x 3 floats = 24 bytes each) load into other
// layouts with the generation's exact values; plan_reads by hand: the whole w.a needs all
// four quadrants, and then w.b (1 x 8, cols 0-3 in shards 0 and 2, cols 4-7 in 1 and 3)
// is read from shards 0 and 1 (16 bytes each), the lowest of the shards already open.
TEST_F(CheckpointStoreTest, ReshardIntoOtherLayouts) {
  save_all(options(dir_), kTp2Dp2, {10});
  const TrainScalars rank0 = make_state(0, kTp2Dp2, 10).scalars;

  // One rank wants everything.
  const std::vector<PieceRequest> whole = {{"w.a", 0, 4, 0, 6}, {"w.b", 0, 1, 0, 8}};
  Result<std::vector<ShardRead>> plan = plan_reads(dir_, 10, whole);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  ASSERT_EQ(plan->size(), 4U);
  const double want_bytes[] = {40, 40, 24, 24};
  for (int s = 0; s < 4; ++s) {
    EXPECT_EQ((*plan)[static_cast<std::size_t>(s)].shard, s);
    EXPECT_EQ((*plan)[static_cast<std::size_t>(s)].bytes, want_bytes[s]);
  }
  Result<LoadedState> one = load_generation(dir_, 10, 0, TrainLayout{1, 1, false}, whole);
  ASSERT_TRUE(one.ok()) << one.error().message;
  expect_piece_eq(one->state.pieces[0], expected(10, whole[0], 4, 6));
  expect_piece_eq(one->state.pieces[1], expected(10, whole[1], 1, 8));
  expect_scalars_eq(one->state.scalars, rank0);   // another layout: shard 0's scalars
  EXPECT_EQ(one->stats.shards_read, 4);

  // Two ranks want row halves: each needs the two quadrants of its half.
  const TrainLayout dp2{1, 2, false};
  for (int r = 0; r < 2; ++r) {
    SCOPED_TRACE(r);
    const std::vector<PieceRequest> half = {{"w.a", 2 * r, 2, 0, 6}};
    plan = plan_reads(dir_, 10, half);
    ASSERT_TRUE(plan.ok()) << plan.error().message;
    ASSERT_EQ(plan->size(), 2U);
    EXPECT_EQ((*plan)[0].shard, 2 * r);
    EXPECT_EQ((*plan)[1].shard, 2 * r + 1);
    EXPECT_EQ((*plan)[0].bytes, 24);
    EXPECT_EQ((*plan)[1].bytes, 24);
    Result<LoadedState> got = load_generation(dir_, 10, r, dp2, half);
    ASSERT_TRUE(got.ok()) << got.error().message;
    expect_piece_eq(got->state.pieces[0], expected(10, half[0], 4, 6));
    expect_scalars_eq(got->state.scalars, rank0);
    // Its two quadrants' shards, plus shard 0 for the scalars.
    EXPECT_EQ(got->stats.shards_read, r == 0 ? 2 : 3);
  }

  // A rectangle straddling all four quadrants.
  const std::vector<PieceRequest> middle = {{"w.a", 1, 2, 2, 3}};
  plan = plan_reads(dir_, 10, middle);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  EXPECT_EQ(plan->size(), 4U);
  Result<LoadedState> mid = load_generation(dir_, 10, 0, TrainLayout{1, 1, false}, middle);
  ASSERT_TRUE(mid.ok()) << mid.error().message;
  expect_piece_eq(mid->state.pieces[0], expected(10, middle[0], 4, 6));
}

// Oracle: a generation saved without kOptimizer and kRng has no adam_ piece and neither
// part in its manifest; loading reports the saved parts, leaves the RNG scalars at their
// defaults, and skips a request for an optimizer piece (adam_* or master.*: contents
// tells the caller it did not come back); a tensor of a held part that is not there is
// still an error.
TEST_F(CheckpointStoreTest, ContentsLeaveOutParts) {
  CheckpointOptions o = options(dir_);
  o.contents = {StatePart::kModel, StatePart::kLrScheduler, StatePart::kGradScaler, StatePart::kDataSampler,
                StatePart::kStep, StatePart::kConfig};
  save_all(o, kTp2, {5});
  const std::string manifest = slurp(manifest_path(dir_, 5));
  EXPECT_EQ(manifest.find("adam_"), std::string::npos);
  EXPECT_EQ(manifest.find("\"optimizer\""), std::string::npos);
  EXPECT_EQ(manifest.find("\"rng\""), std::string::npos);
  ASSERT_TRUE(verify_generation(dir_, 5).ok());

  const RankState want = make_state(1, kTp2, 5);
  std::vector<PieceRequest> model;
  for (const PieceRequest& w : requests_of(want)) {
    if (w.name.rfind("w.", 0) == 0) model.push_back(w);
  }
  Result<LoadedState> got = load_generation(dir_, 5, 1, kTp2, model);
  ASSERT_TRUE(got.ok()) << got.error().message;
  EXPECT_EQ(got->contents, o.contents);
  ASSERT_EQ(got->state.pieces.size(), 2U);
  expect_piece_eq(got->state.pieces[0], want.pieces[0]);   // w.a
  expect_piece_eq(got->state.pieces[1], want.pieces[3]);   // w.b
  TrainScalars scalars = want.scalars;
  scalars.rng_seed = 0;
  scalars.rng_counter = 0;
  expect_scalars_eq(got->state.scalars, scalars);

  std::vector<PieceRequest> with_optimizer = {{"adam_m.a", 0, 4, 3, 3}, model[0], {"master.a", 0, 4, 0, 6}, model[1]};
  Result<LoadedState> adam = load_generation(dir_, 5, 1, kTp2, with_optimizer);
  ASSERT_TRUE(adam.ok()) << adam.error().message;
  EXPECT_EQ(std::count(adam->contents.begin(), adam->contents.end(), StatePart::kOptimizer), 0);
  ASSERT_EQ(adam->state.pieces.size(), 2U);
  expect_piece_eq(adam->state.pieces[0], want.pieces[0]);   // w.a
  expect_piece_eq(adam->state.pieces[1], want.pieces[3]);   // w.b
  EXPECT_EQ(adam->stats.bytes, got->stats.bytes);           // nothing more was read
  Result<std::vector<ShardRead>> plan = plan_reads(dir_, 5, {{"adam_v.a", 0, 1, 0, 1}});
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  EXPECT_TRUE(plan->empty());
  Result<LoadedState> nope = load_generation(dir_, 5, 1, kTp2, {{"w.nope", 0, 1, 0, 1}});
  ASSERT_FALSE(nope.ok());
  EXPECT_NE(nope.error().message.find("no tensor w.nope"), std::string::npos) << nope.error().message;
}

// ---------------------------------------------------------------------------------------
// bf16 and deduplicated shares

std::uint16_t u16_at(const std::string& bytes, std::uint64_t at) {
  std::uint16_t v = 0;
  std::memcpy(&v, bytes.data() + at, 2);
  return v;
}

// The manifest's piece entries of shard `rank`, in order.
nlohmann::json manifest_pieces(const std::string& dir, std::int64_t g, int rank) {
  return nlohmann::json::parse(slurp(manifest_path(dir, g))).at("shards").at(static_cast<std::size_t>(rank)).at("pieces");
}

// Oracle: bf16 keeps 8 significant bits. Values with at most 8 (0.5, -3, 1 + 2^-7,
// 65280 = 255 * 2^8, 2^-130, +-0) come back exactly; others round to nearest, ties to even,
// by hand: 1 + 2^-8 is half-way between 1 and 1 + 2^-7 -> the even one, 1;
// 1 + 3 * 2^-8 = 1.01171875 half-way between 1 + 2^-7 (odd mantissa 1) and 1 + 2^-6
// (even 2) -> 1.015625; 1.005 (above the half-way 1.00390625) -> 1.0078125; -1.01171875 ->
// -1.015625; 0x3FFFFFFF (just below 2) carries into the exponent -> 2; 1 + 2^-8 + 2^-20
// (just above half-way) -> 1.0078125. Stored: 2 bytes an element, the f32's top half
// (1.0 -> 0x3F80, 2.0 -> 0x4000), and the manifest says "bf16"; the CRC covers those bytes
// (a load checks it). An f32 piece beside it keeps every bit.
TEST_F(CheckpointStoreTest, Bf16RoundTrip) {
  const std::vector<float> exact = {0.5f, -3.0f, 1.0078125f, 65280.0f, 0x1p-130f, 0.0f, -0.0f};
  const std::vector<std::pair<float, float>> rounded = {
      {1.00390625f, 1.0f},         {1.01171875f, 1.015625f},  {1.005f, 1.0078125f},
      {-1.01171875f, -1.015625f},  {std::bit_cast<float>(0x3FFFFFFFU), 2.0f},
      {1.0f + 0x1p-8f + 0x1p-20f, 1.0078125f}};
  TensorPiece b{"w.h", 2, 7, 0, 2, 0, 7, {}};
  b.bf16 = true;
  b.data = exact;
  for (const auto& [in, out] : rounded) b.data.push_back(in);
  b.data.push_back(1.0f);   // 2 x 7
  TensorPiece f{"master.h", 1, 3, 0, 1, 0, 3, {1.005f, 1.00390625f, 0x1p-130f}};
  run_ranks(1, [&](Communicator& comm, int) {
    RankState s;
    s.pieces = {b, f};
    CheckpointStore(comm, options(dir_)).save(s, 1);
  });
  ASSERT_TRUE(verify_generation(dir_, 1).ok());
  const nlohmann::json pieces = manifest_pieces(dir_, 1, 0);
  ASSERT_EQ(pieces.size(), 2U);
  EXPECT_EQ(pieces[0].at("dtype"), "bf16");
  EXPECT_EQ(pieces[1].at("dtype"), "f32");
  const std::uint64_t off = pieces[0].at("offset").get<std::uint64_t>();
  EXPECT_EQ(pieces[1].at("offset").get<std::uint64_t>(), off + 14 * 2);
  EXPECT_EQ(fs::file_size(shard_path(dir_, 1, 0)), off + 14 * 2 + 3 * 4);
  const std::string shard = slurp(shard_path(dir_, 1, 0));
  EXPECT_EQ(u16_at(shard, off + 2 * 7), 0x3F80U);    // 1 + 2^-8 -> 1.0
  EXPECT_EQ(u16_at(shard, off + 2 * 11), 0x4000U);   // just below 2 -> 2.0
  EXPECT_EQ(pieces[0].at("crc32").get<std::uint32_t>(), checkpoint_detail::crc32(0, shard.data() + off, 14 * 2));

  Result<LoadedState> got = load_generation(dir_, 1, 0, TrainLayout{}, {{"w.h", 0, 2, 0, 7}, {"master.h", 0, 1, 0, 3}});
  ASSERT_TRUE(got.ok()) << got.error().message;
  const std::vector<float>& h = got->state.pieces[0].data;
  ASSERT_EQ(h.size(), 14U);
  for (std::size_t i = 0; i < exact.size(); ++i) {
    EXPECT_EQ(std::bit_cast<std::uint32_t>(h[i]), std::bit_cast<std::uint32_t>(exact[i])) << i;
  }
  for (std::size_t i = 0; i < rounded.size(); ++i) EXPECT_EQ(h[exact.size() + i], rounded[i].second) << i;
  EXPECT_EQ(h[13], 1.0f);
  EXPECT_EQ(got->state.pieces[1].data, f.data);
  EXPECT_EQ(got->stats.bytes, static_cast<double>(fs::file_size(manifest_path(dir_, 1)) + off + 14 * 2 + 3 * 4));
}

// Oracle: four ranks hold the same rectangles (replicas = 4, replica = rank); each writes
// its share only, and any rank loads the whole from the four shards. By hand, with the
// 120-byte header (the scalars of every part, an empty config):
//   adam_m.r  6 x 5 f32: rows 6 >= 4, blocks of 2, 2, 1, 1 rows: 40, 40, 20, 20 bytes
//   w.s       1 x 8 bf16: 1 row < 4, 8 cols: 2 cols each: 4 bytes each
//   w.t       1 x 2 f32: neither splits 4 ways: replica 0 writes it whole: 8 bytes
// shards 120 + {52, 44, 24, 24} = 172, 164, 144, 144 bytes: 144 bytes of pieces in all,
// each tensor once (30 * 4 + 8 * 2 + 2 * 4). plan_reads of the whole wants those 52, 44,
// 24, 24 bytes; rank 1's own rectangles of the same layout, the same (its share from its
// own shard, the rest from the others).
TEST_F(CheckpointStoreTest, ReplicatedPiecesAreWrittenOnce) {
  const TrainLayout dp4{1, 4, false};
  auto state = [&](int r) {
    RankState s;
    s.rank = r;
    s.layout = dp4;
    s.pieces.push_back(piece(3, "adam_m.r", 6, 5, 0, 6, 0, 5));
    TensorPiece w{"w.s", 1, 8, 0, 1, 0, 8, {}};
    for (int c = 0; c < 8; ++c) w.data.push_back(0.25f * static_cast<float>(c) - 1.0f);   // bf16-exact
    w.bf16 = true;
    s.pieces.push_back(w);
    s.pieces.push_back(piece(3, "w.t", 1, 2, 0, 1, 0, 2));
    for (TensorPiece& p : s.pieces) {
      p.replicas = 4;
      p.replica = r;
    }
    return s;
  };
  run_ranks(4, [&](Communicator& comm, int r) { CheckpointStore(comm, options(dir_)).save(state(r), 3); });
  ASSERT_TRUE(verify_generation(dir_, 3).ok());
  const std::uintmax_t sizes[] = {172, 164, 144, 144};
  const std::int64_t first_row[] = {0, 2, 4, 5}, rows[] = {2, 2, 1, 1};
  for (int r = 0; r < 4; ++r) {
    SCOPED_TRACE(r);
    EXPECT_EQ(fs::file_size(shard_path(dir_, 3, r)), sizes[r]);
    const nlohmann::json p = manifest_pieces(dir_, 3, r);
    ASSERT_EQ(p.size(), r == 0 ? 3U : 2U);
    EXPECT_EQ(p[0].at("name"), "adam_m.r");
    EXPECT_EQ(p[0].at("row0"), first_row[r]);
    EXPECT_EQ(p[0].at("rows"), rows[r]);
    EXPECT_EQ(p[0].at("cols"), 5);
    EXPECT_EQ(p[1].at("name"), "w.s");
    EXPECT_EQ(p[1].at("col0"), 2 * r);
    EXPECT_EQ(p[1].at("cols"), 2);
  }
  const std::vector<PieceRequest> whole = requests_of(state(0));
  Result<std::vector<ShardRead>> plan = plan_reads(dir_, 3, whole);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  ASSERT_EQ(plan->size(), 4U);
  const double want_bytes[] = {52, 44, 24, 24};
  for (int s = 0; s < 4; ++s) EXPECT_EQ((*plan)[static_cast<std::size_t>(s)].bytes, want_bytes[s]) << s;
  for (const TrainLayout& l : {TrainLayout{}, dp4}) {
    Result<LoadedState> got = load_generation(dir_, 3, l.world() == 4 ? 1 : 0, l, whole);
    ASSERT_TRUE(got.ok()) << got.error().message;
    const RankState want = state(0);
    ASSERT_EQ(got->state.pieces.size(), 3U);
    for (std::size_t i = 0; i < 3; ++i) {
      expect_piece_eq(got->state.pieces[i], want.pieces[i]);
      EXPECT_FALSE(got->state.pieces[i].bf16);   // widened
    }
    EXPECT_EQ(got->stats.shards_read, 4);
  }
  // The async snapshot copies the same shares: the same shard sizes.
  CheckpointOptions o = options(root_ + "/async");
  o.async = true;
  run_ranks(4, [&](Communicator& comm, int r) { CheckpointStore(comm, o).save(state(r), 3); });
  for (int r = 0; r < 4; ++r) EXPECT_EQ(fs::file_size(shard_path(o.dir, 3, r)), sizes[r]) << r;
  ASSERT_TRUE(verify_generation(o.dir, 3).ok());
}

// Oracle (the header's GC rule): after saves 1..4 with keep = 2 only generations 3 and 4
// remain; the incomplete generation 0 (older) is deleted, the incomplete 99 (newer) is not
// touched; stray files in the committing generation (a tmp file, a shard of a larger
// world) are removed.
TEST_F(CheckpointStoreTest, KeepDeletesOlderGenerations) {
  fs::create_directories(gen_dir(dir_, 0));
  std::ofstream(gen_dir(dir_, 0) + "/shard-00000.bin.tmp") << "torn";
  fs::create_directories(gen_dir(dir_, 99));
  fs::create_directories(gen_dir(dir_, 4));
  std::ofstream(gen_dir(dir_, 4) + "/shard-00000.bin.tmp") << "torn";
  std::ofstream(gen_dir(dir_, 4) + "/shard-00009.bin") << "stale";
  save_all(options(dir_, 2), kTp2, {1, 2, 3, 4});
  EXPECT_EQ(committed_generations(dir_), (std::vector<std::int64_t>{3, 4}));
  EXPECT_EQ(listing(dir_), (std::set<std::string>{"gen-0000000003", "gen-0000000004", "gen-0000000099"}));
  const std::set<std::string> files = {"manifest.json", "shard-00000.bin", "shard-00001.bin"};
  EXPECT_EQ(listing(gen_dir(dir_, 3)), files);
  EXPECT_EQ(listing(gen_dir(dir_, 4)), files);
  Result<std::int64_t> latest = latest_loadable_generation(dir_);
  ASSERT_TRUE(latest.ok()) << latest.error().message;
  EXPECT_EQ(*latest, 4);
}

// ---------------------------------------------------------------------------------------
// Errors

class CheckpointStoreErrors : public CheckpointStoreTest {
 protected:
  void SetUp() override {
    CheckpointStoreTest::SetUp();
    save_all(options(dir_), kTp2, {10, 20});
    shard1_ = shard_path(dir_, 20, 1);
    size1_ = fs::file_size(shard1_);
  }
  std::string load_error(std::int64_t gen, int rank) {
    Result<LoadedState> got = load_generation(dir_, gen, rank, kTp2, requests_of(make_state(rank, kTp2, gen)));
    return got.ok() ? "ok" : got.error().message;
  }
  void expect_falls_back_to_10() {
    Result<std::int64_t> latest = latest_loadable_generation(dir_);
    ASSERT_TRUE(latest.ok()) << latest.error().message;
    EXPECT_EQ(*latest, 10);
  }
  std::string shard1_;
  std::uintmax_t size1_ = 0;
};

// Oracle: the exact message the header documents.
TEST_F(CheckpointStoreErrors, MissingShard) {
  fs::remove(shard1_);
  Result<std::monostate> v = verify_generation(dir_, 20);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.error().message, "gen-0000000020/shard-00001.bin: missing");
  EXPECT_EQ(load_error(20, 1), "gen-0000000020/shard-00001.bin: missing");
  EXPECT_EQ(load_error(20, 0), "ok");   // rank 0 needs only its own shard
  expect_falls_back_to_10();
}

// Oracle: the header's example message, with this file's sizes.
TEST_F(CheckpointStoreErrors, TruncatedShard) {
  fs::resize_file(shard1_, size1_ - 10);
  const std::string want = "gen-0000000020/shard-00001.bin: truncated: " + std::to_string(size1_ - 10) +
                           " bytes, the manifest says " + std::to_string(size1_);
  Result<std::monostate> v = verify_generation(dir_, 20);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.error().message, want);
  EXPECT_EQ(load_error(20, 1), want);
  expect_falls_back_to_10();
}

// Oracle: a flipped byte in the last piece (adam_m.b's data ends the file) fails the
// whole-file CRC and that piece's CRC, naming the shard; pieces not read are not checked.
TEST_F(CheckpointStoreErrors, FlippedByte) {
  flip_byte(shard1_, size1_ - 1);
  Result<std::monostate> v = verify_generation(dir_, 20);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.error().message.rfind("gen-0000000020/shard-00001.bin: checksum mismatch: CRC-32 0x", 0), 0U)
      << v.error().message;
  const std::string e = load_error(20, 1);
  EXPECT_EQ(e.rfind("gen-0000000020/shard-00001.bin: piece adam_m.b rows [0, 1) x cols [4, 8): checksum mismatch", 0), 0U)
      << e;
  Result<LoadedState> wa = load_generation(dir_, 20, 1, kTp2, {{"w.a", 0, 4, 3, 3}});
  EXPECT_TRUE(wa.ok());
  expect_falls_back_to_10();
  // A flipped header byte fails the scalars' read.
  flip_byte(shard1_, size1_ - 1);
  flip_byte(shard1_, 30);
  EXPECT_NE(load_error(20, 1).find("shard-00001.bin: header: checksum mismatch"), std::string::npos);
}

// Oracle: with every generation damaged the error lists each generation's failure; an
// empty directory says exactly "no complete checkpoint in DIR".
TEST_F(CheckpointStoreErrors, NothingLoadable) {
  fs::remove(shard1_);
  std::ofstream(manifest_path(dir_, 10)) << "{ not json";
  Result<std::int64_t> latest = latest_loadable_generation(dir_);
  ASSERT_FALSE(latest.ok());
  const std::string& m = latest.error().message;
  EXPECT_EQ(m.rfind("no complete checkpoint in " + dir_ + ": ", 0), 0U) << m;
  EXPECT_NE(m.find("gen-0000000020/shard-00001.bin: missing"), std::string::npos) << m;
  EXPECT_NE(m.find("gen-0000000010/manifest.json: malformed JSON"), std::string::npos) << m;

  Result<std::int64_t> none = latest_loadable_generation(root_ + "/empty");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().message, "no complete checkpoint in " + root_ + "/empty");
  EXPECT_EQ(load_error(15, 0), "gen-0000000015: not committed (no manifest.json)");
}

// Oracle: a request outside the tensor's global shape, and one that no shard covers.
TEST_F(CheckpointStoreErrors, ShapeAndCoverage) {
  Result<LoadedState> big = load_generation(dir_, 20, 0, kTp2, {{"w.a", 0, 5, 0, 6}});
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.error().message.find("global shape mismatch"), std::string::npos) << big.error().message;

  // One rank holds the top half of a 4 x 2 tensor only.
  const std::string dir = root_ + "/partial";
  run_ranks(1, [&](Communicator& comm, int) {
    RankState s;
    s.pieces.push_back(piece(1, "w.c", 4, 2, 0, 2, 0, 2));
    CheckpointStore(comm, options(dir)).save(s, 1);
  });
  Result<LoadedState> gap = load_generation(dir, 1, 0, TrainLayout{}, {{"w.c", 0, 4, 0, 2}});
  ASSERT_FALSE(gap.ok());
  EXPECT_EQ(gap.error().message,
            "gen-0000000001: wanted w.c rows [0, 4) x cols [0, 2) is not fully covered: 4 of 8 elements are in no shard");
}

// ---------------------------------------------------------------------------------------
// Async

// Oracle: an async save returns before the commit (no manifest until finish(), which is
// collective, so no rank can have committed it); it writes the snapshot taken in save()
// (the live state is changed afterwards); the next save commits the previous one, and the
// destructor commits a pending one.
TEST_F(CheckpointStoreTest, AsyncSaveCommitsLater) {
  CheckpointOptions o = options(dir_, 5);
  o.async = true;
  run_ranks(2, [&](Communicator& comm, int r) {
    CheckpointStore store(comm, o);
    RankState live = make_state(r, kTp2, 7);
    const SaveStats s = store.save(live, 7);
    EXPECT_FALSE(fs::exists(manifest_path(dir_, 7)));
    EXPECT_GT(s.snapshot_s, 0);
    EXPECT_GE(s.pause_s, s.snapshot_s);
    EXPECT_EQ(s.write_s, 0);
    EXPECT_EQ(s.commit_s, 0);
    for (TensorPiece& p : live.pieces) p.data.assign(p.data.size(), -1.0f);
    const std::optional<SaveStats> f = store.finish();
    EXPECT_TRUE(f.has_value());
    if (f) {
      EXPECT_EQ(f->generation, 7);
      EXPECT_GT(f->write_s, 0);
      EXPECT_GT(f->commit_s, 0);
      EXPECT_EQ(f->bytes, static_cast<double>(fs::file_size(shard_path(dir_, 7, r))));
    }
    EXPECT_FALSE(store.finish().has_value());

    EXPECT_FALSE(store.take_committed().has_value());  // finish() returned generation 7's
    store.save(make_state(r, kTp2, 8), 8);
    EXPECT_FALSE(store.take_committed().has_value());  // nothing was pending
    store.save(make_state(r, kTp2, 9), 9);
    // Saving 9 committed 8 first: its write and commit times come out here, once.
    const std::optional<SaveStats> c8 = store.take_committed();
    ASSERT_TRUE(c8.has_value());
    EXPECT_EQ(c8->generation, 8);
    EXPECT_GT(c8->write_s, 0);
    EXPECT_GT(c8->commit_s, 0);
    EXPECT_FALSE(store.take_committed().has_value());
    EXPECT_TRUE(fs::exists(manifest_path(dir_, 8)));
    EXPECT_FALSE(fs::exists(manifest_path(dir_, 9)));
    // The store goes out of scope with generation 9 pending.
  });
  EXPECT_EQ(committed_generations(dir_), (std::vector<std::int64_t>{7, 8, 9}));
  for (std::int64_t g : {7, 9}) {
    for (int r = 0; r < 2; ++r) {
      const RankState want = make_state(r, kTp2, g);
      Result<LoadedState> got = load_generation(dir_, g, r, kTp2, requests_of(want));
      ASSERT_TRUE(got.ok()) << got.error().message;
      for (std::size_t i = 0; i < want.pieces.size(); ++i) expect_piece_eq(got->state.pieces[i], want.pieces[i]);
      expect_scalars_eq(got->state.scalars, want.scalars);
    }
  }
}

// Oracle: an I/O error in the background thread (the generation's directory cannot be
// created: a file has its name) is rethrown by finish() on every rank, naming the path;
// the store goes on working.
TEST_F(CheckpointStoreTest, AsyncErrorRethrownByFinish) {
  CheckpointOptions o = options(dir_);
  o.async = true;
  fs::create_directories(dir_);
  std::ofstream(gen_dir(dir_, 11)) << "in the way";
  std::vector<std::string> errors(2);
  run_ranks(2, [&](Communicator& comm, int r) {
    CheckpointStore store(comm, o);
    store.save(make_state(r, kTp2, 11), 11);
    try {
      store.finish();
    } catch (const std::runtime_error& e) {
      errors[static_cast<std::size_t>(r)] = e.what();
    }
    comm.barrier();
    if (r == 0) fs::remove(gen_dir(dir_, 11));
    comm.barrier();
    store.save(make_state(r, kTp2, 12), 12);
  });
  for (const std::string& e : errors) EXPECT_NE(e.find("gen-0000000011"), std::string::npos) << e;
  EXPECT_EQ(committed_generations(dir_), std::vector<std::int64_t>{12});
}

// Oracle: when one rank's write fails (its piece holds fewer floats than its rectangle),
// no rank hangs and none commits: that rank throws its own error, rank 0 reports it by
// rank, and the generation stays uncommitted.
TEST_F(CheckpointStoreTest, OneRankFailsNobodyCommits) {
  std::vector<std::string> errors(2);
  run_ranks(2, [&](Communicator& comm, int r) {
    RankState s = make_state(r, kTp2, 3);
    if (r == 1) s.pieces[0].data.pop_back();
    CheckpointStore store(comm, options(dir_));
    try {
      store.save(s, 3);
    } catch (const std::exception& e) {
      errors[static_cast<std::size_t>(r)] = e.what();
    }
  });
  EXPECT_NE(errors[0].find("was not committed; rank 1: checkpoint: piece w.a"), std::string::npos) << errors[0];
  EXPECT_EQ(errors[1].rfind("checkpoint: piece w.a rows [0, +4) x cols [3, +3)", 0), 0U) << errors[1];
  EXPECT_TRUE(committed_generations(dir_).empty());
}

// ---------------------------------------------------------------------------------------
// Crash consistency

struct CrashCase {
  std::string spec;   // parse_crash_point's syntax
  bool async = false;
};

// The generation that must survive a crash while saving generation 20 over 10: 20 once
// its manifest was renamed (or when the point is never reached), else 10.
std::int64_t survivor(const CrashPoint& c, bool killed) {
  return !killed || c.point == "manifest-after-rename" || c.point == "gc" ? 20 : 10;
}

// The child: two ranks (threads) save generation 10, then 20 with the crash point set;
// keep = 1 so that committing 20 garbage-collects 10 (the "gc" point). Exit 0: no crash.
[[noreturn]] void crash_child(const std::string& dir, const CrashPoint& crash, bool async) {
  int rc = 0;
  try {
    CheckpointOptions o = options(dir, 1);
    o.async = async;
    o.crash = crash;
    save_all(o, kTp2, {10, 20});
  } catch (...) {
    rc = 3;
  }
  ::_exit(rc);
}

std::vector<CrashCase> crash_cases() {
  std::vector<CrashCase> cases;
  for (const std::string& p : crash_point_names()) cases.push_back({p + "@20"});
  // Torn files at random lengths (seeded): shards are ~300 bytes, manifests ~2 KB.
  std::mt19937 rng(20240607);
  for (int i = 0; i < 3; ++i) {
    cases.push_back({"shard-partial@20+" + std::to_string(std::uniform_int_distribution<int>(0, 400)(rng))});
    cases.push_back({"manifest-partial@20+" + std::to_string(std::uniform_int_distribution<int>(0, 3000)(rng))});
  }
  // The writes of an async save run in its background thread.
  cases.push_back({"shard-partial@20+100", true});
  cases.push_back({"shard-after-rename@20", true});
  cases.push_back({"manifest-before-rename@20", true});
  // One rank's crash point. Ranks are threads here, so its kill still takes the whole
  // child; the per-rank kill of real MPI processes is tested with the MPI end-to-end runs.
  cases.push_back({"shard-before-rename:1@20"});
  cases.push_back({"shard-partial:1@20+50"});
  cases.push_back({"manifest-partial:1@20"});   // only rank 0 writes the manifest: no crash
  return cases;
}

// Oracle: after a SIGKILL at any point of the protocol every committed generation verifies,
// the newest loadable one is the one committed before the kill (survivor()) and loads
// exactly; a torn write is visible where the point says; the next save commits and removes
// the debris.
TEST_F(CheckpointStoreTest, CrashAtEveryPoint) {
  const std::vector<CrashCase> cases = crash_cases();
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const CrashCase& cc = cases[i];
    SCOPED_TRACE(cc.spec + (cc.async ? " (async)" : ""));
    Result<CrashPoint> crash = parse_crash_point(cc.spec);
    ASSERT_TRUE(crash.ok()) << crash.error().message;
    const std::string dir = root_ + "/" + std::to_string(i);

    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) crash_child(dir, *crash, cc.async);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    const bool killed = crash->rank <= 0 || crash->point.rfind("shard-", 0) == 0;
    if (killed) {
      ASSERT_TRUE(WIFSIGNALED(status)) << "status " << status;
      EXPECT_EQ(WTERMSIG(status), SIGKILL);
    } else {
      ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
    }

    if (crash->point == "shard-partial" && crash->rank == 1) {
      EXPECT_EQ(fs::file_size(shard_path(dir, 20, 1) + ".tmp"), static_cast<std::uintmax_t>(crash->byte_offset));
    }
    if (killed && crash->point == "manifest-partial") {
      EXPECT_TRUE(fs::exists(manifest_path(dir, 20) + ".tmp"));
    }
    if (crash->point == "gc") {   // torn GC: generation 10 lost its manifest first
      EXPECT_TRUE(fs::exists(gen_dir(dir, 10)));
      EXPECT_FALSE(fs::exists(manifest_path(dir, 10)));
    }

    // The commit invariant: whatever the kill left, a generation with a manifest is whole.
    for (std::int64_t g : committed_generations(dir)) {
      Result<std::monostate> v = verify_generation(dir, g);
      EXPECT_TRUE(v.ok()) << v.error().message;
    }
    const std::int64_t want_gen = survivor(*crash, killed);
    Result<std::int64_t> latest = latest_loadable_generation(dir);
    ASSERT_TRUE(latest.ok()) << latest.error().message;
    EXPECT_EQ(*latest, want_gen);
    EXPECT_TRUE(verify_generation(dir, *latest).ok());
    for (int r = 0; r < 2; ++r) {
      const RankState want = make_state(r, kTp2, want_gen);
      Result<LoadedState> got = load_generation(dir, *latest, r, kTp2, requests_of(want));
      ASSERT_TRUE(got.ok()) << got.error().message;
      for (std::size_t k = 0; k < want.pieces.size(); ++k) expect_piece_eq(got->state.pieces[k], want.pieces[k]);
      expect_scalars_eq(got->state.scalars, want.scalars);
    }

    save_all(options(dir, 1), kTp2, {30});
    EXPECT_EQ(listing(dir), std::set<std::string>{"gen-0000000030"});
    EXPECT_EQ(listing(gen_dir(dir, 30)), (std::set<std::string>{"manifest.json", "shard-00000.bin", "shard-00001.bin"}));
    EXPECT_TRUE(verify_generation(dir, 30).ok());
  }
}

// Oracle: the documented syntax, field by field; bad strings name the wrong part and list
// the points.
TEST(CheckpointCrashPoint, Parse) {
  Result<CrashPoint> c = parse_crash_point("shard-partial:1@20+4096");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->point, "shard-partial");
  EXPECT_EQ(c->rank, 1);
  EXPECT_EQ(c->generation, 20);
  EXPECT_EQ(c->byte_offset, 4096);
  c = parse_crash_point("manifest-before-rename@7");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->rank, -1);
  EXPECT_EQ(c->generation, 7);
  c = parse_crash_point("shard-open:0");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->rank, 0);
  EXPECT_EQ(c->generation, -1);
  const std::vector<std::string> names = {"shard-open", "shard-partial", "shard-before-fsync", "shard-before-rename",
                                          "shard-after-rename", "manifest-partial", "manifest-before-rename",
                                          "manifest-after-rename", "gc"};
  EXPECT_EQ(crash_point_names(), names);
  for (const std::string& n : names) {
    c = parse_crash_point(n);
    ASSERT_TRUE(c.ok()) << n;
    EXPECT_EQ(c->point, n);
    EXPECT_EQ(c->rank, -1);
  }

  const std::vector<std::pair<std::string, std::string>> bad = {
      {"", "unknown point ''"},
      {"nope", "unknown point 'nope'"},
      {"shard-open:x", "RANK 'x' is not a non-negative integer"},
      {"shard-open@", "GENERATION '' is not a non-negative integer"},
      {"shard-partial+-3", "BYTES '-3' is not a non-negative integer"},
      {"shard-open+5", "+BYTES applies to shard-partial and manifest-partial only"},
      {"shard-open:1:2", "unexpected ':2'"},
      {"gc@5:1", "unexpected ':1'"},
  };
  for (const auto& [text, part] : bad) {
    c = parse_crash_point(text);
    ASSERT_FALSE(c.ok()) << text;
    EXPECT_NE(c.error().message.find(part), std::string::npos) << c.error().message;
    EXPECT_NE(c.error().message.find("shard-open, shard-partial, shard-before-fsync"), std::string::npos);
  }
}

}  // namespace
}  // namespace stepcast::exec

// The checkpoint store of `stepcast execute --train` (docs/checkpoints.md): every rank
// writes its shard of a generation, rank 0 commits the generation by an atomic rename of
// its manifest, and a loader reads back any rectangle of any global tensor from whichever
// shards hold it, so a checkpoint written by one layout loads into another.
//
// On disk, DIR/gen-<step, 10 digits>/:
//   shard-<rank, 5 digits>.bin   one per rank of the writing layout
//   manifest.json                written last; its presence commits the generation
// A shard is written to shard-R.bin.tmp, fsync'ed, renamed to shard-R.bin, and the
// generation directory fsync'ed; then rank 0 gathers every shard's size and CRC-32 and
// its piece index, writes manifest.json.tmp, fsyncs it, renames it to manifest.json and
// fsyncs the directory. Only then are generations older than the newest `keep` deleted
// (newest first is never touched). A generation without manifest.json is incomplete and
// ignored by the loader (and deleted by the next commit).
//
// What a generation holds is what the checkpoint cost model counts (models/src/
// reliability.cc checkpoint_cost): pieces marked TensorPiece::bf16 are stored at 2 bytes an
// element, and a piece held by several ranks (TensorPiece::replicas) is written once in
// total, each replica writing an even share of it (deduplicated save). With the trainer's
// pieces (train.h) a generation's piece data is 2 + 12 bytes a parameter.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "stepcast/executor/backend.h"
#include "stepcast/executor/train_state.h"
#include "stepcast/models/result.h"

namespace stepcast::exec {

namespace checkpoint_detail {
class BackgroundGc;   // checkpoint_store.cc
}

// Fault injection (tests, `STEPCAST_CHECKPOINT_CRASH`): the process raises SIGKILL when it
// reaches `point` on a matching rank and generation.
struct CrashPoint {
  // One of crash_point_names(); empty: never crash.
  std::string point;
  int rank = -1;                  // -1: every rank that reaches it
  std::int64_t generation = -1;   // -1: any generation
  // "shard-partial" and "manifest-partial": bytes written before the kill (clipped to the
  // file's size - 1, so the file is always torn).
  std::int64_t byte_offset = 0;
};
// In protocol order: "shard-open", "shard-partial", "shard-before-fsync",
// "shard-before-rename", "shard-after-rename", "manifest-partial",
// "manifest-before-rename", "manifest-after-rename", "gc".
const std::vector<std::string>& crash_point_names();
// "POINT[:RANK][@GENERATION][+BYTES]", e.g. "shard-partial:1@20+4096". Errors name the
// part that is wrong and list the points.
Result<CrashPoint> parse_crash_point(const std::string& text);

struct CheckpointOptions {
  std::string dir;                 // the checkpoint directory (created if missing)
  int keep = 2;                    // complete generations kept (>= 1)
  bool async = false;              // snapshot to host memory, write in a background thread
  std::vector<StatePart> contents{kAllStateParts.begin(), kAllStateParts.end()};
  CrashPoint crash;
};

// What one rank measured for one save (seconds on the steady clock).
struct SaveStats {
  std::int64_t generation = -1;
  double bytes = 0;          // this rank's shard file, bytes (its header and its shares, as stored)
  double snapshot_s = 0;     // async: copying the state into the host buffer (the pause)
  double write_s = 0;        // writing + fsync + rename of the shard
  double data_s = 0;         // of write_s: creating, filling and fsyncing the shard file
  double commit_s = 0;       // the collective commit (gather, manifest, rename; old generations
                             // are removed in the background, after it)
  double pause_s = 0;        // how long save() blocked training
};

struct LoadStats {
  std::int64_t generation = -1;
  double bytes = 0;          // bytes this rank read: the manifest, a shard header, and the
                             // stored bytes (bf16: 2 an element) of the pieces it needed
  int shards_read = 0;       // distinct shard files this rank opened
  double read_s = 0;
};

// A loaded state: the scalars of the rank that held them (same rank index when the layout
// is unchanged, else rank 0's; the RNG counter is the same on every rank by design), the
// pieces that were asked for (f32, bf16 pieces widened; in the order asked, less those of
// parts the generation does not hold), and which parts the generation holds.
struct LoadedState {
  RankState state;
  std::vector<StatePart> contents;   // the parts saved in this generation
  TrainLayout written_layout;
  LoadStats stats;
};

class CheckpointStore {
 public:
  // `comm`'s barrier / gather / max_all carry the commit (the control plane only).
  CheckpointStore(Communicator& comm, CheckpointOptions options);
  ~CheckpointStore();   // finishes a pending async save (commits it)
  CheckpointStore(const CheckpointStore&) = delete;
  CheckpointStore& operator=(const CheckpointStore&) = delete;

  // Collective. Saves `state` (only the parts in options.contents) as generation
  // `generation` (the trainer passes its step). Sync: returns after the commit. Async:
  // first finishes (commits) the previous async save, then copies the state and returns;
  // the shard is written by a background thread and committed by the next save() or
  // finish(). Throws std::runtime_error naming the file on an I/O error.
  SaveStats save(const RankState& state, std::int64_t generation);
  // Collective: waits for a pending async write and commits it (no-op when none), and for
  // the garbage collection of old generations, which rank 0 runs in the background after
  // each commit (the next save waits for it too). Throws on every rank if it failed.
  std::optional<SaveStats> finish();
  // The stats of the async save that the last save() committed before its own snapshot
  // (its write, data and commit times, which save()'s return cannot have), once; nullopt
  // when that save() committed none. finish() returns its own.
  std::optional<SaveStats> take_committed();

  const CheckpointOptions& options() const { return options_; }

 private:
  struct Pending;
  std::optional<SaveStats> commit_pending();   // collective
  Communicator& comm_;
  CheckpointOptions options_;
  std::unique_ptr<Pending> pending_;
  std::unique_ptr<checkpoint_detail::BackgroundGc> gc_;
  std::optional<SaveStats> committed_;
};

// CRC-32/IEEE (zlib's polynomial) of `bytes` bytes: the checksum of shards and pieces.
std::uint32_t crc32(const void* data, std::size_t bytes);

// The committed generations in `dir`, ascending (manifest present; not verified).
std::vector<std::int64_t> committed_generations(const std::string& dir);

// Checks a committed generation completely: the manifest parses, every shard exists with
// the manifest's size and CRC-32. Errors name the shard ("gen-0000000020/shard-00001.bin:
// truncated: 1032 bytes, the manifest says 4096"). (Result<void> cannot be instantiated:
// Result holds a std::variant<T, Error>; std::monostate stands for "no value".)
Result<std::monostate> verify_generation(const std::string& dir, std::int64_t generation);

// The newest generation that verifies (older ones are tried when a newer one fails), or
// an error listing why each failed ("no complete checkpoint in DIR: ...").
Result<std::int64_t> latest_loadable_generation(const std::string& dir);

// Non-collective: reads, for `rank` of `layout`, the rectangles in `wants` (assembled from
// every shard piece that overlaps them: other layouts' pieces, deduplicated shares) and the
// scalars. A wanted rectangle of a part the generation does not hold (tensor_part of its
// name: "adam_*" and "master.*" are kOptimizer, "w.*" kModel) is skipped, not an error:
// LoadedState::contents says what came back. Each piece read is checked against its
// CRC-32 in the manifest. Errors name the shard and what is wrong (missing, truncated,
// corrupted: checksum mismatch, a wanted rectangle no shard covers, a tensor of a held part
// that is not in the checkpoint, a tensor whose global shape differs).
Result<LoadedState> load_generation(const std::string& dir, std::int64_t generation, int rank,
                                    const TrainLayout& layout, const std::vector<PieceRequest>& wants);

// For docs and `--explain`: which shard files of a generation cover `wants`, and how many
// bytes of each (the reshard plan of one new rank). Stored bytes (bf16: 2 an element);
// wanted rectangles of parts the generation does not hold are skipped, as in a load.
struct ShardRead {
  int shard = 0;         // rank that wrote it
  double bytes = 0;
};
Result<std::vector<ShardRead>> plan_reads(const std::string& dir, std::int64_t generation,
                                          const std::vector<PieceRequest>& wants);

}  // namespace stepcast::exec

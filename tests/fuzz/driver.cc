// Standalone fuzz driver: runs a fuzz target's entry point (fuzz_target.h) over a seed
// corpus and a bounded number of deterministic, seeded mutations of it, with any compiler
// (the CI builds with g++, which has no libFuzzer). A crash, an abort from a failed check,
// an escaped exception or a sanitizer report (when built with STEPCAST_SANITIZE; set
// ASAN_OPTIONS=abort_on_error=1 to keep the input) ends the process with a non-zero
// status; on a fatal signal the driver first writes the input being run to `--crash-file`
// (default fuzz-<seed>-crash-input), so that it can be replayed (as the only PATH, with
// --runs 0):
//
//   fuzz_<name>_driver [--runs N] [--seed S] [--max-len BYTES] [--crash-file PATH] PATH...
//
// PATH: seed files or folders (read recursively, in path order). Same arguments, same
// inputs in the same order, on every machine: the mutations draw from std::mt19937_64
// (whose bit stream the standard fixes) and use only its raw draws.
#include <algorithm>
#include <cctype>
#include <csignal>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

#include "fuzz_target.h"

namespace {

using Bytes = std::string;

struct Options {
  long long runs = 20'000;
  std::uint64_t seed = 1;
  std::size_t max_len = 1 << 20;
  std::string crash_file;
  std::vector<std::string> paths;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "fuzz driver: %s\nusage: driver [--runs N] [--seed S] [--max-len BYTES] [--crash-file PATH] "
               "PATH...\n",
               why);
  std::exit(2);
}

Options parse_args(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) usage("a flag without its value");
      return argv[++i];
    };
    if (a == "--runs") o.runs = std::atoll(value());
    else if (a == "--seed") o.seed = std::strtoull(value(), nullptr, 10);
    else if (a == "--max-len") o.max_len = static_cast<std::size_t>(std::atoll(value()));
    else if (a == "--crash-file") o.crash_file = value();
    else if (a.starts_with("--")) usage("unknown flag");
    else o.paths.emplace_back(a);
  }
  if (o.paths.empty()) usage("no seed file or folder");
  if (o.runs < 0 || o.max_len == 0) usage("--runs must be >= 0 and --max-len > 0");
  if (o.crash_file.empty()) o.crash_file = "fuzz-" + std::to_string(o.seed) + "-crash-input";
  return o;
}

Bytes read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::vector<Bytes> load_corpus(const Options& o) {
  std::vector<std::filesystem::path> files;
  for (const std::string& p : o.paths) {
    std::error_code ec;
    if (std::filesystem::is_directory(p, ec)) {
      for (const auto& e : std::filesystem::recursive_directory_iterator(p)) {
        if (e.is_regular_file()) files.push_back(e.path());
      }
    } else if (std::filesystem::is_regular_file(p, ec)) {
      files.emplace_back(p);
    } else {
      std::fprintf(stderr, "fuzz driver: %s is neither a file nor a folder\n", p.c_str());
      std::exit(2);
    }
  }
  std::sort(files.begin(), files.end());
  std::vector<Bytes> corpus;
  for (const auto& f : files) corpus.push_back(read_file(f));
  if (corpus.empty()) corpus.emplace_back();  // mutate from nothing
  return corpus;
}

// Bytes that matter to a JSON reader, for insertions and replacements.
constexpr std::string_view kInteresting = "{}[]\",:0123456789-+.eE \n\\/*tfn\x00\xff\x7f\xc3";
// Tokens that matter to a JSON reader or to a scenario.
constexpr std::string_view kTokens[] = {
    "null", "true", "false", "1e308", "-1e308", "1e-308", "0", "-1", "4294967296", "9223372036854775808",
    "18446744073709551616", "\"\"", "{}", "[]", "\"preset\"", "\"format\": 1", "/*", "*/", "//", "\\u0000",
    "\\ud800", "\xed\xa0\x80", "1e-9", "1e9", "100000", "0.5", "\"x\":1,\"x\":2"};

class Mutator {
 public:
  Mutator(std::uint64_t seed, std::size_t max_len) : rng_(seed), max_len_(max_len) {}

  // 1 to 4 stacked mutations of `base`, spliced with `other` sometimes.
  Bytes mutate(Bytes in, const Bytes& other) {
    const int n = 1 + static_cast<int>(below(4));
    for (int k = 0; k < n; ++k) one(in, other);
    if (in.size() > max_len_) in.resize(max_len_);
    return in;
  }

 private:
  std::uint64_t below(std::uint64_t n) { return n == 0 ? 0 : rng_() % n; }
  std::size_t pos(const Bytes& b) { return static_cast<std::size_t>(below(b.size() + 1)); }
  char interesting() { return kInteresting[below(kInteresting.size())]; }

  void one(Bytes& b, const Bytes& other) {
    switch (below(10)) {
      case 0:  // flip one bit
        if (!b.empty()) b[below(b.size())] ^= static_cast<char>(1u << below(8));
        break;
      case 1:  // replace a byte by a random or an interesting one
        if (!b.empty()) b[below(b.size())] = below(2) ? static_cast<char>(below(256)) : interesting();
        break;
      case 2:  // truncate
        b.resize(pos(b));
        break;
      case 3: {  // insert 1 to 8 bytes
        const std::size_t at = pos(b);
        Bytes ins;
        for (std::uint64_t i = 0, n = 1 + below(8); i < n; ++i) ins += interesting();
        b.insert(at, ins);
        break;
      }
      case 4: {  // delete a range
        if (b.empty()) break;
        const std::size_t at = below(b.size());
        b.erase(at, 1 + below(std::min<std::size_t>(64, b.size() - at)));
        break;
      }
      case 5: {  // duplicate a range
        if (b.empty()) break;
        const std::size_t at = below(b.size());
        const std::size_t len = 1 + below(std::min<std::size_t>(256, b.size() - at));
        b.insert(pos(b), b.substr(at, len));
        break;
      }
      case 6: {  // insert a token
        const std::string_view t = kTokens[below(std::size(kTokens))];
        b.insert(pos(b), t.data(), t.size());
        break;
      }
      case 7: {  // replace a number-looking run of digits by a token
        const std::size_t at = pos(b);
        std::size_t end = at;
        while (end < b.size() && (std::isdigit(static_cast<unsigned char>(b[end])) || b[end] == '.')) ++end;
        const std::string_view t = kTokens[below(std::size(kTokens))];
        b.replace(at, end - at, t.data(), t.size());
        break;
      }
      case 8: {  // deep nesting: 1 to 2^16 opening brackets, closed or not
        const std::size_t depth = std::size_t{1} << below(17);
        const char open = below(2) ? '[' : '{';
        Bytes ins(depth, open);
        if (open == '[' && below(2)) ins += Bytes(depth, ']');
        b.insert(pos(b), ins);
        break;
      }
      default: {  // splice: a prefix of this input and a suffix of another
        const std::size_t cut = pos(b);
        const std::size_t from = static_cast<std::size_t>(below(other.size() + 1));
        b = b.substr(0, cut) + other.substr(from);
        break;
      }
    }
  }

  std::mt19937_64 rng_;
  std::size_t max_len_;
};

// The input being run and where to save it on a fatal signal (read by the handler only).
const Bytes* g_current = nullptr;
const char* g_crash_file = nullptr;

// Async-signal-safe: open, write and close the crash file, then die of the same signal.
extern "C" void save_and_die(int sig) {
  if (g_current != nullptr && g_crash_file != nullptr) {
    const int fd = ::open(g_crash_file, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      std::size_t off = 0;
      while (off < g_current->size()) {
        const ssize_t n = ::write(fd, g_current->data() + off, g_current->size() - off);
        if (n <= 0) break;
        off += static_cast<std::size_t>(n);
      }
      ::close(fd);
    }
    static const char kMsg[] = "fuzz driver: fatal signal; the input is in the crash file\n";
    [[maybe_unused]] const ssize_t n = ::write(2, kMsg, sizeof kMsg - 1);
  }
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

void run_one(const Bytes& input) {
  g_current = &input;
  LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(input.data()), input.size());
  g_current = nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse_args(argc, argv);
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<Bytes> corpus = load_corpus(o);
  g_crash_file = o.crash_file.c_str();
  for (int sig : {SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL}) std::signal(sig, save_and_die);
  for (const Bytes& seed : corpus) run_one(seed);
  Mutator m(o.seed, o.max_len);
  std::mt19937_64 pick(o.seed ^ 0x9e3779b97f4a7c15ULL);
  for (long long i = 0; i < o.runs; ++i) {
    const Bytes& base = corpus[pick() % corpus.size()];
    const Bytes& other = corpus[pick() % corpus.size()];
    const Bytes input = m.mutate(base, other);
    run_one(input);
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("fuzz driver: %zu seeds and %lld mutations (seed %llu) in %.1f s, no failure\n", corpus.size(), o.runs,
              static_cast<unsigned long long>(o.seed), s);
  return 0;
}

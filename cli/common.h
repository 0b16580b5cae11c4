// What every `stepcast` command shares: exit codes, how errors are printed, checked output
// (stdout and files), progress on a terminal, and how a command registers itself. Each
// command lives in its own file (cli/<command>.cc): it parses its options, makes one call
// into stepcast_app, and prints. No command file includes another.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include <CLI/CLI.hpp>

namespace stepcast::cli {

// Exit codes (also listed by `stepcast --help`).
inline constexpr int kExitOk = 0;      // success
inline constexpr int kExitFailed = 1;  // a check failed, a run failed or hung, an output could not be written
inline constexpr int kExitInput = 2;   // bad input or usage
inline constexpr const char* kExitCodesHelp =
    "Exit codes: 0 success; 1 a check or run failed, a problem was found, or an output could not be "
    "written; 2 bad input or usage.";

// Prints "stepcast: error: MESSAGE" on stderr; returns kExitInput.
int input_error(const std::string& message);
// Prints "stepcast: error: MESSAGE" on stderr; returns kExitFailed.
int run_error(const std::string& message);
// Prints "stepcast: note: MESSAGE" on stderr.
void note(const std::string& message);

// Writes `text` to stdout; on a failed write (closed pipe, /dev/full) prints an error and
// returns kExitFailed, else `exit_code`.
int print(const std::string& text, int exit_code = kExitOk);
// Writes `text` to `path` atomically (a failed write leaves no truncated file). On failure
// prints "stepcast: error: OPTION: PATH: reason" and returns false.
bool write_output(const std::string& option, const std::string& path, const std::string& text);

// A one-line progress bar on stderr for long commands, drawn only when stderr is a
// terminal (none when piped). Call with done <= total; clear() erases the line.
class Progress {
 public:
  explicit Progress(std::string label);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  bool enabled() const { return tty_; }
  void update(std::int64_t done, std::int64_t total);
  // For work without a known total: "LABEL: TEXT ..." on one line.
  void status(const std::string& text);
  void clear();
  // A callback for the libraries' progress hooks (void(done, total)); empty when disabled.
  std::function<void(std::int64_t, std::int64_t)> callback();

 private:
  std::string label_;
  bool tty_ = false;
  bool drawn_ = false;
};

// A registered command: the subcommand CLI11 parsed into, and what runs it.
struct Command {
  CLI::App* sub = nullptr;
  std::function<int()> run;
};

}  // namespace stepcast::cli

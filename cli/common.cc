#include "common.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "stepcast/models/file_io.h"

namespace stepcast::cli {

int input_error(const std::string& message) {
  std::fprintf(stderr, "stepcast: error: %s\n", message.c_str());
  return kExitInput;
}

int run_error(const std::string& message) {
  std::fprintf(stderr, "stepcast: error: %s\n", message.c_str());
  return kExitFailed;
}

void note(const std::string& message) { std::fprintf(stderr, "stepcast: note: %s\n", message.c_str()); }

int print(const std::string& text, int exit_code) {
  if (auto e = write_stdout(text)) return run_error(e->message);
  return exit_code;
}

bool write_output(const std::string& option, const std::string& path, const std::string& text) {
  if (auto e = write_file_atomic(path, text)) {
    run_error(option + ": " + e->message);
    return false;
  }
  return true;
}

Progress::Progress(std::string label) : label_(std::move(label)), tty_(isatty(STDERR_FILENO) == 1) {}

Progress::~Progress() { clear(); }

void Progress::update(std::int64_t done, std::int64_t total) {
  if (!tty_) return;
  constexpr int kWidth = 30;
  const double frac = total > 0 ? std::min(1.0, static_cast<double>(done) / static_cast<double>(total)) : 1.0;
  const int filled = static_cast<int>(frac * kWidth);
  std::string bar(static_cast<std::size_t>(filled), '#');
  bar.resize(kWidth, '.');
  std::fprintf(stderr, "\r%s [%s] %3.0f%%", label_.c_str(), bar.c_str(), frac * 100);
  std::fflush(stderr);
  drawn_ = true;
}

void Progress::status(const std::string& text) {
  if (!tty_) return;
  std::fprintf(stderr, "\r\033[K%s: %s ...", label_.c_str(), text.c_str());
  std::fflush(stderr);
  drawn_ = true;
}

void Progress::clear() {
  if (!drawn_) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
  drawn_ = false;
}

std::function<void(std::int64_t, std::int64_t)> Progress::callback() {
  if (!tty_) return {};
  return [this](std::int64_t done, std::int64_t total) { update(done, total); };
}

}  // namespace stepcast::cli

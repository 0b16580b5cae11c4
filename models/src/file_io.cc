#include "stepcast/models/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "stepcast/models/text.h"

namespace stepcast {

namespace {

// Writes all of `text` to `fd`; false (errno set) on the first failed write.
bool write_all(int fd, std::string_view text) {
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    done += static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace

std::optional<Error> write_file_atomic(const std::string& path, std::string_view text) {
  const std::string shown = printable(path);
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return Error{shown + ": is a directory"};
  const std::filesystem::path target(path);
  const std::filesystem::path dir = target.has_parent_path() ? target.parent_path() : std::filesystem::path(".");
  std::string tmp = (dir / ("." + target.filename().string() + ".tmp-XXXXXX")).string();
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0) return Error{fmt::format("{}: cannot write ({})", shown, std::strerror(errno))};
  const bool ok = write_all(fd, text) && ::fsync(fd) == 0;
  const int saved = errno;
  ::close(fd);
  if (!ok) {
    ::unlink(tmp.c_str());
    return Error{fmt::format("{}: cannot write ({})", shown, std::strerror(saved))};
  }
  // mkstemp creates the file 0600; an output file gets the usual 0644 less the umask.
  const mode_t mask = ::umask(0);
  ::umask(mask);
  ::chmod(tmp.c_str(), 0666 & ~mask);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    return Error{fmt::format("{}: cannot write ({})", shown, std::strerror(e))};
  }
  return std::nullopt;
}

std::optional<Error> write_stdout(std::string_view text) {
  std::fflush(stdout);
  if (!write_all(STDOUT_FILENO, text)) {
    return Error{fmt::format("standard output: cannot write ({})", std::strerror(errno))};
  }
  return std::nullopt;
}

}  // namespace stepcast

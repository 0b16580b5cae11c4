// Output files written so that a failed write never leaves a truncated file behind: the
// text goes to a temporary name beside the target, is flushed and synced, and is renamed
// over the target only when every byte was written. Input files are read by
// reader::read_input_file (stepcast/models/json_reader.h).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "stepcast/models/result.h"

namespace stepcast {

// Writes `text` to `path` atomically (temporary file + fsync + rename). Returns nullopt on
// success, else an error naming the file and the reason ("out.json: No space left on
// device"); the target is then unchanged and the temporary file removed.
std::optional<Error> write_file_atomic(const std::string& path, std::string_view text);

// Writes `text` to standard output and flushes it. Returns an error when any byte could
// not be written (a closed pipe, /dev/full).
std::optional<Error> write_stdout(std::string_view text);

}  // namespace stepcast

// The entry point every fuzz target defines, libFuzzer's: called once per input with the
// input's bytes (not NUL-terminated; `size` may be 0). A target returns 0; it reports a
// bug by crashing (abort(), a failed check, a sanitizer report), never by returning.
//
// Built twice by add_fuzz_target (tests/fuzz/CMakeLists.txt): with clang's libFuzzer
// (STEPCAST_FUZZ=ON), and with the standalone driver (driver.cc) into the ctest
// fuzz_<name>_smoke that any compiler runs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

// A property a target checks on every input; on failure prints `what` and aborts (the
// driver and libFuzzer both report the input that did it).
#define STEPCAST_FUZZ_CHECK(cond, what)                                            \
  do {                                                                             \
    if (!(cond)) {                                                                 \
      std::fprintf(stderr, "fuzz check failed at %s:%d: %s\n", __FILE__, __LINE__, \
                   (what));                                                        \
      std::abort();                                                                \
    }                                                                              \
  } while (0)

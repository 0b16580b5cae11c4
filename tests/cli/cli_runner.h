// Test support: runs the built `stepcast` binary (STEPCAST_BIN) as a user would, with each
// test's inputs and captured output in a folder of its own (test name + process id, so that
// concurrent suites and build trees stay apart). Used by tests/cli and tests/planner.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace stepcast::testing_support {

inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline std::string quoted(const std::string& arg) {  // for /bin/sh
  std::string out = "'";
  for (char c : arg) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

struct Outcome {
  int exit_code = -1;
  std::string out, err;
};

class CliRunner : public testing::Test {
 protected:
  void SetUp() override {
    const auto* info = testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::path(testing::TempDir()) /
           (std::string("stepcast_") + info->test_suite_name() + "_" + info->name() + "_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& bytes) {
    const std::filesystem::path path = dir_ / name;
    std::ofstream(path, std::ios::binary) << bytes;
    return path.string();
  }

  // Runs `stepcast SHELL_ARGS` through /bin/sh (for redirections such as "> /dev/full");
  // stderr is captured, stdout only where SHELL_ARGS does not redirect it.
  Outcome run_shell(const std::string& shell_args) {
    const std::filesystem::path out = dir_ / "stdout", err = dir_ / "stderr";
    const std::string cmd = "{ " + quoted(STEPCAST_BIN) + " " + shell_args + "; } 2>" + quoted(err.string()) +
                            " </dev/null";
    const int status = std::system(cmd.c_str());
    Outcome r;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.err = read_file(err);
    return r;
  }

  // Runs `stepcast ARGS...` with stdin from /dev/null; returns the exit code and output.
  Outcome run(const std::vector<std::string>& args) {
    std::string cmd = quoted(STEPCAST_BIN);
    for (const auto& a : args) cmd += " " + quoted(a);
    const std::filesystem::path out = dir_ / "stdout", err = dir_ / "stderr";
    cmd += " >" + quoted(out.string()) + " 2>" + quoted(err.string()) + " </dev/null";
    const int status = std::system(cmd.c_str());
    Outcome r;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = read_file(out);
    r.err = read_file(err);
    return r;
  }

  // An input error: exit 2, nothing on stdout, stderr starting "stepcast: error: PREFIX".
  void expect_input_error(const Outcome& r, const std::string& prefix) {
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err.rfind("stepcast: error: " + prefix, 0), 0u) << r.err;
  }

  std::filesystem::path dir_;
};

}  // namespace stepcast::testing_support

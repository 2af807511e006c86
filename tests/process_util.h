// Running the `luka` executable (or any command) from tests: a per-test work folder, shell
// quoting, and the exit code, standard output and standard error of a run; waiting for a
// condition with a time limit.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace luka::test {

// Polls `done` every 20 ms; false when `seconds` pass first.
inline bool wait_for(const std::function<bool()>& done, double seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

struct RunResult {
  int exit_code = -1;  // -1 when the process did not exit normally (a signal)
  std::string out, err;
};

// LUKA_TEST_WORK/<suite>/<current test name>, created, and emptied at the test's first call so
// that nothing an earlier run left there can pass for this run's output.
inline std::filesystem::path fresh_test_dir(const std::filesystem::path& d) {
  static std::string emptied;
  if (emptied != d.string()) {
    std::filesystem::remove_all(d);
    emptied = d.string();
  }
  std::filesystem::create_directories(d);
  return d;
}

inline std::filesystem::path test_dir(const std::string& suite) {
  return fresh_test_dir(std::filesystem::path(LUKA_TEST_WORK) / suite / ::testing::UnitTest::GetInstance()->current_test_info()->name());
}

inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline std::string quote(const std::string& s) {
  std::string q = "'";
  for (const char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Runs a shell command line with no standard input; its outputs go through files in `dir`. The
// line runs as one group, so that the redirections hold for all of it: a pipeline's first command
// reads no input and its errors go to err.txt too (after `A | B`, they would bind to B alone).
inline RunResult run_shell(const std::string& command, const std::filesystem::path& dir) {
  const std::string cmd = "{ " + command + "\n} < /dev/null > " + quote((dir / "out.txt").string()) + " 2> " + quote((dir / "err.txt").string());
  const int status = std::system(cmd.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_file(dir / "out.txt"), read_file(dir / "err.txt")};
}

// Runs `program args...` with LUKA_MODEL unset.
inline RunResult run_program(const std::string& program, const std::vector<std::string>& args, const std::filesystem::path& dir) {
  std::string cmd = "env -u LUKA_MODEL " + quote(program);
  for (const auto& a : args) cmd += " " + quote(a);
  return run_shell(cmd, dir);
}

}  // namespace luka::test

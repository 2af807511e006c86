// What the press tests share: a reference folder made by one of the kvpress fixture scripts (once,
// under a lock, since ctest runs the tests in parallel processes), and its .npy arrays as tensors.
#pragma once

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <ATen/ATen.h>

#include <filesystem>
#include <string>

#include "core/util/npy.h"
#include "tests/python_reference.h"

namespace luka::test {

inline at::Tensor load_npy_tensor(const std::filesystem::path& path) {
  NpyArray a = read_npy_f32(path);
  return at::from_blob(a.data.data(), a.shape, at::kFloat).clone();
}

// tests/fixtures/<script> run into LUKA_TEST_WORK/<work>; empty with `why` set (naming `what`, the
// reference) when kvpress could not be installed or the script failed.
inline std::filesystem::path kvpress_reference_dir(const std::string& script, const std::string& work,
                                                   const std::string& what, std::string& why) {
  namespace fs = std::filesystem;
  fs::create_directories(LUKA_TEST_WORK);
  const std::string lock_path = (fs::path(LUKA_TEST_WORK) / (work + ".lock")).string();
  const int fd = ::open(lock_path.c_str(), O_CREAT | O_RDWR, 0644);
  if (fd >= 0) ::flock(fd, LOCK_EX);
  fs::path dir = python_reference(fs::path(LUKA_SOURCE_DIR) / "tests/fixtures" / script, {}, fs::path(LUKA_TEST_WORK) / work, why);
  if (fd >= 0) ::close(fd);
  if (dir.empty())
    why = what + " not made (kvpress 0.5.5 could not be installed from PyPI into .venv-kvpress, or the script failed; "
                 "run tests/fixtures/kvpress_env.py to see why): " + why;
  return dir;
}

}  // namespace luka::test

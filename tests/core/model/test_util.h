// Shared helpers for the model tests: where the fixture checkpoints live.
#pragma once

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

namespace luka::test {

inline std::filesystem::path checkpoints_dir() { return std::filesystem::path(LUKA_TEST_WORK) / "checkpoints"; }

// The checkpoints come from the `fixtures_checkpoints` ctest (tests/fixtures/make_checkpoints.py).
inline std::filesystem::path checkpoint(const std::string& name) {
  const auto dir = checkpoints_dir() / name;
  if (!std::filesystem::exists(dir / "config.json"))
    ADD_FAILURE() << "fixture checkpoint " << dir
                  << " is missing: run the fixtures_checkpoints test first (ctest -R fixtures_checkpoints)";
  return dir;
}

// A fresh, empty scratch folder under the test work directory, private to the running test
// (ctest -j runs tests in parallel processes).
inline std::filesystem::path scratch(const std::string& name) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string test = info ? std::string(info->test_suite_name()) + "." + info->name() : "none";
  const auto dir = std::filesystem::path(LUKA_TEST_WORK) / "model-scratch" / test / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace luka::test

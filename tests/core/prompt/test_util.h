// Helpers for the prompt tests: a scratch folder per test and the message of a failed load.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/util/error.h"

namespace luka::test {

// LUKA_TEST_WORK/prompt/<suite>.<test>, emptied.
inline std::filesystem::path scratch_dir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::filesystem::path dir =
      std::filesystem::path(LUKA_TEST_WORK) / "prompt" / (std::string(info->test_suite_name()) + "." + info->name());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

inline std::filesystem::path write_file(const std::filesystem::path& file, const std::string& content) {
  std::ofstream(file, std::ios::binary) << content;
  return file;
}

// The luka::Error message `load()` throws; "" when it loads.
template <class Load>
std::string load_error(Load&& load) {
  try {
    load();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace luka::test

// The message must name the file and contain every given fragment.
#define EXPECT_ERROR_MENTIONS(message, file, ...)                                             \
  do {                                                                                         \
    const std::string luka_msg_ = (message);                                                   \
    EXPECT_NE(luka_msg_.find((file).string()), std::string::npos) << luka_msg_;                \
    for (const char* luka_part_ : {__VA_ARGS__})                                               \
      EXPECT_NE(luka_msg_.find(luka_part_), std::string::npos) << "want \"" << luka_part_ << "\" in: " << luka_msg_; \
  } while (0)

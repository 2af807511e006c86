#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/util/error.h"
#include "core/util/npy.h"

namespace {

std::filesystem::path work_file(const std::string& name) {
  std::filesystem::create_directories(LUKA_TEST_WORK);
  return std::filesystem::path(LUKA_TEST_WORK) / name;
}

TEST(Npy, RoundTripKeepsShapeAndBits) {
  const std::vector<float> values = {0.0f, -1.5f, 3.25e-8f, 1e30f, -0.0f, 7.0f};
  const auto path = work_file("round_trip.npy");
  luka::write_npy_f32(path, values.data(), {2, 3});
  const luka::NpyArray back = luka::read_npy_f32(path);
  ASSERT_EQ(back.shape, (std::vector<std::int64_t>{2, 3}));
  ASSERT_EQ(back.data.size(), values.size());
  for (std::size_t i = 0; i < values.size(); ++i)
    EXPECT_EQ(std::memcmp(&back.data[i], &values[i], sizeof(float)), 0) << i;
  // The header is padded so data starts at a multiple of 64 bytes, as NumPy writes it.
  EXPECT_EQ(std::filesystem::file_size(path) - values.size() * sizeof(float), 128u);
}

TEST(Npy, OneDimensionalShapeHasTrailingComma) {
  const std::vector<float> values = {1.0f, 2.0f};
  const auto path = work_file("one_dim.npy");
  luka::write_npy_f32(path, values.data(), {2});
  std::ifstream in(path, std::ios::binary);
  std::string header(128, '\0');
  in.read(header.data(), 128);
  EXPECT_NE(header.find("'shape': (2,)"), std::string::npos) << header;
}

TEST(Npy, RejectsWrongDtypeAndTruncation) {
  const auto path = work_file("bad.npy");
  {
    std::ofstream out(path, std::ios::binary);
    out << "not numpy at all";
  }
  EXPECT_THROW(luka::read_npy_f32(path), luka::Error);
  const std::vector<float> values(10, 1.0f);
  luka::write_npy_f32(path, values.data(), {10});
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 4);
  try {
    luka::read_npy_f32(path);
    FAIL() << "truncated file accepted";
  } catch (const luka::Error& e) {
    EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
  }
}

}  // namespace

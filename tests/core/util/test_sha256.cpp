// SHA-256 against the FIPS 180-4 example digests, block-boundary lengths against the same data
// fed in pieces, and the file form against the in-memory form.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/util/error.h"
#include "core/util/sha256.h"

namespace luka {
namespace {

std::string digest(const std::string& s) {
  Sha256 h;
  h.update(s);
  return h.hex();
}

TEST(Sha256, FipsExamples) {
  EXPECT_EQ(digest(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(digest("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(digest("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(digest(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, PiecewiseEqualsWhole) {
  std::string data;
  for (int i = 0; i < 300; ++i) data += static_cast<char>(i * 7 + 3);
  for (const std::size_t n : {55u, 56u, 63u, 64u, 65u, 119u, 128u, 300u}) {
    Sha256 h;
    for (std::size_t i = 0; i < n; i += 13) h.update(data.data() + i, std::min<std::size_t>(13, n - i));
    EXPECT_EQ(h.hex(), digest(data.substr(0, n))) << n;
  }
}

TEST(Sha256, FileFormAndPrefix) {
  const auto p = std::filesystem::path(LUKA_TEST_WORK) / "sha256.bin";
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << "abcdefgh";
  EXPECT_EQ(sha256_file(p), digest("abcdefgh"));
  EXPECT_EQ(sha256_file(p, 3), digest("abc"));
  EXPECT_THROW(sha256_file(p.string() + ".absent"), Error);
}

}  // namespace
}  // namespace luka

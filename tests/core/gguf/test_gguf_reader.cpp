// The GGUF reader: every value type, alignment, tensor infos; and bad input, each with a clear
// error naming the file and the problem.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/gguf/gguf.h"
#include "core/model/gguf_config.h"
#include "core/util/error.h"
#include "tests/core/gguf/gguf_builder.h"

namespace luka::gguf {
namespace {

using testing::Builder;

std::shared_ptr<const File> parse(const std::vector<std::uint8_t>& bytes) {
  return File::parse(bytes.data(), bytes.size(), "mem.gguf");
}

// Expects a luka::Error whose message contains `needle`.
void expect_error(const std::vector<std::uint8_t>& bytes, const std::string& needle) {
  try {
    parse(bytes);
    ADD_FAILURE() << "no error; expected one containing \"" << needle << "\"";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("mem.gguf"), std::string::npos) << e.what();
  }
}

std::vector<std::uint8_t> floats(std::initializer_list<float> v) {
  std::vector<std::uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), std::data(v), b.size());
  return b;
}

TEST(GgufReader, ReadsEveryValueTypeAndTensors) {
  Builder b;
  b.kv_u32("u32", 7).kv_i32("i32", -5).kv_f32("f32", 1.5f).kv_bool("yes", true).kv_string("s", "héllo");
  b.kv("u8", 0, {200}).kv("i8", 1, {0xFF}).kv("u16", 2, Builder::le(std::uint16_t{60000}));
  b.kv("i16", 3, Builder::le(std::int16_t{-300})).kv("u64", 10, Builder::le(std::uint64_t{1} << 40));
  b.kv("i64", 11, Builder::le(std::int64_t{-(std::int64_t{1} << 40)})).kv("f64", 12, Builder::le(0.25));
  b.kv_strings("names", {"a", "", "ccc"}).kv_i32s("ints", {1, -2, 3});
  // An array of arrays: [[1, 2], []] of u8.
  std::vector<std::uint8_t> nested = Builder::le(std::uint32_t{9});
  Builder::append(nested, Builder::le(std::uint64_t{2}));
  for (const std::vector<std::uint8_t>& inner : {std::vector<std::uint8_t>{1, 2}, std::vector<std::uint8_t>{}}) {
    Builder::append(nested, Builder::le(std::uint32_t{0}));
    Builder::append(nested, Builder::le(static_cast<std::uint64_t>(inner.size())));
    Builder::append(nested, inner);
  }
  b.kv("nested", 9, nested);
  b.tensor("w", {2, 3}, 0, floats({1, 2, 3, 4, 5, 6})).tensor("v", {4}, 0, floats({9, 8, 7, 6}));
  const auto bytes = b.bytes();
  const auto f = parse(bytes);
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->get_int("u32"), 7);
  EXPECT_EQ(f->get_int("i32"), -5);
  EXPECT_EQ(f->get_float("f32"), 1.5);
  EXPECT_EQ(f->get_bool_or("yes"), true);
  EXPECT_EQ(f->get_string("s"), "héllo");
  EXPECT_EQ(f->get_int("u8"), 200);
  EXPECT_EQ(f->get_int("i8"), -1);
  EXPECT_EQ(f->get_int("u16"), 60000);
  EXPECT_EQ(f->get_int("i16"), -300);
  EXPECT_EQ(f->get_int("u64"), std::int64_t{1} << 40);
  EXPECT_EQ(f->get_int("i64"), -(std::int64_t{1} << 40));
  EXPECT_EQ(f->get_float("f64"), 0.25);
  EXPECT_EQ(f->get_array_or("names", ValueType::kString)->strings, (std::vector<std::string>{"a", "", "ccc"}));
  EXPECT_EQ(f->get_array_or("ints", ValueType::kI32)->ints, (std::vector<std::int64_t>{1, -2, 3}));
  const Value* n = f->find("nested");
  ASSERT_NE(n, nullptr);
  ASSERT_EQ(n->size(), 2u);
  EXPECT_EQ(n->arrays[0].ints, (std::vector<std::int64_t>{1, 2}));
  EXPECT_EQ(n->arrays[1].size(), 0u);
  EXPECT_FALSE(f->get_int_or("absent").has_value());

  ASSERT_EQ(f->tensors().size(), 2u);
  const TensorInfo* w = f->find_tensor("w");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->dims, (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(w->bytes, 24u);
  float first;
  std::memcpy(&first, w->data, 4);
  EXPECT_EQ(first, 1.0f);
  const TensorInfo* v = f->find_tensor("v");
  EXPECT_EQ(v->offset % 32, 0u);
  std::memcpy(&first, v->data, 4);
  EXPECT_EQ(first, 9.0f);
}

TEST(GgufReader, Version2AndCustomAlignment) {
  // general.alignment = 64: the data section and offsets follow it.
  Builder b(2);
  b.kv_u32("general.alignment", 64);
  auto bytes = b.bytes();
  EXPECT_EQ(parse(bytes)->alignment(), 64u);
  EXPECT_EQ(parse(bytes)->version(), 2u);
}

TEST(GgufReader, WrongMagic) {
  auto bytes = Builder().bytes();
  bytes[0] = 'X';
  expect_error(bytes, "not a GGUF file");
  expect_error({}, "not a GGUF file");
  expect_error({'G', 'G'}, "not a GGUF file");
}

TEST(GgufReader, UnsupportedVersion) {
  expect_error(Builder(1).bytes(), "GGUF version 1 is not supported");
  expect_error(Builder(4).bytes(), "unsupported GGUF version 4");
  expect_error(Builder(0x03000000).bytes(), "big-endian");
}

TEST(GgufReader, TruncatedHeaderAtEveryByte) {
  Builder b;
  b.kv_string("general.architecture", "llama").kv_strings("t", {"x", "y"});
  b.tensor("w", {4}, 0, floats({1, 2, 3, 4}));
  const auto bytes = b.bytes();
  // Every cut inside the header (magic excluded) gives a clear error, never a crash.
  for (std::size_t cut = 4; cut < bytes.size() - 16; ++cut) {
    const std::vector<std::uint8_t> part(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(cut));
    EXPECT_THROW(parse(part), Error) << "cut at " << cut;
  }
  expect_error(std::vector<std::uint8_t>(bytes.begin(), bytes.begin() + 30), "metadata count 2 does not fit");
  // Cuts inside the second key/value ("t", an array of two strings) name what was being read.
  expect_error(std::vector<std::uint8_t>(bytes.begin(), bytes.begin() + 90), "truncated header while reading metadata 't'");
  expect_error(std::vector<std::uint8_t>(bytes.begin(), bytes.begin() + 102), "claims 2 elements, more than the 8 remaining");
  expect_error(std::vector<std::uint8_t>(bytes.begin(), bytes.begin() + 110), "truncated header while reading metadata 't' element length");
}

TEST(GgufReader, TruncatedTensorData) {
  Builder b;
  b.tensor("w", {8}, 0, floats({1, 2, 3, 4, 5, 6, 7, 8}));
  auto bytes = b.bytes();
  bytes.resize(bytes.size() - 4);
  expect_error(bytes, "extends past the end of the file");
}

TEST(GgufReader, TensorInfoPointingPastTheEnd) {
  Builder b;
  b.tensor("w", {4}, 0, floats({1, 2, 3, 4})).tensor("far", {4}, 0, {}, 1 << 20);
  expect_error(b.bytes(), "tensor 'far'");
  Builder huge;
  huge.tensor("w", {std::uint64_t{1} << 62, 4}, 0, {});
  expect_error(huge.bytes(), "tensor 'w'");
}

TEST(GgufReader, UnknownQuantizationType) {
  Builder b;
  b.tensor("w", {32}, 4, std::vector<std::uint8_t>(18));  // 4 was Q4_2, removed from ggml
  expect_error(b.bytes(), "unknown ggml type 4");
  Builder c;
  c.tensor("w", {32}, 1234, std::vector<std::uint8_t>(18));
  expect_error(c.bytes(), "unknown ggml type 1234");
}

TEST(GgufReader, BadTensorInfos) {
  Builder rows;
  rows.tensor("w", {31}, 8, std::vector<std::uint8_t>(34));  // Q8_0 rows must be multiples of 32
  expect_error(rows.bytes(), "not a multiple of its block of 32");
  Builder dims;
  dims.tensor("w", {1, 1, 1, 1, 1}, 0, floats({1}));
  expect_error(dims.bytes(), "5 dimensions");
  Builder zero;
  zero.tensor("w", {0}, 0, {});
  expect_error(zero.bytes(), "invalid dimension 0");
  Builder twice;
  twice.tensor("w", {1}, 0, floats({1})).tensor("w", {1}, 0, floats({2}));
  expect_error(twice.bytes(), "appears twice");
  Builder misaligned;
  misaligned.tensor("w", {1}, 0, floats({1}), 4);
  expect_error(misaligned.bytes(), "not a multiple of the alignment");
}

TEST(GgufReader, BadMetadata) {
  expect_error(Builder().kv("k", 13, {}).bytes(), "unknown value type 13");
  expect_error(Builder().kv("k", 7, {2}).bytes(), "bool with byte value 2");
  expect_error(Builder().kv_u32("k", 1).kv_u32("k", 2).bytes(), "appears twice");
  // A string or an array claiming more bytes than the file has.
  expect_error(Builder().kv("k", 8, Builder::le(std::uint64_t{1} << 60)).bytes(), "only");
  std::vector<std::uint8_t> array = Builder::le(std::uint32_t{4});
  Builder::append(array, Builder::le(std::uint64_t{1} << 60));
  expect_error(Builder().kv("k", 9, array).bytes(), "elements");
  std::vector<std::uint8_t> bad_elem = Builder::le(std::uint32_t{99});
  Builder::append(bad_elem, Builder::le(std::uint64_t{0}));
  expect_error(Builder().kv("k", 9, bad_elem).bytes(), "unknown array element type 99");
  expect_error(Builder().kv_string("general.alignment", "32").bytes(), "expected u32");
  expect_error(Builder().kv_u32("general.alignment", 48).bytes(), "not a power of two");
  // Arrays nested deeper than the reader allows.
  std::vector<std::uint8_t> deep;
  for (int d = 0; d < 20; ++d) {
    Builder::append(deep, Builder::le(std::uint32_t{9}));
    Builder::append(deep, Builder::le(std::uint64_t{1}));
  }
  Builder::append(deep, Builder::le(std::uint32_t{0}));
  Builder::append(deep, Builder::le(std::uint64_t{0}));
  std::vector<std::uint8_t> body(deep.begin(), deep.end());
  expect_error(Builder().kv("k", 9, std::vector<std::uint8_t>(body.begin(), body.end())).bytes(), "deeper");
}

TEST(GgufReader, MetadataWithTheWrongType) {
  const auto f = parse(Builder().kv_string("n", "5").kv_u32("s", 1).kv_strings("a", {"x"}).bytes());
  const auto message = [&](auto&& call) {
    try {
      call();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([&] { f->get_int("n"); }).find("'n' has type string, expected an integer"), std::string::npos);
  EXPECT_NE(message([&] { f->get_string("s"); }).find("'s' has type u32, expected string"), std::string::npos);
  EXPECT_NE(message([&] { f->get_float("s"); }).find("expected f32 or f64"), std::string::npos);
  EXPECT_NE(message([&] { f->get_array_or("a", ValueType::kI32); }).find("array of string, expected array of i32"),
            std::string::npos);
  EXPECT_NE(message([&] { f->get_int("missing"); }).find("missing metadata 'missing'"), std::string::npos);
}

TEST(GgufReader, OpenNamesTheFile) {
  const std::filesystem::path dir = std::filesystem::path(LUKA_TEST_WORK) / "gguf-reader";
  std::filesystem::create_directories(dir);
  const auto path = dir / "truncated.gguf";
  Builder b;
  b.tensor("w", {8}, 0, floats({1, 2, 3, 4, 5, 6, 7, 8}));
  auto bytes = b.bytes();
  bytes.resize(bytes.size() - 8);
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  try {
    File::open(path);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos) << e.what();
  }
  EXPECT_TRUE(File::has_magic(path));
  EXPECT_FALSE(File::has_magic(dir));
}

// Each tensor has its own bytes: one placed on another's (attn_k on attn_q's offset) would load
// the first one's weights twice. safetensors refuses the same (BadInput.OverlappingTensorsRefused).
TEST(GgufReader, OverlappingTensorsAreRefused) {
  const auto data = floats({1, 2, 3, 4, 5, 6, 7, 8});
  Builder same;
  same.tensor("blk.0.attn_q.weight", {8}, 0, data).tensor("blk.0.attn_k.weight", {8}, 0, {}, 0);
  expect_error(same.bytes(), "tensors 'blk.0.attn_q.weight' [0, 32) and 'blk.0.attn_k.weight' [0, 32) overlap");
  Builder partly;  // the second starts inside the first, at the next alignment
  partly.tensor("a", {16}, 0, floats({1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 6, 7, 8})).tensor("b", {8}, 0, {}, 32);
  expect_error(partly.bytes(), "tensors 'a' [0, 64) and 'b' [32, 64) overlap");
  Builder apart;  // back to back is fine
  apart.tensor("a", {8}, 0, data).tensor("b", {8}, 0, data);
  EXPECT_EQ(parse(apart.bytes())->tensors().size(), 2u);
}

// rope.freq_base NaN, 0 or negative gave NaN rotations and an unclear error at generate time; the
// config is refused at load, naming the file and the key.
TEST(GgufReader, RopeFreqBaseMustBeFinitePositive) {
  const auto config_error = [](float base) -> std::string {
    Builder b;
    b.kv_string("general.architecture", "llama").kv_u32("llama.embedding_length", 8).kv_u32("llama.feed_forward_length", 16);
    b.kv_u32("llama.block_count", 1).kv_u32("llama.attention.head_count", 2).kv_u32("llama.context_length", 64);
    b.kv_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f).kv_f32("llama.rope.freq_base", base);
    b.tensor("token_embd.weight", {8, 4}, 0, std::vector<std::uint8_t>(8 * 4 * 4, 0));
    const auto bytes = b.bytes();
    try {
      const ModelConfig c = config_from_gguf(*File::parse(bytes.data(), bytes.size(), "mem.gguf"));
      return "accepted, theta " + std::to_string(c.rope.theta);
    } catch (const Error& e) {
      return e.what();
    }
  };
  EXPECT_EQ(config_error(10000.0f), "accepted, theta 10000.000000");
  for (const float bad : {std::nanf(""), -1.0f, 0.0f, INFINITY}) {
    const std::string e = config_error(bad);
    EXPECT_NE(e.find("mem.gguf: GGUF: metadata 'llama.rope.freq_base' must be a finite positive number"), std::string::npos) << e;
  }
}

// block_count 2^40 sized the model before any block's tensor was looked up: the load failed as out
// of memory, naming neither the key nor the file's blocks.
TEST(GgufReader, BlockCountPastTheFilesBlocksIsRefused) {
  const auto config_error = [](std::uint32_t blocks_in_file, std::uint64_t count) -> std::string {
    Builder b;
    b.kv_string("general.architecture", "llama").kv_u32("llama.embedding_length", 8).kv_u32("llama.feed_forward_length", 16);
    std::vector<std::uint8_t> count_bytes(8);
    for (int i = 0; i < 8; ++i) count_bytes[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(count >> (8 * i));
    b.kv("llama.block_count", 10, count_bytes).kv_u32("llama.attention.head_count", 2).kv_u32("llama.context_length", 64);
    b.kv_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
    b.tensor("token_embd.weight", {8, 4}, 0, std::vector<std::uint8_t>(8 * 4 * 4, 0));
    for (std::uint32_t i = 0; i < blocks_in_file; ++i)
      b.tensor("blk." + std::to_string(i) + ".attn_norm.weight", {8}, 0, std::vector<std::uint8_t>(8 * 4, 0));
    const auto bytes = b.bytes();
    try {
      return "accepted, " + std::to_string(config_from_gguf(*File::parse(bytes.data(), bytes.size(), "mem.gguf")).num_layers) + " layers";
    } catch (const Error& e) {
      return e.what();
    }
  };
  EXPECT_EQ(config_error(2, 2), "accepted, 2 layers");
  EXPECT_EQ(config_error(2, 1ull << 40), "mem.gguf: GGUF: metadata 'llama.block_count' is 1099511627776, but the file has tensors for 2 blocks");
  EXPECT_EQ(config_error(0, 1ull << 40), "mem.gguf: GGUF: metadata 'llama.block_count' is 1099511627776, but the file has tensors for 0 blocks");
}

}  // namespace
}  // namespace luka::gguf

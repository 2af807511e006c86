// A bounded random-mutation fuzzer for targets written against the libFuzzer interface, for
// compilers without libFuzzer (GCC). Seeds: built-in valid GGUF images plus any files given;
// each round mutates a seed (bit flips, interesting integers over header fields, truncation,
// insertion, deletion, splicing) and runs the target. Exceptions other than luka::Error abort.
//
//   fuzz_gguf_header [--seconds N] [--seed S] [SEED_FILE...]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "tests/core/gguf/gguf_builder.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

using Bytes = std::vector<std::uint8_t>;
using luka::gguf::testing::Builder;

std::vector<Bytes> builtin_seeds() {
  std::vector<Bytes> seeds;
  Builder a;
  a.kv_string("general.architecture", "llama").kv_u32("llama.block_count", 2).kv_f32("x", 1.5f);
  a.kv_strings("tokenizer.ggml.tokens", {"a", "b", "ab"}).kv_i32s("tokenizer.ggml.token_type", {1, 1, 3});
  a.tensor("w", {32, 2}, 8, Bytes(68, 1)).tensor("v", {4}, 0, Bytes(16, 0));
  seeds.push_back(a.bytes());
  Builder b(2);
  b.kv_u32("general.alignment", 64).kv_bool("flag", true).kv("u64", 10, Builder::le(std::uint64_t{7}));
  b.tensor("k", {256}, 12, Bytes(144, 3)).tensor("s", {256}, 14, Bytes(210, 5)).tensor("h", {8}, 1, Bytes(16, 0x3C));
  seeds.push_back(b.bytes());
  Builder c;
  Bytes nested = Builder::le(std::uint32_t{9});
  Builder::append(nested, Builder::le(std::uint64_t{1}));
  Builder::append(nested, Builder::le(std::uint32_t{8}));
  Builder::append(nested, Builder::le(std::uint64_t{1}));
  Builder::append(nested, Builder::str("deep"));
  c.kv("nested", 9, nested).tensor("q", {32}, 2, Bytes(18, 7)).tensor("q1", {32}, 3, Bytes(20, 9));
  seeds.push_back(c.bytes());
  return seeds;
}

const std::uint64_t kInteresting[] = {0, 1, 2, 3, 4, 7, 8, 9, 12, 13, 31, 32, 33, 255, 256, 0x7FFF, 0xFFFF,
                                      0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0x100000000ULL, 0x7FFFFFFFFFFFFFFFULL,
                                      0x8000000000000000ULL, 0xFFFFFFFFFFFFFFFFULL};

Bytes mutate(const Bytes& seed, const std::vector<Bytes>& pool, std::mt19937_64& rng) {
  Bytes b = seed;
  const int rounds = 1 + static_cast<int>(rng() % 4);
  for (int r = 0; r < rounds; ++r) {
    const std::size_t n = b.size();
    switch (rng() % 7) {
      case 0:  // flip a bit
        if (n) b[rng() % n] ^= static_cast<std::uint8_t>(1u << (rng() % 8));
        break;
      case 1:  // random byte
        if (n) b[rng() % n] = static_cast<std::uint8_t>(rng());
        break;
      case 2: {  // interesting 4- or 8-byte integer at a random (often aligned) position
        const std::size_t width = rng() % 2 ? 4 : 8;
        if (n < width) break;
        std::size_t at = rng() % (n - width + 1);
        if (rng() % 2) at &= ~std::size_t{3};
        const std::uint64_t v = kInteresting[rng() % std::size(kInteresting)];
        std::memcpy(b.data() + at, &v, width);
        break;
      }
      case 3:  // truncate
        if (n) b.resize(rng() % n);
        break;
      case 4: {  // insert random bytes
        const std::size_t at = n ? rng() % (n + 1) : 0;
        Bytes ins(1 + rng() % 16);
        for (auto& x : ins) x = static_cast<std::uint8_t>(rng());
        b.insert(b.begin() + static_cast<std::ptrdiff_t>(at), ins.begin(), ins.end());
        break;
      }
      case 5: {  // delete a range
        if (n < 2) break;
        const std::size_t at = rng() % n, len = 1 + rng() % std::min<std::size_t>(16, n - at);
        b.erase(b.begin() + static_cast<std::ptrdiff_t>(at), b.begin() + static_cast<std::ptrdiff_t>(at + len));
        break;
      }
      case 6: {  // splice the tail of another seed
        const Bytes& other = pool[rng() % pool.size()];
        if (!n || other.empty()) break;
        const std::size_t at = rng() % n, from = rng() % other.size();
        b.resize(at);
        b.insert(b.end(), other.begin() + static_cast<std::ptrdiff_t>(from), other.end());
        break;
      }
    }
  }
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 10;
  std::uint64_t seed = 1;
  std::vector<Bytes> pool = builtin_seeds();
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--seconds" && i + 1 < argc) {
      seconds = std::atof(argv[++i]);
    } else if (a == "--seed" && i + 1 < argc) {
      seed = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--help") {
      std::printf("usage: %s [--seconds N] [--seed S] [SEED_FILE...]\n", argv[0]);
      return 0;
    } else {
      std::ifstream in(a, std::ios::binary);
      if (!in) {
        std::fprintf(stderr, "fuzz: cannot read seed file %s\n", a.c_str());
        return 2;
      }
      Bytes bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (bytes.size() > (1u << 20)) bytes.resize(1u << 20);  // headers live at the front
      pool.push_back(std::move(bytes));
    }
  }
  std::mt19937_64 rng(seed);
  const auto start = std::chrono::steady_clock::now();
  std::uint64_t runs = 0;
  for (const Bytes& s : pool) LLVMFuzzerTestOneInput(s.data(), s.size());
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < seconds) {
    for (int k = 0; k < 256; ++k, ++runs) {
      const Bytes input = mutate(pool[rng() % pool.size()], pool, rng);
      try {
        LLVMFuzzerTestOneInput(input.data(), input.size());
      } catch (const std::exception& e) {
        std::fprintf(stderr, "fuzz: input %llu (%zu bytes) escaped with %s\n", static_cast<unsigned long long>(runs),
                     input.size(), e.what());
        std::ofstream("fuzz-crash.bin", std::ios::binary)
            .write(reinterpret_cast<const char*>(input.data()), static_cast<std::streamsize>(input.size()));
        return 1;
      }
    }
  }
  std::printf("fuzz: %llu inputs in %.0f s from %zu seeds, no crash\n", static_cast<unsigned long long>(runs), seconds,
              pool.size());
  return 0;
}

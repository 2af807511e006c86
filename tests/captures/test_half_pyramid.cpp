// Half conversion against c10::Half (LibTorch's own implementation) and the pyramid against
// at::max_pool2d, both independent of the code under test.
#include <gtest/gtest.h>

#include <thread>

#include <ATen/ATen.h>
#include <c10/util/Half.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "core/util/half.h"
#include "captures/pyramid.h"
#include "core/util/error.h"

namespace luka::capture {
namespace {

std::uint16_t c10_bits(float f) { return c10::Half(f).x; }

std::vector<float> edge_values() {
  std::vector<float> v = {0.f, -0.f, 1.f, -1.f, 65504.f, 65519.f, 65520.f, 1e6f, -1e6f, 6.1035156e-05f, 6.0975552e-05f,
                          5.9604645e-08f, 2.9802322e-08f, 2.98023259e-08f, 1e-9f, 0.1f, 0.333333f, 1.0009766f, 1.00048828125f,
                          1.00146484375f, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::denorm_min(), 2049.f, 2051.f, 4097.f};
  // Every half value and the midpoints between neighbours (the ties).
  for (std::uint32_t h = 0; h < 0x7c00; ++h) {
    const float a = c10::Half(static_cast<std::uint16_t>(h), c10::Half::from_bits());
    const float b = c10::Half(static_cast<std::uint16_t>(h + 1), c10::Half::from_bits());
    v.push_back(a);
    v.push_back(-a);
    if (h + 1 < 0x7c00) v.push_back(static_cast<float>((static_cast<double>(a) + b) / 2));
  }
  return v;
}

TEST(Half, ScalarMatchesC10OnEveryHalfTheTiesAndEdges) {
  for (const float f : edge_values()) {
    ASSERT_EQ(float_to_half(f), c10_bits(f)) << f;
    const std::uint16_t b = c10_bits(f);
    const float back = half_to_float(b);
    const float ref = c10::Half(b, c10::Half::from_bits());
    ASSERT_EQ(std::memcmp(&back, &ref, 4), 0) << f;
  }
}

TEST(Half, NaNStaysNaN) {
  EXPECT_TRUE(std::isnan(half_to_float(float_to_half(std::numeric_limits<float>::quiet_NaN()))));
  std::vector<float> in = {std::numeric_limits<float>::quiet_NaN(), 1.f};
  std::vector<std::uint16_t> out(2);
  floats_to_halves(in.data(), out.data(), 2);
  EXPECT_EQ(out[0] & 0x7c00, 0x7c00);
  EXPECT_NE(out[0] & 0x3ff, 0);
}

TEST(Half, BulkMatchesScalarOnRandomValues) {
  std::mt19937 rng(7);
  std::vector<float> v = edge_values();
  std::uniform_real_distribution<float> u(-20.f, 5.f);
  for (int i = 0; i < 200000; ++i) v.push_back(std::ldexp(1.f + static_cast<float>(rng() % 1000000) / 1e6f, static_cast<int>(u(rng))));
  std::vector<std::uint16_t> bulk(v.size());
  floats_to_halves(v.data(), bulk.data(), v.size());
  std::vector<float> back(v.size());
  halves_to_floats(bulk.data(), back.data(), v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    ASSERT_EQ(bulk[i], c10_bits(v[i])) << v[i];
    ASSERT_EQ(back[i], static_cast<float>(c10::Half(bulk[i], c10::Half::from_bits()))) << v[i];
  }
}

// A random causal attention map [H, n, n] (rows are softmax distributions over keys <= row).
at::Tensor causal_map(int H, std::int64_t n, std::uint64_t seed) {
  at::manual_seed(seed);
  at::Tensor s = at::randn({H, n, n}) * 3;
  s.masked_fill_(at::ones({n, n}, at::kBool).triu(1), -INFINITY);
  return at::softmax(s, -1).contiguous();
}

// Per-head work on real threads (two ranges), as on the model's thread pool.
void two_threads(std::int64_t n, const std::function<void(std::int64_t, std::int64_t)>& body) {
  std::thread t([&] { body(0, n / 2); });
  body(n / 2, n);
  t.join();
}

// input_level > 0: the rows arrive max-pooled by 2^input_level already (as a device pools them),
// in chunks of that level's rows.
void check_pyramid(std::int64_t n, std::int64_t cap, std::int64_t min, std::vector<std::int64_t> chunks, std::int64_t band,
                   ParallelFor parallel = serial_for, bool with_negatives = false, int input_level = 0) {
  const int H = 3;
  at::Tensor map = causal_map(H, n, static_cast<std::uint64_t>(n));
  if (with_negatives) {  // random signs (the pooling's integer fast path holds for non-negative halves only)
    at::manual_seed(static_cast<std::uint64_t>(n) + 1);
    map = (map * at::where(at::rand({H, n, n}) < 0.3, -1.f, 1.f)).contiguous();
  }
  const auto levels = stored_levels(n, cap, min);
  std::map<int, at::Tensor> got;
  for (const int k : levels) got[k] = at::full({H, level_size(n, k), level_size(n, k)}, -1.f);
  PyramidBuilder b(H, n, levels, [&](int) { return band; }, [&](const BandView& r) {
    ASSERT_EQ(r.cols, std::min(level_size(n, r.level), r.row0 + r.rows));
    at::Tensor dst = got[r.level].narrow(1, r.row0, r.rows);
    dst.fill_(0.f);
    for (int h = 0; h < H; ++h)
      for (std::int64_t i = 0; i < r.rows; ++i) {
        std::vector<float> f(static_cast<std::size_t>(r.cols));
        halves_to_floats(r.data + h * r.head_stride + i * r.row_stride, f.data(), f.size());
        dst[h][i].narrow(0, 0, r.cols).copy_(at::from_blob(f.data(), {r.cols}));
      }
  }, parallel);
  std::int64_t row = 0;
  if (input_level == 0) {
    for (std::size_t i = 0; row < n; ++i) {
      const std::int64_t m = std::min(chunks[i % chunks.size()], n - row);
      const at::Tensor part = map.narrow(1, row, m).contiguous();
      b.add_rows(row, m, part.const_data_ptr<float>());
      row += m;
    }
  } else {
    const std::int64_t p = std::int64_t{1} << input_level, S = level_size(n, input_level);
    const at::Tensor pooled = at::max_pool2d(map, {p, p}, {p, p}, {0, 0}, {1, 1}, /*ceil_mode=*/true).contiguous();
    ASSERT_EQ(pooled.size(1), S);
    for (std::size_t i = 0; row < S; ++i) {
      const std::int64_t m = std::min(chunks[i % chunks.size()], S - row);
      const at::Tensor part = pooled.narrow(1, row, m).contiguous();
      std::vector<std::uint16_t> halves(static_cast<std::size_t>(part.numel()));
      floats_to_halves(part.const_data_ptr<float>(), halves.data(), halves.size());
      b.add_level_rows(input_level, row, m, halves.data());
      row += m;
      EXPECT_EQ(b.rows_done(), std::min(n, row * p));
    }
  }
  b.finish();
  // Independent reference: repeated 2x2 max pooling with ceil_mode (a partial window takes the
  // max of what exists), then the half rounding the file stores.
  at::Tensor ref = map.unsqueeze(1);
  int level = 0;
  for (const int k : levels) {
    while (level < k) {
      ref = at::max_pool2d(ref, {2, 2}, {2, 2}, {0, 0}, {1, 1}, /*ceil_mode=*/true);
      ++level;
    }
    const at::Tensor expect = ref.squeeze(1).to(at::kHalf).to(at::kFloat);
    ASSERT_EQ(got[k].sizes(), expect.sizes()) << "level " << k;
    EXPECT_TRUE(at::equal(got[k], expect)) << "n " << n << " level " << k << " max diff "
                                           << (got[k] - expect).abs().max().item<float>();
  }
}

TEST(Pyramid, EveryLevelIsTheMaxPoolOfTheOneBelow) {
  check_pyramid(203, 1000, 8, {64}, 32);             // odd sizes at every level
  check_pyramid(256, 1000, 16, {256}, 256);          // one chunk
  check_pyramid(301, 1000, 4, {7, 1, 33, 2}, 16);    // irregular row chunks
  check_pyramid(1000, 200, 40, {256}, 64);           // level 0 above the cap: coarser levels only
  check_pyramid(5, 1000, 64, {5}, 256);              // small: level 0 alone
  check_pyramid(301, 1000, 4, {7, 1, 33, 2}, 16, two_threads);  // heads split across threads
  check_pyramid(203, 1000, 8, {64}, 32, serial_for, true);    // negative values: the ordered maximum
}

// A device that max-pools the map before it reaches the host hands a level above 0: the levels
// built from it equal those built from every row.
TEST(Pyramid, RowsPooledAlreadyBuildTheSameLevels) {
  check_pyramid(1000, 200, 40, {7, 1, 33, 2}, 16, serial_for, false, 1);
  check_pyramid(1000, 200, 40, {64}, 64, two_threads, false, 2);
  check_pyramid(1000, 200, 40, {125}, 32, serial_for, false, 3);  // the lowest stored level itself
  check_pyramid(203, 60, 8, {5, 3}, 8, serial_for, false, 2);      // odd sizes and a cut last cell
}

TEST(Pyramid, PooledRowsAboveTheLowestStoredLevelOrOfTwoLevelsAreRefused) {
  const auto emit = [](const BandView&) {};
  const std::vector<std::uint16_t> zeros(3 * 1000 * 1000, 0);
  PyramidBuilder above(3, 1000, stored_levels(1000, 200, 40), [](int) { return 16; }, emit);
  EXPECT_THROW(above.add_level_rows(4, 0, 1, zeros.data()), Error);  // level 3 is stored below it
  PyramidBuilder mixed(3, 1000, stored_levels(1000, 200, 40), [](int) { return 16; }, emit);
  mixed.add_level_rows(2, 0, 4, zeros.data());
  EXPECT_THROW(mixed.add_level_rows(1, 8, 2, zeros.data()), Error);  // rows of another level
  EXPECT_THROW(mixed.add_level_rows(2, 5, 1, zeros.data()), Error);  // out of order
  EXPECT_THROW(mixed.finish(), Error);                               // rows missing
}

TEST(Pyramid, StoredLevels) {
  EXPECT_EQ(stored_levels(1024, 2048, 64), (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_EQ(stored_levels(32768, 2048, 64), (std::vector<int>{4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(stored_levels(50, 2048, 64), (std::vector<int>{0}));
  EXPECT_EQ(stored_levels(65, 2048, 64), (std::vector<int>{0, 1}));
  EXPECT_EQ(level_size(5, 1), 3);
  EXPECT_EQ(level_size(5, 3), 1);
}

}  // namespace
}  // namespace luka::capture

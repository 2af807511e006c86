// Quest's page bound and selection (core/press/quest.h) against a NumPy implementation written
// from the paper in float64 loops (tests/fixtures/quest_reference.py): page minima and maxima
// exactly, bounds within float32 rounding, and the same attended positions per query head, on a
// partial last page with GQA, on MHA, and on small integers where bounds tie exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/press/quest.h"
#include "core/util/error.h"
#include "core/util/npy.h"
#include "tests/python_reference.h"

namespace fs = std::filesystem;
using namespace luka;
using namespace luka::press;

namespace {

at::Tensor load(const fs::path& path) {
  NpyArray a = read_npy_f32(path);
  return at::from_blob(a.data.data(), a.shape, at::kFloat).clone();
}

fs::path quest_case(const std::string& name, std::string& why) {
  const fs::path script = fs::path(LUKA_SOURCE_DIR) / "tests/fixtures/quest_reference.py";
  return luka::test::python_reference(script, {name}, fs::path(LUKA_TEST_WORK) / ("quest_" + name), why);
}

class QuestReference : public ::testing::TestWithParam<const char*> {};

TEST_P(QuestReference, BoundsAndSelectedPagesEqualTheNumpyReference) {
  std::string why;
  const fs::path dir = quest_case(GetParam(), why);
  if (dir.empty()) GTEST_SKIP() << "Quest's NumPy reference not made: " << why;
  const nlohmann::json c = nlohmann::json::parse(std::ifstream(dir / "case.json"));
  const at::Tensor keys = load(dir / "keys.npy"), query = load(dir / "query.npy");
  const QuestPages pages = quest_pages(keys, c["S"].get<std::int64_t>());
  // Minima and maxima are elements of the keys: exact.
  EXPECT_TRUE(at::equal(pages.min, load(dir / "min.npy")));
  EXPECT_TRUE(at::equal(pages.max, load(dir / "max.npy")));
  // A float32 sum of d products against the float64 one rounded to float32.
  const at::Tensor bounds = quest_bounds(pages, query), ref = load(dir / "bounds.npy");
  ASSERT_EQ(bounds.sizes(), ref.sizes());
  EXPECT_LE((bounds - ref).abs().max().item<double>(), 1e-5 * (1 + ref.abs().max().item<double>()));
  const auto sel = quest_select(pages, query, c["pages"].get<std::int64_t>(), c["recent"].get<std::int64_t>());
  const at::Tensor kept = load(dir / "kept.npy");
  const std::int64_t heads = kept.size(0), T = kept.size(1);
  ASSERT_EQ(sel.size(), static_cast<std::size_t>(heads));
  std::int64_t attended = 0;
  for (std::int64_t h = 0; h < heads; ++h) {
    std::vector<std::int64_t> expected;
    for (std::int64_t t = 0; t < T; ++t)
      if (kept[h][t].item<float>() > 0.5f) expected.push_back(t);
    EXPECT_EQ(sel[static_cast<std::size_t>(h)], expected) << "query head " << h;
    attended += static_cast<std::int64_t>(expected.size());
  }
  EXPECT_LT(attended, heads * T) << "the case selects every position and would test nothing";
}

INSTANTIATE_TEST_SUITE_P(Cases, QuestReference, ::testing::Values("gqa2", "mha", "ties"),
                         [](const auto& info) { return std::string(info.param); });

// With every page selected, Quest attends to every position: the dense cache.
TEST(Quest, EveryPageIsTheWholeCache) {
  const at::Tensor keys = at::randn({2, 37, 8});
  const QuestPages pages = quest_pages(keys, 5);
  const auto sel = quest_select(pages, at::randn({4, 8}), 100, 3);
  for (const auto& s : sel) {
    ASSERT_EQ(s.size(), 37u);
    for (std::int64_t t = 0; t < 37; ++t) EXPECT_EQ(s[static_cast<std::size_t>(t)], t);
  }
}

// The bound is an upper bound for every key of its page (the paper's claim, checked on random data).
TEST(Quest, BoundIsAtLeastEveryKeysScore) {
  const at::Tensor keys = at::randn({2, 50, 16}), q = at::randn({4, 16});
  const QuestPages pages = quest_pages(keys, 7);
  const at::Tensor b = quest_bounds(pages, q);
  const at::Tensor scores = at::matmul(q.unsqueeze(1), keys.repeat_interleave(2, 0).transpose(1, 2)).squeeze(1);
  for (std::int64_t h = 0; h < 4; ++h)
    for (std::int64_t t = 0; t < 50; ++t) EXPECT_LE(scores[h][t].item<float>(), b[h][t / 7].item<float>() + 1e-5);
}

TEST(Quest, BadInputNamesTheField) {
  try {
    quest_pages(at::randn({2, 10, 4}), 0);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("page_size must be 1 or more"), std::string::npos) << e.what();
  }
  const QuestPages pages = quest_pages(at::randn({2, 10, 4}), 4);
  EXPECT_THROW(quest_bounds(pages, at::randn({3, 4})), Error);  // 3 heads over 2 KV heads
  EXPECT_THROW(quest_select(pages, at::randn({2, 4}), -1, 0), Error);
}

}  // namespace

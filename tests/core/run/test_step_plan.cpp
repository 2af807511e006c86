// The static step's planner (core/run/step_plan) against direct formulas: buffer sizes of the KV
// cache and the LuKA state, the page schedule of the run (which steps replay the page variant),
// the lined and Kascade set sizes, the layers it leaves eager, and what a config change costs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/luka/config.h"
#include "core/run/step_plan.h"
#include "core/util/error.h"

namespace luka {
namespace {

// Qwen3-0.6B's shape in bf16.
ModelShape qwen3_06b() {
  ModelShape s;
  s.layers = 28;
  s.heads = 16;
  s.kv_heads = 8;
  s.head_dim = 128;
  s.hidden = 1024;
  s.intermediate = 3072;
  s.vocab = 151936;
  s.dtype_bytes = 2;
  return s;
}

ModelShape small() {
  ModelShape s;
  s.layers = 3;
  s.heads = 4;
  s.kv_heads = 2;
  s.head_dim = 64;
  s.hidden = 256;
  s.intermediate = 512;
  s.vocab = 512;
  s.dtype_bytes = 4;
  return s;
}

TEST(StepPlan, PlainDenseReservesTheKvCacheForTheWholeContextAndNoLukaState) {
  const ModelShape m = qwen3_06b();
  const RunLength run{4000, 96};
  const StepPlan p = plan_step(m, run, {});
  EXPECT_EQ(p.context, 4096);
  EXPECT_FALSE(p.luka);
  EXPECT_TRUE(p.static_step());
  std::int64_t cache = 0;
  for (int l = 0; l < m.layers; ++l) {
    const StepBuffer& k = p.buffer("k_cache", l);
    EXPECT_EQ(k.shape, (std::vector<std::int64_t>{8, 4096, 128}));
    EXPECT_EQ(k.bytes(), 8LL * 4096 * 128 * 2);
    cache += k.bytes() + p.buffer("v_cache", l).bytes();
    EXPECT_FALSE(p.has_buffer("importance", l));
  }
  EXPECT_EQ(cache, 2LL * 28 * 8 * 4096 * 128 * 2);  // 448 MiB: 2 · L · KV · T · D · 2 bytes
  EXPECT_EQ(p.buffer("logits").bytes(), 151936LL * 4);
  EXPECT_EQ(p.buffer("logits_compute").bytes(), 151936LL * 2);
  EXPECT_EQ(p.buffer("scores").shape, (std::vector<std::int64_t>{16, 4096}));
  EXPECT_EQ(p.buffer("ids").shape, (std::vector<std::int64_t>{96}));
  EXPECT_EQ(p.buffer("rope_angle").shape, (std::vector<std::int64_t>{64}));
  EXPECT_EQ(p.buffer("norm_input").shape, (std::vector<std::int64_t>{16 * 128}));  // max(hidden, H·D)
  std::int64_t sum = 0;
  for (const StepBuffer& b : p.buffers) sum += b.elements() * b.elem_bytes;
  EXPECT_EQ(p.total_bytes(), sum);
  // No page is ever made without LuKA: every step replays the plain variant.
  EXPECT_TRUE(p.page_steps.empty());
  for (std::int64_t s = 1; s <= run.max_new_tokens; ++s) EXPECT_EQ(p.variant(s), StepVariant::kPlain);
  EXPECT_EQ(p.moving_arguments, (std::vector<std::string>{"token", "position", "step"}));
}

// Ours: after the prefill every page that fits, then every `interval` steps; the pages that exist
// at context T are then f(T) = max(0, ⌊(T − tail) / page_size⌋) at each creation.
TEST(StepPlan, PageScheduleOfTheRunMatchesTheIntervalRuleWrittenOut) {
  const ModelShape m = small();
  const RunLength run{300, 100};
  const LukaConfig config = LukaConfig::preset("clustered", m.layers);
  const StepPlan p = plan_step(m, run, config.layers);
  const std::int64_t page = 16, tail = 128, interval = 16;
  const auto fit = [&](std::int64_t T) { return std::max<std::int64_t>(0, (T - tail) / page); };
  std::vector<std::int64_t> steps;
  for (int l = 0; l < m.layers; ++l) {
    EXPECT_EQ(p.prefill_pages[l], fit(300));  // 10
    std::int64_t pages = fit(300);
    for (std::int64_t s = 1; s <= run.max_new_tokens; ++s) {
      const std::int64_t want = s % interval == 0 ? fit(300 + s) - pages : 0;
      EXPECT_EQ(p.page_counts[l][s - 1], want) << "layer " << l << " step " << s;
      pages += want;
      if (l == 0 && want > 0) steps.push_back(s);
    }
    EXPECT_EQ(p.max_pages[l], fit(300 + 96));  // the last creation: step 96, T = 396
    EXPECT_EQ(p.buffer("summary_keys", l).shape, (std::vector<std::int64_t>{2, fit(396), 64}));
    EXPECT_EQ(p.buffer("page_start", l).shape, (std::vector<std::int64_t>{fit(396) + 1}));
    EXPECT_EQ(p.buffer("importance", l).shape, (std::vector<std::int64_t>{2, 400}));
    EXPECT_EQ(p.buffer("h2o", l).shape, (std::vector<std::int64_t>{4, 400}));
    EXPECT_EQ(p.buffer("cover", l).shape, (std::vector<std::int64_t>{4, fit(396) + 400}));
  }
  EXPECT_EQ(p.page_steps, steps);
  EXPECT_EQ(steps, (std::vector<std::int64_t>{16, 32, 48, 64, 80, 96}));
  EXPECT_EQ(p.variant(16), StepVariant::kPages);
  EXPECT_EQ(p.variant(17), StepVariant::kPlain);
  EXPECT_EQ(p.buffer("page_schedule").shape, (std::vector<std::int64_t>{100, 3}));
}

TEST(StepPlan, ShortPromptsMakeTheirFirstPagesOnceTheTailIsFull) {
  const ModelShape m = small();
  LukaConfig config = LukaConfig::preset("dense", m.layers);
  config.apply_override("page_size=4,tail=8,interval=2");
  const StepPlan p = plan_step(m, RunLength{5, 20}, config.layers);
  // f(T) = ⌊(T − 8) / 4⌋ at even steps: T = 5 + s.
  EXPECT_EQ(p.prefill_pages[0], 0);
  std::int64_t pages = 0;
  std::vector<std::int64_t> steps;
  for (std::int64_t s = 1; s <= 20; ++s) {
    const std::int64_t want = s % 2 == 0 ? std::max<std::int64_t>(0, (5 + s - 8) / 4) - pages : 0;
    EXPECT_EQ(p.page_counts[1][s - 1], want) << s;
    pages += want;
    if (want > 0) steps.push_back(s);
  }
  EXPECT_EQ(p.page_steps, steps);
  EXPECT_EQ(p.max_pages[2], (5 + 20 - 8) / 4);
}

// Lined: ⌈ρ·T⌉ heavy hitters outside a window of 128, largest at the run's context.
TEST(StepPlan, LinedHeavyHitterSetIsSizedForTheLargestStep) {
  const ModelShape m = small();
  const LukaConfig config = LukaConfig::preset("lined", m.layers);
  const StepPlan p = plan_step(m, RunLength{1000, 200}, config.layers);
  const std::int64_t T = 1200, heavy = std::min<std::int64_t>(T - 128, static_cast<std::int64_t>(std::ceil(0.125 * T)));
  EXPECT_EQ(p.buffer("heavy", 0).shape, (std::vector<std::int64_t>{4, heavy}));  // 150
  EXPECT_FALSE(p.has_buffer("cover", 0));
}

// Kascade: max(⌈top_frac·T⌉, min_k) keys, at most T.
TEST(StepPlan, KascadeSetIsSizedByItsTopKRuleAtTheContext) {
  const ModelShape m = small();
  LukaConfig config = LukaConfig::preset("dense", m.layers);
  config.apply_override("mode=kascade,kascade_top_frac=0.1,kascade_min_k=128");
  const StepPlan p1 = plan_step(m, RunLength{900, 100}, config.layers);
  EXPECT_EQ(p1.buffer("selected", 0).shape, (std::vector<std::int64_t>{2, 128}));  // ⌈0.1 · 1000⌉ = 100 < 128
  const StepPlan p2 = plan_step(m, RunLength{4000, 96}, config.layers);
  EXPECT_EQ(p2.buffer("selected", 1).shape, (std::vector<std::int64_t>{2, 410}));  // ⌈0.1 · 4096⌉
  const StepPlan p3 = plan_step(m, RunLength{50, 10}, config.layers);
  EXPECT_EQ(p3.buffer("selected", 2).shape, (std::vector<std::int64_t>{2, 60}));  // capped by T
}

TEST(StepPlan, LayersWhosePagesDependOnTheTokensStayEager) {
  const ModelShape m = small();
  LukaConfig config = LukaConfig::preset("clustered", m.layers);
  config.apply_override("layer=1,segmenter=delimiter");
  config.apply_override("layer=2,dense_shadow=true");
  const StepPlan p = plan_step(m, RunLength{200, 50}, config.layers);
  EXPECT_FALSE(p.static_step());
  ASSERT_EQ(p.eager_layers.size(), 2u);
  EXPECT_EQ(p.eager_layers[0].rfind("layer 1: segmenter=delimiter", 0), 0u) << p.eager_layers[0];
  EXPECT_EQ(p.eager_layers[1].rfind("layer 2: the dense shadow", 0), 0u) << p.eager_layers[1];
  EXPECT_TRUE(plan_step(m, RunLength{200, 50}, LukaConfig::preset("mixed(1,1)", m.layers).layers).static_step());
}

TEST(StepPlan, AConfigChangeRecordsAgainAndReservesAgainOnlyWhenSizesMove) {
  const ModelShape m = small();
  const RunLength run{300, 100};
  const LukaConfig base = LukaConfig::preset("mixed(1,1)", m.layers);
  const StepPlan p = plan_step(m, run, base.layers);
  EXPECT_EQ(step_change(p, base.layers), StepChange::kNone);
  LukaConfig c = base;
  c.apply_override("layer=1,top_k=5");  // a kernel argument, no size
  EXPECT_EQ(step_change(p, c.layers), StepChange::kRecapture);
  c = base;
  c.apply_override("layer=0,decay=0.9");
  EXPECT_EQ(step_change(p, c.layers), StepChange::kRecapture);
  c = base;
  c.apply_override("layer=1,page_size=8");  // more summary rows
  EXPECT_EQ(step_change(p, c.layers), StepChange::kReplan);
  c = base;
  c.apply_override("layer=0,mode=clustered");  // a cover buffer instead of the heavy set
  EXPECT_EQ(step_change(p, c.layers), StepChange::kReplan);
  EXPECT_EQ(step_change(plan_step(m, run, {}), base.layers), StepChange::kReplan);  // LuKA state appears
  EXPECT_STREQ(to_string(StepChange::kRecapture), "recapture");
}

TEST(StepPlan, RefusesShapesAndRunsItCannotPlan) {
  ModelShape m = small();
  EXPECT_THROW(plan_step(m, RunLength{0, 10}, {}), Error);
  EXPECT_THROW(plan_step(m, RunLength{10, 0}, {}), Error);
  EXPECT_THROW(plan_step(m, RunLength{std::int64_t{1} << 31, 1}, {}), Error);
  EXPECT_THROW(plan_step(m, RunLength{10, 10}, LukaConfig::preset("dense", 2).layers), Error);
  EXPECT_THROW(plan_step(m, RunLength{10, 10}, {}).buffer("no_such"), Error);
  m.heads = 3;
  EXPECT_THROW(plan_step(m, RunLength{10, 10}, {}), Error);
}

}  // namespace
}  // namespace luka

// The GPU path's host side (core/luka/step_records): a CPU stand-in writes each step of the CPU
// core in the kernels' record layout (refined pages as padded rows with counts in the kernels'
// own order, heavy hitters as rows), and turning those back into a LukaStep gives the CPU core's
// rows, covers, refined pages, heavy hitters and cover sizes exactly.
#include <gtest/gtest.h>

#include <cmath>

#include "core/luka/luka_attention.h"
#include "core/luka/step_records.h"
#include "core/util/error.h"
#include "tests/core/luka/luka_sequence.h"

namespace luka {
namespace {

TEST(StepRecords, KernelLayoutRoundTripsEveryModeExactly) {
  const std::int64_t H = 6, KV = 2, D = 8, N = 120, N0 = 50;
  at::manual_seed(21);
  const at::Tensor q = at::randn({H, N, D}) * 2, k = at::randn({KV, N, D}), v = at::randn({KV, N, D});
  std::vector<LayerConfig> configs(4);
  configs[0].mode = AttentionMode::kDense;
  configs[1].mode = AttentionMode::kLined;
  configs[1].lined.window = 16;
  configs[1].lined.rho = 0.2;
  configs[2].mode = AttentionMode::kClustered;
  configs[2].clustered.page_size = 6;
  configs[2].clustered.tail = 10;
  configs[2].clustered.interval = 5;
  configs[2].clustered.rule = RefineRule::kThreshold;  // a different number of pages per head
  configs[2].clustered.epsilon = 0.02;
  configs[3] = configs[2];
  configs[3].clustered.rule = RefineRule::kTopK;
  configs[3].clustered.selection = Selection::kPerGroup;
  for (const LayerConfig& c : configs) {
    LukaAttention att(0, c);
    c10::InferenceMode guard;
    const auto in = [&](std::int64_t pos0, std::int64_t n) {
      AttentionInputs a;
      a.q = q.narrow(1, pos0, n).contiguous();
      a.k = k.narrow(1, 0, pos0 + n);
      a.v = v.narrow(1, 0, pos0 + n);
      a.q_pos0 = pos0;
      a.group_size = H / KV;
      a.scale = 1 / std::sqrt(double(D));
      return a;
    };
    att.forward(in(0, N0));
    std::int64_t varied = 0;
    for (std::int64_t pos = N0; pos < N; ++pos) {
      const std::vector<Page> before = att.pages();
      att.forward(in(pos, 1));
      const LukaStep& s = att.last_step();
      const LukaStep back = step_from_records(c, s.step, s.tokens, before, records_from_step(s, static_cast<std::int64_t>(before.size())));
      SCOPED_TRACE(std::string(to_string(c.mode)) + " step " + std::to_string(s.step));
      EXPECT_EQ(back.mode, s.mode);
      EXPECT_EQ(back.step, s.step);
      EXPECT_EQ(back.tokens, s.tokens);
      EXPECT_EQ(back.paged_end, s.paged_end);
      EXPECT_TRUE(at::equal(back.effective, s.effective));
      EXPECT_EQ(back.cover_size, s.cover_size);
      if (s.mode == AttentionMode::kClustered) {
        EXPECT_TRUE(at::equal(back.summary_mass, s.summary_mass));
        EXPECT_EQ(back.refined, s.refined);
        for (const auto& r : s.refined) varied += r.size() != s.refined[0].size();
      }
      if (s.mode == AttentionMode::kLined) {
        EXPECT_EQ(back.window_start, s.window_start);
        EXPECT_EQ(back.heavy, s.heavy);
      }
    }
    if (c.mode == AttentionMode::kClustered && c.clustered.rule == RefineRule::kThreshold) EXPECT_GT(varied, 0);
  }
}

// The deferred form the GPU layer keeps while its copies are in flight: taking it waits once,
// gives the same step as converting at once, keeps the config and pages of the step it was made
// at (a live switch before the read changes nothing), and cannot be taken twice.
TEST(StepRecords, APendingStepWaitsOnceAndGivesTheStepOfItsTime) {
  const test::Sequence seq(4, 2, 8, 60, 22, 2.0);
  const std::int64_t N0 = 30;
  LayerConfig c;
  c.mode = AttentionMode::kClustered;
  c.clustered.page_size = 4;
  c.clustered.tail = 8;
  c.clustered.interval = 4;
  LukaAttention att(0, c);
  c10::InferenceMode guard;
  att.forward(seq.inputs(0, N0));
  const std::vector<Page> before = att.pages();
  att.forward(seq.inputs(N0, 1));
  const LukaStep& s = att.last_step();
  ASSERT_FALSE(before.empty());
  int waits = 0;
  LayerConfig config = c;
  PendingStep pending(config, s.step, s.tokens, before, records_from_step(s, static_cast<std::int64_t>(before.size())),
                      [&] { ++waits; }, 0.25);
  config.mode = AttentionMode::kDense;  // changed after the step: the pending step keeps its own
  EXPECT_TRUE(pending.armed());
  const LukaStep got = pending.take();
  EXPECT_EQ(waits, 1);
  EXPECT_FALSE(pending.armed());
  EXPECT_EQ(got.mode, AttentionMode::kClustered);
  EXPECT_EQ(got.step, s.step);
  EXPECT_EQ(got.seconds, 0.25);
  EXPECT_TRUE(at::equal(got.effective, s.effective));
  EXPECT_TRUE(at::equal(got.summary_mass, s.summary_mass));
  EXPECT_EQ(got.refined, s.refined);
  EXPECT_EQ(got.cover_size, s.cover_size);
  EXPECT_THROW(pending.take(), Error);
  EXPECT_EQ(waits, 1);
}

}  // namespace
}  // namespace luka

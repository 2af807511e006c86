// The static decode step recorded as a CUDA graph (core/run/graphed_step.h) through the run loop,
// as `luka generate --graph` runs it, on the random Qwen3 in fp32: the greedy ids of the decoder's
// own (eager) GPU steps, the graph's kernel nodes named and bounded (every op of the step, at most
// 20 per layer and 20 around them), and the replays counted. Skips without a CUDA device
// (scripts/gpu_run.sh graph runs it on a GPU machine). Then LuKA layers and a schedule in the
// recorded step against the GPU core's eager steps.
#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "core/luka/cuda_attention.h"
#include "core/luka/schedule.h"
#include "core/model/decoder.h"
#include "core/model/model.h"
#include "core/run/graphed_step.h"
#include "core/run/run_loop.h"
#include "kernels/cuda/device.h"
#include "tests/random_checkpoint.h"

namespace luka {
namespace {

namespace fs = std::filesystem;

TEST(GraphedStep, TheRecordedStepGivesTheEagerGpuStepsTokens) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device: the recorded step is not run here";
  if (!at::hasCUDA()) GTEST_SKIP() << "this LibTorch has no CUDA support";
  const fs::path dir = test::write_random_qwen3(fs::path(LUKA_TEST_WORK) / ("graphed-qwen3-" + std::to_string(::getpid())));
  LoadOptions options;
  options.cuda = true;
  const auto model = Model::load(dir, options);
  ASSERT_TRUE(model->on_cuda());
  std::vector<std::int32_t> prompt;
  for (int i = 0; i < 40; ++i) prompt.push_back(static_cast<std::int32_t>((i * 131 + 17) % test::kRandomQwen3Vocab));
  RunSettings settings;
  settings.max_new_tokens = 48;

  Decoder eager_decoder(model);
  RunLoop eager(eager_decoder);
  const RunResult want = eager.run(prompt, settings);

  Decoder graphed_decoder(model);
  RunLoop graphed(graphed_decoder);
  graphed.set_decode_engine(graphed_step_engine());
  const RunResult got = graphed.run(prompt, settings);
  EXPECT_EQ(got.ids, want.ids);
  const std::string what = graphed.engine_description();
  std::printf("%s\n", what.c_str());
  std::smatch m;
  ASSERT_TRUE(std::regex_search(what, m, std::regex("CUDA graph: (\\d+) kernel nodes .*; (\\d+) replays, (\\d+) eager steps")))
      << what;
  const long kernels = std::stol(m[1]), replays = std::stol(m[2]), eager_steps = std::stol(m[3]);
  EXPECT_GT(kernels, 5L * test::kRandomQwen3Layers);
  EXPECT_LE(kernels, 20L * test::kRandomQwen3Layers + 20);
  EXPECT_EQ(eager_steps, 2);
  EXPECT_EQ(replays + eager_steps, settings.max_new_tokens - 1);
  fs::remove_all(dir);
}

// LuKA layers inside the recorded step: the GPU core's state after the prefill taken over
// (LukaLayer::state_view), lined and clustered layers run by the static step's own ops, and two
// --schedule changes mid-run (a re-plan, then a parameter alone), each recorded again: the ids of
// the GPU core's own eager steps (CudaLukaAttention), every step's logits within 1e-3 (fp32 on
// both sides; the kernels sum in another order), and each change's cost reported.
TEST(GraphedStep, LukaLayersAndAScheduleGiveTheGpuCoresTokens) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device: the recorded step is not run here";
  if (!at::hasCUDA()) GTEST_SKIP() << "this LibTorch has no CUDA support";
  const fs::path dir =
      test::write_random_qwen3(fs::path(LUKA_TEST_WORK) / ("graphed-luka-qwen3-" + std::to_string(::getpid())));
  LoadOptions options;
  options.cuda = true;
  const auto model = Model::load(dir, options);
  std::vector<std::int32_t> prompt;
  for (int i = 0; i < 40; ++i) prompt.push_back(static_cast<std::int32_t>((i * 131 + 17) % test::kRandomQwen3Vocab));
  LukaConfig config = LukaConfig::preset("clustered", test::kRandomQwen3Layers);
  config.apply_override("page_size=4,tail=8,interval=4,window=8,rho=0.25,top_k=2");
  RunSettings settings;
  settings.max_new_tokens = 48;
  settings.schedule = parse_schedule("step=10:layers=1:mode=lined;step=20:layers=all:top_k=3");
  struct Logits final : RunObserver {
    std::vector<at::Tensor> seen;
    void logits(std::int64_t, const at::Tensor& l) override { seen.push_back(l.to(at::kCPU).clone()); }
  };
  const auto run = [&](bool graph, std::string* description) {
    Decoder d(model);
    RunLoop loop(d, install_luka_cuda(d, config), config);
    if (graph) loop.set_decode_engine(graphed_step_engine());
    Logits o;
    const RunResult r = loop.run(prompt, settings, &o);
    if (description) *description = loop.engine_description();
    return std::make_pair(r.ids, at::stack(o.seen));
  };
  const auto want = run(false, nullptr);
  std::string what;
  const auto got = run(true, &what);
  std::printf("%s\n", what.c_str());
  EXPECT_EQ(got.first, want.first);
  ASSERT_EQ(got.second.sizes(), want.second.sizes());
  const double diff = (got.second - want.second).abs().max().item<double>();
  std::printf("max |logits - the GPU core's eager steps| over %lld steps: %.3g\n",
              static_cast<long long>(settings.max_new_tokens), diff);
  EXPECT_LE(diff, 1e-3);
  for (const char* needle : {"before step 10: replan, re-planned in", "before step 20: recapture, re-planned in"})
    EXPECT_NE(what.find(needle), std::string::npos) << needle << " in " << what;
  EXPECT_NE(what.find("recorded in", what.find("before step 20")), std::string::npos) << what;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace luka

// The static decode step recorded as a CUDA graph (core/run/graphed_step.h) through the run loop,
// as `luka generate --graph` runs it, on the random Qwen3 in fp32: the greedy ids of the decoder's
// own (eager) GPU steps, the graph's kernel nodes named and bounded (every op of the step, at most
// 20 per layer and 20 around them), and the replays counted. Skips without a CUDA device
// (scripts/gpu_run.sh graph runs it on a GPU machine).
#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

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

}  // namespace
}  // namespace luka

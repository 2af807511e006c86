// The product's GPU path through the CUDA plugin, as `luka` uses it: the device sampler against
// the CPU sampler (same ids for the same seed; the probability of the chosen id), the run loop on
// the GPU against the CPU (greedy ids, per-step records, the dense shadow), and live mode changes.
// Without a GPU every test skips with the reason; scripts/gpu_run.sh runs them on one.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <random>

#include <ATen/ATen.h>

#include "core/device/device.h"
#include "core/generate/sampler.h"
#include "core/luka/luka_attention.h"
#include "core/model/decoder.h"
#include "core/model/model.h"
#include "core/run/run_loop.h"
#include "core/util/error.h"
#include "tests/random_checkpoint.h"

namespace luka {
namespace {

namespace fs = std::filesystem;

std::shared_ptr<const Backend> gpu_or_skip(std::string* why) {
  if (list_gpus(why).empty()) return nullptr;
  return open_backend(parse_device("cuda"));
}

#define SKIP_WITHOUT_GPU(gpu)                                  \
  std::string why_no_gpu;                                      \
  const auto gpu = gpu_or_skip(&why_no_gpu);                   \
  if (!gpu) GTEST_SKIP() << "no GPU for the CUDA plugin: " << why_no_gpu

TEST(CudaSampler, SameIdsAsTheCpuSamplerForEverySetting) {
  SKIP_WITHOUT_GPU(gpu);
  std::mt19937_64 gen(1);
  std::normal_distribution<float> normal(0.f, 3.f);
  const std::vector<SamplingParams> settings = {
      {0.0f, 0, 1.0f, 0}, {0.7f, 0, 1.0f, 1}, {1.0f, 50, 1.0f, 2}, {0.8f, 0, 0.9f, 3}, {1.3f, 200, 0.95f, 4}, {1.0f, 1, 1.0f, 5}};
  for (const std::int64_t vocab : {7, 1000, 151936}) {
    for (const SamplingParams& p : settings) {
      SCOPED_TRACE("vocab " + std::to_string(vocab) + ", T " + std::to_string(p.temperature) + ", top_k " + std::to_string(p.top_k) +
                   ", top_p " + std::to_string(p.top_p));
      const auto cpu = make_cpu_sampler(p);
      const auto dev = gpu->sampler(p);
      for (int draw = 0; draw < 20; ++draw) {
        std::vector<float> v(static_cast<std::size_t>(vocab));
        for (auto& x : v) x = draw % 4 == 0 ? std::round(normal(gen)) : normal(gen);  // rounded: ties
        const at::Tensor host = at::from_blob(v.data(), {vocab}, at::kFloat).clone();
        double pc = 0, pg = 0;
        const std::int32_t a = cpu->sample(host, &pc), b = dev->sample(host.to(at::kCUDA), &pg);
        ASSERT_EQ(a, b) << "draw " << draw;
        EXPECT_NEAR(pg, pc, 1e-12 + 1e-9 * pc) << "draw " << draw;
      }
    }
  }
  std::vector<float> bad = {0.f, 1.f, std::nanf(""), 2.f};
  EXPECT_THROW(gpu->sampler(SamplingParams{})->sample(at::from_blob(bad.data(), {4}, at::kFloat).to(at::kCUDA), nullptr), Error);
}

struct Runs {
  std::shared_ptr<const Model> cpu, gpu;
};

Runs load_both(const Backend& gpu) {
  const fs::path dir = test::write_random_qwen3(fs::path(LUKA_TEST_WORK) / ("device-gpu-qwen3-" + std::to_string(::getpid())));
  LoadOptions c, g;
  gpu.place(g);
  return {Model::load(dir, c), Model::load(dir, g)};
}

// Greedy generation through the run loop with each device's layers and sampler: the same ids in
// fp32 for dense (cuBLAS and oneDNN differ only in summation order).
TEST(CudaRun, GreedyIdsEqualTheCpuForDense) {
  SKIP_WITHOUT_GPU(gpu);
  const Runs m = load_both(*gpu);
  std::vector<std::int32_t> prompt;
  for (int i = 0; i < 40; ++i) prompt.push_back((i * 37 + 11) % test::kRandomQwen3Vocab);
  const LukaConfig config = LukaConfig::preset("dense", test::kRandomQwen3Layers);
  std::vector<std::vector<std::int32_t>> ids;
  for (const auto& [model, device] : {std::make_pair(m.cpu, cpu_backend()), std::make_pair(m.gpu, gpu)}) {
    Decoder d(model);
    RunLoop loop(d, device->install_luka(d, config), config);
    loop.set_sampler_factory([device](const SamplingParams& p) { return device->sampler(p); });
    RunSettings s;
    s.max_new_tokens = 64;
    ids.push_back(loop.run(prompt, s).ids);
  }
  EXPECT_EQ(ids[0], ids[1]);
}

// Teacher-forced runs on both devices with the dense shadow and records on: each step's effective
// rows, summary mass and fidelity agree within fp32 tolerances, and the refined pages agree
// wherever the selection has no near-tie.
TEST(CudaRun, StepRecordsAndTheDenseShadowMatchTheCpu) {
  SKIP_WITHOUT_GPU(gpu);
  const Runs m = load_both(*gpu);
  std::vector<std::int32_t> ids;
  for (int i = 0; i < 160; ++i) ids.push_back((i * 53 + 7) % test::kRandomQwen3Vocab);
  const std::vector<std::int32_t> prompt(ids.begin(), ids.begin() + 96);
  for (const std::string preset : {"clustered", "lined", "mixed(1,1)"}) {
    SCOPED_TRACE(preset);
    LukaConfig config = LukaConfig::preset(preset, test::kRandomQwen3Layers);
    config.apply_override("layers=all,page_size=8,tail=16,interval=4,window=16,rho=0.25,dense_shadow=true");
    Decoder dc(m.cpu), dg(m.gpu);
    const auto lc = install_luka(dc, config);
    const auto lg = gpu->install_luka(dg, config);
    for (const auto& l : lg) l->set_step_records(true);
    struct Compare final : RunObserver {
      const std::vector<std::shared_ptr<LukaLayer>>* layers = nullptr;
      std::vector<std::vector<LukaStep>> steps;  // per step, per layer
      void after_step(std::int64_t, double) override {
        steps.emplace_back();
        for (const auto& l : *layers) steps.back().push_back(l->last_step());
      }
    } oc, og;
    oc.layers = &lc;
    og.layers = &lg;
    RunSettings s;
    s.forced.assign(ids.begin() + 96, ids.end());
    s.max_new_tokens = static_cast<std::int64_t>(s.forced.size());
    RunLoop(dc, lc, config).run(prompt, s, &oc);
    RunLoop(dg, lg, config).run(prompt, s, &og);
    ASSERT_EQ(oc.steps.size(), og.steps.size());
    std::int64_t refined_compared = 0;
    for (std::size_t t = 0; t < oc.steps.size(); ++t)
      for (std::size_t l = 0; l < oc.steps[t].size(); ++l) {
        const LukaStep &a = oc.steps[t][l], &b = og.steps[t][l];
        SCOPED_TRACE("step " + std::to_string(t + 1) + " layer " + std::to_string(l));
        ASSERT_EQ(a.mode, b.mode);
        EXPECT_LT((a.effective - b.effective).abs().max().item<double>(), 5e-5);
        ASSERT_TRUE(b.fidelity.defined());
        EXPECT_LT((a.fidelity - b.fidelity).abs().max().item<double>(), 1e-3);
        if (a.mode == AttentionMode::kClustered && a.summary_mass.numel() > 0) {
          EXPECT_LT((a.summary_mass - b.summary_mass).abs().max().item<double>(), 5e-5);
          if (a.refined == b.refined) ++refined_compared;
        }
        if (a.mode == AttentionMode::kLined) EXPECT_EQ(a.window_start, b.window_start);
        if (::testing::Test::HasFailure()) return;
      }
    if (preset == "clustered") EXPECT_GT(refined_compared, 0);
  }
}

// A live change between steps (what the Studio's layer buttons do) takes effect on the GPU at the
// next step, and a CPU-only option is refused by the backend without touching the run.
TEST(CudaRun, LiveModeChangesTakeEffectAtTheNextStep) {
  SKIP_WITHOUT_GPU(gpu);
  const Runs m = load_both(*gpu);
  const LukaConfig dense = LukaConfig::preset("dense", test::kRandomQwen3Layers);
  Decoder d(m.gpu);
  const auto layers = gpu->install_luka(d, dense);
  RunLoop loop(d, layers, dense);
  struct Switch final : RunObserver {
    RunLoop* loop = nullptr;
    std::vector<AttentionMode> seen;
    const std::vector<std::shared_ptr<LukaLayer>>* layers = nullptr;
    bool before_step(std::int64_t step) override {
      if (step == 5) loop->request_config(LukaConfig::preset("clustered", test::kRandomQwen3Layers));
      return true;
    }
    void after_step(std::int64_t, double) override { seen.push_back((*layers)[1]->config().mode); }
  } sw;
  sw.loop = &loop;
  sw.layers = &layers;
  std::vector<std::int32_t> prompt(50, 3);
  RunSettings s;
  s.max_new_tokens = 10;
  loop.run(prompt, s, &sw);
  ASSERT_EQ(sw.seen.size(), 9u);
  for (std::size_t i = 0; i < sw.seen.size(); ++i)
    EXPECT_EQ(sw.seen[i], i + 1 < 5 ? AttentionMode::kDense : AttentionMode::kClustered) << "step " << i + 1;
  LukaConfig sparse = dense;
  sparse.apply_override("layers=0,mode=lined,sparse_prefill=true");
  EXPECT_NE(gpu->supports(sparse).find("sparse_prefill"), std::string::npos);
}

}  // namespace
}  // namespace luka

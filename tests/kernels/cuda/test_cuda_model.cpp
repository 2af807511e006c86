// The whole model on the GPU against the same model on the CPU (the CPU decoder is itself
// checked against transformers in tests/core/model): a small random Qwen3 checkpoint (head_dim 64,
// GQA 2, 3 layers) written by the test, prefilled and decoded greedily on both, for each LuKA
// mode. Logits agree within 2e-3 (fp32, cuBLAS vs oneDNN summation order); for dense the 32
// greedy ids are identical. Runs only where a CUDA device and a CUDA LibTorch exist.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "core/luka/cuda_attention.h"
#include "core/luka/luka_attention.h"
#include "core/model/decoder.h"
#include "core/model/model.h"
#include "kernels/cuda/device.h"
#include "tests/random_checkpoint.h"

namespace luka {
namespace {

namespace fs = std::filesystem;

constexpr int kLayers = test::kRandomQwen3Layers, kHeadDim = test::kRandomQwen3HeadDim, kVocab = test::kRandomQwen3Vocab;

fs::path write_checkpoint() { return test::write_random_qwen3(fs::path(LUKA_TEST_WORK) / ("cuda-model-qwen3-" + std::to_string(::getpid()))); }

LukaConfig small_pages(const std::string& preset) {
  LukaConfig c = LukaConfig::preset(preset, kLayers);
  c.apply_override("layers=all,page_size=8,tail=16,interval=4,window=16,rho=0.25");
  return c;
}

TEST(CudaModel, GpuDecoderMatchesTheCpuForEveryMode) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device: the GPU model path is not run here";
  if (!at::hasCUDA()) GTEST_SKIP() << "this LibTorch has no CUDA support (the GPU build links python3's CUDA LibTorch)";
  const fs::path dir = write_checkpoint();
  LoadOptions cpu_options, gpu_options;
  gpu_options.cuda = true;
  const auto cpu_model = Model::load(dir, cpu_options);
  const auto gpu_model = Model::load(dir, gpu_options);
  ASSERT_TRUE(gpu_model->on_cuda());
  std::vector<std::int32_t> prompt;
  std::mt19937 rng(3);
  for (int i = 0; i < 70; ++i) prompt.push_back(static_cast<std::int32_t>(rng() % kVocab));

  // The last run decays h2o, which takes the ATen prefill instead of the prefill kernel.
  for (const std::string preset : {"dense", "lined", "clustered", "mixed(1,1)", "lined, decay 0.9"}) {
    SCOPED_TRACE(preset);
    LukaConfig config = small_pages(preset == "lined, decay 0.9" ? "lined" : preset);
    if (preset == "lined, decay 0.9") config.apply_override("decay=0.9");
    Decoder cpu(cpu_model), gpu(gpu_model);
    install_luka(cpu, config);
    install_luka_cuda(gpu, config);
    at::Tensor lc = cpu.prefill(prompt), lg = gpu.prefill(prompt).cpu();
    EXPECT_LT((lc - lg).abs().max().item<double>(), 2e-3) << "prefill logits";
    std::vector<std::int32_t> ids_cpu, ids_gpu;
    for (int step = 0; step < 32; ++step) {
      const std::int32_t next_cpu = static_cast<std::int32_t>(lc.argmax().item<std::int64_t>());
      const std::int32_t next_gpu = static_cast<std::int32_t>(lg.argmax().item<std::int64_t>());
      ids_cpu.push_back(next_cpu);
      ids_gpu.push_back(next_gpu);
      // Both sides decode the CPU's token, so a near-tie flipping one greedy pick does not
      // desynchronize the logits comparison of the later steps.
      lc = cpu.decode(next_cpu);
      lg = gpu.decode(next_cpu).cpu();
      EXPECT_LT((lc - lg).abs().max().item<double>(), 2e-3) << "decode step " << step;
      if (::testing::Test::HasFailure()) return;
    }
    if (preset == "dense") EXPECT_EQ(ids_cpu, ids_gpu) << "greedy ids over 32 tokens";
  }
}

TEST(CudaModel, TheTestCheckpointLoadsOnTheCpu) {
  const auto model = Model::load(write_checkpoint(), LoadOptions{});
  EXPECT_EQ(model->config().head_dim, kHeadDim);
  EXPECT_EQ(model->config().num_layers, kLayers);
  Decoder d(model);
  const at::Tensor logits = d.prefill({1, 2, 3, 4});
  ASSERT_EQ(logits.size(0), kVocab);
  EXPECT_TRUE(logits.isfinite().all().item<bool>());
  EXPECT_GT(logits.std().item<double>(), 0.1) << "random weights give varied logits";
}

TEST(CudaModel, CpuOnlyOptionsAreRefusedOnTheGpu) {
  LayerConfig c;
  c.mode = AttentionMode::kLined;
  c.lined.sparse_prefill = true;
  cuda::LayerParams p;
  EXPECT_NE(to_cuda_params(c, &p).find("sparse_prefill"), std::string::npos);
  LayerConfig s;  // SemantiCache's pages run on the CPU only
  s.mode = AttentionMode::kClustered;
  s.clustered.segmenter = Segmenter::kDelimiter;
  EXPECT_NE(to_cuda_params(s, &p).find("segmenter=delimiter"), std::string::npos);
  s.clustered.segmenter = Segmenter::kFixed;
  s.clustered.compressor = Compressor::kGsc;
  EXPECT_NE(to_cuda_params(s, &p).find("compressor=gsc"), std::string::npos);
  if (!at::hasCUDA()) {
    LoadOptions o;
    o.cuda = true;
    try {
      Model::load(write_checkpoint(), o);
      ADD_FAILURE() << "loading on cuda without CUDA support must fail";
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find("no CUDA support"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace luka

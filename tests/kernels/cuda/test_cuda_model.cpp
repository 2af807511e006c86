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
#include "core/luka/cuda_params.h"
#include "core/luka/luka_attention.h"
#include "core/model/decoder.h"
#include "core/model/model.h"
#include "kernels/cuda/device.h"

namespace luka {
namespace {

namespace fs = std::filesystem;

constexpr int kLayers = 3, kHidden = 256, kHeads = 4, kKvHeads = 2, kHeadDim = 64, kInter = 512, kVocab = 512;

// Writes config.json and model.safetensors of a random Qwen3 with tied embeddings, in a folder of
// this process (ctest runs each test as its own process, in parallel; models map their file).
fs::path write_checkpoint() {
  const fs::path dir = fs::path(LUKA_TEST_WORK) / ("cuda-model-qwen3-" + std::to_string(::getpid()));
  if (fs::exists(dir / "model.safetensors")) return dir;
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << R"({"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
    "attention_bias": false, "head_dim": 64, "hidden_act": "silu", "hidden_size": 256, "intermediate_size": 512,
    "max_position_embeddings": 1024, "num_attention_heads": 4, "num_hidden_layers": 3, "num_key_value_heads": 2,
    "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000.0, "tie_word_embeddings": true,
    "vocab_size": 512, "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "float32"})";
  struct T {
    std::string name;
    std::vector<std::int64_t> shape;
    bool norm;
  };
  std::vector<T> tensors = {{"model.embed_tokens.weight", {kVocab, kHidden}, false}, {"model.norm.weight", {kHidden}, true}};
  for (int l = 0; l < kLayers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    tensors.push_back({p + "input_layernorm.weight", {kHidden}, true});
    tensors.push_back({p + "post_attention_layernorm.weight", {kHidden}, true});
    tensors.push_back({p + "self_attn.q_proj.weight", {kHeads * kHeadDim, kHidden}, false});
    tensors.push_back({p + "self_attn.k_proj.weight", {kKvHeads * kHeadDim, kHidden}, false});
    tensors.push_back({p + "self_attn.v_proj.weight", {kKvHeads * kHeadDim, kHidden}, false});
    tensors.push_back({p + "self_attn.o_proj.weight", {kHidden, kHeads * kHeadDim}, false});
    tensors.push_back({p + "self_attn.q_norm.weight", {kHeadDim}, true});
    tensors.push_back({p + "self_attn.k_norm.weight", {kHeadDim}, true});
    tensors.push_back({p + "mlp.gate_proj.weight", {kInter, kHidden}, false});
    tensors.push_back({p + "mlp.up_proj.weight", {kInter, kHidden}, false});
    tensors.push_back({p + "mlp.down_proj.weight", {kHidden, kInter}, false});
  }
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::string header = "{", data;
  for (const T& t : tensors) {
    std::int64_t count = 1;
    for (auto d : t.shape) count *= d;
    const float sd = t.norm ? 0.1f : 0.6f / std::sqrt(static_cast<float>(t.shape.back()));
    std::vector<float> v(static_cast<std::size_t>(count));
    for (float& x : v) x = t.norm ? 1.0f + sd * normal(rng) : sd * normal(rng);
    const std::size_t begin = data.size();
    data.append(reinterpret_cast<const char*>(v.data()), v.size() * 4);
    std::string shape;
    for (std::size_t i = 0; i < t.shape.size(); ++i) shape += (i ? "," : "") + std::to_string(t.shape[i]);
    header += (header.size() > 1 ? "," : "") + std::string("\"") + t.name + "\":{\"dtype\":\"F32\",\"shape\":[" + shape +
              "],\"data_offsets\":[" + std::to_string(begin) + "," + std::to_string(data.size()) + "]}";
  }
  header += "}";
  while (header.size() % 8) header += ' ';
  std::ofstream f(dir / "model.safetensors", std::ios::binary);
  const std::uint64_t n = header.size();
  f.write(reinterpret_cast<const char*>(&n), 8);
  f << header << data;
  return dir;
}

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

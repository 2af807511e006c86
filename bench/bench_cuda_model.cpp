// End-to-end decode throughput on the GPU: the whole model (weights and KV cache on the GPU,
// cuBLAS matmuls through LibTorch) with each LuKA preset's attention on kernels/cuda, next to the
// decoder's plain ATen attention. For each context length the prompt (random ids) is prefilled,
// then `steps` greedy tokens are decoded and timed; tokens/s and the ratio to the LuKA dense
// preset are printed as markdown rows. "plain ATen" is the decoder's generic attention (fp32
// copies of the cache each step): a floor, not a peer; the peer is the LuKA dense preset (our
// split-K kernel). A short warm-up prefill first keeps CUDA and cuBLAS start-up out of the times.
//
//   bench_cuda_model MODEL_DIR [--presets dense,lined,clustered,mixed(8,8)] [--tokens 4096,32768]
//                    [--steps 32] [--dtype bf16|fp32]
#include <chrono>
#include <cstdio>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "core/luka/cuda_attention.h"
#include "core/model/decoder.h"
#include "core/model/model.h"
#include "core/util/error.h"
#include "kernels/cuda/device.h"

namespace {

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  int depth = 0;
  for (char c : s) {  // commas inside mixed(a,b) stay
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (c == ',' && depth == 0) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

void sync() { at::zeros({1}, at::kCUDA).cpu(); }  // waits for the GPU's work so far

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc < 2 || std::string(argv[1]) == "--help") {
      std::printf("bench_cuda_model MODEL_DIR [--presets dense,lined,clustered,mixed(8,8)] [--tokens 4096,32768] "
                  "[--steps 32] [--dtype bf16|fp32]\n");
      return argc < 2 ? 2 : 0;
    }
    std::vector<std::string> presets = {"dense", "lined", "clustered", "mixed(8,8)"};
    std::vector<std::int64_t> lengths = {4096, 32768};
    int steps = 32;
    luka::LoadOptions options;
    options.cuda = true;
    options.dtype = luka::DType::kBF16;
    for (int i = 2; i < argc; ++i) {
      const std::string a = argv[i];
      if (i + 1 >= argc) luka::fail("bench_cuda_model", a + " needs a value");
      const std::string v = argv[++i];
      if (a == "--presets") {
        presets = split(v);
      } else if (a == "--tokens") {
        lengths.clear();
        for (const auto& x : split(v)) lengths.push_back(std::stoll(x));
      } else if (a == "--steps") {
        steps = std::stoi(v);
      } else if (a == "--dtype") {
        options.dtype = luka::parse_dtype(v);
      } else {
        luka::fail("bench_cuda_model", "unknown argument " + a);
      }
    }
    if (luka::cuda::device_count() == 0) luka::fail("bench_cuda_model", "no CUDA device");
    const auto model = luka::Model::load(argv[1], options);
    const std::int64_t layers = model->config().num_layers, vocab = model->config().vocab_size;
    std::printf("device: %s; model %s, %lld layers, %s\n\n", luka::cuda::device_name(0).c_str(), argv[1],
                static_cast<long long>(layers), luka::to_string(options.dtype));
    std::printf("| tokens | attention | prefill s | decode tokens/s | vs LuKA dense |\n|---:|---|---:|---:|---:|\n");
    std::mt19937 rng(1);
    {
      luka::Decoder warm(model);
      warm.prefill(std::vector<std::int32_t>(64, 1));
      warm.decode(1);
      sync();
    }
    for (const std::int64_t T : lengths) {
      std::vector<std::int32_t> prompt(static_cast<std::size_t>(T));
      for (auto& id : prompt) id = static_cast<std::int32_t>(rng() % static_cast<unsigned>(vocab));
      double dense_rate = 0;
      std::vector<std::string> runs = {"plain ATen"};
      runs.insert(runs.end(), presets.begin(), presets.end());
      for (const std::string& run : runs) {
        luka::Decoder d(model);
        if (run != "plain ATen") luka::install_luka_cuda(d, luka::LukaConfig::preset(run, layers));
        const auto t0 = std::chrono::steady_clock::now();
        at::Tensor logits = d.prefill(prompt);
        sync();
        const auto t1 = std::chrono::steady_clock::now();
        for (int s = 0; s < steps; ++s) logits = d.decode(static_cast<std::int32_t>(logits.argmax().item<std::int64_t>()));
        sync();
        const auto t2 = std::chrono::steady_clock::now();
        const double rate = steps / std::chrono::duration<double>(t2 - t1).count();
        if (run == "dense") dense_rate = rate;
        const std::string ratio = dense_rate > 0 && run != "plain ATen" ? std::to_string(rate / dense_rate).substr(0, 4) + "×" : "";
        std::printf("| %lld | %s | %.2f | %.1f | %s |\n", static_cast<long long>(T), run.c_str(),
                    std::chrono::duration<double>(t1 - t0).count(), rate, ratio.c_str());
        std::fflush(stdout);
      }
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}

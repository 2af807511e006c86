// End-to-end decode throughput on the GPU: the whole model (weights and KV cache on the GPU,
// cuBLAS matmuls through LibTorch) with each LuKA preset's attention on kernels/cuda, next to the
// decoder's plain ATen attention. For each context length the prompt (random ids) is prefilled,
// then `steps` greedy tokens are decoded and timed; tokens/s and the ratio to the LuKA dense
// preset are printed as markdown rows. "plain ATen" is the decoder's generic attention (fp32
// copies of the cache each step): a floor, not a peer; the peer is the LuKA dense preset (our
// split-K kernel). A short warm-up prefill first keeps CUDA and cuBLAS start-up out of the times.
//
// --graph adds the same run with its decode steps recorded as a CUDA graph and replayed
// (core/run/graphed_step.h, through the run loop as `luka generate --graph` runs it): graph
// tokens/s, graph/eager and graph/LuKA-dense-graph in the same row. --tiled-prefill adds, for the
// LuKA presets, the prefill in the flash-class form (set_device_tiled_prefill: ATen's SDPA, then
// the pass over key tiles) with both prefills' peak memory, and a section of one layer's attention
// prefill alone at each length: SDPA (what the tiled form starts from) against the tiled form and
// the two-pass kernel, in ms, with peak memory.
//
//   bench_cuda_model MODEL_DIR [--presets dense,lined,clustered,mixed(8,8)] [--tokens 4096,32768]
//                    [--steps 32] [--dtype bf16|fp32] [--graph] [--tiled-prefill]
#include <chrono>
#include <cmath>
#include <functional>
#include <cstdio>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <c10/cuda/CUDACachingAllocator.h>

#include "core/luka/cuda_attention.h"
#include "core/luka/prefill.h"
#include "core/run/graphed_step.h"
#include "core/run/run_loop.h"
#include "core/model/decoder.h"
#include "core/model/model.h"
#include "core/model/weights.h"
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

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Peak bytes allocated on device 0 since the last reset_peak(), in MiB.
void reset_peak() { c10::cuda::CUDACachingAllocator::resetPeakStats(0); }
double peak_mib() {
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(0);
  return static_cast<double>(stats.allocated_bytes[static_cast<std::size_t>(c10::CachingAllocator::StatType::AGGREGATE)].peak) /
         (1 << 20);
}

// One layer's attention prefill alone at T tokens, the model's head shapes: SDPA (flash in 16-bit)
// against the tiled form (SDPA, then the pass over key tiles into the accumulators). The product's
// two-pass kernel is timed through the model's prefill.
void attention_prefill_rows(const luka::ModelConfig& c, at::ScalarType dtype, std::int64_t T) {
  const std::int64_t H = c.num_heads, KV = c.num_kv_heads, D = c.head_dim;
  const auto opts = at::TensorOptions().device(at::kCUDA).dtype(dtype);
  const at::Tensor q = at::randn({H, T, D}, opts), k = at::randn({KV, T, D}, opts), v = at::randn({KV, T, D}, opts);
  luka::AttentionInputs in;
  in.q = q;
  in.k = k;
  in.v = v;
  in.group_size = H / KV;
  in.scale = 1.0 / std::sqrt(static_cast<double>(D));
  const auto f32 = at::TensorOptions().device(at::kCUDA).dtype(at::kFloat);
  const auto time = [&](const char* what, const std::function<void()>& run) {
    run();  // warm-up
    sync();
    reset_peak();
    const double before = peak_mib();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 3; ++i) run();
    sync();
    const double ms = 1e3 * seconds_since(t0) / 3;
    std::printf("| %lld | %s | %.2f | %.0f |\n", static_cast<long long>(T), what, ms, peak_mib() - before);
    std::fflush(stdout);
    return ms;
  };
  const double sdpa = time("SDPA (flash in 16-bit), GQA", [&] {
    at::scaled_dot_product_attention(q.unsqueeze(0), k.unsqueeze(0), v.unsqueeze(0), std::nullopt, 0.0, true, in.scale,
                                     /*enable_gqa=*/true);
  });
  const double tiled = time("LuKA tiled (SDPA + tiles into importance, h2o)", [&] {
    at::Tensor importance = at::zeros({KV, T}, f32), h2o = at::zeros({H, T}, f32);
    luka::tiled_prefill(in, 1.0, 0, {}, 0, importance, h2o);
  });
  std::printf("| %lld | tiled / SDPA | %.2f× | |\n", static_cast<long long>(T), tiled / std::max(sdpa, 1e-9));
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc < 2 || std::string(argv[1]) == "--help") {
      std::printf("bench_cuda_model MODEL_DIR [--presets dense,lined,clustered,mixed(8,8)] [--tokens 4096,32768] "
                  "[--steps 32] [--dtype bf16|fp32] [--graph] [--tiled-prefill]\n");
      return argc < 2 ? 2 : 0;
    }
    std::vector<std::string> presets = {"dense", "lined", "clustered", "mixed(8,8)"};
    std::vector<std::int64_t> lengths = {4096, 32768};
    int steps = 32;
    luka::LoadOptions options;
    options.cuda = true;
    options.dtype = luka::DType::kBF16;
    bool graph = false, tiled = false;
    for (int i = 2; i < argc; ++i) {
      const std::string a = argv[i];
      if (a == "--graph" || a == "--tiled-prefill") {
        (a == "--graph" ? graph : tiled) = true;
        continue;
      }
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
    std::printf("| tokens | attention | prefill s | peak MiB | decode tokens/s | vs LuKA dense |%s%s\n|---:|---|---:|---:|---:|---:|%s%s\n",
                tiled ? " tiled prefill s | tiled peak MiB |" : "",
                graph ? " graph tokens/s | graph / eager | graph vs LuKA dense graph | graph nodes |" : "",
                tiled ? "---:|---:|" : "", graph ? "---:|---:|---:|---|" : "");
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
      double dense_rate = 0, dense_graph_rate = 0;
      std::vector<std::string> runs = {"plain ATen"};
      runs.insert(runs.end(), presets.begin(), presets.end());
      for (const std::string& run : runs) {
        const bool luka_run = run != "plain ATen";
        const luka::LukaConfig config = luka_run ? luka::LukaConfig::preset(run, layers) : luka::LukaConfig{};
        std::string row;
        char cell[256];
        double prefill_s = 0, prefill_peak = 0, rate = 0;
        {
          luka::Decoder d(model);
          if (luka_run) luka::install_luka_cuda(d, config);
          sync();
          reset_peak();
          const double before = peak_mib();
          const auto t0 = std::chrono::steady_clock::now();
          at::Tensor logits = d.prefill(prompt);
          sync();
          prefill_s = seconds_since(t0);
          prefill_peak = peak_mib() - before;
          const auto t1 = std::chrono::steady_clock::now();
          for (int s = 0; s < steps; ++s)
            logits = d.decode(static_cast<std::int32_t>(logits.argmax().item<std::int64_t>()));
          sync();
          rate = steps / seconds_since(t1);
        }
        if (run == "dense") dense_rate = rate;
        const std::string ratio = dense_rate > 0 && luka_run ? std::to_string(rate / dense_rate).substr(0, 4) + "×" : "";
        std::snprintf(cell, sizeof cell, "| %lld | %s | %.2f | %.0f | %.1f | %s |", static_cast<long long>(T), run.c_str(),
                      prefill_s, prefill_peak, rate, ratio.c_str());
        row += cell;
        if (tiled) {
          if (luka_run) {
            luka::set_device_tiled_prefill(true);
            luka::Decoder d(model);
            luka::install_luka_cuda(d, config);
            sync();
            reset_peak();
            const double before = peak_mib();
            const auto t0 = std::chrono::steady_clock::now();
            d.prefill(prompt);
            sync();
            std::snprintf(cell, sizeof cell, " %.2f | %.0f |", seconds_since(t0), peak_mib() - before);
            luka::set_device_tiled_prefill(false);
            row += cell;
          } else {
            row += " | |";
          }
        }
        if (graph) {
          luka::Decoder d(model);
          std::vector<std::shared_ptr<luka::LukaLayer>> installed;
          if (luka_run) installed = luka::install_luka_cuda(d, config);
          luka::RunLoop loop(d, installed, config);
          loop.set_decode_engine(luka::graphed_step_engine());
          luka::RunSettings settings;
          settings.max_new_tokens = steps + 1;
          try {
            const luka::RunResult r = loop.run(prompt, settings);
            const double graph_rate = r.decode_steps / std::max(r.decode_seconds, 1e-9);
            if (run == "dense") dense_graph_rate = graph_rate;
            const std::string nodes = loop.engine_description().substr(0, loop.engine_description().find(" kernel nodes"));
            std::snprintf(cell, sizeof cell, " %.1f | %.2f× | %s | %s kernel nodes |", graph_rate, graph_rate / rate,
                          dense_graph_rate > 0 && luka_run ? (std::to_string(graph_rate / dense_graph_rate).substr(0, 4) + "×").c_str() : "",
                          nodes.substr(nodes.rfind(' ') + 1).c_str());
          } catch (const std::exception& e) {
            std::snprintf(cell, sizeof cell, " failed: %.150s | | | |", e.what());
          }
          row += cell;
        }
        std::printf("%s\n", row.c_str());
        std::fflush(stdout);
      }
    }
    if (tiled) {
      std::printf("\nOne layer's attention prefill alone (%lld heads, %lld KV heads, head_dim %lld, %s), 3 runs after a warm-up:\n\n"
                  "| tokens | prefill | ms | peak MiB |\n|---:|---|---:|---:|\n",
                  static_cast<long long>(model->config().num_heads), static_cast<long long>(model->config().num_kv_heads),
                  static_cast<long long>(model->config().head_dim), luka::to_string(options.dtype));
      for (const std::int64_t T : lengths) attention_prefill_rows(model->config(), luka::to_scalar_type(options.dtype), T);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}

// Attention-only decode step on the GPU, batch 1, random bf16 K/V: our split-K dense kernel
// (plain, and with LuKA's effective row and accumulators), lined and clustered. Each variant is
// captured once in a CUDA graph (which also proves the step issues no host synchronization) and
// replayed; the time per step is the mean over the replays, between CUDA events. Bytes read
// count the K/V rows, summaries and accumulators a step touches; bandwidth is bytes / time,
// against the peak from the device's memory clock and bus width.
//
//   bench_cuda_decode [--shape 0.6b|4b] [--tokens 4096,32768,131072] [--iters 200]
//
// Prints one markdown table row per (shape, length, variant). bench/run_cuda_bench.sh runs it
// beside PyTorch's scaled_dot_product_attention (bench_sdpa_decode.py) and records the results.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <sstream>
#include <type_traits>
#include <algorithm>
#include <string>
#include <vector>

#include "kernels/cuda/decode_attention.h"
#include "kernels/cuda/luka_decode.h"

namespace {

using namespace luka::cuda;

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "bench_cuda_decode: %s\n", what.c_str());
  std::exit(1);
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) die(std::string(what) + ": " + cudaGetErrorString(e));
}
void check(const std::string& e, const char* what) {
  if (!e.empty()) die(std::string(what) + ": " + e);
}

__global__ void fill_random(__nv_bfloat16* x, long long n, unsigned seed, float scale) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n; i += static_cast<long long>(gridDim.x) * blockDim.x) {
    unsigned h = static_cast<unsigned>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    x[i] = __float2bfloat16((static_cast<float>(h & 0xffffff) / 16777216.f - 0.5f) * scale);
  }
}

__global__ void fill_positive(float* x, long long n, unsigned seed) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n; i += static_cast<long long>(gridDim.x) * blockDim.x) {
    unsigned h = static_cast<unsigned>(i) * 2246822519u ^ seed;
    h ^= h >> 13;
    x[i] = static_cast<float>(h & 0xffff) / 65536.f;
  }
}

__global__ void fixed_pages(int* page_start, int pages, int size) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i <= pages; i += gridDim.x * blockDim.x) page_start[i] = i * size;
}

struct Shape {
  const char* name;
  int heads, kv_heads, dim;
};

template <class T>
T* alloc(std::size_t count) {
  void* p = nullptr;
  check(cudaMalloc(&p, std::max<std::size_t>(count, 1) * sizeof(T)), "cudaMalloc");
  return static_cast<T*>(p);
}

// Mean seconds per step: step(copy, stream) for each K/V copy is captured in its own CUDA graph,
// and the graphs are replayed in turn, so consecutive replays read different K/V.
double time_graph(const std::function<void(int, cudaStream_t)>& step, int copies, cudaStream_t s, int iters) {
  for (int c = 0; c < copies; ++c) step(c, s);  // warm-up outside the graphs (allocations, attributes)
  check(cudaStreamSynchronize(s), "warm-up");
  std::vector<cudaGraph_t> graphs(copies);
  std::vector<cudaGraphExec_t> execs(copies);
  for (int c = 0; c < copies; ++c) {
    check(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), "begin capture");
    step(c, s);
    check(cudaStreamEndCapture(s, &graphs[c]), "end capture (a host synchronization inside the step?)");
    check(cudaGraphInstantiate(&execs[c], graphs[c], 0), "instantiate");
  }
  for (int i = 0; i < 10; ++i) check(cudaGraphLaunch(execs[i % copies], s), "launch");
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "event");
  check(cudaEventCreate(&b), "event");
  check(cudaEventRecord(a, s), "record");
  for (int i = 0; i < iters; ++i) check(cudaGraphLaunch(execs[i % copies], s), "launch");
  check(cudaEventRecord(b, s), "record");
  check(cudaEventSynchronize(b), "sync");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, a, b), "elapsed");
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  for (int c = 0; c < copies; ++c) {
    cudaGraphExecDestroy(execs[c]);
    cudaGraphDestroy(graphs[c]);
  }
  return ms / 1e3 / iters;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<Shape> shapes = {{"0.6b", 16, 8, 128}, {"4b", 32, 8, 128}};
  std::vector<long long> lengths = {4096, 32768, 131072};
  int iters = 200;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) die(a + " needs a value");
      return argv[++i];
    };
    if (a == "--shape") {
      const std::string v = value();
      std::vector<Shape> keep;
      for (const Shape& s : shapes)
        if (v == s.name) keep.push_back(s);
      if (keep.empty()) die("unknown --shape " + v + " (0.6b, 4b)");
      shapes = keep;
    } else if (a == "--tokens") {
      lengths.clear();
      std::stringstream ss(value());
      for (std::string x; std::getline(ss, x, ',');) lengths.push_back(std::atoll(x.c_str()));
    } else if (a == "--iters") {
      iters = std::atoi(value().c_str());
    } else if (a == "--help" || a == "-h") {
      std::printf("bench_cuda_decode [--shape 0.6b|4b] [--tokens 4096,32768,131072] [--iters 200]\n");
      return 0;
    } else {
      die("unknown argument " + a);
    }
  }
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) die("no CUDA device");
  cudaDeviceProp prop;
  check(cudaGetDeviceProperties(&prop, 0), "properties");
  int clock_khz = 0, bus_bits = 0;
  cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, 0);
  cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, 0);
  const double peak = 2.0 * clock_khz * 1e3 * bus_bits / 8.0;  // bytes/s, double data rate
  std::printf("device: %s, peak memory bandwidth %.0f GB/s (from clock and bus width), L2 %d MB\n", prop.name, peak / 1e9,
              prop.l2CacheSize >> 20);
  std::printf("Replays rotate over enough K/V copies to exceed 3× the L2, so K/V come from DRAM; summaries and\n"
              "accumulators are not rotated (at 4K they fit in L2).\n\n");
  std::printf("| shape | tokens | variant | µs / step | vs dense split-K | bytes read (MB) | GB/s | of peak |\n");
  std::printf("|---|---:|---|---:|---:|---:|---:|---:|\n");

  cudaStream_t s;
  check(cudaStreamCreate(&s), "stream");
  for (const Shape& sh : shapes) {
    for (const long long T : lengths) {
      const int H = sh.heads, KV = sh.kv_heads, D = sh.dim;
      const long long kv_elems = static_cast<long long>(KV) * T * D;
      const double kv_bytes = 2.0 * kv_elems * 2;
      const int copies = static_cast<int>(std::max(1.0, std::ceil(3.0 * prop.l2CacheSize / kv_bytes)));
      std::vector<__nv_bfloat16*> ks(copies), vs(copies);
      for (int c = 0; c < copies; ++c) {
        ks[c] = alloc<__nv_bfloat16>(kv_elems);
        vs[c] = alloc<__nv_bfloat16>(kv_elems);
        fill_random<<<1024, 256, 0, s>>>(ks[c], kv_elems, 1u + 2 * c, 2.f);
        fill_random<<<1024, 256, 0, s>>>(vs[c], kv_elems, 2u + 2 * c, 2.f);
      }
      __nv_bfloat16 *k = ks[0], *v = vs[0];
      auto* q = alloc<__nv_bfloat16>(H * D);
      auto* out = alloc<__nv_bfloat16>(H * D);
      fill_random<<<16, 256, 0, s>>>(q, H * D, 3u, 4.f);
      auto* importance = alloc<float>(KV * T);
      auto* h2o = alloc<float>(H * T);
      fill_positive<<<1024, 256, 0, s>>>(importance, KV * T, 4u);
      fill_positive<<<1024, 256, 0, s>>>(h2o, H * T, 5u);
      KvView kv{ElemType::kBF16, k, v, KV, T, D, T * D, D};
      const float scale = 1.f / std::sqrt(static_cast<float>(D));

      DecodeAttentionArgs dense;
      dense.type = ElemType::kBF16;
      dense.q = q;
      dense.k = k;
      dense.v = v;
      dense.out = out;
      dense.heads = H;
      dense.kv_heads = KV;
      dense.tokens = T;
      dense.head_dim = D;
      dense.head_stride = T * D;
      dense.token_stride = D;
      dense.scale = scale;
      dense.workspace = alloc<float>(decode_attention_workspace_floats(H, KV, D, T, 0));

      DecodeCommon common;
      common.kv = kv;
      common.q = q;
      common.out = out;
      common.heads = H;
      common.scale = scale;
      common.acc = Accumulators{importance, h2o, T, 1.0f};
      const double acc_bytes = (KV * 2.0 + H * 2.0) * T * 4;  // read + write of both accumulators

      // Clustered: pages of 16 after the raw tail of 128, bf16 summaries, top_k 3.
      const int page = 16, tail = 128;
      const int P = static_cast<int>((T - tail) / page);
      auto* page_start = alloc<int>(P + 1);
      fixed_pages<<<64, 256, 0, s>>>(page_start, P, page);
      auto* sum_k = alloc<__nv_bfloat16>(static_cast<long long>(KV) * P * D);
      auto* sum_v = alloc<__nv_bfloat16>(static_cast<long long>(KV) * P * D);
      auto* sum_bias = alloc<float>(KV * P);
      auto* spread = alloc<float>(KV * T);
      CompressArgs comp;
      comp.kv = kv;
      comp.importance = importance;
      comp.importance_ld = T;
      comp.page_start = page_start;
      comp.count = P;
      comp.max_page_tokens = page;
      comp.compressor = luka::Compressor::kAttentionWeighted;
      comp.summary_type = ElemType::kBF16;
      comp.sum_k = sum_k;
      comp.sum_v = sum_v;
      comp.sum_bias = sum_bias;
      comp.capacity = P;
      comp.spread = spread;
      comp.spread_ld = T;
      check(compress_pages(comp, s), "compress");
      ClusteredDecodeArgs cl;
      cl.c = common;
      cl.s = Summaries{ElemType::kBF16, sum_k, sum_v, sum_bias, P, P, page_start, static_cast<long long>(P) * page, spread, T};
      const std::size_t cl_ws = clustered_workspace_bytes(cl);
      void* cl_workspace = alloc<char>(cl_ws);

      // Lined: window 128 plus 1/8 of the context as heavy hitters.
      LinedDecodeArgs li;
      li.c = common;
      li.window = 128;
      li.heavy = std::min<long long>(T - 128, (T + 7) / 8);
      const std::size_t li_ws = lined_workspace_bytes(li);
      void* li_workspace = alloc<char>(li_ws);
      const std::size_t dn_ws = luka_dense_workspace_bytes(common);
      void* dn_workspace = alloc<char>(dn_ws);
      check(cudaStreamSynchronize(s), "setup");

      // Each variant with the K/V of copy c.
      const auto on = [&](auto args, int c) {
        if constexpr (std::is_same_v<decltype(args), DecodeAttentionArgs>) {
          args.k = ks[c];
          args.v = vs[c];
        } else if constexpr (std::is_same_v<decltype(args), DecodeCommon>) {
          args.kv.k = ks[c];
          args.kv.v = vs[c];
        } else {
          args.c.kv.k = ks[c];
          args.c.kv.v = vs[c];
        }
        return args;
      };
      const double t_dense = time_graph(
          [&](int c, cudaStream_t st) { check(dense_decode_attention(on(dense, c), st), "dense"); }, copies, s, iters);
      const double t_luka_dense = time_graph(
          [&](int c, cudaStream_t st) { check(luka_dense_decode(on(common, c), dn_workspace, dn_ws, st), "luka dense"); },
          copies, s, iters);
      const double t_lined = time_graph(
          [&](int c, cudaStream_t st) { check(lined_decode(on(li, c), li_workspace, li_ws, st), "lined"); }, copies, s, iters);
      const double t_clustered = time_graph(
          [&](int c, cudaStream_t st) { check(clustered_decode(on(cl, c), cl_workspace, cl_ws, st), "clustered"); }, copies, s,
          iters);

      const long long R = T - static_cast<long long>(P) * page;
      const double cover_bytes = 2.0 * KV * (P + R) * D * 2 + 3.0 * H * page * D * 2 * 2;  // summaries, tail, 3 refined pages
      const double lined_bytes = 2.0 * H * (li.heavy + li.window) * D * 2 + acc_bytes + H * T * 4.0 * 2;
      struct Row {
        const char* variant;
        double seconds, bytes;
      } rows[] = {{"dense split-K", t_dense, kv_bytes},
                  {"dense + accumulators", t_luka_dense, kv_bytes + acc_bytes + H * T * 4.0 * 2},
                  {"lined (W 128, ρ 1/8)", t_lined, lined_bytes},
                  {"clustered (pages 16, top_k 3)", t_clustered, cover_bytes + acc_bytes + H * (P + R) * 4.0 * 2}};
      for (const Row& r : rows)
        std::printf("| %s | %lld | %s | %.1f | %.2f× | %.1f | %.0f | %.0f%% |\n", sh.name, T, r.variant, r.seconds * 1e6,
                    t_dense / r.seconds, r.bytes / 1e6, r.bytes / r.seconds / 1e9, 100.0 * r.bytes / r.seconds / peak);
      std::fflush(stdout);
      for (int c = 0; c < copies; ++c) {
        cudaFree(ks[c]);
        cudaFree(vs[c]);
      }
      for (void* p : {static_cast<void*>(q), static_cast<void*>(out),
                      static_cast<void*>(importance), static_cast<void*>(h2o), static_cast<void*>(dense.workspace),
                      static_cast<void*>(page_start), static_cast<void*>(sum_k), static_cast<void*>(sum_v),
                      static_cast<void*>(sum_bias), static_cast<void*>(spread), cl_workspace, li_workspace, dn_workspace})
        cudaFree(p);
    }
  }
  return 0;
}

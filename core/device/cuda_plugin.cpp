// libluka_cuda.so: the CUDA backend `luka` loads at run time (core/device/device.h). It owns
// everything that needs LibTorch's CUDA libraries or the CUDA runtime: the GPU list, the GPU LuKA
// layers (core/luka/cuda_attention) and the device token sampler.
#include <cuda_runtime.h>

#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>

#include <cstdio>
#include <random>

#include <ATen/ATen.h>

#include "core/device/cuda_plugin_api.h"
#include "core/device/cuda_sampler.h"
#ifdef LUKA_GRAPHED_STEP
#include "core/run/graphed_step.h"
#endif
#include "core/generate/sampling_math.h"
#include "core/luka/cuda_attention.h"
#include "core/model/model.h"
#include "core/util/error.h"

namespace luka {
namespace {

// Pinned host memory for one sampling result (RAII).
class PinnedResult {
 public:
  PinnedResult() {
    if (cudaHostAlloc(reinterpret_cast<void**>(&p_), sizeof(cuda_sampling::Result), cudaHostAllocDefault) != cudaSuccess)
      fail("sampler", "cannot allocate pinned host memory");
  }
  ~PinnedResult() { cudaFreeHost(p_); }
  PinnedResult(const PinnedResult&) = delete;
  PinnedResult& operator=(const PinnedResult&) = delete;
  cuda_sampling::Result* get() const { return p_; }

 private:
  cuda_sampling::Result* p_ = nullptr;
};

// Samples on the GPU the logits are on. The uniform draw comes from the same generator, seeded
// the same way, as the CPU sampler's, and only when the CPU one would draw.
class CudaTokenSampler final : public TokenSampler {
 public:
  explicit CudaTokenSampler(const SamplingParams& params) : params_(params), rng_(params.seed) {
    Sampler check(params);  // the same parameter errors as on the CPU
    (void)check;
  }

  std::int32_t sample(const at::Tensor& logits, double* probability) override {
    if (!logits.is_cuda()) fail("sampler", "the CUDA sampler was given logits on the CPU");
    const at::Tensor l = logits.to(at::kFloat).contiguous();
    const std::int64_t n = l.numel();
    const std::size_t need = cuda_sampling::workspace_bytes(n);
    if (!workspace_.defined() || static_cast<std::size_t>(workspace_.numel()) < need)
      workspace_ = at::empty({static_cast<std::int64_t>(need)}, l.options().dtype(at::kByte));
    cuda_sampling::Request r;
    r.logits = l.const_data_ptr<float>();
    r.n = n;
    r.greedy = params_.temperature == 0.0f || params_.top_k == 1;
    r.top_k = params_.top_k;
    r.temperature = params_.temperature;
    r.top_p = params_.top_p;
    r.u01 = r.greedy ? 0.0 : sampling::unit_from_bits(rng_());
    r.probability = probability != nullptr;
    const cudaStream_t stream = at::cuda::getCurrentCUDAStream().stream();
    if (const std::string e = cuda_sampling::sample(r, workspace_.mutable_data_ptr(), need, pinned_.get(), stream); !e.empty())
      fail("sampler", e);
    if (const cudaError_t e = cudaStreamSynchronize(stream); e != cudaSuccess)
      fail("sampler", std::string("cudaStreamSynchronize: ") + cudaGetErrorString(e));
    const cuda_sampling::Result res = *pinned_.get();
    if (res.bad_index >= 0)
      fail("sampler", "non-finite logit " + std::to_string(l[res.bad_index].item<float>()) + " at id " + std::to_string(res.bad_index));
    if (probability) *probability = res.probability;
    return res.id;
  }

 private:
  SamplingParams params_;
  std::mt19937_64 rng_;
  at::Tensor workspace_;
  PinnedResult pinned_;
};

std::string cuda_error(cudaError_t e) { return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e); }

GpuInfo query(int index) {
  GpuInfo g;
  g.index = index;
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, index) == cudaSuccess) {
    g.name = p.name;
    g.compute_major = p.major;
    g.compute_minor = p.minor;
  }
  int current = 0;
  cudaGetDevice(&current);
  std::size_t free = 0, total = 0;
  if (cudaSetDevice(index) == cudaSuccess && cudaMemGetInfo(&free, &total) == cudaSuccess) {
    g.free_bytes = free;
    g.total_bytes = total;
  }
  cudaSetDevice(current);
  return g;
}

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(GpuInfo gpu) : gpu_(std::move(gpu)) {}
  std::string name() const override { return "cuda:" + std::to_string(gpu_.index); }
  std::string description() const override { return describe(gpu_); }
  bool is_cuda() const override { return true; }
  void place(LoadOptions& options) const override {
    c10::cuda::set_device(static_cast<c10::DeviceIndex>(gpu_.index));
    options.cuda = true;
  }
  std::string supports(const LukaConfig& config) const override {
    for (std::size_t i = 0; i < config.layers.size(); ++i) {
      cuda::LayerParams p;
      if (const std::string why = to_cuda_params(config.layers[i], &p); !why.empty())
        return "layer " + std::to_string(i) + ": " + why;
    }
    return {};
  }
  std::vector<std::shared_ptr<LukaLayer>> install_luka(Decoder& decoder, const LukaConfig& config) const override {
    if (const std::string why = supports(config); !why.empty()) fail("luka config on " + name(), why);
    return install_luka_cuda(decoder, config);
  }
  std::unique_ptr<TokenSampler> sampler(const SamplingParams& params) const override {
    return std::make_unique<CudaTokenSampler>(params);
  }
  GpuInfo gpu() const override { return query(gpu_.index); }
  DecodeEngineFactory graph_engine(std::string* why) const override {
#ifdef LUKA_GRAPHED_STEP
    (void)why;
    return graphed_step_engine();
#else
    if (why) *why = "this plugin was built without the static step (core/run needs ICU)";
    return {};
#endif
  }

 private:
  GpuInfo gpu_;
};

class Plugin final : public CudaPlugin {
 public:
  std::vector<GpuInfo> gpus(std::string* why_none) const override {
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
      if (why_none) *why_none = "no GPU visible (" + (e != cudaSuccess ? cuda_error(e) : std::string("the driver reports none")) + ")";
      return {};
    }
    std::vector<GpuInfo> out;
    for (int i = 0; i < count; ++i) out.push_back(query(i));
    return out;
  }

  std::shared_ptr<const Backend> open(int index) const override {
    std::string why;
    const std::vector<GpuInfo> all = gpus(&why);
    if (all.empty()) fail("device cuda:" + std::to_string(index), why);
    if (index < 0 || index >= static_cast<int>(all.size()))
      fail("device cuda:" + std::to_string(index), "no such GPU (" + std::to_string(all.size()) + " visible: cuda:0" +
                                                       (all.size() > 1 ? "..cuda:" + std::to_string(all.size() - 1) : "") + ")");
    if (!at::hasCUDA()) fail("device cuda:" + std::to_string(index), "LibTorch's CUDA backend did not load with the plugin");
    c10::cuda::set_device(static_cast<c10::DeviceIndex>(index));
    return std::make_shared<const CudaBackend>(all[static_cast<std::size_t>(index)]);
  }
};

}  // namespace
}  // namespace luka

extern "C" __attribute__((visibility("default"))) luka::CudaPlugin* luka_cuda_plugin(const char* host_abi, char* error,
                                                                                      std::size_t error_size) {
  static luka::Plugin plugin;
  const std::string mine = luka::plugin_abi();
  if (host_abi == nullptr || mine != host_abi) {
    if (error && error_size)
      std::snprintf(error, error_size, "of another version (%s; this luka is %s): build them together", mine.c_str(),
                    host_abi ? host_abi : "?");
    return nullptr;
  }
  return &plugin;
}

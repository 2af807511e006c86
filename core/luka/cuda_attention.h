// LuKA attention on the GPU: a LayerAttention for a Decoder whose model and KV cache live on the
// GPU (LoadOptions::cuda). Prefill is exact causal attention (the prefill kernel; ATen ops when
// h2o decays) with the accumulators fed from its probabilities, as on the CPU, from position 0
// only; decode steps go to kernels/cuda (LayerState): dense, lined or clustered with no host
// synchronization inside the step. Kernels run on ATen's current stream. Built with LUKA_CUDA.
//
// The CPU LukaAttention stays the reference and the only path with LukaStep records, the dense
// shadow, oracle summaries and lined sparse_prefill.
#pragma once

#include <memory>
#include <vector>

#include "core/luka/config.h"
#include "core/model/attention.h"
#include "kernels/cuda/luka_layer.h"

namespace luka {

class Decoder;

class CudaLukaAttention final : public LayerAttention {
 public:
  // Throws luka::Error when `config` asks for something only the CPU path offers.
  CudaLukaAttention(int layer, const LayerConfig& config, std::int64_t heads, std::int64_t kv_heads, std::int64_t head_dim);

  at::Tensor forward(const AttentionInputs& in) override;
  void reset() override;
  const char* name() const override { return to_string(config_.mode); }

  // Takes effect at the next step (live switching).
  void set_config(const LayerConfig& config);
  const LayerConfig& config() const { return config_; }
  const cuda::LayerState& state() const { return *state_; }

 private:
  at::Tensor prefill(const AttentionInputs& in);

  int layer_;
  LayerConfig config_;
  cuda::LayerParams params_;
  std::int64_t heads_, kv_heads_, head_dim_;
  std::unique_ptr<cuda::LayerState> state_;
};

// One CudaLukaAttention per layer of a decoder whose model is on the GPU.
std::vector<std::shared_ptr<CudaLukaAttention>> install_luka_cuda(Decoder& decoder, const LukaConfig& config);

}  // namespace luka

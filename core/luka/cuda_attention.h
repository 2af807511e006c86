// LuKA attention on the GPU: a LukaLayer for a Decoder whose model and KV cache live on the GPU
// (LoadOptions::cuda). Prefill is exact causal attention (the prefill kernel; ATen ops when h2o
// decays or a prefill observer records the maps) with the accumulators fed from its
// probabilities, as on the CPU, from position 0 only; decode steps go to kernels/cuda
// (LayerState): dense, lined or clustered with no host synchronization inside the step. Kernels
// run on ATen's current stream. Built into the CUDA plugin (core/device).
//
// The CPU LukaAttention stays the reference. Here last_step() carries the step's mode and sizes;
// with set_step_records(true) also its effective rows, summary mass, refined pages and heavy
// hitters (captures and the Studio): copied to pinned host memory asynchronously after the step's
// kernels and turned into the LukaStep when last_step() is first read, so recording adds no
// synchronisation inside a step (the dense shadow, which needs them at once, still waits).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/luka/luka_layer.h"
#include "core/luka/step_records.h"
#include "kernels/cuda/luka/state.h"

namespace luka {

class Decoder;

// What the GPU path does not offer for this layer, by name ("" when it runs all of it): the CPU-only
// modes and experiment switches (Kascade, the DAR probe, SemantiCache's segmenter and compressor,
// the lined sparse prefill, the authors' variants other than their page schedule).
std::string gpu_unsupported(const LayerConfig& c);
// The kernels' parameters for a layer: the same structs (kernels/common/luka_params.h), nothing
// translated. Fills *out; returns gpu_unsupported(c).
std::string to_cuda_params(const LayerConfig& c, cuda::LayerParams* out);

class CudaLukaAttention final : public LukaLayer {
 public:
  // Throws luka::Error when `config` asks for something only the CPU path offers.
  CudaLukaAttention(int layer, const LayerConfig& config, std::int64_t heads, std::int64_t kv_heads, std::int64_t head_dim);

  at::Tensor forward(const AttentionInputs& in) override;
  void reset() override;
  void reserve(std::int64_t tokens) override;
  const char* name() const override { return to_string(config_.mode); }

  int layer() const override { return layer_; }
  void set_config(const LayerConfig& config) override;
  const LayerConfig& config() const override { return config_; }
  const std::vector<Page>& pages() const override { return adopted_ ? adopted_pages_ : pages_; }
  const LukaStep& last_step() const override {
    if (pending_.armed()) last_ = pending_.take();
    return last_;
  }

  // With records on, each decode step also fills last_step()'s effective rows, summary mass,
  // refined pages and heavy hitters (device buffers copied to the host after the step).
  void set_step_records(bool on) override { records_ = on; }
  bool step_records() const override { return records_; }
  void adopt_step(LukaStep step, std::vector<Page> pages) override;
  const cuda::LayerState& state() const { return *state_; }
  // The state's device buffers as fp32 views (its summaries are kept in fp32).
  LukaState state_view() const override;

 private:
  at::Tensor prefill(const AttentionInputs& in);
  at::Tensor decode(const AttentionInputs& in);
  void sync_pages();

  int layer_;
  LayerConfig config_;
  cuda::LayerParams params_;
  std::int64_t heads_, kv_heads_, head_dim_;
  std::unique_ptr<cuda::LayerState> state_;
  std::vector<Page> pages_;  // the state's pages with the step that made them
  mutable LukaStep last_;
  mutable PendingStep pending_;  // the last step's records on their way to the host
  bool records_ = false;
  bool adopted_ = false;  // a decode engine's step adopted: pages() returns its pages
  std::vector<Page> adopted_pages_;
  c10::DeviceIndex device_ = 0;  // of the last forward's tensors
};

// One CudaLukaAttention per layer of a decoder whose model is on the GPU.
std::vector<std::shared_ptr<LukaLayer>> install_luka_cuda(Decoder& decoder, const LukaConfig& config);

}  // namespace luka
